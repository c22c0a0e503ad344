"""Issue 17's multi-thread targets, measured side by side in one run (interleaved, best of N):

    python benchmarks/encode_scaling.py CORPUS [--vocab gpt2|DIR] [--repeat 3]

  * encode_batch_to_numpy of the corpus's lines on 1 and 2 threads (target: 2 threads >= 1.8x
    one), a fresh tokenizer each run (empty caches) and again warm (the same tokenizer's second
    call); with tiktoken's encode_batch(num_threads) and gigatoken's encode_batch beside it;
  * corpus to ids file: `bpe encode --format bin` (encoding.encode_file) on 1 and 2 threads, against
    single-thread encode_to_numpy of the whole text (target: >= 1.8x on 2 cores) and the tiktoken
    script `bpe compare` times (target: faster), with the same threads.

Not a unit test: wall-clock numbers on a shared machine are noisy; report them with the load.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from bpe_impls import Tokenizer
from bpe_impls.harness import compare, peers
from bpe_impls.harness.fixtures import vocab_and_merges

EOT = "<|endoftext|>"


def best(run: Callable[[], object], repeat: int) -> float:
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    return min(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus")
    parser.add_argument("--vocab", default="gpt2", help="gpt2 (GPT-2's files) or a saved tokenizer's directory")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    vocab, merges = vocab_and_merges(args.vocab)
    with open(args.corpus, encoding="utf-8", newline="") as file:
        text = file.read()
    lines = text.splitlines(keepends=True)
    mb = len(text.encode("utf-8")) / 1e6
    print(f"corpus {args.corpus}: {mb:.1f} MB, {len(lines)} lines; load average {os.getloadavg()}")

    def fresh() -> Tokenizer:
        return Tokenizer(vocab, merges, [EOT])

    rows: dict[str, list[float]] = {}
    have_tiktoken, have_gigatoken = peers.installed("tiktoken"), peers.installed("gigatoken")
    tiktoken_enc = peers.tiktoken_encoding(vocab, [EOT], "scaling") if have_tiktoken else None
    for _ in range(args.repeat):  # interleaved rounds: load changes hit every row alike
        for threads in (1, 2):
            warm = fresh()  # built before the clock starts: only the encoding is timed
            rows.setdefault(f"encode_batch_to_numpy fresh, {threads} thread(s)", []).append(
                best(lambda: warm.encode_batch_to_numpy(lines, threads), 1)
            )
            rows.setdefault(f"encode_batch_to_numpy warm, {threads} thread(s)", []).append(
                best(lambda: warm.encode_batch_to_numpy(lines, threads), 1)
            )
            if tiktoken_enc is not None:
                rows.setdefault(f"tiktoken encode_batch, {threads} thread(s)", []).append(
                    best(lambda: tiktoken_enc.encode_batch(lines, num_threads=threads, allowed_special="all"), 1)
                )
            if have_gigatoken:
                giga = peers.gigatoken_tokenizer(vocab, merges, [EOT])
                rows.setdefault(f"gigatoken encode_batch fresh, {threads} thread(s)", []).append(
                    best(lambda: giga.encode_batch(lines, parallel=threads > 1), 1)
                )
        whole = fresh()
        rows.setdefault("encode_to_numpy whole text fresh, 1 thread", []).append(
            best(lambda: whole.encode_to_numpy(text), 1)
        )
        for threads in (1, 2):
            _, _, seconds = compare._file_ours(threads, args.corpus, vocab, merges, [EOT])
            rows.setdefault(f"bpe encode --format bin, {threads} thread(s)", []).append(seconds)
        if have_tiktoken:
            _, _, seconds = compare._file_tiktoken(2, args.corpus, vocab, merges, [EOT])
            rows.setdefault("tiktoken script (read, encode_ordinary_batch, np.tofile), 2 threads", []).append(seconds)
    width = max(map(len, rows))
    for name, seconds in rows.items():
        print(
            f"{name:<{width}}  best {min(seconds):6.3f} s  {mb / min(seconds):7.1f} MB/s  "
            f"(runs: {', '.join(f'{s:.3f}' for s in seconds)})"
        )

    def ratio(a: str, b: str) -> str:
        return f"{min(rows[b]) / min(rows[a]):.2f}x" if a in rows and b in rows else "-"

    print(
        f"batch fresh 2 vs 1 thread: {ratio('encode_batch_to_numpy fresh, 2 thread(s)', 'encode_batch_to_numpy fresh, 1 thread(s)')}"
    )
    print(
        f"batch warm 2 vs 1 thread: {ratio('encode_batch_to_numpy warm, 2 thread(s)', 'encode_batch_to_numpy warm, 1 thread(s)')}"
    )
    print(
        f"bpe encode 2 threads vs encode_to_numpy 1 thread: "
        f"{ratio('bpe encode --format bin, 2 thread(s)', 'encode_to_numpy whole text fresh, 1 thread')}"
    )
    print(
        f"bpe encode 2 vs 1 thread: {ratio('bpe encode --format bin, 2 thread(s)', 'bpe encode --format bin, 1 thread(s)')}"
    )
    print(
        f"bpe encode vs tiktoken script, 2 threads: "
        f"{ratio('bpe encode --format bin, 2 thread(s)', 'tiktoken script (read, encode_ordinary_batch, np.tofile), 2 threads')}"
    )


if __name__ == "__main__":
    main()
