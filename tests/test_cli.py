"""The `bpe` command end to end, and its handling of bad input (one line, non-zero exit, no files).

Then `bpe encode` (encoding.encode_file): the ids of the whole text, byte for byte the same for every
thread count, block size, encoder and cache size, in .npy and .bin; bad input named, nothing written.
"""

from __future__ import annotations

import importlib.util
import io
import itertools
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error, examples, load_gpt2, require_fixture, require_gpt2_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe_impls import IMPLEMENTATIONS, Tokenizer, cli, count_pretokens
from bpe_impls.base.errors import ConfigError, CorpusError
from bpe_impls.encoding.encode_file import encode_file
from bpe_impls.encoding.encoders import ENCODERS
from bpe_impls.harness import compare as compare_module
from bpe_impls.harness import peers as peer_adapters
from bpe_impls.trainers import naive

EOT = "<|endoftext|>"
STORY = "Once upon a time, a cat named Tom met a dog. 'Hi!' said Tom. The dog was happy.\n"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text((STORY + EOT) * 60 + "Ünïcödé ok 🙂 日本語.\n", encoding="utf-8")
    return path


def run(*args: str) -> subprocess.CompletedProcess:
    """Run the real command in a subprocess: real exit codes, real stderr."""
    return subprocess.run([sys.executable, "-m", "bpe_impls", *args], capture_output=True, text=True, timeout=300)


def train_dir(corpus: Path, out: Path, vocab_size: int = 300) -> Path:
    assert (
        cli.main(
            [
                "train",
                str(corpus),
                "--vocab-size",
                str(vocab_size),
                "--special-token",
                EOT,
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    return out


def test_train_writes_a_loadable_tokenizer_equal_to_the_spec(corpus, tmp_path, capsys):
    out = train_dir(corpus, tmp_path / "tok")
    assert "trained" in capsys.readouterr().out
    tokenizer = Tokenizer.load(out)
    vocab, merges = naive.train(count_pretokens(corpus, [EOT], 1), 300, [EOT])
    assert tokenizer.vocab == vocab and tokenizer.merges == merges
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted(
        p.name for p in out.iterdir()
    )  # no temp files left behind


def test_encode_then_decode_round_trips_through_npy(corpus, tmp_path, monkeypatch):
    out = train_dir(corpus, tmp_path / "tok")
    tokenizer = Tokenizer.load(out)
    # tiny read blocks: block edges fall inside pre-tokens, special tokens and UTF-8 characters
    monkeypatch.setattr(cli, "IDS_PER_WRITE", 50)
    ids_path, text_path = tmp_path / "ids.npy", tmp_path / "back.txt"
    encode = ["encode", "--tokenizer", str(out), str(corpus), "--out", str(ids_path), "--block-size", "7", "--quiet"]
    assert cli.main(encode) == 0
    ids = np.load(ids_path)
    assert ids.dtype == np.uint16
    text = corpus.read_text(encoding="utf-8")
    assert ids.tolist() == tokenizer.encode(text)
    assert cli.main(["decode", "--tokenizer", str(out), str(ids_path), "--out", str(text_path), "--quiet"]) == 0
    assert text_path.read_text(encoding="utf-8") == text


def test_compare_lists_every_trainer_as_identical(corpus):
    result = run("compare", str(corpus), "--vocab-size", "300", "--special-token", EOT, "--quiet")
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.split()}
    for name in IMPLEMENTATIONS:
        assert rows[name][-1] == "yes"
        assert float(rows[name][1]) >= 0 and float(rows[name][2]) >= 0


# --- bad input: one line on stderr, exit 1, no output files -----------------------------------


def test_missing_corpus(tmp_path):
    out = tmp_path / "tok"
    result = run("train", str(tmp_path / "nope.txt"), "--vocab-size", "300", "--out", str(out))
    assert_one_line_error(result, "nope.txt", "no such file")
    assert not out.exists()


def test_unreadable_corpus_directory(tmp_path):
    result = run("train", str(tmp_path), "--vocab-size", "300", "--out", str(tmp_path / "tok"))
    assert_one_line_error(result, "is a directory")


def test_vocab_size_too_small(corpus, tmp_path):
    result = run("train", str(corpus), "--vocab-size", "256", "--special-token", EOT, "--out", str(tmp_path / "t"))
    assert_one_line_error(result, "vocab_size 256", "257")
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("specials, needle", [([""], "empty"), ([EOT, EOT], "given twice")])
def test_bad_special_tokens(corpus, tmp_path, specials, needle):
    args = [a for s in specials for a in ("--special-token", s)]
    result = run("train", str(corpus), "--vocab-size", "300", *args, "--out", str(tmp_path / "t"))
    assert_one_line_error(result, needle)


def test_a_special_token_that_is_not_utf8_is_one_line_naming_it(corpus, tmp_path):
    # subprocess passes '\udcff' as the byte 0xff (surrogateescape), as the shell's $'\xff' does,
    # and the command's Python reads it back as '\udcff'.
    result = run("train", str(corpus), "--vocab-size", "300", "--special-token", "\udcff", "--out", str(tmp_path / "t"))
    assert_one_line_error(
        result, "special token #0 '\\udcff' is not valid Unicode text", "(lone surrogate U+DCFF at position 0)"
    )
    assert not (tmp_path / "t").exists()


def test_invalid_utf8_reports_the_byte_offset_from_a_worker(tmp_path):
    good = (STORY + EOT).encode() * 200
    offset = len(good) - 1000  # deep inside a later chunk, so a worker (not the parent) meets it
    path = tmp_path / "bad.txt"
    path.write_bytes(good[:offset] + b"\xff" + good[offset:])
    out = tmp_path / "t"
    result = run("train", str(path), "--vocab-size", "300", "--special-token", EOT, "--workers", "2", "--out", str(out))
    assert_one_line_error(result, "bad.txt", f"byte offset {offset}")
    assert "Traceback" not in result.stderr and not out.exists()


def test_encode_reports_invalid_utf8_offset_and_leaves_no_output(corpus, tmp_path):
    out = train_dir(corpus, tmp_path / "tok")
    bad = tmp_path / "bad.txt"
    bad.write_bytes("héllo wörld ".encode() * 100 + b"\xc3(" + b"tail")
    ids = tmp_path / "ids.npy"
    result = run("encode", "--tokenizer", str(out), str(bad), "--out", str(ids))
    assert_one_line_error(result, "bad.txt", f"byte offset {len('héllo wörld '.encode()) * 100}")
    assert not ids.exists() and not any(tmp_path.glob(".ids.npy*"))


def test_decode_of_an_unknown_id_names_it_and_its_position(corpus, tmp_path):
    out = train_dir(corpus, tmp_path / "tok")
    ids = tmp_path / "ids.npy"
    np.save(ids, np.array([5, 6, 7, 40000, 8], dtype=np.uint16))
    text = tmp_path / "out.txt"
    result = run("decode", "--tokenizer", str(out), str(ids), "--out", str(text))
    assert_one_line_error(result, "unknown token id 40000", "position 3")
    assert not text.exists()


def test_merges_that_do_not_match_the_vocab(corpus, tmp_path):
    out = train_dir(corpus, tmp_path / "tok")
    merges = out / "merges.txt"
    lines = merges.read_text(encoding="utf-8").splitlines()
    lines.append("zzzq qqqz")  # tokens that are not in vocab.json
    merges.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run("encode", "--tokenizer", str(out), str(corpus), "--out", str(tmp_path / "ids.npy"))
    assert_one_line_error(result, "merges.txt")
    assert not (tmp_path / "ids.npy").exists()


def test_output_directory_that_cannot_be_written(corpus, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = run("train", str(corpus), "--vocab-size", "300", "--out", str(blocker / "sub"))
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1


def test_special_tokens_are_saved_with_the_tokenizer(corpus, tmp_path):
    out = train_dir(corpus, tmp_path / "tok")
    assert json.loads((out / "special_tokens.json").read_text()) == [EOT]
    assert Tokenizer.load(out).encode(EOT)[0] == 0


def test_compare_writes_json_and_a_plot(corpus, tmp_path):
    report, picture = tmp_path / "r.json", tmp_path / "r.png"
    result = run(
        "compare",
        str(corpus),
        "--vocab-size",
        "300",
        "--special-token",
        EOT,
        "--impl",
        "naive",
        "route_a",
        "--json",
        str(report),
        "--plot",
        str(picture),
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(report.read_text())
    merge_rows = {row["name"]: row for row in data["rows"] if row["table"] == "merge"}
    assert set(merge_rows) == {"naive", "route_a"} and all(row["identical"] for row in merge_rows.values())
    assert data["vocab_size"] == 300 and data["distinct_pretokens"] > 10
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_with_peers_times_them_on_the_same_corpus(corpus):
    pytest.importorskip("tokenizers", reason="peers not installed: pip install -e '.[peers]'")
    pytest.importorskip("rustbpe", reason="peers not installed: pip install -e '.[peers]'")
    pytest.importorskip("tiktoken", reason="peers not installed: pip install -e '.[peers]'")
    require_gpt2_files()
    result = run(
        "compare", str(corpus), "--vocab-size", "300", "--special-token", EOT, "--impl", "route_b", "--peers", "--quiet"
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for name in ("huggingface", "rustbpe", "tiktoken"):
        assert any(line.startswith(name) for line in lines), name
    # tiktoken and HuggingFace loaded with our trained vocab and merges must give our ids
    # tiktoken and HuggingFace, loaded with our trained vocab and merges and with GPT-2's, and our
    # encode_iterable must give the same ids as our encode
    starts = [i for i, line in enumerate(lines) if line.startswith("encode ")]
    assert [lines[i].split(" (")[0] for i in starts] == ["encode trained vocab", "encode GPT-2 vocab"]
    for start in starts:
        for name in ("bpe_impls encode_iterable", "tiktoken", "huggingface"):
            row = next(line for line in lines[start:] if line.startswith(name))
            assert row.split()[-1] == "yes", row
    # every encode table (one core, batches on every core, corpus to ids file): every row's ids
    # equal the first row's (ours), peers included when installed
    tables = [i for i, line in enumerate(lines) if line.startswith(("encode ", "batch encode ", "corpus to ids file"))]
    assert len(tables) == 5, tables
    for start in tables:
        rows = list(itertools.takewhile(bool, lines[start + 2 :]))
        assert len(rows) >= 3 and all(row.split()[-1] == "yes" for row in rows), rows
    assert any(line.startswith("tiktoken script") for line in lines)
    assert any(line.startswith("pre-tokenize, best of 3:") for line in lines)
    # every installed encode peer has a row in each table, or a line after it saying why it has none
    for table in ("encode trained vocab", "encode GPT-2 vocab"):
        section = result.stdout.split(f"\n{table} (", 1)[1].split("\nbatch encode", 1)[0]
        for name, peer in peer_adapters.COMPARED_ENCODERS.items():
            if peer_adapters.installed(peer.module):
                assert f"\n{name} " in section or f"\n  {name} left out: " in section, (table, name)
        if peer_adapters.installed("quicktok"):  # it takes no vocab with GPT-2's pattern
            assert "\n  quicktok left out: quicktok refuses this vocab" in section
            assert "(no built-in vocab has the 'gpt2' split pattern" in section


def test_iter_documents_splits_on_specials_across_read_blocks(tmp_path):
    from bpe_impls.harness.peers import iter_documents

    docs = ["first doc", "second ünï", "", "third"]
    path = tmp_path / "d.txt"
    path.write_text(EOT.join(docs) + EOT, encoding="utf-8")
    for block in (1, 3, 7, 1000):  # block edges inside special tokens and characters
        assert list(iter_documents(str(path), [EOT], block=block)) == [d for d in docs if d]


def test_special_tokens_may_come_before_the_corpus(corpus, tmp_path):
    out = tmp_path / "tok"
    result = run(
        "train",
        "--special-token",
        EOT,
        "--special-token",
        "<|pad|>",
        str(corpus),
        "--vocab-size",
        "300",
        "--out",
        str(out),
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    assert Tokenizer.load(out).special_tokens == (EOT, "<|pad|>")


@pytest.mark.parametrize("content", ["", EOT * 3])
def test_a_corpus_with_nothing_to_train_on_is_a_one_line_error(tmp_path, content):
    path = tmp_path / "empty.txt"
    path.write_text(content, encoding="utf-8")
    out = tmp_path / "tok"
    result = run("train", str(path), "--vocab-size", "300", "--special-token", EOT, "--out", str(out))
    assert_one_line_error(result, "empty.txt", "no text to train on")
    assert not out.exists()


def test_plot_without_matplotlib_fails_before_the_run_naming_the_extra(corpus, tmp_path, monkeypatch, capsys):
    # A module that cannot be found, as on a machine without matplotlib (find_spec returns None).
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real_find_spec(name, *a)
    )
    started = []
    monkeypatch.setattr(compare_module, "run_compare", lambda *a, **k: started.append(1))
    assert cli.main(["compare", str(corpus), "--vocab-size", "300", "--plot", str(tmp_path / "r.png"), "--quiet"]) == 1
    assert capsys.readouterr().err.strip() == "bpe: error: --plot needs matplotlib: pip install 'bpe_impls[plot]'"
    assert started == [] and not (tmp_path / "r.png").exists()


def test_missing_peers_are_named_not_silently_dropped(corpus, monkeypatch, capsys):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "rustbpe" else real_find_spec(name, *a)
    )
    monkeypatch.setattr(compare_module, "run_compare", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    assert cli.main(["compare", str(corpus), "--vocab-size", "300", "--peers", "--quiet"]) == 130
    err = capsys.readouterr().err
    assert "bpe: note: peers not installed, left out: rustbpe (pip install 'bpe_impls[peers]')" in err


def test_compare_leaves_out_naive_where_it_would_take_minutes_unless_named(corpus, monkeypatch, capsys):
    from bpe_impls.harness import compare

    monkeypatch.setattr(compare, "NAIVE_BUDGET", 0.0)  # every corpus is "too slow" for naive now
    assert cli.main(["compare", str(corpus), "--vocab-size", "300", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "naive left out: it would take about" in out and "name it with --impl" in out
    assert "identical to route_a" in out and not re.search(r"^naive +\d", out, re.M)  # no naive row
    # Named, it runs whatever the prediction.
    assert cli.main(["compare", str(corpus), "--vocab-size", "300", "--impl", "naive", "bucket", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "left out" not in out and "identical to naive" in out


# ---- bpe encode ----
SPECIALS = [EOT, EOT + EOT, "<|e", "x"]


CACHES = [0, 1, 2**16]


THREADS = [1, 2, 3]


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("gpt2")
    load_gpt2([EOT]).save(folder)
    return folder


def read_ids(path: Path, output_format: str, dtype=np.uint16) -> np.ndarray:
    return np.load(path) if output_format == "npy" else np.fromfile(path, dtype=np.dtype(dtype).newbyteorder("<"))


@pytest.mark.parametrize("output_format", ["npy", "bin"])
def test_kjv_is_identical_for_1_2_3_threads_and_equal_to_encoding_the_whole(gpt2_dir, tmp_path, output_format):
    kjv = require_fixture("kjv.txt")
    text = kjv.read_text(encoding="utf-8")
    tokenizer = Tokenizer.load(gpt2_dir)
    outputs = []
    for threads in THREADS:
        out = tmp_path / f"ids{threads}.{output_format}"
        # blocks of 256 KB: 16 pieces (more on several threads: smaller ones in the last MB), so
        # every thread count has several in flight
        assert (
            cli.main(
                [
                    "encode",
                    "--tokenizer",
                    str(gpt2_dir),
                    str(kjv),
                    "--out",
                    str(out),
                    "--format",
                    output_format,
                    "--threads",
                    str(threads),
                    "--block-size",
                    str(1 << 18),
                    "--quiet",
                ]
            )
            == 0
        )
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
    ids = read_ids(tmp_path / f"ids1.{output_format}", output_format)
    assert ids.dtype == np.uint16
    assert np.array_equal(ids, tokenizer.encode_to_numpy(text))
    tiktoken = pytest.importorskip("tiktoken")
    from bpe_impls.harness.peers import tiktoken_encoding

    encoding = tiktoken_encoding(tokenizer.vocab, [EOT], "test_cli_encode")
    assert isinstance(encoding, tiktoken.Encoding)
    assert ids.tolist() == encoding.encode(text, allowed_special="all")


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_pieces_cover_the_file_at_safe_cuts_and_shrink_near_the_end_on_several_threads(tmp_path, workers):
    from bpe_impls.base.patterns import GPT2
    from bpe_impls.corpus.cuts import CutFinder
    from bpe_impls.encoding.encode_file import _MIN_PIECE, iter_piece_bounds

    kjv = require_fixture("kjv.txt")
    data = kjv.read_bytes()
    finder = CutFinder([EOT.encode()], [EOT.encode()], prose=GPT2.prose_cuts)
    block = 1 << 18
    with open(kjv, "rb") as file:
        bounds = list(iter_piece_bounds(file, finder, block, workers))
    assert bounds[0][0] == 0 and bounds[-1][1] == len(data)
    assert all(end == start for (_, end), (start, _) in zip(bounds, bounds[1:]))  # no gap, no overlap
    sizes = [end - start for start, end in bounds[:-1]]
    for (start, end), size in zip(bounds, sizes):
        # each piece ends at the first safe cut past its size: the size each worker count asks for
        want = block if workers == 1 else min(block, max(_MIN_PIECE, (len(data) - start) // (2 * workers)))
        assert size >= want and finder.next_cut(io.BytesIO(data), start + want, len(data)) == end
    if workers > 1:  # the last megabyte is cut finer, so the workers finish together
        assert min(sizes) < block // 2 and len(bounds) > len(data) // block + 2


def test_bin_is_the_npy_payload_little_endian(gpt2_dir, tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text(("Hello, world! " + EOT + " Grüße, 日本語.\n") * 500, encoding="utf-8")
    npy, raw = tmp_path / "ids.npy", tmp_path / "ids.bin"
    assert cli.main(["encode", "--tokenizer", str(gpt2_dir), str(corpus), "--out", str(npy), "--quiet"]) == 0
    assert cli.main(["encode", "--tokenizer", str(gpt2_dir), str(corpus), "--out", str(raw)]) == 0  # bin by suffix
    assert "ids are uint16, little-endian" in capsys.readouterr().err  # the dtype is said on stderr
    array = np.load(npy)
    assert raw.read_bytes() == array.astype("<u2").tobytes()
    assert np.array_equal(np.memmap(raw, dtype=np.uint16, mode="r"), array)  # as nanoGPT reads it


@pytest.mark.parametrize("output_format", ["npy", "bin"])
def test_a_vocab_over_65536_ids_writes_uint32(tmp_path, output_format):
    vocab = {i: bytes([i]) for i in range(256)} | {70000: b"ab"}
    tokenizer = Tokenizer(vocab, [(b"a", b"b")], ["<|x|>"], encoder="hybrid")
    source = tmp_path / "in.txt"
    source.write_text("ab<|x|>abc" * 100, encoding="utf-8")
    out = tmp_path / f"ids.{output_format}"
    encoded = encode_file(tokenizer, source, out, output_format, threads=2, block_size=7)
    ids = read_ids(out, output_format, np.uint32)
    assert encoded.dtype == np.uint32 and encoded.tokens == len(ids)
    assert ids.tolist() == tokenizer.encode("ab<|x|>abc" * 100)


# Special tokens (overlapping ones too), multi-byte characters and every Unicode category but
# surrogates, written to a file and encoded in tiny blocks, so block edges fall everywhere.
pieces = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=8),
    st.sampled_from([EOT, EOT + EOT, "<|e", "<|endoftext", "x", "Hello, world.", "'s", "\n", " \n\n", "日本語", "é!"]),
)


files = st.lists(pieces, max_size=14).map("".join)


@pytest.fixture(scope="module")
def gpt2_parts():
    tok = load_gpt2([EOT])
    return tok.vocab, tok.merges


@pytest.fixture(scope="module", params=[(n, c) for n in ENCODERS for c in CACHES], ids=lambda p: f"{p[0]}-cache{p[1]}")
def tok(request, gpt2_parts) -> Tokenizer:
    name, cache = request.param
    return Tokenizer(*gpt2_parts, SPECIALS, encoder=name, cache_size=cache)


@pytest.fixture(scope="module")
def reference(gpt2_parts) -> Tokenizer:
    return Tokenizer(*gpt2_parts, SPECIALS, encoder="scan", cache_size=0)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=files, block_size=st.integers(1, 40), threads=st.sampled_from(THREADS))
def test_generated_files_equal_encoding_the_whole(tok, reference, tmp_path, text, block_size, threads):
    source = tmp_path / "in.txt"
    source.write_bytes(text.encode("utf-8"))
    out = tmp_path / "ids.bin"
    encoded = encode_file(tok, source, out, "bin", threads=threads, block_size=block_size)
    assert read_ids(out, "bin").tolist() == reference.encode(text)
    assert encoded.bytes_read == len(text.encode("utf-8"))


@pytest.mark.parametrize("threads", THREADS)
def test_every_block_size_around_special_tokens(tok, reference, tmp_path, threads):
    text = f"Hi, there.{EOT}{EOT}x<|e{EOT}Grüße, you!\n\nok{EOT}"
    source = tmp_path / "in.txt"
    source.write_text(text, encoding="utf-8")
    expected = reference.encode(text)
    for block_size in range(1, len(text.encode()) + 2):
        out = tmp_path / "ids.npy"
        encode_file(tok, source, out, "npy", threads=threads, block_size=block_size)
        assert np.load(out).tolist() == expected, block_size


@pytest.mark.parametrize("output_format", ["npy", "bin"])
@pytest.mark.parametrize("threads", ["1", "3"])
def test_invalid_utf8_names_the_byte_offset_and_writes_nothing(gpt2_dir, tmp_path, output_format, threads):
    good = ("Hello, wörld. " * 50 + EOT).encode()
    bad = tmp_path / "bad.txt"
    offset = len(good) * 20 + 7  # in a later block, met on a worker thread
    bad.write_bytes(good * 20 + good[:7] + b"\xff" + good * 3)
    out = tmp_path / f"ids.{output_format}"
    result = run(
        "encode",
        "--tokenizer",
        str(gpt2_dir),
        str(bad),
        "--out",
        str(out),
        "--format",
        output_format,
        "--threads",
        threads,
        "--block-size",
        "100",
        "--quiet",
    )
    assert result.returncode == 1
    assert result.stderr.strip() == f"bpe: error: {bad}: not valid UTF-8 at byte offset {offset}"
    assert not out.exists() and not list(tmp_path.glob(".ids*"))


def test_a_character_cut_short_at_the_end(gpt2_dir, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine text, " * 30 + "é".encode()[:1])
    with pytest.raises(CorpusError, match=f"byte offset {11 * 30}$"):
        encode_file(Tokenizer.load(gpt2_dir), bad, tmp_path / "ids.npy", block_size=16)
    assert not (tmp_path / "ids.npy").exists()


def test_bad_arguments(gpt2_dir, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("hello", encoding="utf-8")
    tokenizer = Tokenizer.load(gpt2_dir)
    for options, needle in [({"threads": 0}, "threads"), ({"block_size": 0}, "block_size")]:
        with pytest.raises(ConfigError, match=needle):
            encode_file(tokenizer, source, tmp_path / "ids.npy", **options)
    with pytest.raises(ConfigError, match="'csv'"):
        encode_file(tokenizer, source, tmp_path / "ids.csv", "csv")
    with pytest.raises(CorpusError, match=r"missing.txt: cannot read"):
        encode_file(tokenizer, tmp_path / "missing.txt", tmp_path / "ids.npy")
    assert not (tmp_path / "ids.npy").exists()
    result = run(
        "encode", "--tokenizer", str(gpt2_dir), str(source), "--out", str(tmp_path / "x.bin"), "--threads", "0"
    )
    assert result.returncode == 1 and result.stderr.strip() == "bpe: error: threads must be a positive integer, got 0"


def test_memory_does_not_grow_with_the_file(gpt2_dir, tmp_path):
    """Streaming: a few blocks per thread are held at a time, whatever the file's size."""
    import tracemalloc

    text = require_fixture("kjv.txt").read_bytes()[: 1 << 21]
    tokenizer = Tokenizer.load(gpt2_dir)

    def peak(copies: int) -> int:
        source = tmp_path / f"in{copies}.txt"
        source.write_bytes(text * copies)
        tracemalloc.start()
        try:
            encode_file(tokenizer, source, tmp_path / "ids.bin", "bin", threads=2, block_size=1 << 16)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = peak(1), peak(4)
    assert large < 1.25 * small + (1 << 20), (small, large)
    assert large < 8 << 20, large  # the 8 MB file's ids alone would be about 4 MB


def test_a_pipe_is_read_on_the_calling_thread_with_the_same_ids(gpt2_dir, tmp_path):
    """A source that cannot be read at an offset (a FIFO) takes the streaming path: same bytes out."""
    text = ("Grüße, world. " * 40 + EOT + " 日本語\n") * 60
    regular = tmp_path / "in.txt"
    regular.write_text(text, encoding="utf-8")
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(text.encode(),))
    writer.start()
    tokenizer = Tokenizer.load(gpt2_dir)
    try:
        encoded = encode_file(tokenizer, fifo, tmp_path / "pipe.bin", "bin", threads=2, block_size=512)
    finally:
        writer.join()
    encode_file(tokenizer, regular, tmp_path / "file.bin", "bin", threads=2, block_size=512)
    assert (tmp_path / "pipe.bin").read_bytes() == (tmp_path / "file.bin").read_bytes()
    assert read_ids(tmp_path / "pipe.bin", "bin").tolist() == tokenizer.encode(text)
    assert encoded.bytes_read == len(text.encode())


@pytest.mark.parametrize("output_format", ["npy", "bin"])
def test_the_output_is_synced_as_it_grows_and_stays_whole(gpt2_dir, tmp_path, monkeypatch, output_format):
    """With a small flush threshold, fdatasync runs on the flusher thread while pieces are still
    being written, and the file is still byte for byte the ids of the whole text."""
    from bpe_impls.encoding import encode_file as module

    synced = []

    def record(fd: int) -> None:
        synced.append(os.fstat(fd).st_size)

    monkeypatch.setattr(module, "_FLUSH_BYTES", 64)
    monkeypatch.setattr(module, "_DATASYNC", record)
    text = ("Hello, world. " * 30 + EOT) * 40
    source = tmp_path / "in.txt"
    source.write_text(text, encoding="utf-8")
    out = tmp_path / f"ids.{output_format}"
    tokenizer = Tokenizer.load(gpt2_dir)
    encode_file(tokenizer, source, out, output_format, threads=2, block_size=256)
    assert len(synced) >= 2 and 0 < min(synced) < out.stat().st_size  # mid-way, not only at the end
    assert read_ids(out, output_format).tolist() == tokenizer.encode(text)


def test_a_file_that_shrinks_while_read_is_named_and_nothing_is_written(gpt2_dir, tmp_path, monkeypatch):
    from bpe_impls.encoding import encode_file as module

    source = tmp_path / "in.txt"
    source.write_text("Hello, world. " * 400, encoding="utf-8")
    real = module.iter_piece_bounds

    def shrinking(*args):  # the file is cut to 3000 bytes once its pieces are planned, before they are read
        bounds = list(real(*args))
        os.truncate(source, 3000)
        return iter(bounds)

    monkeypatch.setattr(module, "iter_piece_bounds", shrinking)
    out = tmp_path / "ids.bin"
    with pytest.raises(CorpusError) as caught:
        encode_file(Tokenizer.load(gpt2_dir), source, out, "bin", threads=2, block_size=1000)
    # A piece is named: one read after the file changed, with its new size (the pieces are read
    # in parallel, so which comes first varies), or the piece across the new end, with the bytes
    # it got up to there.
    message = str(caught.value)
    resized = re.fullmatch(
        r".*in\.txt bytes (\d+)-(\d+): file changed while encoding \(now 3000 bytes, was 5600\)", message
    )
    short = re.fullmatch(
        r".*in\.txt bytes (\d+)-(\d+): file changed while encoding \(read (\d+) of (\d+) bytes\)", message
    )
    assert resized or short, message
    if short:
        start, end, got, size = map(int, short.groups())
        assert start < 3000 < end and (got, size) == (3000 - start, end - start)
    assert not out.exists() and not list(tmp_path.glob(".ids*"))


class _ChangingBar:
    """Stands in for the CLI's progress bar: on the first progress report (the first piece written, an
    event of the run itself, not a delay) it calls `change`, once."""

    change: Callable[[], None] = staticmethod(lambda: None)

    def __init__(self, *args, **kwargs):
        self.calls = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False

    def update(self, nbytes: int) -> None:
        self.calls += 1
        if self.calls == 1:
            type(self).change()


def _replace_with_other_file(source: Path) -> None:
    other = source.with_name("other.txt")
    other.write_bytes(source.read_bytes().replace(b"Hello", b"Jello"))  # same size, other text
    os.replace(other, source)  # as log rotation or a sync tool does


def _overwrite_in_place(source: Path) -> None:
    with open(source, "r+b") as file:
        file.write(b"Jello")  # same size, same file


@pytest.mark.parametrize(
    ("change", "how"), [(_replace_with_other_file, "replaced by another file"), (_overwrite_in_place, "modified")]
)
@pytest.mark.parametrize("threads", ["1", "2"])
def test_an_input_changed_during_encode_is_an_error_and_nothing_is_written(
    gpt2_dir, tmp_path, monkeypatch, capsys, change, how, threads
):
    source = tmp_path / "in.txt"
    source.write_text(("Hello, world. " * 30 + EOT) * 400, encoding="utf-8")
    past = source.stat().st_mtime_ns - 10**10
    os.utime(source, ns=(past, past))  # so a write now changes the time, however coarse the clock
    out = tmp_path / "ids.bin"
    monkeypatch.setattr(_ChangingBar, "change", staticmethod(lambda: change(source)))
    monkeypatch.setattr(cli, "progress_bar", _ChangingBar)
    code = cli.main(
        [
            "encode",
            "--tokenizer",
            str(gpt2_dir),
            str(source),
            "--out",
            str(out),
            "--threads",
            threads,
            "--block-size",
            "4096",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 1, err
    assert re.fullmatch(
        rf"bpe: error: {re.escape(str(source))}( bytes \d+-\d+)?: file changed while encoding "
        rf"\({how}\)",
        err,
    ), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]  # no output, no temp file


def test_a_failed_background_sync_names_the_target_and_writes_nothing(gpt2_dir, tmp_path, monkeypatch):
    from bpe_impls.encoding import encode_file as module

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(module, "_FLUSH_BYTES", 64)
    monkeypatch.setattr(module, "_DATASYNC", failing)
    source = tmp_path / "in.txt"
    source.write_text(("Hello, world. " * 30 + EOT) * 40, encoding="utf-8")
    out = tmp_path / "ids.bin"
    with pytest.raises(OSError) as raised:
        encode_file(Tokenizer.load(gpt2_dir), source, out, "bin", threads=2, block_size=256)
    assert raised.value.filename == str(out) and raised.value.strerror == "Input/output error"
    assert not out.exists() and not list(tmp_path.glob(".ids*"))


@pytest.mark.parametrize("n_merges", [100, 65_536])  # uint16 ids, then uint32 ones (65,793 in all)
def test_encode_then_decode_round_trips_through_bin(tmp_path, n_merges):
    # A big vocab without training one: merge every pair of single bytes (a valid, if odd, BPE).
    special = "<|endoftext|>"
    vocab = {0: special.encode()} | {1 + b: bytes([b]) for b in range(256)}
    merges = [(bytes([a]), bytes([b])) for a in range(256) for b in range(256)][:n_merges]
    vocab |= {257 + i: a + b for i, (a, b) in enumerate(merges)}
    tokenizer = Tokenizer(vocab, merges, [special])
    tok_dir = tmp_path / "tok"
    tokenizer.save(tok_dir)
    text = "héllo wörld, " * 50 + special + " the end"
    source, ids_path, back = tmp_path / "in.txt", tmp_path / "ids.bin", tmp_path / "back.txt"
    source.write_text(text, encoding="utf-8")
    assert run("encode", "--tokenizer", str(tok_dir), str(source), "--out", str(ids_path), "--quiet").returncode == 0
    expected = tokenizer.encode(text, allowed_special="all")
    itemsize = 2 if tokenizer.n_vocab <= 1 << 16 else 4
    assert ids_path.stat().st_size == itemsize * len(expected)
    result = run("decode", "--tokenizer", str(tok_dir), str(ids_path), "--out", str(back), "--quiet")
    assert result.returncode == 0, result.stderr
    assert back.read_text(encoding="utf-8") == text


def test_decode_of_a_bin_with_a_torn_last_id_names_the_size(corpus, tmp_path):
    out = train_dir(corpus, tmp_path / "tok")
    ids = tmp_path / "ids.bin"
    ids.write_bytes(np.array([5, 6, 7], dtype="<u2").tobytes() + b"\x01")
    text = tmp_path / "out.txt"
    result = run("decode", "--tokenizer", str(out), str(ids), "--out", str(text))
    assert_one_line_error(result, "ids.bin", "7 bytes is not a whole number of uint16 ids")
    assert not text.exists()
    # --dtype reads the same bytes as wider ids (here: not a whole number of uint32 either).
    result = run("decode", "--tokenizer", str(out), str(ids), "--dtype", "uint32", "--out", str(text))
    assert_one_line_error(result, "ids.bin", "not a whole number of uint32 ids")


def test_encode_to_dev_stdout_writes_only_the_ids_there(corpus, tmp_path):
    # The ids go through the pipe; the summary line must go to stderr, not into the ids.
    out = train_dir(corpus, tmp_path / "tok")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe_impls",
            "encode",
            "--tokenizer",
            str(out),
            str(corpus),
            "--out",
            "/dev/stdout",
            "--format",
            "bin",
            "--quiet",
        ],
        capture_output=True,
    )
    assert result.returncode == 0, result.stderr
    expected = Tokenizer.load(out).encode(corpus.read_text(encoding="utf-8"), allowed_special="all")
    assert np.frombuffer(result.stdout, dtype="<u2").tolist() == expected
    assert b"wrote /dev/stdout" in result.stderr
