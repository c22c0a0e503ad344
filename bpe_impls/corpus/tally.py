"""Tallying: counting one unit's pre-tokens, and adding up the counts of many.

A counter (`PretokenCounter`) takes texts holding no special token, or raw UTF-8 with the special
tokens to split on, and counts their pre-tokens as UTF-8 `bytes`; the compiled one (C, releases
the GIL while it scans) and `RegexCounter` (pure Python) are twins that tests prove equal.

The counting functions differ by what they take and what they give:
  * `count_text`: one string -> its pre-token Counter (the oracle the tests compare units with);
  * `tally_unit`: one unit of work -> a `Tally` (counts and skipped bad records), a fresh counter
    per call: what a worker process or a Dask task returns;
  * `add_unit_to_counter`: one unit of work -> added into a counter the caller holds, so many
    units (a thread's share) sum in one table.
`CountingBackend` is what both backends (corpus.local, corpus.dask_backend) are: a `tally` of
many units, and the `count` they share on top of it. `drop_rare` applies min_pretoken_count to
the global count.

`PackedCounts` is the compact form of word counts: one `bytes` (about 13 bytes plus the word per
distinct pre-token, against ~150 for a dict entry with its bytes and int objects) that the
compiled counter writes and merges, Dask workers ship, and the native trainer reads without a
Python object per word. It is a read-only Mapping, unpacked on first use, for everyone else.
"""

from __future__ import annotations

import struct
import warnings
from abc import ABC, abstractmethod
from array import array
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, Self

from ..base import compiled as compiled_core
from ..base.checks import one_line, validate_min_count
from ..base.errors import ConfigError, WorkerError
from ..base.patterns import GPT2, PRESETS, SplitPattern, iter_pretokens, split_on_special_tokens
from .units import SkipReport, Unit, Utf8Unit


class SkippedRecordsWarning(UserWarning):
    """Bad records were skipped (skip_bad_records=True); the message counts them and names the first."""


class PretokenCounter(Protocol):
    """Counts pre-tokens; the compiled core's `PretokenCounter` and `RegexCounter` implement it."""

    def add(self, text: str) -> None: ...
    def add_utf8(self, data: bytes, special_tokens: Sequence[bytes]) -> bool: ...
    def merge(self, other: Self, /, threads: int = 1) -> None: ...  # another counter of its own kind
    def to_dict(self) -> dict[bytes, int]: ...
    def to_packed(self, min_count: int = 1, threads: int = 1) -> bytes: ...
    def __len__(self) -> int: ...


class RegexCounter:
    """Counts pre-tokens of texts holding no special token with the split pattern's regex.

    The pure-Python twin of the compiled core's `PretokenCounter` (same methods, same counts), and
    the counter of every pattern the core has no scanner for.
    """

    def __init__(self, pattern: SplitPattern = GPT2) -> None:
        self._pattern = pattern
        self._counts: Counter[str] = Counter()

    def add(self, text: str) -> None:
        self._counts.update(iter_pretokens(text, self._pattern))

    def add_utf8(self, data: bytes, special_tokens: Sequence[bytes]) -> bool:
        """Count UTF-8 bytes split on special tokens; False (counting nothing) if not valid UTF-8."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        for piece in split_on_special_tokens(text, tuple(token.decode("utf-8") for token in special_tokens)):
            self.add(piece)
        return True

    def merge(self, other: RegexCounter, /, threads: int = 1) -> None:
        """Add other's counts: its new pre-tokens follow ours, in its order (`threads` is for the
        compiled counter's signature: one thread here)."""
        self._counts.update(other._counts)

    def to_dict(self) -> dict[bytes, int]:
        # Counted by str and encoded once per distinct pre-token, not once per occurrence.
        return {token.encode("utf-8"): n for token, n in self._counts.items()}

    def to_packed(self, min_count: int = 1, threads: int = 1) -> bytes:
        """The counts of at least min_count as packed word counts, in first-seen order (`threads`
        is for the compiled counter's signature: one thread here)."""
        return pack_counts({word: n for word, n in self.to_dict().items() if n >= min_count})

    def __len__(self) -> int:
        return len(self._counts)


# The packed layout (csrc/packed.h): "BPEW", uint32 version, uint64 n, then int64 counts[n],
# uint32 lengths[n] and the words back to back, in the machine's byte order.
_PACKED_HEADER = struct.Struct("=4sIQ")
_PACKED_MAGIC = b"BPEW"
_PACKED_VERSION = 1


def pack_counts(counts: Mapping[bytes, int]) -> bytes:
    """`counts` as packed word counts, in its iteration order (the pure-Python twin of the compiled
    counter's `to_packed`). A count outside 1 .. 2**63 - 1 is a ValueError naming the word."""
    words = list(counts)
    values = array("q")
    for word in words:
        count = counts[word]
        if not 0 < count < 2**63:
            raise ValueError(f"word {word!r} has count {count!r}; packed counts are 1 .. 2**63 - 1")
        values.append(count)
    lengths = array("I", map(len, words))
    return b"".join(
        [_PACKED_HEADER.pack(_PACKED_MAGIC, _PACKED_VERSION, len(words)), values.tobytes(), lengths.tobytes(), *words]
    )


def unpack_counts(data: bytes | bytearray | memoryview) -> dict[bytes, int]:
    """Packed word counts as a dict (the pure-Python twin of `add_packed` + `to_dict`); a malformed
    buffer is a ValueError saying what is wrong."""
    view = memoryview(data).cast("B")
    if len(view) < _PACKED_HEADER.size or bytes(view[:4]) != _PACKED_MAGIC:
        raise ValueError("not packed word counts (no BPEW header)")
    _, version, n = _PACKED_HEADER.unpack_from(view)
    if version != _PACKED_VERSION:
        raise ValueError(f"packed word counts of version {version}; this build reads version {_PACKED_VERSION}")
    start = _PACKED_HEADER.size
    if n > (len(view) - start) // 12:
        raise ValueError(f"packed word counts: {n} words do not fit in {len(view)} bytes")
    values, lengths = array("q"), array("I")
    values.frombytes(view[start : start + 8 * n])
    lengths.frombytes(view[start + 8 * n : start + 12 * n])
    at = start + 12 * n
    if at + sum(lengths) != len(view):
        raise ValueError(f"packed word counts: the words take {sum(lengths)} bytes, not {len(view) - at}")
    out: dict[bytes, int] = {}
    for index, (count, length) in enumerate(zip(values, lengths)):
        if count <= 0:
            raise ValueError(f"packed word counts: word {index} has count {count}; counts must be positive")
        word = bytes(view[at : at + length])
        out[word] = out.get(word, 0) + count
        at += length
    return out


class PackedCounts(Mapping[bytes, int]):
    """Word counts held as one packed `bytes` (see the module docstring).

    The native trainer reads `data` directly; as a Mapping (for the pure-Python trainers and any
    other caller) it is unpacked once, on first use. Pickles as `data` alone.
    """

    __slots__ = ("data", "_unpacked", "disposable")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._unpacked: dict[bytes, int] | None = None
        # Set by an owner that needs the counts no more once a trainer has them (train_bpe):
        # the native trainer may then take the bytes (hand_over) and free them once read.
        self.disposable = False

    def hand_over(self) -> list[bytes]:
        """The packed bytes in a one-item list, leaving this object empty (no words).

        For a reader that takes the item out once it has read it (the native trainer): the
        bytes, as large as the words, are then freed while it runs, if nothing else holds them.
        """
        holder = [self.data]
        self.data = pack_counts({})
        self._unpacked = None
        return holder

    def _dict(self) -> dict[bytes, int]:
        if self._unpacked is None:
            if compiled_core.AVAILABLE:
                counter = compiled_core.core().PretokenCounter()
                counter.add_packed(self.data)
                self._unpacked = counter.to_dict()
            else:
                self._unpacked = unpack_counts(self.data)
        return self._unpacked

    def __getitem__(self, word: bytes) -> int:
        return self._dict()[word]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._dict())

    def __len__(self) -> int:
        return _PACKED_HEADER.unpack_from(self.data)[2]

    def __reduce__(self):
        return (PackedCounts, (self.data,))

    def __repr__(self) -> str:
        return f"PackedCounts({len(self)} words, {len(self.data)} bytes)"


def merge_packed(parts: Sequence[PackedCounts], min_count: int = 1) -> PackedCounts:
    """The sum of packed word counts (in the compiled counter's table), keeping counts >= min_count."""
    counter = compiled_core.core().PretokenCounter()
    for part in parts:
        counter.add_packed(part.data)
    return PackedCounts(counter.to_packed(min_count))


def has_compiled_counter(pattern: SplitPattern) -> bool:
    """Whether the compiled core is there and has a scanner for `pattern` (the presets')."""
    return compiled_core.AVAILABLE and compiled_core.scanner_name(pattern) is not None


def pretoken_counter(compiled: bool | None = None, pattern: SplitPattern = GPT2) -> PretokenCounter:
    """A fresh counter: the compiled one where it scans the pattern (None: whenever it can), else
    RegexCounter.

    The compiled counter is many times faster and releases the GIL while it scans, so threads
    count in parallel; it is one counter per thread.
    """
    scanner = compiled_core.scanner_name(pattern)
    if compiled is None:
        compiled = has_compiled_counter(pattern)
    elif compiled and scanner is None:
        raise ConfigError(f"the compiled counter scans the presets ({', '.join(PRESETS)}) only, not {pattern.name!r}")
    if not compiled or scanner is None:  # (scanner is None only where compiled is False by then)
        return RegexCounter(pattern)
    return compiled_core.core().PretokenCounter(scanner)


def count_text(
    text: str, special_tokens: tuple[str, ...] = (), *, compiled: bool | None = None, pattern: SplitPattern = GPT2
) -> Counter[bytes]:
    """Count the pre-tokens of one string as UTF-8 bytes, after removing the special tokens
    (`compiled` picks the counter: None, the compiled one where it scans the pattern)."""
    counter = pretoken_counter(compiled, pattern)
    for piece in split_on_special_tokens(text, special_tokens):
        counter.add(piece)
    return Counter(counter.to_dict())


@dataclass
class Tally:
    """What counting a unit (or many) gives: pre-token counts and the bad records skipped.

    The counts are a Counter, or PackedCounts where the compiled counter made them (tally_unit's
    `packed`); adding a Counter tally to a packed one, or the reverse, unpacks."""

    counts: Counter[bytes] | PackedCounts = field(default_factory=Counter)
    skipped: SkipReport = field(default_factory=SkipReport)

    def add(self, other: Tally) -> None:
        if not isinstance(self.counts, Counter):
            self.counts = Counter(self.counts)
        self.counts.update(other.counts)
        self.skipped = self.skipped + other.skipped


def tally_unit(
    unit: Unit, special_tokens: tuple[str, ...], pattern: SplitPattern = GPT2, *, packed: bool = False
) -> Tally:
    """Count one unit's pre-tokens; each text it yields is a hard boundary, like a special token.

    packed=True: the counts are PackedCounts where the compiled counter scans the pattern (a
    Counter otherwise)."""
    counter = pretoken_counter(pattern=pattern)
    report = add_unit_to_counter(unit, special_tokens, counter)
    if packed and has_compiled_counter(pattern):
        return Tally(PackedCounts(counter.to_packed()), report)
    return Tally(Counter(counter.to_dict()), report)


class CountingBackend(ABC):
    """Where `tally_unit` runs (in-process, worker threads or processes, Dask tasks) is all a
    backend decides; `count` is the same for every backend.

    `tally` returns the sum of the units' Tallies. `min_count` > 1 drops pre-tokens rarer than that
    from the *global* count. `packed=True` lets the backend return PackedCounts (it does wherever
    the compiled counter scans the pattern).
    """

    @abstractmethod
    def tally(
        self,
        units: Sequence[Unit],
        special_tokens: tuple[str, ...],
        *,
        progress: bool = False,
        min_count: int = 1,
        pattern: SplitPattern = GPT2,
        packed: bool = False,
    ) -> Tally: ...

    def count(
        self,
        units: Sequence[Unit],
        special_tokens: tuple[str, ...],
        *,
        progress: bool = False,
        min_count: int = 1,
        pattern: SplitPattern = GPT2,
        packed: bool = False,
    ) -> Counter[bytes] | PackedCounts:
        """The summed pre-token counts (`tally`'s options); skipped bad records are reported as a
        SkippedRecordsWarning."""
        tally = self.tally(
            units, special_tokens, progress=progress, min_count=min_count, pattern=pattern, packed=packed
        )
        warn_skipped(tally.skipped)
        return tally.counts


def add_unit_to_counter(unit: Unit, special_tokens: tuple[str, ...], counter: PretokenCounter) -> SkipReport:
    """Add one unit's pre-tokens to `counter`; returns the unit's skipped bad records.

    One counter for all of a unit's texts (or many units'), turned into bytes keys once at the
    end: a JSONL unit yields one text per document, and encoding each document's pre-tokens
    separately costs more than scanning them.
    """
    if isinstance(unit, Utf8Unit):
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


def failed_unit_error(unit: Unit, exc: BaseException) -> WorkerError:
    """The one error for a unit whose counting failed on something that is not a BpeError (a bug,
    a MemoryError): it names the unit, in one line, wherever the unit ran."""
    return WorkerError(one_line(f"counting {unit.describe()} failed: {type(exc).__name__}: {exc}"))


def warn_skipped(report: SkipReport, stacklevel: int = 2) -> None:
    """Report skipped records at the end of a count (the CLI prints the warning as one line)."""
    if report:
        warnings.warn(SkippedRecordsWarning(report.summary()), stacklevel=stacklevel + 1)


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
