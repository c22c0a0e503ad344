"""Profile each trainer's merge phase with memray: one flamegraph per trainer and a peak table.

    python benchmarks/memray_profile.py                   # kjv.txt, vocab 10000, all but naive
    python benchmarks/memray_profile.py --impl naive route_a --corpus corpus.en --vocab-size 1000
    python benchmarks/memray_profile.py --corpus /path/to/text.txt --out-dir /tmp/prof --native

Word counts are prepared once, before any tracking; then each trainer runs inside its own
`memray.Tracker` writing OUT_DIR/<impl>.bin, and `python -m memray flamegraph` turns that into
OUT_DIR/<impl>.html (open it in a browser: the flamegraph shows who held memory at the peak).
The table gives memray's peak heap during the merge phase (the word counts, allocated before
tracking, are not in it), the time under tracking (slower than untracked), and whether the merges
equal the first trainer's. Python's own allocator is traced object by object
(trace_python_allocators): otherwise memray sees only pymalloc's 256 KB arenas, and a trainer
that reuses arenas freed by the counting phase would show a peak several times too low.
`--corpus` takes a shared fixture name (found through bpe_impls.harness.fixtures, env BPE_FIXTURES) or a
file path. Needs memray (`pip install -e '.[bench]'`). Exit status 1 if any trainer's merges
differ from the first one's.

The whole CLI run (counting included) can be profiled without this script:

    python -m memray run -o train.bin -m bpe_impls train ../shared/fixtures/kjv.txt \
        --vocab-size 10000 --special-token '<|endoftext|>' --impl bucket --out /tmp/tok
    python -m memray flamegraph train.bin                 # writes memray-flamegraph-train.html

asv imports this module while discovering benchmarks, so it does nothing at import time and
imports memray only in main().
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

# Same default as the asv suites: the shared fixtures beside this checkout.
os.environ.setdefault("BPE_FIXTURES", str(Path(__file__).resolve().parent.parent.parent / "shared" / "fixtures"))

SPECIAL_TOKENS = ["<|endoftext|>"]


def _resolve_corpus(value: str) -> Path:
    from bpe_impls.harness.fixtures import fixture_path

    path = Path(value)
    if path.is_file():
        return path
    found = fixture_path(value)
    if found is None:
        raise SystemExit(f"corpus {value!r} is neither a file nor a fixture in {os.environ['BPE_FIXTURES']}")
    return found


def build_parser() -> argparse.ArgumentParser:
    from bpe_impls import IMPLEMENTATIONS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="kjv.txt", help="fixture name or file path (default: kjv.txt)")
    parser.add_argument("--vocab-size", type=int, default=10000, help="default: 10000")
    parser.add_argument("--out-dir", type=Path, default=Path("memray-profiles"), help="default: ./memray-profiles")
    parser.add_argument(
        "--impl",
        nargs="+",
        choices=list(IMPLEMENTATIONS),
        metavar="IMPL",
        help=f"trainers to profile, from {', '.join(IMPLEMENTATIONS)} (default: all but naive, "
        "which takes minutes on kjv.txt)",
    )
    parser.add_argument("--native", action="store_true", help="also record native (C) stack frames")
    return parser


def profile(
    impls: Sequence[str], corpus: Path, vocab_size: int, out_dir: Path, native: bool = False
) -> list[tuple[str, int, float, bool]]:
    """Run each trainer under memray; returns (impl, peak bytes, seconds, same merges as the first)."""
    import memray

    from bpe_impls import IMPLEMENTATIONS, count_pretokens

    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    counts = count_pretokens(corpus, SPECIAL_TOKENS)
    print(f"{corpus}: {len(counts)} distinct pre-tokens, counted in {time.perf_counter() - start:.1f} s", flush=True)

    rows = []
    reference = None
    for name in impls:
        bin_path = out_dir / f"{name}.bin"
        bin_path.unlink(missing_ok=True)  # Tracker refuses to overwrite
        print(f"  {name} ...", end=" ", flush=True)
        start = time.perf_counter()
        with memray.Tracker(
            bin_path,
            native_traces=native,
            trace_python_allocators=True,
            file_format=memray.FileFormat.AGGREGATED_ALLOCATIONS,
        ):
            result = IMPLEMENTATIONS[name](counts, vocab_size, SPECIAL_TOKENS)
        seconds = time.perf_counter() - start
        reference = result if reference is None else reference
        metadata = memray.FileReader(bin_path).metadata
        html = out_dir / f"{name}.html"
        # The flamegraph reporter is memray's CLI (its Python API is not public).
        subprocess.run(
            [sys.executable, "-m", "memray", "flamegraph", "-f", "-o", str(html), str(bin_path)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        print(f"{seconds:.1f} s -> {html}", flush=True)
        rows.append((name, metadata.peak_memory, seconds, result == reference))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    from bpe_impls import IMPLEMENTATIONS

    args = build_parser().parse_args(argv)
    impls = args.impl or [name for name in IMPLEMENTATIONS if name != "naive"]
    corpus = _resolve_corpus(args.corpus)
    rows = profile(impls, corpus, args.vocab_size, args.out_dir, args.native)

    print(f"\nmerge phase under memray, {corpus.name}, vocab {args.vocab_size}")
    table = [("impl", "peak MB", "seconds", f"same as {impls[0]}")]
    table += [
        (name, f"{peak / 1e6:.1f}", f"{seconds:.2f}", "yes" if same else "NO") for name, peak, seconds, same in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))))
    return 0 if all(row[3] for row in rows) else 1


if __name__ == "__main__":  # also required: the counting pool starts processes by forkserver
    raise SystemExit(main())
