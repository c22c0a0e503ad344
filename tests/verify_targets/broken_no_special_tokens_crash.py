"""Bug: training raises ValueError (max() of an empty sequence) when special_tokens is empty: the
longest special token's length is taken to size a read-ahead window."""

import reference
from reference import *  # noqa: F403

_train = reference.run_train_bpe


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    window = max(len(token.encode("utf-8")) for token in special_tokens)  # bytes a chunk reads past its end
    assert window > 0
    return _train(input_path, vocab_size, special_tokens, **kwargs)
