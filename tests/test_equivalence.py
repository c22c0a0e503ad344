"""Every registered trainer returns exactly the naive trainer's vocab and merges.

Parametrized over IMPLEMENTATIONS, so a trainer added to the registry is tested without edits.
The strategies aim at the hard cases: constant ties (tiny alphabets, equal counts), overlapping
runs, multi-byte characters, special tokens (several, overlapping, adjacent), empty documents.
"""

from __future__ import annotations

import sys
from collections import Counter

import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import IMPLEMENTATIONS, ConfigError, count_pretokens, train_bpe
from bpe_impls.corpus.tally import count_text
from bpe_impls.trainers import ALIASES, get_trainer, naive, trainer_names

FAST = [name for name in IMPLEMENTATIONS if name != "naive"]
EOT = "<|endoftext|>"
SPECIAL_SETS = [(), (EOT,), (EOT, EOT + EOT), ("<s>", "</s>", "<|endoftext|>")]

fragments = st.sampled_from(
    [
        "a",
        "b",
        "ab",
        "aaaaaaa",
        "abababab",
        "bnanana",
        " a",
        " b",
        " ",
        "  ",
        "\n",
        "\t\n ",
        "é",
        "ü",
        "🙂",
        "👩‍👩‍👧",
        "日本",
        "'s",
        "1",
        "22",
        ".",
        "!?",
        "\r\n",
    ]
)


@st.composite
def corpora(draw) -> tuple[str, tuple[str, ...]]:
    """Documents over a tiny alphabet joined by one or several (possibly overlapping) specials."""
    specials = draw(st.sampled_from(SPECIAL_SETS))
    alphabet = draw(st.sampled_from(["ab", "ab ", "abc \n", None]))
    if alphabet is None:
        document = st.lists(fragments, max_size=25).map("".join)
    else:
        document = st.text(alphabet=alphabet, max_size=40)
    documents = draw(st.lists(document, min_size=1, max_size=6))
    if not specials:
        return "".join(documents), specials
    separators = st.lists(st.sampled_from(specials), min_size=1, max_size=3).map("".join)
    text = documents[0]
    for doc in documents[1:]:
        text += draw(separators) + doc
    return text, specials


# Word counts given directly: a tiny byte alphabet and counts 1..5 make ties constant.
word_count_maps = st.dictionaries(
    st.binary(min_size=1, max_size=8).map(lambda b: bytes(97 + x % 3 for x in b)), st.integers(1, 5), max_size=12
)


def _vocab_size(draw, specials: tuple[str, ...]) -> int:
    # from zero merges up to far more than any of these corpora can make
    return draw(st.integers(256 + len(specials), 256 + len(specials) + 300))


@pytest.mark.parametrize("impl", FAST)
@settings(max_examples=examples(150))
@given(data=st.data())
def test_trainer_matches_naive_on_generated_corpora(impl, data):
    text, specials = data.draw(corpora())
    vocab_size = _vocab_size(data.draw, specials)
    counts = count_text(text, specials)
    assert IMPLEMENTATIONS[impl](counts, vocab_size, specials) == naive.train(counts, vocab_size, specials)


@pytest.mark.parametrize("impl", FAST)
@settings(max_examples=examples(150))
@given(counts=word_count_maps, extra_merges=st.integers(0, 60))
def test_trainer_matches_naive_on_tied_word_counts(impl, counts, extra_merges):
    vocab_size = 256 + extra_merges
    assert IMPLEMENTATIONS[impl](counts, vocab_size) == naive.train(counts, vocab_size)


# Word counts that stress one mechanism each: overlapping runs merge greedily left to right,
# merges that recreate a pair, multi-byte characters, words without pairs, and a count gap far
# wider than the number of distinct counts (bucket's max pointer must not walk it step by step).
FIXED_CASES = [
    {b"hug": 10, b"pug": 5, b"pun": 12, b"bun": 4, b"hugs": 5},
    {b"aaaaaaa": 1},
    {b"aaaa": 1},
    {b"aaaaaaaa": 3, b"aaa": 2},
    {b"abababab": 2},
    {b"bnanana": 1},
    {b"bnanana": 2, b"nanan": 3, b"ananas": 1},
    {b"aaaaaaa": 3, b"abababab": 2, b"bnanana": 4},
    {b"abcabcabc": 4, b"cabca": 4},
    {b"aabaabaab": 1, b"aaaabaaaab": 2},
    {b"a" * 40: 1, b"ab" * 20: 1, b"ba" * 20: 2},
    {"🙂🙂🙂🙂".encode(): 3, "éééé".encode(): 3},
    {b"": 5, b"a": 3, b"ab": 1},
    {b"a": 7},
    {},
    {b"ab": 10**15, b"cd": 1, b"ef": 2},
]


@pytest.mark.parametrize("impl", FAST)
@pytest.mark.parametrize("words", FIXED_CASES)
@pytest.mark.parametrize("vocab_size", [256, 257, 260, 270, 100_000])
def test_trainer_matches_naive_on_fixed_cases(impl, words, vocab_size):
    assert IMPLEMENTATIONS[impl](words, vocab_size) == naive.train(words, vocab_size)


@pytest.mark.parametrize("impl", FAST)
def test_trainer_matches_naive_with_special_tokens_in_the_layout(impl):
    words = FIXED_CASES[0]
    assert IMPLEMENTATIONS[impl](words, 400, [EOT, "<pad>"]) == naive.train(words, 400, [EOT, "<pad>"])


multibyte_words = st.dictionaries(
    st.lists(st.sampled_from(["é", "🙂", "a", "👩‍👧", "€", "\u00a0"]), min_size=1, max_size=8).map(
        lambda chars: "".join(chars).encode()
    ),
    st.integers(1, 5),
    max_size=6,
)
repeated_runs = st.builds(
    lambda pieces, counts: {("".join(pieces) * (i + 1)).encode(): c for i, c in enumerate(counts)},
    st.lists(st.sampled_from(["a", "aa", "ab", "ba", "na", "b"]), min_size=1, max_size=10),
    st.lists(st.integers(1, 5), min_size=1, max_size=4),
)
arbitrary_bytes = st.dictionaries(st.binary(min_size=1, max_size=8), st.integers(1, 3), max_size=6)


@pytest.mark.parametrize("impl", FAST)
@settings(max_examples=examples(100))
@given(counts=st.one_of(multibyte_words, repeated_runs, arbitrary_bytes), extra_merges=st.integers(0, 80))
def test_trainer_matches_naive_on_runs_multibyte_and_arbitrary_bytes(impl, counts, extra_merges):
    assert IMPLEMENTATIONS[impl](counts, 256 + extra_merges) == naive.train(counts, 256 + extra_merges)


@pytest.mark.parametrize("impl", list(IMPLEMENTATIONS))
def test_progress_bar_does_not_change_the_result(impl):
    words = FIXED_CASES[7]
    assert IMPLEMENTATIONS[impl](words, 300, progress=True) == naive.train(words, 300)


@pytest.mark.parametrize("impl", list(IMPLEMENTATIONS))
@pytest.mark.parametrize(
    "vocab_size, specials, needle",
    [(255, [], "below 256"), (256, [EOT], "below 256"), (300, [EOT, EOT], "twice"), (300, [""], "empty")],
)
def test_every_trainer_rejects_bad_arguments(impl, vocab_size, specials, needle):
    with pytest.raises(ConfigError, match=needle):
        IMPLEMENTATIONS[impl]({b"ab": 1}, vocab_size, specials)


@pytest.mark.parametrize("impl", list(IMPLEMENTATIONS))
@pytest.mark.parametrize(
    "bad", [{b"ab": 0}, {b"ab": -3}, {b"ab": 1.5}, {"ab": 2}], ids=["zero", "negative", "float", "str-key"]
)
def test_every_trainer_rejects_invalid_word_counts(impl, bad):
    with pytest.raises(ConfigError, match="ab"):
        IMPLEMENTATIONS[impl]({b"xy": 2, **bad}, 300)


@pytest.mark.parametrize("impl", list(IMPLEMENTATIONS))
def test_output_is_identical_for_1_2_4_workers_and_across_runs(impl, tmp_path):
    text = "".join(f"Story {i}: the cat saw {i % 7} dogs. 'Hi!' said Bob.\n{EOT}" for i in range(400))
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    results = [train_bpe(path, 320, [EOT], impl=impl, num_workers=n) for n in (1, 2, 4, 2)]
    assert all(result == results[0] for result in results[1:])
    assert results[0] == naive.train(count_text(text, (EOT,)), 320, [EOT])


# --- real data: slow, but run in CI ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("vocab_size", [500, 2000])
def test_all_trainers_identical_on_corpus_en(corpus_en, vocab_size):
    counts = count_pretokens(corpus_en, [EOT])
    expected = naive.train(counts, vocab_size, [EOT])
    for impl in FAST:
        assert IMPLEMENTATIONS[impl](counts, vocab_size, [EOT]) == expected, impl


@pytest.mark.slow
def test_all_trainers_identical_on_tinystories_sample(tinystories_sample):
    counts = count_pretokens(tinystories_sample, [EOT])
    expected = naive.train(counts, 1000, [EOT])
    for impl in FAST:
        assert IMPLEMENTATIONS[impl](counts, 1000, [EOT]) == expected, impl


@pytest.mark.slow
def test_fast_trainers_identical_on_kjv_at_10000(kjv):
    # naive would take many minutes here, so the fast trainers are checked against each other
    # (each is proven equal to naive on the smaller corpora above).
    if len(FAST) < 2:
        pytest.skip("fewer than two fast trainers registered")
    counts: Counter[bytes] = count_pretokens(kjv, [EOT])
    results = {impl: IMPLEMENTATIONS[impl](counts, 10_000, [EOT]) for impl in FAST}
    first = results[FAST[0]]
    assert len(first[1]) == 10_000 - 257
    for impl, result in results.items():
        assert result == first, impl


def test_each_trainer_is_also_known_by_its_module_name():
    for alias, name in ALIASES.items():
        if name in IMPLEMENTATIONS:
            module = sys.modules[get_trainer(alias).__module__]
            assert module.__name__.rsplit(".", 1)[1] == alias
            assert get_trainer(alias) is IMPLEMENTATIONS[name]
            assert alias in trainer_names() and alias not in IMPLEMENTATIONS
    with pytest.raises(ConfigError, match="unknown trainer 'route_c'; choose from naive, route_a"):
        get_trainer("route_c")
