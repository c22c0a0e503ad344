"""The compiled core (bpe_impls._native, bpe_impls._native_train) under hostile use.

Each C type is driven directly, the way nothing in the package drives it but a caller could:
half-built and re-initialised objects, buffers that change (or end at an unmapped page), special
tokens that are not UTF-8 or that vanish under the call, ids whose `__index__` mutates the
arguments, and one object used from several threads at once. Whatever happens, nothing may crash
or read memory it does not own: each call either raises a clean exception or gives what the
pure-Python twin (PythonEncoder, RegexCounter) gives.

Reads past the end of a buffer are caught in every build by `guarded`, which puts the data at
the very end of a page followed by an inaccessible one; use-after-free and the rest need the
sanitizer build, `bash .ci/sanitize`, which runs this file under ASan and UBSan.
"""

from __future__ import annotations

import ctypes
import gc
import mmap
import os
import re
import threading
from pathlib import Path
from typing import ClassVar

import pytest
from conftest import examples, race_reinit, require_compiled_core, while_running
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe_impls
from bpe_impls.base import compiled
from bpe_impls.base.errors import ConfigError
from bpe_impls.base.patterns import PRESETS
from bpe_impls.corpus.tally import RegexCounter
from bpe_impls.encoding.bpe import bpe_hybrid
from bpe_impls.encoding.encoders import ENCODERS, PythonEncoder
from bpe_impls.encoding.tokenizer import Tokenizer

require_compiled_core()

core = compiled.core()
Encoder = core.Encoder
PretokenCounter = core.PretokenCounter
# Set by .ci/sanitize: the venv whose instrumented build must be the one under test.
SANITIZE_VENV = os.environ.get("BPE_SANITIZE_VENV")
UNDER_ASAN = "asan" in os.environ.get("LD_PRELOAD", "")

BYTE_IDS = list(range(256))
# Two small rank tables over the byte ids: (left, right, merged) in rank order.
MERGES_A = [(97, 98, 256), (256, 99, 257), (32, 97, 258), (258, 98, 259), (195, 169, 260), (101, 101, 261)]
MERGES_B = [(99, 100, 256), (32, 99, 257), (257, 100, 258), (97, 97, 259)]
EOT = b"<|endoftext|>"


PATTERNS = list(PRESETS)  # each preset has its own compiled scanner


def twin(merges=MERGES_A, cache_size=1 << 16, pattern="gpt2") -> PythonEncoder:
    """The pure-Python encoder over the same tables (a repeated pair keeps its first rank)."""
    ranks: dict[tuple[int, int], tuple[int, int]] = {}
    for rank, (left, right, merged) in enumerate(merges):
        ranks.setdefault((left, right), (rank, merged))
    return PythonEncoder(bpe_hybrid, BYTE_IDS, ranks, cache_size, PRESETS[pattern])


def twin_encode(data: bytes, specials=(), ids=(), settled=False, merges=MERGES_A, pattern="gpt2"):
    """What PythonEncoder gives, or the exception type it raises."""
    try:
        return twin(merges, pattern=pattern).encode_utf8(bytes(data), list(specials), [int(i) for i in ids], settled)
    except ValueError:
        return ValueError


def twin_count(data: bytes, specials=()) -> tuple[bool, dict[bytes, int]]:
    counter = RegexCounter()
    return counter.add_utf8(bytes(data), list(specials)), counter.to_dict()


# --- buffers that end at an inaccessible page -----------------------------------------------------

PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


class Guarded:
    """`data` at the very end of a writable page, followed by a PROT_NONE page: reading even one
    byte past the end of `view` faults (SIGSEGV), sanitizer or not. `map` writes into it."""

    def __init__(self, data: bytes):
        size = max(PAGE, -(-len(data) // PAGE) * PAGE)
        self.map = mmap.mmap(-1, size + PAGE)
        anchor = ctypes.c_char.from_buffer(self.map)
        address = ctypes.addressof(anchor)
        del anchor
        if _libc.mprotect(address + size, PAGE, 0) != 0:
            raise OSError(ctypes.get_errno(), "mprotect failed")
        self.start = size - len(data)
        self.map[self.start : size] = data
        self.view = memoryview(self.map)[self.start : size]


def guarded(data: bytes) -> memoryview:
    return Guarded(data).view


def test_sanitizer_run_tests_the_instrumented_build():
    if SANITIZE_VENV is None:
        pytest.skip("not under .ci/sanitize")
    venv = Path(SANITIZE_VENV).resolve()
    for module in (bpe_impls, core):
        assert venv in Path(module.__file__).resolve().parents, module.__file__


def test_guarded_buffers_fault_one_byte_past_the_end():
    # The fault itself cannot be tested in-process; its setup can: the page after is not readable.
    g = Guarded(b"abc")
    assert bytes(g.view) == b"abc" and g.start == PAGE - 3 and len(g.map) == 2 * PAGE


# --- 1. Encoder: failed and repeated __init__ ------------------------------------------------------


def test_encoder_whose_init_failed_refuses_to_encode_instead_of_crashing():
    encoder = Encoder.__new__(Encoder)
    with pytest.raises(ValueError, match="merge #1 is not a"):
        encoder.__init__(BYTE_IDS, [(97, 98, 256), (1, 2)])
    with pytest.raises(RuntimeError, match="not initialised"):
        encoder.encode_utf8(b"ab ab", [], [])
    with pytest.raises(RuntimeError, match="not initialised"):
        encoder.encode_utf8(b"ab ab", [], [], True)
    with pytest.raises(RuntimeError, match="not initialised"):
        encoder.bpe(b"ab")
    assert encoder.cache_len() == 0
    encoder.__init__(BYTE_IDS, MERGES_A)  # a later good __init__ makes it usable
    assert encoder.encode_utf8(b"abc ab", [], []) == twin_encode(b"abc ab")


def test_encoder_never_initialised_refuses_to_encode():
    encoder = Encoder.__new__(Encoder)
    with pytest.raises(RuntimeError, match="not initialised"):
        encoder.encode_utf8(b"ab", [], [])


def test_encoder_reinit_replaces_the_tables_and_a_failed_one_leaves_it_unusable():
    text = "abc ab cd ccdd aa éé ee".encode()
    encoder = Encoder(BYTE_IDS, MERGES_A)
    assert encoder.encode_utf8(text, [], []) == twin_encode(text)
    assert encoder.cache_len() > 0
    encoder.__init__(BYTE_IDS, MERGES_B, 7)
    assert encoder.cache_len() == 0  # the old tables' cached ids are gone with them
    assert encoder.encode_utf8(text, [], []) == twin_encode(text, merges=MERGES_B)
    assert encoder.encode_utf8(text, [], [], True) == twin_encode(text, settled=True, merges=MERGES_B)
    for bad, error in (([(1, 2)], ValueError), ([(1, 2, -5)], ValueError), (None, TypeError)):
        with pytest.raises(error):
            encoder.__init__(BYTE_IDS, bad)
        with pytest.raises(RuntimeError, match="not initialised"):
            encoder.encode_utf8(text, [], [])
    with pytest.raises(ValueError, match="256 ids"):
        encoder.__init__([1, 2, 3], MERGES_A)
    with pytest.raises(RuntimeError, match="not initialised"):
        encoder.bpe(b"abc")
    encoder.__init__(BYTE_IDS, MERGES_A)
    assert encoder.encode_utf8(text, [], []) == twin_encode(text)


@pytest.mark.skipif(UNDER_ASAN, reason="ASan's quarantine holds freed memory: RSS says nothing there")
def test_encoder_reinit_frees_the_old_tables():
    psutil = pytest.importorskip("psutil")
    merges = [(a, b, 256 + k) for k, (a, b) in enumerate((a, b) for a in range(256) for b in range(256))][:60_000]
    encoder = Encoder(BYTE_IDS, merges)  # tables of about 3 MB (malloc'd: freed pages go back)
    process = psutil.Process()
    encoder.__init__(BYTE_IDS, merges)
    before = process.memory_info().rss
    for _ in range(100):  # leaking each would cost about 300 MB
        encoder.__init__(BYTE_IDS, merges)
    assert process.memory_info().rss - before < 60 * 2**20
    assert encoder.encode_utf8(b"ab cb", [], []) == twin_encode(b"ab cb", merges=merges)


def test_encoder_init_reentered_from_an_id_index_is_safe():
    encoder = Encoder(BYTE_IDS, MERGES_A)

    class Reinits:
        def __init__(self, value, merges):
            self.value, self.merges = value, merges

        def __index__(self):
            encoder.__init__(BYTE_IDS, self.merges)  # re-enters __init__ mid-way through __init__
            return self.value

    byte_ids = list(BYTE_IDS)
    byte_ids[5] = Reinits(5, MERGES_B)
    encoder.__init__(byte_ids, MERGES_A)
    assert encoder.encode_utf8(b"abc cd", [], []) == twin_encode(b"abc cd")

    # An id whose __index__ re-inits the encoder badly, in the middle of encode_utf8.
    class BreaksEncoder:
        def __index__(self):
            with pytest.raises(ValueError):
                encoder.__init__(BYTE_IDS, [(1, 2)])
            return 300

    with pytest.raises(RuntimeError, match="not initialised"):
        encoder.encode_utf8(b"a<|endoftext|>b", [EOT], [BreaksEncoder()])


# --- 2. PretokenCounter used while another thread is adding ---------------------------------------

WORDS = b"".join(b" w%d" % i for i in range(60_000)) + " é中 ok".encode()


def _expected_words() -> dict[bytes, int]:
    return twin_count(WORDS)[1]


def _while_adding(counter, action, data=WORDS, specials=()):
    """Run action() over and over while another thread runs counter.add_utf8(data, specials);
    returns (add's outcome, [action's outcomes]): each a value or an exception instance."""
    return while_running(lambda: counter.add_utf8(data, specials), action)


def _busy_or(results, allowed):
    for result in results:
        if isinstance(result, Exception):
            assert isinstance(result, RuntimeError) and "in use by another thread" in str(result), repr(result)
        else:
            assert result in allowed, str(result)[:200]


def test_counter_to_dict_and_len_while_another_thread_adds_are_refused_or_consistent():
    expected = _expected_words()
    for action, allowed in (("to_dict", ({}, expected)), ("__len__", (0, len(expected)))):
        counter = PretokenCounter()
        added, results = _while_adding(counter, getattr(counter, action))
        assert added is True
        _busy_or(results, allowed)
        assert counter.to_dict() == expected


def test_counter_reinit_while_another_thread_adds_is_refused_or_resets_it():
    expected = _expected_words()
    counter = PretokenCounter()
    added, results = _while_adding(counter, counter.__init__)
    assert added is True
    _busy_or(results, (None,))
    assert counter.to_dict() in ({}, expected)


def test_counter_merge_with_a_busy_counter_is_refused_or_complete():
    expected = _expected_words()
    counter, other = PretokenCounter(), PretokenCounter()
    other.add(" zz")
    added, results = _while_adding(counter, lambda: counter.merge(other))
    assert added is True
    _busy_or(results, (None,))
    merged = sum(result is None for result in results)
    assert counter.to_dict() == {**expected, **({b" zz": merged} if merged else {})}
    # and the other way round: the busy counter as the one merged in
    into = PretokenCounter()
    counter = PretokenCounter()
    added, results = _while_adding(counter, lambda: into.merge(counter))
    _busy_or(results, (None,))
    assert added is True
    total = into.to_dict()  # the busy counter was merged in before (empty) or after (whole) the add
    times = total.get(b" w", 0) // expected[b" w"]
    assert total == {token: count * times for token, count in expected.items()} if times else total == {}


def test_counter_add_while_another_thread_adds_is_refused_or_counted():
    counter = PretokenCounter()
    added, results = _while_adding(counter, lambda: counter.add_utf8(b" zz", []))
    assert added is True
    _busy_or(results, (True,))
    counted = sum(result is True for result in results)
    assert counter.to_dict() == {**_expected_words(), **({b" zz": counted} if counted else {})}


# --- 3. settled encoding reads nothing past the data ---------------------------------------------


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize(
    "text",
    # (the scanners look ahead: contractions, o200k's contraction suffix and letter sets, marks,
    # runs of digits, whitespace up to its last newline, [\r\n/] after punctuation)
    [
        "ab",
        "a b",
        "é",
        "ab cd  ",
        "x\u00e9\u00e9",
        "abc ab",
        "'",
        "'l",
        "'ſ",
        "a'",
        "a'l",
        "a'r",
        "x'ſ",
        "AB",
        "A\u0301",
        "\u0301",
        " \u0301",
        "12",
        "1234",
        "  \n",
        " \r\n ",
        ".\n",
        "./",
        "\u3000",
        "中",
    ],
)
def test_settled_encoding_reads_nothing_past_the_end_of_the_data(text, pattern):
    encoder = Encoder(BYTE_IDS, MERGES_A, 65536, pattern)
    data = text.encode()
    expect = dict(pattern=pattern)
    assert encoder.encode_utf8(guarded(data), [], [], True) == twin_encode(data, settled=True, **expect)
    assert encoder.encode_utf8(guarded(data), [EOT], [300], True) == twin_encode(data, [EOT], [300], True, **expect)
    assert encoder.encode_utf8(guarded(data), [], []) == twin_encode(data, **expect)
    view = memoryview(bytearray(data + b"xyz"))[: len(data)]  # a slice: the next byte is not the data's
    assert encoder.encode_utf8(view, [], [], True) == twin_encode(data, settled=True, **expect)
    counter, mirror = PretokenCounter(pattern), RegexCounter(PRESETS[pattern])
    assert counter.add_utf8(guarded(data), []) is mirror.add_utf8(data, []) is True
    assert counter.to_dict() == mirror.to_dict()
    assert core.pretokenize(guarded(data), pattern) == [t.encode() for t in PRESETS[pattern].compiled.findall(text)]


# --- 4. buffers written while they are scanned ----------------------------------------------------


def test_add_utf8_counts_a_snapshot_of_a_buffer_another_thread_writes_into():
    base = b"".join(b" ab%d cd" % (i % 1000) for i in range(100_000))
    expected = twin_count(base)[1]
    # The other thread toggles the last byte between its value and 0xF4, which starts a 4-byte
    # sequence: seen by the scan but not by the validation before it, the scan would read 3 bytes
    # past the end (into the inaccessible page). Which state the call sees is up to the threads;
    # each attempt has about even odds of each, so the unsafe mix (valid, then invalid) comes up
    # in a few attempts.
    last = len(base) - 1
    for _ in range(24):
        g = Guarded(base)
        counter = PretokenCounter()
        started, done = threading.Event(), threading.Event()
        outcome = []

        def add():
            started.set()
            try:
                outcome.append(counter.add_utf8(g.view, []))  # noqa: B023 -- joined below
            finally:
                done.set()  # noqa: B023

        thread = threading.Thread(target=add)
        thread.start()
        started.wait()
        flips = 0
        while not done.is_set():
            g.map[g.start + last] = 0xF4 if flips % 2 == 0 else base[last]
            flips += 1
        thread.join()
        if outcome == [True]:
            assert counter.to_dict() == expected  # only the unflipped buffer is valid UTF-8
        else:
            assert outcome == [False] and len(counter) == 0


def test_encode_utf8_encodes_a_snapshot_of_a_buffer_an_id_index_writes_into():
    encoder = Encoder(BYTE_IDS, MERGES_A)
    data = bytearray(b"abc ab" * 3 + EOT + b"ab")

    class Scribbles:
        def __index__(self):
            data[:] = b"\xf4" * len(data)  # same length: the buffer is exported, so no resize
            return 300

    before = bytes(data)
    result = encoder.encode_utf8(data, [EOT], [Scribbles()])
    assert result in (twin_encode(before, [EOT], [300]), ValueError)
    assert result == twin_encode(before, [EOT], [300])


# --- 5. special tokens that vanish under the call ------------------------------------------------


def _fresh(token: bytes) -> bytes:
    """A new bytes object equal to token, held by no one else."""
    return b"".join([token[:1], token[1:]])


def test_special_tokens_freed_by_an_id_index_are_not_read_afterwards():
    encoder = Encoder(BYTE_IDS, MERGES_A)
    data = b"ab <|endoftext|> abc<|endoftext|>"
    tokens = [_fresh(EOT), _fresh(b"<|pad|>")]

    class Clears:
        def __init__(self, value):
            self.value = value

        def __index__(self):
            tokens.clear()  # frees the tokens: only this list held them
            # reuse their memory, so a stale pointer would now see other bytes
            self.junk = [b"#" * len(EOT) for _ in range(100)] + [b"#" * 7 for _ in range(100)]
            gc.collect()
            return self.value

    result = encoder.encode_utf8(data, tokens, [Clears(300), Clears(301)])
    assert result == twin_encode(data, [EOT, b"<|pad|>"], [300, 301])
    assert 300 in result


def test_special_tokens_freed_by_another_thread_during_add_utf8_are_not_read():
    data = WORDS + EOT + WORDS[:1000] + EOT
    for _ in range(3):
        tokens = [_fresh(EOT), _fresh(b" w1")]
        counter = PretokenCounter()

        def clear():
            tokens.clear()  # noqa: B023
            return [b"#" * len(EOT) for _ in range(50)]

        added, _ = _while_adding(counter, clear, data, tokens)
        assert added is True
        assert counter.to_dict() in (twin_count(data, [EOT, b" w1"])[1], twin_count(data, [])[1])


# --- 6. special tokens that are not whole UTF-8 characters ---------------------------------------

NOT_UTF8 = [b"\xe2", b"\xe2\x82", b"\x82\xac", b"\xac", b"\xff", b"a\xe2", b"\xed\xa0\x80", b"\xc0\x80"]


@pytest.mark.parametrize("token", NOT_UTF8)
def test_special_tokens_that_are_not_utf8_are_refused_naming_the_token(token):
    data = "a€ b€".encode()
    message = re.escape(repr(token))
    with pytest.raises(ValueError, match=message):
        PretokenCounter().add_utf8(data, [EOT, token])
    with pytest.raises(ValueError, match=message):
        Encoder(BYTE_IDS, MERGES_A).encode_utf8(data, [EOT, token], [300, 301])
    # ... as the pure-Python twins refuse them
    with pytest.raises(ValueError):
        RegexCounter().add_utf8(data, [EOT, token])
    assert twin_encode(data, [EOT, token], [300, 301]) is ValueError
    # A buffer that ends inside a character the token would split: nothing past it is read.
    for end in (data, data[:-1] + b"\xac"):
        with pytest.raises(ValueError, match=message):
            PretokenCounter().add_utf8(guarded(end), [token])
        with pytest.raises(ValueError, match=message):
            Encoder(BYTE_IDS, MERGES_A).encode_utf8(guarded(end), [token], [300], True)


def test_counter_with_a_bad_special_token_still_reports_invalid_data_as_the_twin_does():
    # RegexCounter decodes the data first: invalid data is False whatever the special tokens.
    assert PretokenCounter().add_utf8(b"ok\xff", [b"\xe2"]) is False
    assert RegexCounter().add_utf8(b"ok\xff", [b"\xe2"]) is False


# --- 7. the native trainer and one-byte words ----------------------------------------------------


def test_native_trainer_accepts_a_huge_count_on_a_one_byte_word():
    from bpe_impls import IMPLEMENTATIONS

    native_train = pytest.importorskip("bpe_impls._native_train")
    counts = {b"a": 2**64, b"ab": 3, b"abc": 2, b"b": 2**63, b"\xff": 10**30}
    assert native_train.train(counts, 5, None) == [(b"a", b"b"), (b"ab", b"c")]
    assert IMPLEMENTATIONS["native"](counts, 300) == IMPLEMENTATIONS["route_b"](counts, 300)
    with pytest.raises(ValueError, match="counts must be positive"):
        native_train.train({b"a": -(2**64), b"ab": 1}, 5, None)
    with pytest.raises(TypeError):
        native_train.train({b"a": 2.0**64, b"ab": 1}, 5, None)
    with pytest.raises(OverflowError, match=r"word b'ab' has count"):
        native_train.train({b"a": 1, b"ab": 2**64}, 5, None)


# --- 8. ids beyond 32 bits -----------------------------------------------------------------------


def _vocab_with(top_id: int) -> dict[int, bytes]:
    vocab = {i: bytes([i]) for i in range(256)}
    vocab[top_id] = b"ab"
    return vocab


def test_ids_beyond_32_bits_are_refused_alike_by_every_encoder():
    for top in (2**32 - 1, 2**32, 2**64):
        messages = set()
        for name in ENCODERS:
            with pytest.raises(ConfigError) as info:
                Tokenizer(_vocab_with(top), [(b"a", b"b")], encoder=name)
            messages.add(str(info.value))
        assert len(messages) == 1 and str(top) in messages.pop() and "\n" not in str(info.value)
    # A special token appended after the largest id would get 2**32 - 1: refused alike too.
    for name in ENCODERS:
        with pytest.raises(ConfigError, match="4294967295"):
            Tokenizer(_vocab_with(2**32 - 2), [(b"a", b"b")], ["<|s|>"], encoder=name)
    # The largest id every encoder takes.
    outputs = {
        name: Tokenizer(_vocab_with(2**32 - 2), [(b"a", b"b")], encoder=name).encode("ab a") for name in ENCODERS
    }
    assert set(map(tuple, outputs.values())) == {(2**32 - 2, 32, 97)}
    # The C type keeps its own guard for callers that bypass build_tables.
    with pytest.raises(ValueError, match="merged id 4294967295"):
        Encoder(BYTE_IDS, [(97, 98, 2**32 - 1)])
    with pytest.raises(ValueError, match="special id 4294967295"):
        Encoder(BYTE_IDS, []).encode_utf8(b"a", [EOT], [2**32 - 1])


# --- Hypothesis: hostile arguments, re-initialisation, threads ------------------------------------

SPECIAL_POOL = [EOT, b"<|", b"|>", "é".encode(), "ée".encode(), b"a|>x", b"ab", b"\xe2", b"\x82\xac"]
pieces = st.sampled_from(
    [
        "a",
        "b",
        "c",
        "d",
        "ab",
        "cd",
        " ",
        "  ",
        "é",
        "e",
        "中",
        "🙂",
        "1",
        ".",
        "'s",
        "\n",
        "<|",
        "|>",
        "<|endoftext|>",
        # (what the cl100k and o200k scanners look ahead for)
        "A",
        "'",
        "'L",
        "'ſ",
        "\u0301",
        "/",
        "\r\n",
        "123",
        "\u3000",
    ]
)
raw_data = st.one_of(st.lists(pieces, max_size=40).map("".join).map(str.encode), st.binary(max_size=24))
CONTAINERS = ["bytes", "bytearray", "memoryview", "slice", "guarded"]


def wrap(data: bytes, kind: str):
    """data in a container of the given kind; the mutable ones can be written through `target`."""
    if kind == "bytes":
        return data
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(bytearray(data))
    if kind == "slice":  # the bytes after the slice are another character's
        return memoryview(bytearray(data + "中".encode()))[: len(data)]
    return guarded(data)


def scribble(container) -> None:
    """Overwrite a mutable container with bytes that are not UTF-8 (same length: no resize)."""
    if not isinstance(container, bytes) and len(container):
        container[:] = b"\xf4" * len(container)


class EvilBytes(bytes):
    """A special token whose hash and equality empty the list it sits in (C never calls them)."""

    victim: ClassVar[list] = []

    def __hash__(self):
        self.victim.clear()
        return 0

    def __eq__(self, other):
        self.victim.clear()
        return bytes.__eq__(self, other)


class Hostile:
    """A special id whose __index__ does `actions` (once) before giving `value`."""

    def __init__(self, value, actions, env):
        self.value, self.actions, self.env, self.done = value, actions, env, False

    def __index__(self):
        if not self.done:
            self.done = True
            for action in self.actions:
                self.env[action]()
        return self.value


ENCODER_ACTIONS = ["clear_specials", "append_special", "scribble", "reinit_a", "reinit_b", "reinit_bad", "nested", "gc"]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=raw_data,
    kind=st.sampled_from(CONTAINERS),
    specials=st.lists(st.sampled_from(SPECIAL_POOL), max_size=3, unique=True),
    actions=st.lists(st.sampled_from(ENCODER_ACTIONS), max_size=3),
    evil=st.booleans(),
    settled=st.booleans(),
    pattern=st.sampled_from(PATTERNS),
)
def test_encoder_with_hostile_arguments_equals_the_twin_or_raises_cleanly(
    data, kind, specials, actions, evil, settled, pattern
):
    encoder = Encoder(BYTE_IDS, MERGES_A, 5, pattern)
    encoder.encode_utf8(b"ab cd ab", [], [])  # something in the cache
    tokens = [(EvilBytes if evil else bytes)(_fresh(token)) for token in specials]
    EvilBytes.victim = tokens
    container = wrap(data, kind)
    tables = ["a"]  # the tables in force after each action

    def reinit(merges, name):
        encoder.__init__(BYTE_IDS, merges, 3, pattern)
        tables.append(name)

    def reinit_bad():
        with pytest.raises(ValueError):
            encoder.__init__(BYTE_IDS, [(97, 98, 256), (1, 2)])
        tables.append("bad")

    env = {
        "clear_specials": tokens.clear,
        "append_special": lambda: tokens.append(b"zz"),
        "scribble": lambda: scribble(container),
        "reinit_a": lambda: reinit(MERGES_A, "a"),
        "reinit_b": lambda: reinit(MERGES_B, "b"),
        "reinit_bad": reinit_bad,
        "nested": lambda: encoder.encode_utf8(b"abc ab", [], []),
        "gc": gc.collect,
    }
    ids = [Hostile(300, actions, env)] + list(range(301, 300 + len(specials)))
    try:
        result = encoder.encode_utf8(container, tokens, ids[: len(specials)], settled)
    except ValueError:
        result = ValueError
    except RuntimeError as exc:
        assert "not initialised" in str(exc)
        result = RuntimeError
    # The call reads the data and the special tokens as they were when it started.
    expected = twin_encode(data, specials, range(300, 300 + len(specials)), settled, pattern=pattern)
    if expected is not ValueError and tables[-1] != "a":
        expected = (
            RuntimeError
            if tables[-1] == "bad"
            else twin_encode(data, specials, range(300, 300 + len(specials)), settled, MERGES_B, pattern)
        )
    assert result == expected


class HostileTokens:
    """A sequence of special tokens (not a list: the C side iterates it, running this code) that
    does `actions` halfway through."""

    def __init__(self, tokens, actions, env):
        self.tokens, self.actions, self.env, self.yielded, self.done = list(tokens), actions, env, [], False

    def __iter__(self):
        for k, token in enumerate(list(self.tokens)):
            if k == len(self.tokens) // 2 and not self.done:
                self.done = True
                for action in self.actions:
                    self.env[action]()
            if k >= len(self.tokens):  # cleared meanwhile
                return
            self.yielded.append(token)
            yield token


COUNTER_ACTIONS = ["scribble", "reinit", "add", "to_dict", "len", "clear_tokens", "gc"]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=raw_data,
    kind=st.sampled_from(CONTAINERS),
    specials=st.lists(st.sampled_from(SPECIAL_POOL), min_size=1, max_size=3, unique=True),
    actions=st.lists(st.sampled_from(COUNTER_ACTIONS), max_size=3),
    pattern=st.sampled_from(PATTERNS),
)
def test_counter_with_hostile_arguments_equals_the_twin_or_raises_cleanly(data, kind, specials, actions, pattern):
    counter, mirror = PretokenCounter(pattern), RegexCounter(PRESETS[pattern])
    for each in (counter, mirror):
        each.add(" already here")
    container = wrap(data, kind)
    done: list[str] = []

    def act(name, effect=None):
        def run():
            result = effect() if effect else None
            done.append(name)
            return result

        return run

    tokens = HostileTokens([_fresh(token) for token in specials], actions, {})
    tokens.env.update(
        scribble=act("scribble", lambda: scribble(container)),
        reinit=act("reinit", lambda: counter.__init__(pattern)),
        add=act("add", lambda: counter.add(" hostile")),
        to_dict=act("to_dict", counter.to_dict),
        len=act("len", lambda: len(counter)),
        clear_tokens=act("clear_tokens", tokens.tokens.clear),
        gc=act("gc", gc.collect),
    )
    try:
        result = counter.add_utf8(container, tokens)
    except ValueError:
        result = ValueError
    # The twin, given what the call saw: the tokens yielded, the data as it is now (written, if
    # at all, while the tokens were read), the counter as the actions left it.
    for name in done:
        if name == "reinit":
            mirror = RegexCounter(PRESETS[pattern])
        elif name == "add":
            mirror.add(" hostile")
    try:
        expected = mirror.add_utf8(bytes(container), list(tokens.yielded))
    except ValueError:
        expected = ValueError
    assert result == expected
    assert counter.to_dict() == mirror.to_dict() and len(counter) == len(mirror)


def _word(thread: int, i: int) -> bytes:
    """A pre-token only this thread counts: a space, the thread's capital letter, then i in letters."""
    letters = "".join(chr(97 + (i // 26**k) % 26) for k in range(4))
    return b" " + bytes([65 + thread]) + letters.encode()


def test_threads_share_one_counter_while_another_reads_and_resets_it():
    threads_n, rounds = 3, 4
    texts = [b"".join(_word(t, i) for i in range(20_000)) for t in range(threads_n)]
    alone = [twin_count(text)[1] for text in texts]
    counter = PretokenCounter()
    barrier = threading.Barrier(threads_n + 1)
    counted = [0] * threads_n
    errors: list[BaseException] = []
    finished = threading.Event()

    def adder(t):
        try:
            barrier.wait()
            for _ in range(rounds):
                try:
                    assert counter.add_utf8(texts[t], []) is True
                    counted[t] += 1
                except RuntimeError as exc:
                    assert "in use by another thread" in str(exc)
        except BaseException as exc:  # noqa: BLE001 -- reported below
            errors.append(exc)

    def meddler():
        try:
            barrier.wait()
            while not finished.is_set():
                for action in (counter.to_dict, counter.__len__, counter.__init__):
                    try:
                        action()
                    except RuntimeError as exc:
                        assert "in use by another thread" in str(exc)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    adders = [threading.Thread(target=adder, args=(t,)) for t in range(threads_n)]
    other = threading.Thread(target=meddler)
    for thread in [*adders, other]:
        thread.start()
    for thread in adders:
        thread.join()
    finished.set()
    other.join()
    assert not errors, errors
    final = counter.to_dict()
    for t in range(threads_n):
        mine = {token: count for token, count in final.items() if token[1] == 65 + t}
        times = mine.get(_word(t, 0), 0)
        assert 0 <= times <= counted[t]
        assert mine == ({token: count * times for token, count in alone[t].items()} if times else {})


def test_threads_share_one_encoder_while_another_reinitialises_it():
    encoder = Encoder(BYTE_IDS, MERGES_A)
    text = "abc ab cd ccdd aa éé<|endoftext|> ab".encode() * 50
    outcomes = {
        twin_encode(text, [EOT], [300]).__repr__(): "a",
        twin_encode(text, [EOT], [300], merges=MERGES_B).__repr__(): "b",
    }
    seen: set[str] = set()

    def encode_once():
        seen.add(outcomes[repr(encoder.encode_utf8(text, [EOT], [300]))])

    race_reinit(encoder, BYTE_IDS, (MERGES_B, [(1, 2)], MERGES_A), encode_once, threads=3, rounds=200)
    assert seen <= {"a", "b"}


def test_settled_cut_counts_special_tokens_in_characters_as_the_twin_does():
    # Found by the suite above: the C rule once measured "every special token fits" in bytes.
    encoder = Encoder(BYTE_IDS, MERGES_A)
    for data in ("éaababababab", "ééééééééééé <|e", "aé", "é", "<|endoftext|>é"):
        raw = data.encode()
        specials = ["é".encode(), EOT]
        assert encoder.encode_utf8(raw, specials, [300, 301], True) == twin_encode(raw, specials, [300, 301], True)


# --- 9. packed texts and JSON Lines (encode_packed_buffer, jsonl_documents) ------------------------


def test_packed_offsets_an_id_index_rewrites_are_read_once_before_it():
    """The offsets are copied (and checked) before any Python code the call runs: an id's __index__
    that scribbles over them changes nothing, and reads nothing out of range."""
    encoder = Encoder(BYTE_IDS, MERGES_A)
    data = b"abc ab" + EOT + b"ab cc"
    offsets = bytearray((ctypes.c_int64 * 3)(0, 6, len(data)))

    class Scribbles:
        def __index__(self):
            offsets[:] = (ctypes.c_int64 * 3)(0, 1 << 40, -5)  # (same length: it is exported)
            return 300

    ids, ends = encoder.encode_packed_buffer(data, offsets, [EOT], [Scribbles()])
    expected = [twin_encode(data[:6], [EOT], [300]), twin_encode(data[6:], [EOT], [300])]
    got = memoryview(ids).cast("I").tolist()
    bounds = memoryview(ends).cast("q").tolist()
    assert [got[bounds[0] : bounds[1]], got[bounds[1] : bounds[2]]] == expected


@pytest.mark.parametrize(
    "offsets",
    [[0, 7, 3], [-1, 2], [0, 100], [3], [], [0, 2, 1]],
)
def test_packed_offsets_out_of_range_are_refused(offsets):
    encoder = Encoder(BYTE_IDS, MERGES_A)
    data = b"abcdef"
    raw = bytes((ctypes.c_int64 * len(offsets))(*offsets))
    if len(offsets) == 1:  # one offset: no text, nothing read
        ids, ends = encoder.encode_packed_buffer(data, raw, [], [])
        assert (bytes(ids), memoryview(ends).cast("q").tolist()) == (b"", [0])
        return
    with pytest.raises(ValueError):
        encoder.encode_packed_buffer(data, raw, [], [])
    with pytest.raises(ValueError):
        encoder.encode_packed_buffer(data, raw + b"\x00", [], [])  # (not whole int64s)


def test_packed_text_at_the_end_of_a_page_reads_nothing_past_it():
    encoder = Encoder(BYTE_IDS, MERGES_A)
    data = b"abc abcc ab " * 40 + "éé".encode()
    # The offsets end at a page with an inaccessible one after it; the data must be bytes
    # (immutable: read without the GIL), so a read past its last text is the sanitizer run's to catch.
    offsets = guarded(bytes((ctypes.c_int64 * 3)(0, 100, len(data))))
    ids, ends = encoder.encode_packed_buffer(data, offsets, [], [])
    got = memoryview(ids).cast("I").tolist()
    bounds = memoryview(ends).cast("q").tolist()
    assert got[: bounds[1]] == twin_encode(data[:100]) and got[bounds[1] :] == twin_encode(data[100:])


def test_jsonl_documents_refuses_bad_ranges_and_non_bytes():
    read = core.jsonl_documents
    block = b'{"text": "a"}\n{"text": "b"}'
    for start, end in ((-1, 5), (5, 4), (0, len(block) + 1)):
        with pytest.raises(ValueError):
            read(block, b"text", start, end, False)
    with pytest.raises(TypeError):
        read(bytearray(block), b"text", 0, len(block), False)  # (a buffer that could change under it)
    data, offsets, stop, stop_end, lines = read(block, b"text", 0, len(block), False)
    assert (data, memoryview(offsets).cast("q").tolist(), stop, stop_end, lines) == (
        b"ab",
        [0, 1, 2],
        len(block),
        len(block),
        2,
    )


def test_threads_read_one_block_of_json_lines_at_once():
    block = b"".join(b'{"text": "doc %d caf\\u00e9", "n": [1, 2.5, null]}\n' % k for k in range(20000))
    alone = core.jsonl_documents(block, b"text", 0, len(block), False)
    results: list = []

    def read():
        results.append(core.jsonl_documents(block, b"text", 0, len(block), False))

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [alone] * 4 and alone[2] == len(block)
