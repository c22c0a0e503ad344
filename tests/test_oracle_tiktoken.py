"""The oracle: our Tokenizer on GPT-2's files gives tiktoken's ids, id for id, for every encoder.

tiktoken is built offline from the same encoder.json (no download): mergeable_ranks are the token
bytes with their GPT-2 ids as ranks, the pattern is the shared GPT2_PATTERN, and <|endoftext|>
is 50256. tiktoken merges by the rank of the concatenated bytes, we by the merge list; for GPT-2
the two agree (merged ids are 256 + merge rank, and every token's own merges rebuild it -- the
property checked below that also makes tiktoken's whole-token shortcut exact for this vocab).
"""

from __future__ import annotations

import unicodedata

import pytest
from conftest import examples, fixture_text, load_gpt2, require_gpt2_files
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import Tokenizer
from bpe_impls.base.patterns import GPT2_PATTERN
from bpe_impls.encoding.bpe import bpe_scan
from bpe_impls.encoding.encoders import DEFAULT_ENCODER, ENCODERS
from bpe_impls.encoding.formats.gpt2 import load_tokenizer_files

tiktoken = pytest.importorskip("tiktoken")

EOT = "<|endoftext|>"
SETTINGS = [(name, cache) for name in ENCODERS for cache in (0, 2**16)]
IDS = [f"{name}-cache{cache}" for name, cache in SETTINGS]


@pytest.fixture(scope="module")
def gpt2_data() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    return load_tokenizer_files(*require_gpt2_files())


@pytest.fixture(scope="module")
def oracle(gpt2_data) -> tiktoken.Encoding:
    vocab, _ = gpt2_data
    ranks = {token: token_id for token_id, token in vocab.items() if token_id != 50256}
    return tiktoken.Encoding(
        name="gpt2_local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={EOT: 50256}
    )


@pytest.fixture(scope="module")
def tokenizers(gpt2_data) -> dict[tuple[str, int], Tokenizer]:
    vocab, merges = gpt2_data
    return {(name, cache): Tokenizer(vocab, merges, [EOT], encoder=name, cache_size=cache) for name, cache in SETTINGS}


def test_from_files_equals_the_constructor(gpt2_data, tokenizers):
    tok = load_gpt2([EOT])
    assert tok.vocab == tokenizers[SETTINGS[0]].vocab and len(tok.vocab) == 50257


@pytest.mark.parametrize("name", ["address.txt", "german.txt", "tinystories_sample.txt", "corpus.en"])
@pytest.mark.parametrize("setting", SETTINGS, ids=IDS)
def test_fixture_files_match_tiktoken(oracle, tokenizers, name: str, setting):
    text = fixture_text(name)
    expected = oracle.encode(text, allowed_special="all")
    assert tokenizers[setting].encode(text) == expected
    if name == "tinystories_sample.txt":
        assert expected.count(50256) == text.count(EOT) > 0
        assert tokenizers[setting].encode_ordinary(text) == oracle.encode_ordinary(text)


@pytest.mark.slow
def test_kjv_matches_tiktoken(oracle, gpt2_data):
    text = fixture_text("kjv.txt")
    tok = Tokenizer(*gpt2_data, [EOT])  # the default encoder; the others are covered above
    assert tok.encode(text) == oracle.encode(text, allowed_special="all")


# Characters assigned in the Unicode version of Python's unicodedata. The `regex` module and
# tiktoken's Rust regex carry their own (different, newer) Unicode tables, so a code point that
# one of them already classes as a letter may be unassigned (\p{Cn}) to the other, which changes
# pre-tokens -- a difference between regex engines, not between BPE implementations. Excluding
# Cn (and the surrogates, which tiktoken silently replaces while we raise) leaves every
# character both engines agree on.
characters = st.characters(exclude_categories=("Cs", "Cn"))
pieces = st.one_of(
    st.text(alphabet=characters, max_size=12),
    st.sampled_from(
        [
            EOT,
            EOT + EOT,
            "<|endoftext|",
            "'ll",
            "'s",
            "'VE",
            "😀",
            "👍🏽",
            "🇺🇸",
            "👨\u200d👩\u200d👧",
            "e\u0301",
            "\u0915\u094d",
        ]
    ),
    st.text(alphabet=" \t\n\r\x0b\x0c\x1c\x85\xa0\u2028\u3000", min_size=1, max_size=6),  # whitespace runs
    st.text(alphabet="0123456789٣", min_size=1, max_size=6),
)
texts = st.lists(pieces, max_size=15).map("".join)


@settings(max_examples=examples(300), deadline=None)
@given(texts)
def test_random_text_matches_tiktoken(oracle, tokenizers, text: str):
    expected = oracle.encode(text, allowed_special="all")
    for setting, tok in tokenizers.items():
        assert tok.encode(text) == expected, setting
    ordinary = oracle.encode_ordinary(text)
    assert tokenizers[SETTINGS[0]].encode_ordinary(text) == ordinary
    assert tokenizers[SETTINGS[0]].decode(expected) == oracle.decode(expected) == text


def test_assigned_characters_alone_match_tiktoken(oracle, tokenizers):
    """Every assigned code point, in a few contexts, as a systematic complement to Hypothesis."""
    chars = [
        chr(cp)
        for cp in range(0x110000)
        if unicodedata.category(chr(cp)) not in ("Cs", "Cn") and (cp < 0x3400 or cp % 97 == 0)
    ]
    tok = tokenizers[(DEFAULT_ENCODER, 2**16)]
    for start in range(0, len(chars), 500):
        block = chars[start : start + 500]
        text = "".join(f"a{c} {c}1{c}{c}  {c}'s\n{c}" for c in block)
        assert tok.encode(text) == oracle.encode(text, allowed_special="all"), f"block from U+{ord(block[0]):04X}"


def test_every_gpt2_token_is_rebuilt_by_its_own_merges(gpt2_data, tokenizers, oracle):
    """A pre-token that is a whole vocab entry encodes to that one id -- for GPT-2.

    tiktoken returns a whole-token match without merging; that shortcut equals BPE by merges
    only when every token is what its own merges produce. True for all 50256 GPT-2 tokens, so
    tiktoken is a valid oracle for this vocab. (Not for every vocab: see test_no_whole_token_shortcut
    in test_tokenizer.py, and the counterexample below.)
    """
    vocab, _ = gpt2_data
    tok = tokenizers[SETTINGS[0]]
    not_rebuilt = [
        token_id
        for token_id, token in vocab.items()
        if token_id != 50256
        and bpe_scan(list(map(tok._tables.byte_ids.__getitem__, token)), tok._tables.ranks) != [token_id]
    ]
    assert not_rebuilt == []


def test_tiktoken_shortcut_differs_on_a_vocab_without_that_property():
    # bytes are ids 0..255; b+c -> 256, a+b -> 257, ab+c -> 258. "abc" merges b+c first (a, bc),
    # so the merge rules never reach 258, while tiktoken finds "abc" whole in its ranks.
    vocab = {b: bytes([b]) for b in range(256)}
    merges = [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")]
    for left, right in merges:
        vocab[len(vocab)] = left + right
    enc = tiktoken.Encoding(
        name="hand", pat_str=GPT2_PATTERN, mergeable_ranks={t: i for i, t in vocab.items()}, special_tokens={}
    )
    assert enc.encode("abc") == [258]
    assert Tokenizer(vocab, merges).encode("abc") == [97, 256]
