"""Units of work and the backends that count their pre-tokens.

`plan_units` turns a text file into units of work without reading its text (only the few blocks
around each cut; `sources.plan_inputs` does the same for many files and other formats);
`sources.tally_unit` reads one unit and counts it (a Tally: counts and skipped bad records); a
backend maps it over the units and adds the Tallies. The backends (here: local; dask_backend.py:
Dask) differ only in where `tally_unit` runs, so chunking, the regex, special-token splitting and
bad-input errors live once, below all of them.

With the compiled core (bpe_impls.native), the local backend's workers are threads: the C counter
releases the GIL while it scans, so threads count in parallel with no process start-up, and each
adds its units to its own C counter (see `_count_in_threads`). Without it (pure Python, where the
GIL would serialise threads), the workers are processes, and the local backend runs its own small
pool of them rather than a ProcessPoolExecutor, because it needs
three things an executor does not give: each worker has its own pipe and the parent knows which
units it handed to which worker, so when a worker dies (OOM killer, SIGKILL) the error names
exactly the unit that worker held; at most `_PREFETCH` units are out per worker, so the parent
holds at most one unmerged Counter at a time, whatever the file size; and a worker whose parent
is gone sees its pipe close and exits, so no worker outlives an interrupted run.
"""

from __future__ import annotations

import math
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
from collections import Counter, deque
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Protocol

from tqdm import tqdm

from . import native
from .errors import BpeError, ConfigError, CorpusError, WorkerError
from .pretokenize import PretokenCounter, pretoken_counter, safe_cuts

# A unit is read whole by one worker, so its size bounds a worker's memory (bytes + decoded text
# + pieces, a few times this); it also bounds how long one straggler can hold up the others.
UNIT_BYTES = 8 << 20
# Several units per worker so a slow unit does not leave the other cores idle at the end.
UNITS_PER_WORKER = 4
# Units handed to a worker before its earlier results are back: the one it counts and the next,
# waiting in its pipe, so it never idles while the parent merges.
_PREFETCH = 2
# Seconds teardown waits for workers to exit before it kills them.
_STOP_TIMEOUT = 2.0
# What runs several workers: threads when the compiled counter (which releases the GIL) is there;
# else processes.
POOL = "threads" if native.AVAILABLE else "processes"


def read_range(path: str, start: int, size: int, where: str, block_size: int | None = None) -> Iterator[bytes]:
    """Bytes [start, start + size) of a file, in blocks of at most block_size (default: one block).

    A file that shrank since the units were planned is an error: counting the rest would be
    silently short. Errors name `where` (the unit), in one line.
    """
    try:
        with open(path, "rb") as file:
            file.seek(start)
            left = size
            while left:
                block = file.read(min(block_size or left, left))
                if not block:
                    raise CorpusError(f"{where}: file changed while counting (read {size - left} of {size} bytes)")
                left -= len(block)
                yield block
    except OSError as exc:
        raise CorpusError(f"{where}: cannot read: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class TextRange:
    """Bytes [start, end) of a UTF-8 text file; start and end are safe cuts."""

    path: str
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    def describe(self) -> str:
        return f"{self.path} bytes {self.start}-{self.end}"

    def utf8_pieces(self) -> Iterator[tuple[int, bytes]]:
        """(byte offset, bytes) of each independent piece of text: here, the whole range."""
        yield self.start, b"".join(read_range(self.path, self.start, self.size, self.describe()))

    def decode(self, offset: int, data: bytes) -> str:
        """One piece as text; cuts are at ASCII bytes, so a decode error is a real one."""
        return decode_utf8(self.path, offset, data)

    def texts(self) -> Iterator[str]:
        for offset, data in self.utf8_pieces():
            yield self.decode(offset, data)


def decode_utf8(path: str, offset: int, data: bytes, where: str = "byte offset") -> str:
    """`data` (found at `offset` in `path`) as text; a CorpusError naming the first bad byte if it is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(
            f"{path}: not valid UTF-8 at {where} {offset + exc.start} ({exc.reason}: {data[exc.start:exc.end]!r})"
        ) from None


def resolve_workers(num_workers: int | None) -> int:
    """The worker count to use: None means every core available to this process."""
    if num_workers is None:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if not isinstance(num_workers, int) or num_workers < 1:
        raise ConfigError(f"num_workers must be a positive integer, got {num_workers!r}")
    return num_workers


def _open_corpus(path: str | os.PathLike):
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise CorpusError(f"{os.fspath(path)}: no such file") from None
    except IsADirectoryError:
        raise CorpusError(f"{os.fspath(path)}: is a directory, not a corpus file") from None
    except OSError as exc:
        raise CorpusError(f"{os.fspath(path)}: cannot read: {exc.strerror or exc}") from None


def plan_units(
    path: str | os.PathLike, special_tokens: tuple[str, ...], num_workers: int | None = None
) -> list[TextRange]:
    """Cut a text file into units at safe cuts: enough for every worker, none much over UNIT_BYTES.

    Where a stretch of the file has no safe cut (e.g. megabytes of emoji), the unit around it is
    as long as the stretch: correctness first, so such a file gets fewer, larger units.
    """
    workers = resolve_workers(num_workers)
    with _open_corpus(path) as file:
        size = os.fstat(file.fileno()).st_size
        wanted = math.ceil(size / UNIT_BYTES)
        if workers > 1:
            wanted = max(wanted, workers * UNITS_PER_WORKER)
        bounds = safe_cuts(file, max(1, wanted), special_tokens)
    name = os.fspath(path)
    return [TextRange(name, a, b) for a, b in zip(bounds, bounds[1:])] or [TextRange(name, 0, 0)]


def count_unit(unit: TextRange, special_tokens: tuple[str, ...]) -> Counter[bytes]:
    """Count one unit's pre-tokens; each text it yields is a hard boundary, like a special token."""
    from .sources import tally_unit  # sources imports this module

    return tally_unit(unit, special_tokens).counts


class CountingBackend(Protocol):
    """Runs `tally_unit` over units of work and returns the sum of their Tallies.

    `count` returns just the counts and reports skipped records as a SkippedRecordsWarning.
    `min_count` > 1 drops pre-tokens rarer than that from the *global* count.
    """

    def tally(
        self, units: Sequence[TextRange], special_tokens: tuple[str, ...], *, progress: bool = False,
        min_count: int = 1,
    ): ...

    def count(
        self, units: Sequence[TextRange], special_tokens: tuple[str, ...], *, progress: bool = False,
        min_count: int = 1,
    ) -> Counter[bytes]: ...


def _progress_bar(units: Sequence[TextRange], progress: bool) -> tqdm:
    return tqdm(
        total=sum(unit.size for unit in units), unit="B", unit_scale=True, unit_divisor=1024,
        desc="pre-tokenize", disable=not progress, leave=False,
    )


# --- the worker pool -----------------------------------------------------------------------------


def _one_line(text: str) -> str:
    """Collapse whitespace runs (newlines included) so an error message stays one line."""
    return " ".join(text.split())


def _worker_main(conn: Connection, special_tokens: tuple[str, ...]) -> None:
    """A counting worker: count each unit received on `conn`, reply ("ok", Tally) or ("error", BpeError).

    Returns when the parent closes the pipe (normal end) or has gone away.
    """
    # Ctrl-C in a terminal reaches the whole process group; stopping is the parent's decision
    # (it terminates us), and a KeyboardInterrupt here would only print a second traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from .sources import tally_unit

    while True:
        try:
            unit = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[str, object] = ("ok", tally_unit(unit, special_tokens))
        except BpeError as exc:
            reply = ("error", exc)
        except Exception as exc:  # a bug or MemoryError: name the unit, in one line
            message = f"counting {unit.describe()} failed: {type(exc).__name__}: {exc}"
            reply = ("error", WorkerError(_one_line(message)))
        try:
            conn.send(reply)  # pickles before writing, so a pickling error writes nothing
        except (EOFError, OSError):
            return
        except Exception as exc:  # the reply did not pickle (an exotic exception): send its text
            message = f"counting {unit.describe()} failed: {type(exc).__name__}: {exc}"
            try:
                conn.send(("error", WorkerError(_one_line(message))))
            except (EOFError, OSError):
                return


@dataclass(eq=False)  # compared by identity
class _Worker:
    process: BaseProcess
    conn: Connection
    # Units handed to this worker whose results have not arrived, in order: it is counting held[0].
    held: deque[TextRange] = field(default_factory=deque)


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

    def __init__(self, size: int, special_tokens: tuple[str, ...]):
        # forkserver: workers do not inherit the parent's threads (tqdm's monitor, a Dask client)
        # or its memory, and the server is reused across calls in one process.
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["bpe_impls.counting", "bpe_impls.sources"])
        self.workers: list[_Worker] = []
        try:
            for _ in range(size):
                parent_end, child_end = context.Pipe()
                process = context.Process(
                    target=_worker_main, args=(child_end, special_tokens), name="bpe-count", daemon=True
                )
                process.start()
                child_end.close()  # the worker's copy is its own; ours would hide its EOF
                self.workers.append(_Worker(process, parent_end))
        except BaseException:
            self.stop(graceful=False)
            raise

    def count(self, units: Sequence[TextRange], bar: tqdm):
        from .sources import Tally

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
            ready = set(multiprocessing.connection.wait(
                [w.conn for w in live] + [w.process.sentinel for w in live]
            ))
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

    def _hand(self, worker: _Worker, unit: TextRange) -> None:
        worker.held.append(unit)
        try:
            worker.conn.send(unit)
        except OSError:
            pass  # it died: its sentinel reports that, naming worker.held[0]

    def _lose(self, dead: list[_Worker]) -> None:
        """Drop dead workers; if any held a unit, that unit's counts are lost: raise naming it."""
        lost = [
            f"counting worker (pid {w.process.pid}) {_how_it_ended(w.process)} while counting {w.held[0].describe()}"
            for w in dead if w.held
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


def _count_in_threads(units: Sequence[TextRange], special_tokens: tuple[str, ...], size: int, bar: tqdm):
    """Count units on `size` threads: the compiled counter drops the GIL while it scans.

    No process start-up and no pickling. Each thread adds its units to a counter of its own (C
    hash tables, merged in C at the end), so no per-unit Python dicts are built or summed. A thread
    reads only its own unit, so at most `size` units' texts are held at once. A thread cannot be
    killed on its own, so the failures left to name are exceptions, each reported with its unit.
    """
    from .sources import SkipReport, Tally, count_unit_into

    counters: list[PretokenCounter] = []
    mine = threading.local()

    def count(unit: TextRange) -> SkipReport:
        counter = getattr(mine, "counter", None)
        if counter is None:
            counter = mine.counter = pretoken_counter()
            counters.append(counter)  # list.append is atomic under the GIL
        try:
            return count_unit_into(unit, special_tokens, counter)
        except BpeError:
            raise
        except Exception as exc:  # a bug or MemoryError: name the unit, in one line
            raise WorkerError(_one_line(f"counting {unit.describe()} failed: {type(exc).__name__}: {exc}")) from exc

    skipped = SkipReport()
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
    if not counters:
        return Tally(Counter(), skipped)
    total, *others = counters
    for counter in others:
        total.merge(counter)
    return Tally(Counter(total.to_dict()), skipped)


class LocalBackend:
    """Counts on this machine: in-process for one worker, else a pool of threads (with the
    compiled core) or of worker processes (pure Python, where the GIL would serialise threads)."""

    def __init__(self, num_workers: int | None = None):
        self.num_workers = resolve_workers(num_workers)

    def count(
        self, units: Sequence[TextRange], special_tokens: tuple[str, ...], *, progress: bool = False,
        min_count: int = 1,
    ) -> Counter[bytes]:
        from .sources import warn_skipped

        tally = self.tally(units, special_tokens, progress=progress, min_count=min_count)
        warn_skipped(tally.skipped)
        return tally.counts

    def tally(
        self, units: Sequence[TextRange], special_tokens: tuple[str, ...], *, progress: bool = False,
        min_count: int = 1,
    ):
        from .sources import Tally, drop_rare, tally_unit, validate_min_count

        validate_min_count(min_count)
        with _progress_bar(units, progress) as bar:
            if self.num_workers == 1 or len(units) <= 1:
                total = Tally()
                for unit in units:
                    total.add(tally_unit(unit, special_tokens))
                    bar.update(unit.size)
            elif POOL == "threads":
                total = _count_in_threads(units, special_tokens, min(self.num_workers, len(units)), bar)
            else:
                pool = _Pool(min(self.num_workers, len(units)), special_tokens)
                try:
                    total = pool.count(units, bar)
                except BaseException:
                    # An error or Ctrl-C: stop the workers now, not when they would finish their units.
                    pool.stop(graceful=False)
                    raise
                pool.stop(graceful=True)
        drop_rare(total.counts, min_count)
        return total


def _dask_backend(num_workers: int | None = None, scheduler: str | None = None) -> CountingBackend:
    from .dask_backend import DaskBackend  # imports dask only when it counts

    return DaskBackend(num_workers, scheduler)


BACKENDS: dict[str, Callable[..., CountingBackend]] = {"local": LocalBackend, "dask": _dask_backend}


def count_units(
    units: Sequence[TextRange],
    special_tokens: tuple[str, ...],
    *,
    backend: str = "local",
    num_workers: int | None = None,
    scheduler: str | None = None,
    min_count: int = 1,
    progress: bool = False,
) -> Counter[bytes]:
    """Count the units with the named backend; `scheduler` (a Dask address) is for backend="dask"."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown counting backend {backend!r}; choose from {', '.join(sorted(BACKENDS))}")
    if scheduler is not None and backend != "dask":
        raise ConfigError("a scheduler address is only used with the dask backend (--backend dask)")
    make = BACKENDS[backend]
    counter = make(num_workers, scheduler) if backend == "dask" else make(num_workers)
    return counter.count(units, special_tokens, progress=progress, min_count=min_count)
