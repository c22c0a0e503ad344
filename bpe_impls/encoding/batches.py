"""Encoding a batch of texts on several threads: cutting it into runs, and joining the results.

A batch is cut into contiguous runs of about equal UTF-8 size, several per thread, handed out as
threads free up; the compiled encoder encodes each run without the GIL. The Tokenizer's batch
methods give each run to `encode_runs` with the function that encodes one.
"""

from __future__ import annotations

import gc
import os
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from itertools import accumulate, chain, count, pairwise
from typing import TYPE_CHECKING, TypeVar

from ..base import compiled
from ..base.checks import require_int, resolve_workers
from .text import Text, invalid_utf8, surrogate_error

if TYPE_CHECKING:
    import numpy as np

_T = TypeVar("_T")
# A threaded batch is cut into up to this many runs per thread, each of at least MIN_RUN_BYTES.
RUNS_PER_THREAD = 8
MIN_RUN_BYTES = 1 << 16


def as_list(texts: Sequence[Text]) -> list[Text]:
    """The batch as a list: a list as it is, any other sequence copied (its items' types are
    checked by `BATCH_RUNS`, in one pass with their sizes). A lone str or bytes is a TypeError: it
    is one text, not a batch.

    A list is not copied: a copy touches every item's reference count, scattered over memory. The
    compiled encoder holds its own reference to each item it reads, so a list changed by another
    thread while it is encoded gives a mix of old and new items, never a crash."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"expected a sequence of str or bytes, got {type(texts).__name__}")
    return texts if type(texts) is list else list(texts)


def encode_runs(
    datas: list[Text], kind: type, num_threads: int | None, encode_run: Callable[[tuple[int, int]], _T]
) -> list[_T]:
    """encode_run of each run of the batch, in order, on up to `num_threads` threads (None: every
    core available to this process)."""
    threads = (
        resolve_workers(num_threads) if num_threads is None else require_int(num_threads, "num_threads", minimum=1)
    )
    threads = min(threads, max(1, len(datas)))  # no run is shorter than one text
    # More runs than threads, handed out as threads free up: equal bytes are not equal work (a
    # run of new words or another script costs several times a run of cached English), so one
    # run per thread leaves a thread idle while the other finishes. Runs stay >= MIN_RUN_BYTES
    # where the batch allows, so each one's GIL round trip is noise. The same pass checks
    # every item is a `kind`.
    bounds = BATCH_RUNS(datas, kind, 1 if threads == 1 else threads * RUNS_PER_THREAD, threads, MIN_RUN_BYTES)
    runs = list(pairwise(bounds))
    size = bounds[-1] if bounds else 0  # the length the runs were planned for (another thread may change it)
    try:
        return _each_run(runs, threads, encode_run)
    except UnicodeEncodeError:
        _name_bad_text(datas)
        raise
    except ValueError:
        if len(datas) != size:
            raise RuntimeError(
                f"the batch changed size while it was encoded ({size} items, now {len(datas)}): "
                f"another thread modified the list"
            ) from None
        _raise_invalid_utf8(datas)
        raise


def _each_run(runs: list[tuple[int, int]], threads: int, encode_run: Callable[[tuple[int, int]], _T]) -> list[_T]:
    """encode_run of each run, in order, on up to `threads` threads, this one among them (here, for
    one run). Each thread takes the next run not yet taken until none is left: one task per
    thread, not per run (a future per run cost a 16-run call 0.2 ms). A failed run stops the
    others taking more, and the call raises the error of the first failed run in order; nothing of
    the batch still runs when it returns, whether a run failed or the caller was interrupted."""
    if len(runs) <= 1:
        return [encode_run(run) for run in runs]
    results: list[_T | None] = [None] * len(runs)
    errors: dict[int, BaseException] = {}
    taken = count()  # (next() of it is atomic: one thread at a time runs Python code)
    stop = threading.Event()

    def take_runs() -> None:
        for index in taken:
            if index >= len(runs) or stop.is_set():
                return
            try:
                results[index] = encode_run(runs[index])
            except BaseException as error:  # (re-raised by the calling thread)
                errors[index] = error
                stop.set()
                return

    helpers = [_pool(threads - 1).submit(take_runs) for _ in range(min(threads, len(runs)) - 1)]
    try:
        take_runs()
    except BaseException:  # interrupted outside a run: the helpers take no more
        stop.set()
        raise
    finally:
        # (Not stop.set() on success: a helper may have taken a run and not yet started it.)
        wait(helpers)
    if errors:
        raise errors[min(errors)]
    return results  # type: ignore[return-value]  # (each run has its result)


# Batch threads, kept between calls (one pool per thread count): starting two threads and joining
# them cost each call about 0.4 ms, a tenth of a 4 MB batch on two threads. A forked child starts
# without them (the parent's threads do not exist there).
_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()
_MAX_POOLS = 4  # a caller cycling through thread counts keeps the latest four


def _pool(threads: int) -> ThreadPoolExecutor:
    with _POOLS_LOCK:
        pool = _POOLS.pop(threads, None)
        if pool is None:
            pool = ThreadPoolExecutor(threads, thread_name_prefix=f"bpe-batch-{threads}")
        _POOLS[threads] = pool  # (now the latest)
        while len(_POOLS) > _MAX_POOLS:
            # Dropped, not shut down: a call may still be handing it work. Its threads end once
            # the last reference to it goes (concurrent.futures wakes them to exit).
            _POOLS.pop(next(iter(_POOLS)))
        return pool


def _forget_pools() -> None:
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)


def encode_packed_runs(
    data: bytes,
    offsets: np.ndarray,
    num_threads: int | None,
    encode_run: Callable[[tuple[int, int]], _T],
) -> list[_T]:
    """encode_runs for texts packed in `data` (text k is data[offsets[k]:offsets[k + 1]]): runs of
    about equal bytes, by the same rule, found on the offsets (no object per text)."""
    import numpy as np  # (only the numpy methods get here)

    count = len(offsets) - 1
    threads = (
        resolve_workers(num_threads) if num_threads is None else require_int(num_threads, "num_threads", minimum=1)
    )
    threads = min(threads, max(1, count))
    total = int(offsets[-1] - offsets[0]) if count else 0
    parts = 1 if threads == 1 else min(threads * RUNS_PER_THREAD, max(threads, total // MIN_RUN_BYTES), count)
    ends = offsets[1:] - offsets[0]
    cuts = np.searchsorted(ends, total * np.arange(1, parts) / parts) + 1
    bounds = sorted({0, count, *(int(cut) for cut in cuts if 0 < cut < count)}) if count else []
    runs = list(pairwise(bounds))
    try:
        return _each_run(runs, threads, encode_run)
    except ValueError:
        for index in range(count):  # name the text that is not UTF-8 (the encoder says only that one is not)
            error = invalid_utf8(data[offsets[index] : offsets[index + 1]], f"batch index {index}: ")
            if error is not None:
                raise error from None
        raise


def _name_bad_text(texts: Sequence[Text]) -> None:
    """Raise the EncodeError naming the first text with a lone surrogate and its position (the
    encoder's UnicodeEncodeError says only that one has)."""
    for index, text in enumerate(texts):
        if isinstance(text, str):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise surrogate_error(text, 0, f"batch index {index}: ") from None


def _raise_invalid_utf8(datas: Sequence[Text]) -> None:
    """Name the first item that is not valid UTF-8 (the encoder says only that one is not)."""
    for index, data in enumerate(datas):
        if isinstance(data, bytes):
            error = invalid_utf8(data, f"batch index {index}: ")
            if error is not None:
                raise error


def batch_runs(items: list[Text], kind: type, max_parts: int, min_parts: int, min_size: int) -> list[int]:
    """The bounds of contiguous, non-empty runs covering every item, of about equal total size (len):
    total // min_size runs, clamped to [min_parts, max_parts] and to the number of items. An item
    that is not a `kind` is a TypeError naming its batch index. The pure-Python twin of the compiled
    core's `batch_runs`."""
    for index, item in enumerate(items):
        if not isinstance(item, kind):
            raise TypeError(f"batch index {index}: expected {kind.__name__}, got {type(item).__name__}")
    if not items:
        return []
    ends = list(accumulate(map(len, items)))
    total = ends[-1]
    parts = min(max_parts, max(min_parts, total // min_size))
    bounds = {0, len(items)}
    for k in range(1, parts):
        # Run k ends after the item whose cumulative size is nearest k/parts of the total.
        target = total * k / parts
        i = bisect_left(ends, target)
        if i == len(ends) or (i > 0 and target - ends[i - 1] < ends[i] - target):
            i -= 1
        bounds.add(i + 1)
    return sorted(bounds)


def _batch_runs_fast(items: list[Text], kind: type, max_parts: int, min_parts: int, min_size: int) -> list[int]:
    """`batch_runs` in the compiled core where it was built."""
    return compiled.core().batch_runs(items, kind, max_parts, min_parts, min_size)


BATCH_RUNS = _batch_runs_fast if compiled.AVAILABLE else batch_runs


def join_runs(results: Sequence[tuple[bytearray, bytearray]], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """One (ids, offsets) from each run's buffers, in order."""
    import numpy as np  # (only the numpy methods get here)

    if not results:
        return np.empty(0, dtype=dtype), np.zeros(1, dtype=np.int64)
    ids = [np.frombuffer(buffer, dtype=dtype) for buffer, _ in results]
    offsets = [np.frombuffer(buffer, dtype=np.int64) for _, buffer in results]
    if len(results) == 1:
        return ids[0], offsets[0]
    starts = np.cumsum([0, *(len(part) for part in ids[:-1])])
    joined = np.concatenate([offsets[0], *(part[1:] + start for part, start in zip(offsets[1:], starts[1:]))])
    return np.concatenate(ids), joined


def join_lists(runs: Sequence[list[list[int]]]) -> list[list[int]]:
    """Each run's lists, in order, in one list."""
    if len(runs) == 1:
        return runs[0]
    return list(chain.from_iterable(runs))


@contextmanager
def gc_paused() -> Iterator[bool]:
    """The cyclic garbage collector off for the block (as it was, after); yields whether it was on.

    Lists of ids hold no cycles, but each one counts towards the collector's next run, which would
    otherwise run many times over a large batch's lists (see docs/design-notes.md)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield collecting
    finally:
        if collecting:
            gc.enable()


def collect_young(lists: int, several_runs: bool) -> None:
    """The young generation's collection, run by each batch thread after its run (while the other
    threads still encode) rather than by the caller's thread alone after the batch; `lists`: the
    run's. Each list is traversed by it once either way (the lists are made while the collector is
    paused). In a batch of several runs it follows every run that made at least an eighth of the
    collector's threshold in lists: it then traverses that run's lists while they are in the cache,
    and holds the GIL for about a run's lists at a time, not for several runs'. Otherwise it runs
    only where the collector would run it at its next allocation once resumed (below an eighth,
    its fixed cost counts, and a loop of small batches would collect more often than the
    collector does)."""
    young = gc.get_count()[0]
    threshold = gc.get_threshold()[0]
    if threshold and (young > threshold or (several_runs and young and 8 * lists >= threshold)):
        gc.collect(0)
