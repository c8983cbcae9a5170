"""The score table's layout (docs/score-table.md): its folders and files, what a run key is, the
Parquet schema of its rows and its version, the rows' typed encodings against the workspace's
text ones, and how much of one of its own JSON files a reader takes."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from .. import rows as rows_codec
from ..errors import InputError
from ..importers._zip import json_parse_cost
from ..rows import SCHEMA, Column, Encoding
from .storage import PROTOCOLS, absolute_location, credentials_hint, error_message, file_system, reason_message

TABLE_DIR = "trajectories"
SUMMARY_FILE = "summary.json"
KEYS_FILE = "run_keys.json"
INDEX_FILE = "index.json"
"""Beside summary.json: per run, in the same order, ``[run key, run id, model]`` (about 100
bytes a run), what the app lists a table's runs by; each run's ``score --json`` object is then
read from ``SUMMARIES_DIR`` when the run is shown (summary.json is about 2.3 KB a run)."""
SUMMARIES_DIR = "summaries"
"""Inside ``out``: each run's ``score --json`` object (``RUN_KEY.json``), written with the run."""
INCONCLUSIVE_DIR = "inconclusive"
"""Beside the table: per run, its Inconclusive trajectories' ids and intended categories (the
only trajectories reviewers' labels apply to), written by the final stage, so the app applies
labels without scanning the run's rows."""
AGGREGATES_FILE = "aggregates.json"
"""In a table of the first layout: every run's aggregates in one list (read by the app when a
table has no ``RUN_AGGREGATES_DIR``). No longer written: at 10,000 runs it was about 800 MB,
written by the client and read whole; each run's are in ``aggregates/RUN_KEY.json``."""
SOURCES_DIR = "sources"
"""Beside the table: the canonical copy of each run of a format that cannot be split (its rows'
byte ranges point into it, as a workspace's rows point into its converted copy)."""
TABLE_SCHEMA_VERSION = "2"
"""The score table's row schema (docs/score-table.md): 2 = typed (list columns, a boolean).
Written in each part's metadata (``SCHEMA_VERSION_KEY``); a reader refuses rows of a newer one
(``check_schema_version``) and reads the text encodings of version 1 (``row_text``)."""
SCHEMA_VERSION_KEY = "litmus.schema_version"


def check_schema_version(metadata: dict | None, rel: str, location: str) -> None:
    """InputError naming the table at ``location`` when the rows ``rel`` (their Parquet schema's
    ``metadata``) were written with a newer row schema than ``TABLE_SCHEMA_VERSION``, or one that
    is not a version number: this reader would read their columns as something they are not.
    Rows with no version are of version 1 (written before it was recorded) and are read."""
    written = (metadata or {}).get(SCHEMA_VERSION_KEY.encode())
    if written is None:
        return
    text = written.decode("utf-8", "replace")
    if text.isdecimal() and int(text) <= int(TABLE_SCHEMA_VERSION):
        return
    shown = repr(text) if len(repr(text)) <= 40 else repr(text)[:37] + "..."
    raise InputError(f"the table's rows ({rel}) are of score table schema version {shown}; this litmus-review reads "
                     f"versions up to {TABLE_SCHEMA_VERSION}: install a newer one to read the table", source=location)


def _encoded(encoding: Encoding) -> tuple[str, ...]:
    return tuple(c.name for c in SCHEMA if c.encoding is encoding)


_TEXT_LISTS = _encoded(Encoding.NAMES)
_INT_LISTS = _encoded(Encoding.NUMBERS)
_JSON_LISTS = _encoded(Encoding.EVIDENCE)
_FLAGS = _encoded(Encoding.FLAG)
_GAPS = _encoded(Encoding.GAPS)


def table_schema(run_key: str | None = None, run_id: str | None = None, scorer_version: str | None = None):
    """The Parquet schema of a score table's rows (docs/score-table.md), with the run's key, id
    and scorer version, and the schema's version, in the file's metadata when given."""
    import pyarrow as pa  # optional: the dask extra

    kinds = {Encoding.FLAG: pa.bool_(), Encoding.NAMES: pa.list_(pa.string()),
             Encoding.EVIDENCE: pa.list_(pa.string()), Encoding.NUMBERS: pa.list_(pa.int64()),
             Encoding.GAPS: pa.list_(pa.list_(pa.string()))}

    def kind(c: Column):
        if c.encoding is Encoding.PLAIN:
            return pa.int64() if c.kind is int else pa.string()
        return kinds[c.encoding]

    meta = {SCHEMA_VERSION_KEY: TABLE_SCHEMA_VERSION, "litmus.run_key": run_key, "litmus.run_id": run_id,
            "litmus.scorer_version": scorer_version}
    return pa.schema([pa.field(c.name, kind(c)) for c in SCHEMA] + [pa.field("source", pa.string())],
                     metadata={k: v for k, v in meta.items() if v is not None})


def typed_columns(columns: dict[str, list]) -> dict[str, list]:
    """A block's row columns (the workspace's text encodings) as the table types them, read by
    the workspace's own decoders (``scoring.rows``), so both read a value alike."""
    out = dict(columns)
    for c in _FLAGS:
        out[c] = [None if v is None else bool(v) for v in columns[c]]
    for c in _TEXT_LISTS:
        out[c] = [list(rows_codec.split(v)) for v in columns[c]]
    for c in _INT_LISTS:
        out[c] = [list(rows_codec.split_ints(v)) for v in columns[c]]
    for c in _JSON_LISTS:
        out[c] = [None if v is None else list(rows_codec.evidence(v)) for v in columns[c]]
    for c in _GAPS:
        out[c] = [[list(rows_codec.split(call)) for call in v.split("|")] if v else [] for v in columns[c]]
    return out


def row_text(row: dict) -> dict:
    """A table row (``to_pylist``) with the workspace's text encodings (what ``rows.row``
    stores): a table written before the typed schema passes unchanged."""
    if not isinstance(row.get("reasons"), list):
        return row
    out = dict(row)
    for c in _FLAGS:
        out[c] = None if row[c] is None else int(row[c])
    for c in (*_TEXT_LISTS, *_INT_LISTS):
        out[c] = ",".join(map(str, row[c] or []))
    for c in _JSON_LISTS:
        out[c] = None if row[c] is None else json.dumps(row[c])
    for c in _GAPS:
        out[c] = "|".join(",".join(call) for call in row[c]) if row[c] else ""
    return out


STAGING_DIR = "_staging"
"""Inside ``out``: where a run's parts are written until the run is complete (readers such as
pyarrow and DuckDB skip ``_``-prefixed folders); removed when the fleet ends, and at the start
of a retry."""
RUNS_DIR = "runs"
"""Inside ``out``: one record per published run (``record_name`` of its source), written last:
the mark that the run is in the table, and what a retry to the same ``out`` skips."""
RUN_AGGREGATES_DIR = "aggregates"
"""Inside ``out``: each run's charts' aggregates (``RUN_KEY.json``), read when that run is shown."""
PART_BYTES = 64 * 1024 * 1024
"""About the size of a run's Parquet parts in a published table (the last part of a run, and a
small run's only part, are smaller): a run's blocks are staged one small part each (≈ 80 KiB
per 16 MiB block) and gathered into parts of this size when the run is published."""
ROW_GROUP_BYTES = 16 * 1024 * 1024
"""Rows held in memory (Arrow bytes) before they are written as one row group of a part."""


def record_name(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:32] + ".json"


RUN_KEY = re.compile(r"[0-9a-f]{64}")
"""What a run key is (a SHA-256 in hex): only such names are ever joined into a path to remove."""
TABLE_FILE_BYTES = 16 * 1024 * 1024
"""What one of a score table's own JSON files may hold when a reader opens the table (the app,
``table_reader``): ``index.json``, ``summary.json``, ``run_keys.json``, ``aggregates.json``, a
run's ``summaries/`` or ``aggregates/`` file. Far above what the engine writes for a table the
page lists (an index line a run; the summaries, read whole only from a table without an index),
and far below what a small zip can hold (megabytes of blanks compress to almost nothing): a
file past it refuses the table, named, before it is read whole, on every listing as at the
upload."""
TABLE_FILE_PARSE = 20 * TABLE_FILE_BYTES
"""What parsing one such file may take in memory, bounded before it is parsed
(``importers._zip.json_parse_cost``): room for the bound of the engine's own files (summaries,
aggregates) at the size cap, not for a file of empty objects or lists."""


def table_json(fh, rel: str, source: str, *, bounded: bool = True) -> Any:
    """The JSON of the table file ``rel`` open in ``fh``; ``bounded`` (a reader's): within what
    a reader takes of a table's own file (``table_json_bytes``). Raises ValueError as
    ``json.loads`` does for a file that is not JSON."""
    return json.loads(table_json_bytes(fh, rel, source) if bounded else fh.read())


def table_json_bytes(fh, rel: str, source: str) -> bytes:
    """The bytes of the table file ``rel`` open in ``fh``, refused (InputError naming the file)
    when it holds more than ``TABLE_FILE_BYTES`` (read no further than one byte past it, nor at
    all when the opened file says its size) or parsing it would take more than
    ``TABLE_FILE_PARSE``."""
    cap = TABLE_FILE_BYTES
    size = getattr(fh, "size", None)  # known once open (fsspec asked for it)
    raw = b"" if isinstance(size, int) and size > cap else fh.read(cap + 1)
    if len(raw) > cap or (isinstance(size, int) and size > cap):
        shown = f"{size:,} bytes" if isinstance(size, int) else f"more than {cap:,} bytes"
        raise InputError(f"the table's {rel} is {shown}; a score table's own file is at most {cap:,}: the table is "
                         "not read", source=source)
    cost = json_parse_cost(raw)
    if cost > TABLE_FILE_PARSE:
        raise InputError(f"the table's {rel} would take up to {cost:,} bytes of memory to parse (at most "
                         f"{TABLE_FILE_PARSE:,} for a score table's own file): the table is not read", source=source)
    return raw


def read_summaries(out: str, storage_options: dict | None = None,
               allowed: frozenset[str] = PROTOCOLS, *, keys_checked: bool = True,
               bounded: bool = True) -> list[tuple[str, dict]]:
    """The runs of a score table: (run key, its ``score --json`` object from ``summary.json``).
    Refused when absent: not a score table, or one still being written; and, ``keys_checked``,
    when ``run_keys.json`` names anything but run keys (a reader joins them into paths);
    ``bounded``, when either file passes what a reader reads of a table's file (``table_json``).
    The writer reads a damaged index back unchecked and unbounded (``finish_table``: it keeps the
    runs listed beside such a name, and never joins one into a path: ``_drop_replaced``; it
    wrote the table, and a refusal would drop the runs it lists)."""
    fs, path = file_system(absolute_location(out), dict(storage_options or {}), allowed)
    try:
        with fs.open(f"{path.rstrip('/')}/{SUMMARY_FILE}", "rb") as fh:
            summaries = table_json(fh, SUMMARY_FILE, out, bounded=bounded)
        with fs.open(f"{path.rstrip('/')}/{KEYS_FILE}", "rb") as fh:
            keys = table_json(fh, KEYS_FILE, out, bounded=bounded)
    except FileNotFoundError as exc:
        raise InputError(f"no {SUMMARY_FILE}: not a score table written by score --out, or one still being "
                         "written", source=out) from exc
    except InputError:
        raise
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {SUMMARY_FILE}: {reason_message(exc)}", source=out) from exc
    except Exception as exc:  # a storage backend's own (botocore's NoCredentialsError, an endpoint down...)
        raise InputError(f"cannot read {SUMMARY_FILE}: {error_message(exc)}{credentials_hint(exc)}",
                         source=out) from exc
    if not isinstance(summaries, list) or not all(isinstance(s, dict) and "run_id" in s for s in summaries) \
            or not isinstance(keys, list) or len(keys) != len(summaries):
        raise InputError(f"{SUMMARY_FILE} is not a list of run summaries, one per run key", source=out)
    if keys_checked and (bad := next((k for k in keys if not (isinstance(k, str) and RUN_KEY.fullmatch(k))),
                                     None)) is not None:
        shown = repr(bad) if len(repr(bad)) <= 80 else repr(bad)[:77] + "..."
        raise InputError(f"{KEYS_FILE} names {shown} as a run key, which is not one (64 hex digits): the table is "
                         "not read", source=out)
    return list(zip(map(str, keys), summaries, strict=True))
