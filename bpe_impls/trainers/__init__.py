"""Trainers: word counts in, (vocab, merges) out, identical for every implementation.

One module per trainer (naive, inverted_index = "route_a", linked_list = "route_b",
count_buckets = "bucket", native = the C merge loop), the registry that names them, what they
share (common: tie-break, token table, vocab layout, argument checks), the per-merge statistics
`bpe scaling` reports (instrumented: counted around the Python merge loops, not inside them), and
the pipeline from text to a tokenizer (train: `train_bpe` from corpus files,
`train_bpe_from_iterator` from an iterable of documents), which counts with the corpus layer below.
"""

from .common import Merges, Trainer, Vocab, WordCounts
from .registry import ALIASES, DEFAULT_IMPL, IMPLEMENTATIONS, canonical_name, get_trainer, trainer_names
from .train import train_bpe, train_bpe_from_iterator

__all__ = [
    "ALIASES",
    "DEFAULT_IMPL",
    "canonical_name",
    "trainer_names",
    "IMPLEMENTATIONS",
    "Merges",
    "Trainer",
    "Vocab",
    "WordCounts",
    "get_trainer",
    "train_bpe",
    "train_bpe_from_iterator",
]
