"""route_a.train against the spec, naive.train: worked examples, overlapping runs, Hypothesis, real text."""

from __future__ import annotations

import pytest
from conftest import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe_impls import naive, route_a
from bpe_impls.common import build_vocab
from bpe_impls.pretokenize import count_text

EOT = "<|endoftext|>"

# Budgets from none at all to far past every possible merge (training then stops early).
vocab_sizes = st.integers(min_value=256, max_value=256 + 120)
specials = st.sampled_from([(), (EOT,), ("<a>", "<b>")])


def assert_same(word_counts, vocab_size, special_tokens=()):
    expected = naive.train(word_counts, vocab_size, special_tokens)
    assert route_a.train(word_counts, vocab_size, special_tokens) == expected


def fits(vocab_size: int, special_tokens) -> int:
    """A vocab size at least the floor (256 + specials), so merge_budget accepts it."""
    return max(vocab_size, 256 + len(special_tokens))


# --- worked examples ---------------------------------------------------------------------------


def test_worked_example_first_merges():
    counts = {b"hug": 10, b"pug": 5, b"pun": 12, b"bun": 4, b"hugs": 5}
    vocab, merges = route_a.train(counts, 256 + 3)
    # (u,g) = 10+5+5 = 20; then (u,n) = 12+4 = 16; then (h,ug) = 10+5 = 15.
    assert merges == [(b"u", b"g"), (b"u", b"n"), (b"h", b"ug")]
    assert [vocab[i] for i in (256, 257, 258)] == [b"ug", b"un", b"hug"]
    assert_same(counts, 256 + 3)
    assert_same(counts, 256 + 50)


def test_special_tokens_come_first_in_vocab():
    counts = {b"hug": 10, b"pug": 5}
    vocab, merges = route_a.train(counts, 257 + 1, [EOT])
    assert vocab[0] == EOT.encode() and vocab[1] == b"\x00" and vocab[257] == b"ug"
    assert merges == [(b"u", b"g")]


def test_tie_goes_to_greatest_pair():
    assert route_a.train({b"ab": 3, b"cd": 3}, 257)[1] == [(b"c", b"d")]
    # Same left bytes: the greater right side wins.
    assert route_a.train({b"ab": 1, b"ac": 1}, 257)[1] == [(b"a", b"c")]


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        # (a,a) counts twice in `aaa`; greedy merging gives `aa a`, then (aa,a).
        (b"aaa", [(b"a", b"a"), (b"aa", b"a")]),
        # `aaaa` -> `aa aa`: the merge creates the pair (aa,aa).
        (b"aaaa", [(b"a", b"a"), (b"aa", b"aa")]),
        # `aaaaa` -> `aa aa a` -> (aa,aa) beats (aa,a) on bytes -> `aaaa a`.
        (b"aaaaa", [(b"a", b"a"), (b"aa", b"aa"), (b"aaaa", b"a")]),
        # (a,b) x2 beats (b,a) x1; `abab` -> `ab ab` creates (ab,ab).
        (b"abab", [(b"a", b"b"), (b"ab", b"ab")]),
        # (b,a) x2 ties (a,b) x2 and wins on bytes; `ababa` -> `a ba ba`.
        (b"ababa", [(b"b", b"a"), (b"ba", b"ba"), (b"a", b"baba")]),
        # (n,a) x3; `bnanana` -> `b na na na`; (na,na) x2 -> `b nana na`; then a tie.
        (b"bnanana", [(b"n", b"a"), (b"na", b"na"), (b"nana", b"na"), (b"b", b"nanana")]),
    ],
)
def test_overlapping_runs(word, expected):
    vocab, merges = route_a.train({word: 1}, 256 + 20)
    assert merges == expected  # stops early: the word became one token
    assert_same({word: 1}, 256 + 20)


def test_nothing_to_merge():
    assert route_a.train({}, 300) == naive.train({}, 300)
    assert route_a.train({b"a": 5, b"b": 2}, 300) == (build_vocab((), []), [])


def test_zero_vocab_budget():
    assert route_a.train({b"hug": 3}, 256) == (build_vocab((), []), [])
    assert route_a.train({b"hug": 3}, 257, [EOT]) == (build_vocab([EOT], []), [])


def test_progress_bar_does_not_change_the_result():
    counts = {b"hug": 10, b"pug": 5, b"pun": 12}
    assert route_a.train(counts, 300, progress=True) == naive.train(counts, 300)


# --- Hypothesis: against naive ---------------------------------------------------------------

common_settings = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@common_settings
@given(text=st.text(alphabet="ab ", max_size=80), vocab_size=vocab_sizes, special_tokens=specials)
def test_text_two_letters(text, vocab_size, special_tokens):
    assert_same(count_text(text, ()), fits(vocab_size, special_tokens), special_tokens)


@common_settings
@given(text=st.text(alphabet="abc \n", max_size=120), vocab_size=vocab_sizes)
def test_text_three_letters(text, vocab_size):
    assert_same(count_text(text, ()), vocab_size)


# Direct word counts from a tiny alphabet with small counts: pair totals tie constantly.
tiny_words = st.dictionaries(
    keys=st.text(alphabet="ab", min_size=1, max_size=12).map(str.encode),
    values=st.integers(min_value=1, max_value=5),
    max_size=8,
)


@common_settings
@given(word_counts=tiny_words, vocab_size=vocab_sizes)
def test_tiny_alphabet_word_counts(word_counts, vocab_size):
    assert_same(word_counts, vocab_size)


@common_settings
@given(
    word_counts=st.dictionaries(
        keys=st.text(alphabet="abc", min_size=1, max_size=10).map(str.encode),
        values=st.integers(min_value=1, max_value=5),
        max_size=10,
    ),
    vocab_size=vocab_sizes,
)
def test_three_letter_word_counts(word_counts, vocab_size):
    assert_same(word_counts, vocab_size)


long_runs = st.sampled_from(
    [b"aaaaaaa", b"aaaa", b"aaa", b"aa", b"abababab", b"abab", b"baba", b"bnanana", b"nanana", b"aabaabaab"]
)


@common_settings
@given(
    word_counts=st.dictionaries(keys=long_runs, values=st.integers(min_value=1, max_value=5), max_size=6),
    vocab_size=vocab_sizes,
)
def test_long_runs(word_counts, vocab_size):
    assert_same(word_counts, vocab_size)


@common_settings
@given(text=st.text(alphabet="aé€😀 \u00a0", max_size=60), vocab_size=vocab_sizes)
def test_multibyte_utf8(text, vocab_size):
    assert_same(count_text(text, ()), vocab_size)


@settings(max_examples=examples(60), deadline=None)
@given(
    word_counts=st.dictionaries(
        keys=st.binary(min_size=1, max_size=8), values=st.integers(min_value=1, max_value=3), max_size=6
    ),
    vocab_size=vocab_sizes,
)
def test_arbitrary_bytes(word_counts, vocab_size):
    assert_same(word_counts, vocab_size)
