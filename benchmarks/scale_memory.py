"""Peak memory of `bpe train` / `bpe encode` / `bpe gen-corpus` at two corpus sizes: is it bounded?

    python benchmarks/scale_memory.py                       # generates 200 MB and 2 GB in --workdir
    python benchmarks/scale_memory.py --small a.txt --big b.txt --impl route_a

Training memory should follow the number of distinct pre-tokens, not the file size: workers read
units of at most UNIT_BYTES and the parent merges each Counter as it arrives. The generated
corpora have nearly the same distinct pre-tokens at 200 MB and 2 GB (see bpe_impls/harness/generators/tinystories.py),
so the ratio of the two training peaks should stay near 1 (target: below 1.5). Encoding and
generation stream, so their peaks should not grow at all.

Each command runs as a subprocess of this script. Its peak memory is measured two ways:
  * the whole process tree (the CLI, the forkserver, the workers it forks, the resource tracker),
    polled with psutil every --interval seconds: the peak of the *sum* of RSS over the tree
    (double-counts pages shared between the forkserver and its children, so it errs high), and
    the largest single process seen;
  * the CLI process's own ru_maxrss from wait4, exact but blind to the workers: they are
    children of the forkserver, which is not reaped by the CLI, so RUSAGE_CHILDREN misses them.
After encoding the big file, ids of pieces encoded separately are compared with the streamed
.npy: a head sample split in two at a document boundary, and the tail from a document boundary.

Not a test: the 2 GB case takes tens of minutes on 2 cores. Needs psutil.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bpe_impls.harness.measure import tree_rss

EOT = "<|endoftext|>"
MB = 2**20


@dataclass
class Measured:
    label: str
    seconds: float
    tree_peak: int  # bytes: peak of the summed RSS of the whole process tree
    largest_peak: int  # bytes: peak RSS of any single process in the tree
    main_maxrss: int  # bytes: ru_maxrss of the command's own process
    samples: int
    stdout: str
    timeline: list[tuple[float, int]]  # (seconds since start, tree RSS bytes) per sample

    def quartiles(self) -> str:
        """Tree RSS at 25/50/75/100% of the run: flat memory shows as equal numbers."""
        points = []
        for fraction in (0.25, 0.5, 0.75, 1.0):
            before = [rss for t, rss in self.timeline if t <= fraction * self.seconds]
            points.append(f"{max(before, default=0) / MB:.0f}")
        return "peak tree RSS by 25/50/75/100% of the run: " + " / ".join(points) + " MB"


def run_measured(label: str, args: list[str], interval: float) -> Measured:
    """Run `python -m bpe_impls ARGS`, polling its tree's memory until it exits."""
    start = time.perf_counter()
    popen = subprocess.Popen([sys.executable, "-m", "bpe_impls", *args], stdout=subprocess.PIPE, text=True)
    import psutil  # imported here: asv imports every module in benchmarks/, psutil may be absent

    root = psutil.Process(popen.pid)
    peaks = {"tree": 0, "largest": 0, "samples": 0}
    timeline: list[tuple[float, int]] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            total, largest = tree_rss(root)
            timeline.append((time.perf_counter() - start, total))
            peaks["tree"] = max(peaks["tree"], total)
            peaks["largest"] = max(peaks["largest"], largest)
            peaks["samples"] += 1
            done.wait(interval)

    sampler = threading.Thread(target=poll, daemon=True)
    sampler.start()
    stdout = popen.stdout.read()  # until the CLI closes it, i.e. exits
    # wait4 rather than Popen.wait: it also returns the child's own resource usage.
    _, status, usage = os.wait4(popen.pid, 0)
    popen.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    if popen.returncode != 0:
        raise SystemExit(f"{label}: `bpe {' '.join(args)}` exited with {popen.returncode}")
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is in KiB on Linux
    return Measured(
        label, seconds, peaks["tree"], peaks["largest"], usage.ru_maxrss * scale, peaks["samples"], stdout, timeline
    )


def document_boundary(file, near: int) -> int:
    """The first offset >= `near` just after a special token (a hard boundary for encoding)."""
    file.seek(near)
    window = file.read(1 << 20)
    found = window.find(EOT.encode())
    if found < 0:
        raise SystemExit(f"no {EOT} within 1 MB after byte {near}")
    return near + found + len(EOT.encode())


def check_pieces(corpus: Path, ids_path: Path, tokenizer_dir: Path, sample_bytes: int) -> str:
    """Encode pieces separately and compare them with the ids the streamed encode wrote."""
    from bpe_impls import Tokenizer

    tokenizer = Tokenizer.load(tokenizer_dir)
    ids = np.load(ids_path, mmap_mode="r")
    size = corpus.stat().st_size
    with open(corpus, "rb") as file:
        middle = document_boundary(file, sample_bytes // 2)
        end = document_boundary(file, sample_bytes)
        tail_start = document_boundary(file, max(0, size - sample_bytes))
        file.seek(0)
        head = file.read(end)
        file.seek(tail_start)
        tail = file.read()
    first = tokenizer.encode(head[:middle].decode("utf-8"))
    second = tokenizer.encode(head[middle:].decode("utf-8"))
    halves = np.array(first + second, dtype=ids.dtype)
    if not np.array_equal(ids[: len(halves)], halves):
        raise SystemExit("MISMATCH: the head, encoded as two halves, differs from the streamed ids")
    tail_ids = np.array(tokenizer.encode(tail.decode("utf-8")), dtype=ids.dtype)
    if not np.array_equal(ids[len(ids) - len(tail_ids) :], tail_ids):
        raise SystemExit("MISMATCH: the tail, encoded alone, differs from the end of the streamed ids")
    return (
        f"pieces equal the whole: head {end / 1e6:.1f} MB split at byte {middle} "
        f"({len(first)} + {len(second)} ids), tail from byte {tail_start} ({len(tail_ids)} ids), "
        f"of {len(ids)} ids in all"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=Path, help="small corpus (default: generate --small-size)")
    parser.add_argument("--big", type=Path, help="big corpus (default: generate --big-size)")
    parser.add_argument("--small-size", default="200MB")
    parser.add_argument("--big-size", default="2GB")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/bpe_scale_memory"),
        help="generated corpora, tokenizers and .npy files go here",
    )
    parser.add_argument("--impl", default=None, help="trainer (default: the package's default, DEFAULT_IMPL)")
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between memory samples")
    parser.add_argument("--sample", type=int, default=8_000_000, help="bytes of head/tail to re-encode in pieces")
    parser.add_argument("--skip-encode", action="store_true")
    parser.add_argument(
        "--tokenizer",
        type=Path,
        default=None,
        help="encode with this tokenizer directory and skip training (default: train on both)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated files (default: delete them)")
    args = parser.parse_args()

    args.workdir.mkdir(parents=True, exist_ok=True)
    generated: list[Path] = []
    results: list[Measured] = []

    def log(measured: Measured) -> None:
        results.append(measured)
        print(
            f"{measured.label:<16} {measured.seconds:9.1f} s  tree peak {measured.tree_peak / MB:8.1f} MB  "
            f"largest process {measured.largest_peak / MB:8.1f} MB  "
            f"main ru_maxrss {measured.main_maxrss / MB:8.1f} MB  ({measured.samples} samples)",
            flush=True,
        )
        print(f"{'':<16} {measured.quartiles()}", flush=True)
        if measured.stdout.strip():
            print(f"{'':<16} {measured.stdout.strip()}", flush=True)

    try:
        corpora = {}
        for name, given, size in (("small", args.small, args.small_size), ("big", args.big, args.big_size)):
            if given is not None:
                corpora[name] = given
                continue
            path = args.workdir / f"corpus_{size}.txt"
            generated.append(path)
            log(
                run_measured(
                    f"gen-corpus {size}",
                    ["gen-corpus", "--size", size, "--seed", "0", str(path), "--quiet"],
                    args.interval,
                )
            )
            corpora[name] = path

        train = {}
        to_train = corpora if args.tokenizer is None else {}
        for name, corpus in to_train.items():
            out = args.workdir / f"tok_{name}"
            generated.append(out)
            command = [
                "train",
                str(corpus),
                "--vocab-size",
                str(args.vocab_size),
                "--special-token",
                EOT,
                "--out",
                str(out),
                "--quiet",
            ]
            if args.impl:
                command += ["--impl", args.impl]
            if args.workers:
                command += ["--workers", str(args.workers)]
            size_mb = corpus.stat().st_size / 1e6
            train[name] = run_measured(f"train {size_mb:.0f} MB", command, args.interval)
            log(train[name])

        encode = {}
        if not args.skip_encode:
            # One tokenizer for both, so only the input size differs.
            tokenizer = args.tokenizer or args.workdir / "tok_small"
            for name, corpus in corpora.items():
                ids = args.workdir / f"ids_{name}.npy"
                generated.append(ids)
                size_mb = corpus.stat().st_size / 1e6
                encode[name] = run_measured(
                    f"encode {size_mb:.0f} MB",
                    ["encode", "--tokenizer", str(tokenizer), str(corpus), "--out", str(ids), "--quiet"],
                    args.interval,
                )
                log(encode[name])
            print(check_pieces(corpora["big"], args.workdir / "ids_big.npy", tokenizer, args.sample), flush=True)

        if encode:
            print(f"encode peak (tree sum) big/small: {encode['big'].tree_peak / encode['small'].tree_peak:.2f}x")
        if not train:
            return 0
        ratio = train["big"].tree_peak / train["small"].tree_peak
        print(
            f"\ntrain peak (tree sum) big/small: {train['big'].tree_peak / MB:.1f} / "
            f"{train['small'].tree_peak / MB:.1f} MB = {ratio:.2f}x (target < 1.5x): "
            f"{'OK' if ratio < 1.5 else 'TOO HIGH'}"
        )
        largest = train["big"].largest_peak / train["small"].largest_peak
        print(f"train peak (largest process) big/small: {largest:.2f}x")
        return 0 if ratio < 1.5 else 1
    finally:
        if not args.keep:
            for path in generated:
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
