"""Whether a judge's input *shows* a tool call: the fact behind ``classified_on(c, full(c))``.

A benign verdict certifies a trajectory only if the model call it was parsed from was given
every call's whole argument tree. This module decides that from the input's bytes alone, never
from what anybody says of them (a proof's boolean, a header, a digest handed out):

- a call is **shown** when one contiguous span of the input, beside the call's function name,
  parses back to a tree equal to the call's whole argument tree: JSON (any key order, spacing
  or escaping, also a JSON string holding JSON), a Python literal or call with keyword
  arguments, a YAML block, or ``key=value`` pairs. Numbers are compared as whole tokens of equal
  value, booleans only with booleans; a call with no arguments is shown only where its name is
  written as a call (``name()``, ``name {}``);
- a span inside the task prompt, inside text a model wrote earlier in the scoring (a summary is
  not a rendering), or inside another call's span does not count; a cut value never parses back
  to the whole tree, so a truncation marker is never a rendering;
- a call whose result (or whose one argument) is the final response the judge was shown — a
  ``submit``-style answer — counts as shown where that response is in the input.

Pure: no inspect_ai, no I/O. The Inspect importer finds the deciding model call and its input
(``importers._judge``); the proof's reader recomputes this on the input a proof record names.
"""

from __future__ import annotations

import ast
import hashlib
import json
import pprint
import re
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

WINDOW = 80
"""How far (characters) a span may start after, or end before, the function name and still be
"beside" it: room for ``", "arguments": `` or ``tool call NAME: `` and no more."""
MAX_SPAN = 4 * 1024 * 1024
"""The longest span tried (a 64 KiB call's rendering is far shorter); past it, not shown."""


@dataclass(frozen=True, slots=True)
class AuditedCall:
    """One tool call as the audit compares it: its name, its whole argument tree as logged, and
    its result (for a ``submit``-style answer)."""

    function: str
    arguments: Any
    result: str | None = None


# --- tree equality ---------------------------------------------------------------------------

def same_tree(a: Any, b: Any) -> bool:
    """Equal argument trees: objects by keys and values, arrays in order, strings as text,
    numbers by value (``1`` and ``1.0`` alike), booleans only with booleans, null with null."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is bool and type(b) is bool and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_tree(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_tree(x, y) for x, y in zip(a, b, strict=True))
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return False


# --- span parsers ----------------------------------------------------------------------------

_JSON = json.JSONDecoder()
_OPEN = {"{": "}", "[": "]", "(": ")"}
_CLOSE = {v: k for k, v in _OPEN.items()}


def _json_at(text: str, start: int) -> tuple[Any, int] | None:
    """A JSON value starting at ``start`` and where it ends; a JSON string holding JSON is
    read through (one level of escaping)."""
    try:
        value, end = _JSON.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value), end
        except (ValueError, RecursionError):
            pass
    return value, end


def _matching(text: str, start: int, limit: int) -> int | None:
    """The index just past the bracket that closes the one at ``start`` (quotes of either kind
    respected, backslash escapes skipped); None when it does not close within ``limit``."""
    depth, quote, i, end = 0, "", start, min(len(text), start + limit)
    while i < end:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _opening(text: str, close: int, limit: int) -> int | None:
    """The index of the bracket that opens the JSON value closing at ``close`` (``}``, ``]``
    or a string's closing quote), scanning back over double-quoted strings; None if not found."""
    ch = text[close]
    lo = max(0, close - limit)
    if ch == '"':
        i = close - 1
        while i >= lo:
            if text[i] == '"' and not _escaped(text, i):
                return i
            i -= 1
        return None
    depth, in_string, i = 0, False, close
    while i >= lo:
        c = text[i]
        if c == '"' and not _escaped(text, i):
            in_string = not in_string
        elif not in_string:
            if c in "}]":
                depth += 1
            elif c in "{[":
                depth -= 1
                if depth == 0:
                    return i
        i -= 1
    return None


def _escaped(text: str, i: int) -> bool:
    n, j = 0, i - 1
    while j >= 0 and text[j] == "\\":
        n, j = n + 1, j - 1
    return n % 2 == 1


def _python_at(text: str, start: int) -> tuple[Any, int] | None:
    """A Python literal (``{...}``, ``[...]``) or keyword call (``(a=1, b='x')``) at ``start``."""
    end = _matching(text, start, MAX_SPAN)
    if end is None:
        return None
    span = text[start:end]
    try:
        if span.startswith("("):
            node = ast.parse("f" + span, mode="eval").body
            if not isinstance(node, ast.Call) or any(k.arg is None for k in node.keywords):
                return None
            if node.args:  # positional arguments lose their names: not a lossless rendering
                return None
            return {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}, end
        return ast.literal_eval(span), end
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


_KEY = re.compile(r"[A-Za-z_][\w.-]*")
_BARE = re.compile(r"[^\s,;)\]}]+")


def _key_values_at(text: str, start: int) -> tuple[Any, int] | None:
    """``key=value`` pairs from ``start`` (separated by commas, semicolons or white space; a
    value is a JSON literal, a quoted Python string or a bare token), as an object."""
    out: dict[str, Any] = {}
    i, n, end = start, len(text), start
    while i < n:
        m = _KEY.match(text, i)
        if m is None or m.end() >= n or text[m.end()] != "=" or m.group(0) in out:
            break
        j = m.end() + 1
        value: Any
        if j < n and text[j] in "\"{[":
            got = _json_at(text, j) if text[j] != "{" and text[j] != "[" else (_json_at(text, j) or _python_at(text, j))
            if got is None:
                break
            value, j = got
        elif j < n and text[j] == "'":
            got = _python_at_string(text, j)
            if got is None:
                break
            value, j = got
        else:
            b = _BARE.match(text, j)
            if b is None:
                break
            token, j = b.group(0), b.end()
            value = _bare(token)
        out[m.group(0)] = value
        end = j
        k = j
        while k < n and text[k] in " \t,;":
            k += 1
        if k < n and text[k] == "\n":
            k += 1
        if k == j:
            break
        i = k
    return (out, end) if out else None


def _python_at_string(text: str, start: int) -> tuple[Any, int] | None:
    i, n = start + 1, len(text)
    while i < n:
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "'":
            try:
                return ast.literal_eval(text[start:i + 1]), i + 1
            except (ValueError, SyntaxError):
                return None
        i += 1
    return None


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


def _bare(token: str) -> Any:
    """A bare ``key=value`` token: JSON's literals and numbers as such, anything else as text."""
    if token in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[token]
    if _NUMBER.fullmatch(token):
        return json.loads(token)
    return token


def _yaml_block_at(text: str, start: int) -> tuple[Any, int] | None:
    """The indented YAML block that starts on the line after ``start`` (a name followed by a
    colon or nothing, then its arguments one level deeper)."""
    nl = text.find("\n", start)
    if nl < 0 or text[start:nl].strip(" \t:") != "":
        return None
    lines, pos, indent = [], nl + 1, None
    while pos < len(text):
        eol = text.find("\n", pos)
        eol = len(text) if eol < 0 else eol
        line = text[pos:eol]
        lead = len(line) - len(line.lstrip(" "))
        if line.strip() and ((indent is None and lead == 0) or (indent is not None and lead < indent)):
            break
        if line.strip() and indent is None:
            indent = lead
        lines.append(line)
        pos = eol + 1
        if pos - start > MAX_SPAN:
            return None
    if not lines or indent is None:
        return None
    block = "\n".join(lines)
    try:
        value = yaml.safe_load(block)
    except (yaml.YAMLError, RecursionError, ValueError):
        return None
    return value, nl + 1 + len(block)


# --- the predicate ---------------------------------------------------------------------------

def _name_positions(text: str, name: str) -> Iterator[tuple[int, int]]:
    if not name:
        return
    for m in re.finditer(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])", text):
        yield m.start(), m.end()


_CONNECTOR_WORDS = frozenset({"arguments", "args", "input", "parameters", "params", "kwargs", "with", "function",
                              "name", "tool", "tool_name", "call", "called", "type", "id", "call_id", "tool_call_id"})
_ID_KEYS = frozenset({"id", "call_id", "tool_call_id", "type"})
_GAP = re.compile(r"[A-Za-z_][\w.-]*|[^\w]")
_BEFORE_GAP = re.compile(r'\s*,\s*(?:"(?:id|type|call_id)"\s*:\s*"[\w.:-]{0,64}"\s*,\s*)*'
                         r'"(?:function|name|tool|tool_name)"\s*:\s*"')
"""What may stand between a rendering and a name after it: a JSON object's next key, the name's
(``{"arguments": {...}, "function": "NAME"``, sorted keys; an id or type between)."""


def connects(gap: str) -> bool:
    """The text between a name and a span only joins them: white space, punctuation and the
    words of a call's own structure (``", "arguments": ``, ``tool call NAME: ``, an ``id``'s
    value) — never other content, so a rendering further on is not "beside" the name."""
    after_id = False
    for m in _GAP.finditer(gap):
        token = m.group(0)
        if token[0].isalpha() or token[0] == "_":
            if token in _CONNECTOR_WORDS:
                after_id = token in _ID_KEYS
            elif after_id and len(token) <= 64:
                after_id = False
            else:
                return False
        elif (token.isdigit() or not (token.isspace() or token in "\"'`:=,;()[]{}-")) \
                and not (after_id and token.isalnum()):
            return False
    return True


def _spans_after(text: str, end: int) -> Iterator[tuple[int, int, Any]]:
    """Every parse of a span starting within ``WINDOW`` characters after a name ending at ``end``."""
    yaml_block = _yaml_block_at(text, end)
    if yaml_block is not None:
        yield end, yaml_block[1], yaml_block[0]
    stop = min(len(text), end + WINDOW)
    for i in range(end, stop):
        ch = text[i]
        got: tuple[Any, int] | None
        if ch.isspace() or not connects(text[end:i]):
            continue
        if ch in "{[\"":
            for got in (_json_at(text, i), _python_at(text, i) if ch != '"' else None):
                if got is not None:
                    yield i, got[1], got[0]
        elif ch == "(" and i == end:
            if text[i:i + 2] == "()":
                yield i, i + 2, {}
            got = _python_at(text, i)
            if got is not None:
                yield i, got[1], got[0]
            got = _key_values_at(text, i + 1)
            if got is not None:
                yield i, got[1], got[0]
        elif ch == "'":
            got = _python_at_string(text, i)
            if got is not None:
                yield i, got[1], got[0]
        elif _KEY.match(text, i) and (i == end or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            got = _key_values_at(text, i)
            if got is not None:
                yield i, got[1], got[0]


def _spans_before(text: str, start: int) -> Iterator[tuple[int, int, Any]]:
    """Every JSON span ending within ``WINDOW`` characters before a name starting at ``start``
    (sorted-key JSON writes ``"arguments"`` before ``"function"`` and ``"name"``)."""
    for close in range(start - 1, max(-1, start - WINDOW - 1), -1):
        if text[close] not in "}]\"":
            continue
        if not _BEFORE_GAP.fullmatch(text[close + 1:start]):
            continue
        opening = _opening(text, close, MAX_SPAN)
        if opening is None:
            continue
        got = _json_at(text, opening)
        if got is not None and got[1] == close + 1:
            yield opening, close + 1, got[0]


def _overlaps(a: tuple[int, int], regions: Sequence[tuple[int, int]]) -> bool:
    return any(a[0] < r[1] and r[0] < a[1] for r in regions)


class _Excluded:
    """Texts a rendering may not come from (the task prompt, the rubric, tool results, what a
    model wrote during the scoring), as written and JSON-escaped: a span whose text occurs in
    any of them could be a copy of it, wherever the copy sits and however it was cut."""

    def __init__(self, texts: Sequence[str]) -> None:
        forms = []
        for t in texts:
            t = t.strip()
            if len(t) < 2:
                continue
            forms += [t, json.dumps(t, ensure_ascii=False)[1:-1], json.dumps(t)[1:-1]]
        self.forms = list(dict.fromkeys(forms))

    def holds(self, piece: str) -> bool:
        return any(piece in form for form in self.forms)


_ESCAPE = re.compile(r'\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\["\\/bfnrt]')


@dataclass(frozen=True, slots=True)
class _View:
    """The input as searched, and where each of its characters came from in the input."""

    text: str
    origin: list[int] | None = None
    """Input index of each character; None: the input itself."""

    def span(self, start: int, end: int) -> tuple[int, int]:
        """A span of the view as the span of the input it came from."""
        if self.origin is None or start >= end:
            return start, end
        return self.origin[start], self.origin[end - 1] + 1


def _unescaped(text: str) -> _View:
    """``text`` with JSON string escapes decoded (``\\"`` → ``"``, ``\\n`` → newline, ``\\uXXXX``)."""
    out: list[str] = []
    origin: list[int] = []
    pos = 0
    for m in _ESCAPE.finditer(text):
        out.append(text[pos:m.start()])
        origin.extend(range(pos, m.start()))
        decoded = json.loads('"' + m.group(0) + '"')
        out.append(decoded)
        origin.extend([m.start()] * len(decoded))
        pos = m.end()
    out.append(text[pos:])
    origin.extend(range(pos, len(text)))
    return _View("".join(out), origin)


def _views(text: str) -> list[_View]:
    """The input as written, and with one level of JSON string escaping undone (a transcript
    dumped as a JSON string inside the prompt)."""
    if "\\" not in text:
        return [_View(text)]
    unescaped = _unescaped(text)
    return [_View(text)] if unescaped.text == text else [_View(text), unescaped]


def shown_calls(judge_input: str, calls: Sequence[AuditedCall], *, excluded: Sequence[str] = (),
                results: Sequence[str] = (), final_response: str | None = None) -> tuple[bool, ...]:
    """For each call, whether ``judge_input`` shows it (the module docstring's rule).

    Every rendering of every call is found first; one that sits inside a rendering of another
    call (an argument spelling a call) is not a rendering of its own; then each call takes one
    rendering no other call took. ``excluded``: texts a rendering may not come from (and the
    final response may not be taken from); ``results``: the tools' results, which may hold no
    rendering either (an injected instruction spelling a call is not the call), though a
    ``submit`` tool's result is the final response itself."""
    banned = _Excluded((*excluded, *results))
    found: list[list[tuple[int, int]]] = [[] for _ in calls]
    for view in _views(judge_input):
        for i, call in enumerate(calls):
            found[i] += [s for s in _spans_of(view, call, banned) if s not in found[i]]
    shown = [False] * len(calls)
    claimed: list[tuple[int, int]] = []
    for i in range(len(calls)):
        inside_another = {s for s in found[i] for j in range(len(calls)) if j != i and not same_tree(
            calls[j].arguments, calls[i].arguments) and any(_within(s, o) for o in found[j])}
        for span in found[i]:
            if span not in inside_another and not _overlaps(span, claimed):
                claimed.append(span)
                shown[i] = True
                break
    answer = (final_response or "").strip()
    if answer and not _Excluded(excluded).holds(answer):
        for i, call in enumerate(calls):
            if not shown[i] and _is_answer(call, answer) and any(
                    _whole_occurrence(v.text, answer) for v in _views(judge_input)):
                shown[i] = True
    return tuple(shown)


def _within(inner: tuple[int, int], outer: tuple[int, int]) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1] and inner != outer


def _whole_occurrence(text: str, piece: str) -> bool:
    """``piece`` occurs in ``text`` not as part of a longer word."""
    return re.search(r"(?<!\w)" + re.escape(piece) + r"(?!\w)", text) is not None


def _is_answer(call: AuditedCall, answer: str) -> bool:
    """A ``submit``-style call: its whole argument tree is one string, the final response, and
    what it returned (if it ran) is that response too — a submit tool echoes its answer, a
    command whose text happens to be the reply does not (the response shown is then the call
    shown; a call whose *result* merely equals the response is not)."""
    args = call.arguments
    return isinstance(args, dict) and len(args) == 1 and isinstance(next(iter(args.values())), str) \
        and next(iter(args.values())).strip() == answer and call.result is not None and call.result.strip() == answer


def _spans_of(view: _View, call: AuditedCall, banned: _Excluded) -> list[tuple[int, int]]:
    """Every input span (name and rendering) that shows ``call`` in ``view``, none of whose
    text could be a copy of an excluded text."""
    text, out = view.text, []
    for start, end in _name_positions(text, call.function):
        for span_start, span_end, value in (*_spans_after(text, end), *_spans_before(text, start)):
            span = (min(start, span_start), max(end, span_end))
            if span_end - span_start > MAX_SPAN or not same_tree(value, call.arguments):
                continue
            if banned.holds(text[span[0]:span[1]]) or banned.holds(text[span_start:span_end]):
                continue  # the rendering, or the name with it, could be a copy of an excluded text
            out.append(view.span(*span))
    for rendering in _inspect_renderings(call):
        pos = text.find(rendering)
        while pos >= 0:
            if not banned.holds(rendering):
                out.append(view.span(pos, pos + len(rendering)))
            pos = text.find(rendering, pos + 1)
    return list(dict.fromkeys(out))


def _inspect_renderings(call: AuditedCall) -> tuple[str, ...]:
    """The call as Inspect's ``format_function_call`` writes it (``model_graded_qa`` with
    ``include_history``): strings quoted but not escaped, so no parser reads it back; searched
    for verbatim instead, on one line and indented."""
    if not isinstance(call.arguments, dict) or not call.arguments:
        return ()
    parts = [f"{k}='{v}'" if isinstance(v, str) else
             f"{k}={pprint.pformat(v, width=80)}" if isinstance(v, (list, tuple, dict)) else f"{k}={v}"
             for k, v in call.arguments.items()]
    one_line = f"{call.function}({', '.join(parts)})"
    indented = f"{call.function}(\n" + textwrap.indent(",\n".join(parts), "    ") + "\n)"
    return (one_line, indented)


# --- the judge's input, canonically ----------------------------------------------------------

def _part(part: Any) -> Any:
    if isinstance(part, dict):
        return {k: v for k, v in part.items() if v is not None and k not in ("id", "internal")}
    return part


def canonical_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """One input message as the digest covers it: its role, every content part (a string is
    one text part), its tool calls (id, function, arguments) and what a tool message answers."""
    content = message.get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else \
        [_part(p) for p in content] if isinstance(content, list) else []
    out: dict[str, Any] = {"role": message.get("role"), "content": parts}
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [{"id": c.get("id"), "function": c.get("function"), "arguments": c.get("arguments")}
                             for c in calls if isinstance(c, dict)]
    for key in ("tool_call_id", "function"):
        if message.get(key) is not None:
            out[key] = message[key]
    return out


def input_digest(messages: Sequence[Mapping[str, Any]]) -> str:
    """SHA-256 of a model call's whole input: its messages as ``canonical_message``, as
    canonical JSON (keys sorted, compact, UTF-8). What a proof's judge record names (version 2)."""
    body = json.dumps([canonical_message(m) for m in messages], sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, allow_nan=False, default=str)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def text_join_digest(messages: Sequence[Mapping[str, Any]]) -> str:
    """SHA-256 of each message's text joined by a blank line (a version 1 proof's judge digest)."""
    text = "\n\n".join(message_text(m) for m in messages)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def message_text(message: Mapping[str, Any]) -> str:
    """A message's text as Inspect's ``ChatMessage.text`` reads it (text parts, newline-joined)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def rendered_input(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text the audit searches: every message's text, and each tool call the input holds as
    a structured part written ``tool call NAME: {canonical JSON}`` (a lossless rendering)."""
    out = []
    for m in messages:
        text = message_text(m)
        calls = m.get("tool_calls")
        lines = [text] if text else []
        for c in calls if isinstance(calls, list) else []:
            if isinstance(c, dict):
                args = json.dumps(c.get("arguments"), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                  default=str)
                lines.append(f"tool call {c.get('function')}: {args}")
        out.append("\n".join(lines))
    return "\n\n".join(out)
