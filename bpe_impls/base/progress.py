"""Progress bars on stderr (tqdm), and no thread when a bar is off.

tqdm starts its monitor thread (a daemon that wakes every 10 s) in `tqdm.__new__`, before it reads
`disable`: every `train_bpe(...)` or encode without a bar would leave a thread running behind the
caller, one the instruction counts (benchmarks/bench_instructions.py) saw as noise and forked
workers would inherit.
"""

from __future__ import annotations

from typing import Any

from tqdm import tqdm


class _Off(tqdm):
    monitor_interval = 0  # read by tqdm.__new__: no monitor for a bar nobody sees


def progress_bar(enabled: bool, **options: Any) -> tqdm:
    """`tqdm(**options)` when `enabled`; else a disabled bar with the same interface and no thread."""
    if enabled:
        return tqdm(**options)
    return _Off(disable=True, **options)
