"""The scoring request (issue 36): one typed value built once by each door and passed whole."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import itertools
from pathlib import Path
from typing import get_type_hints

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from scoring.cli import main
from scoring.dask_engine import fleet
from scoring.errors import EngineError
from scoring.importers.inspect_log import PRESETS, VerdictMap
from scoring.model import Run, RunHeader
from scoring.report import evaluate_run
from scoring.request import DEFAULT_REQUEST, ScoringOptions, ScoringRequest, SharedOptions, paired_side_log
from scoring.workspace import Workspace

from .conftest import SAMPLES

ROOT = Path(__file__).resolve().parent.parent
LOOSE = {"fmt", "payloads", "verdict_map", "reclassifier", "require_proof"}
"""The options a function would take one by one without the request."""


def test_every_field_is_a_keyword_of_the_options_and_documented():
    fields = {f.name for f in dataclasses.fields(ScoringRequest)}
    assert fields - {"stored_verdict"} == set(get_type_hints(ScoringOptions)) == ScoringOptions.__optional_keys__
    assert set(SharedOptions.__optional_keys__) == fields - {"payloads", "stored_verdict"}
    tree = ast.parse((ROOT / "scoring" / "request.py").read_text())
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ScoringRequest").body
    documented = {a.target.id for a, doc in itertools.pairwise(body)
                  if isinstance(a, ast.AnnAssign) and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)}
    assert documented == fields


def test_options_build_the_request_a_verdict_map_text_parsed_and_a_path_made_text():
    r = ScoringRequest.of(fmt="inspect", payloads=Path("a/b.payloads.jsonl"), verdict_map="agentharm_refusal",
                          reclassifier="m:f", require_proof=True)
    assert r.payloads == "a/b.payloads.jsonl" and isinstance(r.verdict_map, VerdictMap)
    assert r.verdict_text == str(PRESETS["agentharm_refusal"]) and r.require_proof and r.changes_scores
    assert ScoringRequest.of() == DEFAULT_REQUEST and not DEFAULT_REQUEST.changes_scores
    assert ScoringRequest.of(verdict_map="  ").verdict_map is None  # an empty field is no map
    assert ScoringRequest.of(r) is r


def test_a_request_and_loose_options_at_once_or_an_unknown_option_are_refused():
    with pytest.raises(TypeError, match="both given"):
        ScoringRequest.of(DEFAULT_REQUEST, require_proof=True)
    with pytest.raises(TypeError, match="not a scoring option: verdict"):
        ScoringRequest.of(verdict="agentharm")


def test_the_stored_form_reads_back_to_the_same_request_and_names_require_proof_only_when_asked():
    r = ScoringRequest.of(fmt="inspect", verdict_map="agentharm_refusal", reclassifier="m:f", require_proof=True)
    back = ScoringRequest.from_stored(r.stored())
    assert back.stored() == r.stored() and back.run_key("f" * 64) == r.run_key("f" * 64)
    assert dataclasses.replace(back, verdict_map=None, stored_verdict=None) == dataclasses.replace(r, verdict_map=None)
    assert "require_proof" not in DEFAULT_REQUEST.stored()  # a table's records from before it still match
    assert ScoringRequest.from_stored({"format": "tau2"}).fmt == "tau2"  # a runs row's or summary's column


def test_the_run_key_is_the_files_hash_unless_an_option_decided_the_scores():
    sha = "f" * 64
    assert DEFAULT_REQUEST.run_key(sha) == sha
    r = ScoringRequest.of(verdict_map="s:unsafe=1", reclassifier="m:f", require_proof=True)
    want = hashlib.sha256(f"{sha}:side:s:unsafe=1:classifier=m:f:proof=p:require_proof".encode()).hexdigest()
    assert r.run_key(sha, side_log_sha256="side", proof_sha256="p") == want
    # the side log's path is not in the key: the hash of its bytes is
    assert dataclasses.replace(r, payloads="x").run_key(sha) == r.run_key(sha)


RULE = st.builds(lambda outcome, values: f"{outcome}={','.join(values)}",
                 st.sampled_from(["unsafe", "safe", "inconclusive", "none"]),
                 st.lists(st.from_regex(r"[A-Za-z0-9_.]{1,8}", fullmatch=True), min_size=1, max_size=3))


@given(st.from_regex(r"[a-z_]{1,10}", fullmatch=True), st.lists(RULE, min_size=1, max_size=3))
def test_a_verdict_maps_stored_text_parses_back_to_itself(scorer, rules):
    # a stored run's request is read back from its text: the key it gives must be the stored one
    text = str(VerdictMap.parse(f"{scorer}:{';'.join(rules)}"))
    assert ScoringRequest.of(verdict_map=text).verdict_text == text


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_presets_text_parses_back_to_itself(preset):
    text = str(PRESETS[preset])
    assert ScoringRequest.of(verdict_map=text).verdict_text == text


def test_a_side_log_is_paired_once_given_or_found_beside_the_run(tmp_path):
    run = tmp_path / "r.jsonl"
    assert paired_side_log(DEFAULT_REQUEST, str(run)) == (DEFAULT_REQUEST, "")
    (tmp_path / "r.payloads.jsonl").write_text("")
    assert paired_side_log(DEFAULT_REQUEST, str(run)) == (
        dataclasses.replace(DEFAULT_REQUEST, payloads=str(tmp_path / "r.payloads.jsonl")), "found beside it")
    given_one = ScoringRequest.of(payloads="elsewhere.jsonl")
    assert paired_side_log(given_one, str(run)) == (given_one, "given")
    assert paired_side_log(DEFAULT_REQUEST, str(tmp_path / "r.payloads.jsonl"))[1] == ""  # never with itself


def _loose(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
            if len(names & LOOSE) >= 3:
                out.append(f"{path.relative_to(ROOT)}:{node.name}")
    return out


def test_no_function_takes_three_or_more_scoring_options_one_by_one_but_the_clis_builder():
    found = [f for p in sorted([*(ROOT / "scoring").rglob("*.py"), *(ROOT / "pages").rglob("*.py"), ROOT / "app.py"])
             for f in _loose(p)]
    assert found == ["scoring/cli.py:built"]  # SCORING_OPTIONS: the click options, built into the request


def test_a_stored_runs_verdict_text_keys_it_as_stored_in_an_older_spelling_too():
    # a workspace of an older version stored "s=C,I" (today's rules form is "s:unsafe=C,I"): its
    # key was made of that text, and a rescore must find the same key
    sha = "f" * 64
    old = ScoringRequest.from_stored({"format": "inspect", "verdict_map": "s=C,I"})
    assert old.verdict_text == "s=C,I" and old.verdict_map == VerdictMap.parse("s=C,I")
    assert old.run_key(sha) == hashlib.sha256(f"{sha}:s=C,I".encode()).hexdigest()
    assert ScoringRequest.of(verdict_map="s=C,I").verdict_text == "s:unsafe=C,I"  # a door's, today
    assert old.replace(verdict_map=None).verdict_text is None


def test_an_empty_classifier_spec_is_kept_to_be_refused_never_taken_for_none(tmp_path):
    assert ScoringRequest.of(reclassifier="").reclassifier == ""
    for args in (["score", str(ROOT / "sample_runs" / "observed-m1.jsonl")],
                 ["import", str(ROOT / "sample_runs" / "observed-m1.jsonl"), "--db", str(tmp_path / "w.db")]):
        said = CliRunner().invoke(main, [*args, "--classifier", ""])
        assert said.exit_code == 2 and "empty command" in said.output, said.output


def test_a_fleets_request_carries_no_side_log_and_a_parsed_run_takes_no_verdict_map():
    with pytest.raises(EngineError, match="per run"):
        fleet.score_runs(["a.jsonl"], None, ScoringRequest.of(payloads="a.payloads.jsonl"))
    with pytest.raises(ValueError, match="mapped when it was parsed"):
        evaluate_run(Run(header=RunHeader(run_id="r", model="m"), trajectories=()), verdict_map="s:unsafe=1")


def test_a_verdict_map_is_keyed_only_where_the_format_reads_one():
    vmap = PRESETS["agentharm_refusal"]
    file_sha = "f" * 64
    inspect = ScoringRequest(fmt="inspect", verdict_map=vmap)
    canonical = ScoringRequest(fmt="canonical", verdict_map=vmap)
    assert inspect.keyed_verdict == str(vmap) and inspect.run_key(file_sha) != file_sha
    assert inspect.former_run_key(file_sha) is None
    assert canonical.keyed_verdict is None and canonical.run_key(file_sha) == file_sha
    assert canonical.former_run_key(file_sha) == inspect.run_key(file_sha)  # how a workspace keyed it before
    assert ScoringRequest(verdict_map=vmap).keyed_verdict == str(vmap)  # not sniffed yet: kept


def test_a_canonical_run_imported_under_its_former_key_is_found_again(tmp_path, monkeypatch):
    # before, a canonical run imported with a verdict map was keyed with it; the same import again
    # finds that run (its labels with it) rather than importing the bytes a second time
    run = tmp_path / "compare-m2.jsonl"
    run.write_bytes((SAMPLES / "compare-m2.jsonl").read_bytes())
    ws = Workspace(tmp_path / "w.db")
    with monkeypatch.context() as m:
        m.setattr(ScoringRequest, "keyed_verdict", property(lambda self: self.verdict_text))
        before = ws.import_run(run, verdict_map="agentharm_refusal")
    assert before.run_key != hashlib.sha256(run.read_bytes()).hexdigest()
    again = ws.import_run(run, verdict_map="agentharm_refusal")
    assert again.already_present and again.run_key == before.run_key and len(ws.runs()) == 1
    fresh = Workspace(tmp_path / "fresh.db").import_run(run, verdict_map="agentharm_refusal")
    assert fresh.run_key == hashlib.sha256(run.read_bytes()).hexdigest()
