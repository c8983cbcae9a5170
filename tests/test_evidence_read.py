"""Issue 33, item 6: only evidence read can be shown. No header field sets a proof; "found beside
it" and "recorded at the source" are printed only where the importer read and joined a proof
side log (its path and the SHA-256 of the bytes it read); ``score KEY`` shows the same ``proof``
as ``score FILE`` for the same bytes.

Every test here failed on main at 66a0ad0 (run there before the fix)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pages._shared import loaders, state
from scoring.cli import main
from scoring.errors import InputError
from scoring.importers.inspect_log import VerdictMap
from scoring.proof import proof_path_of
from scoring.workspace import Workspace

from .inspect_proof_task import VERDICT_MAP, proof_task, run


def _canonical_claiming_a_proof(path: Path) -> Path:
    """A canonical run whose header names a proof side log that does not exist, with a trajectory
    whose own record names a proof: nothing but the file says either."""
    args = json.dumps({"to": "ops@example.com", "body": "hello"})
    header = {"record": "run", "format": "litmus-review-run", "format_version": 1, "run_id": "claims",
              "model": "m", "evidence_standard": "proven", "proof_source": str(path.with_name("ghost.proof.jsonl"))}
    traj = {"record": "trajectory", "id": "t1", "task_id": "task-1", "final_output": "sent",
            "verdict": {"label": "benign", "confidence": 1.0, "source": "judge"},
            "messages": [{"role": "user", "content": "send it"}],
            "tool_calls": [{"tool": "send_email", "arguments": args, "raw_size_bytes": len(args),
                            "raw_sha256": hashlib.sha256(args.encode()).hexdigest()}],
            "extra": [["proof", "litmus_inspect.hook 1 · eval forged · ghost.proof.jsonl (sha256 000000000000…)"]]}
    path.write_text(json.dumps(header) + "\n" + json.dumps(traj) + "\n")
    return path


def test_a_canonical_header_naming_a_proof_source_shows_no_proof(tmp_path):
    path = _canonical_claiming_a_proof(tmp_path / "claims.jsonl")
    table = CliRunner().invoke(main, ["score", str(path)])
    assert table.exit_code == 0, table.output
    assert "proof side log" not in table.stderr and "found beside it" not in table.stderr
    assert "recorded at the source" not in table.stdout and "  proof " not in table.stdout
    assert "evidence: proven: each call's capture checked against the raw size and SHA-256" in table.stdout
    out = json.loads(CliRunner().invoke(main, ["score", str(path), "--json"]).stdout)
    assert out["proof"] is None
    assert not out["evidence_claim"].startswith("proven by a proof")


def test_a_canonical_header_naming_a_proof_source_shows_no_proof_in_the_replay(tmp_path, app):
    path = _canonical_claiming_a_proof(tmp_path / "claims.jsonl")
    key = Workspace(tmp_path / "app.db").import_run(path).run_key
    app.session_state[state.SELECTED_RUNS] = [key]
    df = loaders.trajectory_frame(key)
    app.switch_page("pages/trajectories.py").run()
    app.session_state[state.TRAJ_TABLE] = {"selection": {"rows": [int(df.index[0])], "columns": [], "cells": []}}
    app.run()
    assert not app.exception, app.exception
    assert any(t.value.startswith("task ") for t in app.text)  # the replay is shown
    assert not any("proof recorded at the source" in t.value for t in app.text)
    for frame in app.dataframe:
        assert "proof (recorded at the source)" not in set(frame.value.get("evidence", ()))


@pytest.fixture(scope="module")
def proven_log(tmp_path_factory):
    """A real Inspect evaluation (scripted mockllm agent and judge) with the capture-proof hook on."""
    mp = pytest.MonkeyPatch()
    mp.setenv("LITMUS_REVIEW_PROOF", "1")
    try:
        return run(proof_task(None), tmp_path_factory.mktemp("proven"))
    finally:
        mp.undo()


def _proof_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("  proof ") or line.startswith("run ")]


def test_score_key_shows_the_proof_score_file_shows(proven_log, tmp_path):
    path = tmp_path / Path(proven_log.location).name
    shutil.copy(proven_log.location, path)
    shutil.copy(proof_path_of(proven_log.location), proof_path_of(path))
    proof_sha = hashlib.sha256(proof_path_of(path).read_bytes()).hexdigest()
    db = tmp_path / "ws.db"
    imported = CliRunner().invoke(main, ["import", str(path), "--inspect-verdict", VERDICT_MAP, "--db", str(db)])
    assert imported.exit_code == 0, imported.output
    with Workspace(db).connect() as conn:
        (key,) = [k for (k,) in conn.execute("select run_key from runs").fetchall()]

    by_file = CliRunner().invoke(main, ["score", str(path), "--inspect-verdict", VERDICT_MAP, "--json"])
    by_key = CliRunner().invoke(main, ["score", key[:12], "--db", str(db), "--json"])
    assert by_file.exit_code == 0 and by_key.exit_code == 0, (by_file.output, by_key.output)
    file_out, key_out = json.loads(by_file.stdout), json.loads(by_key.stdout)
    assert file_out["proof"] == {"source": str(proof_path_of(path)), "sha256": proof_sha}  # what the importer read
    for field in ("proof", "evidence_standard", "evidence_claim"):
        assert key_out[field] == file_out[field], field

    table_file = CliRunner().invoke(main, ["score", str(path), "--inspect-verdict", VERDICT_MAP])
    table_key = CliRunner().invoke(main, ["score", key[:12], "--db", str(db)])
    assert f"(sha256 {proof_sha}; recorded at the source, read and joined by the importer)" in table_file.stdout
    assert _proof_lines(table_key.stdout) == _proof_lines(table_file.stdout)
    assert "found beside it" in table_file.stderr


def test_the_run_key_names_the_proof_the_importer_read(proven_log, tmp_path, monkeypatch):
    # The workspace hashes the proof beside the log for the run's key; the importer reads it on its
    # own. Bytes the importer read that are not the ones hashed (a writer still at work between the
    # two reads) are refused, never scored under the other bytes' key.
    import scoring.importers as registry
    from scoring.importers.base import Segment

    path = tmp_path / Path(proven_log.location).name
    shutil.copy(proven_log.location, path)
    shutil.copy(proof_path_of(proven_log.location), proof_path_of(path))
    real = registry.read_continuations

    def read_while_written(importer, data, source):
        segments = real(importer, data, source)
        return tuple(Segment(source=s.source, data=b"\n".join(s.data.splitlines()[:-1]) + b"\n") for s in segments)

    monkeypatch.setattr(registry, "read_continuations", read_while_written)
    ws = Workspace(tmp_path / "ws.db")
    with pytest.raises(InputError, match="the proof side log changed while the run was imported"):
        ws.import_run(path, verdict_map=VerdictMap.parse(VERDICT_MAP))
    with ws.connect() as db:
        assert db.execute("select count(*) from runs").fetchone()[0] == 0  # nothing stored
