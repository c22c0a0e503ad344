"""Atomic file output: a file either appears whole, or not at all.

Writes go to a temp file beside the target, which is flushed, fsynced and renamed over the target
only when the block finishes without error; on error or Ctrl-C the temp file is removed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def temp_path_for(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "wb", encoding: str | None = None) -> Iterator[IO]:
    target = Path(path)
    temp = temp_path_for(target)
    handle = open(temp, mode, encoding=encoding, newline="" if "b" not in mode else None)
    try:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())
        handle.close()
        os.replace(temp, target)
    except BaseException:
        handle.close()
        temp.unlink(missing_ok=True)
        raise
