"""The pytest plugin of `bpe verify`: the contract's clauses as tests, for anyone's implementation.

In a repository with a CS336-style `adapters.py`:

    pytest --pyargs bpe_impls.pytest_plugin --bpe-trainer tests/adapters.py:run_train_bpe \\
        --bpe-tokenizer tests/adapters.py:get_tokenizer

runs one test per clause of the contract (and one on real text), each failing with the shrunk
counterexample. This one module is both halves of the plugin:

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


def _option(config: pytest.Config, name: str) -> str:
    value: str | None = config.getoption(name)
    if not value:
        pytest.skip(f"no {name} given")
    return value


def _settings(config: pytest.Config) -> SearchSettings:
    return verify.SearchSettings(
        max_examples=config.getoption("--bpe-max-examples"), seed=config.getoption("--bpe-seed")
    )


def _judge(result: Verification) -> None:
    assert result.clauses and sum(c.cases for c in result.clauses) > 0, "no case was checked"
    if result.divergence is not None:
        pytest.fail(result.divergence.describe(), pytrace=False)


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
        pytest.skip("; ".join(result.real_text_skipped) or "real text: skipped")
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
