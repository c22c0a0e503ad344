"""The preset split patterns from 64-byte blocks of ASCII (csrc/scan_blocks.h) against `regex`.

The compiled encoder and counter split ASCII text with GPT-2's, cl100k's and o200k's patterns from
class masks of a whole block at a time (a text's last 80 bytes from a copy padded with spaces), and
leave everything else (non-ASCII within reach, a pre-token longer than a block) to the scanner.
Encoder.split_utf8 returns the pre-token ends exactly as the encoder finds them, which must be where
`regex.finditer` of the preset's pattern ends each match, for texts long enough to hold many blocks
and for short ones, with every ASCII class boundary at every offset of a block and at every distance
from the end; the counter's counts of such texts must be the regex's, and the encoder's ids those of
the pure-Python encoder (which splits with the regex). Every test runs for each preset.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from conftest import examples, require_compiled_core, require_text
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import train_bpe
from bpe_impls.base import compiled
from bpe_impls.base.patterns import PRESETS
from bpe_impls.corpus.tally import pretoken_counter
from bpe_impls.encoding.encoders import native_encoder
from bpe_impls.encoding.tokenizer import Tokenizer

require_compiled_core()

EOT = "<|endoftext|>"

# The ASCII pieces where the presets' alternatives meet: contractions in both cases (GPT-2's are
# lower case only; o200k's join the letters before them) and near misses, letters in both cases
# (o200k splits lower before upper), space before each class, whitespace runs of each kind before
# each class and after punctuation (cl100k and o200k take newlines after punctuation, o200k also /),
# digit runs (cl100k and o200k cut them every 3), control characters (not whitespace to the regex:
# \x1c-\x1f), and DEL.
ASCII_PIECES = [
    "a",
    "Z",
    "word",
    "Words",
    "WORDS",
    "wORD",
    "camelCase",
    "ABCdef",
    "0",
    "42",
    "2024",
    "1234567",
    ".",
    ",",
    "!?",
    "--",
    "$",
    "/",
    "//",
    "./",
    "'",
    "''",
    "'s",
    "'d",
    "'m",
    "'t",
    "'ll",
    "'ve",
    "'re",
    "'S",
    "'LL",
    "'Ve",
    "'rE",
    "'l",
    "'v",
    "'r",
    "'x",
    "n't",
    "it's",
    "IT'S",
    "we'll",
    "it's's",
    " '",
    " 's",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    "\x0b",
    "\x0c",
    " \n",
    "\n ",
    "\n  ",
    "  \n  ",
    " \t",
    "\t\t",
    ".\n",
    ".\n/",
    ".\n/\n",
    "!\r\n ",
    "\x00",
    "\x1c",
    "\x1f",
    "\x7f",
    "~",
    "_",
    "a" * 70,
    "aB" * 35,
    " " * 70,
    "\n" * 70,
    " \n" * 35,
    "." * 70,
    "7" * 70,
    "/\n" * 35,
]
# A few non-ASCII pieces: a block within reach of one is left to the scanner.
OTHER_PIECES = ["é", "中文", "\u00a0", "\u2028", "²", "\U0001f642", "\u017f"]
# Characters for texts around block boundaries: letters in both cases (the contraction letters
# among them), digits, spaces, whitespace, apostrophes, punctuation with /.
BOUNDARY_CHARS = "aAbBsSdDtTmMlLvVrReEzZ0179    \t\r\n\x0b''.,-!/"

long_ascii = st.lists(st.sampled_from(ASCII_PIECES), min_size=20, max_size=400).map("".join)
long_mixed = st.lists(
    st.one_of(st.sampled_from(ASCII_PIECES), st.sampled_from(OTHER_PIECES)), min_size=20, max_size=400
).map("".join)
any_ascii = st.text(st.characters(max_codepoint=127), min_size=80, max_size=600)


@st.composite
def boundary_texts(draw) -> str:
    """60-300 characters of BOUNDARY_CHARS, and now and then a non-ASCII character inserted."""
    chars = draw(st.lists(st.sampled_from(BOUNDARY_CHARS), min_size=60, max_size=300))
    for _ in range(draw(st.integers(0, 2))):
        chars.insert(draw(st.integers(0, len(chars))), draw(st.sampled_from(OTHER_PIECES)))
    return "".join(chars)


@pytest.fixture(scope="module", params=list(PRESETS))
def name(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def encoder(name):
    # The split does not depend on the vocabulary: the 256 bytes and no merges.
    return native_encoder(list(range(256)), {}, 0, PRESETS[name])


@pytest.fixture(scope="module")
def tokenizers(name):
    """A vocab trained under the preset on real text: the compiled encoder and the pure-Python one."""
    vocab, merges = train_bpe(require_text("tinystories_sample.txt"), 600, [EOT], num_workers=1, pattern=name)
    return (
        Tokenizer(vocab, merges, [EOT], encoder="native", pattern=name),
        Tokenizer(vocab, merges, [EOT], encoder="hybrid", pattern=name),
    )


def regex_ends(name: str, data: bytes) -> list[int]:
    # the byte offset of each match's end (the matches cover the text, one after another)
    ends, end = [], 0
    for match in PRESETS[name].compiled.finditer(data.decode("utf-8")):
        end += len(match.group().encode("utf-8"))
        ends.append(end)
    return ends


def assert_splits_as_regex(name: str, encoder, text: str) -> None:
    data = text.encode("utf-8")
    assert encoder.split_utf8(data) == regex_ends(name, data)
    counter = pretoken_counter(compiled=True, pattern=PRESETS[name])
    assert counter.add_utf8(data, []) is True
    assert counter.to_dict() == Counter(match.encode("utf-8") for match in PRESETS[name].compiled.findall(text))


@settings(max_examples=examples(300))
@given(text=long_ascii)
def test_ascii_blocks_split_as_the_regex_does(name, encoder, text):
    assert_splits_as_regex(name, encoder, text)


@settings(max_examples=examples(300))
@given(text=any_ascii)
def test_any_ascii_splits_as_the_regex_does(name, encoder, text):
    assert_splits_as_regex(name, encoder, text)


@settings(max_examples=examples(200))
@given(text=long_mixed)
def test_blocks_beside_other_text_split_as_the_regex_does(name, encoder, text):
    assert_splits_as_regex(name, encoder, text)


@settings(max_examples=examples(500))
@given(text=boundary_texts())
def test_texts_around_block_boundaries_split_and_encode_as_the_regex_does(name, encoder, tokenizers, text):
    """Character by character, so runs of each class and each contraction land anywhere in a block
    and near the end of the text: the split (encoder and counter, and the str scanner), and the ids
    of the compiled encoder against the pure-Python one."""
    assert_splits_as_regex(name, encoder, text)
    assert compiled.core().pretokenize(text, name) == PRESETS[name].compiled.findall(text)
    fast, slow = tokenizers
    assert fast.encode_ordinary(text) == slow.encode_ordinary(text)


def test_every_triple_of_the_ascii_classes_at_every_block_offset(name, encoder):
    """Every triple of characters from each class the presets tell apart (and every contraction
    letter in both cases), back to back, so each boundary falls at many offsets of a block, next to
    every neighbour."""
    alphabet = "aZ0'sdmtlvreSLE \t\n\r\x0b./\x1c"
    text = "".join("".join(triple) for triple in itertools.product(alphabet, repeat=3))
    assert_splits_as_regex(name, encoder, text)
    for shift in range(1, 5):  # and each boundary at the other offsets
        assert_splits_as_regex(name, encoder, "x" * shift + text)


@settings(max_examples=examples(300))
@given(text=st.lists(st.sampled_from(ASCII_PIECES), max_size=8).map("".join))
def test_short_ascii_texts_split_as_the_regex_does(name, encoder, text):
    """Texts within one padded block: whitespace, contractions and runs at the very end."""
    assert_splits_as_regex(name, encoder, text)


def test_every_end_of_the_ascii_triples_splits_as_the_regex_does(name, encoder):
    """The triples text cut at every length up to two blocks and a half: each class boundary and
    each whitespace run meets the end of the text at every offset of the padded last block."""
    alphabet = "aZ0'sdmtlvreSLE \t\n\r\x0b./\x1c"
    text = "".join("".join(triple) for triple in itertools.product(alphabet, repeat=3))
    for start in range(0, 600, 37):
        for length in range(1, 170):
            assert_splits_as_regex(name, encoder, text[start : start + length])


@pytest.mark.parametrize("fixture", ["kjv.txt", "tinystories_sample.txt", "corpus.en", "address.txt", "german.txt"])
def test_real_text_splits_as_the_regex_does(name, encoder, fixture):
    assert_splits_as_regex(name, encoder, require_text(fixture).read_text(encoding="utf-8"))


def test_split_refuses_invalid_utf8(encoder):
    with pytest.raises(ValueError, match="not UTF-8"):
        encoder.split_utf8(b"abc \xff def")
