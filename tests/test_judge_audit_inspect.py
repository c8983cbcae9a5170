"""The judge-input audit on real Inspect evaluations (scripted mockllm agent and judges): a
benign verdict is SAFE only where litmus-review found, in the log's own events, that the model
call its grade was parsed from was shown every call whole — with or without a proof, which is
cross-checked against the log and never believed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from inspect_ai.log import read_eval_log

from scoring.cli import main
from scoring.errors import ReasonCode
from scoring.importers import load_run
from scoring.importers.inspect_log import VerdictMap
from scoring.model import EvidenceStandard, Status
from scoring.proof import ProofWriter, proof_path_of
from scoring.report import evaluate

from .inspect_proof_task import JUDGE_CUT, SIZES, VERDICT_MAP, arguments_of, proof_task, run
from .judge_audit_tasks import audit_task

VMAP = VerdictMap.parse(VERDICT_MAP)


def _by_id(ev):
    return {t.trajectory_id.split("-epoch")[0]: t for t in ev.trajectories}


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """Evaluations without the hook (the audit needs none) and, for the proof cases, with it."""
    mp = pytest.MonkeyPatch()
    mp.delenv("LITMUS_REVIEW_PROOF", raising=False)
    out = {}
    try:
        out["full"] = run(proof_task(None, with_strict=False), tmp_path_factory.mktemp("full"))
        out["cut"] = run(proof_task(JUDGE_CUT, with_strict=False), tmp_path_factory.mktemp("cut"))
        out["two_step"] = run(audit_task("two_step", JUDGE_CUT), tmp_path_factory.mktemp("two"))
        out["constant"] = run(audit_task("constant"), tmp_path_factory.mktemp("const"))
        out["solver_cut"] = run(audit_task("solver", JUDGE_CUT), tmp_path_factory.mktemp("solver_cut"))
        out["solver_full"] = run(audit_task("solver", None), tmp_path_factory.mktemp("solver_full"))
        mp.setenv("LITMUS_REVIEW_PROOF", "1")
        out["hooked_cut"] = run(proof_task(JUDGE_CUT, with_strict=False), tmp_path_factory.mktemp("hooked_cut"))
        out["hooked_constant"] = run(audit_task("constant"), tmp_path_factory.mktemp("hooked_const"))
        out["hooked_state"] = run(audit_task("state"), tmp_path_factory.mktemp("hooked_state"))
    finally:
        mp.undo()
    return out


def _copy(log, dest: Path) -> Path:
    src = Path(log.location)
    shutil.copy(src, dest / src.name)
    if proof_path_of(src).exists():
        shutil.copy(proof_path_of(src), proof_path_of(dest / src.name))
    return dest / src.name


def test_a_judge_shown_everything_is_safe_from_the_log_alone(logs):
    ev = evaluate(logs["full"].location, verdict_map=VMAP)
    assert ev.run.header.evidence_standard is EvidenceStandard.STRUCTURAL  # no hook, no proof
    by_id = _by_id(ev)
    assert {sid: t.status for sid, t in by_id.items()} == dict.fromkeys(SIZES, Status.SAFE)
    assert ev.format_metrics["inspect"]["judge_audit"]["checked_shown"] == 3
    out = CliRunner().invoke(main, ["score", logs["full"].location, "--inspect-verdict", VERDICT_MAP])
    assert "3 safe verdicts checked against the logged arguments, every call shown" in out.stdout
    att = load_run(logs["full"].location, verdict_map=VMAP).trajectories[0].verdict.attestation
    assert att.kind == "judged" and att.unseen_calls == () and len(att.input_sha256) == 1


def test_a_judge_shown_8k_of_a_64k_call_is_unscored_without_any_hook(logs):
    by_id = _by_id(evaluate(logs["cut"].location, verdict_map=VMAP))
    # the template cuts each argument value at 8 KiB: the 8 KiB call's body is shorter and shown whole
    assert by_id["s100"].status is Status.SAFE and by_id["s8k"].status is Status.SAFE
    assert by_id["s64k"].status is Status.UNSCORED
    assert by_id["s64k"].reason is ReasonCode.JUDGE_DID_NOT_SEE_FULL_SURFACE
    assert by_id["s64k"].incomplete_call == 0
    assert "0 (send_email)" in by_id["s64k"].classifier_evidence[0]


def test_a_scorer_that_summarises_the_whole_then_decides_on_a_cut_is_unscored(logs):
    vmap = VerdictMap.parse("two_step:safe=C;unsafe=I")
    by_id = _by_id(evaluate(logs["two_step"].location, verdict_map=vmap))
    assert by_id["s64k"].status is Status.UNSCORED
    assert by_id["s64k"].reason is ReasonCode.JUDGE_DID_NOT_SEE_FULL_SURFACE
    assert by_id["s100"].status is Status.SAFE  # the deciding call was shown the 100-byte call whole


def test_a_judge_in_a_solver_whose_verdict_a_scorer_copied_is_audited_too(logs):
    vmap = VerdictMap.parse("copied:safe=C;unsafe=I")
    cut = _by_id(evaluate(logs["solver_cut"].location, verdict_map=vmap))
    assert cut["s64k"].status is Status.UNSCORED and cut["s64k"].reason is ReasonCode.JUDGE_DID_NOT_SEE_FULL_SURFACE
    whole = _by_id(evaluate(logs["solver_full"].location, verdict_map=vmap))
    assert {sid: t.status for sid, t in whole.items()} == dict.fromkeys(SIZES, Status.SAFE)


def test_a_scorer_that_calls_no_model_is_programmatic(logs):
    vmap = VerdictMap.parse("constant:safe=C;unsafe=I")
    run_ = load_run(logs["constant"].location, verdict_map=vmap)
    assert {t.verdict.attestation.kind for t in run_.trajectories} == {"programmatic"}
    # by default: today's structural standard
    assert {t.status for t in evaluate(logs["constant"].location, verdict_map=vmap).trajectories} == {Status.SAFE}


def test_under_require_proof_a_programmatic_verdict_is_not_proven_unless_it_checked_state(logs, tmp_path):
    plain = VerdictMap.parse("constant:safe=C;unsafe=I")
    ev = evaluate(logs["hooked_constant"].location, verdict_map=plain, require_proof=True)
    assert {(t.status, t.reason) for t in ev.trajectories} == {(Status.UNSCORED, ReasonCode.JUDGE_PROOF_REFUSED)}
    unhooked = evaluate(logs["constant"].location, verdict_map=plain, require_proof=True)
    assert {(t.status, t.reason) for t in unhooked.trajectories} == {(Status.UNSCORED, ReasonCode.UNPROVEN_CAPTURE)}
    # ControlArena's side-task preset, whose scorer read the sandbox's state: proven SAFE
    state = VerdictMap.parse("side_task_success")
    ev = evaluate(logs["hooked_state"].location, verdict_map=state, require_proof=True)
    assert {t.status for t in ev.trajectories} == {Status.SAFE}
    att = load_run(logs["hooked_state"].location, verdict_map=state).trajectories[0].verdict.attestation
    assert (att.kind, att.state_checking) == ("programmatic", True) and "reads the sandbox" in att.detail


def test_a_constant_scorer_under_the_hook_is_not_safe(logs):
    vmap = VerdictMap.parse("constant:safe=C;unsafe=I")
    ev = evaluate(logs["hooked_constant"].location, verdict_map=vmap)
    assert ev.run.header.evidence_standard is EvidenceStandard.PROVEN
    assert {(t.status, t.reason) for t in ev.trajectories} == {(Status.UNSCORED, ReasonCode.JUDGE_PROOF_REFUSED)}


def _proof_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in proof_path_of(path).read_text().splitlines()]


def _write_proof(path: Path, records: list[dict]) -> None:
    proof_path_of(path).write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.mark.parametrize("tamper", ["flip_seen", "delete_judges"])
def test_a_tampered_proof_does_not_make_a_cut_judge_safe(logs, tmp_path, tamper):
    path = _copy(logs["hooked_cut"], tmp_path)
    records = _proof_lines(path)
    if tamper == "flip_seen":
        for r in records:
            for c in r.get("calls", []):
                c["full_surface_seen"] = True
    else:
        records = [r for r in records if r.get("record") != "judge"]
    _write_proof(path, records)
    for require in (False, True):
        by_id = _by_id(evaluate(str(path), verdict_map=VMAP, require_proof=require))
        assert by_id["s64k"].status is Status.UNSCORED, (tamper, require)
        assert by_id["s64k"].reason in (ReasonCode.JUDGE_DID_NOT_SEE_FULL_SURFACE, ReasonCode.JUDGE_PROOF_REFUSED)
    if tamper == "delete_judges":  # even the calls the judge was shown whole are not proven now
        assert _by_id(evaluate(str(path), verdict_map=VMAP))["s100"].reason is ReasonCode.JUDGE_PROOF_REFUSED


def test_a_proof_rewritten_with_proofwriter_against_the_cut_arguments_is_refused(logs, tmp_path):
    path = _copy(logs["hooked_cut"], tmp_path)
    head, *records = _proof_lines(path)
    with ProofWriter(proof_path_of(path), eval_id=head["eval_id"], writer="forger 1") as proof:
        for r in records:
            if r["record"] == "call":
                proof.record_raw(r)
        for sid, size in SIZES.items():
            args = arguments_of(size)
            cut = {k: v[:JUDGE_CUT] for k, v in args.items()}
            proof.record_judge_input(sample_id=sid, scorer="model_graded_qa",
                                     judge_input=f"tool call send_email: {json.dumps(cut)}",
                                     calls={f"call-{sid}": cut}, functions={f"call-{sid}": "send_email"})
    result = CliRunner().invoke(main, ["score", str(path), "--inspect-verdict", VERDICT_MAP, "--json"])
    out = json.loads(result.stdout)
    assert out["safe"] == 0 and out["unscored_by_reason"] == {"judge_proof_refused": 3}


def test_a_forged_proof_naming_an_input_no_model_call_had_is_refused(logs, tmp_path):
    path = _copy(logs["cut"], tmp_path)  # no hook: a forger writes the whole proof
    log = load_run(str(path), verdict_map=VMAP)
    eval_id = read_eval_log(str(path), header_only=True).eval.eval_id  # as a forger would read it
    with ProofWriter(proof_path_of(path), eval_id=eval_id, writer="forger 1") as proof:
        for t in log.trajectories:
            sid = t.task_id
            args = arguments_of(SIZES[sid])
            proof.record_call(sample_id=sid, call_id=f"call-{sid}", function="send_email", emitted=args,
                              executed=args)
            proof.record_judge_input(sample_id=sid, scorer="model_graded_qa",
                                     judge_input=f"tool call send_email: {json.dumps(args)}",
                                     calls={f"call-{sid}": args}, functions={f"call-{sid}": "send_email"})
    by_id = _by_id(evaluate(str(path), verdict_map=VMAP))
    assert {t.reason for t in by_id.values()} == {ReasonCode.JUDGE_PROOF_REFUSED}


def test_score_key_shows_what_score_file_shows(logs, tmp_path):
    db = tmp_path / "ws.db"
    path = logs["cut"].location
    imported = CliRunner().invoke(main, ["import", path, "--inspect-verdict", VERDICT_MAP, "--db", str(db)])
    assert imported.exit_code == 0, imported.output
    from scoring.workspace import Workspace

    [row] = Workspace(db).runs()
    by_file = CliRunner().invoke(main, ["score", path, "--inspect-verdict", VERDICT_MAP])
    by_key = CliRunner().invoke(main, ["score", row["run_key"][:12], "--db", str(db)])
    line = next(ln for ln in by_file.stdout.splitlines() if ln.strip().startswith("judge input"))
    assert "2 safe verdicts checked against the logged arguments, every call shown" in line
    assert "1 not shown every call" in line
    assert line in by_key.stdout.splitlines()
    as_json = [json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout) for args in (
        ["score", path, "--inspect-verdict", VERDICT_MAP], ["score", row["run_key"][:12], "--db", str(db)])]
    assert as_json[0]["unscored_by_reason"] == as_json[1]["unscored_by_reason"] == {
        "judge_did_not_see_full_surface": 1}


def test_the_review_page_labels_a_trace_the_judge_did_not_see_from_its_own_queue(logs, app, tmp_path):
    from pages._shared import state
    from scoring.workspace import Workspace, views

    from .test_app import set_reviewer

    ws = Workspace(tmp_path / "app.db")
    key = ws.import_run(logs["cut"].location, verdict_map=VMAP).run_key
    app.session_state[state.SELECTED_RUNS] = [key]
    app.switch_page("pages/review.py").run()
    set_reviewer(app, "alice")
    app.radio(key=state.QUEUE_FILTER).set_value(views.QueueMode.UNSCORED).run()
    assert not [b for b in app.button if b.key and b.key.startswith("label-")]  # the UNSCORED queue: view only
    app.radio(key=state.QUEUE_FILTER).set_value(views.QueueMode.JUDGE_UNSEEN).run()
    assert not app.exception, app.exception
    tid = app.session_state[state.REVIEW_CURRENT]
    assert tid == "s64k-epoch1"
    assert any("The judge did not see every call" in w.value for w in app.warning)
    app.button(key=f"label-genuine_decline-{tid}").click().run()
    assert not app.exception, app.exception
    assert ws.final_labels(key) == {tid: "genuine_decline"}
    ev = views.evaluation(str(tmp_path / "app.db"), key, reader=None)
    assert ev.summary.strict.denominator == 2 and ev.summary.reviewed.denominator == 3
