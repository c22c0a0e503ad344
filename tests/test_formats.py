"""Export and import: HuggingFace tokenizer.json and tiktoken files, checked against the real libraries.

Every tokenizer here is trained by the project on real text (corpus.en) with each preset pattern and
a custom one, plus GPT-2's own vocab; the files we write are loaded by `tokenizers`, `transformers`
(if installed) and `tiktoken`, which must give our ids, special tokens included. Then: our loaders
give back the same tokenizer, a re-save is byte-identical, what a format cannot express is one
clear error, and the `bpe` command trains, exports, encodes and decodes in every format.

GPT-2's vocab.json / merges.txt format on its own (the second part): the byte table, loading GPT-2's
own files, round trips, bad files.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from conftest import fixture_text, load_gpt2, require_gpt2_files, require_text
from hypothesis import given
from hypothesis import strategies as st
from test_cli import assert_one_line_error, run

from bpe_impls import ConfigError, Tokenizer, TokenizerFileError, cli, train_bpe
from bpe_impls.base.patterns import CL100K_PATTERN, GPT2
from bpe_impls.encoding.formats import FORMATS, detect
from bpe_impls.encoding.formats import gpt2 as gpt2_format
from bpe_impls.encoding.formats.gpt2 import (
    bytes_to_unicode,
    load_special_tokens,
    load_tokenizer_files,
    save_tokenizer_files,
    str_to_token,
    token_to_str,
)

tiktoken = pytest.importorskip("tiktoken")
hf_tokenizers = pytest.importorskip("tokenizers")
from tiktoken.load import load_tiktoken_bpe  # noqa: E402

EOT = "<|endoftext|>"
PAD = "<|pad|>"
# Covers every character (as the presets do): HF's Split keeps text a pattern skips, we drop it.
CUSTOM = r"\s?\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+"
PATTERNS = ["gpt2", "cl100k", "o200k", CUSTOM]
PATTERN_IDS = ["gpt2", "cl100k", "o200k", "custom"]
# Long digit runs (cl100k's and o200k's \p{N}{1,3}), contractions, CRLF, trailing spaces, emoji.
EXTRA = f"In 1234567 years, they'll say 'WE'VE won'.\r\n  x  \n{PAD}Ünïcödé 😀 日本語 ١٢٣٤٥{EOT}{EOT}end   "


@pytest.fixture(scope="module")
def text() -> str:
    parts = [fixture_text(name) for name in ("tinystories_sample.txt", "corpus.en", "german.txt", "address.txt")]
    return EOT.join(parts) + EXTRA


@functools.cache
def train(pattern: str) -> Tokenizer:
    vocab, merges = train_bpe(require_text("corpus.en"), 1000, [EOT, PAD], pattern=pattern, num_workers=1)
    return Tokenizer(vocab, merges, [EOT, PAD], pattern=pattern)


@functools.cache
def gpt2_vocab() -> Tokenizer:
    return load_gpt2([EOT])


@pytest.fixture(params=PATTERNS, ids=PATTERN_IDS)
def trained(request) -> Tokenizer:
    """A vocab trained by the project on corpus.en with each pattern, special tokens <|endoftext|> and <|pad|>."""
    return train(request.param)


@pytest.fixture
def gpt2() -> Tokenizer:
    return gpt2_vocab()


@pytest.fixture(params=[*PATTERNS, "gpt2-vocab"], ids=[*PATTERN_IDS, "gpt2-vocab"])
def tokenizer(request) -> Tokenizer:
    """Each trained tokenizer, and GPT-2's own vocab."""
    return gpt2_vocab() if request.param == "gpt2-vocab" else train(request.param)


@pytest.fixture(autouse=True)
def no_tiktoken_cache(monkeypatch):
    # tiktoken caches even local files by path; an empty cache dir turns that off.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")


def tiktoken_encoding(files: tuple[Path, ...]) -> tiktoken.Encoding:
    ranks_path, sidecar = files
    return tiktoken.Encoding(mergeable_ranks=load_tiktoken_bpe(str(ranks_path)), **json.loads(sidecar.read_text()))


def assigned_characters_text() -> str:
    """Assigned code points (Python's unicodedata) in a few contexts: where the Unicode tables of
    tiktoken's and HF's regex engines may differ from the `regex` module's are the code points
    unassigned to it (Cn), left out as in test_oracle_tiktoken.py."""
    chars = [
        chr(cp)
        for cp in range(0x110000)
        if unicodedata.category(chr(cp)) not in ("Cs", "Cn") and (cp < 0x3400 or cp % 97 == 0)
    ]
    return "".join(f"a{c} {c}1{c}{c}  {c}'s\n{c}12345 {c}{EOT}" for c in chars)


# --- the real libraries load our files and give our ids ----------------------------------------


def test_hf_tokenizers_gives_our_ids(tokenizer, text, tmp_path):
    (path,) = tokenizer.save(tmp_path, "hf")
    theirs = hf_tokenizers.Tokenizer.from_file(str(path))
    ours = tokenizer.encode(text)
    assert theirs.encode(text).ids == ours
    assert ours.count(tokenizer.special_token_ids[EOT]) == text.count(EOT) > 3
    assert theirs.decode(ours, skip_special_tokens=False) == text == tokenizer.decode(ours)


def test_tiktoken_gives_our_ids(tokenizer, text, tmp_path):
    enc = tiktoken_encoding(tokenizer.save(tmp_path, "tiktoken"))
    ours = tokenizer.encode(text)
    assert enc.encode(text, allowed_special="all") == ours
    assert enc.encode_ordinary(text) == tokenizer.encode_ordinary(text)
    assert enc.decode(ours) == text and enc.n_vocab == tokenizer.n_vocab


def test_transformers_gives_our_ids(tokenizer, text, tmp_path):
    transformers = pytest.importorskip(
        "transformers", reason="transformers is not installed (it is in the test extra: pip install -e .[test])"
    )
    (path,) = tokenizer.save(tmp_path, "hf")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path))  # reads the file: no download
    ours = tokenizer.encode(text)
    assert fast(text)["input_ids"] == ours
    assert fast.decode(ours) == text


def test_libraries_agree_on_every_assigned_character(trained, tmp_path):
    text = assigned_characters_text()
    ours = trained.encode(text)
    (hf_path,) = trained.save(tmp_path / "hf", "hf")
    assert hf_tokenizers.Tokenizer.from_file(str(hf_path)).encode(text).ids == ours
    assert tiktoken_encoding(trained.save(tmp_path / "tk", "tiktoken")).encode(text, allowed_special="all") == ours


def test_cl100k_is_written_in_a_form_oniguruma_reads_the_same(tmp_path):
    # Oniguruma (HF) reads tiktoken's `\p{N}{1,3}+` as a repeated interval: one piece for any digit run.
    split = hf_tokenizers.pre_tokenizers.Split
    raw = split(hf_tokenizers.Regex(CL100K_PATTERN), "isolated").pre_tokenize_str("in 12345678")
    assert [piece for piece, _ in raw] == ["in", " ", "12345678"]
    vocab = {b: bytes([b]) for b in range(256)}
    (path,) = Tokenizer(vocab, [], pattern="cl100k").save(tmp_path, "hf")
    written = json.loads(path.read_text())["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    ours = split(hf_tokenizers.Regex(written), "isolated").pre_tokenize_str("in 12345678")
    assert [piece for piece, _ in ours] == ["in", " ", "123", "456", "78"]
    assert Tokenizer.load(path).pattern.name == "cl100k"


def test_gpt2s_own_hf_shape_loads_as_the_gpt2_preset(gpt2, text, tmp_path):
    """GPT-2's tokenizer.json on the Hub splits with ByteLevel's own regex (use_regex true): it
    loads as the gpt2 preset, and HF with that shape gives our ids."""
    (path,) = gpt2.save(tmp_path, "hf")
    document = json.loads(path.read_text())
    document["pre_tokenizer"] = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": True,
        "use_regex": True,
    }
    document["post_processor"] = {
        "type": "ByteLevel",
        "add_prefix_space": True,
        "trim_offsets": False,
        "use_regex": True,
    }
    path.write_text(json.dumps(document))
    loaded = Tokenizer.load(path)
    assert loaded.pattern.name == "gpt2" and loaded.merges == gpt2.merges
    assert hf_tokenizers.Tokenizer.from_file(str(path)).encode(text).ids == gpt2.encode(text) == loaded.encode(text)


# --- our loaders: the same tokenizer back, and a byte-identical re-save -------------------------


def files_of(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


@pytest.mark.parametrize("format", list(FORMATS))
def test_save_load_save_is_byte_identical(tokenizer, format, tmp_path):
    tokenizer.save(tmp_path / "a", format)
    loaded = Tokenizer.load(tmp_path / "a")
    assert detect(tmp_path / "a")[0] == format
    assert dict(loaded.vocab) == dict(tokenizer.vocab) and loaded.merges == tokenizer.merges
    assert loaded.special_tokens == tokenizer.special_tokens and loaded.special_token_ids == tokenizer.special_token_ids
    assert loaded.pattern == tokenizer.pattern
    loaded.save(tmp_path / "b", format)
    assert files_of(tmp_path / "a") == files_of(tmp_path / "b")


def test_from_hf_and_from_tiktoken_take_files_or_directories(trained, tmp_path):
    (hf_path,) = trained.save(tmp_path / "hf" / "my.json", "hf")
    ranks, sidecar = trained.save(tmp_path / "tk" / "my.tiktoken", "tiktoken")
    assert sidecar.name == "my.tiktoken.json" and json.loads(sidecar.read_text())["name"] == "my"
    for loaded in (
        Tokenizer.load(hf_path),
        Tokenizer.load(ranks, "tiktoken"),
        Tokenizer.load(tmp_path / "tk", "tiktoken"),
    ):
        assert loaded.merges == trained.merges and loaded.special_token_ids == trained.special_token_ids
        assert loaded.pattern == trained.pattern


def test_from_tiktoken_without_a_sidecar_takes_the_arguments(trained, tmp_path):
    ranks, sidecar = trained.save(tmp_path, "tiktoken")
    sidecar.unlink()
    loaded = Tokenizer.load(ranks, "tiktoken", pattern=trained.pattern.regex, special_tokens={EOT: 0, PAD: 1})
    assert dict(loaded.vocab) == dict(trained.vocab) and loaded.merges == trained.merges
    assert loaded.pattern == trained.pattern
    appended = Tokenizer.load(ranks, "tiktoken", special_tokens=["<|x|>"])  # gpt2 pattern, id after the last rank
    assert appended.pattern.name == "gpt2" and appended.special_token_ids == {"<|x|>": max(trained.vocab) + 1}


def test_sidecar_and_arguments_together_are_refused(trained, tmp_path):
    ranks, _ = trained.save(tmp_path, "tiktoken")
    with pytest.raises(ConfigError, match=r"tiktoken.json gives the pattern"):
        Tokenizer.load(ranks, "tiktoken", pattern="o200k")


def test_merges_are_rebuilt_from_tiktokens_own_ranks(tmp_path):
    """A rank file tiktoken made, not we: GPT-2's ranks as tiktoken's gpt2 encoding holds them."""
    tok = load_gpt2([EOT])
    ranks = {token: token_id for token_id, token in tok.vocab.items() if token_id != 50256}
    path = tmp_path / "r50k.tiktoken"
    path.write_text(
        "".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in sorted(ranks.items(), key=lambda x: x[1]))
    )
    assert load_tiktoken_bpe(str(path)) == ranks
    loaded = Tokenizer.load(path, "tiktoken", pattern="gpt2", special_tokens={EOT: 50256})
    assert loaded.merges == tok.merges


# --- what a format cannot express: one line naming the token, no files -------------------------


BYTES = {b: bytes([b]) for b in range(256)}


def with_merges(merges, vocab=None):
    vocab = dict(BYTES if vocab is None else vocab)
    for left, right in merges:
        vocab[max(vocab) + 1] = left + right
    return vocab


CANNOT_TIKTOKEN = {
    "two merges make the same bytes": (
        {**with_merges([(b"a", b"b"), (b"b", b"c"), (b"ab", b"c")])},
        [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c"), (b"a", b"bc")],
        [],
        "merges #2 and #3 both make b'abc'",
    ),
    "ids not dense": ({**BYTES, 300: b"ab"}, [(b"a", b"b")], [], "id 256 is missing"),
    "special id is a rank": (BYTES, [], ["a"], "special token 'a' has id 97"),
    "merge ids out of order": (
        {**BYTES, 256: b"cd", 257: b"ab"},
        [(b"a", b"b"), (b"c", b"d")],
        [],
        "merge #1 makes b'cd' with id 256",
    ),
    "token made by no merge": (
        {**BYTES, 256: b"ab", 257: b"xyz"},
        [(b"a", b"b")],
        [],
        "b'xyz' (id 257) is made by no merge",
    ),
    # b+c, then a+b, then ab+c: BPE by merges leaves "abc" as a + bc, tiktoken merges a + bc (= "abc").
    "tiktoken would build a token another way": (
        with_merges([(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")]),
        [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")],
        [],
        "token b'abc' (id 258) is merge #2 b'ab' + b'c', but tiktoken's ranks would build it as b'a' + b'bc'",
    ),
}


@pytest.mark.parametrize("case", list(CANNOT_TIKTOKEN))
def test_what_tiktoken_cannot_express_is_one_error_naming_the_token(case, tmp_path):
    vocab, merges, specials, needle = CANNOT_TIKTOKEN[case]
    tok = Tokenizer(vocab, merges, specials)
    with pytest.raises(TokenizerFileError) as info:
        tok.save(tmp_path / "out", "tiktoken")
    message = str(info.value)
    assert "\n" not in message and message.startswith("cannot save tokenizer.tiktoken: ") and needle in message, message
    assert not (tmp_path / "out").exists()


def test_the_shortcut_counterexample_really_differs_in_tiktoken():
    """Why the last case above is refused: tiktoken with those ranks gives other ids than our BPE."""
    vocab = with_merges([(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")])
    enc = tiktoken.Encoding(
        name="x", pat_str=r"\S+|\s+", mergeable_ranks={t: i for i, t in vocab.items()}, special_tokens={}
    )
    ours = Tokenizer(vocab, [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")], pattern=r"\S+|\s+")
    assert enc.encode("xabc") != ours.encode("xabc")


@pytest.mark.parametrize(
    "lines, needle",
    [
        (["YQ== 97", "YmM= 256"], "no token for byte 0x00"),
        (
            [*(f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)), "YWJj 256"],
            "token b'abc' (rank 256) is not the merge of two lower-ranked tokens",
        ),
        (["!!! 0"], "'!!!' is not base64"),
        (["YQ== 1", "YQ== 2"], "appears twice"),
        (["YQ== 1", "Yg== 1"], "rank 1 is given to both"),
        (["YQ== x"], "rank 'x' is not"),
    ],
)
def test_bad_tiktoken_files_are_one_line_errors(lines, needle, tmp_path):
    path = tmp_path / "bad.tiktoken"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TokenizerFileError) as info:
        Tokenizer.load(path, "tiktoken")
    assert "\n" not in str(info.value) and "bad.tiktoken" in str(info.value) and needle in str(info.value), info.value


def hf_document(tmp_path: Path) -> dict:
    vocab = with_merges([(b"a", b"b")])
    (path,) = Tokenizer(vocab, [(b"a", b"b")], [EOT]).save(tmp_path / "base", "hf")
    return json.loads(path.read_text())


HF_CHANGES = {
    "another model": (lambda d: d["model"].update(type="WordPiece"), "model type is 'WordPiece'"),
    "a normalizer": (lambda d: d.update(normalizer={"type": "NFC"}), "normalizer"),
    "another pre-tokenizer": (lambda d: d.update(pre_tokenizer={"type": "Whitespace"}), "pre_tokenizer 'Whitespace'"),
    "byte fallback": (lambda d: d["model"].update(byte_fallback=True), "model byte_fallback is True"),
    "ignore_merges": (lambda d: d["model"].update(ignore_merges=True), "model ignore_merges is True"),
    "a non-special added token": (lambda d: d["added_tokens"][0].update(special=False), "is not special"),
    "a stripping added token": (lambda d: d["added_tokens"][0].update(lstrip=True), "lstrip true"),
    "an added token with another id": (
        lambda d: d["added_tokens"][0].update(id=5),
        "has id 5, but the model vocab gives it 257",
    ),
    "a post-processor that adds tokens": (
        lambda d: d.update(post_processor={"type": "TemplateProcessing"}),
        "post_processor",
    ),
    "another decoder": (lambda d: d.update(decoder={"type": "WordPiece"}), "decoder"),
    "a possessive interval": (
        lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(pattern={"Regex": r"\p{N}{1,3}+|\S+|\s+"}),
        "repeated interval",
    ),
    "a string split": (lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(pattern={"String": " "}), "not a Regex"),
    "ByteLevel with its regex after Split": (
        lambda d: d["pre_tokenizer"]["pretokenizers"][1].update(use_regex=True),
        "expected ByteLevel with use_regex",
    ),
}


@pytest.mark.parametrize("case", list(HF_CHANGES))
def test_hf_files_we_cannot_reproduce_are_one_line_errors(case, tmp_path):
    document = hf_document(tmp_path)
    change, needle = HF_CHANGES[case]
    change(document)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document))
    with pytest.raises(TokenizerFileError) as info:
        Tokenizer.load(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: ") and needle in message, message


def test_hf_export_refuses_a_custom_possessive_interval(tmp_path):
    tok = Tokenizer(BYTES, [], pattern=r"\p{N}{1,3}+|\S+|\s+")
    with pytest.raises(TokenizerFileError, match=r"possessive interval '\{1,3\}\+'"):
        tok.save(tmp_path / "out", "hf")
    assert not (tmp_path / "out").exists()


def test_hf_export_refuses_two_ids_with_one_token(tmp_path):
    vocab = {**BYTES, 256: b"ab", 257: b"ab"}
    with pytest.raises(TokenizerFileError, match="token 'ab' would have two ids in the model vocab"):
        Tokenizer(vocab, [(b"a", b"b")]).save(tmp_path, "hf")


def test_unknown_format_is_a_config_error(trained, tmp_path):
    with pytest.raises(ConfigError, match="unknown format 'sentencepiece'"):
        trained.save(tmp_path, "sentencepiece")


# --- the command line --------------------------------------------------------------------------


def bpe(*args: str) -> int:
    return cli.main([*args, "--quiet"])


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_bytes((fixture_text("tinystories_sample.txt") + EXTRA).encode("utf-8"))
    return path


@pytest.mark.parametrize(
    "format, expected", [("gpt2", "vocab.json"), ("hf", "tokenizer.json"), ("tiktoken", "tokenizer.tiktoken")]
)
def test_train_in_each_format_then_encode_and_decode(small_corpus, format, expected, tmp_path):
    out = tmp_path / "tok"
    assert (
        bpe(
            "train",
            str(small_corpus),
            "--vocab-size",
            "400",
            "--special-token",
            EOT,
            "--pattern",
            "o200k",
            "--format",
            format,
            "--out",
            str(out),
        )
        == 0
    )
    assert (out / expected).is_file()
    tok = Tokenizer.load(out)
    assert tok.pattern.name == "o200k" and tok.special_tokens == (EOT,)
    ids, back = tmp_path / "ids.npy", tmp_path / "back.txt"
    assert bpe("encode", "--tokenizer", str(out), str(small_corpus), "--out", str(ids)) == 0
    text = small_corpus.read_bytes().decode("utf-8")  # read_text would turn its \r\n into \n
    assert np.load(ids).tolist() == tok.encode(text)
    assert bpe("decode", "--tokenizer", str(out), str(ids), "--out", str(back)) == 0
    assert back.read_bytes().decode("utf-8") == text


def test_export_between_every_pair_of_formats(small_corpus, tmp_path):
    source = tmp_path / "gpt2"
    assert (
        bpe(
            "train",
            str(small_corpus),
            "--vocab-size",
            "400",
            "--special-token",
            EOT,
            "--pattern",
            "cl100k",
            "--out",
            str(source),
        )
        == 0
    )
    original = Tokenizer.load(source)
    paths = {"gpt2": source}
    for src, dst, out in [("gpt2", "hf", "x.json"), ("hf", "tiktoken", "x.tiktoken"), ("tiktoken", "gpt2", "g2")]:
        assert bpe("export", "--tokenizer", str(paths[src]), "--format", dst, "--out", str(tmp_path / out)) == 0
        paths[dst] = tmp_path / out
        again = Tokenizer.load(paths[dst])
        assert again.merges == original.merges and again.special_token_ids == original.special_token_ids
        assert again.pattern == original.pattern
    assert files_of(source) == files_of(tmp_path / "g2")


def test_cli_errors_are_one_line_with_no_output(small_corpus, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run("encode", "--tokenizer", str(empty), str(small_corpus), "--out", str(tmp_path / "ids.npy"))
    assert_one_line_error(result, "no tokenizer here")
    assert not (tmp_path / "ids.npy").exists()

    both = tmp_path / "both"
    Tokenizer(BYTES, []).save(both)
    Tokenizer(BYTES, []).save(both, "hf")
    assert_one_line_error(run("decode", "--tokenizer", str(both), str(tmp_path / "x.npy")), "more than one tokenizer")

    # b+c, a+b, ab+c: no .tiktoken file can hold it
    bad = tmp_path / "bad"
    Tokenizer(
        with_merges([(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")]), [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")]
    ).save(bad)
    out = tmp_path / "out"
    result = run("export", "--tokenizer", str(bad), "--format", "tiktoken", "--out", str(out))
    assert_one_line_error(result, "b'abc'", "tiktoken's ranks would build it as b'a' + b'bc'")
    assert not out.exists()

    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert_one_line_error(
        run("export", "--tokenizer", str(broken), "--format", "gpt2", "--out", str(out)),
        "broken.json",
        "not valid JSON",
    )
    assert not out.exists()


# ---- GPT-2's vocab.json / merges.txt ----
@pytest.fixture(scope="module")
def gpt2_loaded() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    return load_tokenizer_files(*require_gpt2_files())


def test_byte_table_is_a_bijection_onto_printable_characters():
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256
    assert not any(char.isspace() or not char.isprintable() for char in table.values())
    # Printable ASCII and most of Latin-1 stand for themselves ...
    assert all(table[b] == chr(b) for b in b"azAZ09!~")
    assert table[0xE9] == "é"
    # ... the rest are shifted to U+0100 onwards, in byte order: GPT-2's familiar Ġ (space) and Ċ (newline).
    assert table[0] == "\u0100"
    assert table[ord(" ")] == "Ġ"
    assert table[ord("\n")] == "Ċ"
    assert table[0xAD] == "\u0143"  # the last shifted byte (soft hyphen) gets the 68th code point


@given(st.binary(min_size=1, max_size=50))
def test_token_string_round_trip(token: bytes):
    text = token_to_str(token)
    assert len(text) == len(token)
    assert str_to_token(text, "here") == token


@pytest.mark.parametrize("char", ["€", " ", "\xa0", "\x00", "\u0144"])
def test_char_outside_the_table_is_rejected(char: str):
    with pytest.raises(
        TokenizerFileError, match=rf"^here: token .* \(U\+{ord(char):04X}\) outside the GPT-2 byte table$"
    ):
        str_to_token("Ġa" + char, "here")


def test_gpt2_files_load_with_known_entries(gpt2_loaded):
    vocab, merges = gpt2_loaded
    assert len(vocab) == 50257 and sorted(vocab) == list(range(50257))
    assert len(merges) == 50000
    assert vocab[50256] == b"<|endoftext|>"
    # tiktoken's documented example: "hello world" -> [31373, 995]
    assert vocab[31373] == b"hello" and vocab[995] == b" world"
    # The first lines of vocab.bpe are "Ġ t", "Ġ a", "h e".
    assert merges[:3] == [(b" ", b"t"), (b" ", b"a"), (b"h", b"e")]
    # GPT-2 numbers merged tokens in merge order after the 256 bytes.
    index = {token: token_id for token_id, token in vocab.items()}
    assert all(index[left + right] == 256 + rank for rank, (left, right) in enumerate(merges))


def test_gpt2_vocab_matches_tiktokens_own_loader(gpt2_loaded, monkeypatch):
    """An independent decoding of the same files (tiktoken's data-gym loader) gives the same bytes."""
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    encoder_json, vocab_bpe = require_gpt2_files()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # read the local files directly, write no cache
    ranks = data_gym_to_mergeable_bpe_ranks(str(vocab_bpe), str(encoder_json))
    vocab, _ = gpt2_loaded
    assert {token: token_id for token_id, token in vocab.items() if token_id != 50256} == ranks


@pytest.mark.slow
def test_gpt2_files_round_trip_through_save(gpt2_loaded, tmp_path):
    vocab, merges = gpt2_loaded
    paths = save_tokenizer_files(tmp_path, vocab, merges, ["<|endoftext|>"])
    assert [p.name for p in paths] == ["vocab.json", "merges.txt", "special_tokens.json", "split_pattern.json"]
    assert load_tokenizer_files(paths[0], paths[1]) == (vocab, merges)
    assert load_special_tokens(paths[2]) == ["<|endoftext|>"]
    assert gpt2_format.load_split_pattern(paths[3]) is GPT2
    # The saved vocab.json is the same mapping as GPT-2's encoder.json.
    with open(require_gpt2_files()[0], encoding="utf-8") as original:
        assert json.loads(paths[0].read_text(encoding="utf-8")) == json.load(original)


def _small() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    vocab = dict(BYTES)
    merges = [(b" ", b"t"), (b"h", b"e"), (b" t", b"he"), (b"\n", b"\xff")]
    for left, right in merges:
        vocab[len(vocab)] = left + right
    return vocab, merges


def test_small_round_trip_and_file_layout(tmp_path):
    vocab, merges = _small()
    save_tokenizer_files(tmp_path, vocab, merges, ["<|endoftext|>", "日本"])
    lines = (tmp_path / "merges.txt").read_text(encoding="utf-8").splitlines()
    assert lines == ["#version: 0.2", "Ġ t", "h e", "Ġt he", "Ċ ÿ"]
    on_disk = json.loads((tmp_path / "vocab.json").read_text(encoding="utf-8"))
    assert on_disk["Ġthe"] == 258 and on_disk["Ċÿ"] == 259 and on_disk["Ā"] == 0
    assert json.loads((tmp_path / "special_tokens.json").read_text(encoding="utf-8")) == ["<|endoftext|>", "日本"]
    assert load_tokenizer_files(tmp_path / "vocab.json", tmp_path / "merges.txt") == (vocab, merges)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_merges_file_with_crlf_and_no_header_loads(tmp_path):
    vocab, merges = _small()
    save_tokenizer_files(tmp_path, vocab, merges)
    (tmp_path / "merges.txt").write_text("Ġ t\r\nh e\r\nĠt he\r\nĊ ÿ\r\n", encoding="utf-8")
    assert load_tokenizer_files(tmp_path / "vocab.json", tmp_path / "merges.txt") == (vocab, merges)


def _write(tmp_path: Path, vocab_text: str, merges_text: str = "#version: 0.2\n") -> tuple[Path, Path]:
    vocab_path, merges_path = tmp_path / "vocab.json", tmp_path / "merges.txt"
    vocab_path.write_text(vocab_text, encoding="utf-8")
    merges_path.write_text(merges_text, encoding="utf-8")
    return vocab_path, merges_path


def _small_vocab_json(extra: dict[str, object] | None = None) -> str:
    entries: dict[str, object] = {token_to_str(bytes([b])): b for b in range(256)}
    entries.update(extra or {})
    return json.dumps(entries, indent=1)


@pytest.mark.parametrize(
    ("vocab_text", "message"),
    [
        ('{"a": 1,\n "b": 2,,\n}', r"vocab\.json: not valid JSON at line 2 column"),
        ('["a", "b"]', r"vocab\.json: expected a JSON object .* got list"),
        ('{"a": 1, "b": "2"}', r"vocab\.json: token 'b' has id '2', not an integer"),
        ('{"a": 1, "b": 2.5}', r"vocab\.json: token 'b' has id 2\.5, not an integer"),
        ('{"a": 1, "b": true}', r"vocab\.json: token 'b' has id True, not an integer"),
        ('{"a": 1, "b": -3}', r"vocab\.json: token 'b' has negative id -3"),
        ('{"a": 7, "b": 7}', r"vocab\.json: id 7 is given to both 'a' and 'b'"),
        ('{"a": 1, "a": 2}', r"vocab\.json: token 'a' appears twice \(ids 1 and 2\)"),
        ('{"a": 1, "x€": 2}', r"vocab\.json \(id 2\): token 'x€' has character '€' \(U\+20AC\) outside"),
        ('{"a": 1, "": 2}', r"vocab\.json: empty token string \(id 2\)"),
    ],
)
def test_malformed_vocab_json(tmp_path, vocab_text: str, message: str):
    vocab_path, merges_path = _write(tmp_path, vocab_text)
    with pytest.raises(TokenizerFileError, match=message) as info:
        load_tokenizer_files(vocab_path, merges_path)
    assert str(vocab_path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("merges_text", "message"),
    [
        ("#version: 0.2\nĠ t\nh e x\n", r"merges\.txt line 3: expected two tokens separated by one space, got 'h e x'"),
        ("#version: 0.2\nĠ t\nhe\n", r"merges\.txt line 3: expected two tokens .* got 'he'"),
        ("#version: 0.2\nĠ  t\n", r"merges\.txt line 2: expected two tokens .* got 'Ġ  t'"),
        ("#version: 0.2\nĠ t\nĠt qq\n", r"merges\.txt line 3: right token 'qq' is not in the vocab"),
        ("#version: 0.2\nĠ t\nh e\nĠt h\n", r"merges\.txt line 4: merged token 'Ġth' is not in the vocab"),
        # "he" is made on line 3, so the merge on line 2 uses it before it exists.
        (
            "#version: 0.2\nĠt he\nĠ t\nh e\n",
            r"merges\.txt line 2: left token 'Ġt' is not a single byte and no earlier",
        ),
        (
            "#version: 0.2\nĠ t\nĠt he\nh e\n",
            r"merges\.txt line 3: right token 'he' is not a single byte and no earlier",
        ),
        ("#version: 0.2\nĠ t\nh €\n", r"merges\.txt line 3: token '€' has character '€' \(U\+20AC\) outside"),
    ],
)
def test_malformed_merges_txt(tmp_path, merges_text: str, message: str):
    vocab_text = _small_vocab_json({"Ġt": 256, "he": 257, "Ġthe": 258, "zz": 259})
    vocab_path, merges_path = _write(tmp_path, vocab_text, merges_text)
    with pytest.raises(TokenizerFileError, match=message) as info:
        load_tokenizer_files(vocab_path, merges_path)
    assert str(merges_path) in str(info.value) and "\n" not in str(info.value)


def test_missing_and_non_utf8_files(tmp_path):
    with pytest.raises(TokenizerFileError, match=r"nope\.json: file not found"):
        load_tokenizer_files(tmp_path / "nope.json", tmp_path / "merges.txt")
    vocab_path, merges_path = _write(tmp_path, _small_vocab_json())
    merges_path.write_bytes(b"#version: 0.2\n\xff\xfe\n")
    with pytest.raises(TokenizerFileError, match=r"merges\.txt: not valid UTF-8 at byte 14"):
        load_tokenizer_files(vocab_path, merges_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1}', r"special_tokens\.json: expected a JSON list of strings, got dict"),
        ('["<|a|>", 3]', r"special_tokens\.json: entry 1 is 3, not a non-empty string"),
        ('["<|a|>", ""]', r"special_tokens\.json: entry 1 is '', not a non-empty string"),
        ('["<|a|>", "<|a|>"]', r"special_tokens\.json: special token '<\|a\|>' is listed twice"),
        ('["<|a|>"', r"special_tokens\.json: not valid JSON at line 1"),
    ],
)
def test_malformed_special_tokens_json(tmp_path, text: str, message: str):
    path = tmp_path / "special_tokens.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TokenizerFileError, match=message):
        load_special_tokens(path)


def test_save_refuses_two_ids_with_the_same_bytes(tmp_path):
    vocab, merges = _small()
    vocab[len(vocab)] = b"a"  # e.g. a single-byte special token next to the byte "a"
    target = tmp_path / "out"
    with pytest.raises(TokenizerFileError, match=r"ids 97 and 260 both have bytes b'a'"):
        save_tokenizer_files(target, vocab, merges, ["a"])
    assert not target.exists()


def test_save_refuses_merges_that_would_not_load_back(tmp_path):
    vocab, merges = _small()
    with pytest.raises(TokenizerFileError, match=r"merge #1: right token 'he' is not a single byte and no earlier"):
        save_tokenizer_files(tmp_path / "out", vocab, [merges[0], merges[2], merges[1]])
    with pytest.raises(TokenizerFileError, match=r"merge #0: merged token 'xy' is not in the vocab"):
        save_tokenizer_files(tmp_path / "out", vocab, [(b"x", b"y")])
    assert not (tmp_path / "out").exists()


def test_save_into_unwritable_location_leaves_nothing(tmp_path):
    vocab, merges = _small()
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.raises(TokenizerFileError, match=r"cannot create directory .*a_file/sub"):
        save_tokenizer_files(blocker / "sub", vocab, merges)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


def test_failing_write_keeps_old_files_and_leaves_no_temp_files(tmp_path, monkeypatch):
    vocab, merges = _small()
    save_tokenizer_files(tmp_path, vocab, merges, ["<|a|>"])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    calls = []
    real_fsync = os.fsync

    def failing_fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 3:  # the third temp file: two are already written
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(gpt2_format.os, "fsync", failing_fsync)
    bigger = dict(vocab)
    bigger[len(bigger)] = b"zz"
    with pytest.raises(TokenizerFileError, match=r"cannot write .*: No space left on device"):
        save_tokenizer_files(tmp_path, bigger, merges + [(b"z", b"z")], ["<|b|>"])
    assert len(calls) == 3
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_merges_file_cut_at_a_line_boundary_is_refused(tmp_path):
    from bpe_impls import Tokenizer

    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc", 258: b"<s>"}
    Tokenizer(vocab, [(b"a", b"b"), (b"ab", b"c")], ["<s>"]).save(tmp_path)
    assert Tokenizer.load(tmp_path).encode("abc<s>") == [257, 258]
    merges = tmp_path / "merges.txt"
    lines = merges.read_text(encoding="utf-8").splitlines(keepends=True)
    merges.write_text("".join(lines[:-1]), encoding="utf-8")  # the last merge lost, the rest intact
    with pytest.raises(
        TokenizerFileError,
        match=r"merges\.txt: no merge makes 1 multi-byte token of .*vocab\.json "
        r"\(first: 'abc', id 257\)",
    ):
        Tokenizer.load(tmp_path)
