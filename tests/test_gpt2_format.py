"""GPT-2 vocab.json / merges.txt: the byte table, loading GPT-2's own files, round trips, bad files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import require_gpt2_files
from hypothesis import given
from hypothesis import strategies as st

from bpe_impls.base.errors import TokenizerFileError
from bpe_impls.base.patterns import GPT2
from bpe_impls.encoding.formats import gpt2 as gpt2_format
from bpe_impls.encoding.formats.gpt2 import (
    bytes_to_unicode,
    load_special_tokens,
    load_tokenizer_files,
    save_tokenizer_files,
    str_to_token,
    token_to_str,
)


@pytest.fixture(scope="module")
def gpt2_loaded() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    return load_tokenizer_files(*require_gpt2_files())


# --- the byte table ---------------------------------------------------------------------------


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
    with pytest.raises(TokenizerFileError, match=rf"^here: token .* \(U\+{ord(char):04X}\) outside the GPT-2 byte table$"):
        str_to_token("Ġa" + char, "here")


# --- GPT-2's own files ------------------------------------------------------------------------


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


# --- small files ------------------------------------------------------------------------------

BYTES = {b: bytes([b]) for b in range(256)}


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


# --- malformed files: each a TokenizerFileError naming file and line/value ---------------------


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
        ("#version: 0.2\nĠt he\nĠ t\nh e\n", r"merges\.txt line 2: left token 'Ġt' is not a single byte and no earlier"),
        ("#version: 0.2\nĠ t\nĠt he\nh e\n", r"merges\.txt line 3: right token 'he' is not a single byte and no earlier"),
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


# --- saving: refused before anything is written ------------------------------------------------


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
    with pytest.raises(TokenizerFileError, match=r"merges\.txt: no merge makes 1 multi-byte token of .*vocab\.json "
                                                 r"\(first: 'abc', id 257\)"):
        Tokenizer.load(tmp_path)
