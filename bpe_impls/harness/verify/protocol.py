"""The messages between the harness and an implementation's process: pickles, length-prefixed."""

from __future__ import annotations

import pickle
import struct
from typing import Any, BinaryIO

_LENGTH = struct.Struct("<Q")


def read_message(stream: BinaryIO) -> Any:
    """One message, or EOFError at the end of the stream."""
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        raise EOFError
    (size,) = _LENGTH.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        raise EOFError
    return pickle.loads(payload)


def write_message(stream: BinaryIO, message: Any) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(payload)) + payload)
    stream.flush()
