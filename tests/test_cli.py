"""The `bpe` command end to end, and its handling of bad input (one line, non-zero exit, no files)."""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import require_gpt2_files

from bpe_impls import IMPLEMENTATIONS, Tokenizer, count_pretokens
from bpe_impls import cli
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
    assert cli.main(["train", str(corpus), "--vocab-size", str(vocab_size), "--special-token", EOT,
                     "--out", str(out), "--quiet"]) == 0
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


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpe: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


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
    result = run("compare", str(corpus), "--vocab-size", "300", "--special-token", EOT, "--impl", "naive",
                 "route_a", "--json", str(report), "--plot", str(picture), "--quiet")
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
    result = run("compare", str(corpus), "--vocab-size", "300", "--special-token", EOT, "--impl", "route_b",
                 "--peers", "--quiet")
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
        rows = list(itertools.takewhile(bool, lines[start + 2:]))
        assert len(rows) >= 3 and all(row.split()[-1] == "yes" for row in rows), rows
    assert any(line.startswith("tiktoken script") for line in lines)
    assert any(line.startswith("pre-tokenize, best of 3:") for line in lines)


def test_iter_documents_splits_on_specials_across_read_blocks(tmp_path):
    from bpe_impls.harness.peers import iter_documents

    docs = ["first doc", "second ünï", "", "third"]
    path = tmp_path / "d.txt"
    path.write_text(EOT.join(docs) + EOT, encoding="utf-8")
    for block in (1, 3, 7, 1000):  # block edges inside special tokens and characters
        assert list(iter_documents(str(path), [EOT], block=block)) == [d for d in docs if d]


def test_special_tokens_may_come_before_the_corpus(corpus, tmp_path):
    out = tmp_path / "tok"
    result = run("train", "--special-token", EOT, "--special-token", "<|pad|>", str(corpus),
                 "--vocab-size", "300", "--out", str(out), "--quiet")
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
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real_find_spec(name, *a))
    started = []
    monkeypatch.setattr(cli, "run_compare", lambda *a, **k: started.append(1))
    assert cli.main(["compare", str(corpus), "--vocab-size", "300", "--plot", str(tmp_path / "r.png"), "--quiet"]) == 1
    assert capsys.readouterr().err.strip() == "bpe: error: --plot needs matplotlib: pip install 'bpe_impls[plot]'"
    assert started == [] and not (tmp_path / "r.png").exists()


def test_missing_peers_are_named_not_silently_dropped(corpus, monkeypatch, capsys):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "rustbpe" else real_find_spec(name, *a))
    monkeypatch.setattr(cli, "run_compare", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
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
