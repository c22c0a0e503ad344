"""The pytest plugin of `bpe verify`: the contract's clauses as tests, for anyone's implementation.

In a repository with a CS336-style `adapters.py`:

    pytest --pyargs bpe_impls.pytest_plugin --bpe-trainer tests/adapters.py:run_train_bpe \\
        --bpe-tokenizer tests/adapters.py:get_tokenizer

runs one test per clause of the contract (and one on real text), each failing with the shrunk
counterexample, how often it reproduced and a hint (the command's `bpe verify` verdicts, one clause
per test); a clause with nothing to check (a method the tokenizer lacks, the time budget spent)
skips with the reason. This one module is both halves of the plugin:

- the --bpe-* options (pytest_addoption): installing bpe_impls registers this module as a pytest
  plugin (the `pytest11` entry point), so the options exist in any pytest run of that environment;
  `-p bpe_impls.pytest_plugin` names it where plugin autoloading is off;
- the tests below: `--pyargs bpe_impls.pytest_plugin` makes pytest collect this module (a file
  named on the command line is collected whatever its name). Tests whose option is absent skip.

The engine they drive is bpe_impls.harness.verify. Being loaded in every pytest run of an
environment that has bpe_impls, this module imports only the clauses' names (plain data) when it
loads; the engine and Hypothesis are imported when a test here first runs.
"""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# Absolute imports: pytest imports this file as a test module too, under any --import-mode.
from bpe_impls.harness import verify
from bpe_impls.harness.verify import TOKENIZER_CLAUSES, TRAINER_CLAUSES

if TYPE_CHECKING:
    from bpe_impls.harness.verify import SearchSettings, Verification


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("bpe verify", "check a BPE implementation against bpe_impls' contract")
    group.addoption(
        "--bpe-trainer",
        metavar="REF",
        help="run_train_bpe(input_path, vocab_size, special_tokens): module:function or path/to/file.py:function",
    )
    group.addoption("--bpe-tokenizer", metavar="REF", help="get_tokenizer(vocab, merges, special_tokens=None)")
    group.addoption("--bpe-encoder", metavar="NAME|REF", help="an encoder (a peer name or a factory) over --bpe-vocab")
    group.addoption("--bpe-vocab", metavar="PATH", help="the saved tokenizer --bpe-encoder runs over")
    group.addoption("--bpe-max-examples", type=int, default=200, metavar="N", help="generated cases per clause")
    group.addoption("--bpe-seed", type=int, default=0, help="the search's seed")
    group.addoption(
        "--bpe-call-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="a call to the implementation taking longer is a hang",
    )
    group.addoption(
        "--bpe-time-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds for all the --bpe-* tests together; the clauses left when it is spent skip",
    )
    group.addoption(
        "--bpe-strict-ids",
        action="store_true",
        help="hold the trainer's vocab to bpe_impls' layout (special tokens, bytes, merges in order), not only "
        "to its tokens and merges (CS336's contract)",
    )
    group.addoption(
        "--bpe-require-special",
        action="append",
        default=[],
        metavar="TOKEN",
        help="put TOKEN among the special tokens of every case (repeatable), for implementations that demand one",
    )
    group.addoption("--bpe-replays", type=int, default=5, metavar="N", help="fresh runs of each counterexample")
    group.addoption("--bpe-python", metavar="PATH", help="the interpreter the implementation runs under")
    group.addoption("--bpe-corpus", metavar="FILE", help="real text of your own for the real-text tests")


_DEADLINE = pytest.StashKey[float]()


def _option(config: pytest.Config, name: str) -> str:
    value: str | None = config.getoption(name)
    if not value:
        pytest.skip(f"no {name} given")
    return value


def _settings(config: pytest.Config) -> SearchSettings:
    budget: float | None = config.getoption("--bpe-time-budget")
    if budget is not None:
        if not (math.isfinite(budget) and budget >= 0):
            raise pytest.UsageError(f"--bpe-time-budget must be a finite number of seconds >= 0, not {budget}")
        # The budget is the session's: it starts with the first --bpe-* test, and each test gets what is left.
        deadline = config.stash.setdefault(_DEADLINE, time.monotonic() + budget)
        budget = max(0.0, deadline - time.monotonic())
    corpus: str | None = config.getoption("--bpe-corpus")
    return verify.SearchSettings(
        max_examples=config.getoption("--bpe-max-examples"),
        seed=config.getoption("--bpe-seed"),
        time_budget=budget,
        strict_ids=config.getoption("--bpe-strict-ids"),
        replays=config.getoption("--bpe-replays"),
        require_special=tuple(config.getoption("--bpe-require-special")),
        python=config.getoption("--bpe-python"),
        corpus=None if corpus is None else Path(corpus),
    )


def _judge(result: Verification) -> None:
    """Fail with the divergence (its counterexample, replays and hint), skip a clause that checked
    nothing, say the notes (a vocab numbered otherwise than bpe_impls', allowed) as warnings."""
    for note in result.notes:
        warnings.warn(note, stacklevel=2)
    if result.divergence is not None:
        pytest.fail(result.divergence.describe(), pytrace=False)
    skipped = [c.skipped for c in result.clauses if c.skipped is not None]
    if skipped and all(c.skipped is not None for c in result.clauses):
        pytest.skip("; ".join(skipped))
    assert result.clauses and sum(c.cases for c in result.clauses) > 0, "no case was checked"


@pytest.mark.parametrize("clause", list(TRAINER_CLAUSES))
def test_trainer(pytestconfig: pytest.Config, clause: str) -> None:
    ref = _option(pytestconfig, "--bpe-trainer")
    _judge(
        verify.verify_trainer(
            ref, _settings(pytestconfig), pytestconfig.getoption("--bpe-call-timeout"), clauses=[clause], fixtures=False
        )
    )


def test_trainer_on_real_text(pytestconfig: pytest.Config) -> None:
    ref = _option(pytestconfig, "--bpe-trainer")
    result = verify.verify_trainer(
        ref, _settings(pytestconfig), pytestconfig.getoption("--bpe-call-timeout"), clauses=[], fixtures=True
    )
    if not result.clauses:
        pytest.skip("real text: skipped")
    _judge(result)


@pytest.mark.parametrize("clause", list(TOKENIZER_CLAUSES))
def test_tokenizer(pytestconfig: pytest.Config, clause: str) -> None:
    ref = _option(pytestconfig, "--bpe-tokenizer")
    _judge(
        verify.verify_tokenizer(
            ref, _settings(pytestconfig), pytestconfig.getoption("--bpe-call-timeout"), clauses=[clause]
        )
    )


def test_encoder(pytestconfig: pytest.Config) -> None:
    ref = _option(pytestconfig, "--bpe-encoder")
    vocab = _option(pytestconfig, "--bpe-vocab")
    ref = f"peer:{ref}" if ref in verify.PEER_NAMES else ref
    _judge(verify.verify_encoder(ref, vocab, _settings(pytestconfig), pytestconfig.getoption("--bpe-call-timeout")))
