"""What every trainer shares: the tie-break rule, the token table, the vocab layout, argument checks
and the progress bar.

Trainers differ only in their merge loop. Each takes the same word counts (pre-token bytes ->
count), chooses merges by `merge_priority`, names tokens through a `TokenTable`, and hands its
merges to `build_vocab`.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import Protocol, TypeVar

from tqdm import tqdm

from ..base.checks import require_int
from ..base.errors import ConfigError
from ..base.patterns import validate_special_tokens
from ..base.progress import progress_bar

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]
WordCounts = Mapping[bytes, int]
K = TypeVar("K")  # a pair's key: a (left, right) tuple of ids, or the two packed in one int


class Trainer(Protocol):
    """A BPE trainer: word counts in, (vocab, merges) out, identical for every implementation."""

    def __call__(
        self,
        word_counts: WordCounts,
        vocab_size: int,
        special_tokens: Sequence[str] = (),
        *,
        progress: bool = False,
    ) -> tuple[Vocab, Merges]: ...


def merge_priority(count: int, left: bytes, right: bytes) -> tuple[int, bytes, bytes]:
    """The order merges are chosen in: the highest count wins; ties go to the greatest (left, right)."""
    return (count, left, right)


class Descending:
    """Orders (left bytes, right bytes) pairs greatest first, for use inside heapq's min-heap.

    A heap entry `(-count, Descending((left, right)), ...)` pops in `merge_priority` order.
    """

    __slots__ = ("pair",)

    def __init__(self, pair: tuple[bytes, bytes]):
        self.pair = pair

    def __lt__(self, other: Descending) -> bool:
        return self.pair > other.pair

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Descending) and self.pair == other.pair

    def __hash__(self) -> int:
        return hash(self.pair)


def pop_best(heap: list[tuple[int, Descending, K]], counts: Mapping[K, int]) -> K | None:
    """Pop the pair to merge next from a lazy max-heap of `(-count, Descending, key)` entries, by
    `merge_priority` (None when no pair is left); `counts` holds each pair's current count.

    Why the lazy heap is exact: a pair's count grows only in a merge that makes one of its tokens,
    and the trainer pushes every pair that grew after that merge; otherwise counts only fall. So
    each pair with a positive count has an entry whose count is at least the real one. An entry
    that is too high is pushed back with the real count; one that is too low is a leftover (a
    higher entry exists) and is dropped. The first entry whose count is exact therefore beats
    every other pair.
    """
    while heap:
        neg, desc, key = heap[0]
        actual = counts.get(key)
        if not actual:
            heapq.heappop(heap)  # merged away, or counted down to 0: no word holds it any more
        elif actual == -neg:
            heapq.heappop(heap)
            return key
        elif actual < -neg:
            heapq.heapreplace(heap, (-actual, desc, key))
        else:
            heapq.heappop(heap)
    return None


def merge_budget(vocab_size: int, special_tokens: Sequence[str]) -> int:
    """How many merges fit: vocab_size minus the special tokens and the 256 single bytes."""
    specials = validate_special_tokens(special_tokens)
    require_int(vocab_size, "vocab_size")
    floor = 256 + len(specials)
    if vocab_size < floor:
        raise ConfigError(f"vocab_size {vocab_size} is below 256 bytes + {len(specials)} special tokens = {floor}")
    return vocab_size - floor


class TokenTable:
    """Token ids and their bytes, one id per byte string: ids 0-255 are the single bytes, and each
    merge's result gets the next id unless its bytes already name a token (`a`+`bc` after `ab`+`c`),
    which it then reuses, because the naive trainer keys tokens by their bytes."""

    __slots__ = ("bytes_of", "_id_of")

    def __init__(self) -> None:
        self.bytes_of: list[bytes] = [bytes([b]) for b in range(256)]
        self._id_of: dict[bytes, int] = {token: i for i, token in enumerate(self.bytes_of)}

    def merge(self, left: int, right: int) -> int:
        """The id of the token made by merging `left` then `right`."""
        merged = self.bytes_of[left] + self.bytes_of[right]
        token_id = self._id_of.get(merged)
        if token_id is None:
            token_id = self._id_of[merged] = len(self.bytes_of)
            self.bytes_of.append(merged)
        return token_id


def pair_key_bits(word_counts: WordCounts, num_merges: int) -> int:
    """Bits for the right id when a pair of ids is packed into one int (`left << bits | right`,
    cheaper to hash than a tuple): enough for every id this run can create. Each merge that makes
    an id shortens some word, so there are at most sum(len - 1) of them however big the budget."""
    possible = sum(len(word) - 1 for word in word_counts if len(word) > 1)
    return (255 + min(num_merges, possible)).bit_length()


def check_word_counts(word_counts: WordCounts) -> None:
    """Reject word counts a trainer cannot take: keys must be bytes, counts positive integers.

    Every trainer calls this, so all of them agree on bad input as they agree on good input.
    """
    for word, count in word_counts.items():
        if not isinstance(word, bytes):
            raise ConfigError(f"word counts must be keyed by bytes, got {type(word).__name__} {word!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
            raise ConfigError(f"word {word!r} has count {count!r}; counts must be positive integers")


def checked_budget(word_counts: WordCounts, vocab_size: int, special_tokens: Sequence[str]) -> int:
    """What every trainer checks first: its arguments, then how many merges fit (`merge_budget`)."""
    budget = merge_budget(vocab_size, special_tokens)
    check_word_counts(word_counts)
    return budget


def build_vocab(special_tokens: Sequence[str], merges: Merges) -> Vocab:
    """The vocab layout: special tokens first (in order), then the 256 bytes, then merges in order."""
    tokens = [token.encode("utf-8") for token in special_tokens]
    tokens += [bytes([b]) for b in range(256)]
    tokens += [left + right for left, right in merges]
    return dict(enumerate(tokens))


def merge_progress(total: int, enabled: bool) -> tqdm:
    """A progress bar over merges on stderr (updated by the caller)."""
    return progress_bar(enabled, total=total, unit="merge", desc="merge", leave=False)
