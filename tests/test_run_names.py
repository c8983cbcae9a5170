"""Issue 35, names people can read: a run is named "model · task · attack or variant" from what its
format records, then how it was scored in words ("require-proof", "re-classifier NAME"); the name
is unique in the workspace (twins get their import time, or their short key), bounded, one line of
plain text, and the same at every door (the pages' read model, an evaluation, ``score --json``,
``litmus-review runs``)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner

from scoring.cli import main
from scoring.errors import InputError
from scoring.importers import load_run
from scoring.importers.agentdojo_dir import read_run_directory, read_run_zip
from scoring.model import RunHeader
from scoring.names import NAME_CHARS, PART_CHARS, Named, ScoredAs, run_name, unique_names
from scoring.workspace import Workspace, evaluation, views
from scoring.workspace.schema import MIGRATIONS

from .conftest import ROOT
from .run_name_logs import canonical_log, inspect_log
from .test_agentdojo_rundir import case, small_tree, write_tree

FIXTURES = ROOT / "tests" / "fixtures" / "importers"


# --- one name per format, from what it records ----------------------------------------------


def test_an_inspect_run_is_named_by_its_model_task_and_what_it_was_run_with(tmp_path):
    log = inspect_log(tmp_path / "a.json", task="inspect_evals/agentharm", model="openai/gpt-4o",
                      solver="react", task_args={"split": "harmful", "refusal_judge": "openai/gpt-4o-mini"},
                      task_args_passed={"split": "harmful"})
    header = load_run(log).header
    assert run_name(header) == "openai/gpt-4o · inspect_evals/agentharm · solver react, split=harmful"
    assert "Zq8xR2vTn4QpL9" not in run_name(header)  # the opaque run id is not the name
    shown = inspect_log(tmp_path / "b.json", task="inspect_test_utils/guess_number", task_display_name="guess_number",
                        model="hardcoded/hardcoded", task_args={"sample_count": 1})  # an older log: no _passed
    assert run_name(load_run(shown).header) == "hardcoded/hardcoded · guess_number · sample_count=1"


def test_agentdojo_runs_are_named_by_model_suites_and_attack(tmp_path):
    tree = tmp_path / "logdir"
    write_tree(tree, small_tree())
    named = sorted(run_name(r.header) for r in read_run_directory(tree))
    assert named == ["gpt-4o-2024-05-13 · banking, travel · important_instructions",
                     "gpt-4o-2024-05-13 · banking, travel · no attack"]
    one = tmp_path / "case.json"
    one.write_text(json.dumps({**case("slack", "user_task_3", "injection_task_2", "tool_knowledge",
                                      pipeline="gpt-4o-mini"), "agentdojo_package_version": "1.2"}))
    assert run_name(load_run(one).header) == "gpt-4o-mini · slack/user_task_3 · tool_knowledge, injection_task_2"
    export = load_run(FIXTURES / "agentdojo_invariant_signals.jsonl").header
    assert run_name(export) == "fixture-model · banking · important_instructions + no attack"


def test_tau2_litmus_and_canonical_runs_are_named_by_their_own_fields(tmp_path):
    results = json.loads((FIXTURES / "tau2_results.json").read_text())
    results["info"] = {**results.get("info", {}), "environment_info": {"domain_name": "telecom"},
                       "user_info": {"llm": "gpt-4o"}}
    (tmp_path / "tau2.json").write_text(json.dumps(results))
    assert run_name(load_run(tmp_path / "tau2.json").header) == "fixture-llm · tau2 telecom · user simulator gpt-4o"
    assert run_name(load_run(FIXTURES / "tau2_leaderboard_wrapper.json").header) == "fixture-model · tau2 airline"
    # LITMUS's log names no model and no task: the run id (its file's name) stands in
    assert run_name(load_run(FIXTURES / "litmus_pipeline.jsonl").header) == "model unknown · litmus_pipeline"
    declared = canonical_log(tmp_path / "c.jsonl", "m-1", "run-7", task="cyber-suite", variant="jailbreak v2")
    assert run_name(load_run(declared).header) == "m-1 · cyber-suite · jailbreak v2"
    assert run_name(load_run(canonical_log(tmp_path / "d.jsonl", "m-1", "run-7")).header) == "m-1 · run-7"
    # a model named after its file, like its run id (OpenAI chat exports): said once
    assert run_name(load_run(FIXTURES / "openai_chat_signals.jsonl").header) == "openai_chat_signals"


def test_how_a_run_was_scored_is_named_in_words_never_as_a_key_suffix():
    h = RunHeader(run_id="r", model="m", task="t", variant="v")
    assert run_name(h) == "m · t · v"
    assert run_name(dataclasses.replace(h, require_proof=True)) == "m · t · v · require-proof"
    assert run_name(h, ScoredAs(side_log=True, reclassifier="mypackage.judge:classify", verdict_map="agentharm")) == \
        "m · t · v · with side log · verdict map agentharm · re-classifier mypackage.judge:classify"
    proven = dataclasses.replace(h, proof_source="x.proof.jsonl", proof_sha256="ab" * 32)
    assert run_name(proven) == "m · t · v · proof side log"


def test_a_hostile_name_is_one_bounded_line_with_its_hidden_characters_shown():
    h = RunHeader(run_id="r", model="gpt\u202e-4o\nSAFE 100%", task="x" * 500, variant="[a](http://e.x) <b>b</b>")
    name = run_name(h)
    assert "\n" not in name and "\u202e" not in name and "⟨U+202E⟩" in name
    assert "x" * (PART_CHARS - 1) + "…" in name and len(name) <= NAME_CHARS
    assert name.endswith("[a](http://e.x) <b>b</b>")  # plain text: the places that show it escape it
    cut = run_name(RunHeader(run_id="r", model="m", task="y" * (PART_CHARS - 2) + "\u200b"))
    assert cut.endswith("y…")  # never half a ⟨U+200B⟩ mark


# --- unique in the workspace -------------------------------------------------------------------


def test_twins_get_their_import_times_or_their_short_keys_deterministically():
    a, b, c = ("a" * 64, "b" * 64, "c" * 64)
    apart = [Named(a, "m · t", "2026-11-30T09:15:02+00:00"), Named(b, "m · t", "2026-12-01T17:40:59+00:00"),
             Named(c, "m · other", "2026-12-01T17:40:59+00:00")]
    assert unique_names(apart) == {a: "m · t · imported 2026-11-30 09:15", b: "m · t · imported 2026-12-01 17:40",
                                   c: "m · other"}
    same_minute = [Named(a, "m · t", "2026-12-01T17:40:01"), Named(b, "m · t", "2026-12-01T17:40:59")]
    assert unique_names(same_minute) == {a: f"m · t · key {a[:12]}", b: f"m · t · key {b[:12]}"}
    assert unique_names(reversed(same_minute)) == unique_names(same_minute)  # order never matters
    # a file naming its run as another's disambiguated name: both take their whole key
    forged = [*same_minute, Named(c, f"m · t · key {a[:12]}", "2026-12-02T00:00:00")]
    names = unique_names(forged)
    assert len(set(names.values())) == 3 and names[a] == f"m · t · key {a}"
    assert names[c] == f"m · t · key {a[:12]} · key {c}"


def test_a_workspace_names_every_run_apart_and_the_same_at_every_door(tmp_path):
    db = tmp_path / "w.db"
    ws = Workspace(db)
    log = canonical_log(tmp_path / "run.jsonl", "gpt-x", "agentharm", task="harmful", variant="no defence")
    plain = ws.import_run(log).run_key
    proof = ws.import_run(log, require_proof=True).run_key
    other = canonical_log(tmp_path / "again.jsonl", "gpt-x", "agentharm-2", task="harmful", variant="no defence")
    twin = ws.import_run(other).run_key
    names = views.run_names(db)
    assert names[proof] == "gpt-x · harmful · no defence · require-proof"
    assert names[plain] != names[twin] and names[plain].startswith("gpt-x · harmful · no defence · ")
    assert len(set(names.values())) == 3
    # every door of the workspace says the same name: the read model, an evaluation, the CLI
    assert {r.run_key: r.name for r in views.runs(db)} == names
    assert views.run(db, proof).name == names[proof] and evaluation(ws, twin).name == names[twin]
    shown = json.loads(CliRunner().invoke(main, ["score", proof[:12], "--json", "--db", str(db)]).stdout)
    assert shown["name"] == names[proof] and shown["task"] == "harmful" and shown["variant"] == "no defence"
    listed = CliRunner().invoke(main, ["runs", "--db", str(db)]).stdout
    assert all(f"{k[:12]}  {n}  (canonical" in listed for k, n in names.items()), listed
    # the file alone (no workspace) carries its own name
    alone = json.loads(CliRunner().invoke(main, ["score", str(log), "--json", "--require-proof"]).stdout)
    assert alone["name"] == names[proof]


def test_runs_imported_before_names_keep_their_inspect_task_and_agentdojo_attack(tmp_path):
    db = tmp_path / "w.db"
    ws = Workspace(db)
    inspect = ws.import_run(inspect_log(tmp_path / "i.json", task="harmful_task", model="openai/llama-3")).run_key
    tree = tmp_path / "logdir"
    write_tree(tree, small_tree())
    dojo = [r.run_key for r in ws.import_runs(tree)]
    before = views.run_names(db)
    with ws.connect() as conn:  # back to schema 12: no task and no variant columns
        conn.execute("ALTER TABLE runs DROP COLUMN task")
        conn.execute("ALTER TABLE runs DROP COLUMN variant")
        conn.execute("PRAGMA user_version = 12")
        conn.conn.commit()
    assert Workspace(db).migrate() == len(MIGRATIONS)
    assert views.run_names(db) == before
    assert before[inspect] == "openai/llama-3 · harmful_task"
    assert sorted(before[k] for k in dojo) == ["gpt-4o-2024-05-13 · banking, travel · important_instructions",
                                               "gpt-4o-2024-05-13 · banking, travel · no attack"]


# --- the real logs ------------------------------------------------------------------------------


def test_the_real_agentdojo_directory_and_agentharm_logs_read_apart(shared_real):
    # The headers as the importers read them (the workspace names its runs from these fields:
    # the test above); importing the real logs would score them, which names do not need.
    zipped = shared_real / "agentdojo_rundir" / "Meta-SecAlign-70B.zip"
    dojo = [r.header for r in read_run_zip(zipped.read_bytes(), str(zipped))]
    harm = [load_run(p).header for p in sorted((shared_real / "inspect_ai" / "agentharm").glob("*.eval"))]
    strict = dataclasses.replace(harm[-1], require_proof=True)
    headers = {f"k{i:02d}": h for i, h in enumerate([*dojo, *harm, strict])}
    names = unique_names(Named(k, run_name(h), "2026-12-02T10:00:00") for k, h in headers.items())
    assert [names[f"k{i:02d}"] for i in range(len(dojo))] == [f"Meta-SecAlign-70B · banking · {attack}" for attack in (
        "direct", "ignore_previous", "important_instructions", "no attack")]
    assert [names["k04"], names["k05"]] == ["openai/meta-llama/Meta-Llama-3-8B-Instruct · agentharm_agent_task",
                                           "openai/meta-llama/Meta-Llama-3-8B-Instruct · harmful_task"]
    assert names["k06"] == names["k05"] + " · require-proof"
    assert len(set(names.values())) == len(names) == 7
    opaque = [h.run_id for h in harm]  # Inspect's run ids ("EhDixEGBdRC2wyeTxVQCf6")
    assert not any(rid in name for name in names.values() for rid in opaque)


@pytest.mark.parametrize("field", ["task", "variant"])
def test_a_canonical_header_refuses_a_task_or_variant_that_is_not_text(tmp_path, field):
    with pytest.raises(InputError, match=field):
        load_run(canonical_log(tmp_path / "bad.jsonl", "m", "r", **{field: 7}))
