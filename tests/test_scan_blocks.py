"""GPT-2's split from 64-byte blocks of ASCII (csrc/scan_blocks.h) against `regex`.

The compiled encoder and counter split ASCII text with GPT-2's pattern from class masks of a whole
block at a time (a text's last 80 bytes from a copy padded with spaces), and leave everything else
(non-ASCII within reach, a pre-token longer than a block) to the scanner. Encoder.split_utf8 returns
the pre-token ends exactly as the encoder finds them, which must be where `regex.finditer` of GPT-2's
pattern ends each match, for texts long enough to hold many blocks and for short ones, with every
ASCII class boundary at every offset of a block and at every distance from the end; the counter's
counts of such texts must be the regex's.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from conftest import examples, require_compiled_core, require_fixture
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls.base.patterns import GPT2_REGEX, PRESETS
from bpe_impls.corpus.tally import pretoken_counter
from bpe_impls.encoding.encoders import native_encoder

require_compiled_core()

# The ASCII pieces where GPT-2's alternatives meet: contractions (lower case only in GPT-2) and
# near misses, space before each class, whitespace runs of each kind before each class, runs of
# each class, control characters (not whitespace to the regex: \x1c-\x1f), and DEL.
ASCII_PIECES = [
    "a", "Z", "word", "Words", "0", "42", "2024", ".", ",", "!?", "--", "$", "'", "''", "'s", "'d", "'m", "'t",
    "'ll", "'ve", "'re", "'S", "'LL", "'Ve", "'l", "'v", "'r", "'x", "n't", "it's", "we'll", " '", " 's",
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\x0b", "\x0c", " \n", "\n ", "  \n  ", " \t",
    "\x00", "\x1c", "\x1f", "\x7f", "~", "_", "a" * 70, " " * 70, "." * 70, "7" * 70,
]
# A few non-ASCII pieces: a block within reach of one is left to the scanner.
OTHER_PIECES = ["é", "中文", "\u00a0", "\u2028", "²", "\U0001f642"]

long_ascii = st.lists(st.sampled_from(ASCII_PIECES), min_size=20, max_size=400).map("".join)
long_mixed = st.lists(
    st.one_of(st.sampled_from(ASCII_PIECES), st.sampled_from(OTHER_PIECES)), min_size=20, max_size=400
).map("".join)
any_ascii = st.text(st.characters(max_codepoint=127), min_size=80, max_size=600)


@pytest.fixture(scope="module")
def encoder():
    # The split does not depend on the vocabulary: the 256 bytes and no merges.
    return native_encoder(list(range(256)), {}, 0, PRESETS["gpt2"])


def regex_ends(data: bytes) -> list[int]:
    # the byte offset of each match's end (the matches cover the text, one after another)
    ends, end = [], 0
    for match in GPT2_REGEX.finditer(data.decode("utf-8")):
        end += len(match.group().encode("utf-8"))
        ends.append(end)
    return ends


def assert_splits_as_regex(encoder, text: str) -> None:
    data = text.encode("utf-8")
    assert encoder.split_utf8(data) == regex_ends(data)
    counter = pretoken_counter(compiled=True)
    assert counter.add_utf8(data, []) is True
    assert counter.to_dict() == Counter(match.encode("utf-8") for match in GPT2_REGEX.findall(text))


@settings(max_examples=examples(300))
@given(text=long_ascii)
def test_ascii_blocks_split_as_the_regex_does(encoder, text):
    assert_splits_as_regex(encoder, text)


@settings(max_examples=examples(300))
@given(text=any_ascii)
def test_any_ascii_splits_as_the_regex_does(encoder, text):
    assert_splits_as_regex(encoder, text)


@settings(max_examples=examples(200))
@given(text=long_mixed)
def test_blocks_beside_other_text_split_as_the_regex_does(encoder, text):
    assert_splits_as_regex(encoder, text)


def test_every_triple_of_the_ascii_classes_at_every_block_offset(encoder):
    """Every triple of characters from each class GPT-2 tells apart (and every contraction letter),
    back to back, so each boundary falls at many offsets of a block, next to every neighbour."""
    alphabet = "aZ0'sdmtlvre \t\n\r\x0b.\x1c"
    text = "".join("".join(triple) for triple in itertools.product(alphabet, repeat=3))
    assert_splits_as_regex(encoder, text)
    for shift in range(1, 5):  # and each boundary at the other offsets
        assert_splits_as_regex(encoder, "x" * shift + text)


@settings(max_examples=examples(300))
@given(text=st.lists(st.sampled_from(ASCII_PIECES), max_size=8).map("".join))
def test_short_ascii_texts_split_as_the_regex_does(encoder, text):
    """Texts within one padded block: whitespace, contractions and runs at the very end."""
    assert_splits_as_regex(encoder, text)


def test_every_end_of_the_ascii_triples_splits_as_the_regex_does(encoder):
    """The triples text cut at every length up to two blocks and a half: each class boundary and
    each whitespace run meets the end of the text at every offset of the padded last block."""
    alphabet = "aZ0'sdmtlvre \t\n\r\x0b.\x1c"
    text = "".join("".join(triple) for triple in itertools.product(alphabet, repeat=3))
    for start in range(0, 600, 37):
        for length in range(1, 170):
            assert_splits_as_regex(encoder, text[start : start + length])


@pytest.mark.parametrize("fixture", ["kjv.txt", "tinystories_sample.txt", "corpus.en", "address.txt", "german.txt"])
def test_real_text_splits_as_the_regex_does(encoder, fixture):
    assert_splits_as_regex(encoder, require_fixture(fixture).read_text(encoding="utf-8"))


def test_split_refuses_invalid_utf8(encoder):
    with pytest.raises(ValueError, match="not UTF-8"):
        encoder.split_utf8(b"abc \xff def")
