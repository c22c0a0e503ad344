"""Bug: pair counts are updated in place after each merge and a pair whose count falls to 0 stays in
the table, so once every real pair is merged, training goes on merging pairs that occur nowhere
until the vocab is full (the loop stops only when the table is empty)."""

from collections import Counter

import reference
from reference import *  # noqa: F403


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    with open(input_path, encoding="utf-8", newline="") as file:
        words = reference.count_words(file.read(), special_tokens)
    vocab = reference.initial_vocab(special_tokens)
    merges = []
    pairs = reference.count_pairs(words)
    while len(vocab) < vocab_size and pairs:
        pair = max(pairs, key=lambda p: (pairs[p], p))
        merges.append(pair)
        vocab[len(vocab)] = pair[0] + pair[1]
        merged = Counter()
        for word, count in words.items():
            new = reference.merge_word(word, pair)
            if new != word:
                for old in zip(word, word[1:]):
                    pairs[old] -= count  # down to 0, never removed
                for fresh in zip(new, new[1:]):
                    pairs[fresh] += count
            merged[new] += count
        words = merged
    return vocab, merges
