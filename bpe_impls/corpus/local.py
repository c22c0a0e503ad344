"""The local counting backend: units of work counted on this machine.

One worker counts in-process. With the compiled core (bpe_impls.base.compiled), several workers
are threads: the C counter releases the GIL while it scans, so threads count in parallel with no
process start-up, and each adds its units to its own C counter (see `_count_compiled`). Without
it (pure Python, where the GIL would serialise threads), the workers are processes, and this
backend runs its own small pool of them rather than a ProcessPoolExecutor, because it needs
three things an executor does not give: each worker has its own pipe and the parent knows which
units it handed to which worker, so when a worker dies (OOM killer, SIGKILL) the error names
exactly the unit that worker held; at most `_PREFETCH` units are out per worker, so the parent
holds at most one unmerged Counter at a time, whatever the file size; and a worker whose parent
is gone sees its pipe close and exits, so no worker outlives an interrupted run.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import signal
import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from itertools import islice
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from tqdm import tqdm

from ..base import compiled
from ..base.checks import require_main_guard, resolve_workers, validate_min_count
from ..base.errors import BpeError, WorkerError
from ..base.patterns import GPT2, SplitPattern
from ..base.progress import progress_bar
from .tally import (
    CountingBackend,
    PackedCounts,
    PretokenCounter,
    Tally,
    add_unit_to_counter,
    drop_rare,
    failed_unit_error,
    has_compiled_counter,
    pretoken_counter,
    tally_unit,
)
from .units import SkipReport, Unit

# Units handed to a worker before its earlier results are back: the one it counts and the next,
# waiting in its pipe, so it never idles while the parent merges.
_PREFETCH = 2
# Seconds teardown waits for workers to exit before it kills them.
_STOP_TIMEOUT = 2.0
# What runs several workers: threads when the compiled counter (which releases the GIL) is there
# and scans the split pattern; else processes.
POOL = "threads" if compiled.AVAILABLE else "processes"


def _progress_bar(units: Sequence[Unit], progress: bool) -> tqdm:
    return progress_bar(
        progress,
        total=sum(unit.size for unit in units),
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc="pre-tokenize",
        leave=False,
    )


_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def _worker_main(conn: Connection, special_tokens: tuple[str, ...], pattern: SplitPattern) -> None:
    """A counting worker: count each unit received on `conn`, reply ("ok", Tally) or ("error", BpeError).

    Returns when the parent closes the pipe (normal end) or has gone away.
    """
    # Ctrl-C in a terminal reaches the whole process group; stopping is the parent's decision
    # (it terminates us), and a KeyboardInterrupt here would only print a second traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The parent blocks its stop signals while it starts us, and the mask is inherited: take them
    # back, or terminate() would not stop us.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    while True:
        try:
            unit = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[str, object] = ("ok", tally_unit(unit, special_tokens, pattern))
        except BpeError as exc:
            reply = ("error", exc)
        except Exception as exc:  # a bug or MemoryError: name the unit, in one line
            reply = ("error", failed_unit_error(unit, exc))
        try:
            conn.send(reply)  # pickles before writing, so a pickling error writes nothing
        except (EOFError, OSError):
            return
        except Exception as exc:  # the reply did not pickle (an exotic exception): send its text
            try:
                conn.send(("error", failed_unit_error(unit, exc)))
            except (EOFError, OSError):
                return


@dataclass(eq=False)  # compared by identity
class _Worker:
    process: BaseProcess
    conn: Connection
    # Units handed to this worker whose results have not arrived, in order: it is counting held[0].
    held: deque[Unit] = field(default_factory=deque)


def _how_it_ended(process: BaseProcess) -> str:
    # The exit status can arrive a moment after the pipe's EOF.
    process.join(timeout=1.0)
    code = process.exitcode
    if code is None:
        return "closed its pipe"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class _Pool:
    """Worker processes, each fed units over its own pipe; see the module docstring for why."""

    def __init__(self, size: int, special_tokens: tuple[str, ...], pattern: SplitPattern):
        require_main_guard("counting in worker processes (the pure-Python path)")
        # forkserver: workers do not inherit the parent's threads (tqdm's monitor, a Dask client)
        # or its memory, and the server is reused across calls in one process.
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["bpe_impls.corpus.local"])
        self.workers: list[_Worker] = []
        # Ctrl-C, SIGTERM and SIGHUP are held back while workers start: interrupted half-way
        # through `start()`, a new worker reads a closed pipe and prints a traceback. The mask is
        # inherited by the forkserver and its children (each worker unblocks them first thing);
        # a held signal lands on unblock.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            try:
                for _ in range(size):
                    parent_end, child_end = context.Pipe()
                    process = context.Process(
                        target=_worker_main,
                        args=(child_end, special_tokens, pattern),
                        name="bpe-count",
                        daemon=True,
                    )
                    process.start()
                    child_end.close()  # the worker's copy is its own; ours would hide its EOF
                    self.workers.append(_Worker(process, parent_end))
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
        except BaseException:
            self.stop(graceful=False)
            raise

    def count(self, units: Sequence[Unit], bar: tqdm):
        todo = deque(units)
        for _ in range(_PREFETCH):
            for worker in self.workers:
                if todo:
                    self._hand(worker, todo.popleft())
        total = Tally()
        remaining = len(units)
        while remaining:
            live = self.workers
            if not live:
                raise WorkerError(f"every counting worker exited with {remaining} units left")
            ready = set(multiprocessing.connection.wait([w.conn for w in live] + [w.process.sentinel for w in live]))
            dead: list[_Worker] = []
            for worker in live:
                if worker.conn not in ready and worker.process.sentinel not in ready:
                    continue
                # Read what it sent before judging it: a worker that sent its last result and then
                # died lost nothing, and a reply cut short by its death ends in EOF.
                closed = False
                while worker.conn.poll():
                    try:
                        status, payload = worker.conn.recv()
                    except (EOFError, OSError):
                        closed = True
                        break
                    if status != "ok":
                        raise payload  # a BpeError naming its unit, raised in the worker
                    unit = worker.held.popleft()
                    if todo:
                        self._hand(worker, todo.popleft())  # before merging, so it stays busy
                    total.add(payload)
                    del payload  # never hold more than one worker's Counter unmerged
                    remaining -= 1
                    bar.update(unit.size)
                if closed or worker.process.sentinel in ready:
                    dead.append(worker)
            if dead:
                self._lose(dead)
        return total

    def _hand(self, worker: _Worker, unit: Unit) -> None:
        worker.held.append(unit)
        try:
            worker.conn.send(unit)
        except OSError:
            pass  # it died: its sentinel reports that, naming worker.held[0]

    def _lose(self, dead: list[_Worker]) -> None:
        """Drop dead workers; if any held a unit, that unit's counts are lost: raise naming it."""
        lost = [
            f"counting worker (pid {w.process.pid}) {_how_it_ended(w.process)} while counting {w.held[0].describe()}"
            for w in dead
            if w.held
        ]
        self.workers = [w for w in self.workers if w not in dead]
        for worker in dead:
            worker.conn.close()
        if lost:
            raise WorkerError("; ".join(lost))

    def stop(self, graceful: bool) -> None:
        """End every worker: by closing its pipe (graceful) or by SIGTERM, then SIGKILL after a timeout."""
        for worker in self.workers:
            worker.conn.close()  # a worker waiting for a unit sees EOF and exits
            if not graceful:
                worker.process.terminate()
        deadline = time.monotonic() + _STOP_TIMEOUT
        for worker in self.workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
        for worker in self.workers:
            if worker.process.exitcode is None:
                worker.process.kill()
                worker.process.join(1.0)
        self.workers = []


def _count_compiled(
    units: Sequence[Unit], special_tokens: tuple[str, ...], size: int, bar: tqdm, pattern: SplitPattern
) -> tuple[PretokenCounter, SkipReport]:
    """Count units with the compiled counter: inline for one worker, else on `size` threads (it
    drops the GIL while it scans). Returns one counter holding every count, and the skipped records.

    No process start-up and no pickling. Each thread adds its units to a counter of its own (C
    hash tables, merged in C at the end, on `size` threads too), so no per-unit Python dicts are
    built or summed. A thread reads only its own unit, so at most `size` units' texts are held at
    once. A thread cannot be killed on its own, so the failures left to name are exceptions, each
    reported with its unit.
    """
    counters: list[PretokenCounter] = []
    mine: threading.local | None = threading.local()

    def count(unit: Unit) -> SkipReport:
        assert mine is not None  # (dropped below, once every unit is counted)
        counter = getattr(mine, "counter", None)
        if counter is None:
            counter = mine.counter = pretoken_counter(pattern=pattern)
            counters.append(counter)  # list.append is atomic under the GIL
        try:
            return add_unit_to_counter(unit, special_tokens, counter)
        except BpeError:
            raise
        except Exception as exc:  # a bug or MemoryError: name the unit, in one line
            raise failed_unit_error(unit, exc) from exc

    skipped = SkipReport()
    if size == 1:
        for unit in units:
            skipped = skipped + count(unit)
            bar.update(unit.size)
    else:
        todo = iter(units)
        pool = ThreadPoolExecutor(size, thread_name_prefix="bpe-count")
        try:
            running = {pool.submit(count, unit): unit for unit in islice(todo, size)}
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    unit = running.pop(future)
                    following = next(todo, None)
                    if following is not None:
                        running[pool.submit(count, following)] = following
                    skipped = skipped + future.result()
                    bar.update(unit.size)
        finally:
            # On an error or Ctrl-C, units not started are dropped; a started one finishes (a unit
            # takes well under a second), as a thread cannot be stopped from outside.
            pool.shutdown(wait=True, cancel_futures=True)
    mine = None  # drops the inline path's reference to its counter, which is in `counters` too
    if not counters:
        return pretoken_counter(pattern=pattern), skipped
    # The others into the largest, each freed once merged: the peak is the total table plus at
    # most one thread's, not every thread's at once. Each merge runs on `size` threads too (in C,
    # without the GIL), keeping the one-by-one order: the largest's keys, then each other's new ones.
    counters.sort(key=len)
    total = counters.pop()
    while counters:
        total.merge(counters.pop(), threads=size)
    return total, skipped


class LocalBackend(CountingBackend):
    """Counts on this machine: in-process for one worker, else a pool of threads (with the
    compiled core) or of worker processes (pure Python, where the GIL would serialise threads)."""

    def __init__(self, num_workers: int | None = None):
        self.num_workers = resolve_workers(num_workers)

    def tally(
        self,
        units: Sequence[Unit],
        special_tokens: tuple[str, ...],
        *,
        progress: bool = False,
        min_count: int = 1,
        pattern: SplitPattern = GPT2,
        packed: bool = False,
    ) -> Tally:
        """The counts of every unit; packed=True gives them as PackedCounts, never built as Python
        objects, where the compiled counter scans the pattern (a Counter otherwise)."""
        validate_min_count(min_count)
        with _progress_bar(units, progress) as bar:
            single = self.num_workers == 1 or len(units) <= 1
            if has_compiled_counter(pattern) and (single or POOL == "threads"):
                threads = 1 if single else min(self.num_workers, len(units))
                counter, skipped = _count_compiled(units, special_tokens, threads, bar, pattern)
                if packed:  # written on as many threads as counted (in C, without the GIL)
                    return Tally(PackedCounts(counter.to_packed(min_count, threads=threads)), skipped)
                counts = Counter(counter.to_dict())
                del counter
                return Tally(drop_rare(counts, min_count), skipped)
            if single:
                total = Tally()
                for unit in units:
                    total.add(tally_unit(unit, special_tokens, pattern))
                    bar.update(unit.size)
            else:
                pool = _Pool(min(self.num_workers, len(units)), special_tokens, pattern)
                try:
                    total = pool.count(units, bar)
                except BaseException:
                    # An error or Ctrl-C: stop the workers now, not when they would finish their units.
                    pool.stop(graceful=False)
                    raise
                pool.stop(graceful=True)
        assert isinstance(total.counts, Counter)  # (the pure-Python paths count into Counters)
        drop_rare(total.counts, min_count)
        return total
