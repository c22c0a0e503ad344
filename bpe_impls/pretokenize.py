"""Pre-tokenization shared by every trainer and encoder.

The text is first split on the special tokens (escaped, longest first, so they never take part in
a merge and no pair crosses one); each piece between them is cut into pre-tokens by the GPT-2
pattern. Training counts those pre-tokens as UTF-8 `bytes`; that Counter is the one thing every
trainer takes in.

A large file is counted as a map-reduce over byte ranges. A range may only end at a *safe cut*: a
position where cutting the text cannot change any special-token match or any pre-token, so the
counts are identical for every number of chunks. The cuts used (each proven in its comment in
`CutFinder`) are: just after a special token that no other special-token occurrence overlaps; and,
in prose, between an ASCII letter and ASCII punctuation, or after a lone "\\n" between two printable
ASCII characters. Where no safe cut exists near a planned boundary, there are simply fewer chunks.
"""

from __future__ import annotations

import bisect
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import BinaryIO, Protocol

import regex

from . import native
from .errors import ConfigError

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT2_REGEX = regex.compile(GPT2_PATTERN)


def validate_special_tokens(special_tokens: Iterable[str] | None) -> tuple[str, ...]:
    """Return the special tokens as a tuple, rejecting empty, duplicate or non-string ones."""
    if special_tokens is None:
        return ()
    if isinstance(special_tokens, (str, bytes)):
        raise ConfigError(f"special_tokens must be a list of strings, not a single {type(special_tokens).__name__}")
    tokens = tuple(special_tokens)
    seen: set[str] = set()
    for index, token in enumerate(tokens):
        if not isinstance(token, str):
            raise ConfigError(f"special token #{index} is {type(token).__name__} {token!r}, not str")
        if not token:
            raise ConfigError(f"special token #{index} is empty")
        if token in seen:
            raise ConfigError(f"special token {token!r} is given twice")
        seen.add(token)
    return tokens


@lru_cache(maxsize=64)
def special_token_regex(special_tokens: tuple[str, ...]) -> regex.Pattern | None:
    """A regex matching any special token, longest alternative first (None when there are none).

    Longest first makes `<|endoftext|><|endoftext|>` one match when both it and `<|endoftext|>`
    are special, instead of two matches of the shorter one.
    """
    if not special_tokens:
        return None
    ordered = sorted(special_tokens, key=len, reverse=True)
    return regex.compile("|".join(regex.escape(token) for token in ordered))


def split_on_special_tokens(text: str, special_tokens: tuple[str, ...]) -> list[str]:
    """The pieces of `text` between special tokens (the special tokens themselves dropped)."""
    pattern = special_token_regex(special_tokens)
    return [text] if pattern is None else pattern.split(text)


def iter_pretokens(text: str) -> Iterator[str]:
    """GPT-2 pre-tokens of a text that contains no special token, lazily (finditer, not findall)."""
    for match in GPT2_REGEX.finditer(text):
        yield match.group()


class RegexCounter:
    """Counts pre-tokens of texts holding no special token: GPT2_REGEX, in pure Python.

    The pure-Python twin of the compiled core's `PretokenCounter` (same methods, same counts).
    """

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()

    def add(self, text: str) -> None:
        self._counts.update(iter_pretokens(text))

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


def pretoken_counter(compiled: bool | None = None) -> PretokenCounter:
    """A fresh counter: the compiled one where it was built (None: whenever available), else RegexCounter.

    The compiled counter is many times faster and releases the GIL while it scans, so threads
    count in parallel; it is one counter per thread.
    """
    if compiled is None:
        compiled = native.AVAILABLE
    return native.core().PretokenCounter() if compiled else RegexCounter()


class PretokenCounter(Protocol):
    def add(self, text: str) -> None: ...
    def add_utf8(self, data: bytes, special_tokens: Sequence[bytes]) -> bool: ...
    def merge(self, other: PretokenCounter) -> None: ...
    def to_dict(self) -> dict[bytes, int]: ...
    def __len__(self) -> int: ...


def count_text(text: str, special_tokens: tuple[str, ...] = (), *, compiled: bool | None = None) -> Counter[bytes]:
    """Count the pre-tokens of `text` as UTF-8 bytes, after removing the special tokens."""
    counter = pretoken_counter(compiled)
    for piece in split_on_special_tokens(text, special_tokens):
        counter.add(piece)
    return Counter(counter.to_dict())


# --- safe cuts -------------------------------------------------------------------------------

# Zero-width positions where a cut cannot change the GPT-2 pre-tokens (both sides ASCII, so a cut
# never lands inside a UTF-8 character):
#  * ASCII letter | ASCII punctuation: the letter ends a ` ?\p{L}+` or contraction token (neither
#    can include punctuation) and no alternative lets punctuation join a token to its left, so a
#    token boundary is there in the whole text and both halves scan identically up to/from it.
#  * printable | "\n" | printable: the lone newline is a token of its own both when followed by a
#    printable character (`\s+`) and when it ends a chunk (`\s+(?!\S)`); a longer whitespace run
#    would not be (at the end of a chunk `\s+(?!\S)` would take the whole run).
_PROSE_CUT = regex.compile(rb"(?<=[A-Za-z])(?=[!-/:-@\[-`{-~])|(?<=[!-~]\n)(?=[!-~])")
_BLOCK = 1 << 16


class CutFinder:
    """Finds safe cuts: in a file, reading it in small blocks (`next_cut`), or in a buffer that
    has `margin` bytes of context on each side of the stretch searched (`first_cut_in`)."""

    def __init__(self, special_tokens: Sequence[bytes], cut_after: Sequence[bytes], prose: bool):
        specials = sorted(set(special_tokens) | set(cut_after), key=len, reverse=True)
        # Context kept around each block: the longest special token, and at least the two bytes
        # the prose cuts look at on either side.
        self.margin = max([2, *(len(token) for token in specials)])
        self._specials = regex.compile(b"|".join(regex.escape(t) for t in specials)) if specials else None
        self._cut_after = frozenset(cut_after)
        self._prose = prose

    def next_cut(self, file: BinaryIO, position: int, size: int) -> int | None:
        """The smallest safe cut p with position <= p < size (None if there is none)."""
        margin = self.margin
        start = position
        while start < size:
            read_from = max(0, start - margin)
            file.seek(read_from)
            buf = file.read(start + _BLOCK + 2 * margin - read_from)
            cut = self.first_cut_in(buf, start - read_from, min(_BLOCK, size - start))
            if cut is not None:
                return read_from + cut
            start += _BLOCK
        return None

    def first_cut_in(self, buf: bytes, lo: int, length: int) -> int | None:
        """The first safe cut in buf[lo : lo+length]; buf has `margin` bytes of context each side."""
        hi = lo + length
        # Every special-token occurrence, one per start position (longest first); overlapped=True
        # also finds occurrences hidden inside another, which the checks below must see.
        spans = [m.span() for m in self._specials.finditer(buf, overlapped=True)] if self._specials else []
        starts = [s for s, _ in spans]
        best: int | None = None
        # After a special token: safe if no other occurrence overlaps it or crosses its end, so it
        # is a real match in the whole text and splitting there is what the splitter does anyway.
        for s, e in spans:
            if s >= lo and s < hi and buf[s:e] in self._cut_after and self._clear(spans, starts, s, e):
                best = e
                break
        if self._prose:
            for match in _PROSE_CUT.finditer(buf, lo, hi if best is None else min(hi, best)):
                p = match.start()
                if self._clear(spans, starts, p, p):
                    return p
        return best

    def _clear(self, spans: list[tuple[int, int]], starts: list[int], s: int, e: int) -> bool:
        """True if no occurrence other than [s, e) overlaps it or strictly contains its end.

        A prose cut is the empty span (p, p): then this asks that no occurrence strictly contains p.
        """
        # Occurrences are at most `margin` long, so only those starting after s - margin can reach s.
        i = bisect.bisect_left(starts, s - self.margin + 1)
        while i < len(spans) and spans[i][0] < e:
            if spans[i] != (s, e) and spans[i][1] > s:
                return False
            i += 1
        return True


def _cuts(file: BinaryIO, size: int, num_chunks: int, finder: CutFinder) -> list[int]:
    bounds = [0]
    for i in range(1, max(1, num_chunks)):
        guess = size * i // num_chunks
        if guess < bounds[-1]:
            continue  # the previous cut already passed this planned boundary
        cut = finder.next_cut(file, guess, size)
        if cut is None:
            break
        bounds.append(cut)
    bounds.append(size)
    return sorted(set(bounds))


def _file_size(file: BinaryIO) -> int:
    file.seek(0, os.SEEK_END)
    return file.tell()


def find_chunk_boundaries(
    file: BinaryIO | str | os.PathLike,
    num_chunks: int,
    split_token: bytes,
    special_tokens: Sequence[bytes] = (),
) -> list[int]:
    """Byte offsets splitting `file` into at most `num_chunks` pieces, each inner one just after `split_token`.

    Boundaries start evenly spaced; each inner one moves forward to just after the next occurrence
    of `split_token` (one that no other special token in `special_tokens` overlaps), then they are
    deduplicated and sorted. The file is read in small blocks, never whole.
    >>> import io; find_chunk_boundaries(io.BytesIO(b"hello\\nworld\\nfoo\\nbar\\n"), 2, b"\\n")
    [0, 12, 20]
    """
    if not split_token:
        raise ConfigError("split_token must not be empty")
    if num_chunks < 1:
        raise ConfigError(f"num_chunks must be at least 1, got {num_chunks}")
    finder = CutFinder(special_tokens, [split_token], prose=False)
    if isinstance(file, (str, os.PathLike)):
        with open(file, "rb") as handle:
            return _cuts(handle, _file_size(handle), num_chunks, finder)
    return _cuts(file, _file_size(file), num_chunks, finder)


def safe_cuts(file: BinaryIO, num_chunks: int, special_tokens: tuple[str, ...]) -> list[int]:
    """Boundaries for counting: any safe cut (after a special token, or in prose), near even spacing."""
    encoded = [token.encode("utf-8") for token in special_tokens]
    finder = CutFinder(encoded, encoded, prose=True)
    return _cuts(file, _file_size(file), num_chunks, finder)


def count_pretokens(
    input_path: str | os.PathLike | Sequence[str | os.PathLike],
    special_tokens: Iterable[str] | None = None,
    num_workers: int | None = None,
    *,
    progress: bool = False,
    backend: str = "local",
    scheduler: str | None = None,
    text_field: str = "text",
    skip_bad_records: bool = False,
    min_pretoken_count: int = 1,
) -> Counter[bytes]:
    """Count GPT-2 pre-tokens of a corpus as a map-reduce over units of work.

    `input_path`: a file, a glob, a directory, or a list of them; .txt, .jsonl (each optionally
    .gz/.zst) and .parquet files (see bpe_impls.sources). Each worker reads only its own unit and
    returns a Counter keyed by bytes; the partial counts are summed (by the parent, or by a tree of
    merges on the Dask workers with backend="dask"), never holding the corpus. `num_workers=1`
    runs in-process; None uses every core. The result is identical for every backend and worker
    count. Bad JSON/Parquet records raise a CorpusError naming file and line/row, or with
    `skip_bad_records` are skipped and reported as a SkippedRecordsWarning. `min_pretoken_count`
    N > 1 drops pre-tokens seen fewer than N times in the whole corpus: smaller word counts to hold
    and train on, but a different result (like HuggingFace's min_frequency).
    """
    from .counting import count_units
    from .sources import plan_inputs, validate_min_count

    specials = validate_special_tokens(special_tokens)
    validate_min_count(min_pretoken_count)
    units = plan_inputs(input_path, specials, num_workers, text_field=text_field, skip_bad_records=skip_bad_records)
    return count_units(
        units, specials, backend=backend, num_workers=num_workers, scheduler=scheduler,
        min_count=min_pretoken_count, progress=progress,
    )
