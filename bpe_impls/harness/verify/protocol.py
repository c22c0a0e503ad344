"""What the harness and an implementation's process share: the messages between them, and how a
user's reference is found.

Standard library only, and Python 3.8 or later: the worker (worker.py) loads this file by its path
under whatever interpreter runs the implementation (`bpe verify --python PATH`, a venv that need
not have bpe_impls), so nothing here may import the package or a third-party module.

A message is a pickle (protocol 4, read by every Python 3 the worker may run under) prefixed with
its length, sent over a private socket (never the worker's stdin or stdout, which the
implementation may close). The harness unpickles replies with `loads_plain`, which refuses every
class: a reply holds only str, bytes, int, float, bool, None, tuples, lists, dicts and sets.
"""

from __future__ import annotations

import array
import hashlib
import importlib
import importlib.metadata
import importlib.util
import io
import os
import pickle
import socket
import struct
import sys
from typing import Any

HEADER = struct.Struct("<Q")
PICKLE_PROTOCOL = 4
# The largest reply either side accepts; the worker bounds each result long before this (see
# worker.py), so only a hostile implementation writing to the channel itself comes near it.
MAX_REPLY = 256 * 1024 * 1024
ENTRY_POINT_GROUP = "bpe_impls.implementations"
# Every process the worker starts inherits this variable (its value is the worker's own token), so
# that the harness finds the ones that left the worker's process group and session as well.
WORKER_TOKEN = "BPE_VERIFY_WORKER"
# MSG_NOSIGNAL: a write to a peer that is gone is EPIPE, never SIGPIPE, whatever the disposition
# of SIGPIPE is (the implementation, or a command line around the harness, may reset it).
SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)


def pack(message: Any) -> bytes:
    payload = pickle.dumps(message, protocol=PICKLE_PROTOCOL)
    return HEADER.pack(len(payload)) + payload


class _NoClasses(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"a reply may hold only plain values, not {module}.{name}")


def loads_plain(payload: bytes) -> Any:
    """A pickle of plain values only (no class is ever looked up, so none is imported or called)."""
    return _NoClasses(io.BytesIO(payload)).load()


def _receive_exactly(channel: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = channel.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def receive(channel: socket.socket) -> Any:
    """One message from a blocking socket (the worker's side), or EOFError at its end."""
    (size,) = HEADER.unpack(_receive_exactly(channel, HEADER.size))
    return pickle.loads(_receive_exactly(channel, size))


def send(channel: socket.socket, data: bytes) -> None:
    """All of `data` to a blocking socket (the worker's side)."""
    view = memoryview(data)
    while view:
        view = view[channel.send(view, SEND_FLAGS) :]


class IdsDigest:
    """The sha256 of a run of ids (each as a little-endian signed 64-bit integer) and their count,
    fed in pieces: what a measured encode replies with instead of its ids, and what the harness
    computes of its own ids to compare with it."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.count = 0

    def update(self, ids: Any) -> None:
        block = array.array("q", ids)
        if sys.byteorder == "big":
            block.byteswap()
        self._hash.update(block.tobytes())
        self.count += len(block)

    def result(self) -> tuple[int, str]:
        """(how many ids, the sha256 of them all in hex)."""
        return self.count, self._hash.hexdigest()


def ids_digest(ids: Any) -> tuple[int, str]:
    """(count, sha256) of a sequence of ids, as IdsDigest gives it."""
    digest = IdsDigest()
    digest.update(ids)
    return digest.result()


# ---- references --------------------------------------------------------------------------------


class ReferenceNotFound(LookupError):
    """A reference that names nothing: no such file, or no entry point of that name."""


def _from_file(path: str, attribute: str) -> Any:
    if not os.path.isfile(path):
        raise ReferenceNotFound(f"{path}: no such file")
    # The file's folder first on sys.path, as `python file.py` would have it: an adapters.py
    # imports its neighbours.
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    name = "bpe_verify_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, attribute)


def _entry_point(name: str) -> Any:
    points: Any = importlib.metadata.entry_points()
    if hasattr(points, "select"):  # Python 3.10 and later
        found = list(points.select(group=ENTRY_POINT_GROUP, name=name))
    else:
        found = [point for point in points.get(ENTRY_POINT_GROUP, ()) if point.name == name]
    if not found:
        raise ReferenceNotFound(
            f"{name!r} is neither module:function, path/file.py:function, builtin:NAME, peer:NAME "
            f"nor an implementation registered under the entry-point group {ENTRY_POINT_GROUP!r}"
        )
    return found[0].load()


def needs_package(ref: str) -> bool:
    """Whether `ref` names this project's own code (`builtin:`, `peer:`), which only an interpreter
    that has bpe_impls can load."""
    return ref.partition(":")[0] in ("builtin", "peer")


def load_user_reference(ref: str) -> Any:
    """The callable `ref` names (`module:function`, `path/file.py:function`, or an entry point's
    name), importing whatever it needs: ReferenceNotFound if it names nothing, or whatever the
    import raises."""
    module, colon, attribute = ref.rpartition(":")
    if not colon:
        return _entry_point(ref)
    if module.endswith(".py") or os.sep in module:
        return _from_file(module, attribute)
    return getattr(importlib.import_module(module), attribute)
