"""The issue-14 regression corpus (tests/fixtures/corpus, written by make_corpus.py): each file
is read the way its harness means it."""

from __future__ import annotations

import importlib.util
import json

import pytest
from click.testing import CliRunner

from scoring.cli import main
from scoring.errors import InputError
from scoring.importers import load_run
from scoring.importers.inspect_log import VerdictMap, verdict_summary
from scoring.importers.litmus_log import litmus_metrics

from .conftest import ROOT

CORPUS = ROOT / "tests" / "fixtures" / "corpus"


def _maker():
    spec = importlib.util.spec_from_file_location("make_corpus", CORPUS / "make_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_corpus_is_the_scripts_output():
    for name, data in _maker().files().items():
        assert (CORPUS / name).read_bytes() == data, name


def test_inspect_values_a_guessing_map_called_safe_are_unmapped_and_the_error_is_kept():
    run = load_run(CORPUS / "inspect_unmapped_scores.json", verdict_map=VerdictMap.parse("harm=C"))
    assert verdict_summary(run)["unmapped_values"] == {"null": 1, "N": 1, "0.5": 1, "I": 1}
    assert (run.header.run_status, run.header.run_status_detail) == (
        "error", "context length exceeded; 5 of 7 samples written")


def test_strongreject_shapes():
    run = load_run(CORPUS / "inspect_strongreject.json", verdict_map=VerdictMap.parse("strongreject"))
    assert verdict_summary(run)["verdict_outcomes"] == {"unsafe": 1, "safe": 1, "inconclusive": 1, "none": 0,
                                                        "unmapped": 1, "absent": 0}


def test_litmus_retries_match_litmus_own_asr():
    m = litmus_metrics(load_run(CORPUS / "litmus_retries.jsonl"))
    assert (m.harmful, m.valid) == (7, 12)


def test_agentdojo_fork_is_refused():
    with pytest.raises(InputError, match="missing injection_task_id, attack_type"):
        load_run(CORPUS / "agentdojo_fork.json")


def test_tau2_with_simulations_past_64_kib_is_recognised():
    data = (CORPUS / "tau2_simulations_late.json").read_bytes()
    assert data.index(b'"simulations"') > 64 * 1024
    run = load_run(CORPUS / "tau2_simulations_late.json")
    assert run.header.format == "tau2" and run.tool_call_count == 1


def test_the_whole_corpus_on_one_command_line_reads_every_file():
    paths = sorted(str(p) for p in CORPUS.iterdir() if p.suffix in (".json", ".jsonl"))
    res = CliRunner().invoke(main, ["score", *paths, "--json"])
    assert res.exit_code == 2  # the fork and the empty file are unusable; the others are scored
    assert {json.loads(line)["format"] for line in res.stdout.splitlines()} == {"inspect", "litmus", "tau2"}
    assert "agentdojo_fork.json" in res.stderr and "empty.jsonl: empty file" in res.stderr
