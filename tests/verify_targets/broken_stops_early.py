"""Bug: training stops one merge short of vocab_size."""

import reference
from reference import *  # noqa: F403

_train = reference.run_train_bpe


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    return _train(input_path, vocab_size - 1, special_tokens, **kwargs)
