"""Planning: turning the corpus inputs into units of work, without reading their text.

Only the few blocks around each cut are read. A plain text file becomes byte ranges ending at safe
cuts (`plan_units`), enough for every worker and none much over UNIT_BYTES; `plan_inputs` does the
same for many files and the other formats (see corpus.units for what each unit is).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable

from ..base.checks import resolve_workers
from ..base.errors import ConfigError, CorpusError, unreadable
from ..base.patterns import GPT2, SplitPattern, validate_special_tokens
from .cuts import find_chunk_boundaries, safe_cuts
from .inputs import Inputs, input_format, resolve_inputs
from .units import (
    CompressedJsonl,
    CompressedText,
    FileStamp,
    JsonlRange,
    ParquetRowGroup,
    TextRange,
    Unit,
    open_parquet,
)

# A unit is read whole by one worker, so its size bounds a worker's memory (bytes + decoded text
# + pieces, a few times this); it also bounds how long one straggler can hold up the others.
UNIT_BYTES = 8 << 20
# Several units per worker so a slow unit does not leave the other cores idle at the end.
UNITS_PER_WORKER = 4


def _open_corpus(path: str | os.PathLike):
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise CorpusError(f"{os.fspath(path)}: no such file") from None
    except IsADirectoryError:
        raise CorpusError(f"{os.fspath(path)}: is a directory, not a corpus file") from None
    except OSError as exc:
        raise unreadable(os.fspath(path), exc) from None


def plan_units(
    path: str | os.PathLike,
    special_tokens: tuple[str, ...],
    num_workers: int | None = None,
    pattern: SplitPattern = GPT2,
) -> list[TextRange]:
    """Cut a text file into units at safe cuts: enough for every worker, none much over UNIT_BYTES.

    Where a stretch of the file has no safe cut (e.g. megabytes of emoji), the unit around it is
    as long as the stretch: correctness first, so such a file gets fewer, larger units.
    """
    workers = resolve_workers(num_workers)
    with _open_corpus(path) as file:
        stamp = FileStamp.of(file.fileno())
        bounds = safe_cuts(file, _ranges_wanted(stamp.size, workers), special_tokens, pattern)
    name = os.fspath(path)
    return [TextRange(name, a, b, stamp) for a, b in zip(bounds, bounds[1:])] or [TextRange(name, 0, 0, stamp)]


def _ranges_wanted(size: int, workers: int) -> int:
    """How many ranges to cut a splittable file (plain text, plain JSON Lines) into."""
    wanted = math.ceil(size / UNIT_BYTES)
    if workers > 1:
        wanted = max(wanted, workers * UNITS_PER_WORKER)
    # No more ranges than bytes (more would only repeat cuts): the cut search steps through every
    # range wanted, so a huge worker count (num_workers=2**62) would not end.
    return max(1, min(wanted, size))


def _plan_jsonl(path: str, size: int, workers: int, text_field: str, skip: bool) -> list[JsonlRange]:
    try:
        with open(path, "rb") as file:
            stamp = FileStamp.of(file.fileno())
            bounds = find_chunk_boundaries(file, _ranges_wanted(stamp.size, workers), b"\n")
    except OSError as exc:
        raise unreadable(path, exc) from None
    return [JsonlRange(path, a, b, text_field, skip, stamp) for a, b in zip(bounds, bounds[1:])]


def _plan_parquet(path: str, text_field: str, skip: bool) -> list[ParquetRowGroup]:
    metadata = open_parquet(path).metadata
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
    pattern: SplitPattern = GPT2,
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
    stamps = []
    for path in paths:
        try:
            stamps.append(FileStamp.of_stat(path.stat()))
        except OSError as exc:
            raise unreadable(path, exc) from None
    total = sum(stamp.size for stamp in stamps) or 1
    units: list[Unit] = []
    for path, stamp in zip(paths, stamps):
        size = stamp.size
        name = os.fspath(path)
        fmt = input_format(path)
        share = max(1, round(workers * size / total))
        if fmt.kind == "parquet":
            units += _plan_parquet(name, text_field, skip_bad_records)
        elif fmt.kind == "jsonl" and fmt.codec:
            units.append(CompressedJsonl(name, fmt.codec, size, text_field, skip_bad_records, stamp))
        elif fmt.kind == "jsonl":
            units += _plan_jsonl(name, size, share, text_field, skip_bad_records)
        elif fmt.codec:
            units.append(CompressedText(name, fmt.codec, specials, size, pattern, stamp))
        else:
            units += plan_units(name, specials, share, pattern)
    return units
