"""The Tokenizer's one surface: every combination of its axes exists and agrees with an independent
reference, the names deprecated before 0.2.0 are gone, and bad arguments are named.

The axes: input (str or UTF-8 bytes) x one text or a batch x list or numpy output x special-token
handling (all allowed, none allowed, a subset, disallowed). The reference never uses the special-
token machinery under test: it splits the text on the allowed special tokens itself (longest
first) and encodes the pieces with a tokenizer built with no special tokens at all, whose ids for
ordinary text are the same.
"""

from __future__ import annotations

import numpy as np
import pytest
import regex
from conftest import examples, load_gpt2
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import ConfigError, EncodeError, Tokenizer

EOT, PAD = "<|endoftext|>", "<|pad|>"
SPECIALS = [EOT, PAD]
HANDLING = {
    "all": {},
    "none": {"allowed_special": set()},
    "subset": {"allowed_special": {PAD}},
    "none, disallowed all": {"allowed_special": set(), "disallowed_special": "all"},
}
texts = st.lists(
    st.sampled_from(["Hello", " world", EOT, PAD, "<|end", "oftext|>", " 12", "é中", "\n\t", "'s", "  "]),
    max_size=12,
).map("".join)


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return load_gpt2(SPECIALS)


@pytest.fixture(scope="module")
def plain(tok: Tokenizer) -> Tokenizer:
    return Tokenizer({i: t for i, t in tok.vocab.items() if i < 50257}, tok.merges)


def reference(tok: Tokenizer, plain: Tokenizer, text: str, allowed: set[str]) -> list[int]:
    if not allowed:
        return plain.encode(text)
    splitter = regex.compile("|".join(regex.escape(t) for t in sorted(allowed, key=len, reverse=True)))
    ids: list[int] = []
    position = 0
    for match in splitter.finditer(text):
        ids += plain.encode(text[position : match.start()]) + [tok.special_token_ids[match.group()]]
        position = match.end()
    return ids + plain.encode(text[position:])


def allowed_of(handling: dict) -> set[str]:
    allowed = handling.get("allowed_special", "all")
    return set(SPECIALS) if allowed == "all" else set(allowed)


def disallowed_of(handling: dict) -> set[str]:
    disallowed = handling.get("disallowed_special", ())
    return set(SPECIALS) - allowed_of(handling) if disallowed == "all" else set(disallowed)


@pytest.mark.parametrize("handling", list(HANDLING))
@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
@settings(max_examples=examples(40), deadline=None)
@given(batch=st.lists(texts, min_size=1, max_size=4))
def test_every_combination_equals_the_reference(tok, plain, handling, as_bytes, batch):
    options = HANDLING[handling]
    inputs = [text.encode() if as_bytes else text for text in batch]
    refused = [i for i, text in enumerate(batch) if any(token in text for token in disallowed_of(options))]
    if refused:
        unit = "byte offset" if as_bytes else "position"
        with pytest.raises(EncodeError, match=f"disallowed special token .* at {unit}"):
            tok.encode(inputs[refused[0]], **options)
        with pytest.raises(EncodeError, match=f"disallowed special token .* at {unit}"):
            tok.encode_to_numpy(inputs[refused[0]], **options)
        with pytest.raises(EncodeError, match=f"batch index {refused[0]}: disallowed special token"):
            tok.encode_batch(inputs, 2, **options)
        with pytest.raises(EncodeError, match=f"batch index {refused[0]}: disallowed special token"):
            tok.encode_batch_to_numpy(inputs, **options)
        return
    want = [reference(tok, plain, text, allowed_of(options)) for text in batch]
    for text, expected in zip(inputs, want):
        assert tok.encode(text, **options) == expected
        array = tok.encode_to_numpy(text, **options)
        assert array.dtype == np.uint16 and array.tolist() == expected
    assert tok.encode_batch(inputs, 2, **options) == want
    ids, offsets = tok.encode_batch_to_numpy(inputs, **options)
    assert [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])] == want
    if not options:
        assert [tok.encode_ordinary(text) for text in inputs] == [plain.encode(text) for text in batch]


def test_a_disallowed_special_token_is_named_with_its_offset(tok):
    with pytest.raises(EncodeError, match=r"^disallowed special token '<\|pad\|>' at position 3; pass allowed_special"):
        tok.encode("ab " + PAD + EOT, allowed_special={EOT}, disallowed_special="all")
    with pytest.raises(EncodeError, match="at byte offset 3;"):
        tok.encode(("é " + PAD).encode(), allowed_special=set(), disallowed_special=[PAD])  # é: two bytes
    # Only the disallowed ones are searched: an allowed EOT passes.
    assert tok.encode(EOT, allowed_special={EOT}, disallowed_special="all") == [50256]


def test_unknown_special_token_names_and_bad_kinds_are_refused(tok):
    with pytest.raises(ConfigError, match=r"allowed_special: '<\|x\|>' is not a special token of this tokenizer"):
        tok.encode("a", allowed_special={"<|x|>"})
    with pytest.raises(ConfigError, match=r"disallowed_special: '<|x|>'"):
        tok.encode_batch(["a"], disallowed_special=["<|x|>"])
    with pytest.raises(TypeError, match='allowed_special must be "all" or a collection'):
        tok.encode("a", allowed_special=EOT)  # a lone string, not a set of them


def test_invalid_utf8_bytes_are_named_by_offset_in_every_method(tok):
    with pytest.raises(EncodeError, match=r"^not valid UTF-8 at byte offset 1$"):
        tok.encode(b"a\xffb")
    with pytest.raises(EncodeError, match=r"^not valid UTF-8 at byte offset 1$"):
        tok.encode(b"a\xffb", allowed_special=set())
    with pytest.raises(EncodeError, match="batch index 1: not valid UTF-8 at byte offset 0"):
        tok.encode_batch([b"ok", b"\xc3("])


# Removed in 0.2.0 (CHANGELOG.md): each had a name above that takes the same arguments.
REMOVED = [
    "encode_utf8_to_numpy",
    "encode_utf8_batch_to_numpy",
    "encode_ordinary_batch",
    "from_files",
    "from_directory",
    "from_hf",
    "from_tiktoken",
]


@pytest.mark.parametrize("name", REMOVED)
def test_the_deprecated_names_are_gone(name):
    assert not hasattr(Tokenizer, name)


def test_load_detects_each_format_and_refuses_what_a_file_already_says(tok, tmp_path):
    tok.save(tmp_path / "gpt2")
    tok.save(tmp_path / "hf", format="hf")
    text = f"Hello{EOT} world{PAD}"
    for folder in ("gpt2", "hf"):
        assert Tokenizer.load(tmp_path / folder).encode(text) == tok.encode(text)
    assert Tokenizer.load(tmp_path / "gpt2" / "vocab.json").encode(text) == tok.encode(text)
    with pytest.raises(ConfigError, match="lists its own special tokens"):
        Tokenizer.load(tmp_path / "hf", special_tokens=[EOT])
    with pytest.raises(ConfigError, match="merges_path is for the gpt2 format"):
        Tokenizer.load(tmp_path / "hf", "hf", merges_path=tmp_path / "x")
    with pytest.raises(ConfigError, match="unknown format 'json'"):
        Tokenizer.load(tmp_path / "hf", "json")


def test_decode_takes_ints_only(tok):
    ids = tok.encode("Hello" + EOT)
    assert tok.decode(ids) == tok.decode(np.array(ids)) == tok.decode(iter(ids)) == tok.decode(map(np.int64, ids))
    for bad, message in (
        ([1.0], r"position 0 is 1.0 \(float\)"),
        ([15496, True], r"position 1 is True \(bool\)"),
        (b"ab", "got bytes"),
        ("ab", "got str"),
        (np.array([1.5]), "got dtype float64"),
    ):
        with pytest.raises(TypeError, match=message):
            tok.decode(bad)


def test_a_huge_thread_count_means_as_many_as_useful(tok):
    assert tok.encode_batch(["a b", "c"], num_threads=2**62) == [tok.encode("a b"), tok.encode("c")]


@settings(max_examples=examples(40), deadline=None)
@given(text=texts, cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=6))
def test_encode_iterable_takes_utf8_bytes_cut_anywhere(tok, text, cuts):
    # Cut inside UTF-8 characters ("é中" is 5 bytes), special tokens and pre-tokens alike.
    data = text.encode()
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    chunks = [data[a:b] for a, b in zip(bounds, bounds[1:])]
    assert list(tok.encode_iterable(chunks)) == tok.encode(text)


def test_encode_iterable_reads_a_binary_file_as_a_text_file(tok, tmp_path, monkeypatch):
    from bpe_impls.encoding import tokenizer as module

    monkeypatch.setattr(module, "_ITERABLE_BATCH", 7)  # blocks that cut "é" and the special token
    text = ("Héllo wörld" + EOT + " 中文 ") * 20
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    with open(path, "rb") as binary, open(path, encoding="utf-8") as plain_text:
        assert list(tok.encode_iterable(binary)) == list(tok.encode_iterable(plain_text)) == tok.encode(text)


def test_encode_iterable_names_bad_bytes_and_mixed_chunks(tok, monkeypatch):
    from bpe_impls.encoding import tokenizer as module

    monkeypatch.setattr(module, "_ITERABLE_BATCH", 4)
    # The bad byte is offset 9 of the stream, in the second round's buffer.
    with pytest.raises(EncodeError, match=r"^not valid UTF-8 at byte offset 9$"):
        list(tok.encode_iterable([b"abc de", b"fgh\xff ij"]))
    with pytest.raises(EncodeError, match=r"^not valid UTF-8 at byte offset 2$"):
        list(tok.encode_iterable([b"ab\xc3"]))  # a character cut short at the end of the stream
    with pytest.raises(TypeError, match="a bytes chunk in a stream of str chunks"):
        list(tok.encode_iterable(["ab", b"cd"]))
    with pytest.raises(TypeError, match="expected str or bytes chunks, got int"):
        list(tok.encode_iterable([1]))
    with pytest.raises(TypeError, match="got a single bytes"):
        tok.encode_iterable(b"abc")
