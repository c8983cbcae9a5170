"""Runs: bundled samples, uploads and paths in; the import report and the table of runs out."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import streamlit as st

from pages._shared import loaders, router, state
from pages._shared.errors import SHOWN, public_text, show_error
from pages._shared.inert import md, reveal_id
from pages._shared.runtext import middle_cut, stale_mark, status_badge
from scoring.errors import SpecError
from scoring.workspace import views

router.require_router()
st.title("Runs")
st.caption("Import a run to score it strictly. The same file imported twice is one run.")


RUN_CELL_CHARS = 54  # what the Runs table's 370 px run column shows of a name, wide letters too

# A re-classifier of record set by whoever runs the server (the only one in team mode). A
# comment, not a docstring: Streamlit's magic drew a bare string on the page.
RECLASSIFIER_ENV = "LITMUS_REVIEW_CLASSIFIER"


def configured_reclassifier() -> str | None:
    """The re-classifier imports use: in team mode only the server's setting (a spec loads code
    or starts a command on the server, which a web form must not do for anyone who can reach
    it); otherwise the field, which starts from that setting."""
    if router.team_mode():
        return os.environ.get(RECLASSIFIER_ENV, "").strip() or None
    return (st.session_state.get(state.RECLASSIFIER) or "").strip() or None


def verdict_map_spec() -> str | None:
    """The Inspect verdict map the imports use (as ``--inspect-verdict``): a preset or free text."""
    choice = st.session_state.get(state.VERDICT_MAP_CHOICE) or NO_MAP
    if choice == NO_MAP:
        return None
    if choice == CUSTOM_MAP:
        return (st.session_state.get(state.VERDICT_MAP_TEXT) or "").strip() or None
    return choice


NO_MAP, CUSTOM_MAP = "none (Inspect scores give no verdict)", "rules, as --inspect-verdict…"


def require_proof() -> bool:
    """Imports score as ``--require-proof`` (the checkbox)."""
    return bool(st.session_state.get(state.REQUIRE_PROOF))


def scoring_request(payloads: Path | None, *, map_must_parse: bool = True) -> views.ScoringRequest:
    """The request this page's imports are scored under, built once from its form as the CLI
    builds it from its options (a verdict map that does not parse is a ``SpecError``).
    ``map_must_parse`` off: for runs whose format reads no verdict map (an AgentDojo run
    directory), which the map's field never blocks; a map that parses still goes with them, so a
    run a workspace keyed with it before (``ScoringRequest.former_run_key``) is found again."""
    def request(verdict_map: str | None) -> views.ScoringRequest:
        return views.ScoringRequest.of(payloads=payloads, reclassifier=configured_reclassifier(),
                                       verdict_map=verdict_map, require_proof=require_proof())
    try:
        return request(verdict_map_spec())
    except SpecError:
        if map_must_parse:
            raise
        return request(None)


def shown_source(source: str, original_name: str | None) -> str:
    """Where a run was imported from, as this browser may see it: in team mode an upload's copy
    is a server path, so the name its uploader gave it is shown (a file the server holds by its
    name alone: its folder is the server's)."""
    if not router.team_mode():
        return source
    return original_name or Path(source).name


def import_one(path: Path, payloads: Path | None, label: str, original_name: str | None = None) -> None:
    # the names the user knows these files by: a team-mode message shows them, not server paths
    names = {str(path): original_name or path.name, **({str(payloads): payloads.name} if payloads else {})}
    label = md(label)  # a file name, a typed path or a run id: shown, never interpreted
    bar = st.progress(0.0, text=f"Importing {label}…")
    total = 0

    def tick(n: int) -> None:
        bar.progress(min(1.0, n / total) if total else 0.5, text=f"Importing {label}: {n:,} trajectories")

    try:
        # Counting lines opens the file: inside the try, so a missing or unreadable path is the
        # same clean message as any other unusable input; bounded, regular files only: a FIFO or
        # /dev/zero is refused before it is read.
        if path.suffix == ".jsonl":
            total = max(1, views.count_lines(path) - 1)
        if payloads is None and loaders.holds_runs(path):  # an AgentDojo run directory (a folder or a zip)
            reports = loaders.import_runs(path, scoring_request(None, map_must_parse=False), progress=tick,
                                          original_name=original_name)
        else:
            reports = [loaders.import_run(path, scoring_request(payloads), progress=tick,
                                          original_name=original_name)]
    except SHOWN as exc:
        bar.empty()
        show_error(exc, before=f"Could not import {label}: ", path=path, names=names)
        return
    for res in reports[:-1]:
        loaders.run_figures(res.run.run_key)
        st.session_state[state.PENDING_SELECT] = [*st.session_state.get(state.PENDING_SELECT, []), res.run.run_key]
    res = reports[-1]
    bar.progress(1.0, text=f"{label}: aggregating…")
    run = res.run
    # Warm the caches now, so the first look at Safe rates is as fast as every later one.
    loaders.run_figures(run.run_key)
    loaders.run_breakdowns(run.run_key)
    loaders.argument_sizes(run.run_key)
    bar.progress(1.0, text=f"{label}: done")
    side = (f" Side log {md(Path(res.side_log).name)} ({res.side_log_how}) is used." if res.side_log else
            " No side log.")
    if res.rescored_from is not None:
        message = ("success", f"{label} was imported under scorer {res.rescored_from}: rescored now as "
                              f"{run.run_key[:12]} ({md(run.name)}).{side}")
    elif res.already_present:
        message = ("info", f"{label} was already imported as {run.run_key[:12]} ({md(run.name)}).{side}")
    else:
        message = ("success", f"Imported {md(original_name or path.name)} as {md(run.name)}: "
                              f"{run.trajectories:,} trajectories, "
                              f"{run.tool_calls:,} tool calls, format {md(run.format)} (selected in the sidebar)."
                              + side)
    # The sidebar's run picker is already drawn in this run and cannot change now: the router
    # adds the run to the selection before drawing it on the rerun, and this report is shown then.
    if len(reports) > 1:
        message = ("success", f"Imported {len(reports):,} runs of the AgentDojo run directory {label}, one per "
                              "pipeline and attack: " + ", ".join(
                                  f"{md(r.run.name)} ({r.run.trajectories:,} trajectories"
                                  + (", already imported" if r.already_present else "") + ")" for r in reports)
                              + " (selected in the sidebar).")
    st.session_state[state.IMPORT_REPORT] = (message, [
        {"line": r.line, "record": None if r.record_id is None else reveal_id(r.record_id),
         "why": reveal_id(public_text(r.message, names=names), lines=True)} for one in reports for r in one.rejected],
        sum(one.rejected_count for one in reports))
    st.session_state[state.PENDING_SELECT] = [*st.session_state.get(state.PENDING_SELECT, []), run.run_key]
    st.rerun()


def show_last_import() -> None:
    (kind, text), rejected, count = st.session_state.pop(state.IMPORT_REPORT)
    getattr(st, kind)(text)
    if count:
        st.warning(f"{count:,} record{' was' if count == 1 else 's were'} rejected and not imported:")
        st.dataframe(rejected, hide_index=True, width="stretch")
        if more := views.unlisted_note(count, len(rejected)):  # a flood: its first records listed
            st.caption(more)


if state.IMPORT_REPORT in st.session_state:
    show_last_import()
if router.team_mode():
    setting = os.environ.get(RECLASSIFIER_ENV, "").strip()
    st.caption("Re-classifier of record for recovered surfaces: "
               + ("set on the server." if setting else f"none (the server sets one with {RECLASSIFIER_ENV})."))
else:
    if state.RECLASSIFIER not in st.session_state:
        st.session_state[state.RECLASSIFIER] = os.environ.get(RECLASSIFIER_ENV, "")
    st.text_input(
        "Re-classifier of record for recovered surfaces (optional)", key=state.RECLASSIFIER,
        placeholder="mypackage.judge:classify  or  cmd:python judge.py",
        help="Where the harness's classifier saw only a capture (an encoded argument, a payload recovered from a "
             "side log), a trajectory is SAFE only if a classifier of record read the full surface: this one (a "
             "Python callable module:function, or a command reading JSON lines, speaking protocol 3: its benign "
             "counts only where it proves its read of every surface), or the run's taxonomy rules when its header "
             "declares them as the harness's classifier and they are accepted. Without either, such trajectories "
             "are UNSCORED (not_classified_on_full_surface).")
st.selectbox("Inspect verdict map (Inspect logs: which scores mean unsafe, safe or no verdict)",
             [NO_MAP, *views.VERDICT_PRESETS, CUSTOM_MAP], key=state.VERDICT_MAP_CHOICE,
             help="As --inspect-verdict: a preset, or rules SCORER=VALUE[,VALUE] / SCORER:OUTCOME=TEST[;…]. "
                  "Presets: " + "; ".join(f"{k} = {v}" for k, v in views.VERDICT_PRESETS.items()))
if st.session_state.get(state.VERDICT_MAP_CHOICE) == CUSTOM_MAP:
    st.text_input("Verdict map rules", key=state.VERDICT_MAP_TEXT, placeholder="combined_scorer:unsafe=score>=0.5")
st.checkbox("Require proof (as --require-proof)", key=state.REQUIRE_PROOF,
            help="A call whose capture is complete only by the run's claim (the structural standard: no recorded "
                 "size and SHA-256 or raw text proves it) is UNSCORED unproven_capture; harm found on it still "
                 "counts. The same file imported with and without it is two runs.")
# The open tab is state (and in the address): an import's rerun draws its report above the tabs,
# which reopened the first tab, so the next import from a path began with a click back to it.
IMPORT_TABS = ["Upload a file", "Import from a path", "Bundled samples"]
router.from_address(state.IMPORT_TAB, "import", IMPORT_TABS, many=False)
tab_upload, tab_path, tab_samples = st.tabs(IMPORT_TABS, key=state.IMPORT_TAB, on_change="rerun")
router.to_address("import", None if st.session_state.get(state.IMPORT_TAB) in (None, IMPORT_TABS[0])
                  else st.session_state[state.IMPORT_TAB])
with tab_upload:
    up = st.file_uploader(f"Run file (JSONL; up to {loaders.MAX_UPLOAD_MB} MB; a zip of an AgentDojo run "
                          "directory)", key=state.UPLOAD, type=["jsonl", "json", "eval", "zip"])
    side = st.file_uploader("Payload side log (optional)", key=state.UPLOAD + "_side", type=["jsonl"])
    if up is not None and st.button("Import upload", type="primary"):
        if up.size > loaders.MAX_UPLOAD_MB * 1024 * 1024:
            st.error(f"{md(up.name)} is {up.size / 1e6:.0f} MB; the upload limit is {loaders.MAX_UPLOAD_MB} MB. "
                     "Import it from a path instead.")
        else:
            with tempfile.TemporaryDirectory() as tmp:
                p = Path(tmp) / Path(up.name).name
                p.write_bytes(up.getvalue())
                sp = None
                if side is not None:  # named as the pairing rule names it, beside the run
                    sp = Path(views.side_log_beside(str(p)))
                    sp.write_bytes(side.getvalue())
                import_one(p, sp, up.name, original_name=up.name)
with tab_path:
    if router.team_mode():
        st.info("Team mode: importing a path on the server is off. Upload the file instead.")
    else:
        path_text = st.text_input("Path on this machine (a run file, or an AgentDojo run directory)",
                                  key=state.IMPORT_PATH, placeholder="/data/runs/run.jsonl")
        side_text = st.text_input("Payload side log path (optional; RUN.payloads.jsonl beside RUN is joined "
                                  "without one)", key=state.IMPORT_PATH + "_side")
        # Never disabled: a button disabled until the field's value was committed (on Enter or
        # blur) swallowed the first click after typing. A pasted path's outer spaces are dropped.
        if st.button("Import path"):
            path_text, side_text = (path_text or "").strip(), (side_text or "").strip()
            if not path_text:
                st.error("Type the path of a run file first.")
            else:
                import_one(Path(path_text).expanduser(), Path(side_text).expanduser() if side_text else None,
                           path_text)
with tab_samples:
    for path, side_path in loaders.sample_files():
        if st.button(f"Import {path.name}" + (" with its side log" if side_path else ""), key=f"sample::{path.name}"):
            import_one(path, side_path, path.name)
st.caption("Formats read: " + ", ".join(views.formats()))

st.subheader("Imported runs")
rows = loaders.runs()
if not rows:
    st.info("No runs yet.")
else:
    table, details = [], []
    for r in rows:
        ev = loaders.run_figures(r.run_key)  # named by r.name
        s = ev.summary
        table.append({
            # the run's name holds its model, task, variant and how it was scored (side log,
            # require-proof, re-classifier): the columns that said those apart are gone. Its
            # start and its end, where the column is too narrow for it (runs of one model read
            # alike to the cut): whole under the table once its row is selected.
            "run": middle_cut(loaders.run_label(r), RUN_CELL_CHARS),
            "trajectories": r.trajectories, "tool calls": r.tool_calls, "UNSCORED": s.unscored,
            "Inconclusive": s.inconclusive, "rejected": r.rejected,
        })
        # Whose statuses the row counts: a run scored by an older scorer is marked until rescored
        # (its numbers are that version's), and says when the workspace no longer holds its bytes.
        table[-1]["scorer"] = (ev.scorer_version if not r.stale else stale_mark(r.scorer_version)
                               + ("" if r.original_held else ", bytes gone"))
        details.append({"run": loaders.run_label(r), "run id": reveal_id(r.run_id),
                        # a structural standard the header declared itself is its claim; --require-proof said so
                        "format · evidence": f"{r.format} · {r.evidence_standard}"
                                             + (" (claim)" if ev.run.header.evidence_self_declared else "")
                                             + (" · proof required" if ev.run.header.require_proof else ""),
                        # how the harness says the run ended (Inspect: success / cancelled / error), where it says
                        "run status": reveal_id(status_badge(r.run_status, r.run_status_detail)
                                                or r.run_status or "—"), "key": r.run_key[:12],
                        "imported": r.imported_at[:16].replace("T", " "),
                        "source": reveal_id(shown_source(r.source, ev.original_name))})
    if stale := [r for r in rows if r.stale]:
        st.warning(md(f"{len(stale):,} of these runs {'is' if len(stale) == 1 else 'are'} STALE: their statuses, "
                      f"counts and rates are an older scorer's (the scorer column says whose); scorer "
                      f"{views.SCORER_VERSION} has not scored them. litmus-review rescore rescores those whose "
                      "original bytes the workspace keeps; for one whose bytes are gone, litmus-review rescore KEY "
                      "--from FILE reads its file again (refused unless its SHA-256 is the file's at import). "
                      "Runs: " + "; ".join(f"{loaders.run_label(r)} ({r.run_key[:12]})" for r in stale[:10])
                      + (f"; and {len(stale) - 10:,} more" if len(stale) > 10 else "")))
    # Fits 1,280 px beside the sidebar (fourteen columns ran off the right edge): the run's name,
    # its counts and its scorer; the format, run status, keys, times and sources are in the table
    # below. A name longer than its column is cut: selecting its row shows it whole under the table.
    narrow = {c: st.column_config.NumberColumn(c, width=w, format="localized") for c, w in
              (("trajectories", 76), ("tool calls", 62), ("UNSCORED", 72), ("Inconclusive", 80), ("rejected", 58))}
    # The scorer column ran off the right edge at 1,280 px at 110 px: a stale run's whole mark,
    # "STALE (scorer 3.0), bytes gone", is in the warning above and in its run's name.
    picked = st.dataframe(table, hide_index=True, width="stretch", key=state.RUNS_TABLE, on_select="rerun",
                          selection_mode="single-row", column_config={
                              "run": st.column_config.TextColumn("run", width=370),
                              "scorer": st.column_config.TextColumn("scorer", width=58), **narrow})
    chosen = [rows[i] for i in picked.selection.rows if i < len(rows)]
    if chosen:
        r = chosen[0]
        st.text(f"{loaders.run_label(r)}\n" + reveal_id(f"run id {r.run_id} · model {r.model} · key {r.run_key[:12]} "
                                                        f"· imported {r.imported_at[:16].replace('T', ' ')}"))
    else:
        st.caption("Select a row to read its run's name in full, with its run id, model and key.")
    with st.expander("Format, run status, keys, import times and sources"):
        st.dataframe(details, hide_index=True, width="stretch", column_config={
            "run": st.column_config.TextColumn(width=300), "key": st.column_config.TextColumn(width=110),
            "imported": st.column_config.TextColumn(width=130)})
