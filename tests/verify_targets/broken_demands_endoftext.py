"""Bug (or its author's restriction): training raises unless "<|endoftext|>" is among the special
tokens, the document separator its chunking looks for. `bpe verify --require-special '<|endoftext|>'`
checks it under that restriction, and it then passes."""

import reference
from reference import *  # noqa: F403

_train = reference.run_train_bpe


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    separator = special_tokens.index("<|endoftext|>")  # ValueError when it is not there
    assert special_tokens[separator] == "<|endoftext|>"
    return _train(input_path, vocab_size, special_tokens, **kwargs)
