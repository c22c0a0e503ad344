"""The compiled Encoder's GIL-free entry points against the pure-Python encoder and tiktoken.

encode_utf8_buffer(data, special_tokens, special_ids, settled=False, itemsize=4) and
encode_many_buffer(datas, special_tokens, special_ids, itemsize=4) must give encode_utf8's ids (and
its settled cut), which PythonEncoder with bpe_hybrid gives independently; they run without the
GIL, so several threads may share one Encoder (each call takes a cache of its own): ids stay
exact, caches stay bounded, and inputs another thread changes are read as one snapshot.
"""

from __future__ import annotations

import array
import sys
import threading

import pytest
from conftest import examples, fixture_text, race_reinit, require_compiled_core, require_gpt2_files, require_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe_impls import train_bpe
from bpe_impls.base import compiled
from bpe_impls.base.patterns import GPT2_PATTERN, PRESETS
from bpe_impls.encoding.bpe import bpe_hybrid
from bpe_impls.encoding.encoders import PythonEncoder, native_encoder
from bpe_impls.encoding.formats.gpt2 import load_tokenizer_files

require_compiled_core()

EOT = "<|endoftext|>"
# Special tokens that overlap one another (prefixes, suffixes, a shared first byte) and the text.
SPECIAL_POOL = [EOT, "<|end", "endoftext|>", "<|", "é", "ab", "\n\n"]

# Every Unicode category but lone surrogates (which have no UTF-8), and the pieces where the
# pattern's alternatives and the special tokens meet.
pieces = st.sampled_from(
    [
        "a",
        "b",
        "ab",
        "Z",
        "é",
        "中文",
        "🙂",
        "1",
        "²",
        "'s",
        "'ll",
        " ",
        "  ",
        "\n",
        "\n\n",
        "\r\n",
        "\t",
        "\u00a0",
        "\u3000",
        "\u0301",
        ".",
        "-",
        "<|",
        "|>",
        "<|end",
        EOT,
        "endoftext|>",
    ]
)
texts = st.one_of(
    st.lists(pieces, max_size=60).map("".join),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=80),
)


@pytest.fixture(scope="module")
def tables():
    """byte ids and a rank table trained on real text (a 600-token vocab: every id fits 2 bytes)."""
    vocab, merges = train_bpe(require_text("tinystories_sample.txt"), 600, [EOT], num_workers=1)
    by_bytes = {token: token_id for token_id, token in vocab.items()}
    byte_ids = [by_bytes[bytes([b])] for b in range(256)]
    ranks = {
        (by_bytes[left], by_bytes[right]): (rank, by_bytes[left + right]) for rank, (left, right) in enumerate(merges)
    }
    return byte_ids, ranks


def twin_and_native(tables, cache_size, pattern="gpt2"):
    byte_ids, ranks = tables
    return (
        PythonEncoder(bpe_hybrid, byte_ids, ranks, cache_size, PRESETS[pattern]),
        native_encoder(byte_ids, ranks, cache_size, PRESETS[pattern]),
    )


def unpack(buffer: bytearray, itemsize: int) -> list[int]:
    values = array.array("H" if itemsize == 2 else "I")
    assert values.itemsize == itemsize
    values.frombytes(bytes(buffer))
    return values.tolist()


def offsets_of(buffer: bytearray) -> list[int]:
    values = array.array("q")
    values.frombytes(bytes(buffer))
    return values.tolist()


# --- exactness ------------------------------------------------------------------------------------


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=texts,
    specials=st.lists(st.sampled_from(SPECIAL_POOL), max_size=4, unique=True),
    cache_size=st.sampled_from([0, 1, 2, 1 << 16]),
    itemsize=st.sampled_from([2, 4]),
    pattern=st.sampled_from(list(PRESETS)),
)
def test_buffer_entry_points_equal_the_python_encoder(tables, text, specials, cache_size, itemsize, pattern):
    twin, native = twin_and_native(tables, cache_size, pattern)
    data = text.encode("utf-8")
    tokens = [token.encode("utf-8") for token in specials]
    ids = list(range(600, 600 + len(tokens)))
    expected = twin.encode_utf8(data, tokens, ids)
    for _ in range(2):  # a cold cache, then a warm one
        assert unpack(native.encode_utf8_buffer(data, tokens, ids, itemsize=itemsize), itemsize) == expected
        assert native.encode_utf8(data, tokens, ids) == expected
        # a str stands for its UTF-8 (read where CPython keeps it), in both encoders
        assert unpack(native.encode_utf8_buffer(text, tokens, ids, itemsize=itemsize), itemsize) == expected
        assert native.encode_utf8(text, tokens, ids) == expected == twin.encode_utf8(text, tokens, ids)
    expected_ids, expected_cut = twin.encode_utf8(data, tokens, ids, True)
    got, cut = native.encode_utf8_buffer(data, tokens, ids, True, itemsize)
    assert (unpack(got, itemsize), cut) == (expected_ids, expected_cut)
    # a batch: the text, pieces of it, and the empty text, each as encode_utf8 gives it
    datas = [data, data[: len(data) // 2].decode("utf-8", "ignore").encode(), b"", data]
    flat, offsets = native.encode_many_buffer(datas, tokens, ids, itemsize=itemsize)
    flat, offsets = unpack(flat, itemsize), offsets_of(offsets)
    assert len(offsets) == len(datas) + 1 and offsets[0] == 0 and offsets[-1] == len(flat)
    for k, item in enumerate(datas):
        assert flat[offsets[k] : offsets[k + 1]] == twin.encode_utf8(item, tokens, ids)
    # a range of the batch gives what that slice of it gives, in both encoders
    for start, stop in [(0, 0), (1, 3), (2, 4), (4, 4)]:
        want = twin.encode_many_buffer(datas[start:stop], tokens, ids, itemsize)
        assert twin.encode_many_buffer(datas, tokens, ids, itemsize, start, stop) == want
        assert native.encode_many_buffer(datas, tokens, ids, itemsize, start=start, stop=stop) == want
    assert native.cache_len() <= cache_size


def relabel(tables, seed: int):
    """The same merges under other ids (a random permutation of them all): merged ids then no longer
    increase with rank, so the compiled encoder's scan must find merges by rank; and the map from
    the old ids to the new."""
    import random

    byte_ids, ranks = tables
    most = max(max(byte_ids), max(merged for _, merged in ranks.values()))
    new_id = list(range(most + 1))
    random.Random(seed).shuffle(new_id)
    relabelled = (
        [new_id[i] for i in byte_ids],
        {(new_id[a], new_id[b]): (rank, new_id[merged]) for (a, b), (rank, merged) in ranks.items()},
    )
    return relabelled, new_id


@pytest.fixture(scope="module")
def relabelled_tables(tables):
    return relabel(tables, seed=3)


def test_bpe_by_merged_id_and_by_rank_give_the_same_ids_on_real_text(tables, relabelled_tables):
    """Where merged ids increase with rank (a vocab trained here, as GPT-2's and tiktoken's), the scan
    finds each merge by its merged id in an 8-byte table; else by rank. Both give the twin's ids on
    real text in several scripts, with no cache (so every pre-token goes through BPE)."""
    relabelled, new_id = relabelled_tables
    twin, native = twin_and_native(tables, 0)
    twin_relabelled, native_relabelled = twin_and_native(relabelled, 0)
    assert native.scans_merged_ids() and not native_relabelled.scans_merged_ids()
    text = fixture_text("tinystories_sample.txt")[:200_000] + fixture_text("udhr.txt")[:200_000]
    data = text.encode()
    expected = twin.encode_utf8(data, [], [])
    assert native.encode_utf8(data, [], []) == expected
    relabelled_expected = [new_id[i] for i in expected]
    assert twin_relabelled.encode_utf8(data, [], []) == relabelled_expected
    assert native_relabelled.encode_utf8(data, [], []) == relabelled_expected


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts, cache_size=st.sampled_from([0, 2, 1 << 16]), pattern=st.sampled_from(list(PRESETS)))
def test_bpe_by_rank_equals_the_python_encoder(relabelled_tables, text, cache_size, pattern):
    twin, native = twin_and_native(relabelled_tables[0], cache_size, pattern)
    data = text.encode("utf-8")
    assert native.encode_utf8(data, [], []) == twin.encode_utf8(data, [], [])


@pytest.mark.parametrize("cache_size", [4, 16, 1 << 16])
def test_cached_entries_of_many_ids_survive_hits_and_evictions(tables, cache_size):
    """Entries of more than 3 ids live in the cache's id arena (short keys) or after their key (long
    ones), and a hit copies them in whole 16-byte chunks: every length 4..40, short and long keys,
    hit while another entry's ids follow or nothing does, kept across evictions (small caches)."""
    twin, native = twin_and_native(tables, cache_size)
    # rare letters: about one id per byte in a 600-token vocab
    words = [" " + "qzxjvkw"[k % 7] * (k % 5 + 1) + "xqjzk"[: k % 6] + "ǅ" * (k % 3) for k in range(40)]
    words += [" " + "zqxj" * k for k in range(1, 11)]  # up to 41 bytes: long keys
    text = "".join(words[k % len(words)] + words[(7 * k) % len(words)] for k in range(400))
    data = text.encode()
    expected = twin.encode_utf8(data, [], [])
    assert max(len(twin.encode_utf8(word.encode(), [], [])) for word in words) > 8  # really many ids
    for _ in range(3):
        assert unpack(native.encode_utf8_buffer(data, [], []), 4) == expected
        assert native.encode_utf8(data, [], []) == expected
    assert native.cache_len() <= cache_size


@pytest.mark.parametrize("cache_size", [40_000, 1 << 18])
def test_a_cache_past_its_prefetch_size_stays_exact(tables, cache_size):
    """A cache of more than 2**16 slots (over 32768 pre-tokens) is looked up in batches of scanned
    pre-tokens whose slots were prefetched: exact ids as the cache grows into that size mid-text,
    while misses grow and evict it under the batch (cache_size 40000), and warm, for short keys,
    long keys (over 15 bytes) and entries of many ids."""
    import random

    rng = random.Random(17)
    letters = "abcdefghijklmnopqrstuvwxyzéж中"
    words = [" " + "".join(rng.choice(letters) for _ in range(rng.randint(1, 22))) for _ in range(60_000)]
    text = "".join(rng.choice(words) + (str(k) if k % 3 == 0 else "") for k in range(150_000))
    data = text.encode()
    twin, native = twin_and_native(tables, cache_size)
    expected = twin.encode_utf8(data, [], [])
    for _ in range(2):
        assert unpack(native.encode_utf8_buffer(data, [], []), 4) == expected
    assert 32_768 < native.cache_len() <= cache_size


def test_a_full_cache_holds_its_bound_in_slots_loaded_to_three_quarters(tables):
    """The largest table a cache grows to is the power of two that holds cache_size entries at a
    load of at most 3/4 (where most of its memory is): 3,000 entries in 4,096 slots of 32 bytes,
    not 8,192, all of them kept (no eviction before the bound), and the ids exact."""
    from itertools import product

    letters = "abcdefghijklmnopqrstuvwxyz"
    # 2,999 distinct words of 3 letters and the newline: 3,000 pre-tokens of 3 ids at most (inline,
    # so no arena)
    words = ["".join(triple) for triple in product(letters, repeat=3)][:2999]
    data = "\n".join(words).encode() + b"\n"
    twin, native = twin_and_native(tables, 3000)
    assert native.encode_utf8(data, [], []) == twin.encode_utf8(data, [], [])
    assert native.cache_len() == 3000
    assert native.cache_memory() <= 4096 * 32 + 256  # (+ the cache's own struct)
    assert native.encode_utf8(data, [], []) == twin.encode_utf8(data, [], [])  # from the cache


@pytest.mark.parametrize("cache_size", [64, 4096])
def test_a_stream_of_long_pretokens_keeps_the_cache_within_its_bound(tables, cache_size):
    """However long its pre-tokens (here hundreds of bytes, each of hundreds of ids: the cache's
    arenas, not its slots, would grow), a cache holds under 150 bytes per entry of cache_size (its
    slots, 32 bytes each, a power of two of them loaded up to 3/4, and 16 bytes of long keys and 12
    ids in its arenas): memory is bounded by cache_size, and the ids stay exact while the bound
    evicts."""
    import random

    rng = random.Random(5)
    letters = "abcdefghijklmnopqrstuvwxyzé"
    words = [" " + "".join(rng.choice(letters) for _ in range(rng.randint(100, 700))) for _ in range(3000)]
    # each word twice, the second soon after the first (so some are hit before they are evicted)
    text = "".join(words[k] + words[max(0, k - 3)] for k in range(len(words)))
    twin, native = twin_and_native(tables, cache_size)
    expected = twin.encode_utf8(text.encode(), [], [])
    for start in range(0, len(text), 200_000):  # several calls: the cache carries over
        piece = text[start : start + 200_000]
        assert native.encode_utf8(piece.encode(), [], []) == twin.encode_utf8(piece.encode(), [], [])
    assert native.encode_utf8(text.encode(), [], []) == expected
    assert 0 < native.cache_len() <= cache_size
    assert native.cache_memory() <= (cache_size + 1) * 150 + 256  # (+ the cache's own struct)


@pytest.mark.parametrize("encoder", ["twin", "native"])
def test_a_str_with_a_lone_surrogate_is_a_unicode_encode_error(tables, encoder):
    chosen = dict(zip(["twin", "native"], twin_and_native(tables, 16)))[encoder]
    for call in (chosen.encode_utf8, chosen.encode_utf8_buffer):
        with pytest.raises(UnicodeEncodeError):
            call("ab \udc80 c", [], [])


@pytest.fixture(scope="module")
def gpt2():
    pytest.importorskip("tiktoken")
    import tiktoken

    vocab, merges = load_tokenizer_files(*require_gpt2_files())
    ranks = {token: token_id for token_id, token in vocab.items() if token_id != 50256}
    oracle = tiktoken.Encoding(
        name="gpt2_local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={EOT: 50256}
    )
    by_bytes = {token: token_id for token_id, token in vocab.items()}
    byte_ids = [by_bytes[bytes([b])] for b in range(256)]
    rank_table = {(by_bytes[a], by_bytes[b]): (rank, by_bytes[a + b]) for rank, (a, b) in enumerate(merges)}
    return oracle, byte_ids, rank_table


@pytest.mark.parametrize("cache_size", [0, 2, 1 << 16])
def test_gpt2_buffers_equal_tiktoken_on_real_text(gpt2, cache_size):
    oracle, byte_ids, ranks = gpt2
    native = native_encoder(byte_ids, ranks, cache_size)
    # kjv.txt's bundled sample (94 KB) where the shared file is absent: its first 400 KB is then all of it.
    texts = [
        require_text(name).read_text(encoding="utf-8")
        for name in ("kjv.txt", "german.txt", "tinystories_sample.txt", "address.txt")
    ]
    texts[0] = texts[0][:400_000] + EOT + "Сказка 中文字符 ελληνικά ﬁ " + texts[0][-50_000:]
    datas = [text.encode() for text in texts]
    expected = [oracle.encode(text, allowed_special="all") for text in texts]
    for data, ids in zip(datas, expected):
        assert unpack(native.encode_utf8_buffer(data, [EOT.encode()], [50256]), 4) == ids
        assert native.encode_utf8(data, [EOT.encode()], [50256]) == ids
        assert unpack(native.encode_utf8_buffer(data, [EOT.encode()], [50256], itemsize=2), 2) == ids  # ids < 50257
    flat, offsets = native.encode_many_buffer(datas, [EOT.encode()], [50256])
    flat, offsets = unpack(flat, 4), offsets_of(offsets)
    assert [flat[offsets[k] : offsets[k + 1]] for k in range(len(datas))] == expected


# --- bad input ------------------------------------------------------------------------------------


def test_itemsize_2_refuses_an_id_it_cannot_hold_naming_it(tables):
    _, native = twin_and_native(tables, 100)
    with pytest.raises(ValueError, match=r"id 70000 .*itemsize 2"):
        native.encode_utf8_buffer(b"ab<s>ab", [b"<s>"], [70000], itemsize=2)
    with pytest.raises(ValueError, match=r"id 70000 .*itemsize 2"):
        native.encode_many_buffer([b"ab", b"<s>"], [b"<s>"], [70000], itemsize=2)
    assert unpack(native.encode_utf8_buffer(b"<s>", [b"<s>"], [70000]), 4) == [70000]
    # a long output is narrowed without the GIL: the first id too large is still the one named
    text = b"a b " * 40000
    at = len(native.encode_utf8_buffer(text, [], [], itemsize=2)) // 2
    with pytest.raises(ValueError, match=rf"id 70000 \(at {at}\) .*itemsize 2"):
        native.encode_utf8_buffer(text + b"<s>" + text + b"<s>", [b"<s>"], [70000], itemsize=2)
    for itemsize in (0, 1, 3, 8):
        with pytest.raises(ValueError, match="itemsize must be 2 or 4"):
            native.encode_utf8_buffer(b"ab", [], [], itemsize=itemsize)
        with pytest.raises(ValueError, match="itemsize must be 2 or 4"):
            native.encode_many_buffer([b"ab"], [], [], itemsize=itemsize)


@pytest.mark.parametrize("bad", [bytearray(b"ab"), memoryview(b"ab"), None, 3])
def test_encode_many_refuses_what_is_not_bytes_naming_the_index(tables, bad):
    _, native = twin_and_native(tables, 100)
    with pytest.raises(TypeError, match=r"datas\[2\] is .*not bytes or str"):
        native.encode_many_buffer([b"ab", b"cd", bad, b"ef"], [], [])
    with pytest.raises(TypeError, match="datas must be a list of bytes"):
        native.encode_many_buffer(5, [], [])


@pytest.mark.parametrize("encoder", ["twin", "native"])
def test_encode_many_ranges_name_their_items_by_batch_index(tables, encoder):
    chosen = dict(zip(["twin", "native"], twin_and_native(tables, 16)))[encoder]
    datas = [b"ab", b"cd", 7, b"\xff", b"ef"]
    with pytest.raises(TypeError, match="2"):
        chosen.encode_many_buffer(datas, [], [], 4, 1, 3)
    assert chosen.encode_many_buffer(datas, [], [], 4, 4, 5) == chosen.encode_many_buffer([b"ef"], [], [])
    for start, stop in [(-1, 2), (3, 2), (0, 6)]:
        with pytest.raises(ValueError, match=f"start {start} and stop {stop} are not a range of datas' 5 items"):
            chosen.encode_many_buffer(datas, [], [], 4, start, stop)
    if encoder == "native":  # (the twin checks UTF-8 as it encodes, naming no index)
        with pytest.raises(ValueError, match=r"datas\[3\] is not valid UTF-8"):
            chosen.encode_many_buffer(datas, [], [], 4, 3, 5)


@pytest.mark.parametrize("encoder", ["twin", "native"])
def test_encode_many_takes_str_as_its_utf8(tables, encoder):
    """A str item stands for its UTF-8 (read where CPython keeps it, unvalidated: it is valid), so
    a batch of str and bytes gives the ids of the bytes; a lone surrogate is UnicodeEncodeError."""
    chosen = dict(zip(["twin", "native"], twin_and_native(tables, 100)))[encoder]
    texts = ["ab cd", "", "é中 🙂 x", "plain ascii text " * 20]
    expected = chosen.encode_many_buffer([text.encode() for text in texts], [b"cd"], [600])
    assert chosen.encode_many_buffer(texts, [b"cd"], [600]) == expected
    mixed = [texts[0].encode(), texts[1], texts[2].encode(), texts[3]]
    assert chosen.encode_many_buffer(mixed, [b"cd"], [600]) == expected
    with pytest.raises(UnicodeEncodeError):
        chosen.encode_many_buffer(["ok", "a\ud800b"], [], [])


def test_encode_many_refuses_invalid_utf8_naming_the_index(tables):
    twin, native = twin_and_native(tables, 100)
    with pytest.raises(ValueError):
        twin.encode_utf8(b"ok \xe2\x82", [], [])
    with pytest.raises(ValueError, match=r"datas\[1\] is not valid UTF-8"):
        native.encode_many_buffer([b"fine", b"ok \xe2\x82", b"fine"], [], [])
    with pytest.raises(ValueError, match="not valid UTF-8"):
        native.encode_utf8_buffer(b"ok \xed\xa0\x80", [], [])
    assert native.encode_many_buffer([], [], []) == (bytearray(), bytearray(8))


def test_encode_many_reads_the_list_as_it_was_when_called(tables):
    twin, native = twin_and_native(tables, 100)
    datas = [b"one two", b"three four"]

    class ClearsTheList:
        def __index__(self):
            datas.clear()  # runs while the special ids are read: after the list was taken
            datas.append(b"zzz")
            return 600

    flat, offsets = native.encode_many_buffer(datas, [b"<s>"], [ClearsTheList()])
    expected = twin.encode_utf8(b"one two", [], []) + twin.encode_utf8(b"three four", [], [])
    assert unpack(flat, 4) == expected and offsets_of(offsets)[-1] == len(expected)


# --- threads --------------------------------------------------------------------------------------


@pytest.mark.parametrize("cache_size", [0, 2, 50, 1 << 16])
def test_threads_share_one_encoder_and_get_exact_ids(tables, cache_size):
    twin, native = twin_and_native(tables, cache_size)
    base = fixture_text("tinystories_sample.txt") + " Сказка 中文字符 ελληνικά " + EOT
    # different texts per thread, so the threads' caches see different pre-tokens
    work = [[(base[k::3] + base[: 2000 * (t + 1)]).encode() for k in range(3)] for t in range(4)]
    tokens, ids = [EOT.encode()], [600]
    expected = [[twin.encode_utf8(data, tokens, ids) for data in datas] for datas in work]
    barrier = threading.Barrier(len(work))
    results: dict[int, list] = {}
    errors: list[BaseException] = []

    def run(t):
        try:
            barrier.wait()
            got = []
            for _ in range(5):
                flat, offsets = native.encode_many_buffer(work[t], tokens, ids)
                flat, offsets = unpack(flat, 4), offsets_of(offsets)
                got.append([flat[offsets[k] : offsets[k + 1]] for k in range(len(work[t]))])
                got.append([unpack(native.encode_utf8_buffer(data, tokens, ids), 4) for data in work[t]])
                got.append([native.encode_utf8(data, tokens, ids) for data in work[t]])
            results[t] = got
        except BaseException as exc:  # noqa: BLE001 -- reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for t in range(len(work)):
        assert all(each == expected[t] for each in results[t])
    assert native.cache_len() <= cache_size


def test_a_bytearray_another_thread_rewrites_is_encoded_as_one_snapshot(tables):
    twin, native = twin_and_native(tables, 100)
    # Two contents of one length, both valid UTF-8: a slice assignment swaps them whole.
    first = ("once upon a time " * 3000).encode()
    second = ("the cat sat, é中 " * 3000).encode()[: len(first)]
    second = second.decode("utf-8", "ignore").encode().ljust(len(first), b" ")
    outcomes = {repr(twin.encode_utf8(first, [], [])): "first", repr(twin.encode_utf8(second, [], [])): "second"}
    buffer = bytearray(first)
    stop = threading.Event()
    started = threading.Event()

    def scribble():
        started.set()
        while not stop.is_set():
            buffer[:] = second
            buffer[:] = first

    writer = threading.Thread(target=scribble)
    writer.start()
    started.wait()
    seen = set()
    try:
        for _ in range(30):
            seen.add(outcomes[repr(unpack(native.encode_utf8_buffer(buffer, [], []), 4))])
            seen.add(outcomes[repr(native.encode_utf8(memoryview(buffer), [], []))])
            _, cut = native.encode_utf8_buffer(buffer, [], [], True)
            assert cut <= len(first)
    finally:
        stop.set()
        writer.join()
    assert seen <= {"first", "second"}


def test_threads_encode_while_another_reinitialises_the_encoder(tables):
    byte_ids, ranks = tables
    native = native_encoder(byte_ids, ranks, 8)
    merges_a = [(97, 98, 256), (256, 99, 257)]
    merges_b = [(99, 100, 256), (32, 99, 257)]
    native.__init__(list(range(256)), merges_a, 4)
    text = ("abc ab cd ccdd aa éé" + EOT + " ab").encode() * 300

    def twin_of(merges):
        ranks = {}
        for rank, (a, b, m) in enumerate(merges):
            ranks.setdefault((a, b), (rank, m))
        return repr(PythonEncoder(bpe_hybrid, list(range(256)), ranks, 4).encode_utf8(text, [EOT.encode()], [300]))

    outcomes = {twin_of(merges_a): "a", twin_of(merges_b): "b"}
    seen: set[str] = set()

    def encode_once():
        flat, _ = native.encode_many_buffer([text, text], [EOT.encode()], [300])
        ids = unpack(flat, 4)
        half = len(ids) // 2
        assert ids[:half] == ids[half:]  # one call: one set of tables throughout
        seen.add(outcomes[repr(ids[:half])])
        seen.add(outcomes[repr(unpack(native.encode_utf8_buffer(text, [EOT.encode()], [300]), 4))])

    race_reinit(native, range(256), (merges_b, [(1, 2)], merges_a), encode_once, threads=2, rounds=100)
    assert seen <= {"a", "b"}


def test_the_gil_is_released_while_encoding(tables):
    """Another Python thread runs while one long encode_many_buffer call is in C."""
    _, native = twin_and_native(tables, 1 << 16)
    datas = [fixture_text("tinystories_sample.txt").encode()] * 2000
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(1)
            if len(ticks) > 10_000_000:
                break

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    try:
        ticker = threading.Thread(target=tick)
        ticker.start()
        before = len(ticks)
        native.encode_many_buffer(datas, [], [])
        during = len(ticks) - before
        done.set()
        ticker.join()
    finally:
        sys.setswitchinterval(old)
    assert during > 1000  # with the GIL held for the call, the ticker could not have run


# --- the scanner's bulk path over ASCII letters -----------------------------------------------------

# What may follow a run of ASCII letters: the run goes on (a non-ASCII letter, one byte in Latin-1
# and two or more in UTF-8), or ends (ASCII and non-ASCII non-letters, digits, spaces, the edges of
# the letter range: @ [ ` {).
RUN_ENDS = [
    "é",
    "ª",
    "ß",
    "中",
    "Ω",
    "ſ",
    "\u0301",
    "1",
    "²",
    " ",
    "\u00a0",
    "\n",
    "'",
    "'s",
    "@",
    "[",
    "`",
    "{",
    ".",
    "\x7f",
    "\x80",
]


@pytest.mark.parametrize("pattern", list(PRESETS))
def test_letter_runs_of_every_length_split_as_the_regex_does(tables, pattern):
    """Runs of 1..40 ASCII letters (past the 16-byte blocks the scanner reads at once), in both
    cases, ending in each kind of character, at the end of the text and before more letters."""
    compiled_pattern = PRESETS[pattern].compiled
    twin, native = twin_and_native(tables, 1 << 16, pattern)
    for length in range(1, 41):
        for end in RUN_ENDS:
            word = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" * 2)[length : 2 * length]
            for text in (word + end, word + end + word, " " + word + end + "Zz" * length, word):
                data = text.encode()
                assert native.encode_utf8(data, [], []) == twin.encode_utf8(data, [], []), (pattern, text)
                if pattern == "gpt2":  # the str scanners (Latin-1 and wider kinds), via pretokenize
                    assert compiled.core().pretokenize(text) == compiled_pattern.findall(text), text
