"""The Dask cluster: a client of a scheduler, or of a LocalCluster on this machine (``connect``),
its dashboard, and the check that every worker runs this client's scorer and importers."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from .. import score
from ..errors import EngineError, RunFailed
from ..importers import formats
from .planning import RunPlan

LOCAL_WORKERS = 2
"""Workers of the LocalCluster started when no scheduler is given (one thread each: the
scorer holds the GIL)."""


def worker_versions() -> tuple[str, tuple[str, ...]]:
    """What must match between the client and every worker: the scorer version (read from its
    module at call time) and the importers registered (formats read)."""
    return score.SCORER_VERSION, tuple(sorted(formats()))


def check_workers(client) -> None:
    """``EngineError`` naming every worker whose scorer version or importer set differs from
    this client's (or that cannot import the scorer at all): their statuses would be another
    scorer's, so the fleet does not start. Each task checks again (``check_version``) for a
    worker that joins later."""
    mine = worker_versions()
    theirs = client.run(worker_versions, on_error="return")
    names = {a: w.get("name", a) for a, w in client.scheduler_info().get("workers", {}).items()}
    odd = []
    for addr, got in sorted(theirs.items()):
        if isinstance(got, BaseException):
            odd.append(f"{names.get(addr, addr)} ({addr}): cannot load the scorer ({type(got).__name__}: {got})")
        elif tuple(got[0:1]) != mine[0:1] or tuple(got[1]) != mine[1]:
            extra = sorted(set(got[1]) ^ set(mine[1]))
            odd.append(f"{names.get(addr, addr)} ({addr}): scorer {got[0]}"
                       + (f", importers differ ({', '.join(extra)})" if extra else ""))
    if odd:
        raise EngineError(f"workers refused: this client runs scorer {mine[0]}; " + "; ".join(odd)
                          + ". Install the same litmus-review on every worker")


def check_version(plan: RunPlan) -> None:
    """``RunFailed`` on a worker whose scorer is not the one the run was planned for."""
    if plan.scorer_version and plan.scorer_version != score.SCORER_VERSION:
        raise RunFailed(f"{plan.source}: a worker runs scorer {score.SCORER_VERSION}, the client "
                        f"{plan.scorer_version}: refused (install the same litmus-review on every worker)")


def dashboard_link(client) -> str | None:
    """The cluster's dashboard, when it serves one."""
    try:
        return str(client.dashboard_link)
    except Exception:  # no dashboard (bokeh absent, or disabled by config)
        return None


@contextlib.contextmanager
def connect(scheduler: str | None = None, workers: int | None = None) -> Iterator[Any]:
    """A client of the cluster at ``scheduler``, else at dask's ``scheduler-address`` (the
    ``DASK_SCHEDULER_ADDRESS`` environment variable, or dask's config files), else of a
    LocalCluster of ``workers`` single-threaded worker processes on this machine (closed on the
    way out). TLS and the connect timeout come from dask's config as for any Dask client. A
    scheduler that cannot be reached is an ``EngineError`` naming it."""
    import dask  # optional: the dask extra
    from dask.distributed import Client, LocalCluster  # optional: the dask extra

    address = scheduler or dask.config.get("scheduler-address", None)
    if address:
        try:
            client = Client(address, timeout=dask.config.get("distributed.comm.timeouts.connect", "30s"))
        except (OSError, TimeoutError, ValueError) as exc:
            raise EngineError(f"cannot reach the Dask scheduler at {address}: {type(exc).__name__}: {exc}") from None
        with client:
            yield client
        return
    # On the loopback interface only (scheduler, workers and their HTTP endpoints), like the app.
    # The cluster's own logs stay off this terminal (its worker processes inherit it; its nannies
    # log in this one, warnings silenced): every task's failure comes back to this client, which
    # reports it located; a log's traceback of it, of a worker's heartbeat while the cluster
    # closes, or a nanny's "killing" a slow worker at the end, would only bury that line.
    with dask.config.set({"distributed.nanny.pre-spawn-environ.DASK_LOGGING__DISTRIBUTED": "critical"}), \
            LocalCluster(n_workers=workers or LOCAL_WORKERS, threads_per_worker=1, processes=True, host="127.0.0.1",
                         dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        yield client
