"""Corpus inputs: files, globs and directories of text, JSON Lines and Parquet shards, as units of work.

    paths = resolve_inputs(["shards/", "extra/*.jsonl.zst"])          # sorted, deduplicated
    units = plan_inputs(paths, ("<|endoftext|>",), num_workers=8, text_field="text")
    tally = tally_unit(units[0], ("<|endoftext|>",))                   # Tally(counts, skipped)

Formats are chosen by suffix:
  * plain text: `.txt` (and, when a file is named explicitly, any suffix not listed below), cut into
    byte ranges at safe cuts by `counting.plan_units`, exactly as a single corpus file always was;
  * compressed text: `.txt.gz`, `.txt.zst` (any explicitly named `X.gz` / `X.zst` that is not JSON
    Lines): one unit per file, since a compressed stream cannot be entered in the middle. It is
    decompressed as a stream and handed on in pieces of about PIECE_BYTES, each ending at a safe
    cut found with the same cut finder as byte ranges, so a worker holds about one piece of
    decompressed text, not the whole file (except across a stretch with no safe cut at all);
  * JSON Lines: `.jsonl`, `.jsonl.gz`, `.jsonl.zst`: one document per line, the string field
    `text_field` of a JSON object. An uncompressed file is cut into ranges of whole lines (a raw
    newline cannot occur inside a JSON string); a compressed one is one unit;
  * Parquet: `.parquet`: one unit per row group, read with pyarrow one batch at a time and only the
    `text_field` column, never the whole file.
Each JSON record or Parquet row is one document, and documents are hard boundaries exactly like a
special token: no pre-token spans two of them.

A bad record (a line that is not JSON, not an object, without the field, a field that is not a
string, a null, invalid UTF-8, a lone surrogate) raises a one-line CorpusError naming the file and
the line (numbered from 1, as editors do) or the row (numbered from 0, as pyarrow and pandas do).
With `skip_bad_records=True` it is counted instead: a unit's `texts()` generator *returns* a
SkipReport (its StopIteration value), `tally_unit` captures it, and backends add the reports up
with the counts, so skipped records are reported at the end and never silently dropped. Units that
never skip (`counting.TextRange`) return None, which means "nothing skipped".

Paths in units are absolute, so the workers of a cluster find the same files (they must see the
same file system: NFS, a shared volume, or a copy at the same path).
"""

from __future__ import annotations

import codecs
import glob
import gzip
import json
import math
import os
import re
import warnings
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .counting import UNIT_BYTES, UNITS_PER_WORKER, TextRange, decode_utf8, plan_units, read_range, resolve_workers
from .errors import ConfigError, CorpusError
from .pretokenize import (
    CutFinder,
    find_chunk_boundaries,
    PretokenCounter,
    pretoken_counter,
    split_on_special_tokens,
    validate_special_tokens,
)

PathInput = str | os.PathLike
Inputs = PathInput | Sequence[PathInput]

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

_CODECS = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd"}
# Suffixes that look like data but that we do not read; a clear error beats counting bytes as text.
_UNSUPPORTED = {
    ".bz2", ".xz", ".lzma", ".lz4", ".br", ".zip", ".tar", ".tgz", ".7z",
    ".json", ".arrow", ".feather", ".orc", ".avro", ".npy", ".npz", ".pkl", ".pickle",
}
SUPPORTED = ".txt, .jsonl (each optionally .gz or .zst) and .parquet"


class SkippedRecordsWarning(UserWarning):
    """Bad records were skipped (skip_bad_records=True); the message counts them and names the first."""


# --- which files --------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputFormat:
    kind: str  # "text", "jsonl" or "parquet"
    codec: str | None  # None, "gzip" or "zstd"


def input_format(path: PathInput, *, strict: bool = False) -> InputFormat:
    """The format of a corpus file from its name.

    strict (files found in a directory or by a glob): only the documented suffixes. Otherwise (a
    file named explicitly) any other suffix is plain text, as `bpe train corpus.en` always was.
    """
    name = os.fspath(path)
    lower = os.path.basename(name).lower()
    stem, suffix = os.path.splitext(lower)
    codec = _CODECS.get(suffix)
    inner = os.path.splitext(stem)[1] if codec else suffix
    if inner == ".parquet" and codec is None:
        return InputFormat("parquet", None)
    if inner == ".jsonl":
        return InputFormat("jsonl", codec)
    if inner == ".txt" or (not strict and inner not in _UNSUPPORTED and inner != ".parquet"):
        return InputFormat("text", codec)
    if inner == ".parquet":
        raise CorpusError(f"{name}: Parquet compresses internally; give the .parquet file itself")
    if inner == ".json":
        raise CorpusError(f"{name}: a .json file is not read; JSON Lines (one object per line) must end in .jsonl")
    raise CorpusError(f"{name}: unsupported file type; expected {SUPPORTED}")


def _hidden(name: str) -> bool:
    # Dot files (.DS_Store) and underscore files (_SUCCESS, _metadata) sit beside many data sets.
    return name.startswith((".", "_"))


def _walk_error(error: OSError) -> None:
    # os.walk skips an unreadable directory by default: its shards would go uncounted, silently.
    raise CorpusError(f"{error.filename}: cannot read directory: {error.strerror or error}")


def _walk(directory: Path) -> list[Path]:
    found = []
    seen: set[str] = set()
    # Following symlinks, since data directories are often links to where the shards live; each
    # real directory once, so a link cycle ends.
    for root, dirs, files in os.walk(directory, onerror=_walk_error, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if not _hidden(d))
        for name in sorted(files):
            if not _hidden(name):
                path = Path(root, name)
                input_format(path, strict=True)  # an unknown file in a data directory is an error
                found.append(path)
    if not found:
        raise CorpusError(f"{directory}: is a directory with no corpus files in it (expected {SUPPORTED})")
    return found


_GLOB_MAGIC = re.compile(r"[*?[]")


def resolve_inputs(inputs: Inputs) -> list[Path]:
    """The corpus files named by a path, a glob, a directory, or a list of them.

    Directories are searched recursively, skipping names that start with "." or "_"; a file found
    there or by a glob must have one of the supported suffixes. Returns absolute paths, sorted and
    without duplicates (a file named twice is counted once).
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    if isinstance(inputs, (bytes, bytearray)) or not isinstance(inputs, Sequence):
        raise ConfigError(f"inputs must be a path, a glob, a directory or a list of them, not {type(inputs).__name__}")
    if not inputs:
        raise ConfigError("no input files given")
    found: dict[str, Path] = {}

    def add(path: Path) -> None:
        found.setdefault(os.path.realpath(path), Path(os.path.abspath(path)))

    for item in inputs:
        if not isinstance(item, (str, os.PathLike)):
            raise ConfigError(f"an input path must be a str or os.PathLike, not {type(item).__name__}")
        path = Path(item)
        text = os.fspath(item)
        if path.is_dir():
            for file in _walk(path):
                add(file)
        elif path.is_file():
            input_format(path)
            add(path)
        elif path.exists():
            raise CorpusError(f"{text}: not a regular file or directory")
        elif _GLOB_MAGIC.search(text):
            matches = sorted(glob.glob(text, recursive=True))
            if not matches:
                raise CorpusError(f"{text}: no file matches this pattern")
            for match in map(Path, matches):
                if match.is_dir():
                    for file in _walk(match):
                        add(file)
                else:
                    input_format(match, strict=True)
                    add(match)
        else:
            raise CorpusError(f"{text}: no such file or directory")
    return sorted(found.values())


# --- skipped records and tallies ----------------------------------------------------------------


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


@dataclass
class Tally:
    """What counting a unit (or many) gives: pre-token counts and the bad records skipped."""

    counts: Counter[bytes] = field(default_factory=Counter)
    skipped: SkipReport = field(default_factory=SkipReport)

    def add(self, other: Tally) -> None:
        self.counts.update(other.counts)
        self.skipped = self.skipped + other.skipped


def tally_unit(unit: Any, special_tokens: tuple[str, ...]) -> Tally:
    """Count one unit's pre-tokens; each text it yields is a hard boundary, like a special token."""
    counter = pretoken_counter()
    report = count_unit_into(unit, special_tokens, counter)
    return Tally(Counter(counter.to_dict()), report)


def count_unit_into(unit: Any, special_tokens: tuple[str, ...], counter: PretokenCounter) -> SkipReport:
    """Add one unit's pre-tokens to `counter`; returns the unit's skipped bad records.

    One counter for all of a unit's texts (or many units'), turned into bytes keys once at the
    end: a JSONL unit yields one text per document, and encoding every document's tokens
    separately would cost more than the regex (measured: ~60% slower in pure Python).
    """
    if hasattr(unit, "utf8_pieces"):
        # Plain text: the counter takes the bytes as they are (the compiled one never builds a str).
        encoded = [token.encode("utf-8") for token in special_tokens]
        for offset, data in unit.utf8_pieces():
            if not counter.add_utf8(data, encoded):
                unit.decode(offset, data)  # not UTF-8: raises the CorpusError naming the byte
                raise AssertionError("unreachable: the counter rejected valid UTF-8")
        return SkipReport()
    texts = iter(unit.texts())
    while True:
        try:
            text = next(texts)
        except StopIteration as stop:
            report = stop.value
            break
        for piece in split_on_special_tokens(text, special_tokens):
            counter.add(piece)
    return report if isinstance(report, SkipReport) else SkipReport()


def warn_skipped(report: SkipReport, stacklevel: int = 2) -> None:
    """Report skipped records at the end of a count (the CLI prints the warning as one line)."""
    if report:
        warnings.warn(SkippedRecordsWarning(report.summary()), stacklevel=stacklevel + 1)


def validate_min_count(min_count: int) -> int:
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise ConfigError(f"min_pretoken_count must be a positive integer, got {min_count!r}")
    return min_count


def drop_rare(counts: Counter[bytes], min_count: int) -> Counter[bytes]:
    """Remove pre-tokens counted fewer than `min_count` times, in place; returns `counts`.

    Applied to the global count only (a pre-token rare in every shard may be frequent overall).
    It changes the result, as HuggingFace's min_frequency does: merges are then learned from the
    frequent pre-tokens only. min_count=1 keeps everything (exact). In place, because a copy of the
    survivors would double the driver's peak; the list of rare keys holds references only.
    """
    validate_min_count(min_count)
    if min_count > 1:
        for token in [token for token, n in counts.items() if n < min_count]:
            del counts[token]
    return counts


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


def _decompressed_blocks(path: str, codec: str) -> Iterator[bytes]:
    """The decompressed bytes of a .gz or .zst file in blocks; errors name the file."""
    zstd_error: type[BaseException] = EOFError
    if codec == "zstd":
        zstd_error = _zstandard().ZstdError
    try:
        with open(path, "rb") as file:
            if codec == "gzip":
                with gzip.GzipFile(fileobj=file) as stream:  # reads every gzip member
                    while block := stream.read(PIECE_BYTES):
                        yield block
            else:
                yield from _zstd_blocks(file)
    except (EOFError, zlib.error, gzip.BadGzipFile, zstd_error) as exc:
        name = "gzip" if codec == "gzip" else "zstd"
        raise CorpusError(f"{path}: corrupt or truncated {name} data ({exc})") from None
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _cut_pieces(blocks: Iterable[bytes], special_tokens: tuple[str, ...], target: int) -> Iterator[tuple[int, bytes]]:
    """Regroup a byte stream into (offset, piece) pieces, each ending at a safe cut after `target` bytes.

    Uses the byte-range cut finder (pretokenize.CutFinder, whose comments prove each cut safe) on a
    sliding buffer: a cut is only looked for where the buffer holds the finder's context on both
    sides, the same context it reads around a file position, so a piece boundary here is exactly a
    boundary plan_units could have chosen and cannot change any count.
    """
    encoded = [token.encode("utf-8") for token in special_tokens]
    finder = CutFinder(encoded, encoded, prose=True)
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
            cut = finder.first_cut_in(bytes(buf[left:hi + 2 * margin]), margin, hi - scan)
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


# --- units of work ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompressedText:
    """A whole .gz or .zst text file (one unit: a compressed stream cannot be entered midway)."""

    path: str
    codec: str
    special_tokens: tuple[str, ...]  # where the stream may be cut into pieces
    compressed_size: int

    @property
    def size(self) -> int:
        return self.compressed_size

    def describe(self) -> str:
        return self.path

    def utf8_pieces(self) -> Iterator[tuple[int, bytes]]:
        """(decompressed offset, bytes) of pieces cut at safe cuts, so each counts independently."""
        return _cut_pieces(_decompressed_blocks(self.path, self.codec), self.special_tokens, PIECE_BYTES)

    def decode(self, offset: int, data: bytes) -> str:
        return decode_utf8(self.path, offset, data, "decompressed byte offset")

    def texts(self) -> Iterator[str]:
        for offset, data in self.utf8_pieces():
            yield self.decode(offset, data)


_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number",
               bool: "a boolean", type(None): "null"}
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
            line = line[len(_BOM):]
        if not line.strip():  # a blank line holds no record, so nothing is dropped
            continue
        try:
            yield _document(line, text_field)
        except ValueError as exc:
            number, position = line_number(index, start)
            skips.bad(path, position, f"{path}: line {number}: {exc}")


@dataclass(frozen=True)
class JsonlRange:
    """Bytes [start, end) of an uncompressed JSON Lines file; both at the start of a line."""

    path: str
    start: int
    end: int
    text_field: str = "text"
    skip_bad_records: bool = False

    @property
    def size(self) -> int:
        return self.end - self.start

    def describe(self) -> str:
        return f"{self.path} bytes {self.start}-{self.end}"

    def _blocks(self) -> Iterator[bytes]:
        return read_range(self.path, self.start, self.size, self.describe(), PIECE_BYTES)

    def _first_line(self) -> int:
        """The number of the range's first line: 1 + the newlines before it (read only on a bad record)."""
        newlines = 0
        try:
            with open(self.path, "rb") as file:
                left = self.start
                while left:
                    block = file.read(min(PIECE_BYTES, left))
                    if not block:
                        break
                    newlines += block.count(b"\n")
                    left -= len(block)
        except OSError as exc:
            raise CorpusError(f"{self.describe()}: cannot read: {exc.strerror or exc}") from None
        return newlines + 1

    def texts(self) -> Iterator[str]:
        skips = _Skips(self.skip_bad_records)
        first: list[int] = []

        def line_number(index: int, offset: int) -> tuple[int, int]:
            if not first:
                first.append(self._first_line())
            return first[0] + index, self.start + offset  # byte offset orders records within a file

        yield from _jsonl_documents(
            self.path, _lines(self._blocks()), self.text_field, skips, line_number, self.start == 0
        )
        return skips.report()


@dataclass(frozen=True)
class CompressedJsonl:
    """A whole .jsonl.gz or .jsonl.zst file."""

    path: str
    codec: str
    compressed_size: int
    text_field: str = "text"
    skip_bad_records: bool = False

    @property
    def size(self) -> int:
        return self.compressed_size

    def describe(self) -> str:
        return self.path

    def texts(self) -> Iterator[str]:
        skips = _Skips(self.skip_bad_records)
        lines = _lines(_decompressed_blocks(self.path, self.codec))
        yield from _jsonl_documents(
            self.path, lines, self.text_field, skips, lambda index, offset: (index + 1, index + 1), True
        )
        return skips.report()


def _pyarrow_parquet():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("pyarrow is not installed: pip install 'bpe_impls[formats]'") from None
    return pq


def _open_parquet(path: str):
    pq = _pyarrow_parquet()
    import pyarrow as pa

    try:
        return pq.ParquetFile(path)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise CorpusError(f"{path}: not a readable Parquet file ({' '.join(str(exc).split())})") from None


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

    def texts(self) -> Iterator[str]:
        import pyarrow as pa

        skips = _Skips(self.skip_bad_records)
        file = _open_parquet(self.path)
        name = self.text_field
        columns = file.schema_arrow.names
        if name not in columns:
            # Every row lacks the field: one error (or one skip entry for all of them).
            shown = ", ".join(columns[:10]) + (", ..." if len(columns) > 10 else "")
            message = f"{self._where(self.first_row)}: no column {name!r} (columns: {shown})"
            skips.bad(self.path, self.first_row, message, self.num_rows)
            return skips.report()
        row = self.first_row
        batches = file.iter_batches(
            batch_size=PARQUET_BATCH_ROWS, row_groups=[self.row_group], columns=[name], use_threads=False
        )
        try:
            for batch in batches:
                column = batch.column(0)
                for value in column.to_pylist():
                    if isinstance(value, str):
                        yield value
                    elif value is None:
                        skips.bad(self.path, row, f"{self._where(row)}: column {name!r} is null, not a string")
                    else:
                        message = f"{self._where(row)}: column {name!r} has type {column.type}, not string"
                        skips.bad(self.path, row, message)
                    row += 1
        except (OSError, pa.ArrowException) as exc:
            raise CorpusError(f"{self.describe()}: cannot read ({' '.join(str(exc).split())})") from None
        if row != self.first_row + self.num_rows:
            raise CorpusError(f"{self.describe()}: file changed while counting (read {row - self.first_row} rows)")
        return skips.report()


Unit = TextRange | CompressedText | JsonlRange | CompressedJsonl | ParquetRowGroup


# --- planning -----------------------------------------------------------------------------------


def _ranges_wanted(size: int, workers: int) -> int:
    """How many ranges to cut a splittable file into: the rule plan_units applies to one file."""
    wanted = math.ceil(size / UNIT_BYTES)
    if workers > 1:
        wanted = max(wanted, workers * UNITS_PER_WORKER)
    return max(1, wanted)


def _plan_jsonl(path: str, size: int, workers: int, text_field: str, skip: bool) -> list[JsonlRange]:
    try:
        with open(path, "rb") as file:
            bounds = find_chunk_boundaries(file, _ranges_wanted(size, workers), b"\n")
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return [JsonlRange(path, a, b, text_field, skip) for a, b in zip(bounds, bounds[1:])]


def _plan_parquet(path: str, text_field: str, skip: bool) -> list[ParquetRowGroup]:
    metadata = _open_parquet(path).metadata
    units = []
    first = 0
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        units.append(ParquetRowGroup(path, index, first, group.num_rows, group.total_byte_size, text_field, skip))
        first += group.num_rows
    return units


def plan_inputs(
    inputs: Inputs,
    special_tokens: Iterable[str] | None,
    num_workers: int | None = None,
    *,
    text_field: str = "text",
    skip_bad_records: bool = False,
) -> list[Unit]:
    """Units of work for every corpus file the inputs name (see the module docstring for formats).

    Splittable files (plain text, plain JSON Lines) get a share of the `num_workers * 4` ranges a
    single file would get, in proportion to their size, so one big file among small shards is
    still spread over every worker, and a lone file is planned exactly as `plan_units` plans it.
    """
    specials = validate_special_tokens(special_tokens)
    if not isinstance(text_field, str) or not text_field:
        raise ConfigError(f"text_field must be a non-empty string, got {text_field!r}")
    workers = resolve_workers(num_workers)
    paths = resolve_inputs(inputs)
    sizes = []
    for path in paths:
        try:
            sizes.append(path.stat().st_size)
        except OSError as exc:
            raise CorpusError(f"{path}: cannot read: {exc.strerror or exc}") from None
    total = sum(sizes) or 1
    units: list[Unit] = []
    for path, size in zip(paths, sizes):
        name = os.fspath(path)
        fmt = input_format(path)
        share = max(1, round(workers * size / total))
        if fmt.kind == "parquet":
            units += _plan_parquet(name, text_field, skip_bad_records)
        elif fmt.kind == "jsonl" and fmt.codec:
            units.append(CompressedJsonl(name, fmt.codec, size, text_field, skip_bad_records))
        elif fmt.kind == "jsonl":
            units += _plan_jsonl(name, size, share, text_field, skip_bad_records)
        elif fmt.codec:
            units.append(CompressedText(name, fmt.codec, specials, size))
        else:
            units += plan_units(name, specials, share)
    return units
