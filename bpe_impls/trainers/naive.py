"""The naive trainer: the executable spec every other trainer is proven against.

Data structures: a dict from word (a tuple of token bytes) to its count.
One merge: recount every adjacent pair in every word, take the best by `merge_priority`, then
rewrite every word, merging that pair greedily left to right. O(total word length) per merge.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from .common import Merges, Vocab, WordCounts, build_vocab, checked_budget, merge_priority, merge_progress


def merge_word(word: tuple[bytes, ...], pair: tuple[bytes, bytes]) -> tuple[bytes, ...]:
    """Replace each occurrence of `pair` in `word`, scanning left to right (`aaaaa` -> `aa aa a`)."""
    left, right = pair
    merged: list[bytes] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == left and word[i + 1] == right:
            merged.append(left + right)
            i += 2
        else:
            merged.append(word[i])
            i += 1
    return tuple(merged)


def train(
    word_counts: WordCounts, vocab_size: int, special_tokens: Sequence[str] = (), *, progress: bool = False
) -> tuple[Vocab, Merges]:
    num_merges = checked_budget(word_counts, vocab_size, special_tokens)
    words: dict[tuple[bytes, ...], int] = {
        tuple(bytes([b]) for b in word): count for word, count in word_counts.items()
    }
    merges: Merges = []
    with merge_progress(num_merges, progress) as bar:
        while len(merges) < num_merges:
            pair_counts: Counter[tuple[bytes, bytes]] = Counter()
            for word, count in words.items():
                for pair in zip(word, word[1:]):
                    pair_counts[pair] += count
            if not pair_counts:
                break  # every word is a single token: nothing left to merge
            best = max(pair_counts, key=lambda pair: merge_priority(pair_counts[pair], *pair))
            merges.append(best)
            words = {merge_word(word, best): count for word, count in words.items()}
            bar.update()
    return build_vocab(special_tokens, merges), merges
