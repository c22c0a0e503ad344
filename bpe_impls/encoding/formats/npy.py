"""Writing a 1-D .npy array whose length is not known until the end, in constant memory.

The header is written first with a fixed size and rewritten with the final length on close; numpy
reads the length from the header's shape field and accepts the space padding.
"""

from __future__ import annotations

import struct
from typing import IO

import numpy as np

_HEADER_BYTES = 128  # a multiple of 64, as the format asks, with room for any 1-D shape


class NpyStreamWriter:
    def __init__(self, file: IO[bytes], dtype: np.dtype | type):
        self.file = file
        self.dtype = np.dtype(dtype)
        self.length = 0
        file.write(self._header())

    def _header(self) -> bytes:
        described = f"{{'descr': '{self.dtype.str}', 'fortran_order': False, 'shape': ({self.length},), }}"
        prefix = np.lib.format.magic(1, 0) + struct.pack("<H", _HEADER_BYTES - 10)
        return prefix + described.ljust(_HEADER_BYTES - 11).encode("latin1") + b"\n"

    def write(self, values) -> None:
        array = np.asarray(values, dtype=self.dtype)
        self.file.write(array.tobytes())
        self.length += array.size

    def finish(self) -> None:
        """Rewrite the header with the final length (call before the file is closed)."""
        end = self.file.tell()
        self.file.seek(0)
        self.file.write(self._header())
        self.file.seek(end)
