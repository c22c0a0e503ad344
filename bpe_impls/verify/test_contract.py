"""One test per clause of the contract, over the implementations named on the command line
(see bpe_impls.verify for the options). A divergence fails its test with the shrunk counterexample."""

from __future__ import annotations

import pytest

from bpe_impls.harness.verify import (
    PEER_NAMES,
    TOKENIZER_CLAUSES,
    TRAINER_CLAUSES,
    SearchSettings,
    Verification,
    verify_encoder,
    verify_tokenizer,
    verify_trainer,
)


def _option(config: pytest.Config, name: str) -> str:
    value = config.getoption(name)
    if not value:
        pytest.skip(f"no {name} given")
    return value


def _settings(config: pytest.Config) -> SearchSettings:
    return SearchSettings(max_examples=config.getoption("--bpe-max-examples"), seed=config.getoption("--bpe-seed"))


def _judge(result: Verification) -> None:
    assert result.clauses and sum(c.cases for c in result.clauses) > 0, "no case was checked"
    if result.divergence is not None:
        pytest.fail(result.divergence.describe(), pytrace=False)


@pytest.mark.parametrize("clause", list(TRAINER_CLAUSES))
def test_trainer(pytestconfig: pytest.Config, clause: str) -> None:
    ref = _option(pytestconfig, "--bpe-trainer")
    _judge(verify_trainer(ref, _settings(pytestconfig), pytestconfig.getoption("--bpe-call-timeout"),
                          clauses=[clause], fixtures=False))


def test_trainer_on_real_text(pytestconfig: pytest.Config) -> None:
    ref = _option(pytestconfig, "--bpe-trainer")
    result = verify_trainer(ref, _settings(pytestconfig), pytestconfig.getoption("--bpe-call-timeout"),
                            clauses=[], fixtures=True)
    if not result.clauses:
        pytest.skip("no real-text fixture found (env BPE_FIXTURES)")
    _judge(result)


@pytest.mark.parametrize("clause", list(TOKENIZER_CLAUSES))
def test_tokenizer(pytestconfig: pytest.Config, clause: str) -> None:
    ref = _option(pytestconfig, "--bpe-tokenizer")
    _judge(verify_tokenizer(ref, _settings(pytestconfig), pytestconfig.getoption("--bpe-call-timeout"),
                            clauses=[clause]))


def test_encoder(pytestconfig: pytest.Config) -> None:
    ref = _option(pytestconfig, "--bpe-encoder")
    vocab = _option(pytestconfig, "--bpe-vocab")
    ref = f"peer:{ref}" if ref in PEER_NAMES else ref
    _judge(verify_encoder(ref, vocab, _settings(pytestconfig), pytestconfig.getoption("--bpe-call-timeout")))
