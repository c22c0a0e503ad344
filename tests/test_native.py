"""The compiled core (bpe_impls._native) against the pure-Python path it replaces.

The pre-tokenizer must split exactly as GPT2_REGEX does, the counter must count exactly as
RegexCounter does (str and raw UTF-8 input, special tokens, invalid UTF-8), and the encoder must
give the ids PythonEncoder gives (test_tokenizer.py and test_oracle_tiktoken.py also run every
registered encoder, "native" included). Also: the package still works with the core turned off.
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
from conftest import examples, require_compiled_core, require_fixture
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import count_pretokens, train_bpe
from bpe_impls.base import compiled
from bpe_impls.base.patterns import GPT2_REGEX
from bpe_impls.corpus.tally import RegexCounter, count_text, pretoken_counter
from bpe_impls.encoding import tokenizer as tokenizer_module
from bpe_impls.encoding.bpe import bpe_heap, bpe_hybrid
from bpe_impls.encoding.encoders import PythonEncoder
from bpe_impls.encoding.tokenizer import Tokenizer

require_compiled_core()

core = compiled.core()
EOT = "<|endoftext|>"
FIXTURES = ["address.txt", "german.txt", "tinystories_sample.txt", "corpus.en", "kjv.txt"]

# Text built from the pieces where the pattern's alternatives meet: spaces before each class,
# contractions (and near misses), Unicode whitespace and numbers, runs of whitespace before text.
pieces = st.sampled_from(
    ["a", "Z", "é", "ß", "中", "🙂", "1", "²", "٣", "Ⅻ", ".", ",", "'", "'s", "'S", "'ll", "'l", "'ve", "'re",
     "'d", "'m", "'t", "'x", " ", "  ", "\n", "\n\n", "\r\n", "\t", "\u00a0", "\u2009", "\u3000", "\u0085",
     "\x0b", "\x1c", "\u0301", "\u200b", "\ufeff", "-", "_", "$", "<|", "|>", EOT]
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
    text = require_fixture(name).read_text(encoding="utf-8")
    assert core.pretokenize(text) == GPT2_REGEX.findall(text)


def test_class_table_has_the_size_and_values_the_scanner_needs():
    table = compiled.char_classes()
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
    data = require_fixture(name).read_bytes()
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
    [b"\xc0\x80", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xe2\x82",
     b"ok\xff", b"\x80", b"abcdefgh\xf0\x9f\x99"],
)
def test_counter_rejects_overlong_surrogate_out_of_range_and_truncated_utf8(data):
    assert pretoken_counter(compiled=True).add_utf8(data, []) is False


# Forms the validator must accept or refuse wherever they fall: scanner.c checks 16 bytes at a time
# (SSSE3) and reads each byte's class from the one to three before it, across a block's edge too.
UTF8_FORMS = [
    "é".encode(), "東".encode(), "😀".encode(), "\U0010ffff".encode(), "\ud7ff".encode(), "\ue000".encode(),
    "\u0800".encode(), "\U00010000".encode(), "e\u0301".encode(),
    b"\xc0\x80", b"\xc1\xbf", b"\xe0\x9f\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf0\x8f\xbf\xbf",
    b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xff", b"\x80", b"\xbf\x80",
    b"\xe2\x82", b"\xf0\x9f\x99", b"\xc3", b"\xe4\xb8\xad\xad", b"\xc3\xa9\xa9", b"\xe4\xb8\xc3\xa9",
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
    path = require_fixture("tinystories_sample.txt")
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
    assert fast._encoder.bpe(word.encode()) == bpe_heap(list(ids), slow._tables.ranks) == bpe_hybrid(list(ids), slow._tables.ranks)
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
from bpe_impls.base import compiled
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
    path = require_fixture("corpus.en")
    one = count_pretokens(path, [EOT], 1)
    assert count_pretokens(path, [EOT], 2) == one  # threads, with the core
    assert count_pretokens(path, [EOT], 3) == one


def _run_pure(code: str) -> dict:
    env = {**os.environ, "BPE_IMPLS_PURE": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_without_the_core_everything_falls_back_to_pure_python_with_identical_results():
    path = require_fixture("tinystories_sample.txt")
    code = f"""
import json
from bpe_impls import train_bpe, Tokenizer
from bpe_impls.base import compiled
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
    text = require_fixture("corpus.en").read_text(encoding="utf-8")
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
