"""Bug: within a word, merging goes right to left (aaaaa -> a aa aa)."""

import reference
from reference import *  # noqa: F403


def _merge_word(word, pair):
    out, i = [], len(word) - 1
    while i >= 0:
        if i - 1 >= 0 and (word[i - 1], word[i]) == pair:
            out.append(word[i - 1] + word[i])
            i -= 2
        else:
            out.append(word[i])
            i -= 1
    return tuple(reversed(out))


reference.merge_word = _merge_word
