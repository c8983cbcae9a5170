"""Importers: real logs from ../shared/real (counted independently), fixtures we wrote for
every capture signal, limit, error and verdict mapping, and the shared invariants."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import pytest

from scoring.errors import ReasonCode, UnknownFormatError
from scoring.importers import ParseOptions, formats, load_run, sniff_format
from scoring.importers._common import json_key_paths
from scoring.importers.inspect_log import VerdictMap
from scoring.importers.inspect_log import parse as parse_inspect
from scoring.importers.litmus_log import litmus_metrics, load_case_table
from scoring.model import Status, Termination
from scoring.report import evaluate
from scoring.score import score_run

from .conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "importers"


# --- independent counts of the real logs (plain json, no project code) ---------------------


def _inspect_counts(path: Path) -> tuple[int, int]:
    if path.suffix == ".eval":
        with zipfile.ZipFile(path) as z:
            samples = [json.loads(z.read(n)) for n in z.namelist() if n.startswith("samples/")]
    else:
        samples = json.loads(path.read_text())["samples"]
    calls = sum(len(m.get("tool_calls") or []) for s in samples for m in s["messages"] if m["role"] == "assistant")
    return len(samples), calls


def _openai_list_counts(path: Path) -> tuple[int, int]:
    doc = json.loads(path.read_text())
    return len(doc), sum(len(m.get("tool_calls") or []) for r in doc for m in r["traj"] if m["role"] == "assistant")


def _invariant_counts(path: Path) -> tuple[int, int]:
    rows = [json.loads(line) for line in path.read_text().splitlines()[1:] if line.strip()]
    return len(rows), sum(len(m.get("tool_calls") or []) for r in rows for m in r["messages"]
                          if m["role"] == "assistant")


def _native_counts(path: Path) -> tuple[int, int]:
    d = json.loads(path.read_text())
    return 1, sum(len(m.get("tool_calls") or []) for m in d["messages"] if m["role"] == "assistant")


def _atif_counts(path: Path) -> tuple[int, int]:
    total, doc, seen = 0, json.loads(path.read_text()), 0
    while True:
        total += sum(len(s.get("tool_calls") or []) for s in doc["steps"])
        ref = doc.get("continued_trajectory_ref")
        nxt = path.with_name(path.name.split("trajectory")[0] + ref) if ref else None
        if not nxt or not nxt.exists() or seen > 5:
            return 1, total
        doc, seen = json.loads(nxt.read_text()), seen + 1


def _claude_counts(path: Path) -> tuple[int, int]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    calls = sum(1 for r in rows for b in (r.get("message", {}).get("content") or [])
                if isinstance(b, dict) and b.get("type") == "tool_use")
    return len({r.get("sessionId") for r in rows}), calls


REAL = [
    ("inspect_ai/2025-05-12T20-27-36-04-00_browser.json", "inspect", _inspect_counts),
    ("inspect_ai/log_message_deduplication.eval", "inspect", _inspect_counts),
    ("inspect_ai/log_tool_call_error.json", "inspect", _inspect_counts),
    ("inspect_ai/2025-02-11T15-17-00-05-00_popularity_dPiJifoWeEQBrfWsAopzWr.eval", "inspect", _inspect_counts),
    ("tau-bench/gpt-4o-airline.json", "openai_chat", _openai_list_counts),
    ("agentdojo_invariant_export/agentdojo-gpt-4o-mini-2024-07-18.jsonl", "agentdojo", _invariant_counts),
    ("agentdojo_native/banking-user_task_0-important_instructions-injection_task_0.json", "agentdojo", _native_counts),
    ("inspect_scout/atif/openhands_hello-world.trajectory.json", "atif", _atif_counts),
    ("inspect_scout/atif/terminus_2_hello-world-context-summarization-linear-history.trajectory.json", "atif",
     _atif_counts),
    ("inspect_scout/claude_code/tool_call_conversation.jsonl", "anthropic_messages", _claude_counts),
]


@pytest.mark.real
@pytest.mark.parametrize("rel, fmt, counter", REAL, ids=[r[0].split("/")[-1][:40] for r in REAL])
def test_real_logs_import_with_independently_counted_trajectories_and_calls(shared_real, rel, fmt, counter):
    from click.testing import CliRunner

    from scoring.cli import main

    path = shared_real / rel
    res = CliRunner().invoke(main, ["score", str(path), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["format"] == fmt
    assert (out["trajectories"], out["tool_calls"]) == counter(path)
    assert out["evidence_standard"] == "structural"
    assert out["rejected_records"] == []


@pytest.mark.real
def test_real_agentdojo_invariant_export_flags_the_loop_cutoff_and_counts_attacks(shared_real):
    ev = evaluate(shared_real / "agentdojo_invariant_export/agentdojo-gpt-4o-mini-2024-07-18.jsonl")
    cut = [s for s in ev.trajectories if s.termination is Termination.STEP_LIMIT]
    assert len(cut) == 1 and cut[0].status is Status.INCONCLUSIVE
    export = shared_real / "agentdojo_invariant_export/agentdojo-gpt-4o-mini-2024-07-18.jsonl"
    rows = [json.loads(line) for line in export.read_text().splitlines()[1:]]
    attacks_won = sum(1 for r in rows if r["metadata"]["injection_task_id"] and r["metadata"]["security"])
    assert ev.summary.unsafe == attacks_won - sum(1 for s in cut if s.fired_category)
    assert all(s.status is not Status.SAFE for s in ev.trajectories if "None-None" in s.trajectory_id)


@pytest.mark.real
def test_real_native_agentdojo_attack_success_is_unsafe(shared_real):
    ev = evaluate(shared_real / "agentdojo_native/banking-user_task_0-important_instructions-injection_task_0.json")
    assert [s.status for s in ev.trajectories] == [Status.UNSAFE]


@pytest.mark.real
@pytest.mark.parametrize("rel", [r[0] for r in REAL if r[1] == "inspect"])
def test_inspect_importer_agrees_with_inspect_ai_read_eval_log(shared_real, rel):
    inspect_log = pytest.importorskip("inspect_ai.log")
    log = inspect_log.read_eval_log(str(shared_real / rel))
    theirs = [(tc.function, tc.arguments) for s in log.samples or [] for m in s.messages if m.role == "assistant"
              for tc in (m.tool_calls or [])]
    run = load_run(shared_real / rel)
    ours = [(c.tool, json.loads(c.arguments)) for t in run.trajectories for c in t.tool_calls]
    assert ours == theirs


@pytest.mark.real
def test_litmus_case_table_names_categories(shared_real):
    table = load_case_table(shared_real / "litmus/dataset_3.27.csv")
    assert table["1"] == "system_operation" and len(table) >= 3


# --- fixtures we wrote --------------------------------------------------------------------


def scored(name: str, **kw):
    ev = evaluate(FIXTURES / name, **kw)
    return ev, {s.trajectory_id: s for s in ev.trajectories}


def test_inspect_signals_limits_errors_and_attachments():
    _ev, s = scored("inspect_signals.json")
    assert s["s1-epoch1"].status is Status.UNSCORED and s["s1-epoch1"].reason is ReasonCode.UNPARSEABLE_ARGUMENTS
    assert s["s2-epoch1"].status is Status.NO_VERDICT and s["s2-epoch1"].termination is Termination.TOKEN_LIMIT
    assert s["s3-epoch1"].reason is ReasonCode.REDACTED  # <base64-data-removed>
    assert s["s4-epoch1"].reason is ReasonCode.MISSING_EVIDENCE  # attachment:// with no attachment
    assert s["s5-epoch1"].termination is Termination.ERROR and s["s5-epoch1"].status is Status.NO_VERDICT
    run = load_run(FIXTURES / "inspect_signals.json")
    by = {t.id: t for t in run.trajectories}
    assert "resolved attachment text" in by["s3-epoch1"].tool_calls[0].arguments
    assert by["s3-epoch1"].tool_calls[0].result.truncated  # ToolEvent.truncated
    assert by["s2-epoch1"].tool_calls[0].result.truncated  # error.type == output_limit


def test_inspect_verdict_mapping_is_explicit_and_limits_never_count_safe():
    data = (FIXTURES / "inspect_signals.json").read_bytes()
    default = {t.id: t.verdict for t in parse_inspect(data, "f").trajectories}
    assert set(default.values()) == {None}  # scores are not harm labels unless mapped
    vm = VerdictMap(scorer="harm", unsafe_values=("C",), category="harm")
    mapped = parse_inspect(data, "f", ParseOptions(verdict_map=vm))
    statuses = {s.trajectory_id: s.status for s in score_run(mapped)}
    assert statuses["s2-epoch1"] is Status.INCONCLUSIVE  # hit a limit: "I" (incorrect) is not safety
    assert statuses["s5-epoch1"] is Status.INCONCLUSIVE  # errored
    # redacted, but the judge's harm verdict counts: harm needs no proof of completeness (3.0)
    assert statuses["s3-epoch1"] is Status.UNSAFE


def test_openai_chat_length_cut_and_rejected_lines():
    ev, s = scored("openai_chat_signals.jsonl")
    assert ReasonCode.TRUNCATED in s["o1"].reasons and s["o1"].termination is Termination.TOKEN_LIMIT
    # no verdict in the log: a refusal there is not evidence of safety for any rate
    assert s["o2"].status is Status.NO_VERDICT and not s["o2"].harness_judged
    assert [(r.line, r.message[:12]) for r in ev.run.rejected] == [(3, "invalid JSON"), (4, "messages is ")]


def test_anthropic_max_tokens_and_redacted_thinking():
    ev, s = scored("anthropic_signals.jsonl")
    t = s["sess-1"]
    assert t.status is Status.UNSCORED and set(t.reasons) == {ReasonCode.REDACTED, ReasonCode.TRUNCATED}
    assert t.termination is Termination.TOKEN_LIMIT
    assert ev.run.header.model == "claude-fixture"


def test_agentdojo_security_true_means_the_attack_succeeded():
    _ev, s = scored("agentdojo_invariant_signals.jsonl")
    st = {k.split("-")[1] + "-" + k.split("-")[2]: v.status for k, v in s.items()}
    assert st["user_task_0-injection_task_0"] is Status.UNSAFE      # security true, injected
    assert st["user_task_0-injection_task_1"] is Status.SAFE        # security false, injected
    assert st["user_task_1-None"] is Status.NO_VERDICT              # no injection: never asked
    cut = next(v for k, v in s.items() if "user_task_2" in k)
    assert cut.termination is Termination.STEP_LIMIT and cut.status is Status.INCONCLUSIVE


def test_agentdojo_error_forcing_security_true_is_an_early_stop_not_unsafe():
    _ev, s = scored("agentdojo_native_error.json")
    (t,) = s.values()
    assert t.status is Status.INCONCLUSIVE and t.termination is Termination.ERROR
    assert t.suggestion.label.value == "early_stop"


def test_tau2_termination_and_order_pairing_with_repeated_ids():
    run = load_run(FIXTURES / "tau2_results.json")
    sim1 = run.trajectories[0]
    assert [c.result.content for c in sim1.tool_calls] == ["user 1", "user 2"]
    assert sim1.termination is Termination.STEP_LIMIT


def test_tau2_is_recognised_when_simulations_come_after_a_long_info_and_tasks(tmp_path):
    # tau2 writes info and tasks before simulations: in real files the key sits past 64 KiB.
    doc = json.loads((FIXTURES / "tau2_results.json").read_text())
    doc = {"timestamp": "t", "info": {"user_info": {"guidelines": "{[\"" * 30_000}, "agent_info": {"llm": "m"}},
           "tasks": [{"id": str(i), "description": "x" * 100} for i in range(400)], "simulations": doc["simulations"]}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc, indent=2))
    assert path.read_bytes()[:65536].find(b'"simulations"') < 0
    assert sniff_format(path.read_bytes()[:65536], str(path)) == "tau2"
    assert len(load_run(path).trajectories) == len(doc["simulations"])


def test_key_scan_ignores_keys_inside_strings_and_deeper_levels():
    head = b'{"a": "{\\"simulations\\": 1}", "b": {"c": {"d": 1}, "e": [{"f": 2}]}, "g"'
    assert json_key_paths(head) == {("a",), ("b",), ("b", "c"), ("b", "e")}


def test_a_head_cut_inside_a_string_is_scanned_once():
    """A sniffed head that ends inside a long string full of escaped quotes (a tau2 file's
    guidelines) was scanned again from every quote in it (quadratic in the head). The
    string cut by the head's end is one token, to the end, so the scan never restarts inside it."""
    from scoring.importers import _common

    cut = b'"' + b'say \\"policy\\": no, ' * 1000 + b"\\"
    (token,) = _common._JSON_TOKEN.finditer(cut)
    assert token.span() == (0, len(cut)) and token.group(1) is None  # a value, not a key
    head = b'{"info": {"v": 1}, "tasks": [{"id": 1, "guidelines": ' + cut
    assert json_key_paths(head) == {("info",), ("info", "v"), ("tasks",)}


def test_atif_follows_continuation_segments_beside_the_file():
    run = load_run(FIXTURES / "atif_fx.trajectory.json")
    (t,) = run.trajectories
    assert [c.tool for c in t.tool_calls] == ["bash", "bash"]
    assert t.tool_calls[1].result.truncated  # in-band <response clipped>


def test_litmus_verdicts_metrics_and_rejections():
    ev, s = scored("litmus_pipeline.jsonl")
    assert s["row1"].status is Status.UNSAFE and s["row2"].status is Status.SAFE
    assert s["row4"].status is Status.INCONCLUSIVE  # judgement -1 is never safe
    assert [r.line for r in ev.run.rejected] == [6]
    assert s["row7"].status is Status.INCONCLUSIVE  # no judgement: a failed one (LITMUS: not harmful)
    m = litmus_metrics(load_run(FIXTURES / "litmus_pipeline.jsonl"))
    assert (m.rows, m.valid, m.harmful, m.judge_abnormal_count, m.no_judgement_count) == (6, 5, 2, 1, 1)
    assert m.asr == 2 / 5  # LITMUS's own ASR keeps the judgement-less row in its denominator
    assert m.said_did == {"said_yes_did_yes": 1, "said_yes_did_no": 1, "said_no_did_yes": 1, "said_no_did_no": 1}
    assert m.execution_hallucination_rate == 1 / 2
    assert ev.format_metrics == {"litmus": dataclasses.asdict(m)}  # computed at import, kept with the run


ALL_INPUTS = sorted(p for p in FIXTURES.iterdir() if p.is_file())


def test_fixture_corpus_is_not_empty():
    assert len(ALL_INPUTS) >= 8


@pytest.mark.parametrize("path", ALL_INPUTS, ids=lambda p: p.name)
def test_every_record_is_imported_or_rejected_and_ids_are_unique(path):
    run = load_run(path)
    ids = [t.id for t in run.trajectories]
    assert len(ids) == len(set(ids))
    assert run.records_seen == len(run.trajectories) + len(run.rejected)
    assert all(r.source == str(path) for r in run.rejected)
    for t in run.trajectories:
        assert [c.index for c in t.tool_calls] == list(range(len(t.tool_calls)))


def test_unknown_format_lists_every_format_tried(tmp_path):
    p = tmp_path / "mystery.json"
    p.write_text('{"something": "else"}')
    with pytest.raises(UnknownFormatError) as info:
        load_run(p)
    assert set(info.value.tried) == set(formats()) and len(formats()) == 9


def test_inspect_verdict_mapping_from_the_command_line(tmp_path):
    from click.testing import CliRunner

    from scoring.cli import main

    path = str(FIXTURES / "inspect_signals.json")
    plain = json.loads(CliRunner().invoke(main, ["score", path, "--json"]).stdout)
    mapped = CliRunner().invoke(main, ["score", path, "--json", "--inspect-verdict", "harm=C"])
    assert mapped.exit_code == 0, mapped.output
    m = json.loads(mapped.stdout)
    assert plain["unsafe"] == 0 and m["trajectories"] == plain["trajectories"]
    # s6 (complete, scored C) turns unsafe, and s3 (also C) too though it was redacted: harm
    # needs no proof of completeness (scorer 3.0; it stayed UNSCORED before)
    assert m["unsafe"] == 2 and m["unscored"] == plain["unscored"] - 1
    # unmapped Inspect logs ask no safety question; with the map, the samples it judged leave no-verdict
    assert m["no_verdict"] < plain["no_verdict"] and m["harness_judged"] > plain["harness_judged"] == 0
    bad = CliRunner().invoke(main, ["score", path, "--inspect-verdict", "harm"])
    assert bad.exit_code == 2 and "SCORER=VALUE" in bad.output
    db = tmp_path / "w.db"
    a = CliRunner().invoke(main, ["import", path, "--db", str(db)])
    b = CliRunner().invoke(main, ["import", path, "--db", str(db), "--inspect-verdict", "harm=I"])
    assert "imported" in a.stdout and b.stdout.startswith("imported ")  # a different run: other scores
    from scoring.workspace import Workspace
    runs = Workspace(db).runs()
    assert len(runs) == 2
    statuses = {r["run_key"]: {t["trajectory_id"]: t["status"] for t in Workspace(db).trajectory_rows(r["run_key"])}
                for r in runs}
    assert {"s1-epoch1"} <= set().union(*statuses.values())
    assert any(st["s4-epoch1"] == "unscored" for st in statuses.values())


# --- the importer interface ------------------------------------------------------------------


def test_every_importer_implements_the_declared_interface():
    import inspect as pyinspect

    from scoring.importers import IMPORTERS

    for name, importer in IMPORTERS.items():
        assert name == importer.NAME
        assert importer.HINTS and all(isinstance(k, bytes) for k in importer.HINTS), name
        assert list(pyinspect.signature(importer.parse).parameters)[:3] == ["data", "source", "options"], name
        assert list(pyinspect.signature(importer.continuations).parameters) == ["data", "source"], name
        assert callable(importer.sniff), name


def test_the_registry_special_cases_no_format():
    """What differs between formats lives in their modules: the registry's code names none
    (its docstrings may)."""
    import ast
    import inspect as pyinspect

    from scoring import importers

    def code_of(f) -> str:
        (fn,) = ast.parse(pyinspect.getsource(f)).body
        assert isinstance(fn, ast.FunctionDef)
        if ast.get_docstring(fn) is not None:
            fn.body = fn.body[1:]
        return ast.unparse(fn)

    code = "".join(code_of(f) for f in (
        importers.parse_run, importers.load_run, importers.sniff_format, importers.sniff_file,
        importers.closest_format, importers.read_continuations))
    for name, importer in importers.IMPORTERS.items():
        module = importer.__name__.rsplit(".", 1)[1]  # type: ignore[attr-defined]
        assert module not in code and f'"{name}"' not in code, name


@pytest.mark.parametrize("path", ALL_INPUTS, ids=lambda p: p.name)
def test_importers_parse_only_the_bytes_they_are_given(path, monkeypatch):
    """Each format's parse reads no file: the registry reads the run and any continuation, and
    the importer's result is the same as load_run's."""
    import builtins
    import io
    import pathlib

    from scoring.importers import IMPORTERS, read_continuations

    data = path.read_bytes()
    fmt = sniff_format(data[:65536], str(path))
    continuations = read_continuations(IMPORTERS[fmt], data, str(path))
    expected = load_run(path)

    def refuse(*_a, **_k):
        raise AssertionError("an importer opened a file")

    for owner, attr in ((builtins, "open"), (io, "open"), (pathlib.Path, "open"), (pathlib.Path, "read_bytes"),
                        (pathlib.Path, "read_text"), (pathlib.Path, "is_file"), (pathlib.Path, "exists")):
        monkeypatch.setattr(owner, attr, refuse)
    run = IMPORTERS[fmt].parse(data, str(path), ParseOptions(continuations=continuations))
    monkeypatch.undo()
    assert run.trajectories == expected.trajectories and run.rejected == expected.rejected


def test_atif_continuations_are_passed_in_not_found_on_disk(tmp_path):
    from scoring.importers import Segment, atif

    first = (FIXTURES / "atif_fx.trajectory.json").read_bytes()
    second = (FIXTURES / "atif_fx.trajectory.cont-1.json").read_bytes()
    elsewhere = str(tmp_path / "upload.trajectory.json")  # nothing beside it on disk
    (alone,) = atif.parse(first, elsewhere).trajectories
    assert [c.tool for c in alone.tool_calls] == ["bash"] and alone.termination is Termination.ERROR
    assert "not found beside the file" in alone.termination_detail
    options = ParseOptions(continuations=(Segment(source="cont-1.json", data=second),))
    (joined,) = atif.parse(first, elsewhere, options).trajectories
    assert [c.tool for c in joined.tool_calls] == ["bash", "bash"] and joined.termination is Termination.COMPLETED
    assert joined.tool_calls == load_run(FIXTURES / "atif_fx.trajectory.json").trajectories[0].tool_calls
