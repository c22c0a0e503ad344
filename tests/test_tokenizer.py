"""Tokenizer: a hand-made vocab worked out by hand, special tokens, streaming, files, bad input.

Equality with tiktoken on real text is in test_oracle_tiktoken.py.
"""

from __future__ import annotations

import collections
import itertools
import json
import random
import tracemalloc

import pytest
import regex
from conftest import examples, fixture_text, load_gpt2, require_gpt2_files, require_text
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import Tokenizer
from bpe_impls.base.errors import ConfigError, EncodeError, TokenizerFileError
from bpe_impls.base.patterns import GPT2_REGEX
from bpe_impls.encoding import tokenizer
from bpe_impls.encoding.encoders import ENCODERS
from bpe_impls.encoding.tokenizer import _ITERABLE_BATCH
from bpe_impls.trainers.common import build_vocab

EOT = "<|endoftext|>"
SETTINGS = [(name, cache) for name in ENCODERS for cache in (0, 2**16)]


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return load_gpt2([EOT])


@pytest.fixture(scope="module")
def gpt2_overlapping(gpt2: Tokenizer) -> Tokenizer:
    """GPT-2 plus overlapping special tokens, one of which is a prefix of another."""
    return Tokenizer(gpt2.vocab, gpt2.merges, [EOT, EOT + EOT, "<|e", "x"])


# --- a vocab small enough to work out by hand ---------------------------------------------------
#
# ids 0..255 are the single bytes (id == byte value); then one id per merge, in rank order:
#   rank 0: b + c  -> 256 "bc"
#   rank 1: a + b  -> 257 "ab"
#   rank 2: ab + c -> 258 "abc"   (never reached from "abc": "bc" merges first)
#   rank 3: a + a  -> 259 "aa"
#   rank 4: " " + a -> 260 " a"
HAND_MERGES = [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c"), (b"a", b"a"), (b" ", b"a")]


def hand_vocab() -> dict[int, bytes]:
    vocab = {b: bytes([b]) for b in range(256)}
    for left, right in HAND_MERGES:
        vocab[len(vocab)] = left + right
    return vocab


@pytest.fixture(params=SETTINGS, ids=[f"{n}-cache{c}" for n, c in SETTINGS])
def hand(request) -> Tokenizer:
    name, cache = request.param
    return Tokenizer(hand_vocab(), HAND_MERGES, [EOT], encoder=name, cache_size=cache)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # pairs a+b (rank 1) and b+c (rank 0): "bc" first, then a+bc is no merge.
        ("abc", [97, 256]),
        ("abd", [257, 100]),
        # a+a at positions 0 and 1 tie on rank: the leftmost merges, leaving the last a alone.
        ("aaa", [259, 97]),
        ("aaaa", [259, 259]),
        # one pre-token " aab": a+b (rank 1) before a+a (rank 3); then " "+a (rank 4).
        (" aab", [260, 257]),
        # two pre-tokens "ab" and " cab"; no merge crosses the boundary.
        ("ab cab", [257, 32, 99, 257]),
        # "abcab": bc first, then the second a+b; a+bc and bc+a are no merges.
        ("abcab", [97, 256, 257]),
        # the special token is appended after the largest id (260) and is never merged.
        (f"ab{EOT}abc", [257, 261, 97, 256]),
        ("", []),
    ],
)
def test_hand_vocab_encodes_as_worked_out(hand: Tokenizer, text: str, expected: list[int]):
    assert hand.encode(text) == expected
    assert hand.decode(expected) == text


def test_hand_vocab_long_pretoken(hand: Tokenizer):
    # 3001 a's: a+a merges pairwise from the left, 1500 times, and one a is left over.
    assert hand.encode("a" * 3001) == [259] * 1500 + [97]


def _reference_encode(text: str, vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]]) -> list[int]:
    """BPE straight from its definition, on bytes: merge the leftmost lowest-ranked pair until none is left."""
    rank = {pair: i for i, pair in reversed(list(enumerate(merges)))}
    ids = {token: token_id for token_id, token in sorted(vocab.items(), reverse=True)}
    out = []
    for piece in GPT2_REGEX.findall(text):
        parts = [bytes([b]) for b in piece.encode("utf-8")]
        while True:
            candidates = [(rank[pair], i) for i, pair in enumerate(itertools.pairwise(parts)) if pair in rank]
            if not candidates:
                break
            _, i = min(candidates)
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        out += [ids[part] for part in parts]
    return out


@settings(max_examples=examples(150), deadline=None)
@given(st.text(alphabet="abcd a\n'é", max_size=40))
def test_hand_vocab_matches_reference_for_every_encoder(text: str):
    expected = _reference_encode(text, hand_vocab(), HAND_MERGES)
    for name, cache in SETTINGS:
        tok = Tokenizer(hand_vocab(), HAND_MERGES, encoder=name, cache_size=cache)
        assert tok.encode(text) == expected, (name, cache)


def test_no_whole_token_shortcut():
    """A pre-token that is itself a vocab entry is still merged by the rules: "abc" is id 258,
    but its merges give a + bc. (tiktoken returns 258 here; see test_oracle_tiktoken.py.)"""
    tok = Tokenizer(hand_vocab(), HAND_MERGES)
    assert tok.encode("abc") == [97, 256]


# --- special tokens -----------------------------------------------------------------------------


def test_special_tokens_reuse_an_existing_id_or_get_a_new_one():
    vocab = hand_vocab()
    tok = Tokenizer(vocab, HAND_MERGES, ["ab", EOT, "<|pad|>"])
    # "ab" already is id 257; the others follow the largest id, in the order given.
    assert tok.special_token_ids == {"ab": 257, EOT: 261, "<|pad|>": 262}
    assert tok.special_tokens == ("ab", EOT, "<|pad|>")
    assert tok.n_vocab == 263 and tok.vocab[262] == b"<|pad|>"
    # As a special token "ab" is cut out before pre-tokenizing: "c", "ab", "c" -- never b+c.
    assert tok.encode("cabc") == [99, 257, 99]
    # As plain text the same string merges b+c first: c a bc.
    assert tok.encode_ordinary("cabc") == [99, 97, 256]
    assert Tokenizer(vocab, HAND_MERGES).encode("cabc") == [99, 97, 256]


@pytest.mark.parametrize("order", [[EOT, EOT + EOT], [EOT + EOT, EOT]])
def test_overlapping_special_tokens_resolve_longest_first(order: list[str]):
    tok = Tokenizer(hand_vocab(), HAND_MERGES, order)
    single, double = tok.special_token_ids[EOT], tok.special_token_ids[EOT + EOT]
    assert {single, double} == {261, 262}
    assert tok.encode(EOT * 3) == [double, single]
    assert tok.encode(EOT * 4) == [double, double]
    assert tok.encode(f"ab{EOT}{EOT}c{EOT}") == [257, double, 99, single]
    assert tok.encode("<|endoftext|") == tok.encode_ordinary("<|endoftext|")  # a prefix is plain text


def test_special_token_that_is_a_single_byte():
    # build_vocab puts special tokens first: "a" is id 0 and the byte "a" is id 1 + 97 = 98;
    # merges follow from 257, so a+b (rank 1) is 258.
    vocab = build_vocab(["a"], HAND_MERGES)
    assert vocab[0] == vocab[98] == b"a"
    tok = Tokenizer(vocab, HAND_MERGES, ["a"])
    assert tok.special_token_ids == {"a": 0}
    assert tok.encode("a") == [0]
    assert tok.encode("ba") == [99, 0]
    assert tok.encode("ab") == [0, 99]  # the special "a" is cut out before any merge
    assert tok.encode_ordinary("ab") == [258]
    assert tok.encode_ordinary("a") == [98]
    assert tok.decode([0, 98, 258]) == "aaab"


def test_gpt2_special_token_is_never_split(gpt2: Tokenizer):
    assert gpt2.encode(EOT) == [50256]
    assert gpt2.encode(f"hello{EOT}world") == [31373, 50256, 6894]
    # as plain text it is 7 ordinary tokens (the example in tiktoken's `Encoding.encode` docstring)
    assert gpt2.encode_ordinary(EOT) == [27, 91, 437, 1659, 5239, 91, 29]


# --- decoding -----------------------------------------------------------------------------------


def test_decode_invalid_utf8_becomes_replacement_char():
    tok = Tokenizer(hand_vocab(), HAND_MERGES)
    assert tok.decode_bytes([0xE9, 97]) == b"\xe9a"
    assert tok.decode([0xE9, 97]) == "\ufffda"
    assert tok.decode([0xC3, 0xA9]) == "é"  # two byte tokens that together are valid UTF-8


@pytest.mark.parametrize("bad", [123456, -1, 261])
def test_decode_unknown_id(bad: int):
    tok = Tokenizer(hand_vocab(), HAND_MERGES)
    with pytest.raises(EncodeError, match=rf"^unknown token id {bad} at position 7$"):
        tok.decode([97] * 7 + [bad, 98])
    with pytest.raises(EncodeError, match=rf"^unknown token id {bad} at position 0$"):
        tok.decode_bytes(iter([bad]))


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "position"), [("\ud800", 0), ("ab\udfffc", 2), (f"{EOT} x\ud83d\ude00", 15)])
def test_lone_surrogate_is_an_encode_error_naming_its_position(text: str, position: int):
    tok = Tokenizer(hand_vocab(), HAND_MERGES, [EOT])
    with pytest.raises(EncodeError, match=rf"^lone surrogate U\+D[0-9A-F]{{3}} at position {position} "):
        tok.encode(text)
    with pytest.raises(EncodeError, match=rf"at position {position} "):
        tok.encode_ordinary(text)
    # streamed in pieces, the position still counts from the start of the whole text
    chunks = [text[i : i + 2] for i in range(0, len(text), 2)]
    with pytest.raises(EncodeError, match=rf"at position {position} "):
        list(tok.encode_iterable(chunks))


@pytest.mark.parametrize(
    ("vocab_change", "merges", "message"),
    [
        ({}, [(b"b", b"c"), (b"x", b"y")], r"^merge #1 b'x' \+ b'y': merged token b'xy' is not in the vocab$"),
        ({}, [(b"zz", b"c")], r"^merge #0 b'zz' \+ b'c': left token b'zz' is not in the vocab$"),
        (
            {},
            [(b"ab", b"c"), (b"a", b"b")],
            r"^merge #0 b'ab' \+ b'c': left token b'ab' is not a single byte and no earlier",
        ),
        ({0: None}, [], r"^vocab has no token for byte 0x00 \(1 bytes missing\)$"),
        ({7: b""}, [], r"^vocab id 7 maps to b'', not non-empty bytes$"),
        ({7: "x"}, [], r"^vocab id 7 maps to 'x', not non-empty bytes$"),
        ({-1: b"q"}, [], r"^vocab id -1 is not a non-negative integer$"),
    ],
)
def test_inconsistent_vocab_or_merges_is_a_config_error(vocab_change, merges, message):
    vocab = hand_vocab()
    for token_id, token in vocab_change.items():
        if token is None:
            del vocab[token_id]
        else:
            vocab[token_id] = token
    with pytest.raises(ConfigError, match=message):
        Tokenizer(vocab, merges)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"encoder": "fastest"}, r"unknown encoder 'fastest'; choose from scan, heap"),
        ({"cache_size": -1}, r"cache_size must be a non-negative integer, got -1"),
        ({"special_tokens": ["a", "a"]}, r"special token 'a' is given twice"),
        (
            {"special_tokens": ["\ud800"]},
            r"special token #0 '\\ud800' is not valid Unicode text \(lone surrogate U\+D800 at position 0\)",
        ),
    ],
)
def test_bad_options_are_config_errors(options, message):
    with pytest.raises(ConfigError, match=message):
        Tokenizer(hand_vocab(), HAND_MERGES, **options)


def test_cache_is_bounded_and_does_not_change_results():
    tok = Tokenizer(hand_vocab(), HAND_MERGES, cache_size=3)
    text = " ".join(["abc", "aab", "ba", "cab", "abc", "dd", "aaa"] * 3)
    assert tok.encode(text) == Tokenizer(hand_vocab(), HAND_MERGES, cache_size=0).encode(text)
    assert 0 < tok._encoder.cache_len() <= 3
    off = Tokenizer(hand_vocab(), HAND_MERGES, cache_size=0)
    off.encode(text)
    assert off._encoder.cache_len() == 0


@pytest.mark.parametrize("method", ["encode", "encode_ordinary", "encode_to_numpy"])
def test_a_lone_surrogate_is_an_encode_error_naming_its_position(method):
    tok = Tokenizer(hand_vocab(), HAND_MERGES)
    with pytest.raises(EncodeError, match=r"lone surrogate U\+DC80 at position 4 cannot be encoded"):
        getattr(tok, method)("abc \udc80 \ud800")
    with pytest.raises(TypeError, match="expected str or bytes, got bytearray"):
        getattr(tok, method)(bytearray(b"abc"))


def test_repr_and_properties(gpt2: Tokenizer):
    assert gpt2.n_vocab == 50257
    assert repr(gpt2).startswith("Tokenizer(n_vocab=50257, merges=50000, special_tokens=['<|endoftext|>'], encoder=")
    assert gpt2.encoder in ENCODERS
    with pytest.raises(TypeError):
        gpt2.vocab[5] = b"x"  # a read-only view: the tokenizer's tables cannot be changed behind its back


# --- files --------------------------------------------------------------------------------------


def test_from_files_reproduces_gpt2_vocab(gpt2: Tokenizer):
    with open(require_gpt2_files()[0], encoding="utf-8") as handle:
        assert len(json.load(handle)) == 50257
    assert len(gpt2.vocab) == 50257 and len(gpt2.merges) == 50000
    assert gpt2.special_token_ids == {EOT: 50256}
    assert gpt2.vocab[31373] == b"hello"
    assert gpt2.encode("hello world") == [31373, 995]


def _assert_same(a: Tokenizer, b: Tokenizer, texts: list[str]) -> None:
    assert a.vocab == b.vocab
    assert a.merges == b.merges
    assert a.special_tokens == b.special_tokens
    assert a.special_token_ids == b.special_token_ids
    for text in texts:
        assert a.encode(text) == b.encode(text)


def test_save_and_from_directory_round_trip(tmp_path):
    tok = Tokenizer(hand_vocab(), HAND_MERGES, [EOT, "<|pad|>"])
    tok.save(tmp_path / "tok")
    again = Tokenizer.load(tmp_path / "tok")
    _assert_same(tok, again, ["abc aab", f"ab{EOT}<|pad|>x", "aaaa bcab"])
    assert again.vocab[261] == EOT.encode()  # the appended ids survive


@pytest.mark.slow
def test_gpt2_save_and_from_directory_round_trip(gpt2: Tokenizer, tmp_path):
    gpt2.save(tmp_path)
    again = Tokenizer.load(tmp_path)
    _assert_same(gpt2, again, [fixture_text("tinystories_sample.txt"), fixture_text("german.txt")])


def test_from_directory_without_special_tokens_file(tmp_path):
    Tokenizer(hand_vocab(), HAND_MERGES).save(tmp_path)
    (tmp_path / "special_tokens.json").unlink()
    assert Tokenizer.load(tmp_path).special_tokens == ()


def test_save_refuses_duplicate_bytes_and_writes_nothing(tmp_path):
    tok = Tokenizer(build_vocab(["a"], HAND_MERGES), HAND_MERGES, ["a"])
    with pytest.raises(TokenizerFileError, match=r"ids 0 and 98 both have bytes b'a'"):
        tok.save(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_from_files_errors_are_tokenizer_file_errors(tmp_path):
    (tmp_path / "vocab.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    with pytest.raises(TokenizerFileError, match=r"vocab\.json: not valid JSON at line 1 column 2"):
        Tokenizer.load(tmp_path)


# --- encode_iterable ---------------------------------------------------------------------------

TRICKY = (
    "Hello,  world's <|endoftext|><|endoftext|>end\n\n  x'll 12 日本語😀 e\u0301\t\n"
    "they'LL  've<|e<|endoftext|> \u00a0 x\r\n\n   "
)


@pytest.fixture(scope="module", autouse=True)
def small_batches():
    """encode_iterable encodes a batch of text at a time (tokenizer._ITERABLE_BATCH characters,
    32K): at 16, every text here crosses many batch boundaries, so the settled-prefix rounds and
    the carry are what these tests exercise. test_encode_iterable_over_open_file keeps the real
    size, on whole fixture files."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokenizer, "_ITERABLE_BATCH", 16)
        yield


def _chunks(text: str, cuts: list[int]) -> list[str]:
    cuts = sorted(cuts)
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


@pytest.mark.parametrize("name", ["plain", "overlapping"])
def test_encode_iterable_every_two_way_split(gpt2, gpt2_overlapping, name):
    tok = gpt2 if name == "plain" else gpt2_overlapping
    expected = tok.encode(TRICKY)
    for i in range(len(TRICKY) + 1):
        assert list(tok.encode_iterable([TRICKY[:i], TRICKY[i:]])) == expected, i
    assert list(tok.encode_iterable(iter(TRICKY))) == expected  # one character at a time


@pytest.mark.parametrize("name", ["address.txt", "german.txt", "tinystories_sample.txt"])
def test_encode_iterable_random_chunkings_of_fixtures(gpt2, gpt2_overlapping, name):
    text = fixture_text(name)
    rng = random.Random(name)
    # every special-token occurrence gets a cut strictly inside it, plus random cuts
    inside = [m.start() + rng.randint(1, len(EOT) - 1) for m in regex.finditer(regex.escape(EOT), text)]
    for tok in (gpt2, gpt2_overlapping):
        expected = tok.encode(text)
        for _ in range(5):
            cuts = inside + [rng.randint(0, len(text)) for _ in range(rng.randint(0, len(text) // 20))]
            assert list(tok.encode_iterable(_chunks(text, cuts))) == expected


@pytest.mark.slow
def test_encode_iterable_random_chunking_of_corpus(gpt2):
    text = fixture_text("corpus.en")
    rng = random.Random(7)
    cuts = [rng.randint(0, len(text)) for _ in range(3000)]
    assert list(gpt2.encode_iterable(_chunks(text, cuts))) == gpt2.encode(text)


@pytest.mark.parametrize("name", ["tinystories_sample.txt", "corpus.en", "kjv.txt"])
def test_encode_iterable_over_open_file(gpt2, name, monkeypatch):
    monkeypatch.setattr(tokenizer, "_ITERABLE_BATCH", _ITERABLE_BATCH)  # the real batch size
    path = require_text(name)  # kjv.txt's bundled sample where the shared file is absent
    with open(path, encoding="utf-8") as handle:
        streamed = list(gpt2.encode_iterable(handle))
    assert streamed == gpt2.encode(path.read_text(encoding="utf-8"))


def test_encode_iterable_is_lazy(gpt2):
    lines = ["Once upon a time, there was a dog.\n", EOT, "It ran   fast!\n"]
    pulled = 0  # characters taken from the stream

    def endless():
        nonlocal pulled
        for line in itertools.cycle(lines):
            pulled += len(line)
            yield line

    first = list(itertools.islice(gpt2.encode_iterable(endless()), 1000))
    # It reads a batch of text at a time (tokenizer._ITERABLE_BATCH characters), never the stream.
    assert len(first) == 1000 and pulled <= _ITERABLE_BATCH + 100
    assert gpt2.decode(first).startswith("Once upon a time, there was a dog.\n<|endoftext|>It ran")


def test_encode_iterable_long_unbroken_run(hand):
    # 5000 one-character chunks of "a" are one pre-token; nothing is settled until the end.
    assert list(hand.encode_iterable(["a"] * 5000)) == [259] * 2500
    assert list(hand.encode_iterable(["a"] * 5000 + [" ab"])) == [259] * 2500 + [32, 257]


def test_encode_iterable_memory_does_not_grow_with_input(gpt2):
    lines = fixture_text("corpus.en").splitlines(keepends=True)[:2000]
    gpt2.encode("".join(lines))  # warm the cache: only streaming buffers should allocate below

    def streaming_peak(copies: int) -> int:
        tracemalloc.start()
        try:
            collections.deque(gpt2.encode_iterable(itertools.chain.from_iterable([lines] * copies)), maxlen=0)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    # Over 200 KB in the smaller run (4 copies of corpus.en, more of its bundled sample), so a
    # buffer that grew with the input would show.
    copies = max(4, -(-200_000 // sum(map(len, lines))))
    small, large = streaming_peak(copies), streaming_peak(4 * copies)
    # Bounded by one batch of text and its ids (tokenizer._ITERABLE_BATCH characters), not the input.
    assert large < 1.25 * small + 16_000, (small, large)
    assert large < 2_000_000, large


# --- properties (Hypothesis) ------------------------------------------------------------------

pieces = st.one_of(
    st.text(max_size=12),
    st.sampled_from([EOT, EOT + EOT, "<|e", "x", "'ll", "'s", " ", "  ", "\n\n", "\t ", "\u00a0", "😀", "e\u0301"]),
    st.text(alphabet=" \t\n\r\x0b\x0c\u3000", min_size=1, max_size=6),
)
texts = st.lists(pieces, max_size=12).map("".join)


@settings(max_examples=examples(200), deadline=None)
@given(texts)
def test_decode_inverts_encode(gpt2, text: str):
    assert gpt2.decode(gpt2.encode(text)) == text
    assert gpt2.decode(gpt2.encode_ordinary(text)) == text


@settings(max_examples=examples(200), deadline=None)
@given(st.data())
def test_encode_iterable_equals_encode_on_random_chunks(gpt2, gpt2_overlapping, data):
    text = data.draw(texts)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=10))
    for tok in (gpt2, gpt2_overlapping):
        assert list(tok.encode_iterable(_chunks(text, cuts))) == tok.encode(text)


@settings(max_examples=examples(200), deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=30))
def test_fuzz_encode_raises_only_encode_error(gpt2, text: str):
    try:
        text.encode("utf-8")
        valid = True
    except UnicodeEncodeError:
        valid = False
    for call in (gpt2.encode, gpt2.encode_ordinary, lambda t: list(gpt2.encode_iterable([t[:3], t[3:]]))):
        try:
            ids = call(text)
        except EncodeError:
            assert not valid
        else:
            assert valid and gpt2.decode(ids) == text


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.one_of(st.integers(), st.integers(0, 50256)), max_size=20))
def test_fuzz_decode_raises_only_encode_error(gpt2, ids: list[int]):
    try:
        text = gpt2.decode(ids)
    except EncodeError as exc:
        bad = next(i for i, token_id in enumerate(ids) if not 0 <= token_id <= 50256)
        assert str(exc) == f"unknown token id {ids[bad]} at position {bad}"
    else:
        assert all(0 <= token_id <= 50256 for token_id in ids) and isinstance(text, str)


# ---- pickling (multiprocessing, Dask) ------------------------------------------------------------


@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_a_pickled_tokenizer_is_built_again_with_the_same_ids(encoder):
    import pickle

    vocab = {i: bytes([i]) for i in range(256)} | {256: b"he", 257: b"ll", 258: b"hell", 300: b"<|x|>"}
    merges = [(b"h", b"e"), (b"l", b"l"), (b"he", b"ll")]
    # A custom pattern travels too (the native encoder scans the presets only); the ids are the
    # same by either: "hello" "<|x|>" " hell" "," " well" "<|endoftext|>".
    pattern = "gpt2" if encoder == "native" else r" ?\w+|\s+|[^\w\s]+"
    original = Tokenizer(
        vocab, merges, {"<|x|>": 300, "<|endoftext|>": 301}, pattern=pattern, encoder=encoder, cache_size=7
    )
    copy = pickle.loads(pickle.dumps(original))
    text = "hello<|x|> hell, well<|endoftext|>"
    assert copy.encode(text) == original.encode(text) == [258, 111, 300, 32, 258, 44, 32, 119, 101, 257, 301]
    assert copy.special_tokens == original.special_tokens and copy.special_token_ids == original.special_token_ids
    assert (copy.encoder, copy.pattern, copy._cache_size) == (original.encoder, original.pattern, 7)
    assert dict(copy.vocab) == dict(original.vocab) and copy.merges == original.merges
