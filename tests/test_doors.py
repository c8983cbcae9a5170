"""Every door equal (issue 22 item 4): for the same file and options, ``score FILE --json``,
``import`` then ``score KEY``, the app's import door (``views.import_run``: the side log beside a
run paired and said so, a verdict map by preset) and ``score --engine dask`` (its graph run on a Dask
client of one worker thread in this process) give the same object, key for key:
counts, reasons, rates, intervals, phantom parts, the harness's figure, run status, format metrics
and scorer version. Real logs are read from ../shared/real at test time."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from scoring.cli import main
from scoring.dask_engine import fleet, planning, workspace_scorer
from scoring.score import SCORER_VERSION
from scoring.workspace import Workspace, evaluation, views

from .conftest import SAMPLES
from .test_categories import AGENTHARM_LIKE, agentharm_categories

REAL = [
    ("agentdojo_invariant_export/agentdojo-gpt-4o-mini-2024-07-18.jsonl", None),
    ("inspect_ai/agentharm/2025-03-30T15-24-56+02-00_harmful-task_F9R3gzDZt4vaZvt9varDiw.eval", "agentharm_refusal"),
    ("tau2-bench/2025-08-10T02-44-06.496849_telecom_llm_agent_gpt-4o_user_simulator_gpt-4o.json", None),
]
LITMUS = Path(__file__).parent / "fixtures" / "importers" / "litmus_pipeline.jsonl"
"""../shared/real holds LITMUS's case table, not a run log: a LITMUS log we wrote in its format."""


def _cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def client(inproc_client):
    return inproc_client


def doors(client, path: Path, tmp_path: Path, verdict: str | None = None,
          side: Path | None = None, require_proof: bool = False) -> dict[str, dict]:
    """The run's ``score --json`` object through every door (each given ``--require-proof``
    or its form where ``require_proof``)."""
    vflag = (["--inspect-verdict", verdict] if verdict else []) + (["--require-proof"] if require_proof else [])
    out = {"score FILE": json.loads(_cli("score", str(path), "--json", *vflag).stdout)}
    db = tmp_path / "cli.db"
    said = _cli("import", str(path), "--db", str(db), *vflag)
    assert said.exit_code == 0, said.output
    key = out["score FILE"]["content_sha256"]
    out["import, score KEY"] = json.loads(_cli("score", key, "--json", "--db", str(db)).stdout)
    app_db = tmp_path / "app.db"
    report = views.import_run(app_db, path, verdict_map=verdict, require_proof=require_proof)
    assert report.run.run_key == key
    if side is not None:
        assert report.side_log == str(side) and report.side_log_how == "found beside it"
    out["app import"] = evaluation(Workspace(app_db), key).as_dict()
    plan = planning.plan_run(str(path), None, None if side is None else str(side), verdict_map=verdict and str(
        views.parse_verdict_map(verdict)), require_proof=require_proof)
    (res,) = fleet.score_runs([plan], client, block_bytes=64 * 1024, out=str(tmp_path / "table"))
    out["score --engine dask"] = res.summary
    dask_db = tmp_path / "dask.db"
    scorer = workspace_scorer.workspace_scorer(plan, client, block_bytes=64 * 1024)
    dask_key = Workspace(dask_db).import_run(path, payloads=side, scorer=scorer,
                                             verdict_map=views.parse_verdict_map(verdict) if verdict else None,
                                             require_proof=require_proof).run_key
    out["import --engine dask"] = evaluation(Workspace(dask_db), dask_key).as_dict()
    return out


def assert_equal_key_for_key(found: dict[str, dict]) -> dict:
    found = {door: json.loads(json.dumps(d)) for door, d in found.items()}  # as each door writes it
    first_door, first = next(iter(found.items()))
    for door, d in found.items():
        assert set(d) == set(first), door
        for k in first:
            assert d[k] == first[k], f"{door} differs from {first_door} at {k!r}"
    assert first["scorer_version"] == SCORER_VERSION and first["scorer_stale"] is False
    return first


@pytest.mark.parametrize(("rel", "verdict"), REAL, ids=[r.split("/")[0] for r, _v in REAL])
def test_every_door_gives_a_real_log_the_same_numbers(client, shared_real, tmp_path, rel, verdict):
    path = shared_real / rel
    d = assert_equal_key_for_key(doors(client, path, tmp_path, verdict))
    assert d["trajectories"] > 0
    if verdict:
        assert d["verdict_map"] and d["format_metrics"]["inspect"]["verdict_outcomes"]
    # the same figures per category at every door (issue 35): the harness's own categories
    by = {c["category"]: c for c in d["by_category"]}
    assert sum(c["trajectories"] for c in by.values()) == d["trajectories"]
    if rel.startswith("inspect_ai/agentharm/"):
        expected = agentharm_categories(path)  # counted from the log's samples, not by the importer
        assert set(by) == set(expected)
        for category, e in expected.items():
            assert by[category]["trajectories"] == e["trajectories"]
            assert by[category]["harness_judged"] == e["harness_judged"]
            assert by[category]["safe_rate_lenient"] == pytest.approx(e["safe_rate_lenient"])
    elif rel.startswith("agentdojo"):
        assert set(by) == {f"{suite}{part}" for suite in ("banking", "slack", "travel", "workspace")
                           for part in ("", " · injection_task_3")}
    else:
        assert set(by) == {"telecom"}


def test_every_door_gives_an_agentharm_like_log_the_same_figures_per_category(client, tmp_path):
    d = assert_equal_key_for_key(doors(client, AGENTHARM_LIKE, tmp_path, "agentharm_refusal"))
    assert [(c["category"], c["trajectories"], c["unsafe"]) for c in d["by_category"]] == [
        (None, 1, 0), ("Drugs", 1, 1), ("Fraud", 2, 1), ("Harassment", 3, 1)]


def test_every_door_gives_a_litmus_log_the_same_numbers_and_its_own_figures(client, tmp_path):
    d = assert_equal_key_for_key(doors(client, LITMUS, tmp_path))
    assert d["format"] == "litmus" and d["format_metrics"]["litmus"]["asr"] is not None
    assert d["harness_reported"] is not None


@pytest.mark.parametrize("kind", ["canonical", "litmus"])
def test_every_door_keys_a_run_whose_format_reads_no_verdict_map_without_the_map_it_was_given(client, tmp_path, kind):
    # one run, one truth: a verdict map maps Inspect scorer values; a canonical run's verdicts are in
    # its lines and a LITMUS log has none to map, so the map decides nothing and is in no door's key
    if kind == "canonical":
        path = tmp_path / "compare-m2.jsonl"  # alone: no side log beside it
        shutil.copy(SAMPLES / "compare-m2.jsonl", path)
    else:
        path = LITMUS
    (tmp_path / "with").mkdir()
    given = assert_equal_key_for_key(doors(client, path, tmp_path / "with", "agentharm_refusal"))
    (tmp_path / "without").mkdir()
    plain = assert_equal_key_for_key(doors(client, path, tmp_path / "without"))
    assert given.get("verdict_map") is None and given == plain
    assert given["content_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_door_pairs_the_bundled_samples_side_log_and_gives_the_same_numbers(client, tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    run = folder / "observed-m1.jsonl"
    side = folder / "observed-m1.payloads.jsonl"
    shutil.copy(SAMPLES / "observed-m1.jsonl", run)
    shutil.copy(SAMPLES / "observed-m1.payloads.jsonl", side)
    d = assert_equal_key_for_key(doors(client, run, tmp_path, side=side))
    assert d["side_log"]["source"] == str(side) and d["recapture"]["applied"] > 0
    # what vouched for its declared taxonomy_rules, the same at every door (issue 23)
    assert d["classifier_of_record"] == "taxonomy_rules"
    assert d["classifier_of_record_check"].startswith("classifier_of_record 'taxonomy_rules' accepted")
    assert "benign 1,551 of 1,551, harmful 330 of 330" in d["classifier_of_record_check"]


def test_every_door_takes_require_proof_and_gives_the_same_numbers(client, tmp_path):
    # issue 23: --require-proof through score FILE, import, the app's import and the Dask engine
    # (blocks and the workspace scorer) on a canonical run whose header declares structural itself
    from .test_require_proof import structural_run

    path = structural_run(tmp_path)
    d = assert_equal_key_for_key(doors(client, path, tmp_path, require_proof=True))
    assert d["require_proof"] is True and d["unscored_by_reason"] == {"unproven_capture": 1}
    assert d["evidence_self_declared"] is True
    (tmp_path / "plain").mkdir()
    plain = assert_equal_key_for_key(doors(client, path, tmp_path / "plain"))
    assert plain["require_proof"] is False and plain["unscored"] == 0
    assert plain["content_sha256"] != d["content_sha256"]


def test_every_door_gives_a_converted_run_with_require_proof_the_same_numbers(client, tmp_path):
    # a format that cannot be split (one task on the engine, converted by its importer)
    d = assert_equal_key_for_key(doors(client, LITMUS, tmp_path, require_proof=True))
    assert d["require_proof"] is True and d["evidence_self_declared"] is False
