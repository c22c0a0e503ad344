"""Packed word counts (bpe_impls.corpus.tally.PackedCounts): the compiled counter's to_packed and
add_packed against their pure-Python twins, and the native trainer on packed counts against the
same trainer on a dict and against the pure-Python trainers, end to end through train_bpe."""

from __future__ import annotations

import pickle
import sys
from collections import Counter

import pytest
from conftest import fixture_text
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import train_bpe
from bpe_impls.base import compiled
from bpe_impls.corpus import count_pretokens
from bpe_impls.corpus.tally import PackedCounts, merge_packed, pack_counts, pretoken_counter, unpack_counts
from bpe_impls.trainers import native
from bpe_impls.trainers.registry import IMPLEMENTATIONS

needs_core = pytest.mark.skipif(not (compiled.AVAILABLE and native.AVAILABLE), reason="compiled core not built")

EOT = "<|endoftext|>"
TEXT = (
    "the cat sat on the mat. The cat's 12345 hats! aaaaa aaa bbb " * 7
    + f"{EOT}ünïcödé wörds, 東京 and Ελληνικά {EOT} more   spaces\n\n and 3.14159 tabs\t\t!!"
) * 3

word_counts = st.dictionaries(
    st.binary(min_size=1, max_size=6).filter(bool) | st.sampled_from([b"a", b"aa", b"aaaa", b"ab", b"b"]),
    st.integers(1, 2**40) | st.integers(1, 3),
    max_size=30,
)


def test_pack_roundtrip_keeps_order_and_counts():
    counts = {b"b": 3, b"a": 1, b"\x00\xff": 2**63 - 1, b" the": 7}
    data = pack_counts(counts)
    assert list(unpack_counts(data).items()) == list(counts.items())
    assert len(PackedCounts(data)) == 4 and dict(PackedCounts(data)) == counts


@pytest.mark.parametrize("bad", [0, -1, 2**63])
def test_pack_refuses_counts_outside_int64(bad):
    with pytest.raises(ValueError, match="count"):
        pack_counts({b"ab": bad})


@pytest.mark.parametrize(
    "data, problem",
    [
        (b"", "BPEW"),
        (b"XXXX" + bytes(12), "BPEW"),
        (pack_counts({b"ab": 1})[:-1], "words"),
        (pack_counts({b"ab": 1}) + b"x", "words"),
        (pack_counts({b"ab": 1})[:4] + b"\x02" + pack_counts({b"ab": 1})[5:], "version"),
    ],
)
def test_unpack_names_what_is_malformed(data, problem):
    with pytest.raises(ValueError, match=problem):
        unpack_counts(data)


def test_packed_counts_pickle_as_their_bytes():
    packed = PackedCounts(pack_counts({b"ab": 2, b"c": 1}))
    assert dict(packed)  # unpacked once, and the cache is not shipped
    again = pickle.loads(pickle.dumps(packed))
    assert again.data == packed.data and again._unpacked is None and dict(again) == dict(packed)


@needs_core
def test_compiled_to_packed_is_the_twin_of_pack_counts():
    counter = pretoken_counter(compiled=True)
    counter.add(TEXT.replace(EOT, ""))
    counts = counter.to_dict()
    assert counter.to_packed() == pack_counts(counts)
    assert counter.to_packed(min_count=3) == pack_counts({w: n for w, n in counts.items() if n >= 3})


@needs_core
@settings(max_examples=60, deadline=None)
@given(first=word_counts, second=word_counts)
def test_add_packed_sums_as_a_counter_does(first, second):
    counter = pretoken_counter(compiled=True)
    counter.add_packed(pack_counts(first))
    counter.add_packed(bytearray(pack_counts(second)))
    assert counter.to_dict() == dict(Counter(first) + Counter(second))
    merged = merge_packed([PackedCounts(pack_counts(first)), PackedCounts(pack_counts(second))], min_count=2)
    assert dict(merged) == {w: n for w, n in (Counter(first) + Counter(second)).items() if n >= 2}


@needs_core
@pytest.mark.parametrize("data", [b"", b"BPEW" + bytes(3), pack_counts({b"ab": 1})[:-2]])
def test_compiled_readers_reject_malformed_buffers(data):
    from bpe_impls import _native_train

    with pytest.raises(ValueError, match=r"packed word counts|BPEW"):
        pretoken_counter(compiled=True).add_packed(data)
    with pytest.raises(ValueError, match=r"packed word counts|BPEW"):
        _native_train.train(data, 10)


@needs_core
def test_compiled_readers_reject_a_nonpositive_count():
    from bpe_impls import _native_train

    data = bytearray(pack_counts({b"ab": 1, b"cd": 1}))
    data[16 + 8 : 16 + 16] = (0).to_bytes(8, "little", signed=True)
    with pytest.raises(ValueError, match="word 1 has count 0"):
        pretoken_counter(compiled=True).add_packed(data)
    with pytest.raises(ValueError, match="word 1 has count 0"):
        _native_train.train(data, 10)


@needs_core
@settings(max_examples=80, deadline=None)
@given(counts=word_counts, vocab_size=st.integers(256, 300))
def test_native_on_packed_counts_equals_native_on_the_dict_and_naive(counts, vocab_size):
    expected = IMPLEMENTATIONS["naive"](counts, vocab_size)
    assert native.train(counts, vocab_size) == expected
    assert native.train(PackedCounts(pack_counts(counts)), vocab_size) == expected


long_word_counts = st.dictionaries(
    st.binary(min_size=2, max_size=4)
    | st.text("abc ", min_size=30, max_size=150).map(str.encode)
    | st.integers(30, 150).map(lambda n: b"a" * n),
    st.integers(1, 50),
    min_size=1,
    max_size=12,
)


@needs_core
@settings(max_examples=40, deadline=None)
@given(counts=long_word_counts, vocab_size=st.integers(260, 330))
def test_native_finds_the_count_of_long_words_as_naive_does(counts, vocab_size):
    # A cell dozens of tokens into a word finds its word's count through the table of long words'
    # starts rather than by walking back to the word's boundary.
    expected = IMPLEMENTATIONS["naive"](counts, vocab_size)
    assert native.train(counts, vocab_size) == expected
    assert native.train(PackedCounts(pack_counts(counts)), vocab_size) == expected


@needs_core
@settings(max_examples=80, deadline=None)
@given(counts=word_counts | long_word_counts, vocab_size=st.integers(257, 330), heap_limit=st.integers(4, 12))
def test_native_with_a_tiny_heap_moves_its_floor_and_still_merges_as_naive(counts, vocab_size, heap_limit):
    # With room for a handful of entries, the heap keeps dropping its rarest pairs (raising the
    # floor) and bringing them back when it runs dry (lowering it): the merges must not change.
    from bpe_impls import _native_train

    expected = IMPLEMENTATIONS["naive"](counts, vocab_size)[1]
    stats: dict[str, int] = {}
    assert _native_train.train(counts, vocab_size - 256, None, stats, heap_limit=heap_limit) == expected
    assert stats["heap_peak"] <= max(2 * stats["pairs"], heap_limit)


@needs_core
@pytest.mark.parametrize("heap_limit", [4, 65536])
def test_native_drops_stale_occurrences_and_still_merges_as_naive(heap_limit):
    # On real text many pairs lose most of their occurrences to merges around them (their lists
    # are compacted) or all of them (they leave the pair table): the merges must not change.
    from bpe_impls import _native_train
    from bpe_impls.base.patterns import GPT2_REGEX

    text = fixture_text("kjv.txt")[:300_000]
    counts = Counter(m.encode() for m in GPT2_REGEX.findall(text))
    stats: dict[str, int] = {}
    merges = _native_train.train(PackedCounts(pack_counts(counts)).data, 300, None, stats, heap_limit=heap_limit)
    assert merges == IMPLEMENTATIONS["naive"](counts, 256 + 300)[1]
    assert stats["occurrences_compacted"] > 0
    # pairs counted down to 0 left the table, and their records were reused
    assert stats["pair_records"] < stats["pairs"]


@needs_core
def test_native_on_packed_counts_refuses_pair_counts_past_int64():
    counts = {b"ab": 2**62, b"ba": 2**62}
    with pytest.raises(OverflowError):
        native.train(counts, 300)
    with pytest.raises(OverflowError):
        native.train(PackedCounts(pack_counts(counts)), 300)
    # a one-byte word has no pair: any count of it is fine
    one_byte = {b"a": 2**63 - 1, b"ab": 5}
    assert native.train(PackedCounts(pack_counts(one_byte)), 300) == IMPLEMENTATIONS["naive"](one_byte, 300)


@needs_core
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("min_count", [1, 3])
def test_count_pretokens_packed_equals_the_counter(tmp_path, workers, min_count):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT * 5, encoding="utf-8")
    plain = count_pretokens(corpus, [EOT], workers, min_pretoken_count=min_count)
    packed = count_pretokens(corpus, [EOT], workers, min_pretoken_count=min_count, packed=True)
    assert isinstance(plain, Counter) and isinstance(packed, PackedCounts)
    assert dict(packed) == dict(plain) and len(packed) == len(plain)


@needs_core
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("min_count", [1, 2])
@pytest.mark.parametrize("specials", [[], [EOT]])
def test_train_bpe_through_packed_counts_equals_the_pure_python_trainer(tmp_path, workers, min_count, specials):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT * 5, encoding="utf-8")
    expected = train_bpe(corpus, 400, specials, impl="route_b", num_workers=workers, min_pretoken_count=min_count)
    assert (
        train_bpe(corpus, 400, specials, impl="native", num_workers=workers, min_pretoken_count=min_count) == expected
    )


@needs_core
def test_train_bpe_gives_the_native_trainer_packed_counts(tmp_path, monkeypatch):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    seen = []
    real = native._native_train.train

    def spy(source, *args):
        # a one-item list holding the only reference to the packed bytes (+1: getrefcount's own)
        seen.append((type(source), type(source[0]), sys.getrefcount(source[0])))
        merges = real(source, *args)
        seen.append(source)  # emptied: the bytes were freed once read, before the merges
        return merges

    monkeypatch.setattr(native._native_train, "train", spy)
    assert train_bpe(corpus, 300, [EOT], impl="native", num_workers=2) == train_bpe(
        corpus, 300, [EOT], impl="naive", num_workers=2
    )
    assert seen == [(list, bytes, 2), []]


@needs_core
def test_native_trainer_takes_packed_counts_out_of_a_list_and_refuses_other_lists():
    from bpe_impls import _native_train

    data = pack_counts(Counter(TEXT.encode().split()))
    holder = [bytearray(data)]
    assert _native_train.train(holder, 40) == _native_train.train(data, 40)
    assert holder == []
    for bad in ([], [data, data], [{b"ab": 1}]):
        with pytest.raises(TypeError, match="one buffer of packed word counts"):
            _native_train.train(bad, 40)
    malformed = [data[:-1]]
    with pytest.raises(ValueError, match="packed word counts"):
        _native_train.train(malformed, 40)
    assert malformed == []


def test_hand_over_empties_packed_counts_into_a_list():
    counts = {b"ab": 2, b"c": 1}
    packed = PackedCounts(pack_counts(counts))
    assert dict(packed) == counts
    holder = packed.hand_over()
    assert unpack_counts(holder[0]) == counts and len(packed) == 0 and dict(packed) == {}


@needs_core
def test_native_lists_past_their_own_pages_size_grow_shrink_and_free_as_naive():
    # Occurrence lists of 16384 entries or more get pages of their own (trainer_internal.h's BIG_LIST): the
    # byte pair (a, b)'s list starts there; (ab, c)'s grows into them by doubling, then doubles
    # again in place; (b, c) keeps 1,000 of its 41,000 entries once (a, b) is merged, so it
    # moves back to the heap; every one is freed when its pair is merged or counted down to 0.
    from bpe_impls import _native_train

    def suffix(i: int) -> bytes:
        return bytes(ord("d") + (i // 21**k) % 21 for k in range(4))

    counts = {b"abc" + suffix(i): 1 for i in range(40_000)}
    counts.update({b"ab" + suffix(i): 2 for i in range(2_000)})  # so (a, b) outranks (b, c)
    counts.update({b"zbc" + suffix(i): 1 for i in range(1_000)})
    stats: dict[str, int] = {}
    merges = _native_train.train(PackedCounts(pack_counts(counts)).data, 12, None, stats)
    assert merges == IMPLEMENTATIONS["naive"](counts, 256 + 12)[1]
    assert merges[:2] == [(b"a", b"b"), (b"ab", b"c")]
    assert stats["occurrences_compacted"] >= 41_000
