"""route_b.train must return exactly what naive.train (the spec) returns, on every input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpe_impls import naive, route_b
from bpe_impls.errors import ConfigError
from bpe_impls.pretokenize import count_text

SPECIAL = "<|endoftext|>"


def assert_same(word_counts, vocab_size, special_tokens=()):
    expected = naive.train(word_counts, vocab_size, special_tokens)
    assert route_b.train(word_counts, vocab_size, special_tokens) == expected


# Budgets from none, through a few merges, to far past every possible merge (training runs dry).
vocab_sizes = st.one_of(st.integers(256, 300), st.just(100_000))
specials = st.sampled_from([(), (SPECIAL,)])


@st.composite
def tiny_alphabet_words(draw, max_count=5, min_count=1):
    """Direct word counts over 1-3 symbols; small counts make ties (broken by bytes) the norm."""
    alphabet = draw(st.sampled_from([b"a", b"ab", b"abc", b"ba\xff"]))
    word = st.lists(st.sampled_from(alphabet), max_size=12).map(bytes)
    return draw(st.dictionaries(word, st.integers(min_count, max_count), max_size=8))


@given(text=st.text(alphabet="ab ", max_size=80), vocab_size=vocab_sizes, special_tokens=specials)
def test_matches_naive_on_pretokenized_text(text, vocab_size, special_tokens):
    if len(special_tokens) and vocab_size == 256:
        vocab_size = 257
    assert_same(count_text(text, ()), vocab_size, special_tokens)


@given(word_counts=tiny_alphabet_words(), vocab_size=vocab_sizes)
def test_matches_naive_on_tiny_alphabets(word_counts, vocab_size):
    assert_same(word_counts, vocab_size)


@given(text=st.text(alphabet="aé€🙂 ", max_size=40), vocab_size=vocab_sizes)
def test_matches_naive_on_multibyte_text(text, vocab_size):
    assert_same(count_text(text, ()), vocab_size)


@given(
    word_counts=st.dictionaries(
        st.lists(st.sampled_from(["é", "🙂", "a"]), min_size=1, max_size=8).map(lambda s: "".join(s).encode()),
        st.integers(1, 5),
        max_size=6,
    ),
    vocab_size=vocab_sizes,
)
def test_matches_naive_on_multibyte_words(word_counts, vocab_size):
    assert_same(word_counts, vocab_size)


@pytest.mark.parametrize(
    "word_counts",
    [
        {b"aaaaaaa": 1},
        {b"aaaaaaaa": 3, b"aaa": 2},
        {b"abababab": 2},
        {b"bnanana": 1},
        {b"bnanana": 2, b"nanan": 3, b"ananas": 1},
        {b"abcabcabc": 4, b"cabca": 4},
        {b"aabaabaab": 1, b"aaaabaaaab": 2},
        {b"a" * 40: 1, b"ab" * 20: 1, b"ba" * 20: 2},
        {"🙂🙂🙂🙂".encode(): 3, "éééé".encode(): 3},
        {b"": 5, b"a": 3, b"ab": 1},  # words without pairs
    ],
)
@pytest.mark.parametrize("vocab_size", [256, 257, 260, 270, 100_000])
def test_matches_naive_on_runs(word_counts, vocab_size):
    assert_same(word_counts, vocab_size)


def test_worked_example():
    word_counts = {b"hug": 10, b"pug": 5, b"pun": 12, b"bun": 4, b"hugs": 5}
    vocab, merges = route_b.train(word_counts, 258, [SPECIAL])
    assert merges == [(b"u", b"g")]
    assert vocab[0] == SPECIAL.encode() and vocab[257] == b"ug"
    vocab, merges = route_b.train(word_counts, 258)
    assert merges == [(b"u", b"g"), (b"u", b"n")]
    assert vocab[256] == b"ug" and vocab[257] == b"un"
    assert_same(word_counts, 1000, [SPECIAL])


def test_overlapping_run_merges_left_to_right():
    _, merges = route_b.train({b"aaaaa": 1}, 258)
    # aaaaa -> aa aa a: (aa, aa) occurs once, (aa, a) once; the tie goes to the greater bytes.
    assert merges == [(b"a", b"a"), (b"aa", b"aa")]


def test_rejects_what_naive_rejects():
    with pytest.raises(ConfigError):
        route_b.train({b"ab": 1}, 255)
    with pytest.raises(ConfigError):
        route_b.train({b"ab": 1}, 256, [SPECIAL])


def test_progress_bar_runs(capsys):
    assert route_b.train({b"abab": 2}, 300, progress=True) == naive.train({b"abab": 2}, 300)
