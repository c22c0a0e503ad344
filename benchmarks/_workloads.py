"""The hot paths the deterministic suites measure, run as a script by benchmarks/_isolated.py:

    python -P _workloads.py MODE WORKLOAD ARG...      (each ARG a JSON value)

MODE: "run" (prepare, then the work), "fork" (prepare, then the work in a forked child: for an
instruction count, see main), "tracemalloc" or "memray" (prepare, then the work with the tracker
on; prints the peak heap bytes). A workload is a function here that prepares its inputs and returns
the work as a function of no arguments: what it does before returning is left out of the figures.

Run by path in asv's environment, beside the installed bpe_impls: it imports nothing from
benchmarks/ (not on sys.path there) and imports bpe_impls only inside the workloads (asv imports
this module too, to discover benchmarks).
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

Work = Callable[[], object]


def merge(counts_path: str, impl: str, vocab_size: int, specials: list[str]) -> Work:
    """The trainer's merge phase from pickled pre-token counts."""
    counts = pickle.loads(Path(counts_path).read_bytes())  # (first: a missing file fails at once)
    from bpe_impls import IMPLEMENTATIONS

    train = IMPLEMENTATIONS[impl]
    return lambda: train(counts, vocab_size, specials)


def count(corpus: str, specials: list[str]) -> Work:
    """Pre-tokenizing and counting a file, one worker (in-process)."""
    from bpe_impls import count_pretokens

    return lambda: count_pretokens(corpus, specials, 1)


def _gpt2(files: list[str], specials: list[str], encoder: str | None) -> Any:
    """GPT-2's tokenizer from its files, through the load cache (BPE_CACHE_DIR) when it is on."""
    from bpe_impls import Tokenizer

    return Tokenizer.load(files[0], merges_path=files[1], special_tokens=specials, encoder=encoder)


def load(files: list[str], specials: list[str], encoder: str | None) -> Work:
    """Loading GPT-2's encoder.json and vocab.bpe: parsed (BPE_CACHE_DIR=none) or from the load
    cache (BPE_CACHE_DIR a folder it was filled in)."""
    from bpe_impls import Tokenizer  # noqa: F401  (imported here, as by any caller: not the load's work)
    from bpe_impls.encoding.formats import load as _formats  # noqa: F401  (the first load's import: not its work either)

    return lambda: _gpt2(files, specials, encoder)


def encode_cold(files: list[str], specials: list[str], encoder: str | None, text_path: str) -> Work:
    """`encode` of a text by a fresh tokenizer (empty pre-token cache)."""
    tokenizer = _gpt2(files, specials, encoder)
    text = Path(text_path).read_text(encoding="utf-8")
    return lambda: tokenizer.encode(text)


def encode_warm(files: list[str], specials: list[str], encoder: str | None, text_path: str) -> Work:
    """`encode` of a text the tokenizer has just encoded (its pre-tokens cached)."""
    tokenizer = _gpt2(files, specials, encoder)
    text = Path(text_path).read_text(encoding="utf-8")
    tokenizer.encode(text)
    return lambda: tokenizer.encode(text)


def encode_batch(files: list[str], specials: list[str], encoder: str | None, text_path: str) -> Work:
    """`encode_batch` of a text's lines on one thread, by a fresh tokenizer."""
    tokenizer = _gpt2(files, specials, encoder)
    lines = Path(text_path).read_text(encoding="utf-8").splitlines(keepends=True)
    return lambda: tokenizer.encode_batch(lines, num_threads=1)


def encode_file(files: list[str], specials: list[str], encoder: str | None, text_path: str) -> Work:
    """`bpe encode FILE OUT.npy --threads 1`'s work: bpe_impls.encoding.encode_file on one thread."""
    from bpe_impls.encoding.encode_file import encode_file as encode_to_file

    tokenizer = _gpt2(files, specials, encoder)
    # Removed when the work is dropped or the interpreter exits; in "fork" mode the child removes
    # it first, and the parent's removal finds it gone.
    folder = tempfile.TemporaryDirectory(prefix="bench-encode-", ignore_cleanup_errors=True)
    return lambda: encode_to_file(tokenizer, text_path, Path(folder.name) / "ids.npy", "npy", threads=1)


WORKLOADS: dict[str, Callable[..., Work]] = {
    "merge": merge,
    "count": count,
    "load": load,
    "encode_cold": encode_cold,
    "encode_warm": encode_warm,
    "encode_batch": encode_batch,
    "encode_file": encode_file,
}


def tracemalloc_peak(work: Work) -> int:
    import tracemalloc

    tracemalloc.start()
    work()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def memray_peak(work: Work) -> int:
    import memray

    with tempfile.TemporaryDirectory() as folder:
        capture = Path(folder) / "capture.bin"
        # aggregated: a file of the peak and totals, not every allocation (it stays small)
        with memray.Tracker(capture, file_format=memray.FileFormat.AGGREGATED_ALLOCATIONS):
            work()
        return memray.FileReader(capture).metadata.peak_memory


def main(argv: list[str]) -> None:
    mode, name, *args = argv
    work = WORKLOADS[name](*(json.loads(arg) for arg in args))
    if mode == "run":
        work()
    elif mode == "fork":
        # For an instruction count: the child does the work and the parent only waits for it.
        # Under cachegrind each prints its total when it exits, the child's including everything
        # before the fork, so the child's minus the parent's is the work's own, with the imports
        # and inputs (most of the time under valgrind) prepared once rather than in two runs.
        child = os.fork()
        if child == 0:
            work()
        else:
            if os.waitpid(child, 0)[1]:
                raise SystemExit(1)  # (the child's traceback, printed before, says why)
    elif mode == "tracemalloc":
        print(tracemalloc_peak(work))
    elif mode == "memray":
        print(memray_peak(work))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
