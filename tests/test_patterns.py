"""Split patterns: the presets are tiktoken's, and everything stays exact under every pattern.

Each test runs under the three presets and a custom pattern: cutting a corpus at the pattern's
safe cuts, or an encode_iterable stream at its settled points, changes no pre-token; every trainer
equals naive on counts made with the pattern; encoding with a trained vocab equals tiktoken's.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from conftest import examples, fixture_text, require_text
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import (
    IMPLEMENTATIONS,
    BpeError,
    ConfigError,
    Tokenizer,
    TokenizerFileError,
    cli,
    count_pretokens,
    train_bpe,
    train_bpe_from_iterator,
)
from bpe_impls.base.patterns import (
    GPT2,
    GPT2_CLASSIC_PATTERN,
    PRESETS,
    SplitPattern,
    resolve_pattern,
    special_token_regex,
)
from bpe_impls.corpus.cuts import CutFinder
from bpe_impls.corpus.tally import count_text
from bpe_impls.encoding import tokenizer as tokenizer_module
from bpe_impls.encoding.encoders import ENCODERS
from bpe_impls.encoding.tables import build_tables
from bpe_impls.trainers import naive

EOT = "<|endoftext|>"
# Splits words at capitals and keeps runs of digits and punctuation whole: a pattern no preset has.
# (Its last alternative makes it match every character, as a split pattern must.)
CUSTOM = r"""[A-Z]?[a-z]+|[0-9]+|[^\sA-Za-z0-9]+|\s+|\S"""
PATTERNS = {**PRESETS, "custom": resolve_pattern(CUSTOM)}

# Text that reaches each alternative's edges: contractions in every case, digit runs, CR/LF mixes,
# whitespace runs ending in newlines, trailing whitespace, '/' after punctuation and newlines
# (o200k), combining marks, title case, capital runs before lower case, other scripts.
PIECES = [
    "don't",
    "I'LL",
    "we'll",
    "you've",
    "they're",
    "we'Re",
    "'s",
    "'S",
    "'",
    "x'y",
    "1",
    "12",
    "1234",
    "1234567",
    "\r\n",
    "\n",
    "\r",
    "\n\n",
    " \n",
    "  ",
    " ",
    "\t",
    "a.",
    "./",
    "a\n/b",
    ".\n/",
    "?!",
    "é",
    "é",
    "ǅ",
    "ABc",
    "ABC",
    "aBc",
    "日本語",
    "Привет",
    "٣٤",
    "🙂",
    "x",
    "Hello",
    " world",
    "<",
    "|",
]
texts = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


def pretokens(text: str, pattern: SplitPattern) -> list[str]:
    return pattern.compiled.findall(text)


@pytest.fixture(params=list(PATTERNS), ids=list(PATTERNS))
def pattern(request) -> SplitPattern:
    return PATTERNS[request.param]


# --- the presets ----------------------------------------------------------------------------------


def test_presets_are_tiktokens_patterns(monkeypatch):
    openai_public = pytest.importorskip("tiktoken_ext.openai_public")
    # Each constructor downloads its ranks first: give it none, and read back the pattern it names.
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: {})
    expected = {"gpt2": "r50k_base", "cl100k": "cl100k_base", "o200k": "o200k_base"}
    for name, constructor in expected.items():
        assert PRESETS[name].regex == getattr(openai_public, constructor)()["pat_str"], name


def test_gpt2_pattern_as_published_is_the_preset():
    assert resolve_pattern(GPT2_CLASSIC_PATTERN) is GPT2
    assert resolve_pattern(None) is GPT2 and resolve_pattern("o200k") is PRESETS["o200k"]
    assert resolve_pattern(PRESETS["cl100k"].regex) is PRESETS["cl100k"]


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ("(unclosed", "not a valid regex"),
        ("a*", "matches the empty string"),
        ("", "a preset name"),
        (3, "a preset name"),
    ],
)
def test_a_bad_pattern_is_a_one_line_config_error(bad, needle):
    with pytest.raises(ConfigError, match=needle):
        resolve_pattern(bad)


# --- cuts: a corpus cut at a safe cut counts as the whole -----------------------------------------


@settings(max_examples=examples(200))
@given(text=texts)
def test_every_prose_cut_splits_no_pretoken(text):
    for pattern in PATTERNS.values():
        if pattern.prose_cuts is None:
            continue
        data = text.encode("utf-8")
        finder = CutFinder([], [], prose=pattern.prose_cuts)
        whole = pretokens(text, pattern)
        position = 0
        while (cut := finder.first_cut_in(b"\0\0" + data + b"\0\0", 2 + position, len(data) - position)) is not None:
            cut -= 2
            left, right = data[:cut].decode(), data[cut:].decode()
            assert pretokens(left, pattern) + pretokens(right, pattern) == whole, (pattern.name, text, cut)
            position = cut + 1
            if position >= len(data):
                break


@pytest.mark.parametrize("workers", [1, 3])
def test_counts_are_the_same_for_any_worker_count(pattern, tmp_path, workers):
    text = fixture_text("kjv.txt")[:400_000] + EOT + fixture_text("german.txt")[:100_000]
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    expected = count_text(text, (EOT,), pattern=pattern)
    assert count_pretokens(path, [EOT], workers, pattern=pattern.regex) == expected
    assert expected == Counter(t.encode() for piece in text.split(EOT) for t in pretokens(piece, pattern))


# --- training: every trainer equals naive under every pattern ------------------------------------


@settings(max_examples=examples(40))
@given(text=texts, extra=st.integers(0, 200))
def test_every_trainer_equals_naive_under_every_pattern(text, extra):
    for pattern in PATTERNS.values():
        counts = count_text(text, (), pattern=pattern)
        expected = naive.train(counts, 256 + extra)
        for name, trainer in IMPLEMENTATIONS.items():
            assert trainer(counts, 256 + extra) == expected, (name, pattern.name)


def test_train_bpe_records_the_pattern_it_was_given(tmp_path):
    path = require_text("tinystories_sample.txt")
    for name in PATTERNS:
        vocab, merges = train_bpe(path, 400, [EOT], pattern=PATTERNS[name].regex, num_workers=1)
        assert (vocab, merges) == naive.train(count_pretokens(path, [EOT], 1, pattern=PATTERNS[name]), 400, [EOT])


# --- encoding ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained() -> dict[str, tuple[dict[int, bytes], list[tuple[bytes, bytes]]]]:
    """A 1000-token vocab trained on real text under each pattern."""
    path = require_text("corpus.en")
    return {name: train_bpe(path, 1000, [EOT], pattern=p, num_workers=1) for name, p in PATTERNS.items()}


@settings(max_examples=examples(100))
@given(text=texts, seed=st.integers(0, 2**32 - 1))
def test_encode_iterable_equals_encode_for_any_chunking(trained, text, seed):
    text = f"{text}{EOT}{text[::-1]}"
    rng = random.Random(seed)
    for name, pattern in PATTERNS.items():
        vocab, merges = trained[name]
        for encoder in [name for name in ENCODERS if name != "native" or pattern.name != "custom"]:
            tok = Tokenizer(vocab, merges, [EOT], pattern=pattern, encoder=encoder)
            cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, 6)))
            chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
            expected = tok.encode(text)
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(tokenizer_module, "_ITERABLE_BATCH", 3)  # settle rounds every few characters
                assert list(tok.encode_iterable(chunks)) == expected, (name, encoder, chunks)
                patch.setattr(tokenizer_module, "_ITERABLE_BATCH", 1)  # a round after every character
                assert list(tok.encode_iterable(iter(text))) == expected, (name, encoder)
            assert tok.decode(tok.encode(text)) == text


def _boundaries(text: str, pattern: SplitPattern, specials: tuple[str, ...]) -> set[int]:
    """Byte offsets in `text` where one of its pre-tokens or special tokens ends (and 0)."""
    ends, at = {0}, 0
    pieces = special_token_regex(specials).split(text) if specials else [text]
    found = special_token_regex(specials).findall(text) if specials else []
    for index, piece in enumerate(pieces):
        for token in pretokens(piece, pattern):
            at += len(token.encode())
            ends.add(at)
        if index < len(found):
            at += len(found[index].encode())
            ends.add(at)
    return ends


@settings(max_examples=examples(150))
@given(text=texts)
def test_a_settled_cut_is_a_boundary_of_the_whole_text(text):
    # What encode_iterable encodes in a round must be exactly the whole text's first pre-tokens,
    # however the text goes on: every cut any prefix settles at is a boundary of the whole text.
    text = f"{text}{EOT}{text}"
    specials = (EOT,)
    for pattern in PATTERNS.values():
        boundaries = _boundaries(text, pattern, specials)
        bytes_only = build_tables({i: bytes([i]) for i in range(256)}, [], ())
        encoders = [ENCODERS["hybrid"](bytes_only, 0, pattern)]
        if pattern.name != "custom" and "native" in ENCODERS:
            encoders.append(ENCODERS["native"](bytes_only, 0, pattern))
        for encoder in encoders:
            for end in range(len(text) + 1):
                prefix = text[:end].encode()
                _, cut = encoder.encode_utf8(prefix, [EOT.encode()], [999], True)
                assert cut in boundaries, (pattern.name, type(encoder).__name__, text[:end], cut)


@pytest.mark.parametrize("name", ["gpt2", "cl100k", "o200k"])
def test_encoding_equals_tiktoken_with_the_same_vocab(trained, name):
    tiktoken = pytest.importorskip("tiktoken")
    vocab, merges = trained[name]
    ours = Tokenizer(vocab, merges, [EOT], pattern=name)
    special = {EOT: ours.special_token_ids[EOT]}
    theirs = tiktoken.Encoding(
        name=f"test_{name}",
        pat_str=PRESETS[name].regex,
        mergeable_ranks={token: i for i, token in vocab.items() if i not in special.values()},
        special_tokens=special,
    )
    for fixture in ("corpus.en", "tinystories_sample.txt", "german.txt", "address.txt"):
        text = fixture_text(fixture)
        text = text[: len(text) // 2] + EOT + text[len(text) // 2 :]
        assert ours.encode(text) == theirs.encode(text, allowed_special="all"), fixture
    # Hand-picked edges of each alternative (ASCII, Latin-1, CJK, Cyrillic: outside any Unicode
    # version difference between the regex module and tiktoken's Rust regex).
    for text in PIECES + ["".join(PIECES), " ".join(PIECES), "\n".join(PIECES)]:
        assert ours.encode(text) == theirs.encode(text, allowed_special="all"), repr(text)


@pytest.mark.parametrize("text", ["I am", "ok !", "tail X"])
def test_a_custom_pattern_that_skips_characters_is_refused_not_lossy(text):
    skipping = r"""[a-z]+|\s+"""  # matches no capital and no punctuation
    vocab = {i: bytes([i]) for i in range(256)}
    with pytest.raises(ConfigError, match="must match every character"):
        Tokenizer(vocab, [], pattern=skipping).encode(text)
    with pytest.raises(ConfigError, match="must match every character"):
        count_text(text, (), pattern=resolve_pattern(skipping))


def test_a_pattern_without_a_compiled_scanner_takes_the_python_encoder():
    vocab = {i: bytes([i]) for i in range(256)}
    assert Tokenizer(vocab, [], pattern=CUSTOM).encoder == "hybrid"
    if "native" in ENCODERS:
        with pytest.raises(ConfigError, match=r"native encoder scans the presets \(gpt2, cl100k, o200k\) only"):
            Tokenizer(vocab, [], pattern=CUSTOM, encoder="native")


# --- saved tokenizers ------------------------------------------------------------------------------


def test_a_saved_tokenizer_keeps_its_pattern(trained, pattern, tmp_path):
    vocab, merges = trained[pattern.name if pattern.name != "custom" else "custom"]
    tok = Tokenizer(vocab, merges, [EOT], pattern=pattern)
    tok.save(tmp_path)
    again = Tokenizer.load(tmp_path)
    assert again.pattern == pattern
    text = fixture_text("tinystories_sample.txt")
    assert again.encode(text) == tok.encode(text)


def test_a_pattern_file_naming_a_preset_with_another_regex_is_refused(tmp_path):
    Tokenizer({i: bytes([i]) for i in range(256)}, []).save(tmp_path)
    (tmp_path / "split_pattern.json").write_text('{"name": "o200k", "regex": "x+"}', encoding="utf-8")
    with pytest.raises(TokenizerFileError, match=r"split_pattern\.json: the regex differs from the 'o200k' preset's"):
        Tokenizer.load(tmp_path)


def test_cli_train_and_encode_use_the_pattern(tmp_path):
    import numpy as np

    corpus = require_text("corpus.en")
    out = tmp_path / "tok"
    assert (
        cli.main(["train", str(corpus), "--vocab-size", "500", "--pattern", "o200k", "--out", str(out), "--quiet"]) == 0
    )
    tok = Tokenizer.load(out)
    assert tok.pattern is PRESETS["o200k"]
    ids = tmp_path / "ids.npy"
    assert cli.main(["encode", "--tokenizer", str(out), str(corpus), "--out", str(ids), "--quiet"]) == 0
    assert np.load(ids).tolist() == tok.encode(corpus.read_text(encoding="utf-8"))


# --- training from an iterable of documents ----------------------------------------------------------


@pytest.mark.parametrize("name", ["gpt2", "o200k", "custom"])
def test_training_from_documents_equals_training_on_them_as_a_file(tmp_path, name):
    text = (fixture_text("tinystories_sample.txt") + fixture_text("german.txt")).replace(EOT, "\n")
    documents = [text[i : i + 700] for i in range(0, len(text), 700)]  # cut anywhere, even mid-word
    path = tmp_path / "corpus.txt"
    path.write_text(EOT.join(documents), encoding="utf-8")
    pattern = PATTERNS[name]
    expected = train_bpe(path, 600, [EOT], pattern=pattern, num_workers=2)
    assert train_bpe_from_iterator(iter(documents), 600, [EOT], pattern=pattern) == expected
    # Documents are hard boundaries even without a special token between them (one id fewer: no
    # special token, so one vocab slot fewer for the same merges).
    assert train_bpe_from_iterator((d for d in documents), 599, [], pattern=pattern)[1] == expected[1]


@pytest.mark.parametrize(
    ("documents", "needle"),
    [
        (["ok", b"bytes"], "document #1 is bytes, not str"),
        (["ok", "x", "a\ud800"], "document #2: "),
        ([], "no text to train on"),
    ],
)
def test_bad_documents_are_one_line_errors_naming_the_document(documents, needle):
    for pattern in ("gpt2", CUSTOM):
        with pytest.raises(BpeError, match=needle):
            train_bpe_from_iterator(documents, 300, pattern=pattern)


def test_patterns_reach_worker_processes_as_themselves():
    import pickle

    for pattern in PATTERNS.values():
        again = pickle.loads(pickle.dumps(pattern))
        assert again == pattern and again.compiled.pattern == pattern.regex
        assert (again is pattern) == (pattern.name != "custom")  # a preset stays the preset object
