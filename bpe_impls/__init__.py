"""bpe_impls: byte-level BPE trainers side by side, proven identical, measured for speed and memory.

    from bpe_impls import train_bpe, Tokenizer
    vocab, merges = train_bpe("corpus.txt", 10_000, ["<|endoftext|>"])
    tok = Tokenizer(vocab, merges, ["<|endoftext|>"])
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from .common import Merges, Trainer, Vocab, merge_budget
from .errors import BpeError, ConfigError, CorpusError, EncodeError, TokenizerFileError, WorkerError
from .pretokenize import count_pretokens, validate_special_tokens
from .registry import DEFAULT_IMPL, IMPLEMENTATIONS, get_trainer
from .tokenizer import Tokenizer

__all__ = [
    "train_bpe", "Tokenizer", "IMPLEMENTATIONS", "DEFAULT_IMPL", "count_pretokens",
    "BpeError", "ConfigError", "CorpusError", "EncodeError", "TokenizerFileError", "WorkerError",
    "Trainer", "Vocab", "Merges",
]


def train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: Iterable[str] | None = None,
    *,
    impl: str | None = None,
    num_workers: int | None = None,
    progress: bool = False,
) -> tuple[Vocab, Merges]:
    """Train a byte-level BPE tokenizer on a UTF-8 text file.

    Returns (vocab, merges): vocab maps id -> token bytes (special tokens first, then the 256
    bytes, then one token per merge); merges are (left, right) byte pairs in creation order.
    `impl` names a trainer in IMPLEMENTATIONS (default: the fastest); every trainer and every
    `num_workers` gives the identical result.
    """
    specials = validate_special_tokens(special_tokens)
    merge_budget(vocab_size, specials)  # reject a bad size before the (long) counting pass
    trainer = get_trainer(impl)
    word_counts = count_pretokens(input_path, specials, num_workers, progress=progress)
    return trainer(word_counts, vocab_size, specials, progress=progress)
