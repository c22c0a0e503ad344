"""Bug: the corpus is read in blocks of 65,536 characters (to bound memory) and each block is
pre-tokenized on its own: a word that straddles a block boundary is counted as two. Only a file
longer than 64 KB shows it; where documents are shorter than that and separated by special tokens,
cutting at the last special token of each block would be right."""

from collections import Counter

import reference
from reference import *  # noqa: F403

BLOCK = 65536


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    words = Counter()
    with open(input_path, encoding="utf-8", newline="") as file:
        while block := file.read(BLOCK):
            words += reference.count_words(block, special_tokens)
    return reference.train_from_words(words, vocab_size, special_tokens)
