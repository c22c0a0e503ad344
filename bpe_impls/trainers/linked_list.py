"""Route B: merges done in place on linked-list words, found through an append-only occurrence index.

Data structures:
- Each distinct word is a doubly linked list of `_Node`s (`__slots__` value, prev, next, count):
  value is an int token id (from the shared `TokenTable`: one id per byte string), count the
  word's count.
- counts: dict pair key -> total count; a key packs two token ids into one int (`pair_key_bits`).
- index: dict pair key -> list of left nodes where the pair was seen. Append-only: an entry is live
  only if the node still holds a and its next node holds b; stale and repeated entries are skipped
  on use.
- heap: heapq of (-count, Descending(pair bytes), key), so it pops in `merge_priority` order. Lazy:
  an entry's count is an upper bound of the pair's count, not always equal to it (see
  `common.pop_best`).

One merge of (a, b) costs O(len(index[a, b])) node and dict updates -- each entry once, live or
stale; a run of a's is walked once more for a == b -- plus O(log heap) per pair whose count grew,
and O(log heap) per stale entry popped later. Every node is indexed at most once per pair it forms,
so the index work over the whole run is bounded by the initial pairs plus two per merged occurrence.

The loop calls its steps by name (`pop_best`, `_merge_pair`): `instrumented.py` counts per-merge
statistics for `bpe scaling` by running this same code with those names wrapped.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from .common import (
    Descending,
    Merges,
    TokenTable,
    Vocab,
    WordCounts,
    build_vocab,
    checked_budget,
    merge_progress,
    pair_key_bits,
    pop_best,
)

_DEAD = -1  # the value of a node merged into its left neighbour: no pair test can match it


class _Node:
    """One token of one distinct word, linked to its neighbours."""

    __slots__ = ("value", "prev", "next", "count")

    def __init__(self, value: int, prev: _Node | None, count: int) -> None:
        self.value = value
        self.prev = prev
        self.next: _Node | None = None
        self.count = count


def _initial_state(word_counts: WordCounts, shift: int) -> tuple[dict[int, int], dict[int, list[_Node]]]:
    """Link every word of two or more bytes; count and index every adjacent pair."""
    counts: dict[int, int] = {}
    index: dict[int, list[_Node]] = {}
    counts_get = counts.get
    index_get = index.get
    for word, count in word_counts.items():
        if len(word) < 2:
            continue  # a single token has no pair and never changes
        prev = _Node(word[0], None, count)
        left = prev.value << shift
        # Every position counts, overlapping ones included (`aaa` has (a, a) twice), as in naive.
        for byte in word[1:]:
            node = _Node(byte, prev, count)
            prev.next = node
            key = left | byte
            counts[key] = counts_get(key, 0) + count
            nodes = index_get(key)
            if nodes is None:
                index[key] = [prev]
            else:
                nodes.append(prev)
            prev = node
            left = byte << shift
    return counts, index


def _merge_at(
    n: _Node,
    new: int,
    shift: int,
    counts: dict[int, int],
    index: dict[int, list[_Node]],
    grown: set[int],
) -> None:
    """Merge `x n m y` into `x n' y` (n' = n holding `new`, m dropped) and update the pairs around it.

    Only the neighbour pairs (x, a), (b, y) go down here; (a, b) itself is deleted by the caller, as
    no word holds it after the merge (in a run of a's, (b, y) may be (a, a): counted down, then
    deleted). Neighbours are read as they are now, so successive merges in one word (`a b a b`, or
    a run of a's) each see the result of the previous one.
    """
    m: _Node = n.next  # type: ignore[assignment]  # not None: the caller found the pair's right node here
    c = n.count
    a = n.value
    b = m.value
    x = n.prev
    y = m.next
    n.value = new
    n.next = y
    m.value = _DEAD
    if x is not None:
        xv = x.value
        _move_pair(xv << shift | a, xv << shift | new, x, c, counts, index, grown)
    if y is not None:
        y.prev = n
        yv = y.value
        _move_pair(b << shift | yv, new << shift | yv, n, c, counts, index, grown)


def _move_pair(
    old: int, key: int, left: _Node, c: int, counts: dict[int, int], index: dict[int, list[_Node]], grown: set[int]
) -> None:
    """A neighbour pair changed by a merge: `c` from `old` to `key`, whose left node is `left`."""
    counts[old] -= c
    counts[key] = counts.get(key, 0) + c
    grown.add(key)
    nodes = index.get(key)
    if nodes is None:
        index[key] = [left]
    else:
        nodes.append(left)


def _merge_pair(
    a: int,
    b: int,
    new: int,
    shift: int,
    counts: dict[int, int],
    index: dict[int, list[_Node]],
) -> set[int]:
    """Merge every live occurrence of (a, b), greedily left to right in each word.

    Returns the pairs whose count grew (all contain `new`), for the caller to push on the heap.
    """
    grown: set[int] = set()
    occurrences = index.pop(a << shift | b)
    if a != b:
        # Occurrences of (a, b) cannot overlap (the node after an `a` holds b != a), so their order
        # does not matter; a repeated or stale entry fails the test, since a merged node holds `new`.
        for n in occurrences:
            if n.value == a:
                m = n.next
                if m is not None and m.value == b:
                    _merge_at(n, new, shift, counts, index, grown)
    else:
        # Overlapping: in a run of a's the naive trainer merges (0, 1), (2, 3), ... from the run's
        # start, and nothing guarantees the index lists a run's nodes in that order. So from any
        # live entry, walk back to the run's start and merge the whole run; its other entries then
        # fail the test (no two a's stay adjacent). Each run is walked at most twice its length.
        for n in occurrences:
            if n.value != a:
                continue
            m = n.next
            if m is None or m.value != a:
                continue
            p = n.prev
            while p is not None and p.value == a:
                n = p
                p = n.prev
            while True:
                _merge_at(n, new, shift, counts, index, grown)
                after = n.next
                if after is None or after.value != a:
                    break
                m = after.next
                if m is None or m.value != a:
                    break
                n = after
    del counts[a << shift | b]
    return grown


def train(
    word_counts: WordCounts, vocab_size: int, special_tokens: Sequence[str] = (), *, progress: bool = False
) -> tuple[Vocab, Merges]:
    """Train byte-level BPE on pre-token counts; returns exactly what `naive.train` returns."""
    num_merges = checked_budget(word_counts, vocab_size, special_tokens)
    shift = pair_key_bits(word_counts, num_merges)
    mask = (1 << shift) - 1
    counts, index = _initial_state(word_counts, shift)
    tokens = TokenTable()
    token_bytes = tokens.bytes_of

    def entry(key: int, count: int) -> tuple[int, Descending, int]:
        return (-count, Descending((token_bytes[key >> shift], token_bytes[key & mask])), key)

    heap = [entry(key, count) for key, count in counts.items() if count > 0]
    heapq.heapify(heap)
    merges: Merges = []
    # Mirrors route_a's loop (inverted_index.train) on purpose: each route reads whole, on its own keys.
    with merge_progress(num_merges, progress) as bar:
        while len(merges) < num_merges:
            key = pop_best(heap, counts)
            if key is None:
                break  # every word is a single token: nothing left to merge
            a, b = key >> shift, key & mask
            merges.append((token_bytes[a], token_bytes[b]))
            new = tokens.merge(a, b)
            for grown in _merge_pair(a, b, new, shift, counts, index):
                count = counts[grown]
                if count > 0:
                    heapq.heappush(heap, entry(grown, count))
            bar.update()
    return build_vocab(special_tokens, merges), merges
