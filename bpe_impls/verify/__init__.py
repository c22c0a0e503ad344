"""The pytest plugin of `bpe verify`: the contract's clauses as tests, for anyone's implementation.

In a repository with a CS336-style `adapters.py`:

    pytest --pyargs bpe_impls.verify --bpe-trainer tests/adapters.py:run_train_bpe \\
        --bpe-tokenizer tests/adapters.py:get_tokenizer

runs one test per clause of the contract (and one on real text), each failing with the shrunk
counterexample. The options come from this module, which installing bpe_impls registers as a
pytest plugin (`-p bpe_impls.verify` names it too); tests whose option is absent skip.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("bpe verify", "check a BPE implementation against bpe_impls' contract")
    group.addoption("--bpe-trainer", metavar="REF", help="run_train_bpe(input_path, vocab_size, special_tokens): "
                    "module:function or path/to/file.py:function")
    group.addoption("--bpe-tokenizer", metavar="REF", help="get_tokenizer(vocab, merges, special_tokens=None)")
    group.addoption("--bpe-encoder", metavar="NAME|REF", help="an encoder (a peer name or a factory) over --bpe-vocab")
    group.addoption("--bpe-vocab", metavar="PATH", help="the saved tokenizer --bpe-encoder runs over")
    group.addoption("--bpe-max-examples", type=int, default=200, metavar="N", help="generated cases per clause")
    group.addoption("--bpe-seed", type=int, default=0, help="the search's seed")
    group.addoption("--bpe-call-timeout", type=float, default=60.0, metavar="SECONDS",
                    help="a call to the implementation taking longer is a hang")
