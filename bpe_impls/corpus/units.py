"""Units of work: pieces of a corpus that one worker reads and counts on its own.

    unit.size          bytes it covers (for planning and progress bars)
    unit.describe()    where it is, for error messages ("a.jsonl bytes 0-8388608")
    unit.texts()       its documents as str; the generator *returns* a SkipReport (or None)
    unit.utf8_pieces() plain-text units only (`Utf8Unit`): raw UTF-8 pieces, never decoded to str
    unit.packed()      record units only (`PackedUnit`: JSON Lines, Parquet): the documents of
                       texts() as UTF-8, packed (bytes back to back, int64 offsets), with no str
                       per record (JSON Lines read by the compiled core without the GIL)

Each text a unit yields is a hard boundary, like a special token: no pre-token spans two.
  * `TextRange`: bytes [start, end) of a text file, both safe cuts (see corpus.cuts);
  * `CompressedText`: a whole .gz/.zst text file (a compressed stream cannot be entered midway),
    decompressed as a stream and handed on in pieces of about PIECE_BYTES, each ending at a safe
    cut found with the same cut finder as byte ranges, so a worker holds about one piece;
  * `JsonlRange` / `CompressedJsonl`: one document per line, the string field `text_field` of a
    JSON object (a raw newline cannot occur inside a JSON string, so ranges end at newlines);
  * `ParquetRowGroup`: one row group, read one batch at a time and only the `text_field` column.

A bad record (a line that is not JSON, not an object, without the field, a field that is not a
string, a null, invalid UTF-8, a lone surrogate) raises a one-line CorpusError naming the file and
the line (numbered from 1, as editors do) or the row (numbered from 0, as pyarrow and pandas do).
With `skip_bad_records=True` it is counted instead, in the SkipReport the unit's `texts()` returns,
so skipped records are reported at the end and never silently dropped.

Paths in units are absolute, so the workers of a cluster find the same files (they must see the
same file system: NFS, a shared volume, or a copy at the same path).
"""

from __future__ import annotations

import codecs
import gzip
import json
import os
import re
import socket
import zlib
from array import array
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..base import compiled
from ..base.checks import one_line
from ..base.errors import ConfigError, CorpusError, unreadable
from ..base.patterns import GPT2, SplitPattern
from .cuts import CutFinder

# Decompressed text handed to the counter at a time: small enough that a worker's memory does not
# follow the file size, large enough that the per-piece overhead is nothing.
PIECE_BYTES = 1 << 20
# Compressed bytes read at a time; zstd on repetitive text can expand 100x, so keep this small.
_READ_COMPRESSED = 1 << 18
# Bytes searched for a safe cut per call (the cut finder's own block size).
_CUT_WINDOW = 1 << 16
# Parquet rows per batch: bounds the decoded strings held at once, even for long documents.
PARQUET_BATCH_ROWS = 1024
# Bad records named in a SkipReport (the first ones by file and position); the rest are counted.
MAX_EXAMPLES = 5


@dataclass(frozen=True)
class SkipReport:
    """Bad records skipped: how many, and the first MAX_EXAMPLES as (path, position, message).

    Examples are the smallest by (path, position), so adding reports in any order (the order in
    which workers finish) gives the same report.
    """

    count: int = 0
    examples: tuple[tuple[str, int, str], ...] = ()

    def __add__(self, other: SkipReport) -> SkipReport:
        if not other.count:
            return self
        if not self.count:
            return other
        return SkipReport(self.count + other.count, tuple(sorted(self.examples + other.examples)[:MAX_EXAMPLES]))

    def __bool__(self) -> bool:
        return self.count > 0

    def summary(self) -> str:
        """One line: the count and the first bad records."""
        if not self.count:
            return "no bad records skipped"
        shown = "; ".join(message for _, _, message in self.examples)
        more = self.count - len(self.examples)
        tail = f"; and {more} more" if more > 0 else ""
        return f"skipped {self.count} bad record{'s' if self.count != 1 else ''}: {shown}{tail}"


class _Skips:
    """Collects one unit's bad records: raises on the first unless skipping."""

    def __init__(self, skip: bool):
        self.skip = skip
        self.count = 0
        self.examples: list[tuple[str, int, str]] = []

    def bad(self, path: str, position: int, message: str, n: int = 1) -> None:
        if not self.skip:
            raise CorpusError(message)
        self.count += n
        if len(self.examples) < MAX_EXAMPLES:  # a unit meets its records in order: its first are its smallest
            self.examples.append((path, position, message))

    def report(self) -> SkipReport:
        return SkipReport(self.count, tuple(self.examples))


@runtime_checkable
class Unit(Protocol):
    """What every unit of work offers (see the module docstring)."""

    @property
    def size(self) -> int: ...

    def describe(self) -> str: ...

    def texts(self) -> Generator[str, None, SkipReport | None]: ...


@runtime_checkable
class Utf8Unit(Unit, Protocol):
    """A plain-text unit: its bytes go to the counter as they are (the compiled one never builds a str)."""

    def utf8_pieces(self) -> Iterator[tuple[int, bytes]]: ...

    def decode(self, offset: int, data: bytes) -> str: ...


# Documents packed: their UTF-8 back to back, and native int64 offsets (one more than the
# documents, from 0): document k is data[offsets[k]:offsets[k + 1]].
Packed = tuple[bytes, bytes]


@runtime_checkable
class PackedUnit(Unit, Protocol):
    """A unit of records (JSON Lines, Parquet) whose documents can be had packed, with no str per record."""

    def packed(self, piece_bytes: int | None = None) -> Generator[Packed, None, SkipReport]:
        """The documents in pieces of about piece_bytes (the bytes read at a time; None: PIECE_BYTES)."""
        ...


# --- plain text -------------------------------------------------------------------------------


_HOST = socket.gethostname()


@dataclass(frozen=True)
class FileStamp:
    """One version of a file, taken when its units are planned, so that a worker that opens the
    file by path can tell whether it still is that version: the same file (device and inode) of
    the same size and modification time. Device, inode and time are compared only on the machine
    that took the stamp (device numbers are per machine, and a cluster's workers may read a copy
    at the same path); elsewhere only the size is."""

    host: str
    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, fd: int) -> FileStamp:
        """The stamp of the file open as `fd`."""
        return cls.of_stat(os.fstat(fd))

    @classmethod
    def of_stat(cls, st: os.stat_result) -> FileStamp:
        """The stamp of the file `st` describes (on this machine)."""
        return cls(_HOST, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def change(self, st: os.stat_result) -> str | None:
        """How the file `st` describes differs from this version (a few words), or None."""
        here = self.host == _HOST
        if here and (st.st_dev, st.st_ino) != (self.device, self.inode):
            return "replaced by another file"
        if st.st_size != self.size:
            return f"now {st.st_size} bytes, was {self.size}"
        if here and st.st_mtime_ns != self.mtime_ns:
            return "modified"
        return None


def _changed(where: str, doing: str, how: str) -> CorpusError:
    return CorpusError(f"{where}: file changed while {doing} ({how})")


def check_unchanged(path: str | os.PathLike, stamp: FileStamp, where: str, doing: str = "counting") -> None:
    """A CorpusError naming `where` unless `path` still names the version of the file `stamp` describes."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise _changed(where, doing, "removed") from None
    except OSError as exc:
        raise unreadable(where, exc) from None
    how = stamp.change(st)
    if how is not None:
        raise _changed(where, doing, how)


def read_range(
    source: str | os.PathLike | int,
    start: int,
    size: int,
    where: str,
    block_size: int | None = None,
    doing: str = "counting",
    stamp: FileStamp | None = None,
) -> Iterator[bytes]:
    """Bytes [start, start + size) of a file, in blocks of at most block_size (default: one block).

    `source` is a path, or the descriptor of a file already open (read with os.pread, so threads
    can share it: every range then comes from the one file that was opened, whatever is renamed
    over its path). A file that shrank since the range was planned is an error: counting (or
    whatever `doing` names) the rest would be silently short. With a `stamp`, so is a file that is
    not the version planned, when opened or after the range was read. Errors name `where` (the
    range), in one line.
    """
    try:
        if isinstance(source, int):
            yield from _pread_range(source, start, size, where, block_size, doing, stamp)
            return
        with open(source, "rb") as file:
            yield from _pread_range(file.fileno(), start, size, where, block_size, doing, stamp)
    except OSError as exc:
        raise unreadable(where, exc) from None


def _check_open_file(fd: int, stamp: FileStamp | None, where: str, doing: str) -> None:
    """With a `stamp`: a CorpusError naming `where` unless the open file `fd` is the version it
    describes (check_unchanged is the same for a path)."""
    if stamp is not None and (how := stamp.change(os.fstat(fd))) is not None:
        raise _changed(where, doing, how)


def _pread_range(
    fd: int, start: int, size: int, where: str, block_size: int | None, doing: str, stamp: FileStamp | None
) -> Iterator[bytes]:
    _check_open_file(fd, stamp, where, doing)
    done = 0
    while done < size:
        block = os.pread(fd, min(block_size or size, size - done), start + done)
        if not block:
            raise _changed(where, doing, f"read {done} of {size} bytes")
        done += len(block)
        yield block
    _check_open_file(fd, stamp, where, doing)


@dataclass(frozen=True)
class TextRange:
    """Bytes [start, end) of a UTF-8 text file; start and end are safe cuts."""

    path: str
    start: int
    end: int
    # The file as planned (see FileStamp); not part of what the unit is, so not compared.
    stamp: FileStamp | None = field(default=None, compare=False)

    @property
    def size(self) -> int:
        return self.end - self.start

    def describe(self) -> str:
        return f"{self.path} bytes {self.start}-{self.end}"

    def utf8_pieces(self) -> Iterator[tuple[int, bytes]]:
        """(byte offset, bytes) of each independent piece of text: here, the whole range."""
        yield self.start, b"".join(read_range(self.path, self.start, self.size, self.describe(), stamp=self.stamp))

    def decode(self, offset: int, data: bytes) -> str:
        """One piece as text; cuts are at ASCII bytes, so a decode error is a real one."""
        return decode_utf8(self.path, offset, data)

    def texts(self) -> Generator[str, None, None]:
        for offset, data in self.utf8_pieces():
            yield self.decode(offset, data)


def decode_utf8(path: str, offset: int, data: bytes, where: str = "byte offset") -> str:
    """`data` (found at `offset` in `path`) as text; a CorpusError naming the first bad byte if it is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(
            f"{path}: not valid UTF-8 at {where} {offset + exc.start} ({exc.reason}: {data[exc.start : exc.end]!r})"
        ) from None


# --- reading compressed files -------------------------------------------------------------------


def _zstandard():
    try:
        import zstandard
    except ImportError:
        raise ConfigError("zstandard is not installed: pip install 'bpe_impls[formats]'") from None
    return zstandard


def _zstd_blocks(file) -> Iterator[bytes]:
    """Decompress every zstd frame of `file`; a stream cut inside a frame is an error.

    Frame by frame with decompressobj because zstandard's stream_reader returns EOF silently when
    the input ends inside a frame: a truncated file would be counted short without a word.
    """
    zstandard = _zstandard()
    context = zstandard.ZstdDecompressor()
    frame = context.decompressobj()
    inside = False  # the current frame has consumed input and not ended
    while True:
        data = file.read(_READ_COMPRESSED)
        if not data:
            break
        while data:
            out = frame.decompress(data)
            inside = True
            if out:
                yield out
            if frame.eof:  # the frame ended; what follows it starts the next one
                data = frame.unused_data
                frame = context.decompressobj()
                inside = False
            else:
                data = b""
    if inside:
        raise EOFError("the file ends inside a zstd frame (truncated?)")


def _decompressed_blocks(path: str, codec: str, stamp: FileStamp | None = None) -> Iterator[bytes]:
    """The decompressed bytes of a .gz or .zst file in blocks; errors name the file. With a
    `stamp`, a file that is not that version (when opened, or at the end) is an error."""
    zstd_error: type[BaseException] = EOFError
    if codec == "zstd":
        zstd_error = _zstandard().ZstdError
    try:
        with open(path, "rb") as file:
            _check_open_file(file.fileno(), stamp, path, "counting")
            if codec == "gzip":
                with gzip.GzipFile(fileobj=file) as stream:  # reads every gzip member
                    while block := stream.read(PIECE_BYTES):
                        yield block
            else:
                yield from _zstd_blocks(file)
            _check_open_file(file.fileno(), stamp, path, "counting")
    except (EOFError, zlib.error, gzip.BadGzipFile, zstd_error) as exc:
        name = "gzip" if codec == "gzip" else "zstd"
        raise CorpusError(f"{path}: corrupt or truncated {name} data ({exc})") from None
    except OSError as exc:
        raise unreadable(path, exc) from None


def _cut_pieces(
    blocks: Iterable[bytes], special_tokens: tuple[str, ...], target: int, pattern: SplitPattern = GPT2
) -> Iterator[tuple[int, bytes]]:
    """Regroup a byte stream into (offset, piece) pieces, each ending at a safe cut after `target` bytes.

    Uses the byte-range cut finder (corpus.cuts.CutFinder, whose comments prove each cut safe) on a
    sliding buffer: a cut is only looked for where the buffer holds the finder's context on both
    sides, the same context it reads around a file position, so a piece boundary here is exactly a
    boundary plan_units could have chosen and cannot change any count.
    """
    encoded = [token.encode("utf-8") for token in special_tokens]
    finder = CutFinder(encoded, encoded, prose=pattern.prose_cuts)
    margin = finder.margin
    target = max(target, margin)  # the left context of the first cut must be in the buffer
    buf = bytearray()
    offset = 0  # stream offset of buf[0]
    scan = target  # look for the next cut at or after buf[scan]
    for block in blocks:
        buf += block
        # Cuts in [scan, hi) need margin bytes before scan and 2*margin after hi (a special token
        # starting before hi ends before hi+margin; one overlapping its end, before hi+2*margin).
        while len(buf) - 2 * margin > scan:
            hi = min(scan + _CUT_WINDOW, len(buf) - 2 * margin)
            left = scan - margin
            cut = finder.first_cut_in(bytes(buf[left : hi + 2 * margin]), margin, hi - scan)
            if cut is None:
                scan = hi
                continue
            cut += left
            yield offset, bytes(buf[:cut])
            del buf[:cut]
            offset += cut
            scan = target
    if buf or offset == 0:
        yield offset, bytes(buf)


# --- compressed text, JSON Lines, Parquet ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CompressedText:
    """A whole .gz or .zst text file (one unit: a compressed stream cannot be entered midway)."""

    path: str
    codec: str
    special_tokens: tuple[str, ...]  # where the stream may be cut into pieces
    compressed_size: int
    pattern: SplitPattern = GPT2  # its prose cuts too
    stamp: FileStamp | None = field(default=None, compare=False)  # as TextRange's

    @property
    def size(self) -> int:
        return self.compressed_size

    def describe(self) -> str:
        return self.path

    def utf8_pieces(self) -> Iterator[tuple[int, bytes]]:
        """(decompressed offset, bytes) of pieces cut at safe cuts, so each counts independently."""
        return _cut_pieces(
            _decompressed_blocks(self.path, self.codec, self.stamp), self.special_tokens, PIECE_BYTES, self.pattern
        )

    def decode(self, offset: int, data: bytes) -> str:
        return decode_utf8(self.path, offset, data, "decompressed byte offset")

    def texts(self) -> Generator[str, None, None]:
        for offset, data in self.utf8_pieces():
            yield self.decode(offset, data)


_JSON_TYPES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}
_SURROGATE = re.compile("[\ud800-\udfff]")
_BOM = codecs.BOM_UTF8


def _json_type(value: object) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _document(line: bytes, text_field: str) -> str:
    """The document in one JSON Lines record; ValueError(reason) if the record is bad."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid UTF-8 at byte {exc.start} of the line ({exc.reason})") from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(record, dict):
        raise ValueError(f"the record is {_json_type(record)}, not a JSON object")
    if text_field not in record:
        raise ValueError(f"no field {text_field!r} in the record")
    value = record[text_field]
    if not isinstance(value, str):
        raise ValueError(f"field {text_field!r} is {_json_type(value)}, not a string")
    surrogate = _SURROGATE.search(value)
    if surrogate:  # from a "\\udXXX" escape; it has no UTF-8 encoding, so it cannot be counted
        raise ValueError(f"field {text_field!r} contains a lone surrogate U+{ord(surrogate.group()):04X}")
    return value


def _lines(blocks: Iterable[bytes]) -> Iterator[bytes]:
    """Split a byte stream at b"\\n" (a line may span blocks; it is joined once, not re-copied per block)."""
    parts: list[bytes] = []
    for block in blocks:
        pieces = block.split(b"\n")
        if len(pieces) == 1:
            parts.append(block)
            continue
        parts.append(pieces[0])
        yield b"".join(parts)
        yield from pieces[1:-1]
        parts = [pieces[-1]]
    last = b"".join(parts)
    if last:
        yield last


def _jsonl_documents(
    path: str, lines: Iterable[bytes], text_field: str, skips: _Skips, line_number, at_file_start: bool
) -> Iterator[str]:
    """The documents of JSON Lines; `line_number(i, offset)` numbers the i-th line of `lines`."""
    offset = 0
    for index, line in enumerate(lines):
        start = offset
        offset += len(line) + 1
        if index == 0 and at_file_start and line.startswith(_BOM):
            line = line[len(_BOM) :]
        if not line.strip():  # a blank line holds no record, so nothing is dropped
            continue
        try:
            yield _document(line, text_field)
        except ValueError as exc:
            number, position = line_number(index, start)
            skips.bad(path, position, f"{path}: line {number}: {exc}")


def _pack(documents: Iterable[str]) -> Packed:
    """Documents as `Packed`."""
    ends = array("q", [0])
    parts = []
    for document in documents:
        part = document.encode("utf-8")
        parts.append(part)
        ends.append(ends[-1] + len(part))
    return b"".join(parts), ends.tobytes()


def _line_chunks(blocks: Iterable[bytes]) -> Iterator[tuple[bytes, int]]:
    """A byte stream as (chunk, end) pairs, chunk[:end] whole lines (the stream's last one may lack
    its newline): a line cut by a block boundary goes whole into the next chunk."""
    carry = b""
    for block in blocks:
        chunk = carry + block if carry else block
        end = chunk.rfind(b"\n") + 1
        if end:
            yield chunk, end
        carry = chunk[end:] if end < len(chunk) else b""
    if carry:
        yield carry, len(carry)


def _line_reads(
    path: str, start: int, size: int, where: str, piece_bytes: int, stamp: FileStamp | None
) -> Iterator[tuple[bytes, int]]:
    """Bytes [start, start + size) of a file (both at line starts) as _line_chunks gives them, but
    each read starting where the last one's whole lines ended, so no block is copied to join a
    line cut in two (a line longer than a read is read again, twice as long). Errors as read_range's."""
    try:
        with open(path, "rb") as file:
            fd = file.fileno()
            _check_open_file(fd, stamp, where, "counting")
            offset, stop, want = start, start + size, piece_bytes
            while offset < stop:
                asked = min(want, stop - offset)
                block = os.pread(fd, asked, offset)
                if len(block) < asked:  # (a regular file reads short only at its end: it shrank)
                    raise _changed(where, "counting", f"read {offset - start + len(block)} of {size} bytes")
                end = len(block) if offset + len(block) >= stop else block.rfind(b"\n") + 1
                if not end:
                    want *= 2
                    continue
                yield block, end
                offset, want = offset + end, piece_bytes
            _check_open_file(fd, stamp, where, "counting")
    except OSError as exc:
        raise unreadable(where, exc) from None


def _packed_documents(
    path: str,
    chunks: Iterable[tuple[bytes, int]],
    text_field: str,
    skips: _Skips,
    line_number,
    at_file_start: bool,
    piece_bytes: int,
) -> Iterator[Packed]:
    """_jsonl_documents' documents, packed, a chunk of whole lines (_line_chunks) at a time. The
    compiled core reads each record it is sure Python reads alike (jsonl_documents); a line it
    leaves (a bad record, or one Python's json might read otherwise) is read here by _document, so
    the documents and the faults named are _jsonl_documents' own. Without the core,
    _jsonl_documents itself, packed about piece_bytes at a time."""
    if not compiled.AVAILABLE:
        stream = _lines(chunk[:end] for chunk, end in chunks)
        documents = _jsonl_documents(path, stream, text_field, skips, line_number, at_file_start)
        pending: list[str] = []
        size = 0
        for document in documents:
            pending.append(document)
            size += len(document)
            if size >= piece_bytes:
                yield _pack(pending)
                pending, size = [], 0
        if pending:
            yield _pack(pending)
        return
    read = compiled.core().jsonl_documents
    name = text_field.encode("utf-8", "surrogatepass")
    lines_before = offset_before = 0  # in the chunks before this one
    for chunk, end in chunks:
        start = 0
        while start < end:
            data, offsets, stop, stop_end, lines = read(
                chunk, name, start, end, at_file_start and offset_before == start == 0
            )
            if len(offsets) > 8:
                yield data, offsets
            lines_before += lines
            if stop == end:
                break
            line = chunk[stop:stop_end]
            if lines_before == 0 and at_file_start and line.startswith(_BOM):
                line = line[len(_BOM) :]
            try:
                yield _pack([_document(line, text_field)])
            except ValueError as exc:
                number, position = line_number(lines_before, offset_before + stop)
                skips.bad(path, position, f"{path}: line {number}: {exc}")
            lines_before += 1
            start = stop_end + 1
        offset_before += end


@dataclass(frozen=True)
class JsonlRange:
    """Bytes [start, end) of an uncompressed JSON Lines file; both at the start of a line."""

    path: str
    start: int
    end: int
    text_field: str = "text"
    skip_bad_records: bool = False
    stamp: FileStamp | None = field(default=None, compare=False)  # as TextRange's

    @property
    def size(self) -> int:
        return self.end - self.start

    def describe(self) -> str:
        return f"{self.path} bytes {self.start}-{self.end}"

    def _blocks(self) -> Iterator[bytes]:
        return read_range(self.path, self.start, self.size, self.describe(), PIECE_BYTES, stamp=self.stamp)

    def _first_line(self) -> int:
        """The number of the range's first line: 1 + the newlines before it (read only on a bad record)."""
        newlines = 0
        for block in read_range(self.path, 0, self.start, self.describe(), PIECE_BYTES, stamp=self.stamp):
            newlines += block.count(b"\n")
        return newlines + 1

    def _line_number(self) -> Callable[[int, int], tuple[int, int]]:
        """(line number, byte offset) of the range's index-th line, at `offset` in the range."""
        first: list[int] = []

        def line_number(index: int, offset: int) -> tuple[int, int]:
            if not first:
                first.append(self._first_line())
            return first[0] + index, self.start + offset  # byte offset orders records within a file

        return line_number

    def texts(self) -> Generator[str, None, SkipReport]:
        skips = _Skips(self.skip_bad_records)
        lines = _lines(self._blocks())
        yield from _jsonl_documents(self.path, lines, self.text_field, skips, self._line_number(), self.start == 0)
        return skips.report()

    def packed(self, piece_bytes: int | None = None) -> Generator[Packed, None, SkipReport]:
        skips = _Skips(self.skip_bad_records)
        piece_bytes = piece_bytes or PIECE_BYTES
        chunks = _line_reads(self.path, self.start, self.size, self.describe(), piece_bytes, self.stamp)
        numbering = self._line_number()
        yield from _packed_documents(self.path, chunks, self.text_field, skips, numbering, self.start == 0, piece_bytes)
        return skips.report()


@dataclass(frozen=True)
class CompressedJsonl:
    """A whole .jsonl.gz or .jsonl.zst file."""

    path: str
    codec: str
    compressed_size: int
    text_field: str = "text"
    skip_bad_records: bool = False
    stamp: FileStamp | None = field(default=None, compare=False)  # as TextRange's

    @property
    def size(self) -> int:
        return self.compressed_size

    def describe(self) -> str:
        return self.path

    def texts(self) -> Generator[str, None, SkipReport]:
        skips = _Skips(self.skip_bad_records)
        lines = _lines(_decompressed_blocks(self.path, self.codec, self.stamp))
        yield from _jsonl_documents(
            self.path, lines, self.text_field, skips, lambda index, offset: (index + 1, index + 1), True
        )
        return skips.report()

    def packed(self, piece_bytes: int | None = None) -> Generator[Packed, None, SkipReport]:
        skips = _Skips(self.skip_bad_records)
        piece_bytes = piece_bytes or PIECE_BYTES
        chunks = _line_chunks(_decompressed_blocks(self.path, self.codec, self.stamp))
        numbering = lambda index, offset: (index + 1, index + 1)  # noqa: E731 -- (as texts()'s)
        yield from _packed_documents(self.path, chunks, self.text_field, skips, numbering, True, piece_bytes)
        return skips.report()


def _pyarrow_parquet():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("pyarrow is not installed: pip install 'bpe_impls[formats]'") from None
    return pq


def open_parquet(path: str):
    pq = _pyarrow_parquet()
    import pyarrow as pa

    try:
        return pq.ParquetFile(path)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise CorpusError(f"{path}: not a readable Parquet file ({one_line(exc)})") from None


@dataclass(frozen=True)
class ParquetRowGroup:
    """One row group of a Parquet file: rows first_row .. first_row+num_rows-1 (from 0)."""

    path: str
    row_group: int
    first_row: int
    num_rows: int
    byte_size: int  # uncompressed, from the file's metadata
    text_field: str = "text"
    skip_bad_records: bool = False

    @property
    def size(self) -> int:
        return self.byte_size

    def describe(self) -> str:
        return f"{self.path} row group {self.row_group} (rows {self.first_row}-{self.first_row + self.num_rows - 1})"

    def _where(self, row: int) -> str:
        return f"{self.path}: row {row} (row group {self.row_group})"

    def _columns(self, skips: _Skips) -> Iterator[tuple[int, Any]]:
        """(first row, the text column) of each batch of the row group; errors name the unit."""
        import pyarrow as pa

        file = open_parquet(self.path)
        name = self.text_field
        columns = file.schema_arrow.names
        if name not in columns:
            # Every row lacks the field: one error (or one skip entry for all of them).
            shown = ", ".join(columns[:10]) + (", ..." if len(columns) > 10 else "")
            message = f"{self._where(self.first_row)}: no column {name!r} (columns: {shown})"
            skips.bad(self.path, self.first_row, message, self.num_rows)
            return
        row = self.first_row
        batches = file.iter_batches(
            batch_size=PARQUET_BATCH_ROWS, row_groups=[self.row_group], columns=[name], use_threads=False
        )
        try:
            for batch in batches:
                column = batch.column(0)
                yield row, column
                row += len(column)
        except (OSError, pa.ArrowException) as exc:
            raise CorpusError(f"{self.describe()}: cannot read ({one_line(exc)})") from None
        if row != self.first_row + self.num_rows:
            raise CorpusError(f"{self.describe()}: file changed while counting (read {row - self.first_row} rows)")

    def _column_texts(self, row: int, column: Any, skips: _Skips) -> Iterator[str]:
        name = self.text_field
        for value in column.to_pylist():
            if isinstance(value, str):
                yield value
            elif value is None:
                skips.bad(self.path, row, f"{self._where(row)}: column {name!r} is null, not a string")
            else:
                message = f"{self._where(row)}: column {name!r} has type {column.type}, not string"
                skips.bad(self.path, row, message)
            row += 1

    def texts(self) -> Generator[str, None, SkipReport]:
        skips = _Skips(self.skip_bad_records)
        for row, column in self._columns(skips):
            yield from self._column_texts(row, column, skips)
        return skips.report()

    def packed(self, piece_bytes: int | None = None) -> Generator[Packed, None, SkipReport]:
        """texts()'s documents (a batch of PARQUET_BATCH_ROWS at a time, whatever piece_bytes), each batch of strings with no null taken from Arrow's own buffers
        (its UTF-8 and offsets: no str per row); any other batch read as texts() reads it."""
        import pyarrow as pa

        skips = _Skips(self.skip_bad_records)
        for row, column in self._columns(skips):
            if column.null_count or not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
                yield _pack(self._column_texts(row, column, skips))
                continue
            strings = column.cast(pa.large_string())
            _, offsets_buffer, data_buffer = strings.buffers()
            offsets = array("q")
            offsets.frombytes(memoryview(offsets_buffer)[8 * strings.offset : 8 * (strings.offset + len(strings) + 1)])
            first, last = offsets[0], offsets[-1]
            data = memoryview(data_buffer)[first:last].tobytes() if data_buffer is not None else b""
            yield data, (array("q", [end - first for end in offsets]) if first else offsets).tobytes()
        return skips.report()
