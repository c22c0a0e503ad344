"""The bucket trainer: pair counts kept up to date incrementally, the best pair found via count buckets.

Data structures:
- words: list of `Word` (`__slots__` id, tokens, count); tokens are int token ids from the
  shared `TokenTable` (one id per byte string).
- tallies: dict pair key -> total count. A pair key packs two ids into one int
  (`pair_key_bits`). Word counts are positive, so a total of 0 means no word holds the pair any
  more: it leaves the table.
- buckets: dict count -> set of pair keys with that count, and `top`, a pointer to the highest
  count. Counts only fall, except for pairs a merge creates, so `top` walks down when its bucket
  empties and is raised when a changed count exceeds it.
- order: the top bucket's keys sorted by `merge_priority`, best last, built once per bucket, so
  each merge pops the next best instead of scanning the bucket (late buckets hold hundreds of ties).
- index: dict pair key -> set of ids of words that contain the pair or once did. Append-only: a
  word that no longer contains the pair is found to be stale when it is rescanned.

One merge costs O(total length of the words in the pair's index entry) to rewrite them, O(pairs
whose count changed) to move them between buckets, and O(log |bucket|) per pair entering the top
bucket; building `order` costs O(n log n) once per top bucket of n pairs. No heap.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Sequence
from itertools import pairwise

from .common import (
    Merges,
    TokenTable,
    Vocab,
    WordCounts,
    build_vocab,
    checked_budget,
    merge_priority,
    merge_progress,
    pair_key_bits,
)


class Word:
    """A distinct pre-token: its current tokens and how often it occurs."""

    __slots__ = ("id", "tokens", "count")

    def __init__(self, id: int, tokens: list[int], count: int) -> None:
        self.id = id
        self.tokens = tokens
        self.count = count


def _initial_state(word_counts: WordCounts, key_shift: int) -> tuple[list[Word], dict[int, int], dict[int, set[int]]]:
    """Words as byte ids (a byte's id is its value), every adjacent pair tallied and indexed."""
    words: list[Word] = []
    tallies: dict[int, int] = {}
    index: dict[int, set[int]] = {}
    for raw, count in word_counts.items():
        if len(raw) < 2:
            continue  # a single token has no pair and never changes
        wid = len(words)
        tokens = list(raw)
        words.append(Word(wid, tokens, count))
        # Every position counts, overlapping ones included (`aaa` has (a, a) twice), as in naive.
        for left, right in pairwise(tokens):  # _move_pair's index insert, inlined: once per pair in the corpus
            key = left << key_shift | right
            tallies[key] = tallies.get(key, 0) + count
            ids = index.get(key)
            if ids is None:
                index[key] = {wid}
            else:
                ids.add(wid)
    return words, tallies, index


def _merge_in_words(
    words: list[Word],
    word_ids: set[int],
    a: int,
    b: int,
    new: int,
    index: dict[int, set[int]],
    key_shift: int,
) -> dict[int, int]:
    """Rewrite each word greedily left to right, replacing (a, b) by `new`; return the tally deltas.

    Per occurrence at j (old positions): the old pairs touching it go -- (a, b), (tokens[j-1], a)
    and (b, tokens[j+2]) -- and the new ones come -- (out[-1], new) and (new, tokens[j+2]). When the
    next occurrence starts right at j+2, the pair between them is left to that occurrence, whose
    left neighbour (b, then `new`) covers it, so no pair is counted twice.
    """
    delta: dict[int, int] = {}
    get = delta.get
    merged_key = a << key_shift | b
    b_left = b << key_shift
    new_left = new << key_shift
    for wid in word_ids:
        word = words[wid]
        tokens = word.tokens
        if a not in tokens:
            continue  # stale index entry: a cheap C-level test before the scan
        weight = word.count
        n = len(tokens)
        last = n - 1
        out: list[int] | None = None
        start = 0  # tokens[start:] is not yet copied to out
        i = 0
        occurrences = 0
        while True:
            try:
                j = tokens.index(a, i, last)  # stop=last: an `a` in the last slot cannot start a pair
            except ValueError:
                break
            if tokens[j + 1] != b:
                i = j + 1
                continue
            if out is None:
                out = []
            occurrences += 1
            if j > start:
                out.extend(tokens[start:j])
            if j:
                _move_pair(tokens[j - 1] << key_shift | a, out[-1] << key_shift | new, weight, wid, delta, index)
            out.append(new)
            k = j + 2
            if k < n:
                nxt = tokens[k]
                # Greedy: an occurrence starting at k is merged too and handles the pair between.
                if not (nxt == a and k < last and tokens[k + 1] == b):
                    _move_pair(b_left | nxt, new_left | nxt, weight, wid, delta, index)
            start = i = k
        if out is None:
            continue  # stale: `a` occurs but never followed by `b`
        if start < n:
            out.extend(tokens[start:])
        word.tokens = out
        delta[merged_key] = get(merged_key, 0) - weight * occurrences
    return delta


def _move_pair(old: int, key: int, weight: int, wid: int, delta: dict[int, int], index: dict[int, set[int]]) -> None:
    """A neighbour pair changed by a merge in word `wid`: `weight` from `old` to `key`."""
    delta[old] = delta.get(old, 0) - weight
    delta[key] = delta.get(key, 0) + weight
    ids = index.get(key)
    if ids is None:
        index[key] = {wid}
    else:
        ids.add(wid)


def _apply_deltas(
    delta: dict[int, int],
    tallies: dict[int, int],
    buckets: dict[int, set[int]],
    index: dict[int, set[int]],
    top: int,
    order: list[int],
    order_count: int,
    priority: Callable[[int], tuple[int, bytes, bytes]],
) -> int:
    """Move each changed pair to its new bucket; return the max pointer, raised if a count passed it.

    A pair entering bucket `order_count` is also inserted into `order`, which must hold all of it.
    """
    for key, d in delta.items():
        if not d:
            continue
        old = tallies.get(key, 0)
        count = old + d
        if old:
            bucket = buckets[old]
            if len(bucket) == 1:
                del buckets[old]  # empty buckets go, so the pointer walk can test membership
            else:
                bucket.remove(key)
        if count:
            tallies[key] = count
            destination = buckets.get(count)
            if destination is None:
                buckets[count] = {key}
            else:
                destination.add(key)
            if count == order_count:
                insort(order, key, key=priority)
            # A merge creates pairs with any count: never miss the max.
            if count > top:
                top = count
        else:
            del tallies[key]
            index.pop(key, None)  # no word holds it any more: every entry would be stale
    return top


def _next_top(buckets: dict[int, set[int]], top: int) -> int:
    """The highest count below an emptied top: walk down while that is cheaper than a scan."""
    for _ in range(len(buckets)):
        top -= 1
        if top in buckets:
            return top
    return max(buckets)  # a gap wider than the number of buckets (huge or sparse counts)


def train(
    word_counts: WordCounts, vocab_size: int, special_tokens: Sequence[str] = (), *, progress: bool = False
) -> tuple[Vocab, Merges]:
    """Train byte-level BPE on pre-token counts; returns exactly what `naive.train` returns."""
    num_merges = checked_budget(word_counts, vocab_size, special_tokens)
    key_shift = pair_key_bits(word_counts, num_merges)
    key_mask = (1 << key_shift) - 1
    tokens = TokenTable()
    token_bytes = tokens.bytes_of
    words, tallies, index = _initial_state(word_counts, key_shift)
    buckets: dict[int, set[int]] = {}
    for key, count in tallies.items():
        buckets.setdefault(count, set()).add(key)
    top = max(buckets, default=0)
    order: list[int] = []
    order_count = top + 1  # no bucket yet: the first merge builds `order`

    def priority(key: int) -> tuple[int, bytes, bytes]:
        # Within one bucket every count is `order_count`, so this orders by the pair's bytes.
        return merge_priority(order_count, token_bytes[key >> key_shift], token_bytes[key & key_mask])

    merges: Merges = []
    with merge_progress(num_merges, progress) as bar:
        while len(merges) < num_merges and buckets:  # no buckets: every word is a single token
            if top not in buckets:
                top = _next_top(buckets, top)
            bucket = buckets[top]
            if order_count != top:
                order_count = top
                order = sorted(bucket, key=priority)
            key = order.pop()
            while key not in bucket:
                key = order.pop()  # left the bucket since `order` was built
            a, b = key >> key_shift, key & key_mask
            merges.append((token_bytes[a], token_bytes[b]))
            new = tokens.merge(a, b)
            word_ids = index.pop(key)
            delta = _merge_in_words(words, word_ids, a, b, new, index, key_shift)
            top = _apply_deltas(delta, tallies, buckets, index, top, order, order_count, priority)
            bar.update()
    return build_vocab(special_tokens, merges), merges
