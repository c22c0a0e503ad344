"""`bpe encode` (encoding.encode_file): the ids of the whole text, byte for byte the same for every
thread count, block size, encoder and cache size, in .npy and .bin; bad input named, nothing written."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import examples, load_gpt2, require_fixture, require_gpt2_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe_impls import Tokenizer
from bpe_impls.base.errors import ConfigError, CorpusError
from bpe_impls.encoding.encoders import ENCODERS
from bpe_impls import cli
from bpe_impls.encoding.encode_file import encode_file

EOT = "<|endoftext|>"
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


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bpe_impls", *args], capture_output=True, text=True, timeout=300)


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
        assert cli.main(["encode", "--tokenizer", str(gpt2_dir), str(kjv), "--out", str(out), "--format", output_format,
                         "--threads", str(threads), "--block-size", str(1 << 18), "--quiet"]) == 0
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
    result = run("encode", "--tokenizer", str(gpt2_dir), str(bad), "--out", str(out), "--format", output_format,
                 "--threads", threads, "--block-size", "100", "--quiet")
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
    with pytest.raises(CorpusError, match="missing.txt: cannot read"):
        encode_file(tokenizer, tmp_path / "missing.txt", tmp_path / "ids.npy")
    assert not (tmp_path / "ids.npy").exists()
    result = run("encode", "--tokenizer", str(gpt2_dir), str(source), "--out", str(tmp_path / "x.bin"), "--threads", "0")
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
    # the piece across the new end is named, with the bytes it got up to there
    found = re.fullmatch(r".*in\.txt bytes (\d+)-(\d+): file changed while encoding \(read (\d+) of (\d+) bytes\)", str(caught.value))
    assert found, str(caught.value)
    start, end, got, size = map(int, found.groups())
    assert start < 3000 < end and (got, size) == (3000 - start, end - start)
    assert not out.exists() and not list(tmp_path.glob(".ids*"))


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
