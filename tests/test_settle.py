"""One settle under every door (issue 22): ``score FILE``, ``import`` then ``score KEY`` and the
Dask engine (its ``score`` graph and its ``import`` scorer, run task by task in this process)
settle a run's scored blocks with ``settle.settle``, so they give the same run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from scoring import ingest
from scoring.cli import main
from scoring.dask_engine import planning, tasks, workspace_scorer
from scoring.model import Rejection
from scoring.request import ScoringRequest
from scoring.settle import BlockDigest, settle
from scoring.workspace import Workspace

from .conftest import SAMPLES

BLOCK = 4096
DUP = "dup"
PROVENANCE = ("source",)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _record(tid: str, task: str = "t") -> dict:
    text = json.dumps({"a": tid, "pad": "x" * 200})
    return {"record": "trajectory", "id": tid, "task_id": task, "verdict": {"label": "benign"},
            "tool_calls": [{"tool": "x", "arguments": text, "raw_size_bytes": len(text), "raw_sha256": _sha(text)}]}


def _run_with_three_copies(tmp_path: Path) -> tuple[Path, list[int]]:
    """A canonical run of 60 records whose id ``dup`` is held by three records about 20 lines
    apart: with 4 KiB blocks each copy lies in another block. Returns the copies' lines."""
    records = [_record(f"t{i:03d}") for i in range(60)]
    at = [5, 25, 50]
    for n, i in enumerate(at):
        records[i] = _record(DUP, task=f"copy{n}")
    header = {"record": "run", "format": "litmus-review-run", "format_version": 1, "run_id": "r", "model": "m",
              "capture_limit_bytes": 100_000}
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (header, *records)) + "\n")
    return path, [i + 2 for i in at]  # the header is line 1


def _cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


class _InlineClient:
    """What ``workspace_scorer.workspace_scorer`` asks of a Dask client, run in this process."""

    class _Done:
        def __init__(self, value) -> None:
            self.value = value

        def result(self):
            return self.value

        def release(self) -> None:
            pass

    def scheduler_info(self) -> dict:
        return {"workers": {"inline": {}}}

    def submit(self, fn, *args, key=None):
        return self._Done(fn(*args))

    def cancel(self, _futures) -> None:
        pass


def _dask_score(path: Path) -> dict:
    """``score --engine dask --block-bytes 4096``'s object, the graph run task by task."""
    plan = planning.plan_run(str(path))
    blocks = [tasks.score_block(plan, s, e) for s, e in planning.block_bounds(plan, BLOCK)]
    assert len(blocks) >= 3
    res = tasks.finish_run(plan, tasks.file_sha256(plan, *blocks), None, *map(tasks.digest, blocks))
    assert res.error is None and res.summary is not None
    return res.summary


def _rejections(d: dict) -> list[tuple]:
    return sorted((r["line"], r["record_id"], r["message"]) for r in d["rejected_records"])


def test_an_id_held_by_three_records_across_blocks_is_refused_three_times_by_every_door(tmp_path, monkeypatch):
    path, lines = _run_with_three_copies(tmp_path)
    monkeypatch.setattr(ingest, "BLOCK_BYTES", BLOCK)  # the local doors' blocks: one copy in each
    with path.open("rb") as fh:
        _header, _first, header_end = ingest.read_header_line(fh, str(path))
        ranges = list(ingest.block_ranges(fh, header_end, path.stat().st_size))
    owner = [next(i for i, (off, n) in enumerate(ranges) if off <= _offset(path, line) < off + n) for line in lines]
    assert len(set(owner)) == 3, "each copy in a block of its own"

    expected = [(lines[0], DUP, f"duplicate trajectory id {DUP!r} (also at line {lines[1]}): neither copy is scored"),
                (lines[1], DUP, f"duplicate trajectory id {DUP!r} (also at line {lines[0]}): neither copy is scored"),
                (lines[2], DUP, f"duplicate trajectory id {DUP!r} (also at line {lines[0]}): neither copy is scored")]

    local = json.loads(_cli("score", str(path), "--json").stdout)
    db = tmp_path / "w.db"
    imported = _cli("import", str(path), "--db", str(db))
    key = Workspace(db).runs()[0]["run_key"]
    stored = json.loads(_cli("score", key, "--json", "--db", str(db)).stdout)
    dask = _dask_score(path)
    scorer = workspace_scorer.workspace_scorer(planning.plan_run(str(path)), _InlineClient(), block_bytes=BLOCK)
    dask_ws = Workspace(tmp_path / "dask.db")
    dask_key = dask_ws.import_run(path, fmt="canonical", scorer=scorer).run_key
    from scoring.workspace import evaluation

    dask_import = evaluation(dask_ws, dask_key).as_dict()

    assert "3 rejected" in imported.stdout
    for door in (local, stored, dask, dask_import):
        assert _rejections(door) == expected
        assert door["trajectories"] == 57 and door["rejected"] == 3 and door["records_seen"] == 60
        assert door == local  # key for key
    # No row of the id is stored anywhere: neither copy is scored.
    assert not Workspace(db).trajectory_rows(key, "trajectory_id = ?", [DUP])
    assert not dask_ws.trajectory_rows(dask_key, "trajectory_id = ?", [DUP])


def _offset(path: Path, line: int) -> int:
    data = path.read_bytes()
    starts = [0, *[i + 1 for i, b in enumerate(data) if b == 10]]
    return starts[line - 1]


def test_settle_refuses_repeated_ids_within_a_block_and_across_blocks_alike():
    from scoring.model import RunHeader
    from scoring.rows import SCORE_FIELDS

    def block(ids: list[str], lines: int) -> BlockDigest:
        fields = [[None] * len(ids) for _ in SCORE_FIELDS]
        fields[0], fields[1], fields[5], fields[6] = list(ids), ["t"] * len(ids), ["safe"] * len(ids), [1] * len(ids)
        fields[7] = [""] * len(ids)
        fields[8] = ["harness_verdict"] * len(ids)
        return BlockDigest(lines=lines, seen=len(ids), rejected=[], ids=list(ids),
                           rel_lines=list(range(1, len(ids) + 1)), calls=[1] * len(ids), fields=fields)

    header = RunHeader(run_id="r", model="m", capture_limit_bytes=10, source="f")
    prior = [Rejection(source="f", line=3, record_id=None, message="bad")]
    one = settle(header, [block(["a", "b", "a", "c", "a"], 5)], file_sha256="0" * 64, first_line=1,
                 prior_rejections=prior)
    two = settle(header, [block(["a", "b"], 2), block(["a", "c", "a"], 3)], file_sha256="0" * 64, first_line=1,
                 prior_rejections=prior)
    for s in (one, two):
        assert [(r.line, r.record_id) for r in s.rejected] == [(2, "a"), (3, None), (4, "a"), (6, "a")]
        assert s.fields[0] == ["b", "c"] and s.trajectories == 2 and s.tool_calls == 2 and s.records_seen == 6
        assert s.run_key == "0" * 64
    assert two.drops == (frozenset({0}), frozenset({0, 2}))


@pytest.mark.parametrize(("side", "vmap", "spec"), [(None, None, None), ("s" * 64, None, None),
                                                    ("s" * 64, "M:unsafe=C", "mod:fn"), (None, "M:unsafe=C", None)])
def test_a_run_key_is_the_files_hash_unless_something_else_decided_its_scores(side, vmap, spec):
    key = ScoringRequest.of(verdict_map=vmap, reclassifier=spec).run_key("f" * 64, side_log_sha256=side)
    parts = ["f" * 64] + [p for p in (side, vmap) if p] + ([f"classifier={spec}"] if spec else [])
    assert key == ("f" * 64 if len(parts) == 1 else hashlib.sha256(":".join(parts).encode()).hexdigest())


def test_the_bundled_sample_with_its_side_log_settles_alike_through_the_three_cli_doors(tmp_path):
    observed = SAMPLES / "observed-m1.jsonl"
    local = json.loads(_cli("score", str(observed), "--json").stdout)
    db = tmp_path / "w.db"
    _cli("import", str(observed), "--db", str(db))
    stored = json.loads(_cli("score", Workspace(db).runs()[0]["run_key"], "--json", "--db", str(db)).stdout)
    plan = planning.plan_run(str(observed), None, str(SAMPLES / "observed-m1.payloads.jsonl"))
    blocks = [tasks.score_block(plan, s, e) for s, e in planning.block_bounds(plan, 256 * 1024)]
    dask = tasks.finish_run(plan, tasks.file_sha256(plan, *blocks), None, *map(tasks.digest, blocks)).summary
    assert local["side_log"] is not None and local["recapture"]["applied"] > 0
    assert stored == local and dask == local
