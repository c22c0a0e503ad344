"""Wall time and peak memory of one call, measured in a fresh child process.

A fresh process per measurement keeps one trainer's garbage or cached allocations from counting
against the next. Peak memory is the resident-set high-water mark *above* the child's baseline
after its arguments arrived (Linux: reset via /proc/self/clear_refs, then VmHWM - VmRSS), so it
is the memory the call itself needed; where /proc is unavailable it falls back to ru_maxrss.
"""

from __future__ import annotations

import multiprocessing
import re
import resource
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import psutil


@dataclass
class Measured:
    result: Any
    seconds: float
    peak_bytes: int  # resident memory above the baseline, at the call's peak

    @property
    def peak_mb(self) -> float:
        return self.peak_bytes / 2**20


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            match = re.search(rf"^{field}:\s+(\d+) kB", status.read(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) if match else None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


def _maxrss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


def measure_here(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Measured:
    """Measure func(*args, **kwargs) in this process (meant to run inside a fresh child)."""
    resettable = _reset_peak()
    baseline_kb = _status_kb("VmRSS") if resettable else None
    start = time.perf_counter()
    result = func(*args, **kwargs)
    seconds = time.perf_counter() - start
    if baseline_kb is not None and (peak_kb := _status_kb("VmHWM")) is not None:
        peak = max(0, peak_kb - baseline_kb) * 1024
    else:
        peak = _maxrss_bytes()
    return Measured(result, seconds, peak)


def measure_in_child(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Measured:
    """Measure func(*args, **kwargs) in a new process; func and arguments must pickle."""
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(measure_here, func, *args, **kwargs).result()


def tree_rss(root) -> tuple[int, int]:
    """(summed RSS, largest single RSS) of a psutil.Process and all its descendants.

    Processes may exit while they are being read; those are skipped.
    """
    try:
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0, 0
    total = largest = 0
    for process in processes:
        try:
            rss = process.memory_info().rss
        except psutil.Error:
            continue
        total += rss
        largest = max(largest, rss)
    return total, largest
