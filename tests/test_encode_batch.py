"""Batches, numpy output and threads: every encoder, cache size and thread count gives the ids of
the pure-Python scan encoder text by text (and tiktoken's on GPT-2's vocab); bad input is named."""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial

import numpy as np
import pytest
from conftest import examples, fixture_text, load_gpt2, while_running
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import Tokenizer
from bpe_impls.base import compiled
from bpe_impls.base.errors import ConfigError, EncodeError
from bpe_impls.encoding.batches import MIN_RUN_BYTES, RUNS_PER_THREAD, batch_runs
from bpe_impls.encoding.encoders import ENCODERS

EOT = "<|endoftext|>"
SPECIALS = [EOT, EOT + EOT, "<|e", "x"]  # overlapping, one a prefix of another, one a single letter
CACHES = [0, 1, 2**16]
THREADS = [1, 2, 3]
SETTINGS = [(name, cache) for name in ENCODERS for cache in CACHES]


@pytest.fixture(scope="module")
def gpt2_parts():
    tok = load_gpt2([EOT])
    return tok.vocab, tok.merges


@pytest.fixture(scope="module")
def reference(gpt2_parts) -> Tokenizer:
    """The pure-Python twin every other path is held to."""
    return Tokenizer(*gpt2_parts, SPECIALS, encoder="scan", cache_size=0)


@pytest.fixture(scope="module", params=SETTINGS, ids=[f"{n}-cache{c}" for n, c in SETTINGS])
def tok(request, gpt2_parts) -> Tokenizer:
    # One per setting for the module, so the cache carries over between examples, as in real use.
    name, cache = request.param
    return Tokenizer(*gpt2_parts, SPECIALS, encoder=name, cache_size=cache)


pieces = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=10),  # every category but surrogates
    st.sampled_from(
        [EOT, EOT + EOT, "<|e", "<|endoftext", "x", "'ll", " ", "  ", "\n\n", "\u00a0", "日本語", "Привет", "é"]
    ),
    st.text(alphabet=" \t\n\r\x0b\x0c\u3000", min_size=1, max_size=6),
)
texts = st.lists(pieces, max_size=8).map("".join)
batches = st.lists(texts, max_size=7)


@pytest.mark.parametrize("threads", THREADS)
@settings(max_examples=examples(25), deadline=None)
@given(batch=batches)
def test_batches_equal_the_reference_text_by_text(tok, reference, threads, batch):
    expected = [reference.encode(text) for text in batch]
    assert tok.encode_batch(batch, threads) == expected
    assert tok.encode_batch(batch, threads, allowed_special=set()) == [
        reference.encode_ordinary(text) for text in batch
    ]
    ids, offsets = tok.encode_batch_to_numpy(batch, threads)
    assert ids.dtype == np.uint16 and offsets.dtype == np.int64 and len(offsets) == len(batch) + 1
    assert [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])] == expected
    for text, want in zip(batch, expected):
        assert tok.encode_to_numpy(text).tolist() == want
        assert tok.encode_to_numpy(text.encode()).tolist() == want


@settings(max_examples=examples(40), deadline=None)
@given(text=texts, specials=st.sampled_from([[], SPECIALS]), itemsize=st.sampled_from([2, 4]))
def test_encoder_buffer_methods_equal_encode_utf8(tok, text, specials, itemsize):
    encoder = tok._encoder
    data = text.encode("utf-8")
    special_bytes = [s.encode() for s in specials]
    special_ids = [tok.special_token_ids[s] for s in specials]
    dtype = {2: np.uint16, 4: np.uint32}[itemsize]
    want = encoder.encode_utf8(data, special_bytes, special_ids)
    assert (
        np.frombuffer(encoder.encode_utf8_buffer(data, special_bytes, special_ids, itemsize=itemsize), dtype).tolist()
        == want
    )
    want_settled, want_cut = encoder.encode_utf8(data, special_bytes, special_ids, True)
    buffer, cut = encoder.encode_utf8_buffer(data, special_bytes, special_ids, True, itemsize)
    assert (np.frombuffer(buffer, dtype).tolist(), cut) == (want_settled, want_cut)
    datas = [data, b"", data[: len(data) // 2].decode("utf-8", "ignore").encode()]
    ids, offsets = encoder.encode_many_buffer(datas, special_bytes, special_ids, itemsize)
    flat, bounds = np.frombuffer(ids, dtype).tolist(), np.frombuffer(offsets, np.int64).tolist()
    each = [encoder.encode_utf8(d, special_bytes, special_ids) for d in datas]
    assert [flat[a:b] for a, b in zip(bounds, bounds[1:])] == each
    assert encoder.encode_many_lists(datas, special_bytes, special_ids) == each
    for start, stop in ((0, 0), (1, 3), (2, 3), (0, 2)):
        assert encoder.encode_many_lists(datas, special_bytes, special_ids, start, stop) == each[start:stop]
    assert encoder.encode_many_lists([text, text], special_bytes, special_ids) == [want, want]  # str items


@pytest.mark.parametrize("name", list(ENCODERS))
def test_encoder_buffer_errors_name_the_id_and_the_index(name, gpt2_parts):
    encoder = Tokenizer(*gpt2_parts, [EOT], encoder=name)._encoder
    with pytest.raises(ValueError, match="70000"):
        encoder.encode_utf8_buffer(b"a<|x|>b", [b"<|x|>"], [70000], itemsize=2)
    assert np.frombuffer(encoder.encode_utf8_buffer(b"<|x|>", [b"<|x|>"], [70000]), np.uint32).tolist() == [70000]
    with pytest.raises(ValueError, match="70000"):
        encoder.encode_many_buffer([b"a", b"<|x|>"], [b"<|x|>"], [70000], 2)
    with pytest.raises(TypeError, match="2"):
        encoder.encode_many_buffer([b"a", b"b", 3], [], [])
    with pytest.raises(ValueError):
        encoder.encode_many_buffer([b"a", b"\xff"], [], [])
    assert encoder.encode_many_lists([b"a<|x|>"], [b"<|x|>"], [70000]) == [
        encoder.encode_utf8(b"a<|x|>", [b"<|x|>"], [70000])
    ]
    with pytest.raises(TypeError, match="2"):
        encoder.encode_many_lists([b"a", b"b", 3], [], [])
    with pytest.raises(ValueError):
        encoder.encode_many_lists([b"a", b"\xff"], [], [])
    with pytest.raises(UnicodeEncodeError):
        encoder.encode_many_lists(["a", "\udc80"], [], [])
    for start, stop in ((-1, 1), (2, 1), (0, 3)):
        with pytest.raises(ValueError, match=f"start {start} and stop {stop} are not a range of datas' 2 items"):
            encoder.encode_many_lists([b"a", b"b"], [], [], start, stop)


@pytest.mark.parametrize("name", list(ENCODERS))
@pytest.mark.parametrize("cache", CACHES)
def test_threads_share_one_encoder_safely(name, cache, gpt2_parts, reference):
    """Three threads call encode_many_buffer on one encoder at once (started together by a barrier),
    each on its own texts, over and over; a tiny cache is cleared under them all the time."""
    encoder = Tokenizer(*gpt2_parts, SPECIALS, encoder=name, cache_size=cache)._encoder
    lines = fixture_text("corpus.en").splitlines(keepends=True)[:300]
    work = [lines[i::3] for i in range(3)]
    specials = [s.encode() for s in SPECIALS]
    special_ids = [reference.special_token_ids[s] for s in SPECIALS]
    expected = [[reference.encode(line) for line in part] for part in work]
    barrier = threading.Barrier(3)

    def run(part: int) -> list[list[list[int]]]:
        datas = [line.encode() for line in work[part]]
        barrier.wait()
        results = []
        for _ in range(4):
            ids, offsets = encoder.encode_many_buffer(datas, specials, special_ids, 4)
            flat, bounds = np.frombuffer(ids, np.uint32).tolist(), np.frombuffer(offsets, np.int64).tolist()
            results.append([flat[a:b] for a, b in zip(bounds, bounds[1:])])
            results.append(encoder.encode_many_lists(datas, specials, special_ids))
        return results

    with ThreadPoolExecutor(3) as pool:
        for part, results in enumerate(pool.map(run, range(3))):
            assert all(result == expected[part] for result in results)


@pytest.mark.parametrize("name", list(ENCODERS))
@pytest.mark.parametrize("threads", THREADS)
def test_real_text_batch_equals_tiktoken(name, threads, gpt2_parts):
    tiktoken = pytest.importorskip("tiktoken")
    from bpe_impls.harness.peers import tiktoken_encoding

    encoding = tiktoken_encoding(gpt2_parts[0], [EOT], "test_encode_batch")
    assert isinstance(encoding, tiktoken.Encoding)
    lines = fixture_text("corpus.en").splitlines(keepends=True)
    tok = Tokenizer(*gpt2_parts, [EOT], encoder=name)
    expected = encoding.encode_ordinary_batch(lines, num_threads=threads)
    assert tok.encode_batch(lines, threads, allowed_special=set()) == expected
    ids, offsets = tok.encode_batch_to_numpy(lines, threads)
    assert ids.tolist() == [token for line in expected for token in line]
    assert np.diff(offsets).tolist() == [len(line) for line in expected]


def test_num_threads_none_uses_every_core_and_bad_counts_are_named(gpt2_parts):
    tok = Tokenizer(*gpt2_parts, [EOT])
    assert tok.encode_batch(["a b", "c"]) == [tok.encode("a b"), tok.encode("c")]
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="num_threads"):
            tok.encode_batch(["a"], bad)


@pytest.mark.parametrize("name", list(ENCODERS))
def test_bad_batch_items_are_named_by_index(name, gpt2_parts):
    tok = Tokenizer(*gpt2_parts, [EOT], encoder=name)
    for call in (tok.encode_batch, partial(tok.encode_batch, allowed_special=set()), tok.encode_batch_to_numpy):
        with pytest.raises(TypeError, match="batch index 2: expected str, got bytes"):
            call(["a", "b", b"c"])
        with pytest.raises(EncodeError, match=r"batch index 1: lone surrogate U\+DC80 at position 3"):
            call(["ok", "abc\udc80"], 2)
        with pytest.raises(TypeError, match="sequence of str"):
            call("not a list")
    with pytest.raises(EncodeError, match="batch index 1: not valid UTF-8 at byte offset 2"):
        tok.encode_batch_to_numpy([b"fine", b"ab\xc3(", b"x"], 2)
    with pytest.raises(TypeError, match="batch index 1: expected bytes, got str"):
        tok.encode_batch_to_numpy([b"text", "text"])  # a batch is all str or all bytes
    with pytest.raises(EncodeError, match=r"^not valid UTF-8 at byte offset 2$"):
        tok.encode_to_numpy(b"ab\xc3(")
    with pytest.raises(TypeError, match="expected str or bytes, got bytearray"):
        tok.encode_to_numpy(bytearray(b"text"))


def test_dtypes(gpt2_parts):
    small = Tokenizer(*gpt2_parts, [EOT])
    assert small.encode_to_numpy("hi").dtype == np.uint16
    assert small.encode_to_numpy("hi", dtype="uint32").dtype == np.uint32
    assert small.encode_batch_to_numpy(["hi"], dtype=np.uint32)[0].dtype == np.uint32
    assert small.encode_to_numpy(b"hi").dtype == np.uint16
    assert small.encode_to_numpy(b"hi", dtype="uint32").tolist() == small.encode("hi")
    for bad in ("float32", "int8", "nonsense", object):
        with pytest.raises(ValueError, match="unknown id dtype"):
            small.encode_to_numpy("hi", dtype=bad)
    vocab = {i: bytes([i]) for i in range(256)} | {70000: b"ab"}
    large = Tokenizer(vocab, [(b"a", b"b")], ["<|x|>"])
    assert large.n_vocab == 70002
    ids = large.encode_to_numpy("ab<|x|>")
    assert ids.dtype == np.uint32 and ids.tolist() == large.encode("ab<|x|>") == [70000, 70001]
    with pytest.raises(ConfigError, match="uint16 cannot hold"):
        large.encode_batch_to_numpy(["ab"], dtype="uint16")
    assert large.encode_batch_to_numpy([])[0].dtype == np.uint32
    empty_ids, empty_offsets = small.encode_batch_to_numpy([], 3)
    assert empty_ids.tolist() == [] and empty_offsets.tolist() == [0]


@settings(max_examples=examples(200), deadline=None)
@given(sizes=st.lists(st.integers(0, 50), max_size=30), parts=st.integers(1, 6), min_size=st.integers(1, 40))
def test_batch_runs_cover_the_batch_in_order(sizes, parts, min_size):
    items = ["x" * size for size in sizes]
    bounds = batch_runs(items, str, parts, 1, min_size)
    runs = [slice(a, b) for a, b in zip(bounds, bounds[1:])]
    assert [i for run in runs for i in range(len(sizes))[run]] == list(range(len(sizes)))
    wanted = min(parts, max(1, sum(sizes) // min_size))
    assert all(run.stop > run.start for run in runs) and len(runs) <= wanted
    if sizes and sum(sizes) and wanted > 1:
        # no run is heavier than an equal share plus the largest single item
        assert max(sum(sizes[run]) for run in runs) <= sum(sizes) / wanted + max(sizes)


@pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled core is not built (or BPE_IMPLS_PURE is set)")
@settings(max_examples=examples(300), deadline=None)
@given(
    sizes=st.lists(st.integers(0, 10**6), max_size=40),
    max_parts=st.integers(1, 20),
    min_parts=st.integers(1, 4),
    min_size=st.integers(1, 10**6),
    as_bytes=st.booleans(),
)
def test_compiled_batch_runs_equal_the_twin(sizes, max_parts, min_parts, min_size, as_bytes):
    """The C pass that checks and sizes a batch cuts it exactly where the pure-Python twin does."""
    kind = bytes if as_bytes else str
    items = [kind() if size == 0 else (b"a" if as_bytes else "\xe9") * size for size in sizes]
    args = (items, kind, max_parts, min_parts, min_size)
    assert compiled.core().batch_runs(*args) == batch_runs(*args)


@pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled core is not built (or BPE_IMPLS_PURE is set)")
@pytest.mark.parametrize(
    "kind, items, index",
    [
        (str, ["a", b"b"], 1),
        (bytes, [b"a", b"b", "c"], 2),
        (str, [1], 0),
        (bytes, [bytearray(b"x")], 0),
        (str, ["a", np.str_("b"), np.int64(3)], 2),
    ],
)
def test_compiled_batch_runs_name_a_bad_item_as_the_twin_does(kind, items, index):
    with pytest.raises(TypeError) as twin:
        batch_runs(items, kind, 4, 1, 1)
    with pytest.raises(TypeError) as native:
        compiled.core().batch_runs(items, kind, 4, 1, 1)
    assert str(native.value) == str(twin.value) and str(twin.value).startswith(f"batch index {index}:")


@pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled core is not built")
def test_a_list_changed_by_another_thread_while_encoded_gives_old_or_new_items(gpt2_parts):
    """The batch's list is not copied: another thread swapping its items (or cutting it short)
    while the compiled encoder encodes it without the GIL gives each text the ids of its old or
    its new item, or an error saying the list changed size, never a crash (the sanitizer run holds it to that)."""
    tok = Tokenizer(*gpt2_parts, [EOT], encoder="native")
    old = [f"line {k} of the old batch, é{k}.\n" * 3 for k in range(3000)]
    new = [f"{EOT}new text {k}: 中文 {k}\n" for k in range(3000)]
    want = {text: tok.encode(text) for text in old + new}
    for cut_short in (False, True):
        batch = list(old)

        def swap() -> None:
            for k in range(0, len(batch), 7):
                batch[k] = new[k] if batch[k] is old[k] else old[k]
            if cut_short and len(batch) > 2000:
                del batch[2000:]

        outcome, swaps = while_running(lambda: tok.encode_batch_to_numpy(batch, num_threads=2), swap)
        assert swaps and not [s for s in swaps if isinstance(s, Exception)]
        if isinstance(outcome, RuntimeError) and cut_short:
            # A run reached past the list's new end: the error says what happened, not how.
            assert str(outcome).startswith("the batch changed size while it was encoded (3000 items, now 2000)")
            continue
        assert not isinstance(outcome, Exception), outcome
        ids, offsets = outcome
        # The whole list, or (cut before the batch read its length) the 2000 items left.
        assert len(offsets) - 1 == len(old) or (cut_short and len(offsets) - 1 == 2000)
        for k in range(len(offsets) - 1):
            assert ids[offsets[k] : offsets[k + 1]].tolist() in (want[old[k]], want[new[k]])
    for cut_short in (False, True):  # the same for lists
        batch = list(old)
        outcome, swaps = while_running(lambda: tok.encode_batch(batch, num_threads=2), swap)
        assert swaps and not [s for s in swaps if isinstance(s, Exception)]
        if isinstance(outcome, RuntimeError) and cut_short:
            assert str(outcome).startswith("the batch changed size while it was encoded (3000 items, now 2000)")
            continue
        assert not isinstance(outcome, Exception), outcome
        assert len(outcome) == len(old) or (cut_short and len(outcome) == 2000)
        for k, ids in enumerate(outcome):
            assert ids in (want[old[k]], want[new[k]])


@pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled core is not built")
def test_batch_lists_share_one_int_object_per_id(gpt2_parts):
    """encode_batch's lists hold the encoder's one int object per id (as encode's list does), not
    a new int per token: building them is a load and a reference count, the cheap part of a batch
    that one thread does while the others encode."""
    tok = Tokenizer(*gpt2_parts, [EOT], encoder="native")
    lines = fixture_text("corpus.en").splitlines(keepends=True)[:400]
    for threads in (1, 2):
        lists = tok.encode_batch(lines, threads)
        first: dict[int, int] = {}
        for ids in lists:
            for token in ids:
                assert first.setdefault(token, id(token)) == id(token)
        assert any(token > 256 for token in first)  # (ints below 257 are shared by CPython anyway)
        one = tok.encode(lines[0])
        assert all(a is b for a, b in zip(one, lists[0], strict=True))


@pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled core is not built")
def test_encode_many_lists_while_another_thread_reinitialises_the_encoder(gpt2_parts):
    """Each call's lists come whole from the tables it started with: the old ones or the new."""
    from conftest import race_reinit

    encoder = Tokenizer(*gpt2_parts, [EOT], encoder="native")._encoder
    identity = list(range(256))  # tiny tables of its own: byte b is id b
    merges_a = [(97, 98, 256), (256, 99, 257)]
    merges_b = [(98, 99, 256)]
    datas = ["abc abcabc ab " * 20, "bc a", "", "abc"] * 25

    def twin(merges):
        other = compiled.core().Encoder(identity, merges)
        return other.encode_many_lists(datas, [], [])

    outcomes = {repr(twin(merges_a)): "a", repr(twin(merges_b)): "b"}
    seen: set[str] = set()
    encoder.__init__(identity, merges_a)

    def encode_once() -> None:
        seen.add(outcomes[repr(encoder.encode_many_lists(datas, [], []))])

    race_reinit(encoder, identity, (merges_b, [(1, 2)], merges_a), encode_once, threads=3, rounds=100)
    assert seen <= {"a", "b"}


@pytest.mark.parametrize("threads", [1, 2])
def test_long_runs_lists_equal_the_twin_special_tokens_included(gpt2_parts, threads):
    """Runs of many ids have their lists filled without the GIL from the table of ints; a special
    token's id (beyond the merges' ids: not in the table) is made with the GIL after. Every list
    equals the pure-Python encoder's, and reusing the lists (appending, comparing) is sound."""
    native = Tokenizer(*gpt2_parts, SPECIALS, encoder="native")
    twin = Tokenizer(*gpt2_parts, SPECIALS, encoder="hybrid")
    lines = fixture_text("corpus.en").splitlines(keepends=True)
    batch = [f"{line}{EOT}" if k % 3 == 0 else line for k, line in enumerate(lines)] + ["", EOT * 3, "x"]
    special_id = native.special_token_ids[EOT]
    assert special_id > 255 + len(native.merges)  # beyond every merged id: not in the table
    got = native.encode_batch(batch, threads)
    assert got == twin._encoder.encode_many_lists(
        batch, [s.encode() for s in SPECIALS], list(native.special_token_ids.values())
    )
    assert got == [twin.encode(text) for text in batch]
    assert sum(map(len, got)) > 8192 and sum(ids.count(special_id) for ids in got) > 100
    for ids in got:
        ids.append(special_id)  # each list is a list of its own
    assert got[0][-1] == special_id and got[1][-1] == special_id


@pytest.mark.parametrize("threads", [1, 2])
def test_long_runs_lists_hold_one_reference_per_slot(gpt2_parts, threads):
    """The lists filled without the GIL count one reference to the table's int per slot, no more
    and no fewer: the references an int gains with the batch are its uses in it, and it loses
    them all when the lists go."""
    native = Tokenizer(*gpt2_parts, SPECIALS, encoder="native")
    batch = fixture_text("corpus.en").splitlines(keepends=True)
    first = native.encode_batch(batch, threads)
    assert sum(map(len, first)) > 8192  # (long enough that the lists are filled without the GIL)
    # a few ints of the table (not small ints, which CPython shares): the most and least used
    counts: dict[int, int] = {}
    for ids in first:
        for i in ids:
            if i > 256:
                counts[i] = counts.get(i, 0) + 1
    probes = sorted(counts, key=counts.get)
    probes = [next(i for ids in first for i in ids if i == value) for value in (probes[0], probes[-1])]
    del first
    before = [sys.getrefcount(probe) for probe in probes]
    got = native.encode_batch(batch, threads)
    after = [sys.getrefcount(probe) for probe in probes]
    uses = [sum(ids.count(probe) for ids in got) for probe in probes]
    assert [a - b for a, b in zip(after, before)] == uses
    assert all(ids[k] is probe for probe in probes for ids in got for k, i in enumerate(ids) if i == probe)
    del got
    assert [sys.getrefcount(probe) for probe in probes] == before


@contextmanager
def collections_seen() -> Iterator[list[tuple[int, int]]]:
    """(generation, thread id) of each collection the cyclic collector starts in the block."""
    seen: list[tuple[int, int]] = []

    def note(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append((info["generation"], threading.get_ident()))

    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)


@pytest.mark.parametrize("name", ["native", "scan"])
def test_batch_lists_young_collection_runs_on_the_batch_threads(gpt2_parts, name):
    """The collector is paused while a batch's lists are made; the young generation's pass over
    them runs on the batch's threads (the calling thread is one of them), each after its run
    while the others still encode, not on the calling thread alone once the collector resumes."""
    tok = Tokenizer(*gpt2_parts, [EOT], encoder=name)
    lines = [line[:30] for line in fixture_text("corpus.en").splitlines(keepends=True)]
    batch = (lines * (4 * gc.get_threshold()[0] // len(lines) + 1))[: 4 * gc.get_threshold()[0]]
    # Two runs, each of more lists than the collector's threshold: each run's lists are collected
    # on a batch thread (by its own thread, or by the other's collection), whatever the timing.
    assert len(batch_runs(batch, str, 2 * RUNS_PER_THREAD, 2, MIN_RUN_BYTES)) == 3
    want = tok.encode_batch(batch, 1)
    gc.collect()
    with collections_seen() as seen:
        got = tok.encode_batch(batch, 2)
        during = len(seen)
        made = [[] for _ in range(10)]  # allocations after the call: a collection due would start here
    assert got == want and made
    assert during > 0 and len(seen) == during, seen  # all during the call, none left for after
    assert all(generation == 0 for generation, _ in seen), seen


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_lists_young_collection_after_every_run(gpt2_parts, threads):
    """A batch of several runs has its young generation collected after every run, even a run of
    fewer lists than the collector's threshold (each pass then covers about one run's lists, still
    in the cache, and holds the GIL that long); a small batch only when the collector would have
    collected anyway (a loop of small batches collects no more often than the collector)."""
    tok = Tokenizer(*gpt2_parts, [EOT])
    lines = [line for line in fixture_text("corpus.en").splitlines(keepends=True) if len(line) > 40]
    batch = (lines * (5 * MIN_RUN_BYTES // sum(map(len, lines)) + 1))[: 5 * MIN_RUN_BYTES // 60]
    runs = len(batch_runs(batch, str, threads * RUNS_PER_THREAD if threads > 1 else 1, threads, MIN_RUN_BYTES)) - 1
    lists_per_run = len(batch) / runs
    assert (runs > 2 and lists_per_run < gc.get_threshold()[0]) if threads > 1 else runs == 1
    want = [tok.encode(line) for line in batch]
    small = batch[:10]
    gc.collect()
    with collections_seen() as seen:
        assert tok.encode_batch(batch, threads) == want
    assert seen and all(generation == 0 for generation, _ in seen), seen
    if threads > 1:
        assert len(seen) == runs, (seen, runs)
    gc.collect()
    with collections_seen() as seen:
        assert tok.encode_batch(small, threads) == want[:10]
    assert seen == []


def test_batch_lists_start_no_collection_when_the_collector_is_off(gpt2_parts):
    """A caller that turned the collector off gets no collection from encode_batch."""
    tok = Tokenizer(*gpt2_parts, [EOT])
    batch = fixture_text("corpus.en").splitlines(keepends=True) * 4
    gc.disable()
    try:
        with collections_seen() as seen:
            for threads in (1, 2):
                tok.encode_batch(batch, threads)
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert seen == []


def _batch_in_a_forked_child(tok: Tokenizer, docs: list[str], queue) -> None:  # (a child's entry)
    queue.put(tok.encode_batch(docs, 2))


def test_a_forked_child_encodes_a_threaded_batch(gpt2_parts):
    """The batch threads are kept between calls; a child forked after a threaded batch has none of
    them (only the forking thread survives a fork), and must start its own rather than wait for
    threads that do not exist."""
    import multiprocessing

    tok = Tokenizer(*gpt2_parts, [EOT])
    docs = [fixture_text("corpus.en")[k : k + 2000] for k in range(0, 4 * MIN_RUN_BYTES, 2000)]
    expected = tok.encode_batch(docs, 2)  # the parent's threads now exist
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_batch_in_a_forked_child, args=(tok, docs, queue))
    child.start()
    try:
        got = queue.get(timeout=120)  # (a child waiting on the parent's threads never answers)
    finally:
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
    assert got == expected


def test_a_failed_threaded_batch_leaves_nothing_running(gpt2_parts):
    """A run that fails ends the call only once every other run of it has finished or been
    cancelled: no thread still reads the batch after the error is raised."""
    tok = Tokenizer(*gpt2_parts, [EOT])
    text = fixture_text("corpus.en")
    datas = [text[k : k + 4096].encode("utf-8") for k in range(0, 32 * 4096, 4096)]
    datas[3] = b"\xff" + datas[3]  # both runs fail, whichever thread takes which
    datas[20] = b"\xff" + datas[20]
    slow_work = datas[4:12]
    caller = threading.get_ident()
    failed, helper_started = threading.Event(), threading.Event()
    started: list[int] = []
    finished: list[int] = []
    encoder = tok._encoder

    def run(items, specials, ids, itemsize, start, stop):
        started.append(start)
        if threading.get_ident() == caller:
            helper_started.wait(10)  # (the helper is then inside its run)
        else:
            helper_started.set()
            failed.wait(10)  # the caller's run has failed: the helper's is still going, and slow
            for _ in range(50):
                encoder.encode_many_buffer(slow_work, specials, ids, itemsize, 0, len(slow_work))
        try:
            return encoder.encode_many_buffer(items, specials, ids, itemsize, start, stop)
        except ValueError:
            failed.set()
            raise
        finally:
            finished.append(start)

    class Patched:
        def __getattr__(self, name):
            return getattr(encoder, name)

        encode_many_buffer = staticmethod(run)

    tok._encoder = Patched()
    with pytest.raises(EncodeError, match="batch index 3"):
        tok.encode_batch_to_numpy(datas, 2)
    assert len(started) == 2 and sorted(finished) == sorted(started)
