"""The Dask cluster trials run on: an embedded `LocalCluster` (one worker process per timed
trial slot) or an existing cluster reached by address or by a `Client` the caller made."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from workbench.errors import first_line
from workbench.tuning.grid import TuneError
from workbench.tuning.trial import thread_budget
from workbench.words import counted

CONNECT_TIMEOUT_S = 10


@dataclass
class Cluster:
    """A connected client and whether this search owns its workers (may restart them)."""

    client: Any
    owned: bool
    workers: int | None = None  # the embedded cluster's worker count

    def slots(self) -> int:
        """How many trials to keep in flight: one per worker, so a worker times one at a time
        (an existing cluster's count is read again each time: workers come and go)."""
        if self.workers is not None:
            return self.workers
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def processing(self) -> dict[str, str]:
        """Task key -> the worker running it."""
        try:
            return {key: worker for worker, keys in self.client.processing().items()
                    for key in keys}
        except Exception:  # an unreachable scheduler only costs the worker's name
            return {}

    def abandon(self, future: Any, worker: str | None) -> str:
        """Stops waiting for `future`; an owned worker stuck in it is restarted. Says what."""
        with contextlib.suppress(Exception):
            future.cancel()
        if not (self.owned and worker):
            return "the trial was abandoned (its worker may stay busy until it ends)"
        try:
            self.client.restart_workers([worker], timeout=60, raise_for_error=True)
        except Exception as exc:
            return f"the trial was abandoned; restarting its worker failed: {first_line(exc)}"
        return "its worker was restarted"


@contextlib.contextmanager
def connect(workers: int | None = None, scheduler: str | None = None,
            client: Any = None) -> Iterator[Cluster]:
    """The cluster to run on, closed afterwards unless the caller brought it."""
    if sum(x is not None for x in (workers, scheduler, client)) > 1:
        raise TuneError("give one of workers=, scheduler= or client= (or none: one local worker)")
    if client is not None:
        yield Cluster(client, owned=False)
        return
    from distributed import Client

    if scheduler is not None:
        try:
            remote = Client(scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            raise TuneError(f"cannot reach Dask scheduler at {scheduler}: {first_line(exc)}, "
                            "start one with `dask scheduler` or drop --scheduler") from None
        with remote:
            yield Cluster(remote, owned=False)
        return
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise TuneError(f"workers must be a whole number >= 1, got {workers!r}")
    yield from _local(workers or 1)


def local_worker_config(workers: int) -> dict[str, Any]:
    """Dask settings for the embedded cluster's workers, which run TensorFlow, not numpy tasks:
    no statistical profiler (its stack sampling every 10 ms slowed trials), and native thread
    pools sized to the worker's share of the cores, set in the worker alone. Dask's defaults
    (OMP_NUM_THREADS=1, MALLOC_TRIM_THRESHOLD_, ...) are also written into the spawning
    process's environment, the caller's notebook kernel, and the trim slowed engine builds."""
    budget = str(thread_budget(workers))
    return {"distributed.worker.profile.enabled": False,
            "distributed.nanny.pre-spawn-environ": {},
            "distributed.nanny.environ": {"OMP_NUM_THREADS": budget, "MKL_NUM_THREADS": budget,
                                          "OPENBLAS_NUM_THREADS": budget}}


def _local(workers: int) -> Iterator[Cluster]:
    import dask
    from distributed import Client, LocalCluster

    try:
        with dask.config.set(local_worker_config(workers)):  # the nannies keep them
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=":0",
                                   scheduler_kwargs={"dashboard": False},
                                   silence_logs=logging.ERROR)
    except RuntimeError as exc:
        # Worker processes start by importing the caller's script: unguarded, it starts
        # another search there, which multiprocessing refuses.
        raise TuneError(f"could not start {counted(workers, 'local Dask worker')} "
                        f"({first_line(exc)}): "
                        "in a script, call tune() under `if __name__ == '__main__':`") from None
    try:
        with Client(cluster, set_as_default=False) as client:
            yield Cluster(client, owned=True, workers=workers)
    finally:
        cluster.close()
