"""asv: instructions executed by the merge phase, counted by valgrind (cachegrind), per trainer.

    track_merge_instructions   the merge phase from corpus.en's word counts at vocab 2000, in
                               instructions (the run with the merge minus the same run without it)

Why a count beside the times: on a shared host the same merge takes 1.0x to 2.3x its best CPU time
from one stretch of 5-50 s to the next (another tenant on the core's sibling; docs/performance.md),
so the time suites need 8 rounds to tell a change from the host. The count of instructions a run
executes does not depend on the machine's load at all: two runs of the same commit agree to 0.01%,
so a change of 10% or more in the work the merge does (an extra pass, a lost shortcut) is flagged
on the first run. It counts work, not time: busy work that made the compiled merge 1.2x slower
added 6% here (cheap instructions, and at vocab 2000 the count includes loading the words and the
first count of pairs), and a change that only adds cache misses does not show; the time suites
see both.

Each count runs a fresh interpreter under `valgrind --tool=cachegrind --cache-sim=no` twice,
concurrently: once loading the word counts and the trainer, once doing the same and then the merge;
the difference is the merge alone. Both run with PYTHONHASHSEED=0, so dict and set layouts are the
same in every run, and with one thread: a second one (tqdm's monitor, once started even for a bar
that is off; bpe_impls/base/progress.py) ran when the scheduler let it and moved the count by 2%.
And without the working directory on sys.path (`python -P`): each import the merge makes lists the
directories on sys.path again when one has changed, so files that other processes wrote into the
working directory during the run (the test suite's, beside it) moved the count by 0.1-0.3%.
About 10-25 s per combination (valgrind runs Python 30-50x slower); skipped, with the reason, where
valgrind is not installed. naive is left out (tens of seconds here).
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ._common import SPECIAL_TOKENS, TRAINERS, skip, trainer_or_skip, word_counts

CORPUS = "corpus.en"
VOCAB = 2000
INSTRUCTION_TRAINERS = [name for name in TRAINERS if name != "naive"] or ["native"]

# Run by the interpreter under valgrind: argv is the counts file, the trainer, the vocab size and
# whether to merge. Everything but the merge is the same in both runs.
_SCRIPT = f"""
import pickle, sys
from bpe_impls import IMPLEMENTATIONS
with open(sys.argv[1], "rb") as counts_file:
    counts = pickle.load(counts_file)
train = IMPLEMENTATIONS[sys.argv[2]]
if sys.argv[4] == "merge":
    train(counts, int(sys.argv[3]), {SPECIAL_TOKENS!r})
"""

_TOTAL = re.compile(r"I\s+refs:\s+([\d,]+)")


def valgrind_or_skip() -> str:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        skip("valgrind is not installed (instruction counts need it: apt install valgrind)")
    return valgrind


def instructions(valgrind: str, args: list[str]) -> int:
    """Instructions executed by `python -c _SCRIPT args...` under cachegrind."""
    command = [
        valgrind,
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        "-P",  # the working directory off sys.path: its listing changes as other processes write there
        "-c",
        _SCRIPT,
        *args,
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    total = _TOTAL.search(done.stderr)
    if done.returncode != 0 or total is None:
        # the interpreter's last word (a traceback's last line), not valgrind's summary after it
        said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith(("==", "--"))]
        raise RuntimeError(f"valgrind exited {done.returncode}: {said[-1] if said else 'no output'}")
    return int(total[1].replace(",", ""))


def merge_instructions(valgrind: str, counts_path: str, impl: str, vocab_size: int) -> int:
    """Instructions of `impl`'s merge phase on the pickled counts: the run with the merge minus
    the run without it."""
    runs = [[counts_path, impl, str(vocab_size), step] for step in ("load", "merge")]
    with ThreadPoolExecutor(2) as pool:  # independent processes: their counts do not interact
        loaded, merged = pool.map(lambda args: instructions(valgrind, args), runs)
    return merged - loaded


class MergeInstructions:
    params = (INSTRUCTION_TRAINERS,)
    param_names = ["impl"]
    unit = "instructions"
    # One round: asv compares a track_ value by --factor alone (no samples, no test), and two
    # runs of one commit agree to about 0.01%, so a second round would add nothing.
    rounds = 1
    timeout = 600

    def setup_cache(self) -> str | None:
        # asv runs setup_cache and the benchmarks in one temporary directory: the counts are
        # written there once per commit and round, for the interpreters under valgrind to load.
        try:
            counts = word_counts(CORPUS)
        except NotImplementedError:
            return None
        path = Path(f"{CORPUS}.counts.pickle").resolve()
        path.write_bytes(pickle.dumps(counts))
        return str(path)

    def setup(self, counts_path: str | None, impl: str) -> None:
        trainer_or_skip(impl)
        if counts_path is None:
            skip(f"fixture {CORPUS} not found")
        self.valgrind = valgrind_or_skip()

    def track_merge_instructions(self, counts_path: str, impl: str) -> int:
        return merge_instructions(self.valgrind, counts_path, impl, VOCAB)
