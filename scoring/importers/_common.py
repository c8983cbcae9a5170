"""Helpers every importer shares: reading lines with locations, typed field access."""

from __future__ import annotations

import hashlib
import io
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeAlias

import orjson

from ..errors import DuplicateRecordError as DuplicateRecordError  # re-exported for the importers
from ..errors import InputError, RecordError
from ..files import read_regular
from ..model import Rejection, Run, RunHeader, Trajectory
from ..model import duplicate_message as duplicate_message  # re-exported for the importers
from ._zip import RECORD_SLOTS, Budget, released_bytes, retained_bytes, total_budget


def refuse_duplicates(kept: list[tuple[int | None, Trajectory]], rejected: list[Rejection],
                      duplicates: dict[str, int | None], source: str) -> list[tuple[int | None, Trajectory]]:
    """``kept`` (line, trajectory) pairs without the earlier copies of ids in ``duplicates``
    (id → line of a later copy); each earlier copy is added to ``rejected``."""
    if not duplicates:
        return kept
    out = []
    for line, t in kept:
        if t.id in duplicates:
            rejected.append(Rejection(source=source, line=line, record_id=t.id,
                                      message=duplicate_message(t.id, duplicates[t.id])))
        else:
            out.append((line, t))
    rejected.sort(key=lambda r: (r.line is None, r.line or 0))
    return out


def read_bytes(path: Path) -> bytes:
    """A regular file's bytes (a device or FIFO is refused before reading: it may never end)."""
    return read_regular(path)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def iter_lines(fh: BinaryIO) -> Iterator[tuple[int, int, bytes]]:
    """Yield (line number from 1, byte offset, line bytes without the newline) of a binary file."""
    offset = 0
    for lineno, raw in enumerate(fh, start=1):
        yield lineno, offset, raw.rstrip(b"\r\n")
        offset += len(raw)


def decode_json_line(raw: bytes) -> Any | RecordError:
    """The parsed object, or a RecordError saying what is wrong with the line."""
    try:
        # orjson is ~3x faster on the import hot path; on anything it refuses (NaN, big ints,
        # bad UTF-8…) the standard library decides, so the accepted language is json's.
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return RecordError(f"invalid UTF-8 at byte {exc.start}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # Some of json's messages end on "at" ("Unterminated string starting at"): one "at" only.
        return RecordError(f"invalid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}")
    except RecursionError:
        return RecordError("invalid JSON: nested too deeply")
    except ValueError as exc:  # an integer of more than 4,300 digits (Python's conversion limit)
        return RecordError(f"invalid JSON: {_int_limit(exc)}")


LINE_SLOTS = 1024
"""What an importer keeps of one line of JSON lines beside its parsed value, at most: the
(line, value) pair, its item (a tuple, a partial and an id) or the RecordError it is (an
exception, its message and attributes), its place in a list or a group."""


def iter_json_lines(data: bytes, source: str = "", budget: Budget | None = None) -> Iterator[
        tuple[int, Any | RecordError]]:
    """Yield (line number, parsed object or the error) for each non-blank line of ``data``.
    ``budget`` (the file's, ``file_budget``): each line parsed only when the bound of its parse
    fits, and what it parses to (measured) and ``LINE_SLOTS`` counted as held, since the
    importer keeps every line until the run is built (a line is ``OverBudgetError`` past it)."""
    for lineno, _offset, raw in iter_lines(io.BytesIO(data)):
        if raw.strip():
            if budget is None:
                yield lineno, decode_json_line(raw)
                continue
            budget.admit_line(raw, lineno)
            obj = decode_json_line(raw)
            held = retained_bytes(obj.message) + sys.getsizeof(obj) if isinstance(obj, RecordError) \
                else retained_bytes(obj)
            budget.hold_measured(held + LINE_SLOTS, lineno)
            yield lineno, obj


def file_budget(data: bytes, source: str, decode_budget: int | None = None) -> Budget:
    """The budget reading the file ``data`` may take (``decode_budget``, else ``total_budget``
    of its size): one rule for every format, whole documents, JSON lines and archives alike."""
    return Budget(total_budget(len(data)) if decode_budget is None else decode_budget, source)


def req(obj: dict, key: str, typ: type | tuple[type, ...], where: str = "") -> Any:
    """A required field of the given type, or a RecordError naming it."""
    if not isinstance(obj, dict):
        raise RecordError(f"{where.rstrip('.') or 'record'} is {type(obj).__name__}, expected an object")
    if key not in obj:
        raise RecordError(f"missing field {where + key!r}")
    return check(obj[key], typ, where + key)


def opt(obj: dict, key: str, typ: type | tuple[type, ...], default: Any = None, where: str = "") -> Any:
    """An optional field: absent or null gives ``default``; a wrong type is a RecordError."""
    if not isinstance(obj, dict):
        raise RecordError(f"{where.rstrip('.') or 'record'} is {type(obj).__name__}, expected an object")
    value = obj.get(key)
    if value is None:
        return default
    if value.__class__ is typ:  # the common case, without building a name (bool is not int here)
        return value
    return check(value, typ, where + key)


def check(value: Any, typ: type | tuple[type, ...], name: str) -> Any:
    # bool is an int in Python; a size of `true` is a mistake, not 1.
    if isinstance(value, bool) and bool not in (typ if isinstance(typ, tuple) else (typ,)):
        raise RecordError(f"field {name!r} is a boolean, expected {_tname(typ)}")
    if not isinstance(value, typ):
        raise RecordError(f"field {name!r} is {type(value).__name__}, expected {_tname(typ)}")
    return value


def _tname(typ: type | tuple[type, ...]) -> str:
    if isinstance(typ, tuple):
        return " or ".join(t.__name__ for t in typ)
    return typ.__name__


def load_json_document(data: bytes, source: str, budget: Budget) -> Any:
    """A whole-file JSON document, or InputError naming where it broke. Parsed only when the
    bound of its parse (``_zip.json_parse_cost``) fits ``budget``, the file's (``file_budget``):
    else OverBudgetError naming the file and the budget, before any memory is taken. The
    document is counted in the budget while the importer holds it (``Budget.hold_document``;
    ``released`` lets go of its records' share as they are made)."""
    cost = budget.admit_document(data, "the file's JSON document", source=source)
    try:
        doc = json.loads(data.decode("utf-8"))
        budget.hold_document(doc, cost)
        return doc
    except UnicodeDecodeError as exc:
        raise InputError(f"invalid UTF-8 at byte {exc.start}", source=source) from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", source=source, line=exc.lineno) from exc
    except RecursionError as exc:
        raise InputError("invalid JSON: nested too deeply", source=source) from exc
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise InputError(f"invalid JSON: {_int_limit(exc)}", source=source) from exc


def _int_limit(exc: ValueError) -> str:
    return f"a number too long to read ({exc.args[0].split(';')[0] if exc.args else exc})"


_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*(?:"(\s*:)?|\\?\Z)|[{}\[\]]')


def json_key_paths(head: bytes, max_depth: int = 2) -> set[tuple[str, ...]]:
    """The object keys of a JSON document's first ``max_depth`` levels, as paths, read from its
    first bytes (a cut-off head gives the keys seen so far).

    Detection by structure, not by where a key falls: a tau2 ``Results`` document writes
    ``info`` and ``tasks`` first, so ``simulations`` can sit hundreds of kilobytes in. Strings
    are matched whole by the regular expression (in C), so braces inside them are never counted.
    """
    paths: set[tuple[str, ...]] = set()
    stack: list[str | None] = []  # a key per open container (None for arrays and the root)
    pending: str | None = None
    for m in _JSON_TOKEN.finditer(head):
        tok = m.group(0)
        if m.group(1) is not None:  # a string followed by ":" is a key
            pending = tok[1:tok.rindex(b'"')].decode("utf-8", "replace")
            if len(stack) <= max_depth and all(k is not None for k in stack[1:]):
                paths.add((*(k for k in stack[1:] if k is not None), pending))
        elif tok in (b"{", b"["):
            stack.append(pending if tok == b"{" else None)
            pending = None
        elif tok in (b"}", b"]"):
            if stack:
                stack.pop()
            if not stack:
                break
            pending = None
        else:
            pending = None
    return paths


def array_first_keys(head: bytes) -> frozenset[str] | None:
    """The keys of a top-level JSON array's first element, read from the file's first bytes;
    None when the document is not an array or its first element is not an object (an empty
    set when that object is empty or cut before its first key)."""
    h = head.lstrip()
    if not h.startswith(b"["):
        return None
    rest = h[1:].lstrip()
    if not rest.startswith(b"{"):
        return None
    keys: set[str] = set()
    depth = 0
    for m in _JSON_TOKEN.finditer(rest):
        tok = m.group(0)
        if m.group(1) is not None:
            if depth == 1:
                keys.add(tok[1:tok.rindex(b'"')].decode("utf-8", "replace"))
        elif tok in (b"{", b"["):
            depth += 1
        elif tok in (b"}", b"]"):
            depth -= 1
            if depth == 0:
                break
    return frozenset(keys)


def first_line(head: bytes) -> bytes:
    return head.lstrip().split(b"\n", 1)[0]


Item: TypeAlias = "tuple[int | None, str | None, Callable[[], Trajectory] | RecordError]"
"""One record for ``build_run``: its line (None in a whole-document format), its id as far as
known, and the callable that makes its Trajectory (called inside ``build_run``, so whatever it
raises is reported with the record's place) or the RecordError it already is."""


def released(values: list, budget: Budget) -> Iterator[tuple[int, Any]]:
    """(index, element) of a list of a parsed document (its records: samples, simulations,
    conversations), each let go once the caller has made its record and asked for the next: its
    slot emptied and what that frees (``released_bytes``) taken off the document's count in
    ``budget``, so a document's records are never counted twice, as JSON and as records."""
    for i in range(len(values)):
        yield i, values[i]
        budget.release(released_bytes(values[i]))
        values[i] = None


def build_run(*, header: RunHeader, items: Iterable[Item], source: str, data: bytes,
              budget: Budget | None = None) -> Run:
    """A Run from (line, record id, callable → Trajectory | RecordError) items (made one at a
    time: ``items`` may be a generator, so no list of them is held).

    Every item is either imported or rejected with its location: nothing is dropped.
    ``budget`` (the file's, ``file_budget``): every record kept, trajectory or rejection, is
    counted in it as it is made; past it the file is refused (OverBudgetError), since ten million
    empty records are gigabytes of rejections.
    """
    kept: list[tuple[int | None, Trajectory]] = []
    rejected: list[Rejection] = []
    lines_of: dict[str, int | None] = {}
    duplicates: dict[str, int | None] = {}
    for line, record_id, make in items:
        try:
            if isinstance(make, Exception):
                raise make
            t = make()
            if t.id in lines_of:
                duplicates.setdefault(t.id, line)
                raise RecordError(duplicate_message(t.id, lines_of[t.id]), t.id)
        except InputError:
            raise  # the whole file is unusable (a decoding budget spent, say): never one record
        except RecordError as exc:
            rejected.append(Rejection(source=source, line=line, record_id=exc.record_id or record_id,
                                      message=exc.message))
            if budget is not None:
                budget.keep(rejected[-1], _place(line, record_id), RECORD_SLOTS)
            continue
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
            rejected.append(Rejection(source=source, line=line, record_id=record_id,
                                      message=f"malformed record: {type(exc).__name__}: {exc}"))
            if budget is not None:
                budget.keep(rejected[-1], _place(line, record_id), RECORD_SLOTS)
            continue
        lines_of[t.id] = line
        kept.append((line, t))
        if budget is not None:
            budget.keep(t, _place(line, record_id), RECORD_SLOTS)
    kept = refuse_duplicates(kept, rejected, duplicates, source)
    return Run(header=header, trajectories=tuple(t for _line, t in kept), rejected=tuple(rejected),
               records_seen=len(kept) + len(rejected), content_sha256=sha256_bytes(data))


def _place(line: int | None, record_id: str | None) -> str:
    """A record as a refusal names it: its line, else its id."""
    return f"line {line}" if line is not None else (record_id or "a record")
