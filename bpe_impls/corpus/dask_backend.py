"""Counting on a Dask cluster: one task per unit of work, partial counts tree-reduced on the workers.

    from bpe_impls.corpus.dask_backend import DaskBackend
    counts = DaskBackend(scheduler="tcp://10.0.0.1:8786").count(units, ("<|endoftext|>",))
    counts = DaskBackend(num_workers=4).count(units, specials)   # a LocalCluster, started and shut down

Only *where* `tally_unit` runs differs from the local backend: the units, the reading, the regex
and the bad-input errors are the same code (bpe_impls.corpus). The client submits the
whole graph at once: one counting task per unit, then merge tasks that each add up to `fan_in`
partial Tallies, level by level, until one is left; merges run on the workers that hold their
inputs, so the client receives a single result, never one per unit. Where the workers have the
compiled counter, every partial result is PackedCounts (one bytes of ~13 bytes plus the word per
distinct pre-token: cheap to ship and to hold) and the merges add them up in the counter's C table,
so neither the workers nor the driver build a Python object per pre-token; elsewhere they are
Counters of Python ints (exact at any size).

Faults. A worker that dies (OOM killer, SIGKILL, a lost machine) is the scheduler's business: the
units it was counting, and the finished partial counts held only in its memory, are computed again
on other workers, so the result is exactly the same. A task that keeps killing workers fails after
`distributed.scheduler.allowed-failures` deaths (default 3); that and any other failure becomes a
one-line error naming the unit. `retries` re-runs a task that *raised* (say a flaky network file
system); it does not affect worker deaths. Ctrl-C (KeyboardInterrupt) cancels the tasks, closes the
client and shuts down a LocalCluster this backend started.

Dask is imported only when a DaskBackend counts, so the package works without the `dask` extra.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from tqdm import tqdm

from ..base import compiled
from ..base.checks import one_line, require_int, require_main_guard, resolve_workers, validate_min_count
from ..base.errors import BpeError, ConfigError, WorkerError
from ..base.patterns import GPT2, SplitPattern
from .tally import CountingBackend, PackedCounts, Tally, drop_rare, failed_unit_error, merge_packed, tally_unit
from .units import SkipReport

# Partial Tallies added by one merge task: the tree has log_FAN_IN(units) levels, and a merge task
# holds FAN_IN + 1 Counters (its inputs and their sum).
FAN_IN = 8
# How long to wait for a scheduler to answer, and for a cluster to have at least one worker.
CONNECT_TIMEOUT = "30s"
WORKER_TIMEOUT = 60.0
INSTALL_HINT = "dask is not installed: pip install 'bpe_impls[dask]'"
# Run by each worker process of a LocalCluster we start (a Dask "preload" given as script text).
# Ctrl-C in a terminal reaches the whole process group, workers included; stopping is the driver's
# decision (it closes the cluster), and a KeyboardInterrupt in every worker would only print pages
# of tracebacks. The workers of a cluster given by address are not ours to change.
# A worker being closed may still send a heartbeat down the scheduler's closed stream, and logs
# that failure as an error with a traceback; with our cluster that only happens while the driver
# shuts it down (on Ctrl-C, or after a failure it reports in one line), so that record is dropped.
_WORKER_PRELOAD = """
import logging
import signal
try:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
except ValueError:  # not the main thread: then the signal is not delivered to this code anyway
    pass

class _ShutdownHeartbeat(logging.Filter):
    def filter(self, record):
        return not record.getMessage().startswith("Failed to communicate with scheduler during heartbeat")

logging.getLogger("distributed.worker").addFilter(_ShutdownHeartbeat())
"""


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return distributed


def _count_task(unit: Any, special_tokens: tuple[str, ...], pattern: SplitPattern = GPT2) -> Tally:
    """Runs on a worker: count one unit (packed where the worker can); a failure that is not a
    BpeError is named here, in one line."""
    try:
        return tally_unit(unit, special_tokens, pattern, packed=True)
    except BpeError:
        raise
    except Exception as exc:  # a bug, MemoryError, ...: the driver sees only the message
        raise failed_unit_error(unit, exc) from None


def _merge_task(*tallies: Tally, min_count: int = 1) -> Tally:
    """Runs on a worker: the sum of partial Tallies, filtered by min_count at the root only.

    The inputs live in the worker's memory as the results of other tasks and are never mutated: a
    merge that is retried or recomputed after a worker death must see them unchanged, or some
    counts would be added twice. So the largest is copied (one C-level dict copy) and the others
    added to the copy.
    """
    if not tallies:
        return Tally()
    skipped = sum((tally.skipped for tally in tallies), SkipReport())
    packed = [tally.counts for tally in tallies if isinstance(tally.counts, PackedCounts)]
    if compiled.AVAILABLE and len(packed) == len(tallies):
        # Summed in the compiled counter's table and packed again: the inputs are only read.
        return Tally(merge_packed(packed, min_count), skipped)
    ordered = sorted(tallies, key=lambda t: len(t.counts), reverse=True)
    total = Tally(Counter(ordered[0].counts), ordered[0].skipped)
    for tally in ordered[1:]:
        total.add(tally)
    assert isinstance(total.counts, Counter)  # (Tally.add keeps a Counter a Counter)
    drop_rare(total.counts, min_count)
    return total


@contextlib.contextmanager
def dask_client(num_workers: int, scheduler: str | None, doing: str) -> Iterator[tuple[Any, Any]]:
    """(the distributed module, a Client) of the cluster at `scheduler`, or of a LocalCluster of
    `num_workers` single-threaded worker processes started here; on the way out (Ctrl-C too) the
    client is closed and a cluster started here shut down, its busy workers not waited for.
    `doing` names the work in the one-line errors ("counting")."""
    distributed = _distributed()
    cluster = None
    client = None
    finished = False
    with _quiet_logs():
        try:
            cluster, client = _connect(distributed, num_workers, scheduler, doing)
            yield distributed, client
            finished = True
        finally:
            # Also on Ctrl-C: the client's futures are released (the scheduler drops every task
            # not yet run), then a cluster we started is shut down with its worker processes.
            if client is not None:
                _quietly(client.close)
            if cluster is not None:
                if not finished:  # workers may be mid-task: do not wait for them to finish
                    _quietly(lambda: cluster.sync(_stop_workers, list(cluster.workers.values())))
                _quietly(cluster.close)


def _connect(distributed: Any, num_workers: int, scheduler: str | None, doing: str) -> tuple[Any, Any]:
    if scheduler is None:
        require_main_guard(f"{doing} on a local Dask cluster")
        try:
            cluster = distributed.LocalCluster(
                n_workers=num_workers,
                threads_per_worker=1,  # parallelism is processes: counting holds the GIL
                processes=True,
                # A random local port: the default 8787 may be another cluster's on a shared machine.
                dashboard_address="127.0.0.1:0",
                silence_logs=logging.ERROR,
                preload=[_WORKER_PRELOAD],
            )
        except Exception as exc:
            message = f"cannot start a local Dask cluster: {type(exc).__name__}: {exc}"
            raise WorkerError(one_line(message)) from None
        try:
            client = distributed.Client(cluster, set_as_default=False)
        except BaseException:
            _quietly(cluster.close)
            raise
        return cluster, client
    try:
        client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except Exception as exc:
        raise WorkerError(one_line(f"cannot connect to the Dask scheduler at {scheduler}: {exc}")) from None
    try:
        client.wait_for_workers(1, timeout=WORKER_TIMEOUT)
    except Exception:
        _quietly(client.close)
        raise WorkerError(
            f"the Dask scheduler at {scheduler} has no workers after {WORKER_TIMEOUT:.0f} s "
            f"(start some with: dask worker {scheduler})"
        ) from None
    return None, client


def check_scheduler(scheduler: str | None) -> str | None:
    """A scheduler address as given (stripped), or None; a ConfigError for anything else."""
    if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
        raise ConfigError(f"scheduler must be an address like tcp://HOST:8786, got {scheduler!r}")
    return scheduler.strip() if scheduler else None


class DaskBackend(CountingBackend):
    """Counts units as Dask tasks on a cluster (`scheduler` address) or on a LocalCluster it starts.

    num_workers: worker processes of the LocalCluster (one thread each, since counting holds the
    GIL); None means every core. Ignored when `scheduler` is given: the cluster has its workers.
    """

    def __init__(
        self,
        num_workers: int | None = None,
        scheduler: str | None = None,
        *,
        retries: int = 1,
        fan_in: int = FAN_IN,
    ):
        self.num_workers = resolve_workers(num_workers)
        self.scheduler = check_scheduler(scheduler)
        self.retries = require_int(retries, "retries", minimum=0)
        self.fan_in = require_int(fan_in, "fan_in", minimum=2)

    def tally(
        self,
        units: Sequence[Any],
        special_tokens: tuple[str, ...],
        *,
        progress: bool = False,
        min_count: int = 1,
        pattern: SplitPattern = GPT2,
        packed: bool = False,
    ) -> Tally:
        """Counts and skipped records of all units; min_count > 1 filters the global count on the worker
        that computes it, so the driver never receives the rare pre-tokens. packed=True returns the
        counts as the workers made them (PackedCounts where they have the compiled counter), else a
        Counter."""
        validate_min_count(min_count)
        if not units:
            return Tally()
        tally = self._tally(units, special_tokens, progress, min_count, pattern)
        if not packed and not isinstance(tally.counts, Counter):
            tally.counts = Counter(tally.counts)
        return tally

    def _tally(
        self,
        units: Sequence[Any],
        special_tokens: tuple[str, ...],
        progress: bool,
        min_count: int,
        pattern: SplitPattern,
    ) -> Tally:
        with dask_client(self.num_workers, self.scheduler, "counting") as (distributed, client):
            return self._run(distributed, client, list(units), tuple(special_tokens), progress, min_count, pattern)

    def _run(
        self,
        distributed: Any,
        client: Any,
        units: list[Any],
        specials: tuple[str, ...],
        progress: bool,
        min_count: int,
        pattern: SplitPattern,
    ) -> Tally:
        # Keys unique to this run: on a shared scheduler, a key from an earlier run (another corpus,
        # or the same files since edited) must never stand in for this run's task.
        run = os.urandom(6).hex()
        keys = [f"bpe-count-{run}-{i}" for i in range(len(units))]
        names = {key: unit.describe() for key, unit in zip(keys, units)}
        level = client.map(_count_task, units, special_tokens=specials, pattern=pattern, key=keys, retries=self.retries)
        counted = list(level) if progress else []
        depth = 0
        while True:
            last = len(level) <= self.fan_in
            groups = [level[i : i + self.fan_in] for i in range(0, len(level), self.fan_in)]
            level = [
                client.submit(
                    _merge_task,
                    *group,
                    min_count=min_count if last else 1,
                    key=f"bpe-merge-{run}-{depth}-{j}",
                    retries=self.retries,
                )
                for j, group in enumerate(groups)
            ]
            depth += 1
            if last:
                break
        # Only the root future is held from here on: a partial result is freed on its worker as
        # soon as the merge above it has run (the scheduler can still recompute it from the graph).
        (root,) = level
        del level, groups
        try:
            if counted:
                self._follow(distributed, client, counted, units, keys)
            return root.result()
        except KeyboardInterrupt:
            _quietly(lambda: client.cancel([root], force=True))
            raise
        except BpeError:
            raise  # a CorpusError naming file and line, raised in the task
        except Exception as exc:
            raise named_failure(distributed, exc, names) from None

    @staticmethod
    def _follow(distributed: Any, client: Any, futures: list[Any], units: list[Any], keys: list[str]) -> None:
        """Advance a progress bar as units finish; return early if one failed (root.result() raises it)."""
        size = {key: unit.size for key, unit in zip(keys, units)}
        with tqdm(
            total=sum(size.values()),
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc="pre-tokenize (dask)",
            leave=False,
        ) as bar:
            done = distributed.as_completed(futures, loop=client.loop)
            futures.clear()  # as_completed drops each one as it yields it, freeing its result
            for future in done:
                if future.status != "finished":
                    return
                bar.update(size[future.key])


def named_failure(
    distributed: Any,
    exc: BaseException,
    names: dict[str, str],
    doing: str = "counting",
    other: str = "merging partial counts",
) -> WorkerError:
    """A one-line WorkerError for a failed run, naming the unit when the failure belongs to one
    (`names`: task key -> unit; `doing`: the work on a unit; `other`: the work of other tasks)."""
    killed = getattr(getattr(distributed, "scheduler", None), "KilledWorker", None)
    if killed is not None and isinstance(exc, killed):
        key = exc.task
        what = f"{doing} {names[key]}" if key in names else other
        return WorkerError(
            f"{what}: {exc.allowed_failures + 1} Dask workers died while running it; giving up "
            f"(see the worker logs; distributed.scheduler.allowed-failures sets the limit)"
        )
    lost = {"CommClosedError", "CancelledError", "FutureCancelledError"}
    if isinstance(exc, (OSError, TimeoutError)) or type(exc).__name__ in lost:
        return WorkerError(one_line(f"lost the Dask cluster while {doing}: {type(exc).__name__}: {exc}"))
    # E.g. a worker that cannot unpickle the task: bpe_impls missing or older there.
    return WorkerError(
        one_line(f"a Dask task failed: {type(exc).__name__}: {exc} (is the same bpe_impls installed on every worker?)")
    )


# Seconds a busy worker of our LocalCluster gets to stop when the count failed or was interrupted.
# A graceful close would wait 4 s for the task it is running, whose result nobody wants any more.
_STOP_TIMEOUT = 0.5


async def _stop_workers(nannies: list[Any]) -> None:
    """Close every worker of a LocalCluster now, killing a busy one after _STOP_TIMEOUT seconds."""
    from distributed.utils import All  # rather than asyncio: importing it (and ssl) costs every run memory

    await All([_close_quietly(nanny) for nanny in nannies])


async def _close_quietly(nanny: Any) -> None:
    try:
        await nanny.close(timeout=_STOP_TIMEOUT, reason="bpe-count-stopped")
    except Exception:  # one worker that fails to close must not keep the others running
        pass


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    """Keep distributed's INFO/WARNING chatter (cluster start and stop, a restarted worker) off the
    command's stderr while it counts; errors still show, and ours say what failed in one line."""
    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _quietly(action) -> None:
    """Run a teardown step; a failure there must not hide the error or Ctrl-C that got us here."""
    try:
        action()
    except Exception:
        pass
