"""Zip members read within one budget for the whole archive (an Inspect ``.eval``, a zip of an
AgentDojo run directory), whatever their method: stored, deflate, bzip2, lzma or zstd.

Why it is written this way:

- Every decoder is fed compressed input in small pieces and asked for no more output than what
  is left (``max_length``; zstd's reader by size), so neither its output nor its internal
  buffers outgrow the budget. ``zipfile`` asks bzip2 and lzma for everything a compressed block
  holds, so a member of a few hundred bytes was decoded whole before any limit was looked at.
- A decoder's own memory is counted beside its output: an lzma dictionary (allocated as large
  as the member may decode to, never as large as its header declares) and a zstd window fill
  as the output grows; a bzip2 decoder's state is four bytes a byte of its block.
- Declared sizes are never trusted (a bomb declares what it likes); CRC-32 is checked for every
  method.
- The budget counts what the archive costs across its members, never per member: many small
  bombs add up, and so does a file padded with members each under the per-member cap.
- A member is held whole, once, as bytes: a sample is one JSON document and the standard
  library parses only whole documents. Its bytes are decoded to text and released before the
  text is parsed, so bytes, text and parsed objects are never all alive at once.
- Decoded bytes are not memory. Parsed JSON takes more room than its text (``{},`` is three
  bytes and a 64-byte dict), and what a run keeps of a member can be wider than the bytes it
  came from (one astral character stores a whole string at four bytes a character). So the
  same budget also bounds memory at any moment: before a member is parsed, what the records
  read so far keep (measured, ``retained_bytes``) plus an upper bound of what parsing this
  member takes (``json_parse_cost``: its text and its objects, from counts of its structural
  bytes and CPython's own object sizes) must fit in it; so must the copies that making its
  record takes (Inspect's ``attachment://`` and message-pool references: a few bytes of them
  can name megabytes many times over). Past either bound the archive is refused whole,
  located, as a likely bomb, before the memory is taken.
- What a record keeps is measured (a walk of its objects), not estimated: an estimate the
  records could exceed would let the budget pass without the memory holding.
- A file that is one JSON document (a legacy Inspect ``.json``, a tau2 results file, an
  AgentDojo trace, an ATIF trajectory, an OpenAI chat array) or JSON lines is read within the
  same budget (``_common.load_json_document``, ``iter_json_lines``, ``build_run``): parsed only
  when the bound of its parse fits what is left, its objects counted while the importer holds
  them (the bound, measured when only the bound stands in the way; a record's share let go once
  its record is made: ``released``), and every record made of it, imported or rejected, kept
  in the count. A document of ten million ``{}`` is a 28 MiB file that parses to gigabytes and
  a rejection each.
"""

from __future__ import annotations

import bz2
import collections
import contextlib
import dataclasses
import json
import lzma
import re
import struct
import sys
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any, NoReturn

from ..errors import OverBudgetError, RecordError

ZIP_ZSTANDARD = 93
"""ZIP compression method of zstd (APPNOTE 4.4.5), which current inspect_ai writes."""
READ_CHUNK = 1024 * 1024
"""Decoded bytes asked of a decoder at a time."""
IN_CHUNK = 64 * 1024
"""Compressed bytes fed to a decoder at a time."""

_PTR = struct.calcsize("P")
_NUMBER = max(sys.getsizeof(1.5), sys.getsizeof(2 ** 62))
_STR_HEADER = sys.getsizeof("\U0001F600") - 4  # the widest kind's header (a str of four-byte characters)
TOKEN_COST = {
    b"{": sys.getsizeof({"k": 0}),  # a dict holding its first entry
    b"[": sys.getsizeof([]) + 4 * _PTR + _NUMBER,  # a list, its first slots and a number in them
    b",": 4 * _PTR + _NUMBER,  # one more element: its slot (lists and dicts over-allocate) and a number
    b":": 10 * _PTR,  # one more entry: the dict's share of it and of the parser's memo of keys
    b'"': _STR_HEADER // 2 + 1,  # half of a string's header (a string is two quotes)
}
"""Bytes of CPython objects a JSON token can make, at most: a token inside a string is counted
too, so the sum over-counts and never under-counts."""
_SLACK = 4096
"""Bytes of a parse beyond its tokens: the document's own objects and the parser's."""
_ASTRAL_ESCAPE = re.compile(rb"\\u[dD][89abAB]")
_WIDE_ESCAPE = re.compile(rb"\\u(?!00)")
_BELOW_WIDE = bytes(range(0xC4))
"""Every byte but the lead bytes of UTF-8 characters past U+00FF (and bytes no UTF-8 has)."""
_BELOW_ASTRAL = bytes(range(0xF0))


def _width(raw: bytes | bytearray, encoding: str) -> int:
    """Bytes per character of the widest string JSON text in ``raw`` can make (CPython stores a
    string at the width of its widest character). Searched with ``translate`` and single-literal
    patterns (C loops over the bytes), never an alternation, which is tried at every byte."""
    if not encoding.startswith("utf-8"):
        return 1  # UTF-16/32 take two or four bytes a character already: never more than their bytes
    escapes = b"\\u" in raw
    if raw.isascii() and not escapes:
        return 1
    wide = raw.translate(None, _BELOW_WIDE)
    if wide.translate(None, _BELOW_ASTRAL) or (escapes and _ASTRAL_ESCAPE.search(raw)):
        return 4
    return 2 if wide or (escapes and _WIDE_ESCAPE.search(raw)) else 1


COST_CEILING = 8 + max(TOKEN_COST.values())
"""Bytes a parse can take per byte of JSON at most (its text and strings at four bytes a
character, and the costliest token): under it, a member is not counted token by token."""


def json_parse_cost(raw: bytes | bytearray) -> int:
    """An upper bound of the memory parsing ``raw`` takes at its peak: the decoded text and the
    objects made from it (their strings at most as long as the text, at its widest width)."""
    chars = len(raw) * _width(raw, json.detect_encoding(raw))
    return 2 * chars + sum(cost * raw.count(token) for token, cost in TOKEN_COST.items()) + _SLACK


_SHARED = (type(None), bool)
_LEAVES = frozenset({str, int, float, type(None), bool})
_STRINGS = (str, bytes)
_NUMBERS = (int, float)
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    """The attribute names of a dataclass's instances (looked up once per class)."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def retained_bytes(obj: Any, *, strings: bool = True, limit: int | None = None) -> int:
    """Memory held by ``obj`` and what it references (each object once): strings, numbers,
    containers, dataclasses; enum members, None and booleans are shared and counted as none.
    ``strings=False``: its containers only (what copying it with its strings shared costs).
    ``limit``: the walk stops once the count passes it (a result over ``limit`` is a part of
    the whole), so weighing a value too heavy to keep costs no more than weighing one kept."""
    cls = obj.__class__
    if strings and cls in _FIELDS:  # a record of leaves (a rejection): no walk, each leaf counted
        leaves = [getattr(obj, name) for name in _FIELDS[cls]]
        if all(leaf.__class__ in _LEAVES for leaf in leaves):
            return sys.getsizeof(obj) + sum(sys.getsizeof(leaf) for leaf in leaves if leaf.__class__ not in _SHARED)
    elif cls in _LEAVES or ((cls is list or cls is dict) and not obj):
        return 0 if cls in _SHARED or (cls is str and not strings) else sys.getsizeof(obj)
    return _retained(obj, set(), strings, limit)


def retained_bytes_each(objs: Iterable[Any], *, strings: bool = True) -> list[int]:
    """``retained_bytes`` of each of ``objs`` in one walk (what they share counted once, for
    the first that holds it)."""
    seen: set[int] = set()
    return [_retained(o, seen, strings) for o in objs]


def released_bytes(obj: Any) -> int:
    """What letting go of ``obj`` (a value ``json.loads`` made: dicts, lists, strings, numbers)
    frees at least: its containers, strings and numbers, but never what the parser shares
    between values (the keys of objects, memoised; small integers, the empty string and
    one-character strings, CPython's own), which stay alive with the rest of the document."""
    total, stack = 0, [obj]
    size, push = sys.getsizeof, stack.extend
    while stack:
        o = stack.pop()
        cls = o.__class__
        if cls is dict:
            total += size(o)
            push(o.values())
        elif cls is list:
            total += size(o)
            push(o)
        elif cls is str:
            total += size(o) if len(o) > 1 or (o and ord(o) > 255) else 0
        elif cls is int:
            total += size(o) if not -5 <= o <= 256 else 0
        elif cls is float:
            total += size(o)
    return total


def _retained(obj: Any, seen: set[int], strings: bool, limit: int | None = None) -> int:
    total, stack, most = 0, [obj], sys.maxsize if limit is None else limit
    size, push = sys.getsizeof, stack.extend
    while stack:
        if total > most:
            break
        o = stack.pop()
        cls = o.__class__
        if cls in _SHARED or id(o) in seen:
            continue
        seen.add(id(o))
        if cls is str or cls is bytes:
            total += size(o) if strings else 0
        elif cls is dict:
            total += size(o)
            push(o.keys())
            push(o.values())
        elif cls is list or cls is tuple:
            total += size(o)
            push(o)
        elif cls in _FIELDS:  # a dataclass seen before (a trajectory's, a rejection)
            total += size(o)
            push([getattr(o, name) for name in _FIELDS[cls]])
        elif isinstance(o, Enum):
            continue
        elif isinstance(o, _STRINGS):
            total += size(o) if strings else 0
        elif isinstance(o, _NUMBERS):
            total += size(o)
        elif isinstance(o, (dict, list, tuple, set, frozenset)):
            total += size(o)
            push(o.values() if isinstance(o, dict) else o)
            if isinstance(o, dict):
                push(o.keys())
        elif dataclasses.is_dataclass(o):
            total += size(o)
            push([getattr(o, name) for name in _fields(cls)])
        else:
            total += size(o)
    return total


MAX_TOTAL_BYTES = 2 * 1024 * 1024 * 1024
"""What one file may cost at most: the bytes a ``.eval`` (all members together) may decode to,
and the memory reading any file may take at any moment beside its own bytes (``Budget``)."""
MIN_TOTAL_BYTES = 128 * 1024 * 1024
TOTAL_RATIO = 200
"""A file's budget is ``TOTAL_RATIO`` × its size, at least ``MIN_TOTAL_BYTES`` and at most
``MAX_TOTAL_BYTES``: JSON logs compress by one or two orders of magnitude, not three."""


def total_budget(file_bytes: int) -> int:
    """The budget of a file of this size (``.eval``, JSON document, JSON lines): what it may decode
    to, and what reading it may take in memory."""
    return min(MAX_TOTAL_BYTES, max(MIN_TOTAL_BYTES, TOTAL_RATIO * file_bytes))



READING_TOTAL_BYTES = MAX_TOTAL_BYTES
"""What the files this process reads at once may cost together (``reading``): one file's largest
budget, so that N visitors of one server uploading padded logs at once take what one would, in
turn, not N budgets (benches/eval_bombs.py --together measures it)."""


class _Reading:
    """The budgets of the files being read in this process, against ``READING_TOTAL_BYTES``:
    a file waits, first come first served, until its budget fits beside the others'."""

    def __init__(self) -> None:
        self.in_use = 0
        self.turns: collections.deque[object] = collections.deque()
        self.changed = threading.Condition()
        self.this_thread = threading.local()

    @contextlib.contextmanager
    def reserved(self, nbytes: int) -> Iterator[None]:
        if getattr(self.this_thread, "reading", False):  # a file read inside another's reading
            yield  # (its continuations, a run of a directory): within the outer file's turn
            return
        n, turn = min(max(nbytes, 0), READING_TOTAL_BYTES), object()
        with self.changed:
            self.turns.append(turn)
            while self.turns[0] is not turn or self.in_use + n > READING_TOTAL_BYTES:
                self.changed.wait()
            self.turns.popleft()
            self.in_use += n
            self.changed.notify_all()  # the next in line may fit beside this one
        self.this_thread.reading = True
        try:
            yield
        finally:
            self.this_thread.reading = False
            with self.changed:
                self.in_use -= n
                self.changed.notify_all()


_READING = _Reading()


def reading(nbytes: int) -> contextlib.AbstractContextManager[None]:
    """Hold ``nbytes`` (a file's budget, at most ``READING_TOTAL_BYTES``) of what this process's
    reads may cost together for the duration, waiting in turn until it fits beside the files
    other threads are reading (an app's sessions). A thread already reading a file reads those
    it leads to within that one's turn."""
    return _READING.reserved(nbytes)


def reading_in_use() -> int:
    """The bytes of budget the files being read now hold (``reading``)."""
    return _READING.in_use

RECORD_SLOTS = sys.getsizeof((None, None)) + 16 * _PTR
"""What keeping one more record costs beside the record: its pair in the kept list and its
entry in the index of ids (``_common.build_run``)."""


class Budget:
    """What one file may cost: ``total`` decoded bytes (an archive's members together), and
    ``total`` bytes of memory at any moment: what the records read keep (``held``, measured),
    what the importer holds of the JSON it parsed (``parsed``: a document, lines), plus the
    member being read (its bytes and decoder's, then its parse, then what making its record
    copies: ``transient``). Over either, the file is refused (``OverBudgetError`` naming it and
    the member) before the memory is taken."""

    def __init__(self, total: int, source: str) -> None:
        self.total, self.left, self.held, self.source = total, total, 0, source
        self.member = ""
        self.parse_cost = 0  # what the current member's parsed objects take, at most
        self.copied = 0  # what making its record copied so far
        self._parsed: Any = None  # its objects, while ``parse_cost`` is the ceiling's (not counted)
        self.parsed = 0  # what the parsed documents the importer holds take: measured, or a bound
        self._bounded: list[Any] = []  # the documents whose share of ``parsed`` is their bound
        self._bound = 0  # that share

    @property
    def kept(self) -> int:
        """What is in memory beside the member being read: the records and the parsed JSON held."""
        return self.held + self.parsed

    @property
    def transient(self) -> int:
        return self.parse_cost + self.copied

    def start(self, member: str, parse_cost: int = 0, parsed: Any = None) -> None:
        """The record of ``member`` is being made (its objects take ``parse_cost``)."""
        self.member, self.parse_cost, self.copied, self._parsed = member, parse_cost, 0, parsed

    def room(self, in_memory: int) -> int:
        """Bytes of memory left beside what is kept and the ``in_memory`` bytes of the member
        being read (its bytes and its decoder's)."""
        return self.total - self.kept - in_memory

    def spend(self, n: int, in_memory: int, member: str) -> None:
        """Count ``n`` more decoded bytes of ``member``, of which ``in_memory`` bytes (its bytes
        and its decoder's, these ``n`` included) are now in memory."""
        self.left -= n
        if self.left < 0:
            raise OverBudgetError(f"zip members expand past {self.total:,} decoded bytes in total (at {member}); "
                                  "refused as a likely compression bomb", source=self.source)
        if not self._fits(in_memory):
            self._refuse(member, in_memory)

    def _fits(self, more: int) -> bool:
        """Whether ``more`` bytes fit beside what is kept; the parsed documents held are measured
        first (once) when only their bound stands in the way."""
        if self.kept + more <= self.total:
            return True
        if self._bounded:
            self.parsed += sum(retained_bytes_each(self._bounded)) - self._bound
            self._bounded, self._bound = [], 0
        return self.kept + more <= self.total

    def parse_json(self, raw: bytearray, member: str) -> Any:
        """``raw`` parsed, if parsing it fits what is left; ``raw`` is emptied (its memory
        released) once decoded to text. Raises UnicodeDecodeError, json.JSONDecodeError,
        RecursionError or ValueError as ``json.loads`` does."""
        cost, ceiling = COST_CEILING * len(raw) + _SLACK, True
        if not self._fits(cost):  # it may not fit: counted token by token
            cost, ceiling = json_parse_cost(raw), False
            if not self._fits(cost):
                self._refuse(member, cost)
        self.start(member, cost)
        text = raw.decode(json.detect_encoding(raw), "surrogatepass")  # what json.loads does with bytes
        raw.clear()
        parsed = json.loads(text)
        if ceiling:
            self._parsed = parsed
        return parsed

    def admit_document(self, raw: bytes | bytearray, what: str, line: int | None = None,
                       source: str | None = None) -> int:
        """The bound of what parsing ``raw`` (a whole file's JSON document, or one of its lines)
        takes, when it fits what is left; else OverBudgetError naming the file (``source``, a
        further file of the run; else the budget's), ``what`` (and its ``line``) and the budget,
        before anything is parsed."""
        cost = json_parse_cost(raw)
        if not self._fits(cost):
            beside = f" beside the {self.kept:,} kept of what was read before it" if self.kept else ""
            raise OverBudgetError(f"{what}: parsing it would take up to {cost:,} bytes of memory, more than the "
                                  f"file's budget of {self.total:,} bytes{beside}; refused as a likely bomb",
                                  source=source or self.source, line=line)
        return cost

    def admit_line(self, raw: bytes | bytearray, line: int) -> None:
        """As ``admit_document`` for one line of JSON lines, whose bound is not kept (what it
        parses to is measured): counted token by token only when the ceiling does not fit."""
        if not self._fits(COST_CEILING * len(raw) + _SLACK):
            self.admit_document(raw, f"line {line}", line)

    def hold_document(self, doc: Any, cost: int) -> None:
        """Count ``doc`` (parsed within ``cost``, its bound) while the importer holds it: at its
        bound, measured when the bound alone would refuse what comes next."""
        self.parsed += cost
        self._bounded.append(doc)
        self._bound += cost

    def hold_measured(self, n: int, line: int | None = None) -> None:
        """Count ``n`` more bytes held (measured) of the JSON parsed: a line's objects, and what
        the importer keeps of the line beside them."""
        self.parsed += n
        if not self._fits(0):
            raise OverBudgetError(f"its JSON lines take more than {self.total:,} bytes of memory (the file's budget) "
                                  "as they are read; refused as a likely bomb", source=self.source, line=line)

    def release(self, n: int) -> None:
        """``n`` bytes (measured) of a document held are let go: the part a record was made of."""
        from_bound = min(n, self._bound)
        self._bound -= from_bound
        self.parsed -= n

    def charge(self, n: int) -> None:
        """Count ``n`` bytes that making the current member's record copies (references
        resolved: Inspect's attachments and message pool)."""
        self.copied += n
        if self.kept + self.transient > self.total and self._parsed is not None:
            # its parse was counted at the ceiling, far above what it takes: measured instead
            self.parse_cost, self._parsed = retained_bytes(self._parsed), None
        if not self._fits(self.transient):
            raise OverBudgetError(f"{self.member or 'a record'}: its attachment and message-pool references "
                                  f"expand past {self.total:,} bytes of memory (the file's budget, with {self.kept:,} "
                                  "kept by the records read before it); refused as a likely bomb", source=self.source)

    def keep(self, obj: Any, what: str = "", extra: int = 0) -> None:
        """Count what ``obj`` (the record just made, kept until the run is built) holds in
        memory, and ``extra`` bytes kept with it; what making it took is let go. Past the
        budget, OverBudgetError naming ``what`` (the record)."""
        self.held += retained_bytes(obj) + extra
        self.start("")
        if not self._fits(0):
            raise OverBudgetError(f"{what or 'a record'}: the records read so far keep more than {self.total:,} "
                                  f"bytes of memory (the file's budget, with {self.parsed:,} held of the JSON they "
                                  "were read from); refused as a likely bomb", source=self.source)

    def _refuse(self, member: str, needs: int) -> NoReturn:
        raise OverBudgetError(f"zip members take more than {self.total:,} bytes of memory in total to read (at "
                              f"{member}: the records read before it keep {self.kept:,}, it needs about {needs:,}); "
                              "refused as a likely bomb", source=self.source)


class Charged(dict):
    """A sample's attachments, with what resolving a reference to them copies counted by
    ``charge`` (see ``attachment``)."""

    def __init__(self, items: dict, charge: Callable[[int], None]) -> None:
        super().__init__(items)
        self.charge = charge


def attachment(attachments: dict, key: str, *, whole: bool) -> Any:
    """``attachments[key]`` for a reference being resolved, charged to the budget ``attachments``
    carries (``Charged``) when resolving copies it: a reference inside a longer string makes a
    new string; one that is the whole string is replaced by the attachment itself (re.sub then
    returns its one piece, not a copy)."""
    value = attachments[key]
    if not whole and isinstance(attachments, Charged):
        attachments.charge(sys.getsizeof(value) if isinstance(value, (str, bytes)) else retained_bytes(value))
    return value


def _raw_member(data: bytes, info: zipfile.ZipInfo) -> memoryview:
    """A member's compressed bytes, found through its local header (never copied)."""
    if info.flag_bits & 0x1:
        raise NotImplementedError("encrypted member")
    off = info.header_offset
    if data[off:off + 4] != b"PK\x03\x04":
        raise zipfile.BadZipFile("bad local file header")
    name_len, extra_len = struct.unpack("<HH", data[off + 26:off + 30])
    start = off + 30 + name_len + extra_len
    raw = memoryview(data)[start:start + info.compress_size]
    if len(raw) != info.compress_size:
        raise zipfile.BadZipFile("member data runs past the end of the file")
    return raw


BZIP2_STATE = 100_000 * 9 * 4
"""Bytes a bzip2 decoder's state takes at most (four a byte of its largest block)."""
DEFLATE_WINDOW = 32 * 1024
ZSTD_MAX_WINDOW = 1 << 27
"""The largest zstd window decoded (zstd's own default limit)."""


@dataclass(frozen=True)
class _Decoder:
    """How a member is decoded: its chunks, and the memory its decoder holds beside them (its
    window or state: at most ``per_byte`` × the bytes decoded so far, and at most ``window``)."""

    chunks: Iterator[bytes]
    per_byte: int = 0
    window: int = 0

    def overhead(self, decoded: int) -> int:
        return min(self.per_byte * decoded, self.window)


def _decoder(data: bytes, info: zipfile.ZipInfo, room: Callable[[], int], limit: int) -> _Decoder:
    """A member's decoded bytes in chunks of at most ``room()`` bytes each, whatever its method:
    every decoder is asked for no more than that, so a bomb is refused by the caller's budget
    before its output is in memory. ``limit``: the most this member may decode to (an lzma
    dictionary is never made larger)."""
    raw = _raw_member(data, info)
    method = info.compress_type
    if method == zipfile.ZIP_STORED:
        return _Decoder(_stored(raw, room))
    if method == ZIP_ZSTANDARD:
        import zstandard  # lazily: only for zstd members (a dependency of the project; kept off the import path)

        window = zstandard.get_frame_parameters(bytes(raw[:18])).window_size
        if window > ZSTD_MAX_WINDOW:
            raise NotImplementedError(f"a zstd window of {window:,} bytes (at most {ZSTD_MAX_WINDOW:,} are read)")
        # every frame is held to the first one's window: one that declares more is refused, not allocated
        reader = zstandard.ZstdDecompressor(max_window_size=max(window, 1024))
        return _Decoder(_zstd(reader, raw, room), per_byte=1, window=window)
    if method == zipfile.ZIP_DEFLATED:
        return _Decoder(_inflated(raw, room), per_byte=1, window=DEFLATE_WINDOW)
    if method == zipfile.ZIP_BZIP2:
        return _Decoder(_limited(bz2.BZ2Decompressor(), raw, room), per_byte=4, window=BZIP2_STATE)
    if method == zipfile.ZIP_LZMA:
        # ZIP's LZMA: a 2-byte version, the properties' size, the properties, then a raw LZMA1 stream.
        (props,) = struct.unpack("<H", bytes(raw[2:4]))
        lzma1 = lzma._decode_filter_properties(lzma.FILTER_LZMA1, bytes(raw[4:4 + props]))  # type: ignore[attr-defined]
        # The dictionary is allocated as the header declares it (up to 4 GiB); no reference can
        # reach further back than the member's output, so one of ``limit`` bytes decodes the same.
        # Output is copied into it as it is decoded: it is memory beside the output, counted.
        lzma1["dict_size"] = max(4096, min(lzma1.get("dict_size", limit), limit))
        chunks = _limited(lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[lzma1]), raw[4 + props:], room)
        return _Decoder(chunks, per_byte=1, window=lzma1["dict_size"])
    raise NotImplementedError(f"compression method {method}")


def _stored(raw: memoryview, room: Callable[[], int]) -> Iterator[bytes]:
    pos = 0
    while pos < len(raw):
        chunk = bytes(raw[pos:pos + room()])
        pos += len(chunk)
        yield chunk


def _zstd(reader: Any, raw: memoryview, room: Callable[[], int]) -> Iterator[bytes]:
    with reader.stream_reader(raw, read_across_frames=True) as fh:
        while chunk := fh.read(room()):
            yield chunk


def _inflated(raw: memoryview, room: Callable[[], int]) -> Iterator[bytes]:
    inflate = zlib.decompressobj(-15)
    pos, tail = 0, b""
    while not inflate.eof:
        if not tail:
            if pos >= len(raw):
                out = inflate.decompress(b"", room())  # output still held back by the last limit
                if not out:
                    return
                yield out
                continue
            tail, pos = bytes(raw[pos:pos + IN_CHUNK]), pos + IN_CHUNK
        out = inflate.decompress(tail, room())
        tail = inflate.unconsumed_tail
        if out:
            yield out


def _limited(decoder: bz2.BZ2Decompressor | lzma.LZMADecompressor, raw: memoryview,
             room: Callable[[], int]) -> Iterator[bytes]:
    """Output of a bzip2 or lzma decoder, asked for at most ``room()`` bytes at a time and fed
    ``IN_CHUNK`` bytes only when it needs input (so its buffer of input holds at most that)."""
    pos = 0
    feed: memoryview | bytes
    while not decoder.eof:
        if decoder.needs_input:
            if pos >= len(raw):
                return  # the input ends (an lzma stream without an end mark ends here; the CRC judges it)
            feed, pos = raw[pos:pos + IN_CHUNK], pos + IN_CHUNK
        else:
            feed = b""
        out = decoder.decompress(feed, room())
        if out:
            yield out
        elif not feed:
            return


def read_member(data: bytes, info: zipfile.ZipInfo, *, cap: int, budget: Budget) -> bytearray:
    """A member's decoded bytes, decoded in chunks no larger than what is left of the member's
    ``cap`` and of the archive's ``budget`` (its decoded bytes, and memory: what is kept, this
    member's bytes and its decoder's window); its CRC-32 checked. Past the cap: RecordError
    (the member is unusable); past the budget: InputError (the archive is). A damaged member
    raises zipfile.BadZipFile, zlib.error, EOFError, lzma.LZMAError, NotImplementedError or
    zstandard.ZstdError."""
    name = info.filename
    if info.file_size > cap:
        raise RecordError(f"zip member {name} declares {info.file_size:,} bytes (> {cap:,})")
    out, crc = bytearray(), 0

    def room() -> int:  # one byte past a limit: enough to tell that it was passed
        in_memory = len(out) + decoder.overhead(len(out))
        growing = decoder.overhead(len(out)) < decoder.window  # its window grows with the output
        memory = budget.room(in_memory) // (1 + decoder.per_byte if growing else 1)
        return max(1, min(READ_CHUNK, cap + 1 - len(out), budget.left + 1, memory + 1))

    decoder = _decoder(data, info, room, min(cap, budget.left) + 1)
    for chunk in decoder.chunks:
        after = len(out) + len(chunk)
        budget.spend(len(chunk), after + decoder.overhead(after), name)
        if after > cap:
            raise RecordError(f"zip member {name} expands past {cap:,} bytes")
        crc = zlib.crc32(chunk, crc)
        out += chunk
    if crc != info.CRC:
        raise zipfile.BadZipFile(f"bad CRC-32 for {name}")
    return out
