"""The compiled core (bpe_impls._native) against the pure-Python path it replaces.

The pre-tokenizer must split exactly as GPT2_REGEX does, the counter must count exactly as
RegexCounter does (str and raw UTF-8 input, special tokens, invalid UTF-8), and the encoder must
give the ids PythonEncoder gives (test_tokenizer.py and test_oracle_tiktoken.py also run every
registered encoder, "native" included). Also: the package still works with the core turned off.

Then the same proofs for every preset split pattern (gpt2, cl100k, o200k): the C scanner (over a
str of each PEP 393 kind, and over UTF-8 bytes) must cut text exactly as `regex.finditer` of the
preset's pattern string does; the compiled counter must count as RegexCounter(pattern) does; the
compiled encoder must give PythonEncoder's ids, and PythonEncoder._settled's cut for
encode_iterable, with that pattern, on text built around the boundaries of cl100k's and o200k's
alternatives.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import unicodedata
from collections import Counter

import pytest
import regex
from conftest import examples, require_compiled_core, require_text
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import count_pretokens, train_bpe
from bpe_impls.base import char_classes, compiled
from bpe_impls.base.errors import ConfigError
from bpe_impls.base.patterns import GPT2_REGEX, PRESETS, SplitPattern
from bpe_impls.corpus.tally import RegexCounter, count_text, has_compiled_counter, pretoken_counter
from bpe_impls.encoding import tokenizer as tokenizer_module
from bpe_impls.encoding.bpe import bpe_heap, bpe_hybrid
from bpe_impls.encoding.encoders import PythonEncoder, default_encoder, native_encoder
from bpe_impls.encoding.tokenizer import Tokenizer

require_compiled_core()

core = compiled.core()
EOT = "<|endoftext|>"
# Read with require_text: where the shared file is absent, its bundled sample stands in.
FIXTURES = ["address.txt", "german.txt", "tinystories_sample.txt", "corpus.en", "kjv.txt"]

# Text built from the pieces where the pattern's alternatives meet: spaces before each class,
# contractions (and near misses), Unicode whitespace and numbers, runs of whitespace before text.
pieces = st.sampled_from(
    [
        "a",
        "Z",
        "é",
        "ß",
        "中",
        "🙂",
        "1",
        "²",
        "٣",
        "Ⅻ",
        ".",
        ",",
        "'",
        "'s",
        "'S",
        "'ll",
        "'l",
        "'ve",
        "'re",
        "'d",
        "'m",
        "'t",
        "'x",
        " ",
        "  ",
        "\n",
        "\n\n",
        "\r\n",
        "\t",
        "\u00a0",
        "\u2009",
        "\u3000",
        "\u0085",
        "\x0b",
        "\x1c",
        "\u0301",
        "\u200b",
        "\ufeff",
        "-",
        "_",
        "$",
        "<|",
        "|>",
        EOT,
    ]
)
texts = st.lists(pieces, max_size=80).map("".join)
any_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)


# --- the pre-tokenizer --------------------------------------------------------------------------


@settings(max_examples=examples(500))
@given(text=st.one_of(texts, any_text))
def test_pretokenize_is_the_gpt2_regex(text):
    assert core.pretokenize(text) == GPT2_REGEX.findall(text)


@given(text=st.text(max_size=30))
def test_pretokenize_handles_lone_surrogates_as_the_regex_does(text):
    # A str may hold surrogates; the class table covers them, so even these split identically.
    assert core.pretokenize(text) == GPT2_REGEX.findall(text)


def test_every_code_point_in_context_splits_as_the_regex_does():
    """Each code point between letters, digits, spaces and an apostrophe: a systematic sweep of the table."""
    chars = [chr(cp) for cp in range(0x110000) if cp < 0x3400 or cp % 61 == 0 or unicodedata.category(chr(cp)) == "Zs"]
    for start in range(0, len(chars), 2000):
        block = chars[start : start + 2000]
        text = "".join(f"a{c} {c}1{c}{c}  {c}'s\n{c}\t {c}" for c in block)
        assert core.pretokenize(text) == GPT2_REGEX.findall(text), f"block from U+{ord(block[0]):04X}"


@pytest.mark.parametrize("name", FIXTURES)
def test_pretokenize_real_text(name):
    text = require_text(name).read_text(encoding="utf-8")
    assert core.pretokenize(text) == GPT2_REGEX.findall(text)


def test_class_table_has_the_size_and_values_the_scanner_needs():
    table = char_classes.pinned_table()
    assert len(table) == 0x110000
    # other, number, whitespace; Lu/Lt, Ll, Lm/Lo (letters: base 1, in o200k's upper and/or lower
    # set); marks (base other, in both sets)
    assert set(table) == {0, 2, 3, 5, 9, 12, 13}
    assert [table[ord(c)] for c in "a7 !AǅʰЖ\u0301中"] == [9, 2, 3, 0, 5, 5, 13, 5, 12, 13]
    assert {value & 3 for value in table} == {0, 1, 2, 3}  # the base classes GPT-2's scanner uses
    core.set_char_classes(table)  # the same table again: accepted (it is already in use)
    with pytest.raises(ValueError, match="a different class table is already set"):
        core.set_char_classes(table[: ord("a")] + bytes([0]) + table[ord("a") + 1 :])
    with pytest.raises(ValueError, match="must have 1114112 entries"):
        core.set_char_classes(b"\x00" * 10)
    for bad in (1, 4, 7, 8, 14, 255):  # a letter in neither set, a set bit on a non-letter, ...
        with pytest.raises(ValueError, match=f"entry 0 is {bad}, not one of"):
            core.set_char_classes(bytes([bad]) + table[1:])


# --- the counter --------------------------------------------------------------------------------

SPECIAL_SETS = [(), (EOT,), (EOT, EOT + EOT), ("<|", "|>", "<|endoftext|>"), ("é", "ée"), ("a|>x", "<|a|>", "|>")]


@settings(max_examples=examples(300))
@given(text=st.one_of(texts, any_text), specials=st.sampled_from(SPECIAL_SETS))
def test_counter_counts_as_the_regex_counter(text, specials):
    expected = count_text(text, specials, compiled=False)
    assert count_text(text, specials, compiled=True) == expected
    # The same text as raw UTF-8 bytes, split on the encoded special tokens in C.
    raw = pretoken_counter(compiled=True)
    assert raw.add_utf8(text.encode("utf-8"), [t.encode("utf-8") for t in specials]) is True
    assert raw.to_dict() == dict(expected)


@pytest.mark.parametrize("name", FIXTURES)
def test_counter_on_real_text(name):
    data = require_text(name).read_bytes()
    compiled, pure = pretoken_counter(compiled=True), RegexCounter()
    for counter in (compiled, pure):
        assert counter.add_utf8(data, [EOT.encode()])
    assert compiled.to_dict() == pure.to_dict()
    assert len(compiled) == len(pure)


@settings(max_examples=examples(300))
@given(data=st.binary(max_size=40) | st.text(max_size=20).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_counter_rejects_exactly_what_python_cannot_decode(data):
    try:
        data.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    counter = pretoken_counter(compiled=True)
    assert counter.add_utf8(data, []) is valid
    if not valid:
        assert len(counter) == 0  # nothing counted from a rejected buffer


@pytest.mark.parametrize(
    "data",
    [
        b"\xc0\x80",
        b"\xe0\x80\x80",
        b"\xed\xa0\x80",
        b"\xf4\x90\x80\x80",
        b"\xf5\x80\x80\x80",
        b"\xe2\x82",
        b"ok\xff",
        b"\x80",
        b"abcdefgh\xf0\x9f\x99",
    ],
)
def test_counter_rejects_overlong_surrogate_out_of_range_and_truncated_utf8(data):
    assert pretoken_counter(compiled=True).add_utf8(data, []) is False


# Forms the validator must accept or refuse wherever they fall: utf8.c checks 16 bytes at a time
# (SSSE3) and reads each byte's class from the one to three before it, across a block's edge too.
UTF8_FORMS = [
    "é".encode(),
    "東".encode(),
    "😀".encode(),
    "\U0010ffff".encode(),
    "\ud7ff".encode(),
    "\ue000".encode(),
    "\u0800".encode(),
    "\U00010000".encode(),
    "e\u0301".encode(),
    b"\xc0\x80",
    b"\xc1\xbf",
    b"\xe0\x9f\xbf",
    b"\xed\xa0\x80",
    b"\xed\xbf\xbf",
    b"\xf0\x8f\xbf\xbf",
    b"\xf4\x90\x80\x80",
    b"\xf5\x80\x80\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xff",
    b"\x80",
    b"\xbf\x80",
    b"\xe2\x82",
    b"\xf0\x9f\x99",
    b"\xc3",
    b"\xe4\xb8\xad\xad",
    b"\xc3\xa9\xa9",
    b"\xe4\xb8\xc3\xa9",
]


@pytest.mark.parametrize("form", UTF8_FORMS)
def test_counter_validates_utf8_at_every_offset_of_a_block(form):
    for before in range(34):
        for after in (b"", b"x", b" b" * 8, "Жж東".encode() * 3):
            data = b"a" * before + form + after
            try:
                expected = Counter(m.encode() for m in GPT2_REGEX.findall(data.decode("utf-8")))
            except UnicodeDecodeError:
                expected = None
            counter = pretoken_counter(compiled=True)
            assert counter.add_utf8(data, []) is (expected is not None), data
            assert counter.to_dict() == (expected or {}), data


def test_counter_with_tables_of_many_megabytes_counts_as_the_regex_counter():
    # 150,000 distinct words of 4 to 26 bytes, repeated and mixed with other scripts: the counter's
    # tables pass 2 MB (pages of their own, moved with mremap as they grow) and its index fills
    # with tagged slots. Counts and their first-seen order must be the regex's.
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"

    def word(i: int) -> str:
        code = "".join(letters[(i // 26**k) % 26] for k in range(4))
        return "q" * (i % 11) + code + "z" * (i % 7) + ("東京" if i % 5 == 0 else "")

    words = [word(i) for i in range(150_000)]
    text = " ".join(rng.choice(words) if rng.random() < 0.3 else words[i] for i in range(len(words)))
    text += " Привет мир 東京 café e\u0301 😀 " + text[:100_000]
    compiled = pretoken_counter(compiled=True)
    assert compiled.add_utf8(text.encode("utf-8"), [EOT.encode()])
    expected = RegexCounter()
    expected.add_utf8(text.encode("utf-8"), [EOT.encode()])
    assert list(compiled.to_dict().items()) == list(expected.to_dict().items())


def test_counter_merge_sums_counts_and_rejects_other_types():
    left, right = pretoken_counter(compiled=True), pretoken_counter(compiled=True)
    left.add("a b a")
    right.add(" b c")
    left.merge(right)
    assert left.to_dict() == {b"a": 1, b" b": 2, b" a": 1, b" c": 1}
    with pytest.raises(TypeError):
        left.merge(RegexCounter())
    with pytest.raises(ValueError):
        left.merge(left)


def test_counter_str_with_a_lone_surrogate_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"lone surrogate U\+D800 at position 2"):
        pretoken_counter(compiled=True).add("ab\ud800")


def test_counter_counts_beyond_32_bits_of_text_positions_are_not_truncated():
    counter = pretoken_counter(compiled=True)
    for _ in range(3):
        counter.add(" the" * 1000)
    assert counter.to_dict() == {b" the": 3000}


# --- the encoder --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_tokenizer_parts():
    """A vocab trained on real text, so merges are plentiful and realistic."""
    path = require_text("tinystories_sample.txt")
    vocab, merges = train_bpe(path, 600, [EOT], num_workers=1)
    return vocab, merges


@settings(max_examples=examples(300))
@given(text=st.one_of(texts, any_text))
def test_native_encoder_matches_python(small_tokenizer_parts, text):
    vocab, merges = small_tokenizer_parts
    fast = Tokenizer(vocab, merges, [EOT], encoder="native")
    slow = Tokenizer(vocab, merges, [EOT], encoder="hybrid")
    assert fast.encode(text) == slow.encode(text)
    assert fast.encode_ordinary(text) == slow.encode_ordinary(text)
    # The settled rule of encode_iterable, in C on bytes: same ids, the same cut (in bytes).
    data = text.encode("utf-8")
    assert fast._encoder.encode_utf8(data, [], [], True) == slow._encoder.encode_utf8(data, [], [], True)


@settings(max_examples=examples(100))
@given(word=st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), min_size=60, max_size=400))
def test_long_pre_tokens_take_the_heap_path_with_the_same_result(small_tokenizer_parts, word):
    vocab, merges = small_tokenizer_parts
    fast = Tokenizer(vocab, merges, encoder="native", cache_size=0)
    slow = Tokenizer(vocab, merges, encoder="hybrid", cache_size=0)
    ids = [slow._tables.byte_ids[b] for b in word.encode()]
    assert (
        fast._encoder.bpe(word.encode())
        == bpe_heap(list(ids), slow._tables.ranks)
        == bpe_hybrid(list(ids), slow._tables.ranks)
    )
    assert fast.encode(word) == slow.encode(word)


def test_native_encoder_cache_is_bounded_and_optional(small_tokenizer_parts):
    vocab, merges = small_tokenizer_parts
    text = " ".join(f"w{i} the cat" for i in range(500))
    expected = Tokenizer(vocab, merges, encoder="hybrid", cache_size=0).encode(text)
    for cache_size in (0, 1, 7, 2**16):
        tok = Tokenizer(vocab, merges, encoder="native", cache_size=cache_size)
        assert tok.encode(text) == expected
        assert tok.encode(text) == expected  # again, from the cache
        assert tok._encoder.cache_len() <= cache_size


def test_native_encoder_rejects_bad_tables():
    with pytest.raises(ValueError, match="256 ids"):
        core.Encoder([0] * 10, [])
    with pytest.raises(ValueError, match="merge #0 is not"):
        core.Encoder(list(range(256)), [(1, 2)])
    with pytest.raises(ValueError, match="left id -1"):
        core.Encoder(list(range(256)), [(-1, 2, 3)])


def test_python_encoder_is_what_hybrid_names():
    assert isinstance(Tokenizer({i: bytes([i]) for i in range(256)}, [], encoder="hybrid")._encoder, PythonEncoder)


# --- counting on threads, and the package with the core turned off -------------------------------


def test_first_use_of_the_core_from_many_threads_at_once():
    # Counting threads may be the first to load the class table; each must see it loaded once.
    code = """
import threading
from bpe_impls.base import char_classes, compiled
results = []
def count():
    counter = compiled.core().PretokenCounter()
    counter.add(" hello world" * 1000)
    results.append(counter.to_dict())
threads = [threading.Thread(target=count) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
assert results == [{b" hello": 1000, b" world": 1000}] * 8, results
print("ok")
"""
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr)


def test_threads_and_processes_and_one_worker_count_the_same(tmp_path):
    path = require_text("corpus.en")
    one = count_pretokens(path, [EOT], 1)
    assert count_pretokens(path, [EOT], 2) == one  # threads, with the core
    assert count_pretokens(path, [EOT], 3) == one


def _run_pure(code: str) -> dict:
    env = {**os.environ, "BPE_IMPLS_PURE": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_without_the_core_everything_falls_back_to_pure_python_with_identical_results():
    path = require_text("tinystories_sample.txt")
    code = f"""
import json
from bpe_impls import train_bpe, Tokenizer
from bpe_impls.base import char_classes, compiled
from bpe_impls.corpus import local
from bpe_impls.encoding import encoders
from bpe_impls.trainers import registry
vocab, merges = train_bpe({str(path)!r}, 400, ["<|endoftext|>"], num_workers=2)
tok = Tokenizer(vocab, merges, ["<|endoftext|>"])
print(json.dumps({{
    "available": compiled.AVAILABLE, "pool": local.POOL, "encoders": sorted(encoders.ENCODERS),
    "default_encoder": encoders.DEFAULT_ENCODER, "default_impl": registry.DEFAULT_IMPL,
    "merges": [[a.hex(), b.hex()] for a, b in merges], "ids": tok.encode(open({str(path)!r}).read()),
}}))
"""
    pure = _run_pure(code)
    assert pure["available"] is False
    assert pure["pool"] == "processes"
    assert "native" not in pure["encoders"] and pure["default_encoder"] == "hybrid"
    assert pure["default_impl"] != "native"
    vocab, merges = train_bpe(path, 400, [EOT], num_workers=2)
    assert pure["merges"] == [[a.hex(), b.hex()] for a, b in merges]
    assert pure["ids"] == Tokenizer(vocab, merges, [EOT]).encode(path.read_text(encoding="utf-8"))


# --- the native trainer's own limits (the registry-wide suites prove its results) ----------------


def test_native_trainer_refuses_counts_beyond_64_bits_instead_of_wrapping():
    from bpe_impls import IMPLEMENTATIONS

    if "native" not in IMPLEMENTATIONS:
        pytest.skip("the native trainer was not built")
    with pytest.raises(OverflowError, match=r"word b'ab' has count 9223372036854775808"):
        IMPLEMENTATIONS["native"]({b"ab": 2**63}, 300)
    # Each count fits, but pair counts could reach 3 * 2**62: refused up front, not wrapped.
    with pytest.raises(OverflowError, match=r"more than 2\*\*63 - 1 pair occurrences"):
        IMPLEMENTATIONS["native"]({b"ab": 2**62, b"abc": 2**62}, 300)
    # Just below the limit it trains, and agrees with route_b.
    big = {b"ab": 2**61, b"abc": 2**60}
    assert IMPLEMENTATIONS["native"](big, 300) == IMPLEMENTATIONS["route_b"](big, 300)


def test_native_trainer_is_the_default_where_built():
    from bpe_impls import DEFAULT_IMPL, IMPLEMENTATIONS

    assert "native" in IMPLEMENTATIONS and DEFAULT_IMPL == "native"


def test_counts_come_out_in_first_seen_order_as_a_counter_gives_them():
    # Not a correctness matter (every trainer is order-blind, as the equivalence suite shows), but
    # the pure-Python trainers run up to 1.8x slower on counts in hash order; asv caught it.
    text = require_text("corpus.en").read_text(encoding="utf-8")
    assert list(count_text(text, (EOT,), compiled=True)) == list(count_text(text, (EOT,), compiled=False))


@settings(max_examples=examples(200))
@given(text=st.one_of(texts, any_text), specials=st.sampled_from(SPECIAL_SETS[1:]))
def test_native_encode_splits_special_tokens_in_c_as_the_regex_does(small_tokenizer_parts, text, specials):
    # Tokenizer.encode hands the whole text to C as UTF-8 (encode_utf8), special tokens included;
    # the Python encoders split on them with special_token_regex. Same ids, every special set.
    vocab, merges = small_tokenizer_parts
    fast = Tokenizer(vocab, merges, list(specials), encoder="native")
    slow = Tokenizer(vocab, merges, list(specials), encoder="hybrid")
    assert fast.encode(text) == slow.encode(text)
    # One character at a time, in batches of 4 characters: the settled rounds run in C on bytes.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokenizer_module, "_ITERABLE_BATCH", 4)
        assert list(fast.encode_iterable(iter(text))) == slow.encode(text)
        assert list(slow.encode_iterable(iter(text))) == slow.encode(text)


def test_native_encode_utf8_rejects_invalid_utf8_and_mismatched_ids(small_tokenizer_parts):
    vocab, merges = small_tokenizer_parts
    encoder = Tokenizer(vocab, merges, encoder="native")._encoder
    with pytest.raises(ValueError, match="not valid UTF-8"):
        encoder.encode_utf8(b"ok \xe2\x82", [], [])
    with pytest.raises(ValueError, match="one id is needed per special token"):
        encoder.encode_utf8(b"ok", [b"<s>"], [])


# ---- every preset's scanner (gpt2, cl100k, o200k) ----
require_compiled_core()


NAMES = list(PRESETS)


# Every Unicode general category, so each class of the table (and each of o200k's letter sets:
# Lu Lt | Ll | Lm Lo, marks Mn Mc Me) meets every alternative's boundaries.
CATEGORIES = [
    "Lu",
    "Ll",
    "Lt",
    "Lm",
    "Lo",
    "Mn",
    "Mc",
    "Me",
    "Nd",
    "Nl",
    "No",
    "Pc",
    "Pd",
    "Ps",
    "Pe",
    "Pi",
    "Pf",
    "Po",
    "Sm",
    "Sc",
    "Sk",
    "So",
    "Zs",
    "Zl",
    "Zp",
    "Cc",
    "Cf",
    "Co",
    "Cn",
]


one_of_each_category = st.sampled_from(CATEGORIES).flatmap(lambda c: st.characters(categories=[c]))


# The pieces where the presets' alternatives meet.
EDGE_PIECES = [
    # letters of each set: lower, upper, title case (Lt), modifier (Lm), other (Lo), non-ASCII
    "a",
    "z",
    "A",
    "Z",
    "é",
    "É",
    "ß",
    "ǅ",
    "ᾈ",
    "ʰ",
    "ˇ",
    "中",
    "ا",
    "ſ",
    # upper runs followed by lower (o200k's two letter alternatives), CamelCase, all caps
    "ABc",
    "HTTPServer",
    "XMLHttp",
    "iPhone",
    "ABC",
    "AbC",
    # combining marks after letters and alone (Mn, Mc, Me)
    "\u0301",
    "e\u0301",
    "E\u0301x",
    "\u0903",
    "\u20dd",
    "\u0301\u0301",
    # contractions in every case, near misses, and the long s (whose case folding is s)
    "'",
    "'s",
    "'S",
    "'t",
    "'T",
    "'d",
    "'D",
    "'m",
    "'M",
    "'ll",
    "'Ll",
    "'LL",
    "'lL",
    "'l",
    "'ve",
    "'VE",
    "'vE",
    "'re",
    "'RE",
    "'Re",
    "'r",
    "'x",
    "'ſ",
    "''",
    "n't",
    "N'T",
    # numbers: runs of 1 to 7 digits, other numbers
    "1",
    "12",
    "123",
    "1234",
    "12345",
    "123456",
    "1234567",
    "²",
    "٣",
    "Ⅻ",
    "½",
    # punctuation, / after it and after newlines (o200k's [\r\n/]*)
    ".",
    ",",
    "!",
    "?",
    "-",
    "_",
    "$",
    "/",
    "//",
    "./",
    "./\n",
    ".\n/",
    "\n/",
    "/\n",
    "...",
    "<|",
    "|>",
    "(",
    # whitespace runs, newlines, \r\n mixes, Unicode spaces, runs ending in newlines
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\n\n",
    "\r",
    "\r\n",
    "\n\r",
    "\r\r\n",
    " \n",
    "  \n",
    " \n ",
    "\t\n",
    "\n  ",
    " \r\n ",
    "\u00a0",
    "\u2009",
    "\u3000",
    "\u0085",
    "\u2028",
    "\x0b",
    "\x0c",
    "\x1c",
    "\u200b",
    "\ufeff",
    EOT,
]


preset_pieces = st.one_of(st.sampled_from(EDGE_PIECES), one_of_each_category)


preset_texts = st.lists(preset_pieces, max_size=80).map("".join)


trailing_space = st.tuples(preset_texts, st.sampled_from([" ", "  ", "\n", " \n", "\n ", "\r\n", "\t \n\n", "\u3000"]))


all_texts = st.one_of(preset_texts, any_text, trailing_space.map("".join))


def regex_pieces(name: str, text: str) -> list[str]:
    return [match.group() for match in PRESETS[name].compiled.finditer(text)]


def assert_scans_as_regex(name: str, text: str) -> None:
    expected = regex_pieces(name, text)
    assert core.pretokenize(text, name) == expected
    data = text.encode("utf-8")
    assert core.pretokenize(data, name) == [piece.encode("utf-8") for piece in expected]


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
def test_every_code_point_in_context_splits_as_the_regex_does_for_every_preset(name):
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
    assert_scans_as_regex(name, require_text(fixture).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("kind", ["\xe9", "\u0100", "\U0001f642"])
def test_scanner_on_each_str_kind(name, kind):
    # The same text as a str of 1, 2 and 4 bytes a character (each has its own compiled loop).
    text = require_text("corpus.en").read_text(encoding="utf-8")[:20000] + kind
    assert core.pretokenize(text, name) == regex_pieces(name, text)


def test_contraction_case_folding_is_the_regex_modules():
    # (?i) in the contractions: which code points each letter matches (the scanners fold ASCII and
    # U+017F to lower case); every code point, checked against `regex` itself.
    every = "".join(map(chr, range(0x110000)))
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


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=examples(200))
@given(text=all_texts, specials=st.sampled_from(SPECIAL_SETS))
def test_counter_counts_as_the_regex_counter_for_every_preset(name, text, specials):
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
def test_counter_on_real_text_for_every_preset(name, fixture):
    data = require_text(fixture).read_bytes()
    pattern = PRESETS[name]
    fast, slow = pretoken_counter(compiled=True, pattern=pattern), RegexCounter(pattern)
    for counter in (fast, slow):
        assert counter.add_utf8(data, [EOT.encode()])
    assert list(fast.to_dict().items()) == list(slow.to_dict().items())


@pytest.mark.parametrize("name", NAMES)
def test_count_pretokens_uses_the_compiled_counter_with_the_same_counts(name, monkeypatch):
    path = require_text("corpus.en")
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


@pytest.fixture(scope="module")
def tokenizer_parts():
    """A vocab trained under each pattern on real text, so merges are plentiful and realistic."""
    path = require_text("tinystories_sample.txt")
    return {name: train_bpe(path, 600, [EOT], num_workers=1, pattern=name) for name in NAMES}


SPECIAL_LISTS = [[EOT], [EOT, EOT + EOT], ["<|", "|>", EOT], ["é", "ée"], ["a|>x", "<|a|>", "|>"]]


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=examples(200))
@given(text=all_texts, specials=st.sampled_from(SPECIAL_LISTS))
def test_native_encoder_matches_python_for_every_preset(tokenizer_parts, name, text, specials):
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
    text = require_text("corpus.en").read_text(encoding="utf-8")
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
