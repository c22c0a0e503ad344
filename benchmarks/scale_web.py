"""Training at web scale: time, peak memory and distinct pre-tokens for ours and the peers.

    python benchmarks/scale_web.py                                   # 0.25, 1 and 4 GB of `--style web`
    python benchmarks/scale_web.py --sizes 0.25GB,1GB --json scale.json --markdown scale.md
    python benchmarks/scale_web.py --corpus a.txt --corpus b.txt     # your own corpora instead

For each corpus (generated with bpe_impls.harness.generators.web, seed 0, in --workdir, reused if already
there) it counts the distinct GPT-2 pre-tokens (in a subprocess), then trains at --vocab-size
with `bpe train` (the default trainer) and each peer (HF tokenizers, gigatoken, rustbpe through
bpe_impls.harness.peers.TRAIN_PEERS), each in a fresh subprocess. Seconds are wall time from start
to exit (interpreter start and imports included, the same for all). Peak MB is the highest
summed RSS of the run's whole process tree, polled every --interval seconds with psutil (it
double-counts pages shared between forked workers, so it errs high for ours).

Memory guard, so one run cannot take the (shared) machine down:
  * before a run, its peak is predicted from its bytes per distinct pre-token at the largest
    smaller corpus it finished (peak / distinct, which also scales the interpreter's baseline, so
    it errs high); if prediction x --margin exceeds the available memory
    (psutil.virtual_memory().available, or --available), the run is skipped and the table says so.
    A trainer killed at a smaller size is skipped at the larger ones.
  * while it runs, its tree RSS is polled; crossing --ceiling (default: 90% of the memory
    available when the benchmark started) kills the run's process group: "killed at N GB".

Not a test (4 GB takes tens of minutes); tests/test_scale_web.py runs it at 2 and 8 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bpe_impls.harness.generators.common import parse_size
from bpe_impls.harness.generators.web import GENERATOR_VERSION, write_corpus
from bpe_impls.harness.measure import tree_rss
from bpe_impls.harness.peers import TRAIN_PEERS, installed

EOT = "<|endoftext|>"
MB = 2**20
GB = 2**30
OURS = "bpe_impls"

# Run in a fresh interpreter: print the number of distinct pre-tokens of a corpus.
_COUNT = """
import sys
from bpe_impls.corpus import count_pretokens
print(len(count_pretokens(sys.argv[1], [sys.argv[2]])))
"""
# Run in a fresh interpreter: train one peer on a corpus.
_TRAIN_PEER = """
import sys
from bpe_impls.harness.peers import train_peer
name, path, vocab_size, special = sys.argv[1:5]
print("merges", train_peer(name, path, int(vocab_size), [special]))
"""


@dataclass
class Row:
    corpus: str
    size_bytes: int
    distinct: int
    trainer: str
    status: str  # "ok", "skipped", "killed", "failed"
    seconds: float | None = None
    peak_bytes: int | None = None
    note: str = ""

    @property
    def bytes_per_distinct(self) -> float | None:
        return None if self.peak_bytes is None or not self.distinct else self.peak_bytes / self.distinct


@dataclass
class Run:
    returncode: int | None
    seconds: float
    peak_bytes: int
    killed: bool
    log: Path


@dataclass
class Report:
    command: str
    vocab_size: int
    machine: dict
    rows: list[Row] = field(default_factory=list)


def run_guarded(command: list[str], ceiling: int, interval: float, log: Path) -> Run:
    """Run `command` in its own process group, polling its tree's RSS; kill the group above `ceiling`."""
    import psutil  # imported here: asv imports every module in benchmarks/, psutil may be absent

    start = time.perf_counter()
    with open(log, "wb") as output:
        popen = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    root = psutil.Process(popen.pid)
    state = {"peak": 0, "killed": False}
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            total, _ = tree_rss(root)
            state["peak"] = max(state["peak"], total)
            if total > ceiling and not state["killed"]:
                state["killed"] = True
                try:
                    os.killpg(popen.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            done.wait(interval)

    sampler = threading.Thread(target=poll, daemon=True)
    sampler.start()
    returncode = popen.wait()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    try:  # workers left behind by a killed run
        os.killpg(popen.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return Run(returncode, seconds, state["peak"], state["killed"], log)


def train_command(trainer: str, corpus: Path, vocab_size: int, out: Path) -> list[str]:
    if trainer == OURS:
        return [
            sys.executable,
            "-m",
            "bpe_impls",
            "train",
            str(corpus),
            "--vocab-size",
            str(vocab_size),
            "--special-token",
            EOT,
            "--out",
            str(out),
            "--quiet",
        ]
    return [sys.executable, "-c", _TRAIN_PEER, trainer, str(corpus), str(vocab_size), EOT]


def count_distinct(corpus: Path) -> int:
    done = subprocess.run([sys.executable, "-c", _COUNT, str(corpus), EOT], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[-1])


def predict_peak(history: list[Row], distinct: int) -> int | None:
    """Peak predicted from bytes per distinct pre-token at the largest corpus this trainer finished."""
    finished = [row for row in history if row.status == "ok" and row.distinct]
    if not finished:
        return None
    last = max(finished, key=lambda row: row.size_bytes)
    return int(last.peak_bytes / last.distinct * distinct)


def _gb(nbytes: float) -> str:
    return f"{nbytes / GB:.1f} GB" if nbytes >= GB else f"{nbytes / MB:.0f} MB"


def benchmark(
    corpora: list[Path],
    trainers: list[str],
    vocab_size: int,
    *,
    available: int,
    ceiling: int,
    margin: float,
    interval: float,
    workdir: Path,
    report: Report,
    log=print,
) -> Report:
    history: dict[str, list[Row]] = {name: [] for name in trainers}
    for corpus in corpora:
        size = corpus.stat().st_size
        distinct = count_distinct(corpus)
        log(f"{corpus.name}: {size / 1e6:.0f} MB, {distinct:,} distinct pre-tokens")
        for trainer in trainers:
            row = Row(str(corpus), size, distinct, trainer, "skipped")
            mine = history[trainer]
            predicted = predict_peak(mine, distinct)
            if any(old.status == "killed" for old in mine):
                row.note = "killed at a smaller size"
            elif predicted is not None and predicted * margin > available:
                row.note = f"predicted peak {_gb(predicted)} x {margin} > available {_gb(available)}"
            else:
                out = workdir / f"tok_{trainer}_{size}"
                run = run_guarded(
                    train_command(trainer, corpus, vocab_size, out),
                    ceiling,
                    interval,
                    workdir / f"log_{trainer}_{size}.txt",
                )
                row.seconds, row.peak_bytes = run.seconds, run.peak_bytes
                if run.killed:
                    row.status, row.note = "killed", f"killed at {_gb(run.peak_bytes)} (ceiling {_gb(ceiling)})"
                elif run.returncode != 0:
                    tail = run.log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
                    row.status, row.note = "failed", f"exit {run.returncode}: {tail[0][:120]}"
                else:
                    row.status = "ok"
                    if predicted is not None:
                        row.note = f"predicted {_gb(predicted)}"
            mine.append(row)
            report.rows.append(row)
            log(format_row(row))
    return report


HEADER = ("corpus MB", "distinct pre-tokens", "trainer", "seconds", "peak MB", "bytes/distinct", "note")


def _cells(row: Row) -> list[str]:
    ran = row.status in ("ok", "killed", "failed")
    note = row.note if row.status == "ok" else f"{row.status}: {row.note}"
    return [
        f"{row.size_bytes / 1e6:.0f}",
        f"{row.distinct:,}",
        row.trainer,
        f"{row.seconds:.1f}" if ran and row.seconds is not None else "-",
        f"{row.peak_bytes / MB:.0f}" if ran and row.peak_bytes is not None else "-",
        f"{row.bytes_per_distinct:.0f}" if row.status == "ok" else "-",
        note,
    ]


def format_row(row: Row) -> str:
    return "  ".join(_cells(row))


def format_table(report: Report) -> str:
    rows = [HEADER, *[_cells(row) for row in report.rows]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i in (2, 6) else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths))
        ).rstrip()
        for r in rows
    )


def format_markdown(report: Report) -> str:
    lines = [
        f"`{report.command}` (vocab {report.vocab_size}; {report.machine['cores']} cores, "
        f"{report.machine['memory_gb']:.0f} GB)",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---:|" * 2 + ":---|" + "---:|" * 3 + ":---|",
    ]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in report.rows]
    return "\n".join(lines) + "\n"


def write_json(report: Report, path: Path) -> None:
    data = asdict(report)
    for row, original in zip(data["rows"], report.rows):
        row["peak_mb"] = None if original.peak_bytes is None else original.peak_bytes / MB
        row["bytes_per_distinct"] = original.bytes_per_distinct
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    import psutil

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0.25GB,1GB,4GB", help="corpus sizes to generate (default: %(default)s)")
    parser.add_argument(
        "--corpus",
        type=Path,
        action="append",
        default=[],
        help="use this corpus (repeatable) instead of generating --sizes",
    )
    parser.add_argument("--style", default="web", help="generator style (web or intl)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/bpe_scale_web"),
        help="generated corpora, tokenizers and logs go here",
    )
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument(
        "--peers",
        default=",".join(TRAIN_PEERS),
        help="peer trainers, comma-separated (default: %(default)s; '' for none)",
    )
    parser.add_argument("--no-ours", action="store_true", help="leave out bpe_impls")
    parser.add_argument(
        "--available", default=None, help="memory a run may use, for the skip prediction (default: psutil's available)"
    )
    parser.add_argument(
        "--ceiling", default=None, help="kill a run whose tree RSS crosses this (default: 90%% of the available memory)"
    )
    parser.add_argument("--margin", type=float, default=1.25, help="skip when predicted peak x margin > available")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between memory samples")
    parser.add_argument("--json", type=Path, default=None, help="write the rows as JSON here")
    parser.add_argument("--markdown", type=Path, default=None, help="write a markdown table (for the README) here")
    parser.add_argument("--keep", action="store_true", help="keep generated corpora and tokenizers")
    args = parser.parse_args(argv)

    available = parse_size(args.available) if args.available else psutil.virtual_memory().available
    ceiling = parse_size(args.ceiling) if args.ceiling else int(0.9 * psutil.virtual_memory().available)
    peers = [name for name in args.peers.split(",") if name]
    unknown = [name for name in peers if name not in TRAIN_PEERS]
    if unknown:
        parser.error(f"unknown peer(s) {', '.join(unknown)}: expected some of {', '.join(TRAIN_PEERS)}")
    missing = [name for name in peers if not installed(TRAIN_PEERS[name].module)]
    if missing:
        print(f"not installed, left out: {', '.join(missing)} (pip install -e '.[peers]')", flush=True)
    trainers = ([] if args.no_ours else [OURS]) + [name for name in peers if name not in missing]

    args.workdir.mkdir(parents=True, exist_ok=True)
    generated: list[Path] = []
    corpora = list(args.corpus)
    if not corpora:
        for text in args.sizes.split(","):
            size = parse_size(text)
            path = args.workdir / f"{args.style}-v{GENERATOR_VERSION}-seed{args.seed}-{size}B.txt"
            if not (path.is_file() and path.stat().st_size == size):
                start = time.perf_counter()
                write_corpus(path, size, args.seed, args.style, progress=sys.stderr.isatty())
                print(f"generated {path} in {time.perf_counter() - start:.1f} s", flush=True)
                generated.append(path)
            corpora.append(path)
    report = Report(
        command="python benchmarks/scale_web.py " + " ".join(map(shlex.quote, sys.argv[1:] if argv is None else argv)),
        vocab_size=args.vocab_size,
        machine={
            "python": platform.python_version(),
            "cores": os.cpu_count(),
            "platform": platform.platform(),
            "memory_gb": psutil.virtual_memory().total / GB,
            "available_gb": available / GB,
            "ceiling_gb": ceiling / GB,
        },
    )
    print(
        f"available for a run {_gb(available)} (skip if predicted x {args.margin} is more), kill above {_gb(ceiling)}",
        flush=True,
    )
    try:
        benchmark(
            corpora,
            trainers,
            args.vocab_size,
            available=available,
            ceiling=ceiling,
            margin=args.margin,
            interval=args.interval,
            workdir=args.workdir,
            report=report,
            log=lambda line: print(line, flush=True),
        )
    finally:
        if not args.keep:
            for path in [*generated, *args.workdir.glob("tok_*")]:
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
    print("\n" + format_table(report))
    if args.json:
        write_json(report, args.json)
    if args.markdown:
        args.markdown.write_text(format_markdown(report), encoding="utf-8")
    return 1 if any(row.status == "failed" for row in report.rows) else 0  # skips and kills are the guard at work


if __name__ == "__main__":
    sys.exit(main())
