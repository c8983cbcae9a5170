"""A score table's run in the workspace: a reviewer's label on one of its trajectories, and the
run imported into the workspace as a run like any other. The labels are the workspace's own,
keyed by run key and trajectory id; whether a trajectory takes one is read from the table."""

from __future__ import annotations

import posixpath
import tempfile
from pathlib import Path

from ..errors import InputError, StoreError
from ..model import ReviewLabel, judge_unseen
from ..proof import proof_path_of
from ..request import ScoringRequest
from ..workspace import ImportResult, Workspace
from ..workspace.labels import StatusReader
from .storage import absolute_location, error_message, file_system, protocol
from .table_reader import TableRun, failed_read, find_row, options_of, source_of

# --- labels -----------------------------------------------------------------------------------


def table_status(ws: Workspace, run: TableRun, storage_options: dict | None = None) -> StatusReader:
    """Where a label on a table's run reads its trajectory's status (``Labels.add_label``'s
    ``status_of``): the table's row (the run's rows are not in the workspace), or the
    workspace's own once the run is imported."""
    options = options_of(run, storage_options)

    def status(run_key: str, trajectory_id: str) -> tuple[str, str | None] | None:
        if ws.run(run_key) is not None:
            # The run is imported: the workspace's own rows decide, never a table's word for them
            # (a table naming an imported run's key could otherwise call any trajectory Inconclusive).
            return ws.label_status(run_key, trajectory_id)
        row = find_row(run, trajectory_id, options)
        if row is None:
            raise InputError(f"no trajectory {trajectory_id!r} in run {run_key[:12]}", source=run.location)
        if judge_unseen(row["status"], row.get("reason")):
            # A table's reviewed rate is built from its stored summary, which counts Inconclusive
            # labels only: a label here would count in the workspace's rate and not in the table's.
            raise StoreError(f"trajectory {trajectory_id!r} is UNSCORED judge_did_not_see_full_surface: import the run "
                             "into the workspace to label it from the judge did not see queue (a score table does not "
                             "count such labels)")
        return row["status"], row.get("reason")

    return status


def add_label(ws: Workspace, run: TableRun, trajectory_id: str, reviewer: str, label: ReviewLabel | str,
              note: str = "", storage_options: dict | None = None) -> int:
    """A reviewer's label on a table's trajectory, stored in the workspace as an imported run's
    (``Workspace.add_label``); refused unless the table says it is Inconclusive."""
    return ws.add_label(run.run_key, trajectory_id, reviewer, label, note,
                        status_of=table_status(ws, run, storage_options))


# --- a table's run, brought into the workspace ----------------------------------------------


def import_into(ws: Workspace, run: TableRun, storage_options: dict | None = None) -> ImportResult:
    """Make a table's run a run like any other of the workspace (Safe rates, Trajectories,
    Review, Report, ``score KEY``): its source is imported with the options it was scored with
    (side log, verdict map, ``--require-proof``), so the workspace scores the same bytes through the same pipeline,
    and the run key must come out as the table's (checked: labels given through the table carry
    over, being keyed by it). A source that is a URL is fetched first, with its side log and
    proof. Refused for a run scored with a re-classifier (the app runs no code a table names)
    and, for a table chosen under a root, for sources outside it (``source_of``)."""
    d = run.summary
    storage_options = options_of(run, storage_options)
    if d.get("reclassifier"):
        raise InputError("this run was scored with a re-classifier: import its file with `litmus-review import "
                         "--reclassifier …` (the app runs no re-classifier a table names)", source=run.location)
    source = source_of(run, absolute_location(d["source"]))
    side = (d.get("side_log") or {}).get("source")
    side = source_of(run, absolute_location(side)) if side else None
    with tempfile.TemporaryDirectory(dir=ws._scratch()) as tmp:
        # A proof side log only where the engine read one (its summary names it): the run key
        # names the proof, so fetching one the engine did not read would give another key.
        path = _local_copy(source, Path(tmp), storage_options, with_proof=bool(d.get("proof")))
        payloads = _local_copy(side, Path(tmp), storage_options) if side else None
        # the summary's request, with the side log where it was fetched to; its re-classifier is refused above
        request = ScoringRequest.from_stored(d, payloads=None if payloads is None else str(payloads))
        result = ws.import_run(path, request, original_name=d.get("original_name") or d["source"])
    if result.run_key != run.run_key:
        raise StoreError(f"the workspace scored this run's source under another key ({result.run_key[:12]}, the "
                         f"table says {run.run_key[:12]}): the source changed since the table was written, or "
                         "it was scored with options the table does not record; both runs are kept")
    return result


def _local_copy(url: str, folder: Path, storage_options: dict | None, *, with_proof: bool = False) -> Path:
    """A local path holding ``url``'s bytes: a local file itself; a URL's file fetched into
    ``folder`` under its own name (and, ``with_proof``, the proof side log beside it, if any)."""
    if protocol(url) in ("file", "local"):
        return Path(url.split("://", 1)[1] if "://" in url else url)
    fs, path = file_system(url, dict(storage_options or {}))
    dest = folder / posixpath.basename(path.rstrip("/"))
    try:
        fs.get_file(path, str(dest))
        # by string: a URL's path is not a file-system path (Path would fold its "//")
        proof = posixpath.join(posixpath.dirname(path), proof_path_of(posixpath.basename(path)).name)
        if with_proof and fs.exists(proof):
            fs.get_file(proof, str(proof_path_of(dest)))
    except Exception as exc:
        if not failed_read(exc, OSError, ValueError):
            raise
        raise InputError(f"cannot fetch the run: {error_message(exc)}", source=url) from exc
    return dest
