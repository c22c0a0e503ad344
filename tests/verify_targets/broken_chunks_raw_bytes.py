"""Bug: the corpus file is cut into NUM_PROCESSES raw byte ranges, one per worker, each decoded and
pre-tokenized on its own: a word (or a UTF-8 character) that straddles a cut is split in two.
(The fix: cut only at a special token, as CS336's find_chunk_boundaries does.)"""

import os
from collections import Counter

import reference
from reference import *  # noqa: F403

NUM_PROCESSES = 4  # os.cpu_count() on the machine it was written on


def _count_chunk(input_path, start, end, special_tokens):
    # One worker's share (a multiprocessing.Pool would run these in parallel).
    with open(input_path, "rb") as file:
        file.seek(start)
        chunk = file.read(end - start).decode("utf-8", errors="ignore")
    return reference.count_words(chunk, special_tokens)


def _read_and_count(input_path, special_tokens):
    size = os.path.getsize(input_path)
    bounds = [size * i // NUM_PROCESSES for i in range(NUM_PROCESSES + 1)]
    words = Counter()
    for start, end in zip(bounds, bounds[1:]):
        words += _count_chunk(input_path, start, end, special_tokens)
    return words


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    words = _read_and_count(input_path, special_tokens)
    return reference.train_from_words(words, vocab_size, special_tokens)
