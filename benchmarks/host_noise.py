"""How much the host alone moves a timing: one merge, repeated on every core at once, for a while.

    python -m benchmarks.host_noise [--seconds 60] [--impl bucket] [--corpus corpus.en]

Each core (one process pinned to it) runs the same merge phase (corpus.en's word counts, vocab
10000) over and over and records each run's CPU time; nothing else should be running. On a quiet
machine every run is within a few percent of the fastest. On a shared host (a cloud VM whose cores'
siblings belong to other tenants) runs fall into stretches of several seconds that are all slow, and
each core has its own; the report gives the spread and the length of those stretches, which is
what decides how asv must sample (benchmarks/README.md: one sample per round).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from ._common import SPECIAL_TOKENS, trainer_or_skip, word_counts

SLOW = 1.2  # a run this many times the core's fastest counts as slow


def _series(
    core: int, impl: str, corpus: str, vocab_size: int, seconds: float, start: float
) -> list[tuple[float, float]]:
    """(seconds since start, CPU seconds of one merge) for each run on `core`."""
    os.sched_setaffinity(0, {core})
    counts = word_counts(corpus)
    train = trainer_or_skip(impl)
    while time.time() < start:
        time.sleep(0.01)
    runs = []
    while time.time() < start + seconds:
        at = time.time() - start
        began = time.process_time()
        train(counts, vocab_size, SPECIAL_TOKENS)
        runs.append((at, time.process_time() - began))
    return runs


def _stretches(runs: list[tuple[float, float]], fastest: float) -> list[float]:
    """Lengths in seconds of the maximal stretches of consecutive slow runs."""
    lengths, begun = [], None
    for at, took in runs + [(runs[-1][0] + runs[-1][1], 0.0)]:
        slow = took > SLOW * fastest
        if slow and begun is None:
            begun = at
        elif not slow and begun is not None:
            lengths.append(at - begun)
            begun = None
    return lengths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--impl", default="bucket", help="the trainer whose merge is repeated (default bucket: 0.1-0.3 s a run)"
    )
    parser.add_argument("--corpus", default="corpus.en")
    parser.add_argument("--vocab-size", type=int, default=10000)
    args = parser.parse_args(argv)
    cores = sorted(os.sched_getaffinity(0))
    start = time.time() + 3.0  # every process loaded before any starts timing
    with ProcessPoolExecutor(len(cores), mp_context=get_context("spawn")) as pool:
        jobs = [
            pool.submit(_series, core, args.impl, args.corpus, args.vocab_size, args.seconds, start) for core in cores
        ]
        series = [job.result() for job in jobs]
    print(
        f"{args.impl} merge, {args.corpus}, vocab {args.vocab_size}: {args.seconds:.0f} s on each of {len(cores)} cores at once"
    )
    for core, runs in zip(cores, series):
        took = [t for _, t in runs]
        fastest = min(took)
        slow = sum(t > SLOW * fastest for t in took)
        stretches = _stretches(runs, fastest)
        longest = f", slow stretches {min(stretches):.1f}-{max(stretches):.1f} s" if stretches else ""
        print(
            f"core {core}: {len(took)} runs, fastest {fastest * 1e3:.0f} ms, median {statistics.median(took) / fastest:.2f}x, "
            f"slowest {max(took) / fastest:.2f}x; {slow / len(took):.0%} over {SLOW}x the fastest{longest}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
