"""Atomic file output: a file either appears whole, or not at all.

Writes go to a temp file beside the target (same filesystem, so the rename is atomic), which is
flushed, fsynced and renamed over the target only when writing finished without error; on error
or Ctrl-C the temp file is removed. The file gets the mode a plain open() would give it (0666
less the umask; mkstemp's 0600 would survive the rename), and an error names the target, never
the temp file.

What the target is decides how it is written:
  * absent or a regular file: replaced atomically, as above;
  * a symbolic link: followed on purpose: the file it points to is replaced atomically, and the
    link stays a link (a dangling link's target is created, as open() would);
  * a FIFO or a character device (/dev/null, a terminal, /dev/stdout on a pipe): written
    through, as open() would, since no rename can replace it without destroying it; nothing is
    atomic there (a reader may see part of the output of a run that then fails);
  * a directory, a block device or a socket: refused before anything is written.

Several files (`atomic_write_many`) are all or nothing: none is renamed into place unless all
were written, and if a rename fails (or the process is interrupted while renaming), the files
already renamed are rolled back: a target that existed gets its old file back (a hard link to it,
or a copy where the file system has no hard links, was kept until the end), one that did not is
removed. What this cannot cover: another process may see the new files of a save that is then
rolled back, and a crash (SIGKILL, power loss) between two renames leaves the files renamed so far
in place, with the temp files of the rest beside them.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
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


@dataclass
class _Output:
    shown: Path  # the path as the caller gave it: what errors name
    real: Path  # where the bytes go: `shown` with a symbolic link followed
    through: bool  # a FIFO or character device, written to directly
    temp: Path | None = None
    backup: Path | None = None  # the file `real` held before, while renames may still be rolled back


def _output(path: str | os.PathLike) -> _Output:
    """How `path` is written (see the module docstring); an OSError naming it if it cannot be."""
    shown = Path(path)
    try:
        st = os.stat(shown)  # (following links)
    except FileNotFoundError:  # nothing there, or a dangling link: create what it names
        return _Output(shown, Path(os.path.realpath(shown)) if os.path.islink(shown) else shown, through=False)
    except OSError as exc:  # a symbolic link loop, a directory we may not search, ...
        raise _naming(exc, shown) from None
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
        return _Output(shown, shown, through=True)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(shown))
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file, FIFO or character device", str(shown))
    if not os.path.islink(shown):
        return _Output(shown, shown, through=False)
    real = Path(os.path.realpath(shown))
    try:
        same = os.path.samestat(os.stat(real), st)
    except OSError:
        same = False
    # A /proc "magic" link (/dev/stdout to a deleted or unnamed file) has no path to replace.
    return _Output(shown, real, through=False) if same else _Output(shown, shown, through=True)


def _keep_old(output: _Output) -> None:
    """Keep the file `output.real` holds (if any) under a temp name, to put back on a rollback."""
    if not output.real.exists():
        return
    for _ in range(100):
        backup = output.real.with_name(f".{output.real.name}.{secrets.token_hex(4)}.old")
        try:
            os.link(output.real, backup)
        except FileExistsError:
            continue
        except OSError:  # no hard links on this file system: a copy will do
            handle, temp = _open_temp_beside(output.real, "wb", None)
            handle.close()
            backup = Path(temp)
            output.backup = backup
            shutil.copy2(output.real, backup)
            return
        output.backup = backup
        return
    raise FileExistsError(errno.EEXIST, "no free temp name for a backup", str(output.shown))


def _roll_back(renamed: Sequence[_Output]) -> None:
    """Undo the renames of `renamed`, as far as the file system lets us (errors here are ignored:
    the error that caused the rollback is the one reported)."""
    for output in reversed(renamed):
        try:
            if output.backup is not None:
                os.replace(output.backup, output.real)
                output.backup = None
            else:
                output.real.unlink(missing_ok=True)
        except OSError:
            pass


def _commit(outputs: Sequence[_Output]) -> None:
    """Rename every temp file over its target: all, or (on an error) none."""
    replaced = [output for output in outputs if not output.through]
    renamed: list[_Output] = []
    current = None
    try:
        if len(replaced) > 1:
            for current in replaced:
                _keep_old(current)
        for current in replaced:
            assert current.temp is not None  # (every output not written through has its temp file)
            os.replace(current.temp, current.real)
            renamed.append(current)
    except BaseException as exc:  # an error or Ctrl-C between renames
        _roll_back(renamed)
        if isinstance(exc, OSError) and current is not None:
            raise _naming(exc, current.shown) from None
        raise


@contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "wb", encoding: str | None = None) -> Iterator[IO]:
    """Open a temp file for writing; it replaces `path` when the block exits without error."""
    with atomic_write_many([path], mode, encoding) as (handle,):
        yield handle


@contextmanager
def atomic_write_many(
    paths: Sequence[str | os.PathLike], mode: str = "wb", encoding: str | None = None
) -> Iterator[list[IO]]:
    """Like atomic_write for several files: none is renamed into place unless all were written,
    and a failed rename puts back the files already renamed (see the module docstring)."""
    outputs = [_output(path) for path in paths]  # a directory in the way: refused before any writing
    newline = None if "b" in mode else "\n"
    try:
        with ExitStack() as stack:
            handles = []
            for output in outputs:
                try:
                    if output.through:
                        handle = open(output.real, mode, encoding=encoding, newline=newline)
                    else:
                        handle, output.temp = _open_temp_beside(output.real, mode, encoding)
                except OSError as exc:  # e.g. no such directory: say so of the user's path
                    raise _naming(exc, output.shown) from None
                handles.append(stack.enter_context(handle))
            try:
                yield handles
                for handle, output in zip(handles, outputs):
                    handle.flush()
                    if not output.through:  # (fsync fails on a pipe)
                        os.fsync(handle.fileno())
            except OSError as exc:  # a full disk: the write, flush or fsync names no file
                named = {str(o.temp): o.shown for o in outputs if o.temp is not None}.get(exc.filename)
                if named is None and exc.filename is None and len(outputs) == 1:
                    named = outputs[0].shown
                raise (exc if named is None else _naming(exc, named)) from None
        _commit(outputs)
    finally:
        for output in outputs:  # whatever was not renamed into place, and the backups
            for leftover in (output.temp, output.backup):
                if leftover is not None:
                    leftover.unlink(missing_ok=True)
