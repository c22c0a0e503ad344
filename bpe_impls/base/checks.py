"""Argument checks shared by every layer, each raising a one-line ConfigError that names the value.

`bool` is an `int` subclass in Python, so `True` would pass a plain isinstance check and count as 1
worker or a vocab of size 1; every integer argument goes through `require_int`, which refuses it.
"""

from __future__ import annotations

import ast
import os
import sys
from types import FrameType

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


def require_main_guard(what: str) -> None:
    """Refuse to start worker processes from the unguarded top level of a script.

    Worker processes (forkserver, spawn: ours and Dask's) import the script that started them as
    a module; a call to train_bpe at its top level then runs again in every worker, which fails
    with pages of tracebacks. Found here from the call stack and the script's syntax tree, so the
    error is one line naming the script, the line and the fix.
    """
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    if script is None or getattr(main, "__spec__", None) is not None:
        return  # an interactive session, or `python -m`: nothing is re-run
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and not (
        frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__main__"
    ):
        frame = frame.f_back
    if frame is None or frame.f_code.co_filename != script:
        return
    line = frame.f_lineno
    try:
        with open(script, encoding="utf-8") as source:
            tree = ast.parse(source.read())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return  # cannot tell: let multiprocessing say what it says
    for statement in tree.body:
        if statement.lineno <= line <= (statement.end_lineno or statement.lineno):
            if not _is_main_guard(statement):
                raise ConfigError(
                    f"{script} line {line}: {what} re-runs the top level of this script in each worker; "
                    'put the call under `if __name__ == "__main__":`'
                )
            return


def _is_main_guard(statement: ast.stmt) -> bool:
    if not isinstance(statement, ast.If) or not isinstance(statement.test, ast.Compare):
        return False
    test = statement.test
    sides = [test.left, *test.comparators]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    mains = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(sides) == 2 and isinstance(test.ops[0], ast.Eq) and bool(names) and bool(mains)
