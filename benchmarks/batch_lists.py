"""encode_batch (lists) against encode_batch_to_numpy on 1 and 2 threads, and encode (one list)
against tiktoken's encode, in one process, runs alternating, medians:

    python benchmarks/batch_lists.py CORPUS [--split eot|lines|LO-HI] [--vocab gpt2|DIR] [--repeat 7]

The corpus is cut into documents on <|endoftext|> (--split eot, the default), into lines, or (LO-HI,
e.g. 100-300) into documents of LO to HI characters each (seeded), <|endoftext|> read as a line end,
and encoded as one batch. Targets: encode_batch on 2 threads >= 1.8x its 1-thread time (as
encode_batch_to_numpy), and encode >= 4x tiktoken's encode. The row "lists from numpy" is the
lists built the way encode_batch built them before it made them in C (ids.tolist(), sliced per
document), for an A/B in the same run. Every call is made once before the clock (a str's UTF-8 is
then made and kept with it, and the caches are warm); a result is freed outside the clock.

Not a unit test: wall-clock numbers on a shared machine are noisy; report them with the load.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import re
import statistics
import time
from collections.abc import Callable
from itertools import pairwise
from typing import NamedTuple

from bpe_impls import Tokenizer
from bpe_impls.harness import peers
from bpe_impls.harness.fixtures import vocab_and_merges

EOT = "<|endoftext|>"


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - start
    del result  # freed outside the clock
    return seconds


def lists_from_numpy(tok: Tokenizer, docs: list[str], threads: int) -> list[list[int]]:
    """encode_batch as it was: the numpy batch, then its ids as ints, sliced per document."""
    ids, offsets = tok.encode_batch_to_numpy(docs, threads)
    flat = ids.tolist()
    collecting = gc.isenabled()
    gc.disable()
    try:
        return [flat[a:b] for a, b in pairwise(offsets.tolist())]
    finally:
        if collecting:
            gc.enable()


class Batch(NamedTuple):
    """measure's figures: seconds per row, and what the batch held."""

    rows: dict[str, list[float]]
    mb: float
    described: str
    documents: int
    tokens: int


def documents(text: str, split: str) -> list[str]:
    """The batch: the text cut as --split says."""
    if split == "eot":
        return [doc for doc in text.split(EOT) if doc]
    if split == "lines":
        return text.splitlines(keepends=True)
    low, high = (int(bound) for bound in split.split("-"))
    flat, rng, docs, start = text.replace(EOT, "\n"), random.Random(0), [], 0
    while start < len(flat):
        end = start + rng.randint(low, high)
        docs.append(flat[start:end])
        start = end
    return docs


def measure(
    corpus: str,
    split: str = "eot",
    vocab_source: str = "gpt2",
    repeat: int = 7,
    whole: bool = True,
    before: bool = True,
) -> Batch:
    """Every row's seconds, `repeat` alternating runs each (after a warm-up run of each), and the
    batch's shape; the paths' lists are checked equal first."""
    vocab, merges = vocab_and_merges(vocab_source)
    with open(corpus, encoding="utf-8", newline="") as file:
        text = file.read()
    docs = documents(text, split)
    mb = sum(len(doc.encode("utf-8")) for doc in docs) / 1e6
    tok = Tokenizer(vocab, merges, [EOT])
    calls: dict[str, Callable[[], object]] = {}
    for threads in (1, 2):  # (1 then 2 within each kind: a round's pair runs back to back)
        calls[f"encode_batch, {threads} thread(s)"] = lambda t=threads: tok.encode_batch(docs, t)
    for threads in (1, 2):
        calls[f"encode_batch_to_numpy, {threads} thread(s)"] = lambda t=threads: tok.encode_batch_to_numpy(docs, t)
    for threads in (1, 2) if before else ():
        calls[f"lists from numpy (before), {threads} thread(s)"] = lambda t=threads: lists_from_numpy(tok, docs, t)
    if whole:
        calls["encode whole text, 1 thread"] = lambda: tok.encode(text)
        if peers.installed("tiktoken"):
            enc = peers.tiktoken_encoding(vocab, [EOT], "batch_lists")
            calls["tiktoken encode whole text, 1 thread"] = lambda: enc.encode(text, allowed_special="all")
    expected = tok.encode_batch(docs, 1)
    assert tok.encode_batch(docs, 2) == expected == lists_from_numpy(tok, docs, 2), "the paths disagree"
    tokens = sum(map(len, expected))
    del expected
    for run in calls.values():
        timed(run)  # warm-up
    described = (
        f"corpus {corpus}: {mb:.1f} MB in {len(docs)} documents ({split}), {tokens} tokens; "
        f"load average before {os.getloadavg()}"
    )
    rows: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeat):  # alternating: a change of load hits every row alike
        for name, run in calls.items():
            rows[name].append(timed(run))
    return Batch(rows, mb, f"{described}, after {os.getloadavg()}", len(docs), tokens)


def paired(rows: dict[str, list[float]], slow: str, fast: str) -> float | None:
    """The median of each round's own ratio slow / fast: a round's two runs share that moment's load."""
    if slow not in rows or fast not in rows:
        return None
    return statistics.median(a / b for a, b in zip(rows[slow], rows[fast]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus")
    parser.add_argument("--split", default="eot", help="eot, lines, or LO-HI characters per document")
    parser.add_argument("--vocab", default="gpt2", help="gpt2 (GPT-2's files) or a saved tokenizer's directory")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-whole", action="store_true", help="skip encode vs tiktoken's encode on the whole text")
    parser.add_argument("--no-before", dest="before", action="store_false", help="skip the lists built from numpy")
    args = parser.parse_args()
    if args.split not in ("eot", "lines") and not re.fullmatch(r"\d+-\d+", args.split):
        parser.error(f"--split {args.split!r}: expected eot, lines or LO-HI (e.g. 100-300)")
    rows, mb, described, _, _ = measure(
        args.corpus, args.split, args.vocab, args.repeat, not args.no_whole, args.before
    )
    print(described)
    width = max(map(len, rows))
    for name, seconds in rows.items():
        median = statistics.median(seconds)
        print(
            f"{name:<{width}}  median {median:6.3f} s  {mb / median:7.1f} MB/s  "
            f"(runs: {', '.join(f'{s:.3f}' for s in seconds)})"
        )

    def ratio(slow: str, fast: str) -> str:
        return (
            f"{statistics.median(rows[slow]) / statistics.median(rows[fast]):.2f}x"
            if slow in rows and fast in rows
            else "-"
        )

    def ratio_of_rounds(slow: str, fast: str) -> str:
        found = paired(rows, slow, fast)
        return "-" if found is None else f"{found:.2f}x"

    for kind in ("encode_batch", "encode_batch_to_numpy", "lists from numpy (before)"):
        one, two = f"{kind}, 1 thread(s)", f"{kind}, 2 thread(s)"
        print(
            f"{kind}: 2 vs 1 thread {ratio(one, two)} (medians), {ratio_of_rounds(one, two)} (median of each round's ratio)"
        )
    print(
        f"encode_batch vs lists from numpy, 1 thread: "
        f"{ratio('lists from numpy (before), 1 thread(s)', 'encode_batch, 1 thread(s)')}; 2 threads: "
        f"{ratio('lists from numpy (before), 2 thread(s)', 'encode_batch, 2 thread(s)')}"
    )
    print(f"encode vs tiktoken encode: {ratio('tiktoken encode whole text, 1 thread', 'encode whole text, 1 thread')}")


if __name__ == "__main__":
    main()
