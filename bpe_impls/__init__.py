"""bpe_impls: byte-level BPE trainers side by side, proven identical, measured for speed and memory.

    from bpe_impls import train_bpe, Tokenizer
    vocab, merges = train_bpe("corpus.txt", 10_000, ["<|endoftext|>"])
    vocab, merges = train_bpe("shards/*.jsonl.zst", 10_000, ["<|endoftext|>"], backend="dask")
    tok = Tokenizer(vocab, merges, ["<|endoftext|>"])

The package is layered, each layer importing only those below it. The library: base (patterns,
errors, checks, atomic files, the compiled core's loader) < corpus (files to pre-token counts) <
trainers (counts to vocab and merges) < encoding (text to ids, file formats, files to ids files).
Above it the harness (compare, scaling, report, peers, corpus generators, fixture finder), and on
top the `bpe` command line (cli).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base.errors import BpeError, ConfigError, CorpusError, EncodeError, TokenizerFileError, WorkerError
from .base.lazy import lazy_names

# Each name's subpackage is imported when the name is first used (PEP 562), so `from bpe_impls
# import Tokenizer` does not import the trainers, the corpus layer or their dependencies.
_LAZY = {
    "Tokenizer": ".encoding",
    "SkippedRecordsWarning": ".corpus",
    "count_pretokens": ".corpus",
    "DEFAULT_IMPL": ".trainers",
    "IMPLEMENTATIONS": ".trainers",
    "Merges": ".trainers",
    "Trainer": ".trainers",
    "Vocab": ".trainers",
    "get_trainer": ".trainers",
    "train_bpe": ".trainers",
    "train_bpe_from_iterator": ".trainers",
}

if TYPE_CHECKING:
    from .corpus import SkippedRecordsWarning, count_pretokens
    from .encoding import Tokenizer
    from .trainers import (
        DEFAULT_IMPL,
        IMPLEMENTATIONS,
        Merges,
        Trainer,
        Vocab,
        get_trainer,
        train_bpe,
        train_bpe_from_iterator,
    )


__getattr__, __dir__ = lazy_names(__name__, _LAZY)


__all__ = [
    "train_bpe",
    "train_bpe_from_iterator",
    "Tokenizer",
    "IMPLEMENTATIONS",
    "DEFAULT_IMPL",
    "get_trainer",
    "count_pretokens",
    "BpeError",
    "ConfigError",
    "CorpusError",
    "EncodeError",
    "TokenizerFileError",
    "WorkerError",
    "SkippedRecordsWarning",
    "Trainer",
    "Vocab",
    "Merges",
]
