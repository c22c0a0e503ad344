"""The compiled scanners of every preset split pattern (gpt2, cl100k, o200k) against `regex`.

For each preset, the C scanner (over a str of each PEP 393 kind, and over UTF-8 bytes) must cut
text exactly as `regex.finditer` of the preset's pattern string does; the compiled counter must
count as RegexCounter(pattern) does; the compiled encoder must give PythonEncoder's ids, and
PythonEncoder._settled's cut for encode_iterable, with that pattern. tests/test_native.py proves
the same of GPT-2's scanner at greater length; here every preset gets the same proofs, with text
built around the boundaries of cl100k's and o200k's alternatives.
"""

from __future__ import annotations

import unicodedata
from collections import Counter

import pytest
import regex
from conftest import examples, require_compiled_core, require_fixture
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import count_pretokens, train_bpe
from bpe_impls.base import compiled
from bpe_impls.base.errors import ConfigError
from bpe_impls.base.patterns import PRESETS, SplitPattern
from bpe_impls.corpus.tally import RegexCounter, count_text, has_compiled_counter, pretoken_counter
from bpe_impls.encoding import tokenizer as tokenizer_module
from bpe_impls.encoding.encoders import default_encoder, native_encoder
from bpe_impls.encoding.tokenizer import Tokenizer

require_compiled_core()

core = compiled.core()
EOT = "<|endoftext|>"
NAMES = list(PRESETS)
FIXTURES = ["address.txt", "german.txt", "tinystories_sample.txt", "corpus.en", "kjv.txt"]

# Every Unicode general category, so each class of the table (and each of o200k's letter sets:
# Lu Lt | Ll | Lm Lo, marks Mn Mc Me) meets every alternative's boundaries.
CATEGORIES = [
    "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po",
    "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cn",
]
one_of_each_category = st.sampled_from(CATEGORIES).flatmap(lambda c: st.characters(categories=[c]))

# The pieces where the presets' alternatives meet.
EDGE_PIECES = [
    # letters of each set: lower, upper, title case (Lt), modifier (Lm), other (Lo), non-ASCII
    "a", "z", "A", "Z", "é", "É", "ß", "ǅ", "ᾈ", "ʰ", "ˇ", "中", "ا", "ſ",
    # upper runs followed by lower (o200k's two letter alternatives), CamelCase, all caps
    "ABc", "HTTPServer", "XMLHttp", "iPhone", "ABC", "AbC",
    # combining marks after letters and alone (Mn, Mc, Me)
    "\u0301", "e\u0301", "E\u0301x", "\u0903", "\u20dd", "\u0301\u0301",
    # contractions in every case, near misses, and the long s (whose case folding is s)
    "'", "'s", "'S", "'t", "'T", "'d", "'D", "'m", "'M", "'ll", "'Ll", "'LL", "'lL", "'l", "'ve", "'VE", "'vE",
    "'re", "'RE", "'Re", "'r", "'x", "'ſ", "''", "n't", "N'T",
    # numbers: runs of 1 to 7 digits, other numbers
    "1", "12", "123", "1234", "12345", "123456", "1234567", "²", "٣", "Ⅻ", "½",
    # punctuation, / after it and after newlines (o200k's [\r\n/]*)
    ".", ",", "!", "?", "-", "_", "$", "/", "//", "./", "./\n", ".\n/", "\n/", "/\n", "...", "<|", "|>", "(",
    # whitespace runs, newlines, \r\n mixes, Unicode spaces, runs ending in newlines
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r", "\r\n", "\n\r", "\r\r\n", " \n", "  \n", " \n ", "\t\n",
    "\n  ", " \r\n ", "\u00a0", "\u2009", "\u3000", "\u0085", "\u2028", "\x0b", "\x0c", "\x1c", "\u200b", "\ufeff",
    EOT,
]
pieces = st.one_of(st.sampled_from(EDGE_PIECES), one_of_each_category)
texts = st.lists(pieces, max_size=80).map("".join)
# Any text (no lone surrogates, which UTF-8 cannot hold), and text that ends in whitespace.
any_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
trailing_space = st.tuples(texts, st.sampled_from([" ", "  ", "\n", " \n", "\n ", "\r\n", "\t \n\n", "\u3000"]))
all_texts = st.one_of(texts, any_text, trailing_space.map("".join))


def regex_pieces(name: str, text: str) -> list[str]:
    return [match.group() for match in PRESETS[name].compiled.finditer(text)]


def assert_scans_as_regex(name: str, text: str) -> None:
    expected = regex_pieces(name, text)
    assert core.pretokenize(text, name) == expected
    data = text.encode("utf-8")
    assert core.pretokenize(data, name) == [piece.encode("utf-8") for piece in expected]


# --- the scanners -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=examples(600))
@given(text=all_texts)
def test_scanner_is_the_regex(name, text):
    assert_scans_as_regex(name, text)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=examples(200))
@given(text=st.text(st.sampled_from("aAǅʰ中\u0301'sStTlLrReEvVdDmM1 \n\r/.ſ"), max_size=40))
def test_scanner_is_the_regex_on_dense_boundaries(name, text):
    # Few characters, densely mixed: contractions in every case, letter-set changes, marks, runs.
    assert_scans_as_regex(name, text)


@pytest.mark.parametrize("name", NAMES)
@given(text=st.text(max_size=30))
def test_scanner_handles_lone_surrogates_as_the_regex_does(name, text):
    # A str may hold surrogates; the class table covers them, so even these split identically.
    assert core.pretokenize(text, name) == regex_pieces(name, text)


@pytest.mark.parametrize("name", NAMES)
def test_every_code_point_in_context_splits_as_the_regex_does(name):
    """Each code point at the boundaries of every alternative: a systematic sweep of the table
    (and of the contractions' case folding, which the class table does not hold)."""
    chars = [chr(cp) for cp in range(0x110000) if cp < 0x3400 or cp % 61 == 0 or unicodedata.category(chr(cp)) == "Zs"]
    chars = [c for c in chars if not 0xD800 <= ord(c) <= 0xDFFF]  # (surrogates: the test above)
    for start in range(0, len(chars), 2000):
        block = chars[start : start + 2000]
        text = "".join(
            f"a{c} {c}1{c}{c}  {c}'s\n{c}\t {c}|A{c}a{c}B'{c}'{c}e'{c}l'l{c}x'{c}b'{c}E.{c}/{c}\r\n{c}\u0301{c}2345{c}"
            for c in block
        )
        expected = regex_pieces(name, text)
        assert core.pretokenize(text, name) == expected, f"block from U+{ord(block[0]):04X}"
        utf8 = [piece.encode() for piece in expected]
        assert core.pretokenize(text.encode(), name) == utf8, f"UTF-8, block from U+{ord(block[0]):04X}"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("fixture", FIXTURES)
def test_scanner_on_real_text(name, fixture):
    assert_scans_as_regex(name, require_fixture(fixture).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("kind", ["\xe9", "\u0100", "\U0001f642"])
def test_scanner_on_each_str_kind(name, kind):
    # The same text as a str of 1, 2 and 4 bytes a character (each has its own compiled loop).
    text = require_fixture("corpus.en").read_text(encoding="utf-8")[:20000] + kind
    assert core.pretokenize(text, name) == regex_pieces(name, text)


def test_contraction_case_folding_is_the_regex_modules():
    # (?i) in the contractions: which code points each letter matches (the scanners fold ASCII and
    # U+017F to lower case); every code point, checked against `regex` itself.
    every = core.every_code_point()
    for letter in "sdmtlvre":
        matched = {m.start() for m in regex.finditer(f"(?i:{letter})", every)}
        expected = {ord(letter), ord(letter.upper())} | ({0x17F} if letter == "s" else set())
        assert matched == expected, letter


@pytest.mark.parametrize(
    ("name", "text", "pieces"),
    [
        ("cl100k", "he'S 'LL x'Re", ["he", "'S", " '", "LL", " x", "'Re"]),
        ("o200k", "he'S X'LL x'Re", ["he'S", " X'LL", " x'Re"]),
        ("cl100k", "1234567", ["123", "456", "7"]),
        ("o200k", "HTTPServer", ["HTTPServer"]),
        ("o200k", "ABc", ["ABc"]),
        ("o200k", "中AB", ["中", "AB"]),  # UP* backs off to the Lo, the last LOW in the run
        ("cl100k", ".\n/.", [".\n", "/."]),
        ("o200k", ".\n/.", [".\n/", "."]),
        ("cl100k", "a  \n  ", ["a", "  \n  "]),
        ("o200k", "a  \n  ", ["a", "  \n", "  "]),
        ("o200k", "e\u0301A", ["e\u0301", "A"]),
    ],
)
def test_known_splits(name, text, pieces):
    # A few splits worked out by hand, as the regex gives them (and so the scanners).
    assert regex_pieces(name, text) == pieces
    assert core.pretokenize(text, name) == pieces


def test_pattern_names_are_checked():
    with pytest.raises(ValueError, match="no scanner for pattern 'r50k'"):
        core.pretokenize("x", "r50k")
    with pytest.raises(ValueError, match="no scanner"):
        core.PretokenCounter("custom")
    with pytest.raises(ValueError, match="no scanner"):
        core.Encoder(list(range(256)), [], 10, "GPT2")
    with pytest.raises(ValueError, match="not valid UTF-8"):
        core.pretokenize(b"ok\xff", "cl100k")
    assert [core.PretokenCounter(name).pattern for name in NAMES] == NAMES
    assert core.PretokenCounter().pattern == "gpt2"


# --- the counter --------------------------------------------------------------------------------

SPECIAL_SETS = [(), (EOT,), (EOT, EOT + EOT), ("<|", "|>", "<|endoftext|>"), ("é", "ée"), ("a|>x", "<|a|>", "|>")]


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=examples(200))
@given(text=all_texts, specials=st.sampled_from(SPECIAL_SETS))
def test_counter_counts_as_the_regex_counter(name, text, specials):
    pattern = PRESETS[name]
    expected = count_text(text, specials, compiled=False, pattern=pattern)
    got = count_text(text, specials, compiled=True, pattern=pattern)
    assert got == expected and list(got) == list(expected)  # and in first-seen order
    raw = pretoken_counter(compiled=True, pattern=pattern)
    assert raw.pattern == name
    assert raw.add_utf8(text.encode("utf-8"), [t.encode("utf-8") for t in specials]) is True
    assert raw.to_dict() == dict(expected)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("fixture", FIXTURES)
def test_counter_on_real_text(name, fixture):
    data = require_fixture(fixture).read_bytes()
    pattern = PRESETS[name]
    fast, slow = pretoken_counter(compiled=True, pattern=pattern), RegexCounter(pattern)
    for counter in (fast, slow):
        assert counter.add_utf8(data, [EOT.encode()])
    assert list(fast.to_dict().items()) == list(slow.to_dict().items())


@pytest.mark.parametrize("name", NAMES)
def test_count_pretokens_uses_the_compiled_counter_with_the_same_counts(name, monkeypatch):
    path = require_fixture("corpus.en")
    assert has_compiled_counter(PRESETS[name])
    fast = count_pretokens(path, [EOT], 1, pattern=name)
    assert count_pretokens(path, [EOT], 2, pattern=name) == fast  # threads, each its own counter
    monkeypatch.setattr(compiled, "AVAILABLE", False)  # the regex path
    assert not has_compiled_counter(PRESETS[name])
    assert count_pretokens(path, [EOT], 1, pattern=name) == fast


def test_counters_of_different_patterns_do_not_merge():
    gpt2, cl100k = core.PretokenCounter("gpt2"), core.PretokenCounter("cl100k")
    with pytest.raises(ValueError, match="cannot merge the cl100k pre-tokens"):
        gpt2.merge(cl100k)


def test_custom_patterns_keep_the_regex_path():
    custom = SplitPattern("custom", r"\w+|\W")
    lookalike = SplitPattern("cl100k", r"\w+|\W")  # a preset's name, another regex
    for pattern in (custom, lookalike):
        assert compiled.scanner_name(pattern) is None
        assert not has_compiled_counter(pattern)
        assert isinstance(pretoken_counter(pattern=pattern), RegexCounter)
        assert default_encoder(pattern) == "hybrid"
        with pytest.raises(ConfigError, match="presets"):
            pretoken_counter(compiled=True, pattern=pattern)
        with pytest.raises(ConfigError, match="presets"):
            native_encoder(list(range(256)), {}, 10, pattern)
    for name in NAMES:
        assert compiled.scanner_name(PRESETS[name]) == name and default_encoder(PRESETS[name]) == "native"


# --- the encoder --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer_parts():
    """A vocab trained under each pattern on real text, so merges are plentiful and realistic."""
    path = require_fixture("tinystories_sample.txt")
    return {name: train_bpe(path, 600, [EOT], num_workers=1, pattern=name) for name in NAMES}


SPECIAL_LISTS = [[EOT], [EOT, EOT + EOT], ["<|", "|>", EOT], ["é", "ée"], ["a|>x", "<|a|>", "|>"]]


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=examples(200))
@given(text=all_texts, specials=st.sampled_from(SPECIAL_LISTS))
def test_native_encoder_matches_python(tokenizer_parts, name, text, specials):
    vocab, merges = tokenizer_parts[name]
    fast = Tokenizer(vocab, merges, specials, encoder="native", pattern=name)
    slow = Tokenizer(vocab, merges, specials, encoder="hybrid", pattern=name)
    assert Tokenizer(vocab, merges, specials, pattern=name)._encoder.__class__ is fast._encoder.__class__
    assert fast.encode(text) == slow.encode(text)
    assert fast.encode_ordinary(text) == slow.encode_ordinary(text)
    # The settled rule of encode_iterable, in C on bytes: same ids, the same cut (in bytes), with
    # and without special tokens.
    data = text.encode("utf-8")
    tokens = [t.encode() for t in specials]
    ids = list(range(1000, 1000 + len(tokens)))
    for args in (([], []), (tokens, ids)):
        assert fast._encoder.encode_utf8(data, *args) == slow._encoder.encode_utf8(data, *args)
        assert fast._encoder.encode_utf8(data, *args, True) == slow._encoder.encode_utf8(data, *args, True)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=examples(200))
@given(text=all_texts)
def test_settled_cut_of_every_prefix_matches_python(tokenizer_parts, name, text):
    # Each prefix of a text, as encode_iterable sees the buffer grow: the settled cut moves exactly
    # where PythonEncoder._settled moves it (the rule differs per pattern).
    vocab, merges = tokenizer_parts[name]
    fast = Tokenizer(vocab, merges, [EOT], encoder="native", pattern=name)._encoder
    slow = Tokenizer(vocab, merges, [EOT], encoder="hybrid", pattern=name)._encoder
    for end in range(len(text) + 1):
        data = text[:end].encode("utf-8")
        assert fast.encode_utf8(data, [EOT.encode()], [1000], True) == slow.encode_utf8(
            data, [EOT.encode()], [1000], True
        ), end


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=examples(100))
@given(text=all_texts)
def test_native_encode_iterable_matches_encode(tokenizer_parts, name, text):
    vocab, merges = tokenizer_parts[name]
    fast = Tokenizer(vocab, merges, [EOT], encoder="native", pattern=name)
    slow = Tokenizer(vocab, merges, [EOT], encoder="hybrid", pattern=name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokenizer_module, "_ITERABLE_BATCH", 4)
        assert list(fast.encode_iterable(iter(text))) == slow.encode(text)


@pytest.mark.parametrize("name", NAMES)
def test_native_encoder_on_real_text(tokenizer_parts, name):
    vocab, merges = tokenizer_parts[name]
    text = require_fixture("corpus.en").read_text(encoding="utf-8")
    fast = Tokenizer(vocab, merges, [EOT], encoder="native", pattern=name)
    slow = Tokenizer(vocab, merges, [EOT], encoder="hybrid", pattern=name)
    assert fast.encode(text) == slow.encode(text)
    data = text.encode()
    assert fast._encoder.encode_utf8(data, [EOT.encode()], [1], True) == slow._encoder.encode_utf8(
        data, [EOT.encode()], [1], True
    )


def test_regex_counter_sanity():
    # (The twins' reference: RegexCounter is Counter(finditer) of the pattern.)
    text = "Hello  world's 123456\n"
    for name in NAMES:
        counter = RegexCounter(PRESETS[name])
        counter.add(text)
        assert counter.to_dict() == {k.encode(): v for k, v in Counter(regex_pieces(name, text)).items()}
