"""Atomic file output: a file either appears whole, or not at all.

Writes go to a temp file beside the target (same filesystem, so the rename is atomic), which is
flushed, fsynced and renamed over the target only when writing finished without error; on error
or Ctrl-C the temp file is removed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO


def _open_temp_beside(target: Path, mode: str, encoding: str | None) -> tuple[IO, Path]:
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    newline = None if "b" in mode else "\n"
    return os.fdopen(fd, mode, encoding=encoding, newline=newline), Path(temp)


@contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "wb", encoding: str | None = None) -> Iterator[IO]:
    """Open a temp file for writing; it replaces `path` when the block exits without error."""
    with atomic_write_many([path], mode, encoding) as (handle,):
        yield handle


@contextmanager
def atomic_write_many(
    paths: Sequence[str | os.PathLike], mode: str = "wb", encoding: str | None = None
) -> Iterator[list[IO]]:
    """Like atomic_write for several files: none is renamed into place unless all were written."""
    targets = [Path(p) for p in paths]
    temps: list[Path] = []
    try:
        with ExitStack() as stack:
            handles = []
            for target in targets:
                handle, temp = _open_temp_beside(target, mode, encoding)
                temps.append(temp)
                handles.append(stack.enter_context(handle))
            yield handles
            for handle in handles:
                handle.flush()
                os.fsync(handle.fileno())
        for temp, target in zip(temps, targets):
            os.replace(temp, target)
    finally:
        for temp in temps:  # whatever was not renamed into place
            temp.unlink(missing_ok=True)
