"""Bug: encoding merges the first (leftmost) mergeable pair of a word, not the best-ranked one."""

import reference
from reference import *  # noqa: F403


class Tokenizer(reference.Tokenizer):
    def bpe(self, word):
        parts = [bytes([b]) for b in word]
        while len(parts) > 1:
            found = next((i for i, pair in enumerate(zip(parts, parts[1:])) if pair in self.ranks), None)
            if found is None:
                break
            parts[found : found + 2] = [parts[found] + parts[found + 1]]
        return [self.ids[part] for part in parts]


def get_tokenizer(vocab, merges, special_tokens=None):
    return Tokenizer(dict(vocab), list(merges), special_tokens)
