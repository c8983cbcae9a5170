"""Review: label Inconclusive traces — genuine decline, degenerate, early stop, harm found — fast.

Keyboard: 1, 2, 3 … the labels in order (one button per ``ReviewLabel``) · J next · K previous ·
N / P next / previous message (``pages/_shared/scroll.py``, in the browser) ·
U undo. The keys work wherever the focus is but in a text field (Esc leaves one); each press
names the trace on screen when it was pressed, and a second press within 0.25 s is ignored and
says so (``pages/_shared/keyboard.py``). The reviewer name and the note are set with a button,
then shown as text, so a shortcut never types into a field.
Labels are append-only events in the workspace; the reviewed rate reads their final labels.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd
import streamlit as st

from pages._shared import keyboard, loaders, router, scroll, state
from pages._shared.errors import SHOWN, error_text, show_error
from pages._shared.inert import md, reveal_id
from pages._shared.names import LABEL_HELP, label_name, queue_mode_name, queue_sort_name
from pages._shared.render import render_header, render_trajectory, show_text, task_line, verdict_text
from scoring.errors import LitmusReviewError
from scoring.model import ReviewLabel, judge_unseen
from scoring.workspace import views
from scoring.workspace.views import QueueMode, QueueSort

# One button per reviewer label, in the type's order, with its shortcut key (1, 2, 3 …). A
# comment, not a docstring: Streamlit's magic drew a bare string on the page.
LABEL_BUTTONS = [(label, label_name(label), str(n), LABEL_HELP.get(label, ""))
                 for n, label in enumerate(ReviewLabel, start=1)]
MODES = [mode.value for mode in QueueMode]
SORTS = [sort.value for sort in QueueSort]
SHORTCUTS = " · ".join(f"{key} {text.lower()}" for _, text, key, _ in LABEL_BUTTONS)

keys, rows = router.page(
    "Review",
    caption=f"Keyboard: {SHORTCUTS} · J next · K previous · U undo my last act · "
            f"{scroll.NEXT_MESSAGE.upper()} next message · {scroll.PREVIOUS_MESSAGE.upper()} previous message",
)


def set_reviewer() -> None:
    st.session_state[state.REVIEWER] = (st.session_state.get(state.REVIEWER_INPUT) or "").strip()


def clear_reviewer() -> None:
    st.session_state[state.REVIEWER] = ""


def set_note() -> None:
    st.session_state[state.REVIEW_NOTE] = (st.session_state.get(state.NOTE_INPUT) or "").strip()


def clear_note() -> None:
    st.session_state[state.REVIEW_NOTE] = ""


top = st.columns([2, 2, 1])
linked_run = router.linked_run(keys)
run_key = top[0].selectbox("Run", keys, key=state.REVIEW_RUN, format_func=lambda k: loaders.run_label(rows[k]),
                           index=keys.index(linked_run) if linked_run else 0)
with top[1]:
    if st.session_state.get(state.IDENTITY):
        st.text_input("Reviewer (your signed-in account)", value=st.session_state[state.IDENTITY], disabled=True)
    elif st.session_state.get(state.REVIEWER):
        st.text(f"Reviewer: {reveal_id(st.session_state[state.REVIEWER])}")
        st.button("Change reviewer", on_click=clear_reviewer, key="change_reviewer")
    else:
        # A form: the name is set on purpose (Set, or Enter), then shown as text, so the field
        # is gone and cannot keep the focus: the next "1" is a label, not part of the name.
        with st.form("reviewer_form", border=False, enter_to_submit=True):
            st.text_input("Reviewer (required to label)", key=state.REVIEWER_INPUT, placeholder="your name")
            st.form_submit_button("Set reviewer", on_click=set_reviewer)
top[2].toggle("Blind", key=state.BLIND, help="Hide other reviewers' labels until you have labelled the trace, on "
              "every page: rates, counts, history, agreement and exports count others' labels only on the traces you "
              "labelled.")

frame = loaders.trajectory_frame(run_key)
inconclusive_rows = frame[frame["status"] == "inconclusive"]
# The queue's mode, filters, order and search live in the address (as run and trace do): a reload
# or a shared link opens the same queue. Widget key → (parameter, the values it may take, a list).
QUEUE_ADDRESS = {
    state.QUEUE_FILTER: ("queue", MODES, False),
    state.Q_SUGGESTION: ("suggestion", sorted(inconclusive_rows["suggestion"].dropna().unique()), True),
    state.Q_TERMINATION: ("termination", sorted(inconclusive_rows["termination"].dropna().unique()), True),
    state.Q_CATEGORY: ("category", sorted(inconclusive_rows["intended_category"].dropna().unique()), True),
    state.Q_TOOL: ("tool", views.tool_names(inconclusive_rows["tools"].dropna().unique()), True),
    state.Q_SORT: ("sort", SORTS, False),
}
for widget, (param, options, many) in QUEUE_ADDRESS.items():
    router.from_address(widget, param, [str(o) for o in options], many=many)
if state.Q_SEARCH not in st.session_state and router.linked_param("q"):
    st.session_state[state.Q_SEARCH] = router.linked_param("q")
st.radio("Queue", MODES, key=state.QUEUE_FILTER, horizontal=True, label_visibility="collapsed",
         format_func=queue_mode_name)
with st.expander("Filter, search and sort the queue",
                 expanded=any(st.session_state.get(w) for w in (*list(QUEUE_ADDRESS)[1:5], state.Q_SEARCH))):
    fc = st.columns(5)
    fc[0].multiselect("Suggestion", QUEUE_ADDRESS[state.Q_SUGGESTION][1], key=state.Q_SUGGESTION, placeholder="all")
    fc[1].multiselect("Termination", QUEUE_ADDRESS[state.Q_TERMINATION][1], key=state.Q_TERMINATION,
                      placeholder="all", format_func=reveal_id)
    fc[2].multiselect("Category", QUEUE_ADDRESS[state.Q_CATEGORY][1], key=state.Q_CATEGORY, placeholder="all",
                      format_func=reveal_id)
    fc[3].multiselect("Tool", QUEUE_ADDRESS[state.Q_TOOL][1], key=state.Q_TOOL, placeholder="all",
                      format_func=reveal_id)
    fc[4].selectbox("Sort by", SORTS, key=state.Q_SORT, format_func=queue_sort_name)
    st.text_input("Search the queue (arguments, results and outputs; full text)", key=state.Q_SEARCH,
                  placeholder="e.g. refuse, /etc/passwd")
for widget, (param, options, many) in QUEUE_ADDRESS.items():
    value = st.session_state.get(widget)
    router.to_address(param, value if many or value != options[0] else None)  # a default mode or order: no parameter
router.to_address("q", (st.session_state.get(state.Q_SEARCH) or "").strip())


def queue_search_hits(run_key: str) -> frozenset[str] | None:
    """The traces the queue's search finds (None when there is no search)."""
    query = (st.session_state.get(state.Q_SEARCH) or "").strip()
    if not query:
        return None
    try:
        return loaders.search(run_key, query)
    except SHOWN as exc:  # the workspace's copy changed or is gone
        show_error(exc, before="The queue cannot be searched: ")
        return frozenset()


def build_queue(run_key: str, reviewer: str, mode: QueueMode, current: dict) -> list[str]:
    """The traces this queue shows, filtered and sorted (stable: labelling one does not move it,
    so "trace N of M" counts through the queue)."""
    mine = {t for t, by in current.items() if reviewer and reviewer in by}
    hits = queue_search_hits(run_key)
    queue = views.review_queue(
        loaders.trajectory_frame(run_key), mode, mine=mine,
        # Blind: "reviewers disagree" only among traces this reviewer labelled (the loaders read
        # every label as this session may know it).
        disputed=set(loaders.disputed(run_key)) if mode.labels else set(),
        suggestion=st.session_state.get(state.Q_SUGGESTION) or (),
        termination=st.session_state.get(state.Q_TERMINATION) or (),
        category=st.session_state.get(state.Q_CATEGORY) or (), tools=st.session_state.get(state.Q_TOOL) or (),
        sort=st.session_state.get(state.Q_SORT) or QueueSort.RUN_ORDER)
    return queue if hits is None else [t for t in queue if t in hits]


def go(tid: str | None) -> None:
    st.session_state[state.REVIEW_CURRENT] = tid


def reviewer_name() -> str:
    return (st.session_state.get(state.REVIEWER) or "").strip()


def do_label(run_key: str, tid: str, label: ReviewLabel, queue: list[str]) -> None:
    reviewer = reviewer_name()
    if not reviewer:
        st.session_state[state.LAST_ACTION] = ("error", "Set your reviewer name before labelling.")
        return
    try:
        loaders.add_label(run_key, tid, reviewer, label, st.session_state.get(state.REVIEW_NOTE, ""))
    except LitmusReviewError as exc:
        st.session_state[state.LAST_ACTION] = ("error", error_text(exc))
        return
    st.session_state[state.LAST_ACTION] = ("ok", f"{reveal_id(tid)}: labelled {label.value} by {reveal_id(reviewer)}")
    st.session_state[state.REVIEW_NOTE] = ""
    mine = {t for t, by in loaders.current_labels(run_key).items() if reviewer in by}
    go(views.next_pending(queue, tid, mine))  # straight on to the next trace still to label


def do_bulk(run_key: str, queue: list[str]) -> None:
    reviewer = reviewer_name()
    label = st.session_state.get(state.BULK_LABEL)
    if not reviewer or label is None:
        st.session_state[state.LAST_ACTION] = ("error", "Set your reviewer name and pick a label for the bulk act.")
        return
    try:
        targets, kept = bulk_targets(run_key, queue, reviewer)
        if not targets:
            st.session_state[state.LAST_ACTION] = (
                "error", f"Every trace of this queue already has your label ({kept:,}); nothing was changed. "
                         "Tick \"also replace my earlier labels\" to relabel them.")
            return
        batch = loaders.add_labels(run_key, targets, reviewer, label, st.session_state.get(state.REVIEW_NOTE, ""))
    except LitmusReviewError as exc:
        st.session_state[state.LAST_ACTION] = ("error", error_text(exc))
        return
    kept_text = f"; your earlier labels on {kept:,} traces were kept" if kept else ""
    st.session_state[state.LAST_ACTION] = ("ok", f"Bulk act {batch}: labelled {len(targets):,} traces "
                                                 f"{ReviewLabel(label).value} "
                                                 f"by {reveal_id(reviewer)}{kept_text} (U undoes the whole act)")
    st.session_state[state.REVIEW_NOTE] = ""


def bulk_targets(run_key: str, queue: list[str], reviewer: str) -> tuple[list[str], int]:
    """The traces a bulk act labels, and how many it leaves alone: the reviewer's own earlier
    labels are kept unless they ticked "also replace my earlier labels"."""
    if st.session_state.get(state.BULK_REPLACE):
        return list(queue), 0
    mine = {t for t, by in loaders.current_labels(run_key).items() if reviewer in by}
    targets = [t for t in queue if t not in mine]
    return targets, len(queue) - len(targets)


LABEL_KEYS = {key: label for label, _, key, _ in LABEL_BUTTONS}


def on_key(run_key: str, queue: list[str]) -> None:
    """A key press: act on the trace that was on screen when it was pressed, once."""
    press = keyboard.press(state.REVIEW_KEYS)
    if press is None:
        return
    last = st.session_state.get(state.LAST_PRESS)
    if last is not None and press.at <= last:
        return  # this press was handled already (the component reports it again on a rerun)
    st.session_state[state.LAST_PRESS] = press.at
    shown = reveal_id(press.trace) if press.trace else "no trace"
    if last is not None and press.at - last < keyboard.DEBOUNCE_MS:
        st.session_state[state.LAST_ACTION] = (
            "warning", f"Ignored a second key press ({press.key.upper()}) {press.at - last} ms after the one before "
                       f"(presses closer than {keyboard.DEBOUNCE_MS} ms count once): {shown} was not changed by it.")
        return
    if press.key == "u":
        do_undo(run_key)
    elif press.key in ("j", "k"):
        here = queue.index(press.trace) if press.trace in queue else 0
        step = 1 if press.key == "j" else -1
        if queue:
            go(queue[min(len(queue) - 1, max(0, here + step))])
    elif press.key in LABEL_KEYS:
        if press.trace is None or press.trace not in queue:
            st.session_state[state.LAST_ACTION] = ("error", f"Key {press.key}: no trace to label is on screen.")
            return
        do_label(run_key, press.trace, LABEL_KEYS[press.key], queue)


def do_undo(run_key: str) -> None:
    reviewer = reviewer_name()
    if not reviewer:
        st.session_state[state.LAST_ACTION] = ("error", "Set your reviewer name to undo your labels.")
        return
    undone = loaders.undo_last(run_key, reviewer)
    if undone is None:
        st.session_state[state.LAST_ACTION] = ("error", "You have no label in this run to undo.")
        return
    tids, label = undone.trajectory_ids, undone.label
    if undone.batch_id and len(tids) > 1:
        text = f"Undid your bulk act {undone.batch_id}: withdrew {label} from {len(tids):,} traces"
    else:
        text = f"{reveal_id(tids[0])}: undid your last label ({label} withdrawn)"
    st.session_state[state.LAST_ACTION] = ("ok", text)
    go(tids[0])  # back to the (first) trace whose label was withdrawn


@st.fragment
def review_panel(run_key: str) -> None:
    reviewer = reviewer_name()
    mode = QueueMode(st.session_state.get(state.QUEUE_FILTER) or QueueMode.ALL_INCONCLUSIVE)
    current = loaders.current_labels(run_key)  # read once per rerun: the queue and the progress share it
    queue = build_queue(run_key, reviewer, mode, current)
    df = loaders.trajectory_frame(run_key)
    inconclusive = int((df["status"] == "inconclusive").sum())
    final = loaders.final_labels(run_key)
    labelled = {t for t, by in current.items() if reviewer and reviewer in by}
    blind = st.session_state.get(state.BLIND, True)
    tid: str | None = None
    if queue:
        linked = router.linked_param("trace")
        if linked in queue and state.REVIEW_CURRENT not in st.session_state:
            go(linked)  # a shared address: open the trace it names
        chosen = st.session_state.get(state.REVIEW_CURRENT)
        if chosen not in queue:
            chosen = next((t for t in queue if t not in labelled), queue[0])  # the first still to label
        tid = chosen
        st.session_state[state.REVIEW_CURRENT] = tid
        if router.linked_param("message") is not None and router.linked_param("trace") != tid:
            del st.query_params["message"]  # a linked message belongs to its trace: the next one opens at its top
        router.link(run=run_key, trace=tid)
    row = df.loc[df["trajectory_id"] == tid].iloc[0] if tid is not None else None
    # a trace the judge did not see is labelled from its own queue only (elsewhere it is UNSCORED: view only)
    judge_blind = mode is QueueMode.JUDGE_UNSEEN and row is not None and judge_unseen(
        row["status"], row["reason"] if isinstance(row["reason"], str) else None)
    viewing_only = row is None or (row["status"] != "inconclusive" and not judge_blind)
    # The press carries the trace on screen; an UNSCORED trace (view only) offers none to label.
    keyboard.listen(key=state.REVIEW_KEYS, trace=None if viewing_only else tid,
                    keys=[*LABEL_KEYS, "j", "k", "u"], on_press=lambda: on_key(run_key, queue))
    progress_text = (f"{len(final):,} of {inconclusive:,} Inconclusive traces have a final label"
                     + (" you may see (blind review)" if blind else "") + f" · you labelled {len(labelled):,}")
    if tid is None or row is None:
        navigation(run_key, queue, None, labelled)
        last_action()
        st.progress(len(final) / inconclusive if inconclusive else 1.0, text=progress_text)
        st.success("Nothing in this queue.")
        return

    anchor = scroll.anchor(f"rev-{tid}")
    # The evidence on the left, scrolling in its own box; the trace's header and the labels on the
    # right, outside it: they stay in view while the transcript scrolls, and at 1,280 x 900 the
    # first messages are on screen beside the buttons.
    evidence, side = st.columns([3, 2], gap="medium")
    with side:
        try:
            replay = loaders.replay(run_key, tid)
        except SHOWN as exc:  # the workspace's copy changed or is gone: said so, the page stands
            with st.container(key=scroll.header_key(anchor)):
                st.code(reveal_id(f"{tid} · {row['status'].upper()}"), language=None)
                navigation(run_key, queue, tid, labelled)
            show_error(exc, before="This trace cannot be replayed: ")
            return
        with st.container(key=scroll.header_key(anchor)):
            # One block: what the trace is and how it ended, why it is here, what the harness said
            # and what the hint is (its evidence and reasons follow the buttons).
            st.code(header_block(run_key, tid, row, replay, shown=not viewing_only), language=None, wrap_lines=True)
            if viewing_only:
                st.warning("UNSCORED: the capture is not proven complete, so this trace cannot be labelled (and "
                           "never counts as safe). Its evidence is beside this.")
            else:
                label_buttons(run_key, tid, queue)
            navigation(run_key, queue, tid, labelled)
        last_action()
        if not viewing_only:
            label_side(run_key, tid, row, replay, queue, current, judge_blind=judge_blind)
        render_header(replay, verdict=False)
        st.progress(len(final) / inconclusive if inconclusive else 1.0, text=progress_text)
        if not viewing_only:
            rubric()
    with evidence:
        render_trajectory(replay, key=f"rev-{tid}", page="pages/review.py", header=False, height=TRANSCRIPT_HEIGHT,
                          highlight=(st.session_state.get(state.Q_SEARCH) or "").strip())
    if not viewing_only:
        bulk_panel(run_key, queue)


#: The transcript's box, in pixels: below the queue's controls it ends about where a 900 px high
#: window does (a taller box put its lower part, where N brings a message, below the fold), as
#: tall as the header, buttons and navigation beside it.
TRANSCRIPT_HEIGHT = 460


def navigation(run_key: str, queue: list[str], tid: str | None, labelled: set[str]) -> None:
    """Previous / next trace, where this one is in the queue, and undo."""
    pos = queue.index(tid) if tid is not None else 0
    nav = st.columns([1, 1, 1])
    nav[0].button("◀ Prev (K)", on_click=go, args=(queue[max(0, pos - 1)] if queue else None,), key="prev",
                  disabled=pos == 0 or not queue, width="stretch")
    nav[1].button("Next ▶ (J)", on_click=go, args=(queue[min(len(queue) - 1, pos + 1)] if queue else None,),
                  key="next", disabled=pos >= len(queue) - 1, width="stretch")
    # Undo before anything can return: a bulk act that empties the queue must still be undoable.
    nav[2].button("Undo (U)", on_click=do_undo, args=(run_key,), key="undo", width="stretch",
                  help="Withdraw your most recent label, or bulk act, in this run (history keeps every event).")
    mine_here = sum(1 for t in queue if t in labelled)
    st.text(f"trace {pos + 1} of {len(queue):,} in this queue · {mine_here:,} of them labelled by you"
            if queue else "this queue is empty")


def last_action() -> None:
    """What the last label, undo or key press did (once)."""
    kind, msg = st.session_state.pop(state.LAST_ACTION, (None, None))
    if kind == "error":
        st.error(md(msg, lines=True))
    elif kind == "warning":
        st.warning(md(msg, lines=True))
    elif kind == "ok":
        st.toast(md(msg))
        st.text(msg)  # also on the page: a toast fades


def header_block(run_key: str, tid: str, row, replay, *, shown: bool) -> str:
    """The trace's header: its id and status, its task and how it ended, why it is Inconclusive
    (the deciding classifier's evidence), the harness's verdict, and the suggestion where shown."""
    reason = row["reason"] if isinstance(row["reason"], str) else ""
    lines = [f"{tid} · {row['status'].upper()}" + (f" · {reason}" if reason else ""), task_line(replay.trajectory)]
    if replay.classifier:
        lines.append(f"why: decided by {replay.classifier}"
                     + (": " + "; ".join(replay.classifier_evidence) if replay.classifier_evidence else ""))
    lines.append("harness verdict: " + verdict_text(replay.trajectory.verdict))
    if shown:
        trust = views.suggestion_trust(rows[run_key])
        suggestion = row["suggestion"] if isinstance(row["suggestion"], str) else "none"
        hidden = trust.hidden_because(replay.suggestion_evidence)
        lines.append(f"suggestion: {suggestion.replace('_', ' ')} (a hint, never a label)" if hidden is None
                     else "suggestion: none shown (why: below)")
    return "\n".join(reveal_id(line) for line in lines)


def label_buttons(run_key: str, tid: str, queue: list[str]) -> None:
    """One button per label, two a row (four cut their names in the side column). All alike: none
    is the obvious (primary) choice. The trace id is in the key: a click on a button drawn for one
    trace never labels another."""
    reviewer = reviewer_name()
    for start in range(0, len(LABEL_BUTTONS), 2):
        cols = st.columns(2)
        for col, (label, text, key, help_text) in zip(cols, LABEL_BUTTONS[start:start + 2], strict=False):
            col.button(f"{text} ({key})", on_click=do_label, args=(run_key, tid, label, queue),
                       key=f"label-{label.value}-{tid}", help=help_text, width="stretch",
                       type="secondary", disabled=not reviewer)
    if not reviewer:
        st.caption("Set your reviewer name above to enable the label buttons.")


def label_side(run_key: str, tid: str, row, replay, queue: list[str], current: dict, *, judge_blind: bool) -> None:
    """Under the buttons: the suggestion's evidence and the hint, the note, others' labels."""
    if judge_blind:
        st.warning("The judge did not see every call of this trace (UNSCORED judge_did_not_see_full_surface): its "
                   "benign verdict certifies nothing. Its capture is proven complete and the replay beside this shows "
                   "every call whole: label it from what you read there. It stays out of the strict rate and "
                   "counts in the reviewed rate once labelled.")
    note_area()
    st.text("evidence:")
    for ev_line in replay.suggestion_evidence:
        st.text(f"  • {reveal_id(ev_line)}")
    # Shown only where it was measured right more often than a fixed answer (scoring.suggest).
    trust = views.suggestion_trust(rows[run_key])
    hidden = trust.hidden_because(replay.suggestion_evidence)
    if hidden is None:
        suggestion = row["suggestion"] if isinstance(row["suggestion"], str) else "none"
        st.text(f"hint: the evidence suggests {suggestion.replace('_', ' ')} (never a label): {trust.why}")
    else:
        st.text(f"hint: none shown: {hidden}")
    visible = loaders.labels_on(run_key, tid)
    if visible:
        st.dataframe([{"reviewer": reveal_id(r), "label": lab.value} for r, lab in visible.items()],
                     hide_index=True)
    elif st.session_state.get(state.BLIND, True):
        st.caption("Blind review: other reviewers' labels appear after you label this trace.")
    votes = current.get(tid, {})
    if len(set(votes.values())) > 1:
        if reviewer_name() in loaders.adjudicators():
            adjudication_panel(run_key, tid, votes, queue)
        else:
            who_settles(reviewer_name())


def do_adjudicate(run_key: str, tid: str, label: ReviewLabel, queue: list[str]) -> None:
    adjudicator = reviewer_name()
    try:
        loaders.adjudicate(run_key, tid, adjudicator, label, st.session_state.get(state.REVIEW_NOTE, ""))
    except LitmusReviewError as exc:
        st.session_state[state.LAST_ACTION] = ("error", error_text(exc))
        return
    st.session_state[state.LAST_ACTION] = ("ok", f"{reveal_id(tid)}: adjudicated {label.value} by "
                                                 f"{reveal_id(adjudicator)} (its final label)")
    st.session_state[state.REVIEW_NOTE] = ""
    rest = [t for t in queue if t != tid]
    go(views.next_pending(queue, tid, set()) if rest else None)


def adjudication_panel(run_key: str, tid: str, votes: dict, queue: list[str]) -> None:
    """A disputed trace, for an adjudicator (the only reviewer shown the votes whatever the blind
    setting): resolved here with an ``adjudicate`` event, undone with U like a label."""
    final = loaders.final_labels(run_key).get(tid)
    with st.container(border=True):
        st.text("Reviewers disagree: " + " · ".join(f"{reveal_id(r)} {lab.value}" for r, lab in votes.items())
                + (f"\nadjudicated: {final.value}" if final else "\nno adjudication yet"))
        cols = st.columns(len(LABEL_BUTTONS))
        for col, (label, text, _, help_text) in zip(cols, LABEL_BUTTONS, strict=True):
            col.button(f"Resolve as {text}", on_click=do_adjudicate, args=(run_key, tid, label, queue),
                       key=f"adjudicate-{label.value}-{tid}", help="As adjudicator: " + help_text, width="stretch")


def who_settles(reviewer: str) -> None:
    """A disagreement seen by a reviewer without the role: who settles it, and how one is given
    the role (the roles file's name, never its path on a shared server)."""
    path = loaders.adjudicators_path()
    where = path.name if router.team_mode() else str(path)  # no server path to others
    st.caption(md(f"Reviewers disagree on this trace. An adjudicator settles it (its final label): the reviewers "
                  f"named in {where}, one a line{'' if reviewer else ' (set your name first)'}. "
                  "See the README, \"Adjudication\"."))


def note_area() -> None:
    note = st.session_state.get(state.REVIEW_NOTE, "")
    if note:
        st.text(f"note for your next label: {reveal_id(note)}")
        st.button("Clear note", on_click=clear_note, key="clear_note")
        return
    with st.form("note_form", border=False, enter_to_submit=True, clear_on_submit=True):
        c = st.columns([3, 1], vertical_alignment="bottom")
        c[0].text_input("Note for your next label (optional)", key=state.NOTE_INPUT)
        c[1].form_submit_button("Attach", on_click=set_note, width="stretch")


def rubric() -> None:
    """The team's labelling instructions, from a file in the workspace, shown as plain text."""
    path = loaders.rubric_path()
    where = f"{path.name} (set by the operator)" if router.team_mode() else str(path)  # no server path to others
    try:
        text = loaders.rubric_text()
    except OSError as exc:
        st.caption(f"Rubric {where} cannot be read: {exc.strerror or exc}")
        return
    if text is None:
        st.caption(f"No rubric: put the team's labelling instructions in {where} to show them here.")
        return
    st.text(f"rubric ({path.name}):")
    show_text(text, key="rubric")


def bulk_panel(run_key: str, queue: list[str]) -> None:
    with st.expander(f"Label all {len(queue):,} traces of this queue at once"):
        st.text(
            "Each trace gets its own label event, all marked as one bulk act; Undo withdraws the whole act.\n"
            "Filter the queue first (above) so it holds only traces with the same evidence."
        )
        if views.suggestion_trust(rows[run_key]).shown:
            frame = loaders.trajectory_frame(run_key).set_index("trajectory_id")
            counts = Counter(frame.loc[queue, "suggestion"].fillna("none"))
            st.text("suggestions in this queue: "
                    + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in counts.most_common()))
        st.radio("Label for every trace in the queue", [label.value for label, *_ in LABEL_BUTTONS], index=None,
                 key=state.BULK_LABEL, horizontal=True, format_func=label_name)
        mine = sum(1 for t, by in loaders.current_labels(run_key).items() if reviewer_name() in by and t in set(queue))
        if mine:
            st.checkbox(f"also replace my earlier labels on {mine:,} of these traces", key=state.BULK_REPLACE,
                        help="Off: the bulk act labels only the traces you have not labelled yet.")
        chosen = st.session_state.get(state.BULK_LABEL)
        st.button(f"Label {len(queue):,} traces as {label_name(chosen) if chosen else '…'}",
                  key="bulk_apply", on_click=do_bulk, args=(run_key, list(queue)),
                  disabled=not reviewer_name() or chosen is None)


review_panel(run_key)


def history_frame(events: list[views.LabelEvent]) -> pd.DataFrame:
    """The run's label history as acts: a bulk act is one row (with its trace count)."""
    acts: dict[object, dict] = {}
    for e in events:
        batch = e.batch_id
        key = (batch, e.action) if batch else e.id
        act = acts.get(key)
        if act is None:
            acts[key] = {"time": e.created_at[:19].replace("T", " "), "reviewer": reveal_id(e.reviewer),
                         "act": ("bulk " if batch else "") + e.action, "label": e.label or "",
                         "traces": 1, "trajectory": reveal_id(e.trajectory_id), "bulk act": batch or ""}
        else:
            act["traces"] += 1
            act["trajectory"] = f"{act['traces']:,} traces"
    return pd.DataFrame(list(acts.values())[::-1])


blind = st.session_state.get(state.BLIND, True)
with st.expander("Label history of this run"):
    # Blind: the reviewer's own events, and others' only on traces the reviewer has labelled.
    events = loaders.history(run_key)
    if events:
        st.dataframe(history_frame(events), hide_index=True, width="stretch")
    else:
        st.caption("No labels yet.")
    if blind:
        st.caption("Blind review: other reviewers' labels on a trace appear here after you label it.")

with st.expander("Agreement between reviewers"):
    rows_ = [{"group": reveal_id(g), "items labelled by ≥ 2": a.items, "% agreement": a.percent_agreement,
              "Cohen's kappa": a.cohen_kappa, "Krippendorff's alpha": a.krippendorff_alpha,
              "reviewers": reveal_id(", ".join(a.reviewers))}
             for g, a in loaders.agreement(run_key).items() if a.items]
    if rows_:
        st.dataframe(rows_, hide_index=True, width="stretch")
        bulk = [e for e in events if e.batch_id and e.action == "label"]
        if bulk:
            st.caption(f"{len(bulk):,} of the label events in this run came from "
                       f"{len({e.batch_id for e in bulk}):,} bulk acts (see the history above).")
    else:
        st.caption("No trace you may see has labels from two reviewers yet." if blind
                   else "No trace has labels from two reviewers yet.")
    if blind:
        st.caption("Blind review: agreement is counted over the traces you have labelled only.")
