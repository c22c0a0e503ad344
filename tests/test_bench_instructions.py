"""The deterministic benchmarks (benchmarks/bench_instructions.py, bench_heap.py) catch a real change
and stay quiet for identical code, shown without asv through the one runner they share
(benchmarks/_isolated.py): route_a's merge phase (corpus.en, vocab 1000), as it is and planted.

- Work: the planted copy lists the pairs of every word a merge rewrote once more (measured: 15%
  more instructions, 621.9M to 716.1M); its count must exceed the real one by over 5%, while two
  counts of the real code agree to within 0.5% (measured: equal).
- Memory: the planted copy keeps a two-id slice of every word a merge rewrote (measured: 13% more,
  6.00 MB to 6.78 MB by tracemalloc); its peak heap bytes must exceed the real one by over 5%,
  while two real peaks are equal.

Each plant is a scratch script that patches route_a's `_apply_merge` and then runs
benchmarks/_workloads.py as it is, so the only difference is the plant. Without valgrind the
instruction tests skip, except under CI=true, where they fail (CI's host has valgrind).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import UNDER_CI, load_gpt2, require_fixture, require_gpt2_files

from bpe_impls import IMPLEMENTATIONS, count_pretokens
from bpe_impls.encoding.encoders import DEFAULT_ENCODER

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # benchmarks/ as asv imports it: the checkout's root on sys.path
    sys.path.insert(0, str(REPO))
from benchmarks import _isolated, _workloads, bench_heap  # noqa: E402
from benchmarks._common import SPECIAL_TOKENS  # noqa: E402

# route_a on corpus.en's counts at vocab 1000 (743 merges): each count under valgrind takes about
# 10 s of CPU, most of it starting Python and importing (vocab 500 took as long); the whole file
# about 45 s of CPU.
VOCAB = 1000

_PLANT = """
import runpy, sys
from bpe_impls.trainers import inverted_index

real_apply_merge = inverted_index._apply_merge
kept = []


def _apply_merge(best, new, words, counts, pair_counts, index):
    rewritten = list(index[best])
    risen = real_apply_merge(best, new, words, counts, pair_counts, index)
    for w in rewritten:
        if {plant!r} == "work":
            list(zip(words[w], words[w][1:]))  # planted: the rewritten word's pairs listed again
        else:
            kept.append(words[w][:2])  # planted: a slice of every rewritten word kept alive
    return risen


inverted_index._apply_merge = _apply_merge
sys.argv[0] = {workloads!r}
runpy.run_path({workloads!r}, run_name="__main__")
"""


def _planted(tmp_path: Path, plant: str) -> Path:
    """A script that runs benchmarks/_workloads.py with route_a's merge step planted with `plant`."""
    script = tmp_path / f"planted_{plant}.py"
    script.write_text(_PLANT.format(plant=plant, workloads=str(_isolated.WORKLOADS)), encoding="utf-8")
    return script


def _real_twice_and_planted(measure: Callable[[Path], int], planted: Path) -> list[int]:
    """measure(script) for the real workloads twice and the planted script once, concurrently: each
    is a process of its own, and the figures of separate processes do not interact."""
    scripts = [_isolated.WORKLOADS, _isolated.WORKLOADS, planted]
    with ThreadPoolExecutor(len(scripts)) as pool:
        return list(pool.map(measure, scripts))


@pytest.fixture(scope="module")
def merge_args(tmp_path_factory: pytest.TempPathFactory) -> list:
    require_fixture("corpus.en")  # skips (or fails under CI) with the locator's reason
    inputs = _isolated.write_merge_inputs(tmp_path_factory.mktemp("counts"))
    assert inputs is not None
    return [inputs["whole"], "route_a", VOCAB, SPECIAL_TOKENS]


@pytest.fixture(scope="module")
def valgrind() -> str:
    path = shutil.which("valgrind")
    if path is None:
        message = "valgrind is not installed (the instruction counts need it: apt install valgrind)"
        if UNDER_CI:
            pytest.fail(message)
        pytest.skip(message)
    return path


def test_planted_work_is_caught_and_identical_code_is_quiet(valgrind, merge_args, tmp_path):
    real, again, planted = _real_twice_and_planted(
        lambda script: _isolated.work_instructions("merge", merge_args, script=script), _planted(tmp_path, "work")
    )
    assert abs(again - real) <= 0.005 * real, f"identical code: {real:,} then {again:,} instructions"
    assert planted > 1.05 * real, f"planted recount: {planted:,} against {real:,} instructions"


def test_planted_memory_is_caught_and_identical_code_is_quiet(merge_args, tmp_path):
    real, again, planted = _real_twice_and_planted(
        lambda script: _isolated.peak_heap_bytes("merge", merge_args, "tracemalloc", script=script),
        _planted(tmp_path, "memory"),
    )
    assert again == real, f"identical code: {real:,} then {again:,} bytes"
    assert planted > 1.05 * real, f"planted words kept: {planted:,} against {real:,} bytes"


def test_the_workloads_do_what_they_are_named(merge_args):
    # The benchmarks measure these functions' work: each must do what its name says.
    text_path = require_fixture("corpus.en")
    files = [str(path) for path in require_gpt2_files()]
    text = text_path.read_text(encoding="utf-8")
    gpt2 = load_gpt2(SPECIAL_TOKENS)
    expected = gpt2.encode(text)
    args = [files, SPECIAL_TOKENS, None, str(text_path)]
    assert _workloads.encode_cold(*args)() == expected
    assert _workloads.encode_warm(*args)() == expected
    assert _workloads.encode_batch(*args)() == [gpt2.encode(line) for line in text.splitlines(keepends=True)]
    assert _workloads.encode_file(*args)().tokens == len(expected)
    assert _workloads.load(files, SPECIAL_TOKENS, None)().encode(text) == expected
    counts = count_pretokens(text_path, SPECIAL_TOKENS, 1)
    assert _workloads.count(str(text_path), SPECIAL_TOKENS)() == counts
    assert _workloads.merge(*merge_args)() == IMPLEMENTATIONS["route_a"](counts, VOCAB, SPECIAL_TOKENS)


def test_the_heap_suites_run_as_asv_sets_them_up(tmp_path, monkeypatch):
    # What asv does with a suite, without asv: setup_cache in a scratch folder, setup, the track_.
    monkeypatch.chdir(tmp_path)
    merge = bench_heap.MergeHeapMemory()
    merge.setup(merge.setup_cache(), "route_a")
    assert merge.track_merge_peak_bytes(None, "route_a") > 1_000_000
    count = bench_heap.CountHeapMemory()
    count.setup()
    assert count.track_count_peak_bytes() > 100_000
    encode = bench_heap.EncodeHeapMemory()
    encode.setup(encode.setup_cache(), DEFAULT_ENCODER)
    assert encode.tracker == ("memray" if DEFAULT_ENCODER == "native" else "tracemalloc")
    assert encode.track_encode_peak_bytes(None, DEFAULT_ENCODER) > 100_000


def test_a_failing_run_is_a_one_line_error(valgrind, tmp_path):
    missing = str(tmp_path / "absent.pickle")
    with pytest.raises(RuntimeError) as failure:
        _isolated.work_instructions("merge", [missing, "native", 300, SPECIAL_TOKENS])
    message = str(failure.value)
    assert "\n" not in message and message.startswith("merge exited 1") and "absent.pickle" in message
