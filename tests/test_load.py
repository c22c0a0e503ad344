"""Loading never guesses (encoding/formats/load.py, base/cache.py): special-token ids asked for are
honoured or refused, the load cache reads only regular files and keys on the compiled core, and
an HF file that HF itself refuses is refused.

What the loaders read and refuse in general is in test_formats.py, test_format_fidelity.py and
test_load_cache.py; this file holds the cases a hostile audit found.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bpe_impls import ConfigError, Tokenizer, TokenizerFileError
from bpe_impls.base import compiled
from bpe_impls.encoding.formats import table_cache

EOT = "<|endoftext|>"
BYTES = {i: bytes([i]) for i in range(256)}
# A vocab laid out as the trainers lay it out (specials first), merges after the bytes.
TRAINED = {0: EOT.encode()} | {i + 1: bytes([i]) for i in range(256)} | {257: b"he", 258: b"ll", 259: b"hell"}
MERGES = [(b"h", b"e"), (b"l", b"l"), (b"he", b"ll")]


@pytest.fixture()
def saved(tmp_path: Path) -> Path:
    Tokenizer(TRAINED, MERGES, [EOT]).save(tmp_path / "tok")
    return tmp_path / "tok"


@pytest.mark.parametrize("cache", [True, False])
def test_a_special_id_asked_for_is_honoured_or_refused(saved, tmp_path, monkeypatch, cache):
    monkeypatch.setenv("BPE_CACHE_DIR", str(tmp_path / "cache"))
    # The vocab holds <|endoftext|> at id 0: asking for 0 is what it says; 259 is "hell"'s id.
    assert Tokenizer.load(saved, special_tokens={EOT: 0}, cache=cache).special_token_ids == {EOT: 0}
    with pytest.raises(
        ConfigError, match=r"special token '<\|endoftext\|>' cannot have id 259: the vocab gives it to b'hell'"
    ):
        Tokenizer.load(saved, special_tokens={EOT: 259}, cache=cache)
    # A free id is honoured (a gap before it is allowed), as tiktoken's special tokens are, even
    # where the vocab holds the same bytes at another id; an id of other bytes is refused.
    moved = Tokenizer.load(saved, special_tokens={EOT: 4000}, cache=cache)
    assert moved.special_token_ids == {EOT: 4000} and moved.encode("hello" + EOT) == [259, 112, 4000]
    far = Tokenizer.load(saved, special_tokens={EOT: 0, "<|new|>": 5000}, cache=cache)
    assert far.special_token_ids == {EOT: 0, "<|new|>": 5000} and far.n_vocab == 5001
    assert far.encode("hello<|new|>") == [259, 112, 5000] and far.decode([5000]) == "<|new|>"
    with pytest.raises(
        ConfigError, match=r"special token '<\|new\|>' cannot have id 7: the vocab gives it to b'\\x06'"
    ):
        Tokenizer.load(saved, special_tokens={"<|new|>": 7}, cache=cache)
    # A list keeps the old rule: the id the bytes have, else the next one.
    assert Tokenizer.load(saved, special_tokens=[EOT, "<|new|>"], cache=cache).special_token_ids == {
        EOT: 0,
        "<|new|>": 260,
    }


def test_the_constructor_takes_special_ids_by_the_same_rule():
    tok = Tokenizer(BYTES | {256: b"he"}, [(b"h", b"e")], {EOT: 300})
    assert tok.special_token_ids == {EOT: 300} and tok.encode("he" + EOT) == [256, 300]
    with pytest.raises(ConfigError, match="cannot have id 256"):
        Tokenizer(BYTES | {256: b"he"}, [(b"h", b"e")], {EOT: 256})
    with pytest.raises(ConfigError, match="has id -1, not a non-negative integer"):
        Tokenizer(BYTES, [], {EOT: -1})
    # A single-byte special token at its own id: text "a" keeps the ordinary id.
    tok = Tokenizer(BYTES, [], {"a": 256})
    assert tok.encode("a") == [256] and tok.encode_ordinary("a") == [97]


def test_the_gpt2_pair_honours_special_ids(tmp_path):
    from conftest import require_gpt2_files

    encoder, merges = require_gpt2_files()
    tok = Tokenizer.load(encoder, merges_path=merges, special_tokens={EOT: 50256}, cache=False)
    assert tok.encode("hi" + EOT) == [5303, 50256]
    with pytest.raises(ConfigError, match=r"cannot have id 1999: the vocab gives it to b'attle'"):
        Tokenizer.load(encoder, merges_path=merges, special_tokens={EOT: 1999}, cache=False)


@pytest.mark.skipif(not compiled.AVAILABLE, reason="the cache keeps only the compiled encoder's tables")
def test_a_fifo_at_a_cache_entry_is_a_miss_not_a_hang(saved, tmp_path):
    # In a child process: a hang there fails the test at the timeout instead of stopping the suite.
    cache = tmp_path / "cache"
    env = {**os.environ, "BPE_CACHE_DIR": str(cache)}
    script = (
        "import os, sys\nfrom bpe_impls import Tokenizer\n"
        f"Tokenizer.load({str(saved)!r})\n"
        "[entry] = [p for p in os.listdir(os.environ['BPE_CACHE_DIR']) if p.startswith('tables-')]\n"
        "path = os.path.join(os.environ['BPE_CACHE_DIR'], entry)\n"
        "os.unlink(path); os.mkfifo(path)\n"
        f"print(Tokenizer.load({str(saved)!r}).encode('hello'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[259, 112]"


def test_a_directory_at_a_cache_entry_is_a_miss(saved, tmp_path, monkeypatch):
    from bpe_impls.base import cache

    monkeypatch.setenv("BPE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache" / "entry").mkdir(parents=True)
    assert cache.read_entry("entry") is None
    assert cache.write_entry("file", b"payload") and cache.read_entry("file") == b"payload"


@pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled core is not built")
def test_the_cache_key_covers_the_compiled_core(tmp_path, monkeypatch):
    core = tmp_path / "core.so"
    core.write_bytes(b"one build")
    monkeypatch.setattr(compiled, "module_path", lambda: str(core))
    table_cache._code_digest.cache_clear()
    try:
        first = table_cache._code_digest()
        core.write_bytes(b"another build")
        table_cache._code_digest.cache_clear()
        assert table_cache._code_digest() != first
    finally:
        table_cache._code_digest.cache_clear()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"extra": 1}, "unknown key 'extra' at the top level"),
        ({"version": "0.1"}, 'version is "0.1"; HF tokenizers reads only version "1.0"'),
        ({"version": 1}, 'version is 1; HF tokenizers reads only version "1.0"'),
    ],
)
def test_an_hf_file_hf_refuses_is_refused(tmp_path, change, message):
    tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers is the oracle")
    path = Tokenizer(TRAINED, MERGES, [EOT]).save(tmp_path / "tokenizer.json", format="hf")[0]
    document = json.loads(path.read_text(encoding="utf-8"))
    assert tokenizers.Tokenizer.from_file(str(path)).encode("hello").ids == [259, 112]
    path.write_text(json.dumps(document | change), encoding="utf-8")
    with pytest.raises(Exception):  # noqa: B017 -- HF's own error types vary by version
        tokenizers.Tokenizer.from_file(str(path))
    with pytest.raises(TokenizerFileError, match=message):
        Tokenizer.load(path, cache=False)
