"""Categories from the harness (issue 35, item 4): where a format records a category for each task
(Inspect's sample ``metadata.category``: AgentHarm's Harassment; AgentDojo's suite and injection
task; tau2's domain; LITMUS's category id), its importer makes it the trajectory's ``category``,
and filters, charts, the per-category figures and every export group by it. A category moves no
status. Runs a workspace imported before have theirs re-derived from their original bytes as it
opens, statuses and labels untouched. Real logs are read from ../shared/real at test time."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import sqlite3
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

from streamlit.testing.v1 import AppTest

from pages._shared import charts, exports, loaders, state
from scoring.importers import agentdojo_dir, canonical, load_run, parse_run
from scoring.model import MAX_CATEGORY_CHARS, ReviewLabel, harness_category
from scoring.report import evaluate
from scoring.rows import COL
from scoring.score import SCORER_VERSION, score_run
from scoring.workspace import Workspace, evaluation, schema, views

from .conftest import ROOT
from .test_ingest import HEADER, SAMPLES, _first_lean_record, rows_both_ways

FIXTURES = ROOT / "tests" / "fixtures" / "importers"
AGENTHARM_LIKE = FIXTURES / "inspect_categories.json"
"""An AgentHarm-shaped Inspect log we wrote: seven samples, six with ``metadata.category``
(Harassment 3, Fraud 2, Drugs 1), graded by AgentHarm's refusal judge as ``model_graded_qa`` (one
``I``, no grade found: Inconclusive)."""
REFUSAL = "agentharm_refusal"
HARMFUL = "inspect_ai/agentharm/2025-03-30T15-24-56+02-00_harmful-task_F9R3gzDZt4vaZvt9varDiw.eval"
CANCELLED = "inspect_ai/agentharm/2025-03-30T14-56-26+02-00_agentharm-agent-task_TshbGmQEUcniUm6ni2F7yh.eval"
INVARIANT = "agentdojo_invariant_export/agentdojo-gpt-4o-mini-2024-07-18.jsonl"
RUNDIR = "agentdojo_rundir/Meta-SecAlign-70B.zip"
TAU2 = "tau2-bench/2025-08-10T02-44-06.496849_telecom_llm_agent_gpt-4o_user_simulator_gpt-4o.json"


def _statuses(run) -> dict[str, str]:
    return {s.trajectory_id: s.status.value for s in score_run(run)}


def _without_categories(run):
    return dataclasses.replace(run, trajectories=tuple(dataclasses.replace(t, category=None)
                                                       for t in run.trajectories))


def _inspect_log(samples: list[dict]) -> bytes:
    return json.dumps({"version": 2, "status": "success", "samples": samples,
                       "eval": {"run_id": "fx", "task": "t", "model": "m", "packages": {"inspect_ai": "0.3.99"}}}
                      ).encode()


def _inspect_sample(sid: str, metadata: dict | None) -> dict:
    return {"id": sid, "epoch": 1, "messages": [{"role": "user", "content": "go"},
                                                {"role": "assistant", "content": "no"}],
            **({"metadata": metadata} if metadata is not None else {})}


# --- each importer reads its format's category ------------------------------------------------


def test_inspect_reads_the_samples_metadata_category_and_no_status_moves():
    run = load_run(AGENTHARM_LIKE, verdict_map=views.parse_verdict_map(REFUSAL))
    assert {t.id: t.category for t in run.trajectories} == {
        "h1-epoch1": "Harassment", "h2-epoch1": "Harassment", "h3-epoch1": "Harassment", "f1-epoch1": "Fraud",
        "f2-epoch1": "Fraud", "d1-epoch1": "Drugs", "u1-epoch1": None}
    # the scorer's own field is untouched: naming a category does not make a task "asked"
    assert {t.intended_category for t in run.trajectories} == {None}
    assert _statuses(run) == _statuses(_without_categories(run))
    scored = {s.trajectory_id: s.intended_category for s in score_run(run)}  # the grouping field
    assert scored["h1-epoch1"] == "Harassment" and scored["u1-epoch1"] is None
    # without a verdict map nothing was asked: every sample stays no_verdict, category or not
    plain = load_run(AGENTHARM_LIKE)
    assert set(_statuses(plain).values()) == {"no_verdict"}


def test_a_category_from_a_log_is_bounded_and_only_ever_text(tmp_path):
    long = "Harassment " * 500
    hostile = "  **Drugs** <b>bold</b> [x](javascript:alert(1)) \u202e  "
    run = parse_run(_inspect_log([_inspect_sample("a", {"category": long}), _inspect_sample("b", {"category": hostile}),
                                  _inspect_sample("c", {"category": 7}), _inspect_sample("d", {"category": ["x"]}),
                                  _inspect_sample("e", {"category": "   "}), _inspect_sample("f", {"category": True})]),
                    "fx.json", "inspect")
    got = {t.id.split("-")[0]: t.category for t in run.trajectories}
    assert len(got["a"]) == MAX_CATEGORY_CHARS and got["a"].endswith("…") and got["a"].startswith("Harassment ")
    assert got["b"] == hostile.strip() and got["c"] == "7"
    assert got["d"] is None and got["e"] is None and got["f"] is None
    assert harness_category("x" * MAX_CATEGORY_CHARS) == "x" * MAX_CATEGORY_CHARS  # at the bound: whole
    # drawn as a label (plotly escapes, our "<br>" only) and written into the HTML report escaped
    log = tmp_path / "hostile.json"
    log.write_bytes(_inspect_log([_inspect_sample("b", {"category": hostile})]))
    ev = evaluate(log)
    assert [c["category"] for c in ev.as_dict()["by_category"]] == [hostile.strip()]
    labels = charts._category_label(hostile.strip(), {})
    assert "<b>" not in labels and "&lt;b&gt;" in labels
    page = exports.html_report([ev], [], exports.make_stamp([ev], None))
    assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page


def _agentdojo_case(suite: str, user_task: str, injection: str | None, security: bool) -> dict:
    return {"suite_name": suite, "pipeline_name": "fixture-model", "user_task_id": user_task,
            "injection_task_id": injection, "attack_type": "important_instructions" if injection else None,
            "injections": {}, "utility": True, "security": security, "error": None, "duration": 1.0,
            "messages": [{"role": "user", "content": "pay the bill"},
                         {"role": "assistant", "content": "Paid.", "tool_calls": None}]}


def test_agentdojo_trace_files_and_exports_are_grouped_by_suite_and_injection_task():
    native = parse_run(json.dumps(_agentdojo_case("banking", "user_task_0", "injection_task_4", True)).encode(),
                       "case.json", "agentdojo")
    (t,) = native.trajectories
    assert t.category == "banking · injection_task_4" and t.intended_category == "injection_success"
    lines = [{"metadata": {"benchmark": "agent-dojo", "name": "fixture"}}]
    for suite, inj in (("slack", None), ("slack", "injection_task_3"), ("travel", "injection_task_3")):
        case = _agentdojo_case(suite, "user_task_1", inj, False)
        lines.append({"index": len(lines), "messages": case["messages"],
                      "metadata": {k: case[k] for k in ("suite_name", "user_task_id", "injection_task_id",
                                                        "attack_type", "security")}})
    export = parse_run("\n".join(map(json.dumps, lines)).encode(), "export.jsonl", "agentdojo")
    assert [(t.category, t.intended_category) for t in export.trajectories] == [
        ("slack", None), ("slack · injection_task_3", "injection_success"),
        ("travel · injection_task_3", "injection_success")]  # the same injection task id, two suites
    assert _statuses(export) == _statuses(_without_categories(export))


def test_an_agentdojo_run_directory_is_grouped_by_the_case_path(tmp_path):
    root = tmp_path / "fixture-pipeline"
    for user_task, attack, inj, security in (("user_task_0", "direct", "injection_task_0", True),
                                             ("user_task_1", "direct", "injection_task_0", False),
                                             ("user_task_0", "direct", "injection_task_1", False),
                                             ("user_task_0", "none", "none", True)):
        case = _agentdojo_case("workspace", user_task, None if inj == "none" else inj, security)
        path = root / "workspace" / user_task / attack / f"{inj}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(case))
    runs = {r.header.run_id.rsplit("/", 1)[-1]: r for r in agentdojo_dir.read_run_directory(root)}
    assert Counter(t.category for t in runs["direct"].trajectories) == {
        "workspace · injection_task_0": 2, "workspace · injection_task_1": 1}
    assert [t.category for t in runs["none"].trajectories] == ["workspace"]


def test_tau2_simulations_take_the_runs_domain():
    results = load_run(FIXTURES / "tau2_results.json")
    doc = json.loads((FIXTURES / "tau2_results.json").read_text())
    doc["info"]["environment_info"] = {"domain_name": "retail", "policy": "..."}
    named = parse_run(json.dumps(doc).encode(), "r.json", "tau2")
    assert {t.category for t in results.trajectories} == {None}  # the fixture's info names no domain
    assert {t.category for t in named.trajectories} == {"retail"}
    wrapper = load_run(FIXTURES / "tau2_leaderboard_wrapper.json")
    assert {t.category for t in wrapper.trajectories} == {"airline"}


def test_litmus_rows_group_by_their_category_id():
    ev = evaluate(FIXTURES / "litmus_pipeline.jsonl")
    run = load_run(FIXTURES / "litmus_pipeline.jsonl")
    assert [c["category"] for c in ev.as_dict()["by_category"]] == sorted({t.intended_category
                                                                           for t in run.trajectories})


def test_a_canonical_records_category_is_read_written_and_the_lean_path_agrees():
    record = _first_lean_record()
    plain = dict(record)
    named = {**record, "category": "  web · exfiltration  "}
    long = {**record, "id": record["id"] + "-long", "category": "é" * 300}
    wrong = {**record, "id": record["id"] + "-wrong", "category": 3}
    data = HEADER + b"\n" + b"\n".join(json.dumps(r).encode() for r in (named, long, wrong)) + b"\n"
    lean, typed = rows_both_ways(SAMPLES / "observed-m1.jsonl", data)
    assert lean.rows == typed.rows and lean.lean == 2  # the two good records took the lean path
    cats = [r[COL["intended_category"]] for r in typed.rows]
    assert cats == ["web · exfiltration", "é" * (MAX_CATEGORY_CHARS - 1) + "…"]
    assert [r.message for r in typed.rejected] == ["field 'category' is int, expected str"]
    # without one, the record's intended category groups it, as before
    lean_plain, _ = rows_both_ways(SAMPLES / "observed-m1.jsonl", HEADER + b"\n" + json.dumps(plain).encode() + b"\n")
    assert lean_plain.rows[0][COL["intended_category"]] == record["intended_category"]
    t = canonical.parse_trajectory(named)
    assert canonical.parse_trajectory(canonical.dump_trajectory(t)) == t and t.category == "web · exfiltration"
    assert "category" not in canonical.dump_trajectory(canonical.parse_trajectory(plain))  # bytes as before


# --- the real logs ---------------------------------------------------------------------------------


def _eval_samples(path: Path) -> list[dict]:
    with zipfile.ZipFile(path) as z:
        return [json.loads(z.read(n)) for n in z.namelist() if n.startswith("samples/") and n.endswith(".json")]


def agentharm_categories(path: Path) -> dict[str, dict]:
    """The real AgentHarm log's figures per category, counted from its samples without the
    importer: trajectories, and what the refusal judge graded (Yes: a refusal, of Yes + No; its
    ``I`` is no grade: not judged). The doors' test holds every door's ``by_category`` to it."""
    grades: dict[str, Counter] = defaultdict(Counter)
    for s in _eval_samples(path):
        grades[s["metadata"]["category"]][s["scores"]["model_graded_qa"]["value"]] += 1
    return {c: {"trajectories": sum(g.values()), "harness_judged": g["Yes"] + g["No"],
                "safe_rate_lenient": g["Yes"] / (g["Yes"] + g["No"])} for c, g in grades.items()}


def test_the_real_agentharm_logs_have_the_categories_their_samples_name(shared_real):
    expected = agentharm_categories(shared_real / HARMFUL)  # scored at every door in test_doors.py
    assert {c: e["trajectories"] for c, e in expected.items()} == {
        "Harassment": 24, "Fraud": 24, "Sexual": 24, "Copyright": 24, "Disinformation": 20, "Drugs": 20, "Hate": 20,
        "Cybercrime": 20}
    assert sum(e["trajectories"] - e["harness_judged"] for e in expected.values()) == 3  # graded I
    cancelled = load_run(shared_real / CANCELLED)
    assert Counter(t.category for t in cancelled.trajectories) == {
        "Harassment": 14, "Disinformation": 8, "Drugs": 7, "Hate": 6, "Fraud": 4}
    assert {t.id: t.category for t in cancelled.trajectories} == {
        f"{s['id']}-epoch{s['epoch']}": s["metadata"]["category"] for s in _eval_samples(shared_real / CANCELLED)}


def test_the_real_agentdojo_runs_categories_and_each_injection_tasks_asr(shared_real):
    export = evaluate(shared_real / INVARIANT, with_trajectories=False).as_dict()["by_category"]
    assert {c["category"]: c["trajectories"] for c in export} == {
        "banking": 16, "banking · injection_task_3": 16, "slack": 21, "slack · injection_task_3": 21,
        "travel": 20, "travel · injection_task_3": 20, "workspace": 40, "workspace · injection_task_3": 40}
    assert all(c["no_verdict"] == c["trajectories"] for c in export if "·" not in c["category"])
    # the run directory: one run per attack, one category per injection task, and its ASR per
    # injection task as AgentDojo's reader counts it (security true) from the files themselves
    data = (shared_real / RUNDIR).read_bytes()
    runs = {r.header.run_id.rsplit("/", 1)[-1]: r for r in agentdojo_dir.read_run_zip(data, str(shared_real / RUNDIR))}
    succeeded: dict[tuple[str, str], int] = Counter()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for name in z.namelist():
            parts = name.split("/")
            if name.endswith(".json") and parts[3] == "important_instructions":
                succeeded[parts[3], parts[4][:-5]] += json.loads(z.read(name))["security"] in (True, "true", 1)
    ev = score_run(runs["important_instructions"])
    groups: dict[str, list] = defaultdict(list)
    for s in ev:
        groups[s.intended_category].append(s)
    assert sorted(groups) == [f"banking · injection_task_{i}" for i in range(9)]
    for category, members in groups.items():
        assert len(members) == 16
        claimed_harm = sum(1 for s in members if s.harness_judged and not s.lenient_safe)
        assert claimed_harm == succeeded["important_instructions", category.split(" · ")[1]]
    assert sum(succeeded.values()) == 14  # AgentDojo's own ASR: 14 of 144
    assert {t.category for t in runs["none"].trajectories} == {"banking"}
    tau2 = load_run(shared_real / TAU2)
    assert Counter(t.category for t in tau2.trajectories) == {"telecom": 20}


# --- the per-category figures and the exports ---------------------------------------------------


def test_the_per_category_figures_and_every_export_carry_the_category(tmp_path):
    ev = evaluate(AGENTHARM_LIKE, verdict_map=views.parse_verdict_map(REFUSAL))
    d = ev.as_dict()
    by = {c["category"]: c for c in d["by_category"]}
    assert set(by) == {None, "Drugs", "Fraud", "Harassment"}
    assert by["Fraud"]["trajectories"] == 2 and by["Fraud"]["unsafe"] == 1 and by["Fraud"]["safe_rate_lenient"] == 0.5
    assert by["Drugs"]["phantom_safety_pp"] == 0.0 and by[None]["trajectories"] == 1
    assert sum(c["trajectories"] for c in d["by_category"]) == d["trajectories"]
    stamp = exports.make_stamp([ev], None)
    assert json.loads(exports.aggregates_json([ev], stamp))["runs"][0]["by_category"] == d["by_category"]
    frame = exports.categories_frame([ev])
    assert list(frame.columns) == list(exports.CATEGORY_COLUMNS)
    fraud = frame[frame["category"] == "Fraud"].iloc[0]
    assert fraud["trajectories"] == 2
    assert fraud["phantom_safety_high_pp"] == by["Fraud"]["phantom_safety_bounds_pp"]["high"]
    assert fraud["run_id"] == "fx-agentharm-categories" and fraud["content_sha256"] == ev.run.content_sha256
    csv = exports.stamped_csv(frame, stamp)
    assert csv.splitlines()[0].startswith("run,run_id,run_key,content_sha256,scorer_version,category,")
    assert "Harassment" in csv and fraud["run_key"] == ev.run.content_sha256
    assert fraud["scorer_version"] == ev.scorer_version
    assert csv.splitlines()[0].endswith(",labels_as_of,labels_counted,exported_at")  # the export time inside
    page = exports.html_report([ev], [], stamp)
    assert "By category: fx-agentharm-categories" in page and "<td>Harassment</td>" in page
    assert "<i>no category</i>" in page
    fig = charts.phantom_by_category(dict(ev.by_category or {}), ev.run.header.taxonomy)
    drawn = {y for trace in fig.data for y in trace.y}
    assert {"Drugs", "Fraud", "Harassment"} <= drawn


# --- the app -------------------------------------------------------------------------------------


def _app_on(tmp_path, monkeypatch, path: Path, verdict: str | None = REFUSAL) -> tuple[AppTest, str]:
    monkeypatch.setattr(loaders, "DB_PATH", tmp_path / "app.db")
    key = Workspace(tmp_path / "app.db").import_run(
        path, verdict_map=views.parse_verdict_map(verdict) if verdict else None).run_key
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.session_state[state.SELECTED_RUNS] = [key]
    at.run()
    assert not at.exception, at.exception
    return at, key


def test_the_category_filter_and_the_category_chart_have_an_agentharm_runs_categories(tmp_path, monkeypatch):
    at, _key = _app_on(tmp_path, monkeypatch, AGENTHARM_LIKE)
    at.switch_page("pages/trajectories.py").run()
    assert not at.exception, at.exception
    category = at.multiselect(key="filter_category")
    assert category.options == ["Drugs", "Fraud", "Harassment"]
    category.select("Fraud").run()
    assert sorted(at.dataframe[0].value["trajectory_id"]) == ["f1-epoch1", "f2-epoch1"]
    at.switch_page("pages/safe_rates.py").run()
    assert not at.exception, at.exception
    assert not any("no category data" in c.value for c in at.caption)
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    phantom = next(s for s in specs if s["layout"]["title"]["text"].startswith("Phantom safety by category"))
    assert {y for trace in phantom["data"] for y in trace["y"]} == {"Drugs", "Fraud", "Harassment"}


# --- runs imported before the importers read categories -----------------------------------------


def _as_imported_before(db: Path, key: str) -> None:
    """As a workspace written before schema 15 holds an Inspect run: no category on its rows, no
    columns copy with one, and no record of how its categories were read."""
    with sqlite3.connect(db) as con:
        con.execute("update runs set category_version = NULL where run_key = ?", [key])
        con.execute("update trajectories set intended_category = NULL where run_key = ?", [key])
        con.execute("delete from run_columns where run_key = ?", [key])


def test_a_run_imported_before_gets_its_categories_on_open_and_nothing_else_moves(tmp_path, monkeypatch):
    db = tmp_path / "ws.db"
    ws = Workspace(db)
    key = ws.import_run(AGENTHARM_LIKE, verdict_map=views.parse_verdict_map(REFUSAL)).run_key
    ws.add_label(key, "h3-epoch1", "ana", ReviewLabel.GENUINE_DECLINE)
    fresh = evaluation(ws, key).as_dict()
    rows_before = {r["trajectory_id"]: (r["status"], r["reason"]) for r in ws.trajectory_rows(key)}
    _as_imported_before(db, key)
    assert "by_category" in fresh and evaluation(ws, key).as_dict()["by_category"] != fresh["by_category"]
    monkeypatch.setattr(schema, "_MIGRATED", set())  # a new process opens the workspace
    reopened = Workspace(db)
    assert [(c.run_key, c.done) for c in reopened.categories_on_open] == [(key, True)]
    assert reopened.rescored_on_open == ()  # a category is no scorer change
    assert evaluation(reopened, key).as_dict() == fresh  # the figures per category of a fresh import
    assert {r["trajectory_id"]: (r["status"], r["reason"]) for r in reopened.trajectory_rows(key)} == rows_before
    assert reopened.stored_run(key).scorer_version == SCORER_VERSION
    assert not reopened.stored_run(key).categories_outdated
    # the label counts as before: the record its reviewer replayed was not touched
    assert reopened.final_labels(key) == {"h3-epoch1": ReviewLabel.GENUINE_DECLINE}
    with sqlite3.connect(db) as con:
        assert con.execute("select count(*) from label_fences").fetchone() == (0,)
    monkeypatch.setattr(schema, "_MIGRATED", set())
    assert Workspace(db).categories_on_open == ()  # once


def test_a_run_whose_bytes_are_gone_says_so_and_its_file_imported_again_reads_them(tmp_path, monkeypatch):
    db = tmp_path / "ws.db"
    ws = Workspace(db)
    key = ws.import_run(AGENTHARM_LIKE, verdict_map=views.parse_verdict_map(REFUSAL)).run_key
    original = Path(ws.run(key)["original_path"])
    _as_imported_before(db, key)
    original.rename(original.with_name(original.name + ".moved"))
    monkeypatch.setattr(schema, "_MIGRATED", set())
    reopened = Workspace(db)
    (outcome,) = reopened.categories_on_open
    assert not outcome.done and "not in the workspace" in outcome.why
    assert reopened.stored_run(key).categories_outdated
    assert next(r for r in views.runs(db) if r.run_key == key).categories_outdated
    # the Safe rates page says why it has no category data
    monkeypatch.setattr(loaders, "DB_PATH", db)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.session_state[state.SELECTED_RUNS] = [key]
    at.run()
    assert not at.exception, at.exception
    assert any("before litmus-review read the harness's own" in c.value for c in at.caption)
    # its file imported again: the same run, its categories read from the bytes given
    again = Workspace(db).import_run(AGENTHARM_LIKE, verdict_map=views.parse_verdict_map(REFUSAL))
    assert again.run_key == key and again.already_present
    assert not Workspace(db).stored_run(key).categories_outdated
    cats = {c["category"] for c in evaluation(Workspace(db), key).as_dict()["by_category"]}
    assert cats == {None, "Drugs", "Fraud", "Harassment"}


def test_original_bytes_todays_importer_refuses_never_stop_the_workspace_opening(tmp_path, monkeypatch):
    db = tmp_path / "ws.db"
    key = Workspace(db).import_run(AGENTHARM_LIKE, verdict_map=views.parse_verdict_map(REFUSAL)).run_key
    original = Path(Workspace(db).run(key)["original_path"])
    original.write_bytes(b'{"eval": {}, "version": 2, "samples": [')  # cut short; its hash recorded too
    _as_imported_before(db, key)
    with sqlite3.connect(db) as con:
        con.execute("update runs set file_sha256 = ? where run_key = ?",
                    [hashlib.sha256(original.read_bytes()).hexdigest(), key])
    monkeypatch.setattr(schema, "_MIGRATED", set())
    (outcome,) = Workspace(db).categories_on_open
    assert not outcome.done and outcome.why.startswith("today's importer cannot read its original bytes")
    assert Workspace(db).stored_run(key).categories_outdated


def test_a_canonical_run_imported_before_is_re_derived_only_where_its_records_name_a_category(tmp_path, monkeypatch):
    record = _first_lean_record()
    named = tmp_path / "named.jsonl"
    named.write_bytes(HEADER + b"\n" + json.dumps({**record, "category": "web"}).encode() + b"\n")
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(HEADER + b"\n" + json.dumps({**record, "id": "other"}).encode() + b"\n")
    db = tmp_path / "ws.db"
    keys = [Workspace(db).import_run(p).run_key for p in (named, plain)]
    with sqlite3.connect(db) as con:  # as the release before wrote them: the intended category on the rows
        con.execute("update runs set category_version = NULL")
        con.execute("update trajectories set intended_category = ?", [record["intended_category"]])
        con.execute("delete from run_columns")
    monkeypatch.setattr(schema, "_MIGRATED", set())
    done = {c.run_key: c.why for c in Workspace(db).categories_on_open}
    assert done == {keys[0]: "categories re-derived: 1 changed", keys[1]: "categories re-derived: 0 changed"}
    assert [c["category"] for c in evaluation(Workspace(db), keys[0]).as_dict()["by_category"]] == ["web"]
    assert [c["category"] for c in evaluation(Workspace(db), keys[1]).as_dict()["by_category"]] == [
        record["intended_category"]]
