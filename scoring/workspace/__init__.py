"""The SQLite workspace (sqlite-utils): imported runs, scored trajectories, reviewer labels.

- One file, WAL mode, a busy timeout, versioned migrations run before any writer starts
  (``schema``).
- A run is imported in **one transaction**: a killed import leaves nothing behind, and the same
  content imported twice is one run (keyed by content SHA-256) (``importing``).
- Trajectory and call metadata live in columns (``scoring.rows`` defines the row); the heavy
  text stays in the run file and is read back by byte range for replay (canonical files are
  kept in the workspace folder) (``reads``).
- Labels are **append-only events**. The current label per reviewer and the final label per
  trajectory are derived from the history, never stored in its place; undo is an event too
  (``labels``).
- ``views`` is the API of the pages: typed read models, no storage detail.

Every operation opens its own connection (connections are never shared across threads).
"""

from __future__ import annotations

from .evaluations import evaluation
from .importing import CategoriesRederived, Importing, ImportResult, Rescored
from .labels import Labels
from .schema import BUSY_TIMEOUT_S, DB_ENV, DEFAULT_DB, MIGRATIONS, default_db_path
from .search import search_run


class Workspace(Labels, Importing):
    """A litmus-review workspace: the SQLite file and a folder beside it for run files.

    Its operations are grouped by concern (``Connection``: the file, its schema and
    connections; ``Reads``; ``Importing``; ``Labels``), one module each."""

    rescored_on_open: tuple[Rescored, ...] = ()
    """What the gate did when this object opened the workspace (``migrate``)."""
    categories_on_open: tuple[CategoriesRederived, ...] = ()
    """Whose categories were re-derived when this object opened the workspace (``migrate``)."""

    def migrate(self) -> int:
        """Bring the schema up to date, then pass the scorer-version gate: every run scored
        under another ``SCORER_VERSION`` is rescored from its original bytes (``rescore``), once
        per process per file, as the workspace is opened. A workspace that cannot be written
        keeps its runs as they are, marked stale wherever their numbers appear."""
        version = super().migrate()
        if not self.read_only:
            self.rescored_on_open = tuple(self.rescore())
            # categories read under another version, re-derived (no status moves: no rescore)
            self.categories_on_open = tuple(self.rederive_categories())
        return version


__all__ = ["BUSY_TIMEOUT_S", "DB_ENV", "DEFAULT_DB", "MIGRATIONS", "CategoriesRederived", "ImportResult", "Rescored",
           "Workspace",
           "default_db_path",
           "evaluation", "search_run"]
