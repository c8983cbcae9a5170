"""Issue 33 item 5 (second adversarial review): the check of a header's taxonomy_rules, the blocks
and the run's hash read one version of the file, at every door that reads the file more than
once (``score FILE``; the Dask engine's plan, blocks and hash; ``import --engine dask``). A file
rewritten in between — same size, a harness rewriting its log in place, a sync tool replacing
it — is refused ("the file changed while it was being scored"), never scored under the check
and hash of the other bytes. (The workspace's local import reads its own copy, hashed as it is
copied.)"""

from __future__ import annotations

import io
import json

import pytest
from click.testing import CliRunner

from scoring import errors, ingest, pipeline
from scoring.cli import main
from scoring.dask_engine import planning, tasks, workspace_scorer
from scoring.errors import InputError, RunFailed
from scoring.importers import canonical
from scoring.workspace import Workspace

from .test_engine import InlineClient
from .test_rules_witnesses import EXFIL, _run


def _flip(path, old: bytes, new: bytes) -> bytes:
    """The file with its first ``old`` replaced by ``new`` (same size), written; its earlier bytes."""
    before = path.read_bytes()
    assert len(old) == len(new) and old in before
    path.write_bytes(before.replace(old, new, 1))
    return before


def _accepted(tmp_path):
    path = _run(tmp_path, rule=EXFIL, harmful=10)
    assert "accepted" in planning.plan_run(str(path)).rules_check
    return path


# --- score FILE -------------------------------------------------------------------------------------


@pytest.mark.parametrize("declared", [True, False])
def test_score_file_refuses_a_file_rewritten_between_its_scan_and_its_blocks(tmp_path, monkeypatch, declared):
    path = _accepted(tmp_path)
    if not declared:  # a header declaring nothing: any run's blocks must read the bytes hashed
        lines = path.read_text().splitlines()
        lines[0] = json.dumps({**json.loads(lines[0]), "classifier_of_record": "harness_verdict"})
        path.write_text("\n".join(lines) + "\n")
    real, calls = pipeline.score_range, []

    def rewritten(*args, **kw):
        if not calls:
            _flip(path, b'"label": "C01"', b'"label": "C0X"')
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(pipeline, "score_range", rewritten)
    got = CliRunner().invoke(main, ["score", str(path), "--json", "--no-auto-payloads"])
    assert got.exit_code == 2, got.output
    assert "the file changed while it was being scored" in got.output and "not those it checked and hashed" in \
        got.output


def test_the_scan_refuses_a_file_not_of_the_size_it_was_opened_at_or_a_header_not_the_one_read(tmp_path):
    path = _accepted(tmp_path)
    data = path.read_bytes()
    fh = io.BytesIO(data)
    line, first, end = ingest.read_header_line(fh, "r")
    header = canonical.parse_header(json.loads(line), "r")
    scan = ingest.scan_canonical(fh, "r", len(data), line, first, end, header, whole=True)
    assert scan.end == len(data) and scan.sha256 == pipeline.hashlib.sha256(data).hexdigest()
    assert "accepted" in scan.header.classifier_of_record_check
    with pytest.raises(InputError, match=r"the file changed while it was being scored .*more now"):
        ingest.scan_canonical(io.BytesIO(data), "r", len(data) - 3, line, first, end, header, whole=True)
    with pytest.raises(InputError, match=r"the file changed while it was being scored .*fewer now"):
        ingest.scan_canonical(io.BytesIO(data[:-3]), "r", len(data), line, first, end, header, whole=True)
    other = data.replace(b'"run_id": "r"', b'"run_id": "s"', 1)
    with pytest.raises(InputError, match="its header is not the one read first"):
        ingest.scan_canonical(io.BytesIO(other), "r", len(data), line, first, end, header, whole=True)


def test_the_scans_check_reads_the_lines_a_file_iteration_reads():
    chunks = [b'{"a"', b': 1}\n\n{"b": 2}\r', b"\n", b"", b'{"c"', b": 3}"]
    assert list(ingest._lines_of(chunks, 1)) == list(enumerate(
        (raw.rstrip(b"\n") for raw in io.BytesIO(b"".join(chunks))), start=2))


# --- the Dask engine ----------------------------------------------------------------------------------


def _graph(plan, block_bytes: int = 2048):
    blocks = [tasks.score_block(plan, s, e) for s, e in planning.block_bounds(plan, block_bytes)]
    return blocks, tasks.file_sha256(plan, *map(tasks.digest, blocks))


def test_the_engine_refuses_rules_checked_on_other_bytes_than_its_blocks_read(tmp_path):
    path = _accepted(tmp_path)
    plan = planning.plan_run(str(path))
    # after the plan's check, before the blocks: they read the same, new bytes
    _flip(path, b'"label": "C01"', b'"label": "C0X"')
    with pytest.raises(RunFailed, match=r"the file changed while it was being scored .*checked on other bytes"):
        _graph(plan)


def test_the_engine_refuses_a_file_rewritten_after_its_blocks_read_it(tmp_path):
    path = _accepted(tmp_path)
    plan = planning.plan_run(str(path))
    blocks = [tasks.score_block(plan, s, e) for s, e in planning.block_bounds(plan, 2048)]
    _flip(path, b"quarter 3", b"quarter 9")
    with pytest.raises(RunFailed, match=r"the file changed while it was being scored \(bytes [\d,]+ to [\d,]+ are not "
                                        "those a block scored"):
        tasks.file_sha256(plan, *map(tasks.digest, blocks))
    with pytest.raises(RunFailed, match="no block read its records"):
        tasks.file_sha256(plan)


def test_the_engine_refuses_a_header_rewritten_after_the_plan_read_it(tmp_path):
    path = _run(tmp_path, rule=EXFIL)
    lines = path.read_text().splitlines()  # a header declaring nothing: the plan reads it alone
    lines[0] = json.dumps({**json.loads(lines[0]), "classifier_of_record": "harness_verdict"})
    path.write_text("\n".join(lines) + "\n")
    plan = planning.plan_run(str(path))
    assert plan.read_end == plan.header_end and not plan.rules_check
    _flip(path, b'"run_id": "r"', b'"run_id": "s"')
    with pytest.raises(RunFailed, match="its header is not the one planned"):
        _graph(plan)


def test_an_import_scored_elsewhere_refuses_a_file_rewritten_after_the_plan(tmp_path):
    path = _accepted(tmp_path)
    plan = planning.plan_run(str(path))
    _flip(path, b'"label": "C01"', b'"label": "C0X"')
    ws = Workspace(tmp_path / "w.db")
    with pytest.raises(errors.EngineError, match="the file changed while it was being scored"):
        ws.import_run(path, scorer=workspace_scorer.workspace_scorer(plan, InlineClient(), block_bytes=2048))
    assert ws.runs() == []
