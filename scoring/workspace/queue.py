"""The Review page's queue: which of a run's traces it holds and in what order, a pure
function of the run's trajectory table (``views.trajectory_table``), and how its one list
column (``tools``) is read."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum

import pandas as pd

from .. import rows as codec
from ..model import Status, judge_unseen


def tool_names(tools: Iterable[str | None]) -> list[str]:
    """The distinct tool names of a ``tools`` column (sorted)."""
    return sorted({t for ts in set(tools) for t in codec.split(ts)})


def has_any_tool(tools: pd.Series, chosen: Sequence[str]) -> pd.Series:
    """Which rows of a ``tools`` column called any of ``chosen``."""
    wanted = set(chosen)
    return tools.map(lambda ts: not wanted.isdisjoint(codec.split(ts if isinstance(ts, str) else None)))


class QueueMode(StrEnum):
    """Which traces the Review page's queue holds. The pages give each its display name."""

    ALL_INCONCLUSIVE = "all_inconclusive"
    """Every Inconclusive trace."""
    PENDING_FOR_ME = "pending_for_me"
    """Inconclusive traces this reviewer has not labelled."""
    LABELLED_BY_ME = "labelled_by_me"
    """Inconclusive traces this reviewer has labelled."""
    DISPUTED = "disputed"
    """Inconclusive traces whose reviewers disagree."""
    UNSCORED = "unscored"
    """UNSCORED traces, to look at, never to label."""
    JUDGE_UNSEEN = "judge_unseen"
    """UNSCORED ``judge_did_not_see_full_surface`` traces (capture proven, the judge not shown a
    call), for a reviewer who replays the full calls to label (``model.judge_unseen``)."""

    @property
    def labels(self) -> bool:
        """The queue's traces can be labelled (Inconclusive ones, and those the judge did not see)."""
        return self is not QueueMode.UNSCORED


class QueueSort(StrEnum):
    """The queue's orders. The pages give each its display name."""

    RUN_ORDER = "run_order"
    SUGGESTION = "suggestion"
    TERMINATION = "termination"
    CATEGORY = "category"
    TOOL = "tool"
    LARGEST_CALL_FIRST = "largest_call_first"
    DISPUTED_FIRST = "disputed_first"


_SORT_COLUMN: dict[QueueSort, str | None] = {
    QueueSort.RUN_ORDER: None, QueueSort.SUGGESTION: "suggestion", QueueSort.TERMINATION: "termination",
    QueueSort.CATEGORY: "intended_category", QueueSort.TOOL: "tools", QueueSort.LARGEST_CALL_FIRST: "max_raw_bytes",
    QueueSort.DISPUTED_FIRST: "disputed"}
"""The trajectory-table column each order sorts by (``disputed``: the reviewers-disagree set)."""


def review_queue(table, mode: QueueMode | str, *, mine: set[str], disputed: set[str], suggestion: Sequence[str] = (),
                 termination: Sequence[str] = (), category: Sequence[str] = (), tools: Sequence[str] = (),
                 sort: QueueSort | str = QueueSort.RUN_ORDER) -> list[str]:
    """The ids of the traces a reviewer's queue shows, filtered and sorted; ``table`` is the run's
    trajectory table (``views.trajectory_table``), ``mine`` the traces this reviewer labelled,
    ``disputed`` those whose reviewers disagree. Stable: labelling a trace does not move it, so
    "trace N of M" counts through the queue."""
    mode = QueueMode(mode)
    if mode is QueueMode.UNSCORED:
        return table.loc[table["status"] == Status.UNSCORED.value, "trajectory_id"].tolist()
    if mode is QueueMode.JUDGE_UNSEEN:
        view = table[[judge_unseen(s, r) for s, r in zip(table["status"], table["reason"], strict=True)]]
    else:
        view = table[table["status"] == Status.INCONCLUSIVE.value]
    for column, chosen in (("suggestion", suggestion), ("termination", termination), ("intended_category", category)):
        if chosen:
            view = view[view[column].isin(chosen)]
    if tools:
        view = view[has_any_tool(view["tools"], tools)]
    if mode is QueueMode.JUDGE_UNSEEN:
        pass
    elif mode is QueueMode.PENDING_FOR_ME:
        view = view[~view["trajectory_id"].isin(mine)]
    elif mode is QueueMode.LABELLED_BY_ME:
        view = view[view["trajectory_id"].isin(mine)]
    elif mode is QueueMode.DISPUTED:
        view = view[view["trajectory_id"].isin(disputed)]
    by = _SORT_COLUMN[QueueSort(sort or QueueSort.RUN_ORDER)]
    if by == "disputed":
        view = view.assign(_d=~view["trajectory_id"].isin(disputed)).sort_values("_d", kind="stable")
    elif by == "max_raw_bytes":
        view = view.sort_values(by, ascending=False, kind="stable")
    elif by:
        view = view.sort_values(by, kind="stable", na_position="last")
    return view["trajectory_id"].tolist()


def next_pending(queue: list[str], tid: str, labelled: set[str]) -> str | None:
    """The next trace after ``tid`` not yet labelled by this reviewer (wrapping round), else the
    next one (or, at the end, the one before)."""
    i = queue.index(tid) if tid in queue else -1
    after = queue[i + 1:] + queue[:max(i, 0)]
    pending = next((t for t in after if t not in labelled and t != tid), None)
    if pending is not None:
        return pending
    rest = queue[i + 1:] or queue[:i][-1:]
    return rest[0] if rest else tid
