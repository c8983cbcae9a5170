"""A file that is one JSON document, or JSON lines, is read within its budget (issue 34 items 2
and 6, attack finding F2): a legacy Inspect ``.json`` of ten million ``{}`` samples (28.6 MiB)
took 6.28 GB: the parse of ten million objects, then an item and a rejection each, none of it
counted against the file's budget. The same held for every whole-document importer (tau2,
AgentDojo, ATIF, OpenAI chat) and the JSON-lines ones. Each test lowers the budget through
``decode_budget`` so the files are small; benches/eval_bombs.py measures the full-size file."""

from __future__ import annotations

import io
import json
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from scoring.errors import InputError, OverBudgetError
from scoring.importers import _zip, agentdojo_dir, parse_run

BUDGET = 8 * 1024 * 1024
EVAL = {"run_id": "r", "model": "m", "task": "t"}


def legacy_log(samples: bytes, count: int) -> bytes:
    """A legacy Inspect ``.json`` whose samples are ``count`` copies of ``samples``."""
    head = json.dumps({"version": 2, "eval": EVAL})[:-1].encode()
    return head + b', "samples": [' + b",".join([samples] * count) + b"]}"


def traced(fn) -> tuple[int, BaseException | None]:
    """(peak bytes allocated while ``fn`` ran, the InputError it raised or None)."""
    tracemalloc.start()
    try:
        fn()
        err = None
    except InputError as exc:
        err = exc
    finally:
        _now, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak, err


def test_a_legacy_log_whose_parse_passes_its_budget_is_refused_before_it_is_parsed():
    # 300 KB of `{},`: parsed, each three bytes are a 64-byte dict and its slot (the 28.6 MiB
    # file of the attack is this at ten million samples).
    data = legacy_log(b"{}", 100_000)
    assert _zip.json_parse_cost(data) > BUDGET > 20 * len(data)
    peak, err = traced(lambda: parse_run(data, "flood.json", "inspect", decode_budget=BUDGET))
    assert isinstance(err, OverBudgetError), err
    assert err.source == "flood.json" and f"{BUDGET:,}" in err.message and "JSON document" in err.message
    assert peak < 0.1 * BUDGET, f"{peak:,} bytes allocated before the refusal"


def test_a_legacy_log_whose_rejections_pass_its_budget_is_refused_as_they_are_made():
    # Its parse fits the budget; its 30,000 empty samples are a rejection each, which the run
    # keeps (a Rejection, its id): past the budget before the last one.
    data = legacy_log(b"{}", 30_000)
    assert _zip.json_parse_cost(data) < BUDGET
    peak, err = traced(lambda: parse_run(data, "empty.json", "inspect", decode_budget=BUDGET))
    assert isinstance(err, OverBudgetError), err
    assert err.source == "empty.json" and "records read so far" in err.message and f"{BUDGET:,}" in err.message
    assert "samples[" in err.message
    assert peak < 1.1 * BUDGET, f"{peak:,} bytes allocated for a {BUDGET:,}-byte budget"


def test_a_legacy_log_inside_its_budget_is_read_whole():
    # The bound of its parse just fits; its trajectories keep the document's strings (each
    # sample's share of the document is let go once its trajectory is made): all read.
    sample = json.dumps({"id": 0, "epoch": 1, "messages": [{"role": "user", "content": "x" * 40_000}]})
    data = legacy_log(b"", 0)[:-2] + b",".join(
        sample.replace('"id": 0', f'"id": {i}').encode() for i in range(90)) + b"]}"
    budget = _zip.json_parse_cost(data) + 64 * 1024
    assert budget < 3 * len(data)  # the document's text, its strings and the trajectories' would not fit apart
    run = parse_run(data, "fits.json", "inspect", decode_budget=budget)
    assert len(run.trajectories) == 90 and not run.rejected


def test_the_whole_document_formats_share_the_rule():
    # One rule below the importers: every format that parses a whole file as one document.
    floods = {
        "tau2": b"[" + b",".join([b"{}"] * 100_000) + b"]",
        "openai_chat": b"[" + b",".join([b"[]"] * 100_000) + b"]",
        "agentdojo": json.dumps({"suite_name": "s", "pipeline_name": "p", "user_task_id": "u", "messages": []})[
            :-2].encode() + b",".join([b"{}"] * 100_000) + b"]}",
        "atif": b'{"schema_version": "ATIF-v1.2", "steps": [' + b",".join([b"{}"] * 100_000) + b"]}",
    }
    for fmt, data in floods.items():
        peak, err = traced(lambda fmt=fmt, data=data: parse_run(data, f"flood.{fmt}", fmt, decode_budget=BUDGET))
        assert isinstance(err, OverBudgetError), (fmt, err)
        assert err.source == f"flood.{fmt}" and "JSON document" in err.message, (fmt, err.message)
        assert peak < 0.1 * BUDGET, (fmt, peak)


@pytest.mark.parametrize("fmt, line", [
    ("openai_chat", b"[]"),  # a list of no messages: a rejection each
    ("anthropic_messages", b'{"sessionId": "s", "message": {"role": "user", "content": "x"}, "type": "user"}'),
    ("litmus", b"1"),  # not an object: a rejection each
    ("agentdojo", b"{}"),  # an Invariant export's line without its metadata
])
def test_json_lines_and_what_is_made_of_them_are_counted_in_the_budget(fmt, line):
    # Every line is kept (parsed, then a record or a rejection) until the run is built: a file
    # of small lines is as many objects, items and rejections.
    head = b'{"metadata": {"name": "agent-dojo"}}\n' if fmt == "agentdojo" else b""
    data = head + b"\n".join([line] * 60_000) + b"\n"
    peak, err = traced(lambda: parse_run(data, f"lines.{fmt}", fmt, decode_budget=BUDGET))
    assert isinstance(err, OverBudgetError), (fmt, err)
    assert err.source == f"lines.{fmt}" and f"{BUDGET:,}" in err.message, err.message
    assert peak < 1.1 * BUDGET, f"{fmt}: {peak:,} bytes allocated for a {BUDGET:,}-byte budget"


def test_a_line_whose_parse_passes_the_budget_is_refused_at_its_line():
    data = b'{"messages": []}\n[' + b",".join([b"{}"] * 100_000) + b"]\n"
    err = traced(lambda: parse_run(data, "wide.jsonl", "openai_chat", decode_budget=BUDGET))[1]
    assert isinstance(err, OverBudgetError) and err.line == 2 and "line 2" in err.message, err


def test_a_chat_array_refused_as_a_document_is_not_read_again_as_lines():
    # openai_chat reads a file that is not one document as JSON lines; one refused for its
    # budget is refused, not parsed once more line by line.
    data = b"[" + b",\n".join([b"[]"] * 100_000) + b"]"
    err = traced(lambda: parse_run(data, "array.json", "openai_chat", decode_budget=BUDGET))[1]
    assert isinstance(err, OverBudgetError) and "JSON document" in err.message, err


def test_real_documents_are_read_as_before(shared_real):
    # The default budget (200x the file, at least 128 MiB) leaves real files untouched.
    for path, fmt, trajectories in (
            (shared_real / "inspect_ai" / "2025-05-12T20-27-36-04-00_browser.json", "inspect", 1),
            (shared_real / "tau-bench" / "gpt-4o-airline.json", "openai_chat", 200)):
        run = parse_run(path.read_bytes(), str(path), fmt)
        assert len(run.trajectories) == trajectories and not run.rejected, path.name


def test_the_readme_states_the_budget():
    text = " ".join((Path(__file__).parent.parent / "README.md").read_text().split())
    assert (f"{_zip.TOTAL_RATIO}× its size, {_zip.MIN_TOTAL_BYTES >> 20} MiB–{_zip.MAX_TOTAL_BYTES >> 30} GiB, of "
            "decoded bytes and of memory") in text


def test_an_agentdojo_run_directorys_cases_share_one_budget(monkeypatch):
    # Every case of a run directory is parsed, and held, before its runs are built: thirty
    # cases whose parses each fit the budget do not fit it together.
    monkeypatch.setattr(agentdojo_dir, "MAX_ZIP_TOTAL", BUDGET)
    fields = {**{f: "x" for f in agentdojo_dir.REQUIRED if f != "messages"}, "utility": True, "security": False}
    case = json.dumps(fields)[:-1].encode() + b', "messages": [' + b",".join([b"{}"] * 8_000) + b"]}"
    assert _zip.json_parse_cost(case) < BUDGET // 3
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(30):
            zf.writestr(f"pipe/workspace/user_task_{i}/none/none.json", case)
    peak, err = traced(lambda: agentdojo_dir.read_run_zip(buf.getvalue(), "cases.zip"))
    assert isinstance(err, OverBudgetError), err
    assert err.source.startswith("cases.zip/") and f"{BUDGET:,}" in err.message, err
    assert peak < 1.1 * BUDGET, f"{peak:,} bytes allocated for a {BUDGET:,}-byte budget"


@pytest.mark.parametrize("side", ["payload side log", "proof side log"])
def test_a_side_log_of_empty_lines_is_refused_within_its_budget(monkeypatch, side):
    # A side log's unusable lines are a rejection each, kept for the report: 3 M lines of `[]`
    # (9 MB) took 665-705 MiB before they had a budget. The side and proof logs now read under
    # the same one-file budget as the log they belong to (here lowered to BUDGET).
    from scoring.importers._proof import ProofLog
    from scoring.proof import FORMAT
    from scoring.recapture import PayloadJoin

    monkeypatch.setattr(_zip, "MIN_TOTAL_BYTES", BUDGET)
    monkeypatch.setattr(_zip, "TOTAL_RATIO", 1)
    if side == "proof side log":
        head = json.dumps({"record": "proof", "format": FORMAT, "version": 1, "eval_id": "e"}).encode() + b"\n"
        data, source = head + b"[]\n" * 100_000, "run.proof.jsonl"
        peak, err = traced(lambda: ProofLog.read(data, source))
    else:
        data, source = b"[]\n" * 100_000, "run.payloads.jsonl"
        peak, err = traced(lambda: PayloadJoin(source, data))
    assert isinstance(err, OverBudgetError), err
    assert err.source == source and err.line is not None and f"{BUDGET:,}" in err.message, err
    assert peak < 1.5 * BUDGET, f"{peak:,} bytes allocated for a {BUDGET:,}-byte budget"
