"""benchmarks/bench_instructions.py: the merge phase's instruction count under valgrind.

What asv relies on: a count that repeats across runs of the same code (so identical commits
compare as equal), that grows with the work (so a slower loop is seen), and a one-line error
when valgrind fails.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_fixture

from bpe_impls import IMPLEMENTATIONS

pytestmark = pytest.mark.skipif(
    shutil.which("valgrind") is None, reason="valgrind is not installed (the instruction counts need it)"
)

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # benchmarks/ as asv imports it: the checkout's root on sys.path
    sys.path.insert(0, str(REPO))
from benchmarks import bench_instructions  # noqa: E402
from benchmarks._common import SPECIAL_TOKENS, word_counts  # noqa: E402


@pytest.fixture(scope="module")
def counts_file(tmp_path_factory) -> str:
    # word_counts needs the whole shared file: skip (fail under CI) here, saying why.
    require_fixture("tinystories_sample.txt")
    path = tmp_path_factory.mktemp("counts") / "sample.counts.pickle"
    path.write_bytes(pickle.dumps(word_counts("tinystories_sample.txt")))
    return str(path)


def _merge_instructions(counts_file: str, vocab_size: int) -> int:
    valgrind = bench_instructions.valgrind_or_skip()
    return bench_instructions.merge_instructions(valgrind, counts_file, "native", vocab_size)


def test_the_count_repeats_and_grows_with_the_merges(counts_file):
    if "native" not in IMPLEMENTATIONS:
        pytest.skip("the compiled trainer is not built")
    fewer = _merge_instructions(counts_file, 300)
    again = _merge_instructions(counts_file, 300)
    more = _merge_instructions(counts_file, 600)
    assert fewer > 0
    assert abs(again - fewer) <= 0.001 * fewer  # the same work: the same count, within 0.1%
    assert more > 1.2 * fewer  # 343 merges against 43


def test_the_script_trains_what_the_trainer_trains(counts_file, tmp_path):
    # The script under valgrind is the benchmark's whole measurement: run it plainly and check it
    # calls the trainer with the counts, vocab size and special tokens asked for.
    out = tmp_path / "merges.pickle"
    script = bench_instructions._SCRIPT.replace(
        "    train(counts, int(sys.argv[3]),", "    result = train(counts, int(sys.argv[3]),"
    )
    script += f"\n    open({str(out)!r}, 'wb').write(pickle.dumps(result))\n"
    subprocess.run(
        [sys.executable, "-c", script, counts_file, "native", "400", "merge"],
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    with open(counts_file, "rb") as f:
        expected = IMPLEMENTATIONS["native"](pickle.load(f), 400, SPECIAL_TOKENS)
    assert pickle.loads(out.read_bytes()) == expected


def test_a_failing_run_is_a_one_line_error(tmp_path):
    valgrind = bench_instructions.valgrind_or_skip()
    missing = str(tmp_path / "absent.pickle")
    with pytest.raises(RuntimeError) as failure:
        bench_instructions.instructions(valgrind, [missing, "native", "300", "load"])
    message = str(failure.value)
    assert "\n" not in message and message.startswith("valgrind exited 1") and "absent.pickle" in message
