"""Reading a run back: its row, header, scores, score columns and full trajectories."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ..aggregate import ScoreColumns
from ..errors import (
    InputError,
)
from ..importers import canonical
from ..ingest import no_cyclic_gc
from ..model import (
    RunHeader,
    ScoredTrajectory,
    Trajectory,
)
from ..rows import EVIDENCE_COLUMNS, ROW_COLUMNS, SCORE_FIELDS, SCORED_COLUMNS, scored_from_row
from ..stored import NAME_COLUMNS, StoredRun, workspace_names
from .columns import COLUMNS_FORMAT, decode_columns
from .copies import located_run, side_log_join, verified_copy, verified_side_log
from .schema import Connection


class Reads(Connection):
    def runs(self) -> list[dict]:
        """Every imported run's row, newest first."""
        with self.connect() as db:
            return [located_run(r, self.files) for r in db.table("runs").rows_where(order_by="imported_at desc")]

    def run_names(self) -> dict[str, str]:
        """Every imported run's name, distinct among them (``stored.workspace_names``), by key:
        read from the few columns it is made of (every door names runs with it, often)."""
        with self.connect() as db:
            cur = db.execute(f"SELECT {', '.join(NAME_COLUMNS)} FROM runs")
            return workspace_names(dict(zip(NAME_COLUMNS, row, strict=True)) for row in cur.fetchall())

    def run(self, run_key: str) -> dict | None:
        with self.connect() as db:
            rows = list(db.table("runs").rows_where("run_key = ?", [run_key]))
        return located_run(rows[0], self.files) if rows else None

    def find_run(self, ref: str) -> dict:
        """A run by key, key prefix (≥ 8 hex) or run id; InputError when none or ambiguous."""
        with self.connect() as db:
            rows = list(db.table("runs").rows_where(
                "run_key = ? or run_id = ? or (length(?) >= 8 and run_key like ? || '%')", [ref, ref, ref, ref]))
        if len(rows) != 1:
            what = "no imported run" if not rows else f"{len(rows)} imported runs"
            raise InputError(f"{what} matches {ref!r}", source=str(self.path))
        return located_run(rows[0], self.files)

    def header(self, run_key: str) -> RunHeader:
        return self.stored_run(run_key).header

    def stored_run(self, run_key: str) -> StoredRun:
        """The typed record of an imported run (``stored.StoredRun``)."""
        return StoredRun.from_row(self._run_or_raise(run_key))

    def _run_or_raise(self, run_key: str) -> dict:
        r = self.run(run_key)
        if r is None:
            raise InputError(f"no imported run {run_key!r}", source=str(self.path))
        return r

    def scored(self, run_key: str, *, evidence: bool = False) -> tuple[ScoredTrajectory, ...]:
        """The stored scores of a run, as the aggregator takes them.

        Without ``evidence`` the classifier and suggestion evidence texts are left out (the
        aggregates never read them; pages show them from the trajectory rows): at 200 k
        trajectories that halves the load.
        """
        cols = SCORED_COLUMNS + (EVIDENCE_COLUMNS if evidence else ())
        with self.connect() as db:
            rows = db.execute(f"select {', '.join(cols)} {_WHOLE_RUN} order by rowid", [run_key]).fetchall()
        with no_cyclic_gc():  # a third of the build time at 200 k rows
            return tuple(scored_from_row(r, evidence) for r in rows)

    def score_columns(self, run_key: str) -> ScoreColumns:
        """What the aggregates read of a run's scores, as columns: from the copy written at
        import, else from the rows (slower; ``scored``, building score objects, slower still).
        Equal to ``ScoreColumns.of(ws.scored(run_key))`` either way (tested)."""
        with self.connect() as db:
            stored = db.execute("SELECT format, data FROM run_columns WHERE run_key = ?", [run_key]).fetchone()
        if stored is not None and stored[0] == COLUMNS_FORMAT:
            columns = decode_columns(stored[1])
            if columns is not None:
                return columns
        return self.score_columns_from_rows(run_key)

    def score_columns_from_rows(self, run_key: str) -> ScoreColumns:
        """``score_columns`` read from the trajectory rows (the record the stored copy is
        derived from)."""
        with self.connect() as db:
            fields = score_fields(db, run_key)
        return ScoreColumns.build(*fields)

    def trajectory_rows(self, run_key: str, where: str = "", params: Iterable = ()) -> list[dict]:
        with self.connect() as db:
            sql = ("select * from trajectories where run_key = ?" + (f" and ({where})" if where else "")
                   + " order by rowid")
            cur = db.execute(sql, [run_key, *params])
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    def trajectory_table(self, run_key: str, columns: Sequence[str]) -> list[tuple]:
        """The named columns of every trajectory row of a run, in file order: the cheap summary
        view for tables (``trajectory_rows`` builds a dict of every column per row, several
        times slower)."""
        unknown = [c for c in columns if c not in _TRAJECTORY_COLUMNS]
        if unknown or not columns:
            raise ValueError(f"not trajectory columns: {unknown or 'none given'}")
        with self.connect() as db:
            return db.execute(f"select {', '.join(columns)} {_WHOLE_RUN} order by rowid", [run_key]).fetchall()

    def output_previews(self, run_key: str, trajectory_ids: Sequence[str]) -> dict[str, str]:
        """The stored start of each named trajectory's final output (by primary key: the cost
        is the ids asked for, not the run's size)."""
        out: dict[str, str] = {}
        with self.connect() as db:
            for start in range(0, len(trajectory_ids), _IDS_PER_QUERY):
                part = list(trajectory_ids[start:start + _IDS_PER_QUERY])
                marks = ", ".join("?" * len(part))
                out.update(db.execute(f"select trajectory_id, final_output_preview from trajectories where run_key = ? "
                                      f"and trajectory_id in ({marks})", [run_key, *part]).fetchall())
        return out

    def call_sizes(self, run_key: str) -> list[int]:
        """Every tool call's raw argument size (captured size where no raw size was recorded),
        in no particular order."""
        with self.connect() as db:
            (joined,) = db.execute(f"select group_concat(call_sizes, ',') {_WHOLE_RUN} and call_sizes != ''",
                                   [run_key]).fetchone()
        return _int_list(joined) if joined else []

    def load_trajectory(self, run_key: str, trajectory_id: str) -> Trajectory:
        """The full trajectory (heavy text), read back from the stored run file by byte range."""
        run = self._run_or_raise(run_key)
        rows = self.trajectory_rows(run_key, "trajectory_id = ?", [trajectory_id])
        if not rows:
            raise InputError(f"no trajectory {trajectory_id!r} in run {run['run_id']!r}", source=str(self.path))
        return read_back(run, rows[0])


def read_back(run: dict, row: dict) -> Trajectory:
    """A run's trajectory, read from its stored copy at ``row``'s byte range (its side log's
    proven payloads joined)."""
    trajectory_id = row["trajectory_id"]
    t = canonical.read_trajectory_at(verified_copy(run), row["offset"], row["length"])
    if t.id != trajectory_id:
        raise InputError(f"the stored run file changed since import: byte {row['offset']:,} now holds "
                         f"{t.id!r}, not {trajectory_id!r}; re-import the run", source=run["stored_path"])
    if run["payloads_path"]:
        t = side_log_join(verified_side_log(run)).apply(t, keep=True)
    return t


_IDS_PER_QUERY = 10_000
"""Well under SQLite's limit on bound parameters (32,766)."""

_WHOLE_RUN = ("from trajectories where rowid between (select min(rowid) from trajectories where run_key = ?1) "
              "and (select max(rowid) from trajectories where run_key = ?1) and +run_key = ?1")
"""Every row of run ``?1``, read as a rowid range: a run's rows are written in one transaction,
so they lie together. The plain ``where run_key = ?`` walks the primary-key index (in id order),
looks up each row and sorts them back into rowid order, about twice the SQLite time. The ``+``
keeps the planner off that index; rows of other runs that happen to fall in the range are still
filtered out."""

_TRAJECTORY_COLUMNS = frozenset(("run_key", *ROW_COLUMNS))



def _int_list(joined: str) -> list[int]:
    """Comma-separated integers as a list: numpy's C parser, several times faster than int() per
    value for a million call sizes (the cold Safe rates page reads them). Where it could differ from int()
    (it clamps beyond 64 bits, and stops at a trailing comma) int() decides, and raises as before
    on anything that is not a number."""
    try:
        values = np.fromstring(joined, dtype=np.int64, sep=",")
    except ValueError:
        values = None
    info = np.iinfo(np.int64)
    if values is None or len(values) != joined.count(",") + 1 or values.max() == info.max or values.min() == info.min:
        return [int(x) for x in joined.split(",")]
    return values.tolist()




def score_fields(db, run_key: str) -> list[np.ndarray]:
    """A run's ``SCORE_FIELDS`` read from its rows, one object array per field, in file order
    (an empty reason, as older rows may hold, read as none)."""
    rows = db.execute(f"SELECT {', '.join(SCORE_FIELDS)} {_WHOLE_RUN} ORDER BY rowid", [run_key]).fetchall()
    table = np.empty((len(rows), len(SCORE_FIELDS)), dtype=object)
    if rows:
        table[:] = rows  # one C pass; the fields are its columns
    fields = [table[:, j] for j in range(len(SCORE_FIELDS))]
    fields[4][fields[4] == ""] = None
    return fields
