"""Counting and encoding speed of each split pattern preset against GPT-2's, on one corpus.

    python benchmarks/pattern_speed.py [CORPUS] [--repeat 5]

For each preset: count_pretokens with one worker, and Tokenizer.encode of the whole corpus with a
fresh tokenizer (vocab 10000 trained on the corpus under that pattern); best of --repeat runs,
in MB/s, and the ratio to gpt2's.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bpe_impls import Tokenizer, count_pretokens, train_bpe
from bpe_impls.base.patterns import PRESETS
from bpe_impls.harness.fixtures import fixture_path

SPECIALS = ["<|endoftext|>"]


def best_seconds(run, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=fixture_path("kjv.txt"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    text = args.corpus.read_text(encoding="utf-8")
    megabytes = len(text.encode("utf-8")) / 1e6
    rows = {}
    for name in PRESETS:
        count = best_seconds(lambda: count_pretokens(args.corpus, SPECIALS, 1, pattern=name), args.repeat)
        vocab, merges = train_bpe(args.corpus, 10_000, SPECIALS, pattern=name)
        encoder = Tokenizer(vocab, merges, SPECIALS, pattern=name).encoder
        encode = best_seconds(lambda: Tokenizer(vocab, merges, SPECIALS, pattern=name).encode(text), args.repeat)
        rows[name] = (megabytes / count, megabytes / encode, encoder)
    print(f"{args.corpus.name} ({megabytes:.1f} MB), best of {args.repeat}")
    print(f"{'pattern':8} {'count MB/s':>11} {'x gpt2':>7} {'encode MB/s':>12} {'x gpt2':>7}  encoder")
    base_count, base_encode, _ = rows["gpt2"]
    for name, (count, encode, encoder) in rows.items():
        print(f"{name:8} {count:11.1f} {count / base_count:7.2f} {encode:12.1f} {encode / base_encode:7.2f}  {encoder}")


if __name__ == "__main__":
    main()
