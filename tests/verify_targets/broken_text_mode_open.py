"""Bug: the corpus is opened in text mode with the default newline handling, so "\r\n" (and a lone
"\r") is read as "\n" before anything is counted."""

import reference
from reference import *  # noqa: F403


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    with open(input_path, encoding="utf-8") as file:
        text = file.read()
    return reference.train_from_words(reference.count_words(text, special_tokens), vocab_size, special_tokens)
