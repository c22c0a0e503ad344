"""The package's cache folder: what is expensive to compute and pure, kept between runs.

Every file in it is named by everything its content depends on, so it is never stale, and may
be deleted at any time (`rm -r ~/.cache/bpe_impls`): it is then computed again. BPE_CACHE_DIR=none
turns the folder off: nothing is read from or written to it, everything is computed each time.

An entry (`read_entry` / `write_entry`) is its payload after the payload's sha256: a damaged or
cut entry reads as absent, and an entry appears whole or not at all (temp file, then rename). Only
a regular file is read as an entry (a FIFO, device or directory there is a miss). A folder that
cannot be written only makes the next run slower.

What the cache trusts: the digest detects damage, not tampering. Anyone who can write the folder
can write an entry with a matching digest, and a load then returns the tables it holds, checked
for shape but not against the tokenizer's files. The folder is the user's own (~/.cache, created
with the user's umask); point BPE_CACHE_DIR at a folder only you can write, or set it to none.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

# BPE_CACHE_DIR values that turn the cache off.
DISABLED = frozenset({"none", "off"})
_DIGEST = 32  # sha256


def cache_dir() -> Path:
    """$BPE_CACHE_DIR, else $XDG_CACHE_HOME/bpe_impls, else ~/.cache/bpe_impls."""
    if os.environ.get("BPE_CACHE_DIR"):
        return Path(os.environ["BPE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bpe_impls"


def cache_enabled() -> bool:
    """False when BPE_CACHE_DIR says none (or off)."""
    return os.environ.get("BPE_CACHE_DIR", "").strip().lower() not in DISABLED


def read_entry(name: str) -> bytes | None:
    """The payload of the entry `name`, or None if the cache is off, or the entry is absent,
    unreadable or does not match its digest."""
    if not cache_enabled():
        return None
    stored = _read_regular_file(cache_dir() / name)
    if stored is None:
        return None
    if len(stored) < _DIGEST or hashlib.sha256(memoryview(stored)[_DIGEST:]).digest() != stored[:_DIGEST]:
        return None
    return stored[_DIGEST:]


def _read_regular_file(path: Path) -> bytes | None:
    """The bytes of `path` if it is a regular file (after symbolic links), else None. Opened
    without blocking, so a FIFO or a device put at an entry's path is a miss, not a hang."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    except OSError:
        return None
    finally:
        os.close(fd)


def write_entry(name: str, payload: bytes) -> bool:
    """Write the entry `name` atomically; False (and nothing left behind) if the cache is off or
    the folder cannot be written."""
    if not cache_enabled():
        return False
    folder = cache_dir()
    temp: str | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{name}.", delete=False) as handle:
            temp = handle.name
            handle.write(hashlib.sha256(payload).digest())
            handle.write(payload)
        os.replace(temp, folder / name)
        return True
    except OSError:
        if temp is not None:
            try:
                os.unlink(temp)
            except OSError:
                pass
        return False
