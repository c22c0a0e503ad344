"""Counting pre-tokens of many shards: the local process pool vs Dask, on the same files.

    python benchmarks/dask_vs_local.py                          # 200 MB in 16 JSONL shards, 2 workers
    python benchmarks/dask_vs_local.py --format txt --size 50MB --shards 8 --workers 2
    python benchmarks/dask_vs_local.py --scheduler tcp://10.0.0.1:8786   # Dask on an existing cluster
    python benchmarks/dask_vs_local.py --min-count 2            # also filter rare pre-tokens

Generates a seeded TinyStories-style corpus (bpe_impls/harness/generators/tinystories.py) split at document boundaries
into equal shards (.txt, .jsonl, .jsonl.zst or .parquet; cached in --workdir), then counts it once
with each backend, each in a fresh subprocess so their memory does not mix. For each it prints:
  * seconds: wall time of plan + count, as `bpe train` would spend it (for Dask without
    --scheduler this includes starting and stopping the LocalCluster, a few seconds);
  * driver peak: the counting process's own peak RSS (VmHWM; for Dask with a LocalCluster it
    includes the in-process scheduler, not the workers). Not ru_maxrss: on Linux a child's
    ru_maxrss starts at its parent's RSS at fork/exec time (exec carries the old mm's high-water
    mark over), so it would report this script's memory, not the run's;
  * largest worker: the largest RSS of any other process of the run's tree, sampled with psutil
    every --interval seconds (local: the pool's workers; Dask: the worker processes);
  * distinct pre-tokens, after --min-count; and a digest of the counts, which must be equal.
Then the ratio dask / local of time and driver peak. With --repeat N the backends alternate for N
rounds and the fastest run of each is shown (all run times too): on a shared machine one run of the
same backend can vary by tens of percent, mostly with what else runs.

Not a test: 200 MB takes minutes on 2 cores. Needs psutil, and dask[distributed] (+ pyarrow /
zstandard for those formats).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

EOT = "<|endoftext|>"
MB = 2**20
FORMATS = ("jsonl", "txt", "jsonl.zst", "parquet")


# --- the shards -----------------------------------------------------------------------------------


def _documents(size: int, seed: int):
    """(document text, its UTF-8 size) in order: the generated text split at the separators."""
    from bpe_impls.harness.generators.tinystories import generate_bytes

    tail = b""
    separator = EOT.encode()
    for piece in generate_bytes(size, seed):  # batches of whole documents, each ending at a separator
        parts = (tail + piece).split(separator)
        tail = parts.pop()
        for part in parts:
            yield part.decode("utf-8")
    yield tail.decode("utf-8")


class _ShardWriter:
    def __init__(self, path: Path, fmt: str):
        self.path, self.fmt = path, fmt
        self.tmp = path.with_name(f".{path.name}.tmp")
        self.rows: list[str] = []
        if fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            self.writer = pq.ParquetWriter(self.tmp, pa.schema([("text", pa.string())]))
        else:
            raw = open(self.tmp, "wb")
            if fmt.endswith(".zst"):
                import zstandard

                self.file = zstandard.ZstdCompressor(level=3).stream_writer(raw)
            else:
                self.file = raw
        self.first = True

    def add(self, doc: str) -> None:
        if self.fmt == "parquet":
            self.rows.append(doc)
            if len(self.rows) >= 4096:  # a row group per 4096 documents (~3 MB)
                self._flush_rows()
        elif self.fmt == "txt":
            # A file boundary is a hard boundary, like the separator it replaces at the shard's end.
            self.file.write(((EOT if not self.first else "") + doc).encode())
        else:
            self.file.write((json.dumps({"text": doc}, ensure_ascii=False) + "\n").encode())
        self.first = False

    def _flush_rows(self) -> None:
        import pyarrow as pa

        self.writer.write_table(pa.table({"text": self.rows}))
        self.rows = []

    def close(self) -> None:
        if self.fmt == "parquet":
            if self.rows:
                self._flush_rows()
            self.writer.close()
        else:
            self.file.close()
        os.replace(self.tmp, self.path)


def make_shards(workdir: Path, size: int, shards: int, fmt: str, seed: int) -> Path:
    """The corpus as `shards` files of about size/shards bytes of text each, split between documents."""
    folder = workdir / f"shards-{size}-{shards}-{fmt}-seed{seed}"
    done = folder / "_COMPLETE"  # underscore: not a corpus file to resolve_inputs
    if done.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    index, written, writer = 0, 0, None
    for doc in _documents(size, seed):
        if writer is None:
            writer = _ShardWriter(folder / f"part-{index:05}.{fmt}", fmt)
        writer.add(doc)
        written += len(doc.encode()) + len(EOT)
        if written >= size * (index + 1) / shards and index < shards - 1:
            writer.close()
            writer, index = None, index + 1
    if writer is not None:
        writer.close()
    done.write_text("")
    print(
        f"wrote {index + 1} {fmt} shards ({size / 1e6:.0f} MB of text) to {folder} "
        f"in {time.perf_counter() - start:.0f} s",
        file=sys.stderr,
    )
    return folder


# --- one measured run (in its own process) --------------------------------------------------------


def _own_peak_rss() -> int:
    """This process's peak RSS in bytes: VmHWM where /proc has it (see the module docstring)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def run_one(backend: str, folder: str, workers: int, scheduler: str | None, min_count: int) -> dict:
    """Plan and count; called in a fresh subprocess by main()."""
    from bpe_impls.corpus.local import LocalBackend
    from bpe_impls.corpus.planning import plan_inputs
    from bpe_impls.corpus.tally import drop_rare

    specials = (EOT,)
    start = time.perf_counter()
    units = plan_inputs(folder, specials, workers)
    if backend == "local":
        counts = drop_rare(LocalBackend(workers).count(units, specials), min_count)
    else:
        from bpe_impls.corpus.dask_backend import DaskBackend

        counts = DaskBackend(workers, scheduler).count(units, specials, min_count=min_count)
    seconds = time.perf_counter() - start
    digest = hashlib.sha256()
    for token in sorted(counts):
        digest.update(b"%d:%s:%d;" % (len(token), token, counts[token]))
    return {
        "seconds": seconds,
        "driver_peak": _own_peak_rss(),
        "distinct": len(counts),
        "total": sum(counts.values()),
        "units": len(units),
        "digest": digest.hexdigest()[:16],
    }


def measure(backend: str, args: argparse.Namespace, folder: Path) -> dict:
    """Run one backend in a subprocess, sampling the memory of every other process in its tree."""
    import psutil

    command = [
        sys.executable,
        __file__,
        "--run",
        backend,
        str(folder),
        "--workers",
        str(args.workers),
        "--min-count",
        str(args.min_count),
    ]
    if args.scheduler:
        command += ["--scheduler", args.scheduler]
    popen = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    root = psutil.Process(popen.pid)
    largest = [0]
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            try:
                for proc in root.children(recursive=True):
                    try:
                        largest[0] = max(largest[0], proc.memory_info().rss)
                    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                        pass
            except psutil.NoSuchProcess:
                return
            done.wait(args.interval)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    out, _ = popen.communicate()
    done.set()
    thread.join()
    if popen.returncode != 0:
        raise SystemExit(f"{backend} run failed with status {popen.returncode}")
    result = json.loads(out.strip().splitlines()[-1])
    result["largest_worker"] = largest[0]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="200MB", help="corpus text size (default 200MB)")
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--format", choices=FORMATS, default="jsonl")
    parser.add_argument("--workers", type=int, default=2, help="local pool size and LocalCluster workers")
    parser.add_argument("--scheduler", default=None, help="Dask scheduler address (default: a LocalCluster)")
    parser.add_argument("--min-count", type=int, default=1, help="drop pre-tokens rarer than this (1 = exact)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bpe_dask_bench"))
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between memory samples")
    parser.add_argument(
        "--order",
        choices=["local-first", "dask-first"],
        default="local-first",
        help="which backend runs first in each round",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds of (local, dask); the fastest run of each is reported. On a shared "
        "machine run at least 2: single runs vary by tens of percent",
    )
    parser.add_argument("--run", default=None, help=argparse.SUPPRESS)  # internal: one measured run
    parser.add_argument("folder", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.run:
        print(json.dumps(run_one(args.run, args.folder, args.workers, args.scheduler, args.min_count)))
        return 0

    from bpe_impls.harness.generators.tinystories import parse_size

    size = parse_size(args.size)
    folder = make_shards(args.workdir, size, args.shards, args.format, args.seed)
    runs: dict[str, list[dict]] = {"local": [], "dask": []}
    order = ("local", "dask") if args.order == "local-first" else ("dask", "local")
    for round_ in range(args.repeat):
        for backend in order:
            print(f"round {round_ + 1}: counting with {backend} ...", file=sys.stderr, flush=True)
            runs[backend].append(measure(backend, args, folder))
    results = {name: min(found, key=lambda r: r["seconds"]) for name, found in runs.items()}

    where = args.scheduler or f"LocalCluster, {args.workers} workers"
    print(
        f"corpus: {args.shards} {args.format} shards, {size / 1e6:.0f} MB of text (seed {args.seed}); "
        f"min_pretoken_count {args.min_count}; dask on {where}"
    )
    print(
        f"{'backend':8} {'units':>6} {'seconds':>8} {'driver peak':>12} {'largest worker':>15} "
        f"{'distinct':>9} {'total':>12}  digest            all runs (s)"
    )
    for name, r in results.items():
        every = ", ".join(f"{run['seconds']:.1f}" for run in runs[name])
        print(
            f"{name:8} {r['units']:6} {r['seconds']:8.1f} {r['driver_peak'] / MB:9.0f} MB "
            f"{r['largest_worker'] / MB:12.0f} MB {r['distinct']:9,} {r['total']:12,}  {r['digest']}  {every}"
        )
    local, dask = results["local"], results["dask"]
    same = len({run["digest"] for found in runs.values() for run in found}) == 1
    print(
        f"dask / local: time {dask['seconds'] / local['seconds']:.2f}x, "
        f"driver peak {dask['driver_peak'] / local['driver_peak']:.2f}x; identical counts: {'yes' if same else 'NO'}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
