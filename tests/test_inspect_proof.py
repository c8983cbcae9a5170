"""Proof at the source, end to end: real Inspect evaluations (scripted mockllm agent and judge)
run with the capture-proof hook, then scored by litmus-review with the proof paired."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from inspect_ai.log import read_eval_log, write_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from pages._shared import loaders, state
from scoring.cli import main
from scoring.errors import InputError, ReasonCode
from scoring.importers import load_run
from scoring.importers.inspect_log import VerdictMap
from scoring.model import EvidenceStandard, Status
from scoring.proof import proof_path_of
from scoring.report import evaluate
from scoring.workspace import Workspace, views

from .inspect_proof_task import JUDGE_CUT, SIZES, VERDICT_MAP, arguments_of, in_thread, proof_task, run

VMAP = VerdictMap.parse(VERDICT_MAP)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One eval with a judge that reads the whole transcript, one whose template cuts every
    argument at 8 KiB; both with the hook on (by environment) and strict(scorer) beside the judge."""
    mp = pytest.MonkeyPatch()
    mp.setenv("LITMUS_REVIEW_PROOF", "1")
    try:
        full = run(proof_task(None), tmp_path_factory.mktemp("full"))
        cut = run(proof_task(JUDGE_CUT), tmp_path_factory.mktemp("cut"))
    finally:
        mp.undo()
    return {"full": full, "cut": cut}


def _statuses(ev):
    return {t.trajectory_id.split("-epoch")[0]: t for t in ev.trajectories}


def test_the_hook_writes_a_proof_of_every_call_and_judge_input(runs):
    log = runs["full"]
    lines = [json.loads(line) for line in proof_path_of(log.location).read_text().splitlines()]
    head, records = lines[0], lines[1:]
    assert head["format"] == "litmus-review-proof" and head["eval_id"] == log.eval.eval_id
    assert head["enabled_by"] == "environment LITMUS_REVIEW_PROOF=1"
    calls = {r["sample_id"]: r for r in records if r["record"] == "call"}
    assert {sid: r["emitted"]["bytes"] for sid, r in calls.items()} == SIZES
    assert all(r["executed"] == r["emitted"] for r in calls.values())
    judges = [r for r in records if r["record"] == "judge" and r["scorer"] == "model_graded_qa"]
    assert len(judges) == 3 and all(c["full_surface_seen"] for j in judges for c in j["calls"])


def test_full_transcript_judge_scores_proven_and_safe(runs):
    ev = evaluate(runs["full"].location, verdict_map=VMAP)
    assert ev.run.header.evidence_standard is EvidenceStandard.PROVEN
    assert {sid: t.status for sid, t in _statuses(ev).items()} == dict.fromkeys(SIZES, Status.SAFE)
    traj = load_run(runs["full"].location, verdict_map=VMAP).trajectories[0]  # what the importer parsed
    assert dict(traj.extra)["proof"].startswith("litmus_inspect.hook 2 · eval " + runs["full"].eval.eval_id)
    assert traj.verdict.attestation.unseen_calls == ()


def test_judge_cut_at_8k_leaves_the_64k_sample_unscored(runs):
    ev = evaluate(runs["cut"].location, verdict_map=VMAP)
    by_id = _statuses(ev)
    assert by_id["s100"].status is Status.SAFE and by_id["s8k"].status is Status.SAFE
    assert by_id["s64k"].status is Status.UNSCORED
    assert by_id["s64k"].reason is ReasonCode.JUDGE_DID_NOT_SEE_FULL_SURFACE
    assert ev.summary.unscored == 1 and ev.summary.safe == 2
    # strict(scorer) made Inspect's own metric leave the sample out
    strict_score = next(s for s in runs["cut"].results.scores if s.name == "strict_model_graded_qa")
    plain_score = next(s for s in runs["cut"].results.scores if s.name == "model_graded_qa")
    assert (strict_score.scored_samples, strict_score.unscored_samples) == (2, 1)
    assert (plain_score.scored_samples, plain_score.unscored_samples) == (3, 0)
    samples = {s.id: s for s in in_thread(read_eval_log, runs["cut"].location).samples}
    guarded = samples["s64k"].scores["strict_model_graded_qa"]
    assert guarded.reason == "litmus_review:judge_did_not_see_full_surface"
    assert "call-s64k" in guarded.explanation
    assert samples["s8k"].scores["strict_model_graded_qa"].value == "C"


def test_harm_found_by_a_judge_that_saw_a_cut_surface_stays_unsafe(runs, tmp_path):
    ev = evaluate(runs["cut"].location, verdict_map=VerdictMap.parse("model_graded_qa:unsafe=C;safe=I"))
    assert _statuses(ev)["s64k"].status is Status.UNSAFE


def _copy(log, dest: Path) -> Path:
    src = Path(log.location)
    shutil.copy(src, dest / src.name)
    shutil.copy(proof_path_of(src), proof_path_of(dest / src.name))
    return dest / src.name


def test_a_proof_tampered_after_the_run_is_refused_by_call(runs, tmp_path):
    path = _copy(runs["full"], tmp_path)
    proof = proof_path_of(path)
    lines = proof.read_text().splitlines()
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if rec.get("call_id") == "call-s8k":
            rec["emitted"]["bytes"] = rec["executed"]["bytes"] = 8 * 1024 - 1  # as if cut to fit
            lines[i] = json.dumps(rec)
    proof.write_text("\n".join(lines) + "\n")
    by_id = _statuses(evaluate(path, verdict_map=VMAP))
    # the proof's fingerprint is neither the log's arguments nor what the log's model event emitted
    assert by_id["s8k"].status is Status.UNSCORED and by_id["s8k"].reason is ReasonCode.DIGEST_MISMATCH
    assert by_id["s8k"].incomplete_call == 0 and "call 0" in by_id["s8k"].classifier_evidence[0]
    assert by_id["s100"].status is Status.SAFE and by_id["s64k"].status is Status.SAFE


def test_a_log_cut_after_the_run_is_refused_by_call(runs, tmp_path):
    path = _copy(runs["full"], tmp_path)
    log = in_thread(read_eval_log, str(path))
    for sample in log.samples:
        for m in sample.messages:
            for tc in getattr(m, "tool_calls", None) or []:
                tc.arguments["body"] = tc.arguments["body"][:4096]  # a post-processor cutting arguments
    in_thread(write_eval_log, log, str(path))
    by_id = _statuses(evaluate(path, verdict_map=VMAP))
    assert by_id["s100"].status is Status.SAFE
    for sid in ("s8k", "s64k"):
        assert by_id[sid].status is Status.UNSCORED, sid
        assert by_id[sid].reason in (ReasonCode.SIZE_MISMATCH, ReasonCode.DIGEST_MISMATCH)
        assert "proof (line" in dict(ev_extra(path)[sid])["proof note"]


def ev_extra(path: Path) -> dict:
    return {t.task_id: t.extra for t in load_run(path, verdict_map=VMAP).trajectories}


def test_a_proof_of_another_eval_is_refused(runs, tmp_path):
    path = _copy(runs["full"], tmp_path)
    shutil.copy(proof_path_of(runs["cut"].location), proof_path_of(path))
    with pytest.raises(InputError, match="not this log's proof"):
        evaluate(path, verdict_map=VMAP)


def test_score_pairs_the_proof_beside_the_log(runs):
    result = CliRunner().invoke(main, ["score", runs["cut"].location, "--inspect-verdict", VERDICT_MAP, "--json"])
    out = json.loads(result.stdout)
    out = out[0] if isinstance(out, list) else out
    assert out["evidence_standard"] == "proven"
    assert out["unscored_by_reason"] == {"judge_did_not_see_full_surface": 1}
    assert out["proof"]["source"] == str(proof_path_of(runs["cut"].location))
    assert "proof side log" in result.stderr


def test_a_proof_named_with_its_run_is_not_a_run_and_alone_is_refused(runs):
    log, proof = runs["cut"].location, str(proof_path_of(runs["cut"].location))
    both = CliRunner().invoke(main, ["score", log, proof, "--inspect-verdict", VERDICT_MAP, "--json"])
    assert both.exit_code == 0, both.stderr
    assert json.loads(both.stdout)["unscored_by_reason"] == {"judge_did_not_see_full_surface": 1}
    alone = CliRunner().invoke(main, ["score", proof])
    assert alone.exit_code == 2 and "a proof side log, not a run" in alone.stderr


def test_without_the_hook_no_proof_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv("LITMUS_REVIEW_PROOF", raising=False)
    log = run(proof_task(None, with_strict=False), tmp_path)
    assert not proof_path_of(log.location).exists()
    assert evaluate(log.location, verdict_map=VMAP).run.header.evidence_standard is EvidenceStandard.STRUCTURAL


def test_task_metadata_turns_the_hook_on(tmp_path, monkeypatch):
    monkeypatch.delenv("LITMUS_REVIEW_PROOF", raising=False)
    log = run(proof_task(None, with_strict=False, metadata={"litmus_review_proof": True}), tmp_path)
    head = json.loads(proof_path_of(log.location).read_text().splitlines()[0])
    assert head["enabled_by"] == "task metadata litmus_review_proof: true"


def test_the_replay_shows_the_proof_and_the_judge_attestation(runs, app, tmp_path):
    key = Workspace(tmp_path / "app.db").import_run(runs["cut"].location, verdict_map=VMAP).run_key
    app.session_state[state.SELECTED_RUNS] = [key]
    df = loaders.trajectory_frame(key)
    row = int(df.index[df["trajectory_id"] == "s64k-epoch1"][0])
    assert df.loc[row, "status"] == "unscored"
    app.switch_page("pages/trajectories.py").run()
    app.session_state[state.TRAJ_TABLE] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    app.run()
    assert not app.exception, app.exception
    eval_id = runs["cut"].eval.eval_id
    assert any(t.value.startswith("evidence standard: proven · proof recorded at the source: litmus_inspect.hook 2 · "
                                  f"eval {eval_id}") for t in app.text)
    facts = {}
    for frame in app.dataframe:
        value = frame.value
        if "evidence" in value.columns:
            facts.update(dict(zip(value["evidence"], value["value"], strict=True)))
    assert facts["proof check"] == "the log's arguments match the proof"
    assert facts["judge input"].startswith("NOT shown to judge model_graded_qa (deciding input sha256 ")
    assert "judge input checked against the logged arguments" in facts["judge input"]
    assert facts["raw bytes"] == f"{64 * 1024:,}"


def _strict_scores(log) -> dict:
    return {s.id: s.scores["strict_model_graded_qa"] for s in in_thread(read_eval_log, log.location).samples}


def test_strict_refuses_a_conversation_cut_after_the_model_emitted(tmp_path, monkeypatch):
    monkeypatch.delenv("LITMUS_REVIEW_PROOF", raising=False)
    log = run(proof_task(None, cut_log=True), tmp_path)
    scores = _strict_scores(log)
    assert scores["s100"].value == "C"  # under the cut: whole
    for sid in ("s8k", "s64k"):
        assert scores[sid].reason == "litmus_review:digest_mismatch", sid
        assert f"call-{sid}" in scores[sid].explanation


def test_strict_keeps_harm_found_on_a_cut_surface(tmp_path, monkeypatch):
    monkeypatch.delenv("LITMUS_REVIEW_PROOF", raising=False)
    log = run(proof_task(JUDGE_CUT, harm_values=("C",)), tmp_path)
    assert {sid: s.value for sid, s in _strict_scores(log).items()} == dict.fromkeys(SIZES, "C")


def test_the_workspace_keys_a_log_with_its_proof_apart_from_the_log_alone(runs, tmp_path):
    path = _copy(runs["cut"], tmp_path)
    ws = Workspace(tmp_path / "ws.db")
    with_proof = ws.import_run(path, verdict_map=VMAP)
    proof_path_of(path).unlink()
    alone = ws.import_run(path, verdict_map=VMAP)
    assert not alone.already_present and alone.run_key != with_proof.run_key
    assert ws.run(with_proof.run_key)["evidence_standard"] == "proven"
    assert ws.run(alone.run_key)["evidence_standard"] == "structural"


def test_a_retried_sample_is_proven_by_its_last_attempt_only(tmp_path, monkeypatch):
    attempts = {"n": 0}

    def flaky(input, tools, tool_choice, config):
        usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        if input[-1].role == "tool":
            attempts["n"] += 1
            if attempts["n"] == 1:
                raise RuntimeError("the provider failed after the first attempt's call")
            out = ModelOutput.from_content("mockllm/model", "sent")
        else:
            out = ModelOutput.for_tool_call("mockllm/model", "send_email", arguments_of(100),
                                            tool_call_id=f"call-attempt-{attempts['n'] + 1}")
        out.usage = usage
        return out

    monkeypatch.setenv("LITMUS_REVIEW_PROOF", "1")
    task = proof_task(None, with_strict=False)
    task.dataset = task.dataset[:1]
    log = run(task, tmp_path, get_model("mockllm/model", custom_outputs=flaky, memoize=False), retry_on_error=1)
    assert attempts["n"] == 2
    calls = [json.loads(line)["call_id"] for line in proof_path_of(log.location).read_text().splitlines()[1:]
             if json.loads(line)["record"] == "call"]
    assert calls == ["call-attempt-2"]
    assert [t.status for t in evaluate(log.location, verdict_map=VMAP).trajectories] == [Status.SAFE]


def _statuses_in(ws: Workspace, key: str) -> dict:
    with ws.connect() as db:
        return dict(db.execute("select trajectory_id, status from trajectories where run_key = ?", [key]).fetchall())


def _make_stale(ws: Workspace, key: str, version: str) -> None:
    with ws.connect() as db:
        db.execute("update runs set scorer_version = ? where run_key = ?", [version, key])


def test_a_proven_run_is_rescored_with_the_proof_the_workspace_kept(runs, tmp_path):
    path = _copy(runs["cut"], tmp_path)
    ws = Workspace(tmp_path / "ws.db")
    key = ws.import_run(path, verdict_map=VMAP).run_key
    before = _statuses_in(ws, key)
    assert set(before.values()) >= {"safe", "unscored"}
    path.unlink()
    proof_path_of(path).unlink()  # the user's files are gone: only the workspace's copies remain
    _make_stale(ws, key, "2.9")
    (done,) = ws.rescore([key])
    assert done.done, done.why
    assert ws.run(key)["evidence_standard"] == "proven"
    assert _statuses_in(ws, key) == before


@pytest.mark.parametrize("require_proof", [False, True], ids=["default", "require-proof"])
def test_a_proof_the_workspace_never_kept_is_looked_for_beside_the_log_or_the_rescore_is_refused(
        runs, tmp_path, require_proof):
    # with --require-proof the run's key names it too: the proof beside the log is matched to it
    path = _copy(runs["cut"], tmp_path)
    ws = Workspace(tmp_path / "ws.db")
    key = ws.import_run(path, verdict_map=VMAP, require_proof=require_proof).run_key
    before = _statuses_in(ws, key)
    # A run imported under 3.0 before the workspace recorded and kept its proof:
    sha = ws.run(key)["proof_sha256"]
    kept = ws.files / f"{sha}.proof"
    assert kept.is_file()
    kept.unlink()
    with ws.connect() as db:
        db.execute("update runs set proof_sha256 = null where run_key = ?", [key])
    aside = tmp_path / "aside.jsonl"
    proof_path_of(path).rename(aside)
    _make_stale(ws, key, "3.0.1")
    (refused,) = ws.rescore([key])
    assert not refused.done and "proof side log the workspace did not keep" in refused.why
    assert ws.run(key)["scorer_version"] == "3.0.1"  # left as it was, still marked stale
    aside.rename(proof_path_of(path))
    (done,) = ws.rescore([key])
    assert done.done, done.why
    assert ws.run(key)["evidence_standard"] == "proven" and _statuses_in(ws, key) == before
    assert kept.is_file() and ws.run(key)["proof_sha256"] == sha  # kept and recorded now, for the next rescore


def _two_runs_of_one_log(runs, tmp_path, **options) -> tuple[Workspace, str, str]:
    """One log imported with its proof beside it, then again without: two runs, one log."""
    path = _copy(runs["cut"], tmp_path)
    ws = Workspace(tmp_path / "ws.db")
    proven = ws.import_run(path, **options).run_key
    proof_path_of(path).unlink()
    alone = ws.import_run(path, **options).run_key
    assert proven != alone and ws.run(alone)["evidence_standard"] == "structural"
    return ws, proven, alone


def test_a_run_without_a_proof_is_never_rescored_with_the_proof_of_another_run_of_its_log(runs, tmp_path):
    ws, _proven, alone = _two_runs_of_one_log(runs, tmp_path, verdict_map=VMAP)
    before = _statuses_in(ws, alone)
    _make_stale(ws, alone, "2.9")
    (done,) = ws.rescore([alone])
    assert done.done, done.why
    assert ws.run(alone)["evidence_standard"] == "structural" and _statuses_in(ws, alone) == before


def test_rescoring_a_proven_run_leaves_the_copy_of_the_unproven_run_of_its_log_alone(runs, tmp_path):
    import hashlib

    ws, proven, alone = _two_runs_of_one_log(runs, tmp_path)
    _make_stale(ws, proven, "2.9")
    (done,) = ws.rescore([proven])
    assert done.done, done.why
    for key in (proven, alone):
        row = ws.run(key)
        assert hashlib.sha256((ws.files / row["stored_path"]).read_bytes()).hexdigest() == row["stored_sha256"], key
    tid = next(iter(_statuses_in(ws, alone)))
    assert views.replay(ws.path, alone, tid).trajectory.id == tid  # its copy still replays
