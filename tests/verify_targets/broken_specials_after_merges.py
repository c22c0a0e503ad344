"""Bug: special tokens get their ids after the 256 bytes and the merges, not first."""

import reference
from reference import *  # noqa: F403

_train = reference.run_train_bpe


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    vocab, merges = _train(input_path, vocab_size, special_tokens, **kwargs)
    ordered = [token for _, token in sorted(vocab.items())]
    specials = [t.encode("utf-8") for t in special_tokens]
    rest = [t for t in ordered[len(specials) :]]
    return {i: t for i, t in enumerate(rest + specials)}, merges
