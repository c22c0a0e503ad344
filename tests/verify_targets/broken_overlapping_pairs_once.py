"""Bug: a pair is counted once per word however often the word holds it (aaa counts (a, a) once)."""

from collections import Counter

import reference
from reference import *  # noqa: F403


def _count_pairs(words):
    pairs = Counter()
    for word, count in words.items():
        for pair in set(zip(word, word[1:])):
            pairs[pair] += count
    return pairs


reference.count_pairs = _count_pairs
