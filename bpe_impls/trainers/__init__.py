"""Trainers: word counts in, (vocab, merges) out, identical for every implementation.

One module per trainer (naive, inverted_index = "route_a", linked_list = "route_b",
count_buckets = "bucket", native = the C merge loop), the registry that names them, what they
share (common: tie-break, token table, vocab layout), and `train_bpe`, the pipeline from a corpus.
"""

from .common import Merges, Trainer, Vocab, WordCounts
from .registry import DEFAULT_IMPL, IMPLEMENTATIONS, get_trainer
from .train import train_bpe, train_bpe_from_iterator

__all__ = ["DEFAULT_IMPL", "IMPLEMENTATIONS", "Merges", "Trainer", "Vocab", "WordCounts", "get_trainer", "train_bpe", "train_bpe_from_iterator"]
