"""The table cache (encoding/formats/table_cache.py): a gpt2 or hf load keeps its tables in the cache folder,
and the next load of the same files takes them from there.

A cached load must give the tokenizer a load without the cache gives (vocab, merges, special tokens,
pattern, ids), any change to a file must miss, a damaged entry must read as a miss and be written
again, and the switches (BPE_CACHE_DIR=none, cache=False) and an unwritable folder must leave the
cache untouched without an error.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import fixture_text, require_text

from bpe_impls import Tokenizer, TokenizerFileError, train_bpe
from bpe_impls.base import compiled
from bpe_impls.encoding.formats import table_cache

pytestmark = pytest.mark.skipif(not compiled.AVAILABLE, reason="only the compiled encoder's tables are kept")

EOT, PAD = "<|endoftext|>", "<|pad|>"
SAMPLE = f"Hello, they'll say 'WE'VE won'.\r\n  x  {PAD}Ünïcödé 😀 日本語 ١٢٣٤٥ 12345{EOT}{EOT}end   "


@pytest.fixture(scope="module", params=["gpt2", "o200k"])
def trained(request) -> Tokenizer:
    vocab, merges = train_bpe(require_text("corpus.en"), 600, [EOT, PAD], pattern=request.param, num_workers=1)
    return Tokenizer(vocab, merges, [EOT, PAD], pattern=request.param)


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("BPE_CACHE_DIR", str(folder))
    return folder


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("tables-*")) if folder.is_dir() else []


def assert_same(cached: Tokenizer, cold: Tokenizer, text: str = SAMPLE) -> None:
    assert dict(cached.vocab) == dict(cold.vocab)
    assert cached.merges == cold.merges
    assert cached.special_tokens == cold.special_tokens
    assert cached.special_token_ids == cold.special_token_ids
    assert cached.pattern is cold.pattern
    assert cached.n_vocab == cold.n_vocab
    assert repr(cached) == repr(cold)
    assert cached.encode(text) == cold.encode(text)
    assert cached.encode(text, allowed_special=set()) == cold.encode(text, allowed_special=set())
    assert cached.decode(cold.encode(text)) == text


# Every table set the cache's lookup returned: a tokenizer came from the cache when it was built
# from one of them (a cold load of a gpt2 or hf file also builds from packed tables, read by the
# compiled core).
_FOUND: list[object] = []


@pytest.fixture(autouse=True)
def _watch_lookups(monkeypatch):
    lookup = table_cache.lookup

    def watched(where):
        found = lookup(where)
        _FOUND.append(found)
        return found

    monkeypatch.setattr(table_cache, "lookup", watched)
    yield
    _FOUND.clear()


def from_cache(tok: Tokenizer) -> bool:
    packed = getattr(tok._tables, "packed", None)
    return packed is not None and any(packed is found for found in _FOUND)


@pytest.mark.parametrize("format", ["gpt2", "hf"])
def test_a_cached_load_is_the_cold_load(trained, format, tmp_path, cache):
    saved = tmp_path / "saved"
    trained.save(saved, format)
    cold = Tokenizer.load(saved, cache=False)
    assert not entries(cache)
    first = Tokenizer.load(saved)  # a miss: built from the files, then kept
    assert not from_cache(first) and len(entries(cache)) == 1
    second = Tokenizer.load(saved)
    assert from_cache(second)
    text = fixture_text("tinystories_sample.txt")[:20000] + SAMPLE
    assert_same(second, cold, text)
    assert_same(first, cold, text)


def test_a_gpt2_pair_with_other_options_is_another_entry(trained, tmp_path, cache):
    saved = tmp_path / "saved"
    trained.save(saved, "gpt2")
    vocab, merges = saved / "vocab.json", saved / "merges.txt"
    plain = Tokenizer.load(vocab, merges_path=merges, pattern=trained.pattern, special_tokens=[EOT, PAD])
    other = Tokenizer.load(vocab, merges_path=merges, pattern=trained.pattern, special_tokens=[PAD, EOT])
    assert len(entries(cache)) == 2
    again = Tokenizer.load(vocab, merges_path=merges, pattern=trained.pattern, special_tokens=[PAD, EOT])
    assert from_cache(again)
    cold = Tokenizer.load(vocab, merges_path=merges, pattern=trained.pattern, special_tokens=[PAD, EOT], cache=False)
    assert_same(again, cold)
    assert again.special_tokens == other.special_tokens == (PAD, EOT) and plain.special_tokens == (EOT, PAD)


@pytest.mark.parametrize("format", ["gpt2", "hf"])
def test_a_pair_listed_twice_keeps_its_last_rank_from_the_cache(tmp_path, cache, format):
    vocab = {i: bytes([i]) for i in range(256)}
    vocab.update({256: b"ab", 257: b"bc", 258: b"abc"})
    merges = [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c"), (b"a", b"b")]
    tok = Tokenizer(vocab, merges, pattern="o200k")
    tok.save(tmp_path / "saved", format)
    cold = Tokenizer.load(tmp_path / "saved", cache=False)
    Tokenizer.load(tmp_path / "saved")
    cached = Tokenizer.load(tmp_path / "saved")
    assert from_cache(cached)
    assert cached.merges == merges
    for text in ("abc", "xabcab", "bcab abc"):
        assert cached.encode(text) == cold.encode(text) == tok.encode(text)


def test_an_edited_file_of_the_same_size_misses(trained, tmp_path, cache):
    saved = tmp_path / "saved"
    trained.save(saved, "gpt2")
    Tokenizer.load(saved)
    assert from_cache(Tokenizer.load(saved))
    # Swap the ids of two tokens whose ids have as many digits: a valid vocab of the same size.
    path = saved / "vocab.json"
    text = path.read_text(encoding="utf-8")
    swapped = text.replace(": 300,", ": @,").replace(": 301,", ": 300,").replace(": @,", ": 301,")
    assert swapped != text and len(swapped) == len(text)
    path.write_text(swapped, encoding="utf-8")
    edited = Tokenizer.load(saved)
    assert not from_cache(edited)
    assert edited.vocab[300] == trained.vocab[301] and edited.vocab[301] == trained.vocab[300]
    assert_same(Tokenizer.load(saved), Tokenizer.load(saved, cache=False))
    # One byte changed in merges.txt: the file is now at fault, and still said so.
    merges = saved / "merges.txt"
    lines = merges.read_text(encoding="utf-8").split("\n")
    last = len(lines) - 2
    lines[last] = lines[last][:-1] + ("Ā" if lines[last][-1] != "Ā" else "ā")
    merges.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(TokenizerFileError, match=r"merges.txt line"):
        Tokenizer.load(saved)


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty"])
def test_a_damaged_entry_is_a_miss_and_is_written_again(trained, tmp_path, cache, damage):
    saved = tmp_path / "saved"
    trained.save(saved, "hf")
    cold = Tokenizer.load(saved, cache=False)
    Tokenizer.load(saved)
    (entry,) = entries(cache)
    good = entry.read_bytes()
    bad = bytearray(good)
    if damage == "flip":
        bad[len(bad) // 2] ^= 0x40
    elif damage == "truncate":
        del bad[-100:]
    else:
        bad.clear()
    entry.write_bytes(bytes(bad))
    loaded = Tokenizer.load(saved)
    assert not from_cache(loaded)
    assert_same(loaded, cold)
    assert entry.read_bytes() == good
    assert from_cache(Tokenizer.load(saved))


def test_an_entry_whose_digest_holds_but_names_another_slot_is_a_miss(trained, tmp_path, cache):
    trained.save(tmp_path / "saved", "gpt2")
    Tokenizer.load(tmp_path / "saved")
    (entry,) = entries(cache)
    payload = entry.read_bytes()[32:]
    assert table_cache.unpack(entry.name, payload) is not None
    assert table_cache.unpack("tables-gpt2-other.bin", payload) is None
    assert table_cache.unpack(entry.name, payload[:-1]) is None


def test_the_switches_leave_the_cache_alone(trained, tmp_path, cache, monkeypatch):
    saved = tmp_path / "saved"
    trained.save(saved, "gpt2")
    cold = Tokenizer.load(saved, cache=False)
    assert not cache.exists()
    Tokenizer.load(saved)
    (entry,) = entries(cache)
    before = entry.read_bytes()
    entry.write_bytes(b"")  # cache=False neither reads it nor writes it again
    assert not from_cache(Tokenizer.load(saved, cache=False)) and entry.read_bytes() == b""
    entry.write_bytes(before)
    monkeypatch.chdir(tmp_path)
    for value in ("none", "off", "None"):
        monkeypatch.setenv("BPE_CACHE_DIR", value)
        loaded = Tokenizer.load(saved)
        assert not from_cache(loaded)
        assert_same(loaded, cold)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cache", "saved"]


def test_an_unwritable_cache_folder_only_costs_time(trained, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("BPE_CACHE_DIR", str(blocker / "cache"))
    trained.save(tmp_path / "saved", "hf")
    cold = Tokenizer.load(tmp_path / "saved", cache=False)
    for _ in range(2):
        loaded = Tokenizer.load(tmp_path / "saved")
        assert not from_cache(loaded)
        assert_same(loaded, cold)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["file", "saved"]


def test_a_pattern_the_compiled_encoder_does_not_scan_is_not_kept(tmp_path, cache):
    vocab, merges = train_bpe(
        require_text("corpus.en"), 300, [EOT], pattern=r"\s?\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+", num_workers=1
    )
    tok = Tokenizer(vocab, merges, [EOT], pattern=r"\s?\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+")
    tok.save(tmp_path / "saved", "gpt2")
    loaded = Tokenizer.load(tmp_path / "saved")
    assert loaded.encoder != "native" and not entries(cache)


# --- the one-pass readers a cold load uses, against the per-token ones ------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bpe_impls.encoding.formats import gpt2 as gpt2_format  # noqa: E402

TABLE_CHARS = "".join(gpt2_format.bytes_to_unicode().values())


@given(st.lists(st.text(st.sampled_from(TABLE_CHARS + "\n\r Ā中\x00"), max_size=6), max_size=20))
def test_strs_to_tokens_is_str_to_token_of_each(texts):
    try:
        expected = [gpt2_format.str_to_token(text, "x") for text in texts]
    except TokenizerFileError:
        expected = None
    assert gpt2_format.strs_to_tokens(texts) == expected


@pytest.mark.parametrize(
    "edit",
    [
        lambda lines: lines,  # sound
        lambda lines: [*lines[:3], "", "\r", *lines[3:]],  # blank lines are skipped
        lambda lines: [line + "\r" for line in lines],  # CRLF
        lambda lines: [*lines[:5], lines[5].replace(" ", "  "), *lines[6:]],
        lambda lines: [*lines[:5], lines[5] + " x", *lines[6:]],
        lambda lines: [*lines[:5], lines[5][:-1] + "中", *lines[6:]],
        lambda lines: [*lines[:5], lines[5][:-1] + "\r" + lines[5][-1], *lines[6:]],
        lambda lines: [
            lines[0],
            lines[-2],
            *lines[1:-2],
            lines[-1],
        ],  # the last merge first: its parts are not made yet
        lambda lines: [lines[0], lines[2], *lines[1:2], *lines[3:]],
        lambda lines: ["#version: 0.2", *lines[1:]],
        lambda lines: lines[1:],  # no header
    ],
)
def test_a_merges_file_reads_the_same_on_the_fast_path_and_the_slow_one(trained, tmp_path, edit, monkeypatch):
    trained.save(tmp_path, "gpt2")
    path = tmp_path / "merges.txt"
    path.write_text("\n".join(edit(path.read_text(encoding="utf-8").split("\n"))), encoding="utf-8")
    vocab = gpt2_format.load_vocab(tmp_path / "vocab.json")

    def outcome():
        try:
            return gpt2_format.load_merges(path, vocab)
        except TokenizerFileError as exc:
            return str(exc)

    fast = outcome()
    monkeypatch.setattr(gpt2_format, "_sound_merges", lambda lines, known: None)
    assert fast == outcome()


@pytest.mark.parametrize(
    "edit",
    [
        lambda text: text,
        lambda text: text.replace(": 300,", ": true,", 1),
        lambda text: text.replace(": 300,", ": -300,", 1),
        lambda text: text.replace(": 300,", ": 301,", 1),
        lambda text: text.replace(": 300,", ": 3.0,", 1),
        lambda text: text.replace('"!"', '""', 1),
        lambda text: text.replace('"!"', '"中"', 1),
        lambda text: text.replace('"!"', '"\\n"', 1),
    ],
)
def test_a_vocab_reads_the_same_on_the_fast_path_and_the_slow_one(trained, tmp_path, edit, monkeypatch):
    from bpe_impls.encoding.formats import hf

    trained.save(tmp_path / "gpt2", "gpt2")
    trained.save(tmp_path / "hf", "hf")
    files = ((tmp_path / "gpt2" / "vocab.json", gpt2_format.load_vocab), (tmp_path / "hf" / "tokenizer.json", hf.load))
    for path, read in files:
        text = path.read_text(encoding="utf-8")
        path.write_text(edit(text), encoding="utf-8")

        def outcome():
            try:
                return read(path)
            except TokenizerFileError as exc:
                return str(exc)

        fast = outcome()
        with monkeypatch.context() as patch:
            patch.setattr(gpt2_format, "strs_to_tokens", lambda texts: None)
            patch.setattr(hf, "strs_to_tokens", lambda texts: None)
            assert fast == outcome()


def test_a_load_leaves_the_garbage_collector_as_it_found_it(trained, tmp_path, cache):
    import gc

    trained.save(tmp_path / "saved", "gpt2")
    (tmp_path / "bad").mkdir()
    assert gc.isenabled()
    try:
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            Tokenizer.load(tmp_path / "saved", cache=False)
            assert gc.isenabled() is enabled
            with pytest.raises(TokenizerFileError):
                Tokenizer.load(tmp_path / "bad")
            assert gc.isenabled() is enabled
    finally:
        gc.enable()
