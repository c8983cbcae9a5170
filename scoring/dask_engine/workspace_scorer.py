"""``import --engine dask``: a run's blocks scored on the cluster and taken back in file order,
as the workspace's own import writes them."""

from __future__ import annotations

import collections
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import BlockFailed, EngineError, RunFailed
from ..ingest import (
    BLOCK_BYTES,
    Block,
)
from .planning import RunPlan, block_bounds
from .tasks import file_sha256, score_block, score_whole

WORKSPACE_WINDOW = 8
"""Blocks in flight per worker when a workspace import takes the blocks back in order: the
workers keep scoring ahead while the client writes, and hold a few blocks each, not the run."""


def workspace_scorer(plan: RunPlan, client, *, block_bytes: int = BLOCK_BYTES,
                     reclassifier: str | None = None) -> Callable[[Any], Iterator[Block]]:
    """``Workspace.import_run``'s ``scorer`` for ``import --engine dask``: the run's blocks are
    read and scored on the cluster (``score_block``, the tasks ``score`` runs) and come back to
    the client in file order, which writes them into SQLite as the local import does (line
    numbers, ids seen in two blocks and the counts are the workspace writer's). Each block's
    share of the side log is applied to the client's ``pay`` so its recapture report is the
    local one. A block that fails stops the import with its file and line."""

    def blocks(pay) -> Iterator[Block]:
        if plan.whole:  # one task: the importer on the worker, its blocks back in file order
            scored = client.submit(score_whole, plan, reclassifier, key=f"litmus-import-{uuid.uuid4().hex[:8]}")
            try:
                res = scored.result()
            except RunFailed as exc:
                raise EngineError(exc.message) from None
            scored.release()
            yield from res.blocks
            return
        bounds = iter(enumerate(block_bounds(plan, block_bytes)))
        tag = uuid.uuid4().hex[:8]
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        window = WORKSPACE_WINDOW * workers
        pending: collections.deque = collections.deque()

        def top_up() -> None:
            while len(pending) < window:
                nxt = next(bounds, None)
                if nxt is None:
                    return
                i, (start, end) = nxt
                pending.append(client.submit(score_block, plan, start, end, reclassifier, i,
                                             key=f"litmus-import-{tag}-{i}"))

        shift = plan.first_line  # as finish_run numbers lines: the first record line is first_line + 1
        spans = []
        try:
            top_up()
            while pending:
                future = pending.popleft()
                top_up()
                try:
                    res = future.result()
                except BlockFailed as exc:
                    _i, rel, at, message = exc.where
                    raise EngineError(f"{plan.source}:{shift + rel}: the block starting at byte {at:,} failed: "
                                      f"{message}") from None
                future.release()
                shift += res.lines
                spans.append(res.span)
                if not pending:  # the last block: the blocks must have read what the plan checked
                    hashing = client.submit(file_sha256, plan, *spans, key=f"litmus-import-{tag}-sha256")
                    try:
                        hashing.result()
                    except RunFailed as exc:
                        raise EngineError(exc.message) from None
                yield res  # its share of the side log is in the block (settle joins the shares)
        finally:
            if pending:
                client.cancel(list(pending))

    return blocks
