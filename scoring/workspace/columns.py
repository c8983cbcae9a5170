"""A run's score columns as stored beside its rows (written at import, read by the aggregates)."""

from __future__ import annotations

import operator

import msgspec

from ..aggregate import ScoreColumns
from ..rows import SCORE_FIELDS, SCORE_INDEX

_COLUMNS_FORMAT = 2
"""Bumped whenever ``_StoredColumns`` changes: a copy in another format is not read (the rows are)."""


class _StoredColumns(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """A run's score columns as stored beside its rows (JSON, decoded with these types checked)."""

    ids: list[str]
    task_ids: list[str]
    models: list[str | None]
    categories: list[str | None]
    reasons: list[str | None]
    statuses: list[str]
    lenient: list[int | None]
    truncation: list[str | None]
    classifiers: list[str | None]


_COLUMNS_DECODER = msgspec.json.Decoder(_StoredColumns)
_SCORE_FIELDS = SCORE_FIELDS
"""The trajectory columns ``ScoreColumns`` is built from, in ``_StoredColumns`` order."""
_COLUMNS_FROM_ROW = SCORE_INDEX



class _ColumnsBuilder:
    """Collects the stored rows' score columns as an import writes them."""

    def __init__(self) -> None:
        self.fields: list[list] = [[] for _ in _COLUMNS_FROM_ROW]
        self.dropped: set[str] = set()

    def add(self, rows: list[tuple]) -> None:
        for field, i in zip(self.fields, _COLUMNS_FROM_ROW, strict=True):
            field.extend(map(operator.itemgetter(i), rows))

    def drop(self, trajectory_id: str) -> None:
        """Leave out a row already added (a duplicate id found in a later block)."""
        self.dropped.add(trajectory_id)

    def encode(self) -> bytes:
        fields = self.fields
        if self.dropped:
            keep = [i for i, tid in enumerate(fields[0]) if tid not in self.dropped]
            fields = [[f[i] for i in keep] for f in fields]
        return msgspec.json.encode(fields)


def _decode_columns(data: bytes) -> ScoreColumns | None:
    """The stored columns; None when they do not decode to equal-length, well-typed fields (the
    rows are then read instead: they are the record, this is a copy)."""
    try:
        c = _COLUMNS_DECODER.decode(data)
        fields = (c.ids, c.task_ids, c.models, c.categories, c.reasons, c.statuses, c.lenient, c.truncation,
                  c.classifiers)
        if len({len(f) for f in fields}) != 1:
            return None
        return ScoreColumns.build(*fields)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        return None

