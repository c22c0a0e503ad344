"""Tallying: counting one unit's pre-tokens, and adding up the counts of many.

A counter (`PretokenCounter`) takes texts holding no special token, or raw UTF-8 with the special
tokens to split on, and counts their pre-tokens as UTF-8 `bytes`; the compiled one (C, releases
the GIL while it scans) and `RegexCounter` (pure Python) are twins that tests prove equal.
`tally_unit` counts one unit of work into a `Tally` (counts and skipped bad records), which the
backends add up; `drop_rare` applies min_pretoken_count to the global count.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

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
    def merge(self, other: PretokenCounter) -> None: ...
    def to_dict(self) -> dict[bytes, int]: ...
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

    def merge(self, other: RegexCounter) -> None:
        self._counts.update(other._counts)

    def to_dict(self) -> dict[bytes, int]:
        # Counted by str and encoded once per distinct pre-token, not once per occurrence.
        return {token.encode("utf-8"): n for token, n in self._counts.items()}

    def __len__(self) -> int:
        return len(self._counts)


def has_compiled_counter(pattern: SplitPattern) -> bool:
    """Whether the compiled core is there and has a scanner for `pattern` (the presets')."""
    return compiled_core.AVAILABLE and compiled_core.scanner_name(pattern) is not None


def pretoken_counter(compiled: bool | None = None, pattern: SplitPattern = GPT2) -> PretokenCounter:
    """A fresh counter: the compiled one where it scans the pattern (None: whenever it can), else
    RegexCounter.

    The compiled counter is many times faster and releases the GIL while it scans, so threads
    count in parallel; it is one counter per thread.
    """
    if compiled is None:
        compiled = has_compiled_counter(pattern)
    elif compiled and compiled_core.scanner_name(pattern) is None:
        raise ConfigError(
            f"the compiled counter scans the presets ({', '.join(PRESETS)}) only, not {pattern.name!r}"
        )
    if not compiled:
        return RegexCounter(pattern)
    return compiled_core.core().PretokenCounter(compiled_core.scanner_name(pattern))


def count_text(
    text: str, special_tokens: tuple[str, ...] = (), *, compiled: bool | None = None, pattern: SplitPattern = GPT2
) -> Counter[bytes]:
    """Count the pre-tokens of `text` as UTF-8 bytes, after removing the special tokens."""
    counter = pretoken_counter(compiled, pattern)
    for piece in split_on_special_tokens(text, special_tokens):
        counter.add(piece)
    return Counter(counter.to_dict())


def count_unit(unit: Unit, special_tokens: tuple[str, ...], pattern: SplitPattern = GPT2) -> Counter[bytes]:
    """Count one unit's pre-tokens; each text it yields is a hard boundary, like a special token."""
    return tally_unit(unit, special_tokens, pattern).counts


@dataclass
class Tally:
    """What counting a unit (or many) gives: pre-token counts and the bad records skipped."""

    counts: Counter[bytes] = field(default_factory=Counter)
    skipped: SkipReport = field(default_factory=SkipReport)

    def add(self, other: Tally) -> None:
        self.counts.update(other.counts)
        self.skipped = self.skipped + other.skipped


def tally_unit(unit: Unit, special_tokens: tuple[str, ...], pattern: SplitPattern = GPT2) -> Tally:
    """Count one unit's pre-tokens; each text it yields is a hard boundary, like a special token."""
    counter = pretoken_counter(pattern=pattern)
    report = count_unit_into(unit, special_tokens, counter)
    return Tally(Counter(counter.to_dict()), report)


def count_unit_into(unit: Unit, special_tokens: tuple[str, ...], counter: PretokenCounter) -> SkipReport:
    """Add one unit's pre-tokens to `counter`; returns the unit's skipped bad records.

    One counter for all of a unit's texts (or many units'), turned into bytes keys once at the
    end: a JSONL unit yields one text per document, and encoding every document's tokens
    separately would cost more than the regex (measured: ~60% slower in pure Python).
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

