"""Bug: the pieces of text between special tokens are pre-tokenized only when `piece.strip()` is
not empty, so a piece that is only whitespace (blank lines between two documents, say) is never
counted, though its whitespace is pre-tokens like any other."""

from collections import Counter

import reference
import regex
from reference import *  # noqa: F403


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    with open(input_path, encoding="utf-8", newline="") as file:
        text = file.read()
    words = Counter()
    for piece in reference.split_on_specials(text, special_tokens):
        if piece.strip():
            for match in regex.finditer(reference.GPT2_PATTERN, piece):
                words[tuple(bytes([b]) for b in match.group().encode("utf-8"))] += 1
    return reference.train_from_words(words, vocab_size, special_tokens)
