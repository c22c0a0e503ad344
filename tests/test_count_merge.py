"""PretokenCounter.merge(other, threads=N): the compiled counter's parallel merge.

Its result must be what adding other's entries one by one gives, whatever the thread count: each
count the sum of the two (a Counter sum, the pure-Python twin's merge), in the one-by-one order
(this counter's keys first, then other's new ones in other's order), and a table that later
lookups still find every key in. The inputs cover 1 to 4 tables, keys kept in the entry (<= 8
bytes) and in the arena (longer, and longer than 16 bytes), keys whose hashes share an index slot
and tag, empty tables, and real text. `bash .ci/sanitize` runs this file under ASan and UBSan.

PretokenCounter.to_packed(min_count, threads=N) writes its packed bytes on N threads too: they must
be the bytes one thread writes, and the pure-Python twin's (`pack_counts` of the counts kept, or
`RegexCounter.to_packed` on real text), for any N.
"""

from __future__ import annotations

import functools
import random

import pytest
from conftest import examples, fixture_text, require_compiled_core, require_text, while_running
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls.corpus import count_pretokens
from bpe_impls.corpus.tally import RegexCounter, pack_counts, pretoken_counter, unpack_counts

require_compiled_core()

MAX_COUNT = 2**63 - 1


def _counter(counts: dict[bytes, int]):
    counter = pretoken_counter(compiled=True)
    counter.add_packed(pack_counts(counts))
    return counter


def _serial_sum(tables: list[dict[bytes, int]]) -> list[tuple[bytes, int]]:
    """The twin: the tables summed in order as dicts (first-seen order), saturating as C does."""
    total: dict[bytes, int] = {}
    for table in tables:
        for key, count in table.items():
            total[key] = min(total.get(key, 0) + count, MAX_COUNT)
    return list(total.items())


def _merged(tables: list[dict[bytes, int]], threads: int):
    counters = [_counter(table) for table in tables]
    total = counters[0]
    for other in counters[1:]:
        total.merge(other, threads=threads)
    return total


def _c_hash(key: bytes) -> int:
    """csrc/bpe_util.h's bpe_hash_bytes, to build keys whose hashes collide in a small index."""
    mask = 2**64 - 1
    n = len(key)
    h = 0x9E3779B97F4A7C15 ^ ((n * 0xFF51AFD7ED558CCD) & mask)
    at = 0
    while n - at >= 8:
        h = ((h ^ int.from_bytes(key[at : at + 8], "little")) * 0xBF58476D1CE4E5B9) & mask
        h ^= h >> 31
        at += 8
    h = ((h ^ int.from_bytes(key[at:], "little")) * 0x94D049BB133111EB) & mask
    return h ^ (h >> 29)


@functools.cache
def _colliding_keys() -> list[bytes]:
    """Pairs of distinct keys (short and long) whose hashes have the same slot and tag in a new
    counter's index of 1024 slots (id bits 0-9, tag bits 42-63): a lookup of one reaches the
    other's entry and must compare the keys themselves."""
    found: list[bytes] = []
    for template in (b" c%d", b" collide-long-%d"):
        seen: dict[int, bytes] = {}
        pairs = 0
        for i in range(400_000):
            key = template % i
            h = _c_hash(key)
            signature = (h & 1023) | ((h >> 42) << 10)
            if signature in seen:
                found += [seen[signature], key]
                pairs += 1
                if pairs == 3:
                    break
            seen[signature] = key
    return found


def test_the_hash_twin_finds_colliding_pairs():
    keys = _colliding_keys()
    assert len(keys) == 12 and len(set(keys)) == 12
    assert any(len(key) <= 8 for key in keys) and any(len(key) > 8 for key in keys)


def _keys_strategy():
    fixed = st.sampled_from(
        [b" the", b"a", b"\x00", b"12345678", b"123456789", b" abcdefghijklmnopq", "東京".encode(), b"\xff" * 20]
    )
    colliding = st.integers(0, 11).map(lambda k: _colliding_keys()[k])
    return st.one_of(fixed, colliding, st.binary(min_size=1, max_size=24))


TABLES = st.lists(st.dictionaries(_keys_strategy(), st.integers(1, 2**40), max_size=40), min_size=1, max_size=4)


@given(tables=TABLES, threads=st.integers(1, 5))
@settings(max_examples=examples(200))
def test_merge_equals_the_serial_sum_in_the_one_by_one_order(tables, threads):
    total = _merged(tables, threads)
    expected = _serial_sum(tables)
    assert list(total.to_dict().items()) == expected
    assert len(total) == len(expected)
    # The index finds every key afterwards: adding the first table again adds to the same entries.
    total.add_packed(pack_counts(tables[0]))
    assert list(total.to_dict().items()) == _serial_sum([*tables, tables[0]])


def test_merge_with_big_counts_saturates_as_adding_them_does():
    total = _merged([{b" a": MAX_COUNT - 5, b" b": 1}, {b" a": 10, b" b": MAX_COUNT}], threads=2)
    assert total.to_dict() == {b" a": MAX_COUNT, b" b": MAX_COUNT}


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_merge_of_empty_tables(threads):
    empty, words = {}, {b" x": 2, b" long-enough-key": 3}
    for tables in ([empty, empty], [empty, words], [words, empty], [empty, words, empty, words]):
        assert list(_merged(tables, threads).to_dict().items()) == _serial_sum(tables)


def _many_words(seed: int, n: int) -> dict[bytes, int]:
    """n distinct words, a third of them long, shared in part between seeds."""
    rng = random.Random(seed)
    words = {}
    while len(words) < n:
        i = rng.randrange(3 * n)
        word = b" w%d" % i if i % 3 else b" a-long-word-%d" % i
        words[word] = rng.randrange(1, 1000)
    return words


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_merge_of_large_tables_growing_the_index_or_not(threads):
    # 30,000 entries (an index of 65,536 slots) plus: about 20,000 new keys, which grow it, or
    # a few hundred, which do not.
    big = _many_words(1, 30_000)
    for other in (_many_words(2, 30_000), dict(list(_many_words(3, 1_000).items())[:400])):
        tables = [big, other, _many_words(4, 5_000)]
        total = _merged(tables, threads)
        assert list(total.to_dict().items()) == _serial_sum(tables)
        total.add_packed(pack_counts(other))
        assert list(total.to_dict().items()) == _serial_sum([*tables, other])


def _parts(text: str, n: int) -> list[str]:
    """text cut into n parts at spaces followed by a letter (where no pre-token spans the cut)."""
    cuts = [0]
    for k in range(1, n):
        at = text.find(" ", len(text) * k // n)
        while at != -1 and not text[at + 1 : at + 2].isalpha():
            at = text.find(" ", at + 1)
        cuts.append(len(text) if at == -1 else at)
    cuts.append(len(text))
    return [text[a:b] for a, b in zip(cuts, cuts[1:])]


@pytest.mark.parametrize("fixture", ["kjv.txt", "german.txt", "tinystories_sample.txt"])
@pytest.mark.parametrize("parts", [2, 3, 4])
def test_merge_of_real_text_counted_in_parts(fixture, parts):
    text = fixture_text(fixture)[:1_500_000]
    pieces = [piece.encode("utf-8") for piece in _parts(text, parts)]
    tables = []
    for piece in pieces:
        counter = pretoken_counter(compiled=True)
        assert counter.add_utf8(piece, [])
        tables.append(counter.to_dict())
    for threads in (1, 2, parts):
        assert list(_merged(tables, threads).to_dict().items()) == _serial_sum(tables)
    # and the twin: RegexCounters merged one into another give the same counts in the same order
    regex = [RegexCounter() for _ in pieces]
    for counter, piece in zip(regex, pieces):
        counter.add_utf8(piece, [])
    for other in regex[1:]:
        regex[0].merge(other, threads=2)
    assert list(regex[0].to_dict().items()) == _serial_sum(tables)


def test_merge_threads_must_be_a_sane_count():
    left, right = _counter({b" a": 1}), _counter({b" b": 1})
    for bad in (0, -1, 10**6):
        with pytest.raises(ValueError, match=r"threads must be 1 .. 1024"):
            left.merge(right, threads=bad)
    with pytest.raises(TypeError):
        left.merge(right, threads="2")
    with pytest.raises(TypeError):
        left.merge(other=right)  # positional only, as before
    assert left.to_dict() == {b" a": 1}


ZZ = pack_counts({b" zz": 1})


def _refused_or(call):
    """(True, call()) or, if the counter is busy, (False, None)."""
    try:
        return True, call()
    except RuntimeError as exc:
        assert "in use by another thread" in str(exc)
        return False, None


def test_using_either_counter_during_a_threaded_merge_is_refused_or_sees_before_or_after():
    """merge() runs without the GIL: calls on either counter from another thread meanwhile are
    refused (busy), never served from a half-merged table."""
    big, other_words = _many_words(5, 200_000), _many_words(6, 200_000)
    after = dict(_serial_sum([big, other_words]))
    for _ in range(3):
        into, other = _counter(big), _counter(other_words)
        lengths: list[int] = []
        added = [0]

        def use_both(into=into, other=other, lengths=lengths, added=added) -> None:
            ok, n = _refused_or(lambda: len(into))
            if ok:
                lengths.append(n)
            ok, counts = _refused_or(other.to_dict)
            assert not ok or counts == other_words
            ok, _ = _refused_or(lambda: into.add_packed(ZZ))
            added[0] += ok

        outcome, failures = while_running(lambda: into.merge(other, threads=2), use_both)
        assert outcome is None and not [f for f in failures if f is not None], failures
        # each len() saw the table before the merge or after it (with " zz" or not)
        assert set(lengths) <= {len(big), len(big) + 1, len(after), len(after) + 1}
        result = into.to_dict()
        assert result.pop(b" zz", 0) == added[0]
        assert result == after  # the merge happened once, whole


@pytest.mark.parametrize("fixture", ["kjv.txt", "german.txt"])
def test_count_pretokens_on_threads_equals_one_worker(fixture):
    """End to end: the local backend merges its threads' tables on as many threads."""
    path = require_text(fixture)
    one = count_pretokens(path, ["<|endoftext|>"], 1)
    for workers in (2, 3, 4):
        assert count_pretokens(path, ["<|endoftext|>"], workers) == one
        packed = count_pretokens(path, ["<|endoftext|>"], workers, packed=True)
        assert len(packed) == len(one) and dict(packed) == dict(one)
        # and packed on as many threads, keeping the counts of at least 3
        packed = count_pretokens(path, ["<|endoftext|>"], workers, packed=True, min_pretoken_count=3)
        assert dict(packed) == {word: n for word, n in one.items() if n >= 3}


# ---- to_packed(min_count, threads=N) ----


def _kept(pairs: list[tuple[bytes, int]], min_count: int) -> dict[bytes, int]:
    return {word: n for word, n in pairs if n >= min_count}


MIN_COUNTS = st.one_of(st.just(1), st.integers(-2, 3), st.integers(1, 2**41))


@given(tables=TABLES, min_count=MIN_COUNTS, merge_threads=st.integers(1, 3))
@settings(max_examples=examples(200))
def test_to_packed_on_any_threads_is_the_one_thread_bytes_and_the_twins(tables, min_count, merge_threads):
    # (merged tables: entries appended by a merge, long keys copied into the arena by it)
    total = _merged(tables, merge_threads)
    expected = pack_counts(_kept(_serial_sum(tables), min_count))
    one = total.to_packed(min_count)
    assert one == expected
    for threads in range(1, 6):
        assert total.to_packed(min_count, threads=threads) == one
    assert total.to_packed(threads=4) == pack_counts(dict(_serial_sum(tables)))


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_to_packed_of_empty_tables(threads):
    empty = pack_counts({})
    assert pretoken_counter(compiled=True).to_packed(threads=threads) == empty
    assert pretoken_counter(compiled=True).to_packed(7, threads=threads) == empty
    # every count below min_count: no word is kept, on any share
    words = _counter({b" x": 2, b" long-enough-key": 3, b"y": 1})
    assert words.to_packed(4, threads=threads) == empty
    # fewer words than threads
    assert words.to_packed(3, threads=threads) == pack_counts({b" long-enough-key": 3})


@pytest.mark.parametrize("fixture", ["kjv.txt", "german.txt", "tinystories_sample.txt", "corpus.en"])
def test_to_packed_of_real_text_equals_the_regex_counters(fixture):
    text = fixture_text(fixture)[:1_500_000]
    pieces = [piece.encode("utf-8") for piece in _parts(text, 3)]
    counters = []
    for piece in pieces:
        counter = pretoken_counter(compiled=True)
        assert counter.add_utf8(piece, [])
        counters.append(counter)
    total = counters[0]
    for other in counters[1:]:
        total.merge(other, threads=2)
    twin = RegexCounter()
    twin.add_utf8(text.encode("utf-8"), [])
    for min_count in (1, 2, 10):
        expected = twin.to_packed(min_count)
        assert min_count > 2 or unpack_counts(expected)  # real tables, not only empty ones
        for threads in range(1, 6):
            assert total.to_packed(min_count, threads=threads) == expected


def test_to_packed_threads_must_be_a_sane_count():
    counter = _counter({b" a": 1})
    for bad in (0, -1, 10**6):
        with pytest.raises(ValueError, match=r"to_packed: threads must be 1 .. 1024"):
            counter.to_packed(threads=bad)
    with pytest.raises(TypeError):
        counter.to_packed(threads="2")
    assert counter.to_packed(1, threads=1024) == pack_counts({b" a": 1})


def test_using_the_counter_during_a_threaded_to_packed_is_refused_or_sees_before_or_after():
    """to_packed() reads the table without the GIL: calls on the counter from another thread
    meanwhile are refused (busy), and the bytes are the table as it was at one moment. Each call
    adds 1 to the first word (the first thread's share) and the last (the second's), and adds
    " zz": bytes read while a call ran would hold the two words' counts raised unequally."""
    big = _many_words(7, 300_000)
    first, last = next(iter(big)), list(big)[-1]
    bump = pack_counts({first: 1, last: 1, b" zz": 1})
    for _ in range(3):
        counter = _counter(big)
        lengths: list[int] = []
        added = [0]

        def use(counter=counter, lengths=lengths, added=added) -> None:
            ok, n = _refused_or(lambda: len(counter))
            if ok:
                lengths.append(n)
            ok, _ = _refused_or(lambda: counter.add_packed(bump))
            added[0] += ok

        def after(calls: int) -> dict[bytes, int]:
            """The table after `calls` calls of use() added."""
            return {**big, first: big[first] + calls, last: big[last] + calls, b" zz": calls} if calls else big

        outcome, failures = while_running(lambda: counter.to_packed(threads=2), use)
        assert not [f for f in failures if f is not None], failures
        assert isinstance(outcome, bytes), outcome
        calls = unpack_counts(outcome).get(b" zz", 0)
        assert calls <= added[0]
        assert outcome == pack_counts(after(calls))
        assert set(lengths) <= {len(big), len(big) + 1}
        assert counter.to_dict() == after(added[0])
