"""A plain byte-level BPE in the CS336 adapter shape, written from the contract alone (it does
not import bpe_impls): `bpe verify` must pass it, and must catch each broken copy beside it
(broken_*.py), which differ from it in one realistic bug each.

Slow on purpose: every merge recounts every pair, as a first implementation would.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

import regex

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def split_on_specials(text: str, special_tokens: list[str]) -> list[str]:
    """The text between special tokens, which are matched longest first (the separators dropped)."""
    if not special_tokens:
        return [text]
    ordered = sorted(special_tokens, key=len, reverse=True)
    return regex.split("|".join(regex.escape(token) for token in ordered), text)


def count_words(text: str, special_tokens: list[str]) -> Counter:
    counts: Counter = Counter()
    for piece in split_on_specials(text, special_tokens):
        for match in regex.finditer(GPT2_PATTERN, piece):
            counts[tuple(bytes([b]) for b in match.group().encode("utf-8"))] += 1
    return counts


def count_pairs(words: Counter) -> Counter:
    pairs: Counter = Counter()
    for word, count in words.items():
        for pair in zip(word, word[1:]):
            pairs[pair] += count
    return pairs


def best_pair(pairs: Counter) -> tuple[bytes, bytes]:
    """The most frequent pair; ties go to the lexicographically greatest (bytes, bytes)."""
    return max(pairs, key=lambda pair: (pairs[pair], pair))


def merge_word(word: tuple[bytes, ...], pair: tuple[bytes, bytes]) -> tuple[bytes, ...]:
    """Greedy, left to right: aaaaa with (a, a) -> aa aa a."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def initial_vocab(special_tokens: list[str]) -> dict[int, bytes]:
    vocab = {i: token.encode("utf-8") for i, token in enumerate(special_tokens)}
    vocab.update({len(special_tokens) + b: bytes([b]) for b in range(256)})
    return vocab


def run_train_bpe(input_path: str, vocab_size: int, special_tokens: list[str], **kwargs: object):
    with open(input_path, encoding="utf-8", newline="") as file:
        text = file.read()
    return train_from_words(count_words(text, special_tokens), vocab_size, special_tokens)


def train_from_words(words: Counter, vocab_size: int, special_tokens: list[str]):
    """The merges over pre-token counts, and the vocab: specials, bytes, merges in order."""
    vocab = initial_vocab(special_tokens)
    merges: list[tuple[bytes, bytes]] = []
    while len(vocab) < vocab_size:
        pairs = +count_pairs(words)
        if not pairs:
            break
        pair = best_pair(pairs)
        merges.append(pair)
        vocab[len(vocab)] = pair[0] + pair[1]
        merged: Counter = Counter()
        for word, count in words.items():
            merged[merge_word(word, pair)] += count
        words = merged
    return vocab, merges


class Tokenizer:
    def __init__(self, vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], special_tokens=None):
        self.vocab = vocab
        self.ids = {token: i for i, token in vocab.items()}
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        self.special_tokens = list(special_tokens or [])
        for token in self.special_tokens:  # a special token not in the vocab gets the next id
            if token.encode("utf-8") not in self.ids:
                self.ids[token.encode("utf-8")] = max(self.vocab) + 1
                self.vocab[self.ids[token.encode("utf-8")]] = token.encode("utf-8")

    def bpe(self, word: bytes) -> list[int]:
        parts = [bytes([b]) for b in word]
        while len(parts) > 1:
            ranked = [(self.ranks.get(pair, float("inf")), i) for i, pair in enumerate(zip(parts, parts[1:]))]
            rank, i = min(ranked)
            if rank == float("inf"):
                break
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        return [self.ids[part] for part in parts]

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        if self.special_tokens:
            ordered = sorted(self.special_tokens, key=len, reverse=True)
            chunks = regex.split("(" + "|".join(regex.escape(t) for t in ordered) + ")", text)
        else:
            chunks = [text]
        for k, chunk in enumerate(chunks):
            if k % 2:
                ids.append(self.ids[chunk.encode("utf-8")])
                continue
            for match in regex.finditer(GPT2_PATTERN, chunk):
                ids += self.bpe(match.group().encode("utf-8"))
        return ids

    def decode(self, ids: list[int]) -> str:
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        yield from self.encode("".join(iterable))


def get_tokenizer(vocab, merges, special_tokens=None) -> Tokenizer:
    return Tokenizer(dict(vocab), list(merges), special_tokens)
