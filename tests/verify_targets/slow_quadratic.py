"""Correct but slow on purpose: the distinct pre-tokens are put in order by hand, each one placed
by a scan of the list from its start (an insertion sort, as a first attempt at a deterministic
order might be written), so training takes time quadratic in the number of distinct pre-tokens.
Its merges and vocab are the reference's. `bpe scaling` must report its slope as such
(tests/test_scaling_subjects.py)."""

from collections import Counter

import reference
from reference import *  # noqa: F403


def in_order(words: Counter) -> list[tuple[bytes, ...]]:
    ordered: list[tuple[bytes, ...]] = []
    for word in words:
        place = 0
        while place < len(ordered) and ordered[place] < word:
            place += 1
        ordered.insert(place, word)
    return ordered


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    with open(input_path, encoding="utf-8", newline="") as file:
        text = file.read()
    words = reference.count_words(text, special_tokens)
    words = Counter({word: words[word] for word in in_order(words)})
    return reference.train_from_words(words, vocab_size, special_tokens)
