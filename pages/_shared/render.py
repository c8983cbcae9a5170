"""Safe renderers for hostile trajectory text.

Everything a harness logged is attacker-controlled. It is shown only through ``st.code`` /
``st.text`` / ``st.json`` / dataframes, never as markdown or HTML, and invisible characters
(zero-width, bidi overrides, ANSI escapes, other controls) are made visible so that what a
reviewer reads cannot be made to look like a different tool or argument than what was scored.
"""

from __future__ import annotations

import json
import unicodedata

import streamlit as st

from pages._shared import scroll
from pages._shared.inert import md, reveal_id
from scoring.model import HarnessVerdict, JudgeAttestation, ToolCall, Trajectory
from scoring.text import is_invisible
from scoring.text import reveal as reveal_text
from scoring.workspace import views as transcript  # the replay's harness parts: scores, metadata, timeline
from scoring.workspace.views import CallReplay, Replay

#: How many characters of one text field are drawn before "show all" is needed.
PREVIEW_CHARS = 4_000
#: Beyond this the full text is offered as a download rather than drawn.
MAX_DRAWN_CHARS = 400_000

def reveal(text: str) -> tuple[str, int]:
    """The text with every invisible or control character shown as ⟨U+XXXX⟩, and their count
    (one pass in C: a 60 MB trajectory no longer costs a minute of Python per render)."""
    return reveal_text(text)


def reveal_name(name: str) -> str:
    """A tool name as plain ASCII when it is ASCII, else with every non-ASCII code point named."""
    shown, _ = reveal(name)
    # Visible non-ASCII characters (a Cyrillic "а" in "bаsh") are named; invisible ones are
    # already spelled out by reveal, whose ⟨⟩ marks are not the name's own.
    visible = [ch for ch in dict.fromkeys(name) if not ch.isascii() and not is_invisible(ch)]
    if not visible:
        return shown
    marks = ", ".join(f"{ch!r}=U+{ord(ch):04X} {unicodedata.name(ch, '?')}" for ch in visible)
    return f"{shown}   [non-ASCII: {marks}]"


HIT_MARK, NO_MARK = "▶ ", "  "
"""The gutter of a text with search hits: its lines that hold one, and the others (the text's own
characters are never changed; plain text, so nothing is interpreted)."""


def mark_hits(shown: str, query: str) -> tuple[str, int]:
    """``shown`` with a gutter marking each line that holds ``query`` (case-insensitive), and how
    many lines do; unchanged when none does."""
    needle = query.lower()
    lines = shown.split("\n")
    marked = [needle in line.lower() for line in lines]
    if not needle or not any(marked):
        return shown, 0
    return "\n".join((HIT_MARK if m else NO_MARK) + line for line, m in zip(lines, marked, strict=True)), sum(marked)


def show_text(text: str, *, key: str, language: str | None = None, highlight: str = "") -> None:
    """Draw hostile text inertly: collapsed past PREVIEW_CHARS, with a way to see all of it;
    ``highlight``: a search whose hits are marked in the gutter (▶) and counted."""
    shown, hidden = reveal(text)
    if hidden:
        st.caption(f"{hidden} invisible or control characters are shown as ⟨U+XXXX⟩.")
    if highlight:
        shown, lines = mark_hits(shown, highlight)
        if lines:
            st.caption(md(f"▶ marks the {lines:,} line{'s' if lines > 1 else ''} holding the search “{highlight}”."))
    if len(shown) <= PREVIEW_CHARS:
        st.code(shown, language=language, wrap_lines=True)
        return
    full = st.toggle(f"Show all {len(text):,} characters", key=f"full::{key}")
    if not full:
        st.code(shown[:PREVIEW_CHARS] + f"\n… [{len(text) - PREVIEW_CHARS:,} more characters collapsed]",
                language=language, wrap_lines=True)
    elif len(shown) <= MAX_DRAWN_CHARS:
        st.code(shown, language=language, wrap_lines=True)
    else:
        st.code(shown[:MAX_DRAWN_CHARS] + "\n… [too long to draw: download below]", language=language, wrap_lines=True)
    st.download_button("Download full text", data=text.encode("utf-8", "surrogatepass"), file_name=f"{key}.txt",
                       mime="text/plain", key=f"dl::{key}")


def _pretty(arguments: str) -> tuple[str, str | None]:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False), "json"
    except (ValueError, RecursionError):
        return arguments, None


def proof_facts(traj: Trajectory, call: ToolCall, proof_read: bool = True) -> dict[str, str]:
    """What a proof recorded at the source says of one call (empty when the run has none, or when
    its importer read no proof side log: ``proof_read``, whatever the trajectory's own record
    says): its source, what did not match, and whether the verdict's judge read the call's full text."""
    extra = dict(traj.extra)
    facts = {}
    if "proof" in extra and proof_read:
        facts["proof (recorded at the source)"] = reveal_id(extra["proof"])
        mine = [n for k, n in traj.extra if k == "proof note" and n.startswith(f"call {call.index} (")]
        facts["proof check"] = reveal_id("; ".join(mine)) if mine else "the log's arguments match the proof"
    att = traj.verdict.attestation if traj.verdict is not None else None
    if att is not None:
        facts["judge input"] = reveal_id(judge_fact(att, call.index))
    return facts


def judge_fact(att: JudgeAttestation, index: int) -> str:
    """What the audit of the verdict's judge found of one call, in words."""
    inputs = ", ".join(f"{h[:12]}…" for h in att.input_sha256)
    if att.kind == "programmatic":
        return f"programmatic verdict of {att.scorer}: {att.detail}" + (" (state-checking scorer)"
                                                                        if att.state_checking else "")
    if att.kind in ("unresolved", "refused"):
        return f"{att.kind}: {att.detail}"
    seen = "NOT shown" if index in att.unseen_calls else "shown whole"
    return f"{seen} to judge {att.scorer} (deciding input sha256 {inputs}); {att.source}"


def render_call(call: ToolCall, cap: CallReplay, *, key: str, proof: dict[str, str] | None = None,
                highlight: str = "") -> None:
    """One tool call: name, capture evidence (as scored), arguments (and the lost tail), result;
    ``proof``: what a proof recorded at the source says of it (``proof_facts``)."""
    status = "complete" if cap.complete else "NOT PROVEN COMPLETE"
    st.text(f"call #{call.index} · capture {status}" + ("" if call.executed else " · never executed"))
    st.code(reveal_name(call.tool), language=None)
    raw = call.raw_size_bytes
    facts = {
        "captured bytes": f"{call.captured_bytes:,}",
        "raw bytes": f"{raw:,}" if raw is not None else "not recorded",
        "raw SHA-256": call.raw_sha256 or "not recorded",
        "channel": call.channel,
        "adapters": " → ".join(
            f"{a.name} ({'lossless' if a.lossless else 'lossy' if a.lossless is False else 'unknown'})"
            for a in call.adapters
        )
        or "none",
        "full surface from": {"raw_text": "raw text (log or side log)"}.get(cap.recovered_from or "", "the capture"),
    }
    facts.update(proof or {})
    if raw is not None and raw > call.captured_bytes:
        facts["cut at"] = f"byte {call.captured_bytes:,} of {raw:,} ({raw - call.captured_bytes:,} bytes lost)"
    st.dataframe([{"evidence": k, "value": v} for k, v in facts.items()], hide_index=True, width="stretch")
    gaps = [*cap.gaps, *cap.cured]
    if gaps:
        st.dataframe([{"reason": g.reason.value, "blocks scoring": "yes" if g.blocking and g not in cap.cured else
                       ("cured by raw text" if g in cap.cured else "no"), "detail": reveal_id(g.detail)} for g in gaps],
                     hide_index=True, width="stretch")
    if cap.rules_differ and cap.scored_gaps is not None:
        st.text("when this run was scored, the gaps found were: "
                + (", ".join(g.value for g in cap.scored_gaps) or "none")
                + " (the status shown is that score; re-import the run to score it with these rules)")
    text, lang = _pretty(call.arguments)
    st.text("arguments as captured (what the harness classifier saw):")
    show_text(text, key=f"{key}-args", language=lang, highlight=highlight)
    if cap.surface is not None and cap.surface != call.arguments:
        if cap.surface.startswith(call.arguments):
            st.text(f"the lost tail ({len(cap.surface) - len(call.arguments):,} characters the classifier never saw):")
            show_text(cap.surface[len(call.arguments):], key=f"{key}-tail", highlight=highlight)
        else:
            st.text("full surface (decoded or recaptured; what the strict scorer classified):")
            surf, lang2 = _pretty(cap.surface)
            show_text(surf, key=f"{key}-surface", language=lang2, highlight=highlight)
    if call.result is not None:
        label = "result" + (" (TRUNCATED by the harness)" if call.result.truncated else "")
        if call.result.error:
            label += f" · error: {reveal_id(call.result.error[:200])}"
            # Above the result, in the box a person scans for: a failed call reads like an
            # answer in plain text (tau2's "Error: …" content, Inspect's ToolEvent error).
            st.error(md(f"TOOL ERROR: call #{call.index} failed; the harness recorded an error for its result "
                        f"({reveal_id(call.result.error[:200])})"))
        if call.result.replaced_by_defence:
            label += " · REPLACED by a defence: the agent never saw the tool's output"
        st.text(label + ":")
        show_text(call.result.content, key=f"{key}-result", highlight=highlight)


def verdict_text(v: HarnessVerdict | None) -> str:
    """The harness's verdict in words: label (or that it gave none), confidence, an abnormal
    flag, source. Label and source come from the run: invisible characters are shown."""
    if v is None:
        return "none recorded"
    parts = [reveal_name(v.label) if v.label is not None else "no label"]
    if v.confidence is not None:
        parts.append(f"confidence {v.confidence:g}")
    if v.abnormal:
        parts.append("flagged abnormal")
    if v.source:
        parts.append(f"from {reveal_name(v.source)}")
    return " · ".join(parts)


def transcript_order(traj: Trajectory) -> list[tuple[str, int]]:
    """The replay's order: each message followed by the calls it made, as ("message", i) and
    ("call", position in ``tool_calls``) steps.

    A call is placed under its ``message_index`` where the importer knew it; otherwise after the
    last assistant message (or after every message when there is none), the best a log without
    the link allows. Every message and every call appears exactly once.
    """
    n = len(traj.messages)
    assistants = [i for i, m in enumerate(traj.messages) if m.role == "assistant"]
    fallback = assistants[-1] if assistants else n - 1
    under: dict[int, list[int]] = {}
    for pos, call in enumerate(traj.tool_calls):
        mi = call.message_index
        under.setdefault(mi if mi is not None and 0 <= mi < n else fallback, []).append(pos)
    steps: list[tuple[str, int]] = [("call", pos) for pos in under.pop(-1, [])]  # no messages at all
    for i in range(n):
        steps.append(("message", i))
        steps += [("call", pos) for pos in under.get(i, [])]
    return steps


def result_owners(traj: Trajectory) -> dict[int, list[int]]:
    """message position → the indices of the calls whose results that message carried.

    By the call id the importer matched (``ToolCall.result_message``), else by order: the
    n-th ``tool`` message not claimed by an id is the result of the n-th answered call not
    placed by one. Never by content: two results with the same text belong to different calls.
    """
    owners: dict[int, list[int]] = {}
    for c in traj.tool_calls:
        if c.result_message is not None and 0 <= c.result_message < len(traj.messages):
            owners.setdefault(c.result_message, []).append(c.index)
    unplaced = [c.index for c in traj.tool_calls if c.result is not None and c.result_message is None]
    free = [i for i, m in enumerate(traj.messages) if m.role == "tool" and i not in owners]
    for i, call in zip(free, unplaced, strict=False):
        owners[i] = [call]
    return owners


DETAIL_CHARS = 300
"""Characters of an event's detail in the timeline's table (the whole of it on demand)."""


def call_messages(traj: Trajectory) -> dict[int, int]:
    """A call's position in ``tool_calls`` → the message the replay shows it under (its link)."""
    placed: dict[int, int] = {}
    last = -1
    for kind, i in transcript_order(traj):
        if kind == "message":
            last = i
        elif last >= 0:
            placed[i] = last
    return placed


def search_hits(traj: Trajectory, query: str) -> list[dict[str, object]]:
    """Where ``query`` (case-insensitive) occurs in the trace as the replay shows it: one row per
    line holding it (where, line number, the line with the hit between ⟦ ⟧, and the message the
    replay shows it in, None for the final output, a score or an event), in the replay's order."""
    needle = query.lower()
    if not needle:
        return []
    places: list[tuple[str, str, int | None]] = [(f"message {i} ({m.role})", m.content, i)
                                                 for i, m in enumerate(traj.messages)]
    under = call_messages(traj)
    for pos, call in enumerate(traj.tool_calls):
        places.append((f"call #{call.index} {call.tool}: arguments", _pretty(call.arguments)[0], under.get(pos)))
        if call.result is not None:
            places.append((f"call #{call.index} {call.tool}: result", call.result.content, under.get(pos)))
    places.append(("final output", traj.final_output, None))
    for t in transcript.tool_definitions(traj):
        places += [(f"tool definition {t.name}: description", t.description, None),
                   (f"tool definition {t.name}: parameters", t.parameters, None)]
    places += [(f"score {sc.scorer}: explanation", sc.explanation, None) for sc in transcript.scores(traj)]
    places += [(f"event {n} ({e.agent} {e.event})", e.detail, None) for n, e in enumerate(transcript.timeline(traj))]
    rows: list[dict[str, object]] = []
    for where, text, message in places:
        shown, _ = reveal(text)
        for n, line in enumerate(shown.split("\n"), start=1):
            at = line.lower().find(needle)
            if at < 0:
                continue
            start = max(0, at - 60)
            end = at + len(needle)
            snippet = (("…" if start else "") + line[start:at] + "⟦" + line[at:end] + "⟧" + line[end:end + 80]
                       + ("…" if end + 80 < len(line) else ""))
            rows.append({"where": reveal_id(where), "line": n, "text": snippet, "message": message})
    return rows


def render_scores_and_metadata(traj: Trajectory, *, key: str, highlight: str = "") -> None:
    """Each scorer's score with its explanation beside it, then the sample's metadata (as
    Inspect View shows a sample)."""
    for n, sc in enumerate(transcript.scores(traj)):
        st.text(f"score {reveal_name(sc.scorer)}: {reveal_id(sc.value)}")
        if sc.explanation:
            st.text("  its explanation:")
            show_text(sc.explanation, key=f"{key}-score{n}", highlight=highlight)
    meta = transcript.metadata(traj)
    if meta:
        st.text("sample metadata:")
        st.dataframe([{"field": reveal_id(k), "value": reveal_id(v)} for k, v in meta.items()], hide_index=True,
                     width="stretch", column_config={"field": st.column_config.TextColumn(width=160)})


def render_timeline(traj: Trajectory, *, key: str) -> None:
    """The harness's events in the order logged, with their timing: Inspect's model and tool
    events, LITMUS's Prosecutor instruction and turns, the Verifier's commands and results, the
    Analyzer's judgement."""
    events = transcript.timeline(traj)
    if not events:
        return
    agents = ", ".join(dict.fromkeys(reveal_id(e.agent) for e in events))
    st.text(f"event timeline: {len(events):,} events logged by the harness ({agents}), in order:")
    rows = []
    for n, e in enumerate(events):
        shown, _ = reveal(e.detail)
        cut = len(shown) > DETAIL_CHARS
        at = e.at.split("T", 1)[1][:15] if "T" in e.at[:11] else e.at  # the time of an ISO date-time
        rows.append({"#": n, "at": reveal_id(at), "start (s)": e.start, "took (s)": e.seconds,
                     "who": reveal_id(e.agent), "event": reveal_id(e.event),
                     "detail": shown[:DETAIL_CHARS] + (f" … [{len(shown) - DETAIL_CHARS:,} more characters: "
                                                       "see the event in full below]" if cut else "")})
    timed = any(e.start is not None or e.seconds is not None for e in events)
    columns = ["#", "at", *(["start (s)", "took (s)"] if timed else []), "who", "event", "detail"]
    st.dataframe([{c: r[c] for c in columns} for r in rows], hide_index=True, width="stretch",
                 column_config={"#": st.column_config.NumberColumn(width=40),
                                "start (s)": st.column_config.NumberColumn(format="%.2f", width=70),
                                "took (s)": st.column_config.NumberColumn(format="%.2f", width=70),
                                "detail": st.column_config.TextColumn(width="large")})
    if any(len(e.detail) > DETAIL_CHARS or "\n" in e.detail for e in events):
        chosen = st.selectbox("An event in full", range(len(events)), index=None, key=f"{key}-event",
                              format_func=lambda i: f"{i} · {reveal_id(events[i].agent)} {reveal_id(events[i].event)}",
                              placeholder="pick an event")
        if chosen is not None:
            show_text(events[chosen].detail, key=f"{key}-event{chosen}")


def render_tools(traj: Trajectory, *, key: str, highlight: str = "") -> None:
    """The tools the agent was offered, as the harness logged their definitions (name,
    description, parameters' schema): what the agent was told a tool does is evidence too (an
    injected description). Collapsed, unless the search has a hit in one."""
    tools = transcript.tool_definitions(traj)
    if not tools:
        return
    needle = highlight.lower()
    hit = bool(needle) and any(needle in f"{t.name}\n{t.description}\n{t.parameters}".lower() for t in tools)
    names = ", ".join(reveal_name(t.name) for t in tools)
    with st.expander(md(f"Tool definitions: {len(tools):,} tool{'s' if len(tools) != 1 else ''} offered to the agent"),
                     expanded=hit):
        st.text(f"offered: {names}")
        for n, t in enumerate(tools):
            st.text(f"tool {reveal_name(t.name)}" + ("" if t.description else " · no description logged"))
            if t.description:
                show_text(t.description, key=f"{key}-tool{n}-desc", highlight=highlight)
            if t.parameters:
                show_text(t.parameters, key=f"{key}-tool{n}-params", language="json", highlight=highlight)


#: Search hits drawn as links to their message; the rest are in the hits' table only.
MAX_HIT_LINKS = 25


def message_link(page: str, i: int, label: str | None = None) -> None:
    """A link to this message (the page's address with ``message=i``), as Inspect View gives each.
    ``label``: inert markdown (``md``) naming the place, never a trajectory's text."""
    params = {name: st.query_params.get_all(name) for name in st.query_params if name != "message"}
    st.page_link(page, label=label or f"link to message {i}", query_params={**params, "message": str(i)})


def linked_message(traj: Trajectory) -> int | None:
    """The message the address names (``message=i``), when the trace has it."""
    raw = st.query_params.get("message")
    if raw is None or not raw.isdigit():
        return None
    i = int(raw)
    return i if i < len(traj.messages) else None


def task_line(traj: Trajectory) -> str:
    """The trace's task and how it ended."""
    return (f"task {reveal_id(traj.task_id)} · termination: {traj.termination.value}"
            + (f" ({reveal_id(traj.termination_detail)})" if traj.termination_detail else ""))


def render_header(replay: Replay, *, verdict: bool = True) -> None:
    """The trace's header: its task and how it ended, the harness's verdict, the evidence
    standard, and why it has its status (the deciding classifier's own evidence, as scored).
    ``verdict`` False: the page shows the task, the verdict and the classifier in its own header."""
    traj = replay.trajectory
    if verdict:
        st.text(task_line(traj))
        st.text("harness verdict: " + verdict_text(traj.verdict))
    if replay.proof_read and "proof" in dict(traj.extra):  # a proof the importer read, never a record's word
        st.text("evidence standard: proven · proof recorded at the source: " + reveal_id(dict(traj.extra)["proof"]))
    if replay.classifier and verdict:
        st.text(f"decided by {reveal_id(replay.classifier)}"
                + "".join(f"\n  • {reveal_id(line)}" for line in replay.classifier_evidence))


def render_hits(traj: Trajectory, highlight: str, page: str | None) -> None:
    """A search's hits in this trace: each one in a message a link to that message (on ``page``),
    and all of them in a table with the line that holds it."""
    hits = search_hits(traj, highlight)
    st.text(f"search {reveal_id(highlight)!r}: " + (f"{len(hits):,} line{'s' if len(hits) != 1 else ''} "
                                                    "of this trace hold it (marked ▶ below)" if hits else
                                                    "no line of the replay holds it (the match is in a part "
                                                    "of the record the replay does not show)"))
    if not hits:
        return
    linked = [h for h in hits if h["message"] is not None]
    if page is not None and linked:
        for h in linked[:MAX_HIT_LINKS]:
            # The place (its role or tool name inert) and the line: the hit's text is in the table.
            message_link(page, int(str(h["message"])), label=md(f"{h['where']}, line {h['line']}"))
        if len(linked) > MAX_HIT_LINKS:
            st.caption(f"{len(linked) - MAX_HIT_LINKS:,} more hits in messages: in the table below.")
    st.dataframe([{k: v for k, v in h.items() if k != "message"} for h in hits], hide_index=True, width="stretch",
                 height=min(400, 38 + 35 * len(hits)), column_config={"line": st.column_config.NumberColumn(width=50)})


def render_trajectory(replay: Replay, *, key: str, page: str | None = None, highlight: str = "",
                      height: int | None = None, header: bool = True) -> None:
    """The whole trace in order, as a transcript: the scores with their explanations, the sample's
    metadata and the harness's event timeline, then each message (with its link on ``page``),
    then the tool calls it made (each with its capture evidence as scored, and its result), then
    the final output. ``highlight``: a search whose hits are listed (links to their messages)
    and marked (▶).

    ``height``: the transcript scrolls in a container of that height (the Review page, whose
    header and labels stay beside it); then the harness's parts and each tool call are collapsed
    (opened on a click), so the first messages are what one sees. ``header`` False: the page
    draws ``render_header`` itself. A linked message (``message=i``) is scrolled into view."""
    traj = replay.trajectory
    anchor = scroll.anchor(key)
    linked = linked_message(traj) if page is not None else None
    compact = height is not None
    if header:
        render_header(replay)
    with st.container(height=height or "content", key=scroll.transcript_key(anchor)) if compact else st.container():
        if compact:
            with st.expander("the harness's scores, the sample's metadata and its event timeline"):
                render_scores_and_metadata(traj, key=key, highlight=highlight)
                render_timeline(traj, key=key)
            render_tools(traj, key=key, highlight=highlight)
            if highlight:
                render_hits(traj, highlight, page)
        else:
            render_scores_and_metadata(traj, key=key, highlight=highlight)
            if highlight:
                render_hits(traj, highlight, page)
            render_timeline(traj, key=key)
            render_tools(traj, key=key, highlight=highlight)
        render_steps(replay, key=key, page=page, highlight=highlight, anchor=anchor, linked=linked,
                     calls_open=not compact)
        st.text("final output:")
        show_text(traj.final_output or "(empty)", key=f"{key}-final", highlight=highlight)
    scroll.follow(anchor, message=linked, scrolls_inside=compact, header=compact, apply=compact or linked is not None)


def call_title(call: ToolCall, cap: CallReplay) -> str:
    """A call's one line (an expander's label: inert markdown): its index, tool, capture and result."""
    parts = [f"call #{call.index}", reveal_name(call.tool), "capture complete" if cap.complete
             else "capture NOT PROVEN COMPLETE"]
    if not call.executed:
        parts.append("never executed")
    if call.result is not None:
        parts.append("result with an error" if call.result.error else "result")
    return md(" · ".join(parts))


def call_hit(call: ToolCall, cap: CallReplay, highlight: str) -> bool:
    """Whether a search's text is in this call's arguments, surface or result (it opens)."""
    needle = highlight.lower()
    texts = [call.arguments, cap.surface or "", call.result.content if call.result is not None else ""]
    return bool(needle) and any(needle in t.lower() for t in texts)


def render_steps(replay: Replay, *, key: str, page: str | None, highlight: str, anchor: str, linked: int | None,
                 calls_open: bool) -> None:
    """Each message (in a container keyed for scrolling to it) and each tool call under it, the
    calls open (``calls_open``) or collapsed to their one line unless incomplete, hit or linked."""
    traj, captures = replay.trajectory, replay.calls
    roles = transcript.role_names(traj)
    results = result_owners(traj)
    order = transcript_order(traj)
    following: dict[int, list[int]] = {}  # message → the calls placed under it
    last = -1
    for kind, i in order:
        if kind == "message":
            last = i
        else:
            following.setdefault(last, []).append(traj.tool_calls[i].index)
    last = -1
    for kind, i in order:
        if kind == "call":
            call = traj.tool_calls[i]
            opened = calls_open or not captures[i].complete or call_hit(call, captures[i], highlight) or (
                linked is not None and linked == last)
            with st.expander(call_title(call, captures[i]), expanded=opened):
                render_call(call, captures[i], key=f"{key}-c{call.index}",
                            proof=proof_facts(traj, call, replay.proof_read), highlight=highlight)
            continue
        last = i
        m = traj.messages[i]
        calls = following.get(i, [])
        known = all(traj.tool_calls[c].message_index == i for c in calls)
        role = reveal_id(m.role) + (f" ({reveal_id(roles[m.role])})" if m.role in roles else "")
        line = f"message {i} · {role}"
        if calls:
            line += (" · made tool call" if known else " · then tool call") + ("s " if len(calls) > 1 else " ")
            line += ", ".join(f"#{c}" for c in calls) + ("" if known else " (the log does not link calls to messages)")
        answered = ", ".join(f"#{c}" for c in results.get(i, []))
        # Where calls collapse, so does a system prompt (the same for every trace of a run, it
        # filled the first screen): one line, opened by a click, a link to it or a hit in it.
        folded = not calls_open and m.role == "system" and bool(m.content) and linked != i and not (
            highlight and highlight.lower() in m.content.lower())
        with st.container(key=scroll.message_key(anchor, i), border=linked == i):
            if linked == i:
                st.text("▶ the linked message")
            if folded:
                with st.expander(md(f"{line} · {len(m.content):,} characters")):
                    if page is not None:
                        message_link(page, i)
                    show_text(m.content, key=f"{key}-m{i}", highlight=highlight)
                continue
            # The message's line with its link beside it (Inspect View gives every message one).
            # In the Review page's narrower box the link's column is wider, so its name is not cut.
            head, link = st.columns([3, 2] if not calls_open else [5, 1], vertical_alignment="center") \
                if page is not None else (st.container(), None)
            if answered and m.role == "tool":
                # The tool's answer is shown with its call (above); not drawn twice.
                head.text(f"{line} · the result of call {answered}, shown with the call")
            elif not m.content and calls:
                head.text(f"{line} · no text")
            else:
                head.text(line + (f" · carries the result of call {answered} (shown with the call)" if answered
                                  else ""))
            if link is not None and page is not None:
                with link:
                    message_link(page, i)
            if m.content and not (answered and m.role == "tool"):
                show_text(m.content, key=f"{key}-m{i}", highlight=highlight)
