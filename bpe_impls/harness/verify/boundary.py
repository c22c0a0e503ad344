"""The explicit boundary cases each clause tries before its random search, whatever the seed.

The engine calls `train_cases(clause)` for a trainer's clause and `encode_cases(clause)` for a
tokenizer's or an encoder's, and checks every case returned before Hypothesis generates any (a
divergence found here is shrunk like any other). Both return [] for a clause they have no cases for.

This is the interface's stub: the cases themselves (contractions after each kind of whitespace,
digits next to letters, specials adjacent and overlapping, ties in counts, ...) come with the
search work on strategies.py.
"""

from __future__ import annotations


def train_cases(clause: str) -> list[tuple[str, list[str], int]]:
    """(corpus, special tokens, vocab size) for a trainer's clause."""
    return []


def encode_cases(clause: str) -> list[tuple[str, list[str]]]:
    """(text, special tokens) for a tokenizer's or an encoder's clause."""
    return []
