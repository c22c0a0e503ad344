"""Atomic file output: a file either appears whole, or not at all.

Writes go to a temp file beside the target (same filesystem, so the rename is atomic), which is
flushed, fsynced and renamed over the target only when writing finished without error; on error
or Ctrl-C the temp file is removed. The file gets the mode a plain open() would give it (0666
less the umask; mkstemp's 0600 would survive the rename), and an error names the target, never
the temp file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows (os.umask can only swap it,
    which would leave it 0 for a moment in every other thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _open_temp_beside(target: Path, mode: str, encoding: str | None) -> tuple[IO, Path]:
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    except BaseException:
        os.close(fd)
        os.unlink(temp)
        raise
    newline = None if "b" in mode else "\n"
    return os.fdopen(fd, mode, encoding=encoding, newline=newline), Path(temp)


def _naming(exc: OSError, target: Path) -> OSError:
    """`exc` as if it had happened to `target` (it names a temp file, or no file at all)."""
    return OSError(exc.errno, exc.strerror, str(target))


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
                try:
                    handle, temp = _open_temp_beside(target, mode, encoding)
                except OSError as exc:  # e.g. no such directory: say so of the user's path
                    raise _naming(exc, target) from None
                temps.append(temp)
                handles.append(stack.enter_context(handle))
            try:
                yield handles
                for handle in handles:
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as exc:  # a full disk: the write, flush or fsync names no file
                named = {str(temp): target for temp, target in zip(temps, targets)}.get(exc.filename)
                if named is None and exc.filename is None and len(targets) == 1:
                    named = targets[0]
                raise (exc if named is None else _naming(exc, named)) from None
        for temp, target in zip(temps, targets):
            os.replace(temp, target)
    finally:
        for temp in temps:  # whatever was not renamed into place
            temp.unlink(missing_ok=True)
