"""`bpe encode`: a UTF-8 corpus file to a file of token ids, on every core, in bounded memory.

The file is cut into pieces of about a block each at safe cuts (bpe_impls.corpus.cuts: after a
special token, or at one of the split pattern's proven prose cuts), where encoding the two sides
separately gives the ids of encoding the whole. The pieces are encoded on threads (the compiled
encoder runs without the GIL) and written in file order, so the output is byte for byte the same
for any thread count and block size, and equal to `Tokenizer.encode_to_numpy` of the whole text.
At most two pieces per thread are in flight. From a regular file each worker reads its own piece
(bpe_impls.corpus.units.read_range, with os.pread on the one descriptor opened) and the calling
thread reads only the bytes around each cut; a pipe is read in blocks on the calling thread. A
regular file that changes while it is encoded (written to, truncated, or another file renamed
over its path) is a CorpusError, so the ids are always those of one file, the one named. The
output is synced to disk as it grows, on a thread of its own.

Formats: "npy" (a 1-D .npy array, its header rewritten with the length at the end) and "bin" (the
raw ids, little-endian uint16 when the vocab fits in 65536 ids, else uint32: the flat layout
nanoGPT and the CS336 training loop read with numpy.memmap). The output is written to a temp
file and renamed into place only when complete (bpe_impls.base.atomic); a FIFO or a character
device is written through (bin only: npy rewrites its header at the end).
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, BinaryIO, TypeVar

import numpy as np

from ..base.atomic import atomic_write
from ..base.checks import require_int, resolve_workers
from ..base.errors import ConfigError, CorpusError, EncodeError, unreadable
from ..corpus.cuts import CutFinder
from ..corpus.units import FileStamp, check_unchanged, read_range
from .formats.npy import NpyStreamWriter
from .tokenizer import Tokenizer

_T = TypeVar("_T")

OUTPUT_FORMATS = ("npy", "bin")
DEFAULT_BLOCK_SIZE = 1 << 20
# The smallest piece near the end of a file (iter_piece_bounds): each piece costs a call, a read
# and a write of its own.
_MIN_PIECE = 64 << 10
# How far before a block's end a cut is first looked for: prose has a cut every few bytes, so the
# carry into the next block stays this small; without one there, wider windows further back.
_LOOKBACK = 1 << 12
# Output written since the last fdatasync, past which the next one starts.
_FLUSH_BYTES = 1 << 22
_DATASYNC = getattr(os, "fdatasync", os.fsync)  # (macOS has no fdatasync)


@dataclass
class Encoded:
    tokens: int
    dtype: np.dtype
    bytes_read: int


def iter_pieces(file: BinaryIO, finder: CutFinder, block_size: int) -> Iterator[tuple[int, bytes]]:
    """(file offset, bytes) of pieces that together are the file, each ending at a safe cut (or
    the end of the file): about one per block. Text with no safe cut is carried over whole."""
    carry = b""
    offset = 0  # of carry[0] in the file
    # Every occurrence a cut is checked against ends within 2 * margin of the searched stretch.
    context = 2 * finder.margin
    while True:
        block = file.read(block_size)
        buffer = carry + block if carry else block
        if not block:
            if buffer:
                yield offset, buffer
            return
        cut = _cut_near_end(finder, buffer, len(buffer) - context)
        if cut is None:
            carry = buffer
            continue
        yield offset, buffer[:cut]
        carry = buffer[cut:]
        offset += cut


def _cut_near_end(finder: CutFinder, buffer: bytes, limit: int) -> int | None:
    """A safe cut p with 0 < p < limit, near limit: the first cut in the last window before
    limit that has one, the windows doubling in width (so the search costs O(len(buffer)) and
    what is carried over is at most about twice the stretch without a cut)."""
    hi, width = limit, _LOOKBACK
    while hi > 1:
        lo = max(1, hi - width)
        cut = _first_cut(finder, buffer, lo, hi)
        if cut is not None:
            return cut
        hi, width = lo, 2 * width
    return None


def _first_cut(finder: CutFinder, buffer: bytes, lo: int, hi: int) -> int | None:
    """The first safe cut p with lo <= p < hi; buffer holds 2 * margin bytes after hi.

    The search sees a window around [lo, hi), not the whole buffer. Before the window's start is
    either more context or the buffer's start, itself a safe cut: the text after a safe cut
    encodes as if it were a whole text, so cuts safe in it are safe in the file."""
    start = max(0, lo - finder.margin)
    window = buffer[start : hi + 2 * finder.margin]
    cut = finder.first_cut_in(window, lo - start, hi - lo)
    return None if cut is None else start + cut


def encode_file(
    tokenizer: Tokenizer,
    source: str | os.PathLike,
    target: str | os.PathLike,
    output_format: str = "npy",
    *,
    threads: int | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    on_progress: Callable[[int], object] = lambda nbytes: None,
) -> Encoded:
    """Encode the UTF-8 file `source` (special tokens as specials) into `target` (see the module
    docstring); `threads` None means every core available. Bytes that are not UTF-8 are a
    CorpusError naming the file and the byte offset, and nothing is written."""
    if output_format not in OUTPUT_FORMATS:
        raise ConfigError(f"unknown output format {output_format!r}; choose from {', '.join(OUTPUT_FORMATS)}")
    workers = resolve_workers(None) if threads is None else require_int(threads, "threads", minimum=1)
    block_size = require_int(block_size, "block_size", minimum=1)
    dtype = tokenizer.id_dtype()
    specials = [token.encode("utf-8") for token in tokenizer.special_tokens]
    finder = CutFinder(specials, specials, prose=tokenizer.pattern.prose_cuts)
    try:
        file = open(source, "rb")
    except OSError as exc:
        raise unreadable(source, exc) from None

    def encode(piece: bytes, offset: int) -> np.ndarray:
        try:
            return tokenizer.encode_to_numpy(piece, dtype)
        except EncodeError:
            raise _not_utf8(source, offset, piece) from None

    def read_and_encode(start: int, end: int, stamp: FileStamp) -> np.ndarray:
        # On the worker: reading a piece (the copy into a new bytes object) costs about a
        # fifth of encoding it, so the main thread, which also writes, only finds the cuts.
        where = f"{os.fsdecode(source)} bytes {start}-{end}"
        piece = b"".join(read_range(file.fileno(), start, end - start, where, doing="encoding"))
        check_unchanged(source, stamp, where, "encoding")  # still the file named, as it was
        return encode(piece, start)

    tokens = read = unflushed = 0
    flushing: Future | None = None
    with file, ThreadPoolExecutor(workers) as pool, ThreadPoolExecutor(1) as flusher, atomic_write(target) as out:
        write = _writer(out, output_format, dtype, target)
        durable = stat.S_ISREG(os.fstat(out.fileno()).st_mode)  # (a FIFO or a device cannot be synced)
        pending: deque[tuple[int, Future]] = deque()

        def write_oldest() -> None:
            nonlocal tokens, read, unflushed, flushing
            size, future = pending.popleft()
            ids = future.result()
            write(ids)
            tokens += len(ids)
            read += size
            on_progress(size)
            # The file is made durable (fsync) before it is renamed into place: sent to the disk
            # as it grows, on a thread of its own, that takes little more than the last stretch's
            # write at the end, not all of it (measured: 8 ms of 70 for a 13 MB output).
            unflushed += ids.nbytes
            if durable and unflushed >= _FLUSH_BYTES and (flushing is None or flushing.done()):
                if flushing is not None:
                    _synced(flushing, target)  # (an OSError from the last one)
                out.flush()
                flushing = flusher.submit(_DATASYNC, out.fileno())
                unflushed = 0

        try:
            stamp = _regular_file_stamp(file)
            if stamp is not None:
                for start, end in _reading(iter_piece_bounds(file, finder, block_size, workers), source):
                    pending.append((end - start, pool.submit(read_and_encode, start, end, stamp)))
                    if len(pending) > 2 * workers:
                        write_oldest()
            else:  # a pipe: read on this thread
                for offset, piece in _reading(iter_pieces(file, finder, block_size), source):
                    pending.append((len(piece), pool.submit(encode, piece, offset)))
                    if len(pending) > 2 * workers:
                        write_oldest()
            while pending:
                write_oldest()
            if stamp is not None:  # (a change after the last piece was read, before the output is in place)
                check_unchanged(source, stamp, os.fsdecode(source), "encoding")
        finally:
            pool.shutdown(cancel_futures=True)  # on an error, the pieces not yet started
            if flushing is not None:
                flushing.exception()  # wait: the file is not closed under a running fdatasync
        if flushing is not None:
            _synced(flushing, target)
        write(None)
    return Encoded(tokens, dtype, read)


def iter_piece_bounds(
    file: BinaryIO, finder: CutFinder, block_size: int, workers: int = 1
) -> Iterator[tuple[int, int]]:
    """[start, end) of pieces that together are the (seekable) file, each ending at a safe cut
    (or the end of the file): the first safe cut at least a piece's size into it. Only the few
    bytes around each cut are read here.

    A piece's size is block_size, or for several workers, less near the end: what is left over
    2 * workers, down to _MIN_PIECE, so the workers finish together (with whole blocks the last
    one encoded alone: a 4 MB file is 4 pieces)."""
    size = os.fstat(file.fileno()).st_size
    start = 0
    while start < size:
        step = block_size if workers == 1 else min(block_size, max(_MIN_PIECE, (size - start) // (2 * workers)))
        cut = finder.next_cut(file, start + step, size) if start + step < size else None
        end = size if cut is None else cut
        yield start, end
        start = end


def _reading(pieces: Iterator[_T], source: str | os.PathLike) -> Iterator[_T]:
    """The pieces, an OSError in reading them a CorpusError naming the source (an error in the
    loop that consumes them, such as a failed write, is not a read error and passes as it is)."""
    try:
        yield from pieces
    except OSError as exc:
        raise unreadable(source, exc) from None


def _synced(flushing: Future, target: str | os.PathLike) -> None:
    """Wait for a background fdatasync; its OSError names the target (not the temp file)."""
    try:
        flushing.result()
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(target)) from None


def _regular_file_stamp(file: BinaryIO) -> FileStamp | None:
    """The stamp of a regular file, which workers can read at any offset; None for a pipe or a terminal."""
    return FileStamp.of(file.fileno()) if stat.S_ISREG(os.fstat(file.fileno()).st_mode) else None


def _writer(
    out: IO[bytes], output_format: str, dtype: np.dtype, target: str | os.PathLike
) -> Callable[[np.ndarray | None], None]:
    """write(ids) appends ids; write(None) finishes the file."""
    if output_format == "npy":
        if not out.seekable():
            raise ConfigError(
                f"{target}: npy output needs a file it can seek in (a pipe or a terminal); use --format bin"
            )
        npy = NpyStreamWriter(out, dtype)
        return lambda ids: npy.finish() if ids is None else npy.write(ids)
    little = dtype.newbyteorder("<")  # .bin is little-endian on every machine (a no-op on x86 and ARM)

    def write(ids: np.ndarray | None) -> None:
        if ids is not None:
            out.write(ids.astype(little, copy=False).data)

    return write


def _not_utf8(source: str | os.PathLike, offset: int, piece: bytes) -> CorpusError:
    try:
        piece.decode("utf-8")
    except UnicodeDecodeError as exc:
        return CorpusError(f"{source}: not valid UTF-8 at byte offset {offset + exc.start}")
    raise AssertionError("unreachable: the encoder refused a piece that is valid UTF-8")
