"""Units of work and the backends that count their pre-tokens.

`plan_units` turns a corpus into units of work without reading its text (only the few blocks
around each cut); `count_unit` reads one unit and counts it; a backend maps `count_unit` over the
units and sums the Counters. The backends differ only in where `count_unit` runs, so chunking, the
regex, special-token splitting and bad-input errors live once, below all of them.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Protocol

from tqdm import tqdm

from .errors import BpeError, ConfigError, CorpusError, WorkerError
from .pretokenize import count_text, safe_cuts

# A unit is read whole by one worker, so its size bounds a worker's memory (bytes + decoded text
# + pieces, a few times this); it also bounds how long one straggler can hold up the others.
UNIT_BYTES = 8 << 20
# Several units per worker so a slow unit does not leave the other cores idle at the end.
UNITS_PER_WORKER = 4


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

    def texts(self) -> Iterator[str]:
        """The range's text; cuts are at ASCII bytes, so a decode error is a real one."""
        try:
            with open(self.path, "rb") as file:
                file.seek(self.start)
                data = file.read(self.size)
        except OSError as exc:
            raise CorpusError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        try:
            yield data.decode("utf-8")
        except UnicodeDecodeError as exc:
            offset = self.start + exc.start
            raise CorpusError(
                f"{self.path}: not valid UTF-8 at byte offset {offset} "
                f"({exc.reason}: {data[exc.start:exc.end]!r})"
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
    """Cut a text file into units at safe cuts: enough for every worker, none much over UNIT_BYTES."""
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
    counts: Counter[bytes] = Counter()
    for text in unit.texts():
        counts.update(count_text(text, special_tokens))
    return counts


class CountingBackend(Protocol):
    """Runs `count_unit` over units of work and returns the sum of their Counters."""

    def count(
        self, units: Sequence[TextRange], special_tokens: tuple[str, ...], *, progress: bool = False
    ) -> Counter[bytes]: ...


def _progress_bar(units: Sequence[TextRange], progress: bool) -> tqdm:
    return tqdm(
        total=sum(unit.size for unit in units), unit="B", unit_scale=True, unit_divisor=1024,
        desc="pre-tokenize", disable=not progress, leave=False,
    )


class LocalBackend:
    """Counts on this machine: in-process for one worker, else a pool of worker processes."""

    def __init__(self, num_workers: int | None = None):
        self.num_workers = resolve_workers(num_workers)

    def count(
        self, units: Sequence[TextRange], special_tokens: tuple[str, ...], *, progress: bool = False
    ) -> Counter[bytes]:
        with _progress_bar(units, progress) as bar:
            if self.num_workers == 1 or len(units) <= 1:
                total: Counter[bytes] = Counter()
                for unit in units:
                    total.update(count_unit(unit, special_tokens))
                    bar.update(unit.size)
                return total
            return self._count_in_pool(units, special_tokens, bar)

    def _count_in_pool(self, units: Sequence[TextRange], special_tokens: tuple[str, ...], bar: tqdm) -> Counter[bytes]:
        # forkserver: workers do not inherit the parent's threads (tqdm's monitor, a Dask client)
        # or its memory, and the server is reused across calls in one process.
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["bpe_impls.counting"])
        executor = ProcessPoolExecutor(max_workers=min(self.num_workers, len(units)), mp_context=context)
        total: Counter[bytes] | None = None
        try:
            pending = {executor.submit(count_unit, unit, special_tokens): unit for unit in units}
            while pending:
                done, _ = wait(pending, return_when=FIRST_EXCEPTION)
                for future in done:
                    unit = pending.pop(future)
                    result = _result_or_raise(future, unit, pending.values())
                    if total is None:
                        total = result
                    else:
                        total.update(result)
                    bar.update(unit.size)
        except BaseException:
            # An error or Ctrl-C: drop queued work and stop the workers now rather than on exit
            # (snapshot them first: shutdown() forgets its process table).
            workers = list((getattr(executor, "_processes", None) or {}).values())
            executor.shutdown(wait=False, cancel_futures=True)
            for process in workers:
                process.terminate()
            raise
        executor.shutdown(wait=True)
        return total if total is not None else Counter()


def _result_or_raise(future, unit: TextRange, unfinished) -> Counter[bytes]:
    try:
        return future.result()
    except BrokenProcessPool:
        others = [u.describe() for u in unfinished]
        running = "; ".join([unit.describe(), *others][:4])
        raise WorkerError(f"a counting worker process died while counting {running}") from None
    except BpeError:
        raise
    except Exception as exc:  # a bug or an OS error inside the worker: name the unit, one line
        raise WorkerError(f"counting {unit.describe()} failed: {type(exc).__name__}: {exc}") from None


BACKENDS: dict[str, type] = {"local": LocalBackend}


def count_units(
    units: Sequence[TextRange],
    special_tokens: tuple[str, ...],
    *,
    backend: str = "local",
    num_workers: int | None = None,
    progress: bool = False,
) -> Counter[bytes]:
    """Count the units with the named backend."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown counting backend {backend!r}; choose from {', '.join(sorted(BACKENDS))}")
    return BACKENDS[backend](num_workers).count(units, special_tokens, progress=progress)
