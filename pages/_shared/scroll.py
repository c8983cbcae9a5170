"""Where a transcript is scrolled: a deep link's message brought into view, a new trace opened at
its top, and the N / P keys stepping from one message to the next.

Streamlit has no scroll API. One small script does it; the only data it gets are anchors this
module computes from the render key's digest and a message's position (``anchor``), never the
trajectory's text. It looks elements up by the class Streamlit gives a keyed container
(``st-key-<key>``) and moves scroll positions; it writes nothing into the page.

A position is applied once per (transcript, target): a rerun of the same trace (a toggle, a
label note) leaves the reader where they are; another trace, or another linked message, moves.
"""

from __future__ import annotations

import hashlib

import streamlit as st

#: The keys that step through a transcript's messages (the Review page's own keys are 1-4, J, K, U).
NEXT_MESSAGE, PREVIOUS_MESSAGE = "n", "p"

_JS = """
export default function(component) {
  const { data } = component;
  const memory = (window.__litmusScroll = window.__litmusScroll || { done: "", data: null, timer: null });
  memory.data = data;
  function main() { return document.querySelector('[data-testid="stMain"]'); }
  function scroller() {
    const d = memory.data;
    const box = d && d.scope ? document.querySelector("." + d.scope) : null;
    if (box) {
      // Streamlit gives a fixed-height container its scrollbar on an inner element or on itself.
      const inner = [box, ...box.querySelectorAll("div")].find(
        (e) => e.scrollHeight > e.clientHeight + 1 && getComputedStyle(e).overflowY !== "visible");
      if (inner) return inner;
    }
    return main();
  }
  function anchors() {
    const d = memory.data;
    if (!d) return [];
    return [...document.querySelectorAll('[class*="' + d.prefix + '"]')].filter(
      (e) => [...e.classList].some((c) => c.startsWith(d.prefix) && /^[0-9]+$/.test(c.slice(d.prefix.length))));
  }
  function bringTo(el, box) {
    // The element's top at the top of its scrolling box (a few pixels of air above it).
    const delta = el.getBoundingClientRect().top - box.getBoundingClientRect().top - 8;
    box.scrollTop += delta;
  }
  function headerInView() {
    const d = memory.data;
    const head = d && d.header ? document.querySelector("." + d.header) : null;
    if (head && head.getBoundingClientRect().top < 0) head.scrollIntoView({ block: "start" });
  }
  function apply(token, tries) {
    const d = memory.data;
    if (!d || memory.done === token || token !== d.scope + "|" + d.trace + "|" + (d.target || "")) return;
    const scope = d.scope ? document.querySelector("." + d.scope) : main();
    const target = d.target ? document.querySelector("." + d.target) : null;
    if (!scope || (d.target && !target)) {
      // The new trace's elements are still arriving (Streamlit sends them in batches).
      if (tries > 0) memory.timer = setTimeout(() => apply(token, tries - 1), 100);
      return;
    }
    const box = scroller();
    const place = () => {
      // Looked up again each time: a rerun may have replaced the element with its new copy.
      const target = d.target ? document.querySelector("." + d.target) : null;
      if (target) {
        if (box === main()) target.scrollIntoView({ block: "start" });
        else { headerInView(); bringTo(target, box); }
      } else {
        if (box !== main()) box.scrollTop = 0;
        headerInView();
      }
      return box.scrollTop;
    };
    let placed = place();
    memory.done = token;
    // The page may still be settling (the old elements replaced, a code block painted, the
    // linked message framed): place it again while nobody has scrolled since.
    [150, 400, 800, 1500, 2500].forEach((ms) => setTimeout(() => {
      const d2 = memory.data;
      if (!d2 || memory.done !== token || box.scrollTop !== placed || !box.isConnected) return;
      placed = place();
    }, ms));
  }
  clearTimeout(memory.timer);
  if (data.apply) apply(data.scope + "|" + data.trace + "|" + (data.target || ""), 100);
  function typing(el) {
    if (!el || !el.tagName) return false;
    if (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
    if (el.tagName !== "INPUT") return false;
    if (el.getAttribute("role") === "combobox") return el.getAttribute("aria-expanded") === "true";
    return !["radio", "checkbox", "button", "submit", "reset", "range", "color", "file"].includes(el.type);
  }
  function onKey(e) {
    const d = memory.data;
    if (!d || !d.keys || e.ctrlKey || e.metaKey || e.altKey || typing(document.activeElement)) return;
    const key = (e.key || "").toLowerCase();
    const step = key === d.keys[0] ? 1 : key === d.keys[1] ? -1 : 0;
    if (!step) return;
    const box = scroller();
    const marks = anchors();
    if (!box || !marks.length) return;
    e.preventDefault();
    const top = box === main() ? 0 : box.getBoundingClientRect().top;
    const at = marks.map((m) => m.getBoundingClientRect().top - top - 8);
    // The message now at the top is the last one whose top is at or above the box's top.
    let here = -1;
    at.forEach((y, i) => { if (y <= 4) here = i; });
    // None has reached the top yet (the harness's parts above the first): the first message,
    // when it is on screen, is the one being read.
    const height = box === main() ? window.innerHeight : box.clientHeight;
    if (here < 0 && at[0] < height / 2) here = 0;
    const next = Math.max(0, Math.min(marks.length - 1, here + step));
    if (step < 0 && here >= 0 && at[here] < -4) {
      bringTo(marks[here], box);  // half-way through a message: back to its own start first
    } else {
      bringTo(marks[next], box);
    }
  }
  if (!memory.installed) {
    document.addEventListener("keydown", onKey);
    memory.installed = true;
  }
  return () => { if (memory.data === data) memory.data = null; };
}
"""

_component = st.components.v2.component("litmus_transcript_scroll", js=_JS)


def anchor(render_key: str) -> str:
    """A class-safe name for one rendered transcript: a digest of its render key (which holds the
    trajectory id, a hostile text), so two traces' anchors never collide and none carries text."""
    return hashlib.sha256(render_key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def message_key(anchor_: str, i: int) -> str:
    """The key of the container around message ``i`` of the transcript ``anchor_``."""
    return f"msg-{anchor_}-{i}"


def transcript_key(anchor_: str) -> str:
    """The key of the fixed-height container that scrolls the transcript ``anchor_``."""
    return f"transcript-{anchor_}"


def header_key(anchor_: str) -> str:
    """The key of the container holding the trace's header (kept in view when it opens)."""
    return f"header-{anchor_}"


def follow(anchor_: str, *, message: int | None, scrolls_inside: bool, header: bool = False,
           apply: bool = True) -> None:
    """Mount the page's scroller for the transcript ``anchor_``: bring ``message`` into view (a
    deep link), else open the transcript at its top; N / P step through its messages.
    ``scrolls_inside``: the transcript is in its own fixed-height container (Review); otherwise
    the page itself scrolls. ``apply`` False: only the N / P keys (nothing moves on this run)."""
    _component(data={"scope": f"st-key-{transcript_key(anchor_)}" if scrolls_inside else None,
                     "target": f"st-key-{message_key(anchor_, message)}" if message is not None else None,
                     "header": f"st-key-{header_key(anchor_)}" if header else None,
                     "trace": anchor_, "prefix": f"st-key-{message_key(anchor_, 0)[:-1]}",
                     "keys": [NEXT_MESSAGE, PREVIOUS_MESSAGE], "apply": apply},
               key="transcript_scroll")
