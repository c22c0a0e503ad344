"""Argument checks shared by every layer, each raising a one-line ConfigError that names the value.

`bool` is an `int` subclass in Python, so `True` would pass a plain isinstance check and count as 1
worker or a vocab of size 1; every integer argument goes through `require_int`, which refuses it.
"""

from __future__ import annotations

import os

from .errors import ConfigError


def require_int(value: object, name: str, *, minimum: int | None = None) -> int:
    """`value` if it is an int (not a bool) of at least `minimum`; else a ConfigError naming `name`."""
    if not isinstance(value, bool) and isinstance(value, int) and (minimum is None or value >= minimum):
        return value
    wanted = {None: "an integer", 0: "a non-negative integer", 1: "a positive integer"}.get(
        minimum, f"an integer of at least {minimum}"
    )
    raise ConfigError(f"{name} must be {wanted}, got {value!r}")


def resolve_workers(num_workers: int | None) -> int:
    """The worker count to use: None means every core available to this process."""
    if num_workers is None:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return require_int(num_workers, "num_workers", minimum=1)


def validate_min_count(min_count: int) -> int:
    """`min_pretoken_count`: a positive integer (1 keeps every pre-token)."""
    return require_int(min_count, "min_pretoken_count", minimum=1)


def one_line(text: object) -> str:
    """Collapse whitespace runs (newlines included) so an error message stays one line."""
    return " ".join(str(text).split())
