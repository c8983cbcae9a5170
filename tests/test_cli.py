from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from scoring.cli import main

from .conftest import ROOT, SAMPLES

OBSERVED = str(SAMPLES / "observed-m1.jsonl")
PAYLOADS = str(SAMPLES / "observed-m1.payloads.jsonl")
REQUIRED = {"run_id", "format", "trajectories", "tool_calls", "scored", "safe", "unsafe", "unscored",
            "unscored_by_reason", "inconclusive", "safe_rate_lenient", "safe_rate_strict",
            "phantom_safety_pp", "ci95", "evidence_standard", "rejected_records"}


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_json_has_every_documented_key_and_counts_add_up():
    res = run("score", OBSERVED, "--json")
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout)
    assert obj.keys() >= REQUIRED
    assert obj["safe"] + obj["unsafe"] + obj["unscored"] + obj["inconclusive"] == obj["trajectories"] == 2000


def test_table_output_names_unscored_beside_the_rate():
    res = run("score", OBSERVED, "--payloads", PAYLOADS)
    assert res.exit_code == 0
    assert "UNSCORED" in res.stdout and "phantom safety" in res.stdout and "+2." in res.stdout
    assert "; 1 payload rejected" in res.stdout  # the one planted mismatch, in the singular


def test_fail_on_unscored_exits_3():
    assert run("score", OBSERVED, "--fail-on-unscored", "0.01").exit_code == 3
    assert run("score", OBSERVED, "--fail-on-unscored", "0.5").exit_code == 0


def test_unusable_input_exits_2_with_a_located_message_and_no_traceback(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"record": "run", "format": "litmus-review-run", "format_version": 1}\n')
    res = run("score", str(bad))
    assert res.exit_code == 2
    assert f"{bad}:1" in res.stderr and "missing field" in res.stderr and "Traceback" not in res.output


def test_payloads_must_pair_with_paths():
    res = run("score", OBSERVED, OBSERVED, "--payloads", PAYLOADS)
    assert res.exit_code == 2 and "one per run" in res.output
    assert "--payloads was given 1 time for 2 runs" in res.output


def test_a_json_error_message_says_at_once():
    from scoring.importers._common import decode_json_line

    err = decode_json_line(b'{"id": "unterminated')
    assert str(err) == "invalid JSON: Unterminated string starting at column 8"


def test_python_dash_m_scoring_is_the_same_command():
    out = subprocess.run([sys.executable, "-m", "scoring", "score", OBSERVED, "--json"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and json.loads(out.stdout)["trajectories"] == 2000


def test_large_canonical_files_are_scored_on_worker_processes_with_the_same_numbers(monkeypatch):
    # score FILE of a large canonical run scores its blocks on two worker processes: the same
    # settle, the same object (key for key) as one block in this process.
    from scoring import ingest, pipeline

    direct = json.loads(run("score", OBSERVED, "--json", "--no-auto-payloads").stdout)
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(pipeline, "IMPORT_WORKERS", 2)
    monkeypatch.setattr(ingest, "BLOCK_BYTES", 64 * 1024)
    pooled = json.loads(run("score", OBSERVED, "--json", "--no-auto-payloads").stdout)
    assert pooled == direct and direct["trajectories"] == 2000


def test_serve_starts_the_app_on_localhost(tmp_path):
    import urllib.request

    from .helpers import free_port, wait_for_health

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "scoring", "serve", "--port", str(port)], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_for_health(port, 60):
            pytest.fail("the app did not answer /_stcore/health within 60 s")
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    with pytest.raises(OSError):  # the server went with it (no orphan left holding the port)
        urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1)


def test_scoring_options_given_with_an_imported_runs_key_are_refused_not_ignored(tmp_path):
    from scoring.workspace import Workspace

    db = tmp_path / "w.db"
    key = Workspace(db).import_run(SAMPLES / "compare-m2.jsonl").run_key
    plain = CliRunner().invoke(main, ["score", key[:12], "--db", str(db)])
    assert plain.exit_code == 0, plain.output
    for option in (["--require-proof"], ["--inspect-verdict", "agentharm"], ["--format", "canonical"]):
        got = CliRunner().invoke(main, ["score", key[:12], "--db", str(db), *option])
        assert got.exit_code == 2 and "apply when a file is scored, not to an imported run" in got.stderr, option
