"""Safe cuts: where a corpus may be split into units that count independently, exactly.

A large file is counted as a map-reduce over byte ranges. A range may only end at a *safe cut*: a
position where cutting the text cannot change any special-token match or any pre-token, so the
counts are identical for every number of chunks. The cuts used are: just after a special token
that no other special-token occurrence overlaps (proven in `CutFinder.first_cut_in`), for every
split pattern; and the split pattern's own prose cuts (`SplitPattern.prose_cuts`, proven where
the presets are defined), such as between an ASCII letter and ASCII punctuation. A custom pattern
has none, so a file of it is cut only after special tokens. Where no safe cut exists near a
planned boundary, there are simply fewer chunks.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence
from functools import lru_cache
from typing import BinaryIO

import regex

from ..base.errors import ConfigError
from ..base.patterns import GPT2, SplitPattern

_BLOCK = 1 << 16
# next_cut's first window: prose has a safe cut every few bytes, and the special-token search runs
# over the whole window, so a small one first (0.3 ms for a 64 KB window, paid per cut of
# `bpe encode` while holding the GIL its workers need), doubling up to _BLOCK where none is found.
_FIRST_WINDOW = 1 << 9


@lru_cache(maxsize=16)
def _compile_prose(prose: str) -> regex.Pattern:
    return regex.compile(prose.encode("ascii"))


class CutFinder:
    """Finds safe cuts: in a file, reading it in small blocks (`next_cut`), or in a buffer that
    has `margin` bytes of context on each side of the stretch searched (`first_cut_in`)."""

    def __init__(self, special_tokens: Sequence[bytes], cut_after: Sequence[bytes], prose: str | None):
        """`prose`: a regex of zero-width positions in ASCII prose that are safe cuts (None: none)."""
        specials = sorted(set(special_tokens) | set(cut_after), key=len, reverse=True)
        # Context kept around each block: the longest special token, and at least the two bytes
        # the prose cuts look at on either side.
        self.margin = max([2, *(len(token) for token in specials)])
        self._specials = regex.compile(b"|".join(regex.escape(t) for t in specials)) if specials else None
        self._cut_after = frozenset(cut_after)
        self._prose = _compile_prose(prose) if prose else None

    def next_cut(self, file: BinaryIO, position: int, size: int) -> int | None:
        """The smallest safe cut p with position <= p < size (None if there is none)."""
        margin = self.margin
        start, width = position, _FIRST_WINDOW
        while start < size:
            read_from = max(0, start - margin)
            file.seek(read_from)
            buf = file.read(start + width + 2 * margin - read_from)
            cut = self.first_cut_in(buf, start - read_from, min(width, size - start))
            if cut is not None:
                return read_from + cut
            start += width
            width = min(2 * width, _BLOCK)
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
        if self._prose is not None:
            for match in self._prose.finditer(buf, lo, hi if best is None else min(hi, best)):
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
    finder = CutFinder(special_tokens, [split_token], prose=None)
    if isinstance(file, (str, os.PathLike)):
        with open(file, "rb") as handle:
            return _cuts(handle, _file_size(handle), num_chunks, finder)
    return _cuts(file, _file_size(file), num_chunks, finder)


def safe_cuts(
    file: BinaryIO, num_chunks: int, special_tokens: tuple[str, ...], pattern: SplitPattern = GPT2
) -> list[int]:
    """Boundaries for counting: any safe cut (after a special token, or in prose), near even spacing."""
    encoded = [token.encode("utf-8") for token in special_tokens]
    finder = CutFinder(encoded, encoded, prose=pattern.prose_cuts)
    return _cuts(file, _file_size(file), num_chunks, finder)
