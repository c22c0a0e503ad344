"""The seeded TinyStories-style corpus generator: determinism, exact size, layout, vocabulary growth."""

from __future__ import annotations

import json
import os

import pytest

from bpe_impls.base.errors import ConfigError
from bpe_impls.corpus.tally import count_text
from bpe_impls.harness.generators import tinystories as ts
from bpe_impls.harness.generators.tinystories import (
    GENERATOR_VERSION,
    default_corpus,
    generate,
    generate_bytes,
    parse_size,
    write_corpus,
)

EOT = "<|endoftext|>"
DOC_END = f"\n{EOT}\n"


def text_of(size: int, seed: int = 0) -> str:
    return "".join(generate(size, seed))


@pytest.fixture(scope="module")
def four_mb() -> str:
    return text_of(4_000_000)


# --- determinism -------------------------------------------------------------------------------


def test_same_seed_same_bytes_and_different_seed_different_bytes():
    first = b"".join(generate_bytes(300_000, seed=7))
    assert b"".join(generate_bytes(300_000, seed=7)) == first
    assert b"".join(generate_bytes(300_000, seed=8)) != first
    assert text_of(300_000, seed=7).encode("utf-8") == first


def test_smaller_corpus_is_a_prefix_of_larger_up_to_its_last_document():
    small, large = text_of(50_000, seed=3), text_of(400_000, seed=3)
    whole_documents = small[: small.rindex(DOC_END, 0, len(small) - len(DOC_END)) + len(DOC_END)]
    assert len(whole_documents) > 40_000
    assert large.startswith(whole_documents)


# --- exact size and valid UTF-8 ----------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 2, 5, 15, 16, 17, 63, 64, 65, 100, 1000, 12_345, 300_001])
def test_exact_size(size):
    data = b"".join(generate_bytes(size, seed=1))
    assert len(data) == size
    assert len(text_of(size, seed=1).encode("utf-8")) == size
    data.decode("utf-8")  # strict: raises on any invalid byte


def test_sizes_that_cut_the_last_document_anywhere_are_exact():
    reference = b"".join(generate_bytes(5000, seed=0))
    for size in range(16, 3000, 7):
        data = b"".join(generate_bytes(size, seed=0))
        assert len(data) == size and data.endswith(DOC_END.encode())
        text = data.decode("utf-8")
        if size < reference.index(DOC_END.encode()):  # the first story, cut to fit
            assert reference.startswith(text[: -len(DOC_END)].rstrip(" ").encode())


def test_a_cut_inside_a_multibyte_character_is_padded_to_stay_exact_and_valid():
    # With few bytes, the only document is the first story cut to `size - len(DOC_END)` bytes.
    # Aim that cut at every continuation byte (inside a curly quote, accented name or emoji).
    tried = 0
    for seed in range(30):
        story = b"".join(generate_bytes(3000, seed)).split(DOC_END.encode())[0]
        for cut in (i for i, byte in enumerate(story) if 0x80 <= byte < 0xC0):
            data = b"".join(generate_bytes(cut + len(DOC_END), seed))
            assert len(data) == cut + len(DOC_END)
            head = data[:cut].decode("utf-8")  # strict
            kept = len(head.rstrip(" ").encode())
            assert story[:kept] == head.rstrip(" ").encode() and kept < cut
            tried += 1
    assert tried > 20


def test_each_piece_decodes_on_its_own():
    pieces = list(generate_bytes(2_000_000, seed=2))
    assert len(pieces) > 3
    for piece in pieces:
        piece.decode("utf-8")


@pytest.mark.parametrize("size, seed", [(-1, 0), (10.5, 0), ("100", 0), (100, -1), (100, 1.5)])
def test_bad_size_or_seed_is_rejected_at_the_call(size, seed):
    with pytest.raises(ConfigError):
        generate(size, seed)  # no iteration needed: the CLI gets the error before writing anything
    with pytest.raises(ConfigError):
        write_corpus("/nonexistent-dir/never-written.txt", size, seed)


# --- document layout and content ---------------------------------------------------------------


def test_documents_are_separated_like_the_real_files(four_mb):
    text = four_mb[:1_000_000]
    text = text[: text.rindex(DOC_END) + len(DOC_END)]
    # Every separator is alone on its line, as in tinystories_sample.txt.
    assert text.count(EOT) == text.count(DOC_END) > 500
    documents = text.split(DOC_END)
    assert documents.pop() == ""
    for document in documents:
        story = document.removeprefix("\n")  # the occasional blank line after a separator
        assert story.strip(), "empty document"
        assert story[0].isupper() or story[0] in '"“', story[:40]
        assert EOT not in story and "\n\n" not in story
        assert story[-1] in '.!?"”' or ord(story[-1]) > 0x2000, story[-40:]  # or an emoji
    # Some documents are followed by a blank line, most are not.
    blank = sum(1 for d in documents[1:] if d.startswith("\n"))
    assert 0 < blank < len(documents) // 5


def test_stories_look_like_tinystories(four_mb):
    text = four_mb[:1_000_000]
    assert text[0].isupper()
    assert text.count("Once upon a time") > 300
    for expected in (' said, "', " said, “", "”", "’", "'s ", "They ", " she ", " he "):
        assert expected in text, expected
    paragraphs = [p for p in text.split("\n") if p and p != EOT]
    assert len(paragraphs) > 2 * text.count(EOT)  # several paragraphs per story
    assert any(ch.isdigit() for ch in text)
    non_ascii = {ch for ch in text if ord(ch) > 127}
    assert {"“", "”", "’"} <= non_ascii
    assert any(ch.isalpha() for ch in non_ascii)  # accented names
    assert any(ord(ch) > 0xFFFF for ch in four_mb)  # an emoji (4-byte UTF-8), rarely


def test_distinct_pretokens_grow_sublinearly_like_real_text(four_mb):
    one = len(count_text(four_mb[:1_000_000], (EOT,)))
    four = len(count_text(four_mb, (EOT,)))
    assert four > 5000
    assert 1.2 < four / one < 3.5, (one, four)


# --- write_corpus --------------------------------------------------------------------------------


def test_write_corpus_writes_exactly_generate_and_leaves_no_temp_file(tmp_path):
    target = tmp_path / "corpus.txt"
    returned = write_corpus(target, 250_000, seed=4)
    assert returned == target
    assert target.read_bytes() == text_of(250_000, seed=4).encode("utf-8")
    assert os.listdir(tmp_path) == ["corpus.txt"]


def test_write_corpus_progress_bar_goes_to_stderr(tmp_path, capsys):
    write_corpus(tmp_path / "c.txt", 100_000, progress=True)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "100" in captured.err and "c.txt" in captured.err


def test_interrupted_write_leaves_nothing_and_keeps_an_old_file(tmp_path, monkeypatch):
    target = tmp_path / "corpus.txt"
    target.write_bytes(b"old")

    def failing(size_bytes, seed=0):
        yield b"partial"
        raise KeyboardInterrupt

    monkeypatch.setattr(ts, "generate_bytes", failing)
    with pytest.raises(KeyboardInterrupt):
        write_corpus(target, 1000)
    assert os.listdir(tmp_path) == ["corpus.txt"]
    assert target.read_bytes() == b"old"


# --- parse_size ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2GB", 2_000_000_000),
        ("200MB", 200_000_000),
        ("5MiB", 5 * 2**20),
        ("1.5GB", 1_500_000_000),
        ("123", 123),
        ("4k", 4000),
        ("4KiB", 4096),
        (" 10 mb ", 10_000_000),
        ("2gib", 2 * 2**30),
        ("1_000", 1000),
        ("0.5MB", 500_000),
        ("7B", 7),
        ("1TB", 10**12),
        (42, 42),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "text", ["", "abc", "MB", "-5MB", "5XB", "1e9", "1.5", "1.0001KB", "5iB", "2 G B", None, 2.5, -3]
)
def test_parse_size_rejects_garbage_with_a_config_error(text):
    with pytest.raises(ConfigError) as info:
        parse_size(text)
    assert isinstance(info.value, ValueError)
    assert str(info.value)


# --- default_corpus cache ------------------------------------------------------------------------


def test_default_corpus_is_generated_once_then_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("BPE_CACHE_DIR", str(tmp_path / "cache"))
    path = default_corpus(60_000, seed=5)
    assert path.parent == tmp_path / "cache"
    assert f"v{GENERATOR_VERSION}" in path.name and "seed5" in path.name and "60000" in path.name
    assert path.read_bytes() == text_of(60_000, seed=5).encode("utf-8")

    def must_not_write(*args, **kwargs):
        raise AssertionError("default_corpus regenerated a cached corpus")

    monkeypatch.setattr(ts, "write_corpus", must_not_write)
    assert default_corpus(60_000, seed=5) == path
    # Another size or seed is another file, so it is generated.
    with pytest.raises(AssertionError):
        default_corpus(60_000, seed=6)


def test_default_corpus_regenerates_a_truncated_cache_file(tmp_path, monkeypatch):
    monkeypatch.setenv("BPE_CACHE_DIR", str(tmp_path))
    path = default_corpus(30_000)
    path.write_bytes(b"truncated")
    assert default_corpus(30_000).read_bytes() == text_of(30_000).encode("utf-8")


def test_default_size_is_a_few_megabytes():
    assert 2_000_000 <= ts.DEFAULT_SIZE <= 8_000_000


def test_cache_dir_falls_back_to_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.delenv("BPE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ts.cache_dir() == tmp_path / "xdg" / "bpe_impls"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert ts.cache_dir() == tmp_path / "home" / ".cache" / "bpe_impls"


# --- JSON Lines (bpe gen-corpus --jsonl) ---------------------------------------------------------


@pytest.mark.parametrize("style", ["tinystories", "intl"])
def test_gen_corpus_jsonl_holds_one_record_per_document_of_the_text(tmp_path, style):
    from bpe_impls import cli

    text_path, jsonl_path = tmp_path / "c.txt", tmp_path / "c.jsonl"
    assert cli.main(["gen-corpus", str(text_path), "--size", "300KB", "--style", style, "-q"]) == 0
    assert cli.main(["gen-corpus", str(jsonl_path), "--size", "300KB", "--style", style, "--jsonl", "-q"]) == 0
    # The documents as the text file holds them: between separators, surrounding newlines dropped.
    documents = [doc.strip("\n") for doc in text_path.read_text(encoding="utf-8").split(EOT)]
    records = [json.loads(line) for line in jsonl_path.read_text(encoding="utf-8").splitlines()]
    assert all(set(record) == {"text"} for record in records)
    assert [record["text"] for record in records] == [doc for doc in documents if doc]
    assert len(records) > 50 and not list(tmp_path.glob("*.tmp"))
