"""Memory budgets, enforced by pytest-memray's `limit_memory` marker (peak heap during the test body).

Enforced by plain `pytest`: since pytest-memray 1.4 (bloomberg/pytest-memray#57, "Ensure tests
marked by memray run even if --memray is not passed") a test carrying one of its markers is
tracked and checked without `--memray`; `--memray` only adds tracking and a report for every
other test. (The usage page's "markers do nothing when the plugin is not enabled" predates that.)
The project requires pytest-memray >= 1.5; if the plugin is missing or disabled, these tests skip
(fail under CI=true) rather than pass without measuring anything.

Fixtures (corpus files, word counts, the tokenizer) are built outside the measured test body.
Corpora come from the seeded generator, so the tests need no shared fixture and the numbers
below are reproducible.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import UNDER_CI

from bpe_impls import IMPLEMENTATIONS, Tokenizer, count_pretokens
from bpe_impls.harness.generators.tinystories import write_corpus

SPECIAL_TOKENS = ["<|endoftext|>"]
MB = 1_000_000
BASE_SIZE = 5 * MB
VOCAB_SIZE = 10_000
# Every trainer but the executable spec (naive takes minutes at this size); new ones join here.
FAST_TRAINERS = [name for name in IMPLEMENTATIONS if name != "naive"]


@pytest.fixture(scope="module", autouse=True)  # module scope: checked before the corpora are built
def _memray_active(request: pytest.FixtureRequest) -> None:
    if request.config.pluginmanager.get_plugin("memray_manager") is None:
        message = "pytest-memray is not installed or is disabled (-p no:memray): pip install -e '.[test]'"
        if UNDER_CI:
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Generated corpora of 1x and 4x BASE_SIZE bytes (the 1x one is a prefix of the 4x one up
    to its last document: the generator's stream does not depend on the requested size)."""
    folder = tmp_path_factory.mktemp("generated")
    return {scale: write_corpus(folder / f"x{scale}.txt", scale * BASE_SIZE) for scale in (1, 4)}


@pytest.fixture(scope="module")
def word_counts(corpora: dict[int, Path]) -> Counter[bytes]:
    counts = count_pretokens(corpora[1], SPECIAL_TOKENS, 1)
    # The training budget below is derived from this count; if the generator changes, re-derive.
    assert 14_000 <= len(counts) <= 18_000, f"{len(counts)} distinct pre-tokens: re-derive TRAIN_BUDGET"
    return counts


@pytest.fixture(scope="module")
def trained(word_counts: Counter[bytes]) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    if not FAST_TRAINERS:
        pytest.skip("no fast trainer registered")
    return IMPLEMENTATIONS[FAST_TRAINERS[0]](word_counts, VOCAB_SIZE, SPECIAL_TOKENS)


# --- streaming encode: a fixed budget, whatever the input size --------------------------------

# encode_iterable keeps the tokenizer's pre-token cache (growing with use, 32-byte slots in the
# compiled encoder: 16k entries at 5 MB, 27k at 20 MB), the current line, the carried-over tail and
# one line's ids. Measured peak: 1.8 MiB at 1x, 2.3 MiB at 4x. Holding the input instead would
# cost its text (5 / 20 MB) plus its ids (1.2M / 5M ids, 8 B each in a list: 10 / 40 MB): over the
# budget at 1x, far over at 4x. Same budget at both sizes: memory does not grow with the input.
# (Arena-level tracking here, pytest-memray's default: the failure modes above are large
# allocations, which memray always sees, and tracing every object would double the run time.)
# pytest-memray reads "MB" as MiB.
ENCODE_BUDGET = "10 MB"


def _count_ids(ids: Iterator[int]) -> int:
    return sum(1 for _ in ids)  # consume and drop, as a streaming caller would


@pytest.mark.limit_memory(ENCODE_BUDGET)
@pytest.mark.parametrize("scale", [1, 4])
def test_encode_iterable_memory_does_not_grow_with_input(corpora, trained, scale: int) -> None:
    tokenizer = Tokenizer(*trained, SPECIAL_TOKENS)
    with open(corpora[scale], encoding="utf-8") as lines:
        n_ids = _count_ids(tokenizer.encode_iterable(lines))
    assert n_ids > scale * BASE_SIZE // 8  # it really encoded everything (~4 bytes per id)


# --- training: a budget from the number of distinct pre-tokens --------------------------------

# The trainers' state is per distinct pre-token (word), never per occurrence. The 5 MB corpus has
# W = 16.1k distinct pre-tokens of 8.3 bytes on average (134.7 KB in all). Per word a trainer keeps
# its symbols (a list or linked nodes: 8-60 B per symbol), its count, and for each of its ~7
# adjacent pairs an entry in the pair -> words index (~40-60 B in a set or list), plus its share of
# the pair counts and the heap/buckets (a tuple key, an int, a heap entry: ~150-250 B per distinct
# pair). That is ~150-250 B per byte of a word, ~1.3-2 KB per word, ~21-32 MB in all.
# Measured peaks (Python objects traced): route_a 20.1 MiB, route_b 17.9, bucket 15.8.
# Budget: 2 KB x W = 32 MB (read as 32 MiB), 1.5x the largest measured. A trainer that kept
# per-occurrence state (the corpus has ~1.2M pre-tokens) or copied the words per merge would not fit.
TRAIN_BUDGET = "32 MB"


@pytest.fixture
def trace_python_objects(request: pytest.FixtureRequest) -> Iterator[None]:
    """Trace every Python object allocation (pytest-memray's --trace-python-allocators) here.

    Without it memray sees only pymalloc's 256 KB arenas, and a trainer reusing arenas that the
    counting fixture freed shows a peak several times too low (route_b: 4 MB instead of 19).
    pytest-memray reads the option when the test body starts, after fixtures are set up.
    """
    option = request.config.option
    before = getattr(option, "trace_python_allocators", None)
    option.trace_python_allocators = True
    yield
    option.trace_python_allocators = before


@pytest.mark.limit_memory(TRAIN_BUDGET)
@pytest.mark.parametrize("impl", FAST_TRAINERS)
def test_training_peak_memory_is_bounded_by_distinct_pretokens(word_counts, trace_python_objects, impl: str) -> None:
    vocab, merges = IMPLEMENTATIONS[impl](word_counts, VOCAB_SIZE, SPECIAL_TOKENS)
    assert len(vocab) == VOCAB_SIZE and len(merges) == VOCAB_SIZE - 257
