"""The naive trainer is the spec: check it against examples worked out by hand."""

from __future__ import annotations

import pytest

from bpe_impls.base.errors import ConfigError
from bpe_impls.trainers import naive
from bpe_impls.trainers.common import build_vocab, merge_budget


def test_design_notes_worked_example():
    # pairs: ug 10+5+5=20 beats pu 17, un 16, hu 15; then after (u,g): un 12+4=16 beats pu 12.
    words = {b"hug": 10, b"pug": 5, b"pun": 12, b"bun": 4, b"hugs": 5}
    _, merges = naive.train(words, 258)
    assert merges == [(b"u", b"g"), (b"u", b"n")]


def test_merge_is_greedy_left_to_right():
    a = tuple(bytes([c]) for c in b"aaaaa")
    assert naive.merge_word(a, (b"a", b"a")) == (b"aa", b"aa", b"a")
    bnanana = tuple(bytes([c]) for c in b"bnanana")
    assert naive.merge_word(bnanana, (b"n", b"a")) == (b"b", b"na", b"na", b"na")


def test_overlapping_occurrences_count_at_every_position():
    # "aaa" x1 holds (a,a) twice: count 2 beats (b,c) at 1, though (b,c) is greater by bytes
    _, merges = naive.train({b"aaa": 1, b"bc": 1}, 257)
    assert merges == [(b"a", b"a")]


def test_ties_go_to_the_lexicographically_greatest_pair():
    _, merges = naive.train({b"ab": 3, b"cd": 3, b"bz": 3}, 257)
    assert merges == [(b"c", b"d")]
    # compared as (left, right) byte strings: (b"b", b"z") > (b"a", b"b") but < (b"c", b"d")
    _, merges = naive.train({b"ab": 3, b"bz": 3}, 257)
    assert merges == [(b"b", b"z")]


def test_multibyte_characters_merge_from_their_bytes():
    _, merges = naive.train({"é".encode(): 2}, 257)
    assert merges == [(b"\xc3", b"\xa9")]


def test_training_stops_when_no_pair_is_left():
    vocab, merges = naive.train({b"abc": 1}, 10_000)
    assert merges == [(b"b", b"c"), (b"a", b"bc")]
    assert len(vocab) == 258


def test_vocab_layout_specials_then_bytes_then_merges():
    vocab, merges = naive.train({b"hug": 10, b"pug": 5}, 259, ["<|endoftext|>", "<pad>"])
    assert vocab[0] == b"<|endoftext|>" and vocab[1] == b"<pad>"
    assert [vocab[2 + b] for b in range(256)] == [bytes([b]) for b in range(256)]
    assert vocab[258] == b"ug"
    assert vocab == build_vocab(["<|endoftext|>", "<pad>"], merges)


def test_vocab_size_below_bytes_plus_specials_is_rejected():
    assert merge_budget(257, ["<|endoftext|>"]) == 0
    with pytest.raises(ConfigError, match="below 256 bytes \\+ 1 special tokens = 257"):
        naive.train({b"ab": 1}, 256, ["<|endoftext|>"])
