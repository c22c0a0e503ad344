"""Route A: an inverted pair index and a lazy max-heap, updated incrementally after each merge.

Data structures:
  * `words[w]`: word w as a tuple of integer token ids (0-255 are the bytes, merges get 256+),
    with `counts[w]` its count. Only words of two or more bytes are kept: others hold no pair.
  * `pair_counts[(a, b)]`: total count of the adjacent id pair, summed over words as count x
    occurrences (overlapping ones included, as `naive` counts them). A pair is a key exactly
    while some word holds it.
  * `index[(a, b)]`: {word index: occurrences in that word}, the words holding the pair.
  * `heap`: `(-count, Descending(pair bytes), pair)` entries, a heapq max-heap in
    `merge_priority` order. Stale entries are deleted lazily: every pair always has an entry
    whose stored count is >= its current count, so the first entry popped whose count is current
    is the best pair.

One merge of pair p costs O(sum of lengths of the words holding p) dict updates, plus
O(log heap) per pair whose count rose (one push each per merge) and per stale entry popped.

The loop calls its steps by name (`pop_best`, `_apply_merge`): `instrumented.py` counts per-merge
statistics for `bpe scaling` by running this same code with those names wrapped.
"""

from __future__ import annotations

from collections.abc import Sequence
from heapq import heapify, heappush

from .common import (
    Descending,
    Merges,
    TokenTable,
    Vocab,
    WordCounts,
    build_vocab,
    checked_budget,
    merge_progress,
    pop_best,
)

Pair = tuple[int, int]


def train(
    word_counts: WordCounts, vocab_size: int, special_tokens: Sequence[str] = (), *, progress: bool = False
) -> tuple[Vocab, Merges]:
    """Train byte-level BPE on pre-token counts; returns exactly what `naive.train` returns."""
    num_merges = checked_budget(word_counts, vocab_size, special_tokens)

    tokens = TokenTable()
    token_bytes = tokens.bytes_of

    words: list[tuple[int, ...]] = []
    counts: list[int] = []
    for word, count in word_counts.items():
        if len(word) > 1:
            words.append(tuple(word))  # iterating bytes yields the byte values, i.e. the ids
            counts.append(count)

    index: dict[Pair, dict[int, int]] = {}
    for w, ids in enumerate(words):
        for pair in zip(ids, ids[1:]):
            holders = index.get(pair)
            if holders is None:
                index[pair] = {w: 1}
            else:
                holders[w] = holders.get(w, 0) + 1
    pair_counts: dict[Pair, int] = {
        pair: sum([counts[w] * occ for w, occ in holders.items()]) for pair, holders in index.items()
    }

    # One Descending per pair, built once: its bytes never change and entries of one pair then
    # share it (a tie between them is settled by identity, not by comparing bytes).
    descending: dict[Pair, Descending] = {}

    def entry(pair: Pair) -> tuple[int, Descending, Pair]:
        desc = descending.get(pair)
        if desc is None:
            desc = descending[pair] = Descending((token_bytes[pair[0]], token_bytes[pair[1]]))
        return (-pair_counts[pair], desc, pair)

    heap = [entry(pair) for pair in pair_counts]
    heapify(heap)

    merges: Merges = []
    # Mirrors route_b's loop (linked_list.train) on purpose: each route reads whole, on its own keys.
    with merge_progress(num_merges, progress) as bar:
        while len(merges) < num_merges:
            best = pop_best(heap, pair_counts)
            if best is None:
                break  # every word is a single token: nothing left to merge
            left, right = best
            merges.append((token_bytes[left], token_bytes[right]))
            new = tokens.merge(left, right)
            risen = _apply_merge(best, new, words, counts, pair_counts, index)
            for pair in risen:
                if pair in pair_counts:  # it may have been added in one word and removed in a later one
                    heappush(heap, entry(pair))
            bar.update()
    return build_vocab(special_tokens, merges), merges


def _apply_merge(
    best: Pair,
    new: int,
    words: list[tuple[int, ...]],
    counts: list[int],
    pair_counts: dict[Pair, int],
    index: dict[Pair, dict[int, int]],
) -> set[Pair]:
    """Rewrite every word holding `best`, updating pair counts and the index; return risen pairs.

    Only the words in index[best] are visited, and in each only the window from one id before the
    first merged occurrence to one id after the last: pairs outside it are unchanged. The window's
    old pairs are all removed and its new pairs all added, which handles overlapping runs
    (`aaaa` -> `aa aa`: (a,a) x3 out, (aa,aa) in) with no special cases. Greedy merging leaves no
    (left, right) behind, so `best` itself leaves the tables whole.
    """
    left, right = best
    holders = index.pop(best)
    del pair_counts[best]
    risen: set[Pair] = set()
    add_risen = risen.add
    index_get = index.get
    for w in holders:
        word = words[w]
        count = counts[w]

        # Greedy left-to-right rewrite, noting where the first occurrence starts and the last ends.
        merged: list[int] = []
        append = merged.append
        last = len(word) - 1
        first = end = -1
        i = 0
        while i < last:
            if word[i] == left and word[i + 1] == right:
                if first < 0:
                    first = i
                append(new)
                i += 2
                end = i
            else:
                append(word[i])
                i += 1
        if i == last:
            append(word[last])
        words[w] = tuple(merged)

        lo = first - 1 if first > 0 else 0
        old_hi = end + 1  # may run one past the word; slicing clips it
        new_hi = old_hi - (len(word) - len(merged))  # the suffix after the window shifted left
        new_window = merged[lo:new_hi]
        old_window = word[lo:old_hi]

        # Add before removing, so a pair in both windows never drops to zero holders in between.
        for pair in zip(new_window, new_window[1:]):
            pair_holders = index_get(pair)
            if pair_holders is None:
                index[pair] = {w: 1}
                pair_counts[pair] = count
            else:
                pair_holders[w] = pair_holders.get(w, 0) + 1
                pair_counts[pair] += count
            add_risen(pair)
        for pair in zip(old_window, old_window[1:]):
            if pair == best:
                continue  # its entries are gone already
            pair_holders = index[pair]
            occ = pair_holders[w] - 1
            if occ:
                pair_holders[w] = occ
            else:
                del pair_holders[w]
                if not pair_holders:  # no word holds it any more: it can no longer be chosen
                    del index[pair]
                    del pair_counts[pair]
                    continue
            pair_counts[pair] -= count
    return risen
