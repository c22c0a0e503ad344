"""Bug: the special tokens get the last ids, vocab_size - len(special_tokens) onwards, whatever the
merges reach: when training stops early (no pair left), ids below them are never used, and the
vocab's set of ids is not 0 to len(vocab) - 1, which CS336's test compares. The tokens and merges
are right."""

import reference
from reference import *  # noqa: F403


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    vocab, merges = reference.run_train_bpe(input_path, vocab_size, special_tokens)
    specials = [token.encode("utf-8") for token in special_tokens]
    rest = [vocab[i] for i in sorted(vocab) if vocab[i] not in specials]
    numbered = dict(enumerate(rest))
    for offset, token in enumerate(specials):
        numbered[vocab_size - len(specials) + offset] = token
    return numbered, merges
