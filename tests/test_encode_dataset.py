"""`encode_dataset` / `bpe encode INPUT... --out-dir`: a data set to token shards, checked against
tiktoken (GPT-2's vocab, built offline) document by document; the same bytes for every worker
count, block size and interrupted-then-resumed run (Ctrl-C, SIGTERM, SIGKILL); changes refused;
bad records named or skipped and counted; reading back and checksums; the command line.

The packing rule is checked against `expected_layout` below, written from the rule as documented
(a document goes whole into the current shard if it fits; else, if the shard holds ids, into the
next; a document longer than a shard fills shards of exactly shard_tokens), not from the code.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gzip
import io
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error, examples, fixture_text, require_gpt2_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe_impls import Tokenizer, cli
from bpe_impls.base.errors import ConfigError, CorpusError
from bpe_impls.base.patterns import GPT2_PATTERN
from bpe_impls.corpus import SkippedRecordsWarning, planning, units
from bpe_impls.encoding.dataset import (
    MANIFEST_NAME,
    encode_dataset,
    inspect_dataset,
    load_manifest,
    read_document,
    shard_files,
    tokenizer_digest,
)
from bpe_impls.encoding.dataset import encode as encode_module
from bpe_impls.encoding.dataset import run as run_module
from bpe_impls.encoding.dataset import shards as shards_module
from bpe_impls.encoding.formats.gpt2 import load_tokenizer_files

tiktoken = pytest.importorskip("tiktoken")

EOT = "<|endoftext|>"
EOT_ID = 50256
REPO = Path(__file__).resolve().parent.parent
SHARD_TOKENS = 3000


# --- fixtures: GPT-2 twice (ours and tiktoken's), and a mixed data set ---------------------------


@pytest.fixture(scope="module")
def gpt2_parts() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    return load_tokenizer_files(*require_gpt2_files())


@pytest.fixture(scope="module")
def tok(gpt2_parts) -> Tokenizer:
    return Tokenizer(*gpt2_parts, [EOT])


@pytest.fixture(scope="module")
def oracle(gpt2_parts):
    vocab, _ = gpt2_parts
    ranks = {token: token_id for token_id, token in vocab.items() if token_id != EOT_ID}
    return tiktoken.Encoding(
        name="gpt2_local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={EOT: EOT_ID}
    )


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory, tok) -> Path:
    folder = tmp_path_factory.mktemp("gpt2")
    tok.save(folder)
    return folder


SPECIAL_CASES = [
    "",
    EOT,
    f"before{EOT}after",
    "<|endoftext",
    "Ünïcödé ok 🙂 日本語 Ελληνικά",
    "   leading and trailing spaces   ",
    "\n\nnew\nlines\n",
    "tab\tseparated\tvalues",
]


def _lines() -> list[str]:
    """1600 non-blank lines of the KJV (the bundled sample, repeated, where the shared file is absent)."""
    lines = [line for line in fixture_text("kjv.txt").splitlines() if line.strip()]
    return [lines[i % len(lines)] for i in range(1600)]


def write_jsonl(path: Path, docs: list[str], opener=open) -> None:
    with opener(path, "wt", encoding="utf-8") as out:
        for doc in docs:
            out.write(json.dumps({"id": 1, "text": doc}, ensure_ascii=False) + "\n")


def write_corpus(folder: Path) -> list[str]:
    """A directory of every input kind, with long documents (longer than a shard) in JSON Lines
    and in text files; returns the documents in input order (the files sorted by name)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = _lines()
    docs: list[str] = []
    long_record = " ".join(lines[:160])  # ~ 5000 tokens: longer than a shard
    part = [*lines[:300], long_record, *SPECIAL_CASES, *lines[300:500]]
    write_jsonl(folder / "a.jsonl", part)
    docs += part
    part = ["\n".join(lines[i : i + 3]) for i in range(500, 800, 3)]
    write_jsonl(folder / "b.jsonl.gz", part, gzip.open)
    docs += part
    try:
        import zstandard
    except ImportError:
        pass
    else:
        part = lines[800:1000]
        data = "".join(json.dumps({"text": doc}) + "\n" for doc in part).encode()
        (folder / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(data))
        docs += part
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        pass
    else:
        part = [*lines[1000:1300], ""]
        table = pa.table({"text": part, "n": list(range(len(part)))})
        pq.write_table(table, folder / "d.parquet", row_group_size=64)  # several row groups (units)
        docs += part
    text = "\n".join(lines[1300:1600])  # one document, ~ 3 shards long
    (folder / "e.txt").write_text(text, encoding="utf-8")
    docs.append(text)
    small = "A small text file.\n"
    with gzip.open(folder / "f.txt.gz", "wt", encoding="utf-8") as out:
        out.write(small)
    docs.append(small)
    (folder / "g.txt").write_text("", encoding="utf-8")  # an empty file: an empty document
    docs.append("")
    return docs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[str]]:
    folder = tmp_path_factory.mktemp("corpus") / "data"
    return folder, write_corpus(folder)


@pytest.fixture(scope="module")
def expected(corpus, oracle) -> list[list[int]]:
    """Each document's ids as tiktoken gives them, the EOT appended."""
    return [oracle.encode_ordinary(doc) + [EOT_ID] for doc in corpus[1]]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, corpus, tok) -> dict[str, bytes]:
    """An uninterrupted run's shard files and manifest shard entries, on one worker."""
    out = tmp_path_factory.mktemp("reference") / "out"
    encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, workers=1)
    return snapshot(out)


def snapshot(out: Path) -> dict[str, bytes]:
    """Every shard file's bytes, and the manifest's shard entries and totals."""
    files = {name: (out / name).read_bytes() for name in shard_files(out)}
    manifest = json.loads((out / MANIFEST_NAME).read_text(encoding="utf-8"))
    keys = ("shards", "tokens", "documents", "skipped", "complete", "dtype", "eot", "options", "inputs")
    files[MANIFEST_NAME] = json.dumps({key: manifest[key] for key in keys}, sort_keys=True).encode()
    return files


def all_ids(out: Path, dtype=np.uint16) -> np.ndarray:
    manifest = load_manifest(out)
    parts = [np.fromfile(out / entry.bin, dtype=np.dtype(dtype).newbyteorder("<")) for entry in manifest.shards]
    return np.concatenate(parts) if parts else np.empty(0, dtype)


def expected_layout(lengths: list[int], cap: int) -> list[tuple[int, int]]:
    """(ids, documents starting) of each shard, from the documented rule, by simulation."""
    shards: list[list[int]] = []
    used = cap  # no shard open yet: the first document opens one
    for length in lengths:
        if length > cap - used and used > 0:
            shards.append([0, 0])
            used = 0
        if not shards:
            shards.append([0, 0])
            used = 0
        shards[-1][1] += 1
        while length > cap - used:  # only when the document starts an empty shard: longer than one
            shards[-1][0] += cap - used
            length -= cap - used
            shards.append([0, 0])
            used = 0
        shards[-1][0] += length
        used += length
    return [(ids, docs) for ids, docs in shards]


@contextlib.contextmanager
def small_pieces(bytes_: int = 512):
    """Plain files planned into units of about `bytes_`, compressed text read in pieces of that
    size: a text file's one document then reaches the writer in many pieces."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(planning, "UNIT_BYTES", bytes_)
        patch.setattr(units, "PIECE_BYTES", bytes_)
        yield


def temp_files(out: Path) -> list[str]:
    return sorted(name for name in os.listdir(out) if name.endswith(".tmp"))


def assert_consistent(out: Path) -> None:
    """After an interruption: no temp file, and the manifest lists exactly complete shards."""
    assert temp_files(out) == []
    manifest = load_manifest(out)
    assert not manifest.complete
    inspect_dataset(out)  # every listed shard's size and sha256 match
    listed = {name for entry in manifest.shards for name in (entry.bin, entry.idx)}
    assert listed <= set(shard_files(out))


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text, text
    return text


# --- ids: tiktoken's, document by document -----------------------------------------------------


def test_mixed_inputs_equal_tiktoken_document_by_document(corpus, tok, expected, tmp_path):
    folder, docs = corpus
    out = tmp_path / "out"
    manifest = encode_dataset(folder, tok, out, shard_tokens=SHARD_TOKENS, workers=2, block_size=4000)
    assert manifest.complete and manifest.dtype == "uint16" and manifest.eot == EOT_ID
    assert manifest.documents == len(docs) and len(manifest.shards) >= 10
    ids = all_ids(out)
    assert ids.tolist() == [i for doc in expected for i in doc]
    # the packing: as the documented rule packs these lengths
    layout = [(entry.tokens, entry.documents) for entry in manifest.shards]
    assert layout == expected_layout([len(doc) for doc in expected], SHARD_TOKENS)
    assert all(entry.tokens <= SHARD_TOKENS for entry in manifest.shards)
    # each document read back through the .idx files, without its EOT
    for n in [*range(0, len(docs), 37), len(docs) - 3, len(docs) - 2, len(docs) - 1]:
        assert read_document(out, n).tolist() == expected[n][:-1], n
    # the documents longer than a shard span several, whole
    longest = max(range(len(docs)), key=lambda n: len(expected[n]))
    assert len(expected[longest]) > 2 * SHARD_TOKENS
    assert read_document(out, longest).tolist() == expected[longest][:-1]
    # the .idx offsets are where the documents start
    starts = np.cumsum([0] + [len(doc) for doc in expected[:-1]])
    shard_starts = np.cumsum([0] + [entry.tokens for entry in manifest.shards[:-1]])
    found = np.concatenate(
        [np.fromfile(out / entry.idx, dtype="<u8") + base for entry, base in zip(manifest.shards, shard_starts)]
    )
    assert found.tolist() == starts.tolist()
    # the input range each shard covers: the first and last (file, record) of its ids
    where = [(file, record) for file, count in enumerate(_per_file_counts(folder, docs)) for record in range(count)]
    doc_of_id = np.repeat(np.arange(len(docs)), [len(doc) for doc in expected])
    for entry, base in zip(manifest.shards, shard_starts):
        first, last = doc_of_id[base], doc_of_id[base + entry.tokens - 1]
        assert (entry.first.file, entry.first.record) == where[first]
        assert (entry.last.file, entry.last.record) == where[last]
        assert entry.first.token == base - starts[first]
    assert summary_line(inspect_dataset(out)) == (len(manifest.shards), len(docs), len(ids), "uint16", EOT_ID, True)


def _per_file_counts(folder: Path, docs: list[str]) -> list[int]:
    """Documents per input file, in input order (from the corpus writer's layout)."""
    names = sorted(os.listdir(folder))
    lines = _lines()
    counts = {
        "a.jsonl": 300 + 1 + len(SPECIAL_CASES) + 200,
        "b.jsonl.gz": len(range(500, 800, 3)),
        "c.jsonl.zst": 200,
        "d.parquet": 301,
        "e.txt": 1,
        "f.txt.gz": 1,
        "g.txt": 1,
    }
    assert len(lines) == 1600 and sum(counts[name] for name in names) == len(docs)
    return [counts[name] for name in names]


def summary_line(summary) -> tuple:
    return (summary.shards, summary.documents, summary.tokens, summary.dtype, summary.eot, summary.complete)


def test_zstd_and_parquet_inputs_are_read(corpus):
    pytest.importorskip("zstandard", reason="zstandard is not installed: the .jsonl.zst input is not tested")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed: the .parquet input is not tested")
    assert {"c.jsonl.zst", "d.parquet"} <= set(os.listdir(corpus[0]))


@pytest.mark.parametrize(("workers", "block_size"), [(2, 1 << 21), (2, 50), (3, 1), (1, 999)])
def test_the_same_bytes_for_every_worker_count_and_block_size(corpus, tok, reference, tmp_path, workers, block_size):
    out = tmp_path / "out"
    encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, workers=workers, block_size=block_size)
    assert snapshot(out) == reference


@pytest.mark.parametrize("refused", [False, True], ids=["hint-taken", "hint-refused"])
def test_shards_written_back_as_they_grow_are_the_same_bytes(corpus, tok, reference, tmp_path, monkeypatch, refused):
    """The kernel asked to write each shard back as it grows (every _WRITEBACK_BYTES) changes no
    byte; nor does a file system that refuses the hint (posix_fadvise failing): the fsync that
    completes each shard writes it all."""
    if shards_module._START_WRITEBACK is None:
        pytest.skip("not Linux: a shard is written back by its fsync alone, so there is no early writeback to test")
    advised: list[tuple[int, int]] = []
    real = os.posix_fadvise

    def advise(fd: int, offset: int, length: int, advice: int) -> None:
        advised.append((offset, length))
        if refused:
            raise OSError(errno.EINVAL, "Invalid argument")
        real(fd, offset, length, advice)

    monkeypatch.setattr(shards_module, "_WRITEBACK_BYTES", 64)
    monkeypatch.setattr(os, "posix_fadvise", advise)
    encode_dataset(corpus[0], tok, tmp_path / "out", shard_tokens=SHARD_TOKENS, workers=2, block_size=50)
    assert len(advised) > 10 and all(length >= 64 for _, length in advised)
    assert snapshot(tmp_path / "out") == reference


@pytest.mark.parametrize("extra", [0, 40, 400], ids=["fits-a-shard", "just-over", "longer-than-a-shard"])
def test_a_text_document_in_pieces_that_does_not_fit_moves_whole_to_the_next_shard(
    tmp_path, tok, oracle, monkeypatch, extra
):
    data = tmp_path / "data"
    data.mkdir()
    lines = _lines()
    write_jsonl(data / "a.jsonl", lines[:20])
    text = "\n".join(lines[20:120])
    (data / "b.txt").write_text(text, encoding="utf-8")
    encoded = [oracle.encode_ordinary(doc) + [EOT_ID] for doc in [*lines[:20], text]]
    # a shard a little longer than the text document (or shorter): it cannot follow the records
    cap = len(encoded[-1]) - extra + 1 if extra else len(encoded[-1]) + 5
    moves = []
    monkeypatch.setattr(shards_module, "_WRITEBACK_BYTES", 64)  # (the moved ids were asked to be written back)
    real = shards_module.ShardWriter._move_open_document
    monkeypatch.setattr(shards_module.ShardWriter, "_move_open_document", lambda self: (moves.append(1), real(self))[1])
    with small_pieces(256):
        manifest = encode_dataset(data, tok, tmp_path / "out", shard_tokens=cap, workers=3)
    assert moves, "the text document reached the writer in pieces, and moved"
    assert all_ids(tmp_path / "out").tolist() == [i for doc in encoded for i in doc]
    assert [(e.tokens, e.documents) for e in manifest.shards] == expected_layout(list(map(len, encoded)), cap)
    assert read_document(tmp_path / "out", 20).tolist() == encoded[-1][:-1]
    # the same bytes as when the document comes whole
    encode_dataset(data, tok, tmp_path / "whole", shard_tokens=cap, workers=1)
    assert {k: v for k, v in snapshot(tmp_path / "out").items() if k != MANIFEST_NAME} == {
        k: v for k, v in snapshot(tmp_path / "whole").items() if k != MANIFEST_NAME
    }
    assert load_manifest(tmp_path / "out").shards == load_manifest(tmp_path / "whole").shards


def test_eot_choices(tmp_path, tok, oracle, gpt2_parts):
    docs = ["one", "", "two words", EOT]
    write_jsonl(tmp_path / "d.jsonl", docs)
    plain = [oracle.encode_ordinary(doc) for doc in docs]
    for eot, sep in (("none", []), (None, []), (EOT, [EOT_ID]), (13, [13]), ("auto", [EOT_ID])):
        out = tmp_path / f"out-{eot}"
        manifest = encode_dataset(tmp_path / "d.jsonl", tok, out, eot=eot, workers=1)
        assert all_ids(out).tolist() == [i for doc in plain for i in doc + sep], eot
        assert manifest.eot == (sep[0] if sep else None)
        assert [read_document(out, n).tolist() for n in range(len(docs))] == plain
    with pytest.raises(ConfigError) as info:
        encode_dataset(tmp_path / "d.jsonl", tok, tmp_path / "bad", eot="<|nope|>")
    assert "'<|nope|>'" in one_line(info.value) and "not a special token" in str(info.value)
    with pytest.raises(ConfigError, match="not in this tokenizer's vocab"):
        encode_dataset(tmp_path / "d.jsonl", tok, tmp_path / "bad", eot=10**6)
    # a tokenizer without <|endoftext|>: no separator unless one is given
    bare = Tokenizer(*gpt2_parts)
    manifest = encode_dataset(tmp_path / "d.jsonl", bare, tmp_path / "bare")
    assert manifest.eot is None and all_ids(tmp_path / "bare").tolist() == [i for doc in plain for i in doc]


def test_a_vocab_over_65536_ids_writes_uint32(tmp_path):
    vocab = {i: bytes([i]) for i in range(256)} | {70000: b"ab"}
    tokenizer = Tokenizer(vocab, [(b"a", b"b")], [EOT])
    write_jsonl(tmp_path / "d.jsonl", ["abc", "ab ab"])
    manifest = encode_dataset(tmp_path / "d.jsonl", tokenizer, tmp_path / "out", shard_tokens=3)
    eot = tokenizer.special_token_ids[EOT]
    assert manifest.dtype == "uint32" and eot > 65535
    assert all_ids(tmp_path / "out", np.uint32).tolist() == [70000, 99, eot, 70000, 32, 70000, eot]
    assert read_document(tmp_path / "out", 1).tolist() == [70000, 32, 70000]


# --- resuming --------------------------------------------------------------------------------------


def test_a_rerun_of_a_complete_run_keeps_everything(corpus, tok, reference, tmp_path):
    out = tmp_path / "out"
    first = encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, workers=2)
    again = encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, workers=1)
    assert again.kept == len(first.shards) and again == first and snapshot(out) == reference


def interrupted_run(folder: Path, tok: Tokenizer, out: Path, after: int) -> None:
    """A two-worker run into `out` interrupted (KeyboardInterrupt) just after its `after`-th shard
    was published; checked consistent."""
    real = run_module.save_manifest

    def save_then_interrupt(out_dir, manifest):
        real(out_dir, manifest)
        if len(manifest.shards) == after:
            raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run_module, "save_manifest", save_then_interrupt)  # (as each shard is published)
        with pytest.raises(KeyboardInterrupt):
            encode_dataset(folder, tok, out, shard_tokens=SHARD_TOKENS, workers=2, block_size=3000)
    assert_consistent(out)
    assert len(load_manifest(out).shards) == after


@pytest.mark.parametrize("after", [1, 4, 9])
def test_interrupted_after_k_shards_resumes_to_the_same_bytes(corpus, tok, reference, tmp_path, after):
    out = tmp_path / "out"
    interrupted_run(corpus[0], tok, out, after)
    resumed = encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, workers=3)
    assert resumed.kept == after and snapshot(out) == reference


def _count_writes(corpus, tok, tmp_path, monkeypatch) -> int:
    calls = []
    real = shards_module.write_ids
    monkeypatch.setattr(shards_module, "write_ids", lambda file, data: (calls.append(1), real(file, data)))
    encode_dataset(corpus[0], tok, tmp_path / "count", shard_tokens=SHARD_TOKENS, workers=1, block_size=3000)
    monkeypatch.setattr(shards_module, "write_ids", real)
    return len(calls)


@pytest.mark.parametrize("pieces", ["whole", "small"])
def test_interrupted_inside_shard_writes_resumes_to_the_same_bytes(
    corpus, tok, reference, tmp_path, monkeypatch, pieces
):
    if pieces == "small":  # text documents in many pieces: some moved to the next shard, some split
        monkeypatch.setattr(planning, "UNIT_BYTES", 512)
        monkeypatch.setattr(units, "PIECE_BYTES", 512)
    total = _count_writes(corpus, tok, tmp_path, monkeypatch)
    if pieces == "small":
        monkeypatch.setattr(planning, "UNIT_BYTES", 512)
        monkeypatch.setattr(units, "PIECE_BYTES", 512)
    rng = random.Random(39)
    points = sorted({1, 2, total - 1, *rng.sample(range(3, total - 1), 5)})
    real = shards_module.write_ids
    for point in points:
        out = tmp_path / f"out{point}"
        calls = []

        def write_or_interrupt(file, data):
            calls.append(1)
            if len(calls) == point:
                raise KeyboardInterrupt
            real(file, data)

        monkeypatch.setattr(shards_module, "write_ids", write_or_interrupt)
        with pytest.raises(KeyboardInterrupt):
            encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, workers=1, block_size=3000)
        monkeypatch.setattr(shards_module, "write_ids", real)
        assert_consistent(out)
        # resumed with other workers and block sizes: the rule does not depend on them
        encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, workers=2, block_size=777)
        assert snapshot(out) == reference, point


# A child that encodes and stops dead in its n-th shard write (printing "blocked"): the parent
# then kills it (SIGKILL) or terminates it (SIGTERM), so the signal lands mid-shard, every time.
CHILD = textwrap.dedent(
    """
    import sys, threading
    from bpe_impls import Tokenizer
    from bpe_impls.encoding.dataset import encode_dataset
    from bpe_impls.encoding.dataset import shards

    tokenizer_dir, corpus, out, point, shard_tokens, via_cli = sys.argv[1:]
    real, calls = shards.write_ids, []

    def write_then_block(file, data):
        calls.append(1)
        real(file, data)
        if len(calls) == int(point):
            file.flush()
            print("blocked", flush=True)
            threading.Event().wait()

    shards.write_ids = write_then_block
    if via_cli == "1":
        from bpe_impls import cli
        args = ["encode", "--tokenizer", tokenizer_dir, corpus, "--out-dir", out, "--shard-tokens", shard_tokens,
                "--workers", "2", "--quiet"]
        sys.exit(cli.main(args))
    encode_dataset(corpus, Tokenizer.load(tokenizer_dir), out, shard_tokens=int(shard_tokens), workers=2)
    print("finished", flush=True)
    """
)


def _run_child_until_blocked(gpt2_dir: Path, corpus: Path, out: Path, point: int, via_cli: bool) -> subprocess.Popen:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            str(gpt2_dir),
            str(corpus),
            str(out),
            str(point),
            str(SHARD_TOKENS),
            str(int(via_cli)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert child.stdout is not None
    line = child.stdout.readline()  # the observable event: it is inside a shard write
    assert line == "blocked\n", (line, child.stderr.read() if child.stderr else "")
    return child


@pytest.mark.parametrize("point", [3, 17])
def test_killed_with_sigkill_mid_shard_resumes_to_the_same_bytes(corpus, tok, gpt2_dir, reference, tmp_path, point):
    out = tmp_path / "out"
    child = _run_child_until_blocked(gpt2_dir, corpus[0], out, point, via_cli=False)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert temp_files(out), "the killed run left its partial shard behind (nothing could remove it)"
    manifest = load_manifest(out)
    assert not manifest.complete
    inspect_dataset(out)  # the shards it lists are complete
    resumed = encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, workers=2)
    assert resumed.kept == len(manifest.shards)
    assert temp_files(out) == [] and snapshot(out) == reference


@pytest.mark.parametrize("via_cli", [False, True], ids=["api", "cli"])
def test_sigterm_mid_shard_removes_the_partial_shard_then_exits(corpus, tok, gpt2_dir, reference, tmp_path, via_cli):
    out = tmp_path / "out"
    child = _run_child_until_blocked(gpt2_dir, corpus[0], out, 11, via_cli=via_cli)
    child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=60)
    # the API dies by SIGTERM after cleaning up, as the default would; the command exits 128 + 15
    assert child.returncode == (128 + signal.SIGTERM if via_cli else -signal.SIGTERM), stderr
    if via_cli:
        assert stderr.strip() == "bpe: terminated by SIGTERM"
    assert_consistent(out)
    encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, workers=1)
    assert snapshot(out) == reference


def test_a_corrupt_or_missing_shard_is_written_again(corpus, tok, reference, tmp_path):
    out = tmp_path / "out"
    manifest = encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, workers=2)
    target = out / manifest.shards[5].bin
    data = bytearray(target.read_bytes())
    data[10] ^= 1
    target.write_bytes(bytes(data))
    with pytest.raises(CorpusError) as info:
        inspect_dataset(out)
    assert str(target) in one_line(info.value) and "sha256" in str(info.value)
    resumed = encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, workers=2)
    assert resumed.kept == 5 and snapshot(out) == reference
    (out / manifest.shards[2].idx).unlink()
    resumed = encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, workers=1)
    assert resumed.kept == 2 and snapshot(out) == reference


# --- changes refused, overwrite -----------------------------------------------------------------


def test_changed_inputs_options_or_tokenizer_are_refused_naming_them(tmp_path, tok, gpt2_parts):
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "a.jsonl", _lines()[:200])
    write_jsonl(data / "b.jsonl", _lines()[200:400])
    out = tmp_path / "out"
    options = {"shard_tokens": 500, "workers": 2}
    encode_dataset(data, tok, out, **options)
    before = snapshot(out)

    def refused(*needles: str, inputs=data, tokenizer=tok, **changed) -> None:
        with pytest.raises(ConfigError) as info:
            encode_dataset(inputs, tokenizer, out, **{**options, **changed})
        message = one_line(info.value)
        for needle in needles:
            assert needle in message, (needle, message)
        assert "overwrite" in message
        assert snapshot(out) == before  # refused before anything is touched

    refused("shard_tokens", "500 -> 400", shard_tokens=400)
    refused("text_field", text_field="body")
    refused("eot", eot="none")
    refused("tokenizer changed", tokenizer=Tokenizer(*gpt2_parts, [EOT, "<|pad|>"]))
    refused("a.jsonl is no longer one", inputs=data / "b.jsonl")
    write_jsonl(data / "c.jsonl", ["new"])
    refused("c.jsonl is new")
    (data / "c.jsonl").unlink()
    with open(data / "b.jsonl", "a", encoding="utf-8") as out_file:
        out_file.write(json.dumps({"text": "appended"}) + "\n")
    refused(f"input {data / 'b.jsonl'} changed", "size")
    stat = (data / "a.jsonl").stat()
    os.utime(data / "a.jsonl", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    refused(f"input {data / 'a.jsonl'} changed", "modified")
    # overwrite starts over: the new inputs, the new options; the old shards are gone
    manifest = encode_dataset(data, tok, out, shard_tokens=2000, workers=1, overwrite=True)
    assert manifest.kept == 0 and manifest.shard_tokens == 2000
    assert shard_files(out) == sorted(name for e in manifest.shards for name in (e.bin, e.idx))
    assert manifest.documents == 401 and read_document(out, 400).tolist() == tok.encode_ordinary("appended")
    # the same tokenizer from another path (a saved copy): the same digest, so a rerun keeps all
    tok.save(tmp_path / "saved")
    again = encode_dataset(data, tmp_path / "saved", out, shard_tokens=2000, workers=2)
    assert (
        again.kept == len(manifest.shards)
        and tokenizer_digest(Tokenizer.load(tmp_path / "saved")) == again.tokenizer.sha256
    )
    assert again.tokenizer.source == str(tmp_path / "saved") and again.tokenizer.format == "gpt2"


def test_shards_without_a_manifest_or_a_busy_directory_are_refused(tmp_path, tok):
    write_jsonl(tmp_path / "a.jsonl", ["x"])
    out = tmp_path / "out"
    out.mkdir()
    (out / "shard-000000.bin").write_bytes(b"\0\0")
    with pytest.raises(ConfigError, match=r"no manifest\.json; pass overwrite"):
        encode_dataset(tmp_path / "a.jsonl", tok, out)
    (out / "notes.txt").write_text("mine")
    encode_dataset(tmp_path / "a.jsonl", tok, out, overwrite=True)
    assert (out / "notes.txt").read_text() == "mine"  # only our own files are removed
    with open(out / encode_module.LOCK_NAME, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with pytest.raises(ConfigError, match="another encode is writing this directory"):
            encode_dataset(tmp_path / "a.jsonl", tok, out)


# --- bad records -----------------------------------------------------------------------------------


def test_a_bad_record_is_named_and_leaves_no_partial_shard_or_is_skipped_and_counted(tmp_path, tok, oracle):
    data = tmp_path / "data"
    data.mkdir()
    good = _lines()[:600]
    write_jsonl(data / "a.jsonl", good[:300])
    lines = [json.dumps({"text": doc}) for doc in good[300:]]
    lines.insert(150, '{"text": "broken')  # line 151
    lines.insert(200, '{"body": "no text field"}')  # line 201
    (data / "b.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(CorpusError) as info:
        encode_dataset(data, tok, out, shard_tokens=1000, workers=2)
    assert one_line(info.value).startswith(f"{data / 'b.jsonl'}: line 151: not valid JSON")
    assert_consistent(out)
    manifest = load_manifest(out)
    assert manifest.shards, "the shards before the bad record are kept"
    # skipping: rerun (resuming) and a fresh run agree, the two bad records counted
    with pytest.warns(SkippedRecordsWarning, match="skipped 2 bad records"):
        resumed = encode_dataset(data, tok, out, shard_tokens=1000, workers=2, skip_bad_records=True)
    assert resumed.kept == len(manifest.shards) and resumed.complete
    with pytest.warns(SkippedRecordsWarning):
        encode_dataset(data, tok, tmp_path / "fresh", shard_tokens=1000, workers=1, skip_bad_records=True)
    assert snapshot(out) == snapshot(tmp_path / "fresh")
    # the failed run kept exactly the shards complete before line 151 (record 150 of b.jsonl):
    # a shard is closed when the document after it arrives, so those that resume at <= record 149
    fresh = load_manifest(tmp_path / "fresh").shards
    assert manifest.shards == [e for e in fresh if (e.resume.file, e.resume.record) <= (1, 149)]
    assert resumed.skipped.count == 2
    first, second = (message for _, _, message in resumed.skipped.examples)
    assert first.startswith(f"{data / 'b.jsonl'}: line 151: not valid JSON")
    assert second == f"{data / 'b.jsonl'}: line 201: no field 'text' in the record"
    assert all_ids(out).tolist() == [i for doc in good for i in oracle.encode_ordinary(doc) + [EOT_ID]]


@pytest.mark.parametrize("skip", [False, True])
def test_a_bad_parquet_row_is_named_by_row(tmp_path, tok, skip):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["a", None, "c"]}), tmp_path / "d.parquet")
    if not skip:
        with pytest.raises(CorpusError, match=r"d.parquet: row 1 \(row group 0\): column 'text' is null"):
            encode_dataset(tmp_path / "d.parquet", tok, tmp_path / "out")
        assert shard_files(tmp_path / "out") == [] and temp_files(tmp_path / "out") == []
        return
    with pytest.warns(SkippedRecordsWarning):
        manifest = encode_dataset(tmp_path / "d.parquet", tok, tmp_path / "out", skip_bad_records=True)
    assert manifest.skipped.count == 1 and all_ids(tmp_path / "out").tolist() == [64, EOT_ID, 66, EOT_ID]


# --- reading back ------------------------------------------------------------------------------------


def test_read_document_range_and_an_incomplete_run(corpus, tok, expected, tmp_path, monkeypatch):
    out = tmp_path / "out"
    real = run_module.save_manifest

    # interrupted right after the shard that ends inside e.txt's long document
    def save_then_interrupt(out_dir, manifest):
        real(out_dir, manifest)
        if manifest.shards and manifest.shards[-1].resume.token > 0:
            raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "save_manifest", save_then_interrupt)  # (as each shard is published)
    with pytest.raises(KeyboardInterrupt):
        encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, workers=2)
    monkeypatch.undo()
    manifest = load_manifest(out)
    unfinished = manifest.documents - 1  # its last document goes on in shards not written yet
    assert read_document(out, unfinished - 1).tolist() == expected[unfinished - 1][:-1]
    with pytest.raises(ConfigError, match=f"document {unfinished} is out of range"):
        read_document(out, unfinished)
    encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, workers=2)
    assert read_document(out, unfinished).tolist() == expected[unfinished][:-1]
    with pytest.raises(ConfigError, match="out of range"):
        read_document(out, len(expected))
    with pytest.raises(CorpusError, match=r"no manifest\.json"):
        read_document(tmp_path, 0)


# --- the property: any documents, shard size and worker count ------------------------------------

document = st.text(
    alphabet=st.one_of(
        st.sampled_from("ab \n'.!é日"),
        st.characters(exclude_categories=("Cs",)),
    ),
    max_size=30,
) | st.sampled_from([EOT, f"x{EOT}y", "", "hello world", "  "])


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=st.lists(
        st.tuples(st.sampled_from(["jsonl", "jsonl.gz", "txt"]), st.lists(document, max_size=12)),
        min_size=1,
        max_size=3,
    ),
    shard_tokens=st.integers(1, 40),
    workers=st.integers(1, 3),
    block_size=st.sampled_from([1, 7, 1 << 20]),
    eot=st.sampled_from(["auto", None]),
)
def test_property_shards_are_the_documents_encoded_one_by_one(
    tok, oracle, files, shard_tokens, workers, block_size, eot
):
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder, "data")
        data.mkdir()
        docs: list[str] = []
        for k, (kind, texts) in enumerate(files):
            path = data / f"{k:02d}.{kind}"
            if kind == "txt":
                text = "".join(texts)
                path.write_text(text, encoding="utf-8", newline="")
                docs.append(text)
            else:
                write_jsonl(path, texts, gzip.open if kind.endswith(".gz") else open)
                docs += texts
        out = Path(folder, "out")
        manifest = encode_dataset(
            data, tok, out, shard_tokens=shard_tokens, workers=workers, block_size=block_size, eot=eot
        )
        sep = [EOT_ID] if eot == "auto" else []
        encoded = [oracle.encode_ordinary(doc) + sep for doc in docs]
        assert all_ids(out).tolist() == [i for doc in encoded for i in doc]
        assert [(e.tokens, e.documents) for e in manifest.shards] == expected_layout(
            [len(d) for d in encoded], shard_tokens
        )
        assert [read_document(out, n).tolist() for n in range(len(docs))] == [d[: len(d) - len(sep)] for d in encoded]
        # the same bytes when the text files come in pieces of a few bytes, on other workers
        with small_pieces(16):
            encode_dataset(data, tok, Path(folder, "pieces"), shard_tokens=shard_tokens, workers=4 - workers, eot=eot)
        assert snapshot(Path(folder, "pieces")) == snapshot(out)


# --- the command line ------------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bpe_impls", *args], capture_output=True, text=True, timeout=300, cwd=REPO
    )


def test_cli_encode_inspect_decode(corpus, gpt2_dir, gpt2_parts, reference, expected, tmp_path):
    out = tmp_path / "out"
    folder, docs = corpus
    common = ["encode", "--tokenizer", str(gpt2_dir), str(folder), "--out-dir", str(out), "--quiet"]
    result = run_cli(*common, "--shard-tokens", str(SHARD_TOKENS), "--workers", "2")
    assert result.returncode == 0, result.stderr
    assert f"into {len(docs)} documents" in result.stdout and result.stderr == ""
    assert snapshot(out) == reference
    result = run_cli("inspect", str(out))
    assert result.returncode == 0, result.stderr
    assert f"documents   {len(docs)}" in result.stdout and "complete    yes" in result.stdout
    assert "eot         50256 (<|endoftext|>)" in result.stdout and "checksums   ok" in result.stdout
    summary = json.loads(run_cli("inspect", str(out), "--json").stdout)
    assert summary["tokens"] == sum(map(len, expected)) and summary["shards"] == len(load_manifest(out).shards)
    result = run_cli("decode", "--tokenizer", str(gpt2_dir), str(out), "--doc", str(len(docs) - 5))
    assert result.returncode == 0 and result.stdout == docs[-5]
    assert (
        cli.main(["decode", "--tokenizer", str(gpt2_dir), str(out), "--doc", "3", "--out", str(tmp_path / "d.txt")])
        == 0
    )
    assert (tmp_path / "d.txt").read_text(encoding="utf-8") == docs[3]
    # errors: one line, exit 1
    assert_one_line_error(
        run_cli(*common, "--shard-tokens", "100"), "shard_tokens changed (3000 -> 100)", "--overwrite"
    )
    assert_one_line_error(run_cli("decode", "--tokenizer", str(gpt2_dir), str(out), "--doc", "99999"), "out of range")
    target = out / "shard-000002.bin"
    target.write_bytes(b"\1\1" + target.read_bytes()[2:])
    assert_one_line_error(run_cli("inspect", str(out)), str(target), "sha256")
    assert_one_line_error(run_cli("inspect", str(tmp_path)), "no manifest.json")
    other = tmp_path / "other"
    Tokenizer(*gpt2_parts, [EOT, "<|pad|>"]).save(other)
    assert_one_line_error(run_cli("decode", "--tokenizer", str(other), str(out), "--doc", "0"), "not the tokenizer")
    # resumed through the command line, with --overwrite too
    assert run_cli(*common, "--shard-tokens", str(SHARD_TOKENS)).returncode == 0
    assert snapshot(out) == reference
    assert run_cli(*common, "--shard-tokens", "100000", "--overwrite").returncode == 0
    assert all_ids(out).tolist() == [i for doc in expected for i in doc] and len(load_manifest(out).shards) == 1


def test_cli_eot_text_field_and_skip_options(tmp_path, gpt2_dir, oracle):
    data = tmp_path / "d.jsonl"
    data.write_text('{"body": "one"}\n{"body": 2}\n{"body": "three"}\n', encoding="utf-8")
    base = ["encode", "--tokenizer", str(gpt2_dir), str(data), "--text-field", "body", "--quiet"]
    assert_one_line_error(run_cli(*base, "--out-dir", str(tmp_path / "a")), "d.jsonl: line 2: field 'body' is a number")
    result = run_cli(*base, "--out-dir", str(tmp_path / "b"), "--skip-bad-records", "--eot", "none")
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("bpe: warning: skipped 1 bad record: ")
    assert all_ids(tmp_path / "b").tolist() == oracle.encode_ordinary("one") + oracle.encode_ordinary("three")
    result = run_cli(*base, "--out-dir", str(tmp_path / "c"), "--skip-bad-records", "--eot", "13")
    assert all_ids(tmp_path / "c").tolist() == oracle.encode_ordinary("one") + [13] + oracle.encode_ordinary(
        "three"
    ) + [13]
    assert_one_line_error(
        run_cli(*base, "--out-dir", str(tmp_path / "d"), "--eot", "<|x|>"), "eot '<|x|>' is not a special token"
    )


def test_cli_single_file_form_is_unchanged_and_the_forms_do_not_mix(tmp_path, gpt2_dir):
    text = ("Hello, world. " * 40 + EOT) * 20
    source = tmp_path / "in.txt"
    source.write_text(text, encoding="utf-8")
    ids_path = tmp_path / "ids.npy"
    assert cli.main(["encode", "--tokenizer", str(gpt2_dir), str(source), "--out", str(ids_path), "--quiet"]) == 0
    assert np.load(ids_path).tolist() == Tokenizer.load(gpt2_dir).encode(text)  # special tokens as specials there
    raw = tmp_path / "ids.bin"
    result = run_cli(
        "encode", "--tokenizer", str(gpt2_dir), str(source), "--out", str(raw), "--threads", "2", "--block-size", "64"
    )
    assert result.returncode == 0 and "tokens (uint16)" in result.stdout
    assert np.fromfile(raw, dtype="<u2").tolist() == np.load(ids_path).tolist()
    common = ["encode", "--tokenizer", str(gpt2_dir), str(source)]
    assert_one_line_error(run_cli(*common), "needs --out FILE", "--out-dir DIR")
    assert_one_line_error(run_cli(*common, "--out", str(raw), "--workers", "2"), "--workers goes with --out-dir")
    assert_one_line_error(
        run_cli(*common, "--out", str(raw), "--shard-tokens", "9"), "--shard-tokens goes with --out-dir"
    )
    assert_one_line_error(run_cli(*common, str(source), "--out", str(raw)), "--out FILE takes one text file")
    assert_one_line_error(
        run_cli(*common, "--out-dir", str(tmp_path / "o"), "--format", "npy"), "--format goes with --out"
    )
    assert_one_line_error(run_cli(*common, "--out-dir", str(tmp_path / "o"), "--out", str(raw)), "not both")


def test_cli_progress_goes_to_stderr_only_on_a_terminal(tmp_path, gpt2_dir, capsys, monkeypatch):
    write_jsonl(tmp_path / "d.jsonl", ["one", "two"])
    with contextlib.redirect_stderr(io.StringIO()) as err:
        monkeypatch.setattr(err, "isatty", lambda: True, raising=False)
        assert (
            cli.main(
                ["encode", "--tokenizer", str(gpt2_dir), str(tmp_path / "d.jsonl"), "--out-dir", str(tmp_path / "o")]
            )
            == 0
        )
    assert "encode" in err.getvalue() and "100%" in err.getvalue()
    assert "2 documents" in capsys.readouterr().out
