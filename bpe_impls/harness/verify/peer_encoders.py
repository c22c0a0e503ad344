"""Other libraries as references (`peer:NAME`): their encoders over a given vocab, each as a
`get_tokenizer(vocab, merges, special_tokens)` factory whose result has `encode(str)` (and
`encode_batch(texts)` where the library has a batch method), and their trainers in CS336's shape,
`run_train_bpe(input_path, vocab_size, special_tokens)`.

Each is built and called as `bpe compare` builds and calls it: its entry of harness/peers.py's
PEER_ENCODERS (special tokens allowed) or TRAIN_PEERS. A library that is not installed, or that
cannot take the vocab (peers.VocabRefused), is a ConfigError saying so. A peer that is both (HF
tokenizers, gigatoken) is one reference: called with a file's path it trains, with a vocab it
builds a tokenizer.

Every call returns the library's own result wrapped in an `Untimed`: the worker (worker.py) times
the library's call alone, then asks `untimed_result()` for the contract's shape (ids as a list of
ints; (vocab, merges)), so every table shows the library's own time, as its user would see it, not
our conversion of what it returned.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence
from typing import Any

from ...base.checks import resolve_workers
from ...base.errors import ConfigError
from ...base.patterns import resolve_pattern
from .. import peers

PEER_NAMES = tuple(peers.PEER_ENCODERS)
PEER_TRAINER_NAMES = tuple(peers.TRAIN_PEERS)


class Untimed:
    """A result of one of this project's references (`builtin:`, `peer:`) as its own call returned
    it, and how to turn it into the contract's shape; the worker times the call, then converts."""

    def __init__(self, result: Any, convert: Callable[[Any], Any]) -> None:
        self._result, self._convert = result, convert

    def untimed_result(self) -> Any:
        return self._convert(self._result)


def _ints(ids: Any) -> list[int]:
    return [int(i) for i in ids]


class _Adapter:
    """A peer's encoder in the shape a tokenizer under test has."""

    def __init__(self, native: Any, peer: peers.EncoderAdapter) -> None:
        self._native, self._peer = native, peer

    def encode(self, text: str) -> Untimed:
        return Untimed(self._peer.encode(self._native, text), lambda ids: _ints(self._peer.to_list(ids)))


class _BatchAdapter(_Adapter):
    """A peer with a batch method: `encode_batch` on every core this process may use (the worker
    pins it to one for a one-thread row, and sizes the rayon pools by RAYON_NUM_THREADS before the
    build). Its result is one list of every text's ids in order, which is what the worker digests."""

    def encode_batch(self, texts: list[str]) -> Untimed:
        assert self._peer.batch is not None
        flat = self._peer.batch_to_list
        return Untimed(self._peer.batch(self._native, texts, resolve_workers(None)), lambda ids: [_ints(flat(ids))])


def available(name: str) -> bool:
    """Whether peer `name` is known and its library is installed."""
    return name in peers.PEER_ENCODERS and peers.installed(peers.PEER_ENCODERS[name].module)


def peer_encoder(name: str) -> Callable[..., _Adapter]:
    """The factory of peer `name`; a ConfigError when it is unknown or not installed."""
    if name not in peers.PEER_ENCODERS:
        raise ConfigError(f"unknown peer encoder {name!r}; choose from {', '.join(PEER_NAMES)}")
    peer = peers.PEER_ENCODERS[name]
    _installed_or_refuse(name, peer.module, peer.pip_name)

    def get_tokenizer(
        vocab: dict[int, bytes],
        merges: Sequence,
        special_tokens: Sequence[str] | None = None,
        pattern: str | None = None,
    ) -> _Adapter:
        try:
            native = peer.build(vocab, list(merges), list(special_tokens or ()), resolve_pattern(pattern))
        except peers.VocabRefused as refused:
            raise ConfigError(str(refused)) from None
        return (_BatchAdapter if peer.batch is not None else _Adapter)(native, peer)

    return get_tokenizer


def _installed_or_refuse(name: str, module: str, pip_name: str) -> None:
    if not peers.installed(module):
        raise ConfigError(f"peer {name!r} needs {module}, which is not installed (pip install {pip_name})")


def peer_trainer(name: str) -> Callable[..., Untimed]:
    """Peer `name`'s trainer in CS336's shape; a ConfigError when it is unknown or not installed.
    `num_workers` and `pattern` (a split pattern's name) reach it as they reach our own."""
    if name not in peers.TRAIN_PEERS:
        raise ConfigError(f"unknown peer trainer {name!r}; choose from {', '.join(PEER_TRAINER_NAMES)}")
    peer = peers.TRAIN_PEERS[name]
    _installed_or_refuse(name, peer.module, peer.module)
    importlib.import_module(peer.module)  # here, as the reference loads: its import is not its training

    def run_train_bpe(
        input_path: str | os.PathLike,
        vocab_size: int,
        special_tokens: Sequence[str],
        num_workers: int | None = None,
        pattern: str | None = None,
        **kwargs: Any,
    ) -> Untimed:
        result = peer.train(str(input_path), vocab_size, list(special_tokens), num_workers, resolve_pattern(pattern))
        return Untimed(result, lambda trained: peer.vocab_and_merges(trained, list(special_tokens)))

    return run_train_bpe


def peer_reference(name: str) -> Callable[..., Any]:
    """What `peer:NAME` names: its trainer, its tokenizer factory, or (a peer that is both: HF
    tokenizers, gigatoken) one callable that trains when given a path and builds a tokenizer when
    given a vocab. A ConfigError when it is neither, or not installed."""
    if name not in peers.TRAIN_PEERS and name not in peers.PEER_ENCODERS:
        raise ConfigError(
            f"unknown peer {name!r}; encoders: {', '.join(PEER_NAMES)}; trainers: {', '.join(PEER_TRAINER_NAMES)}"
        )
    if name not in peers.TRAIN_PEERS:
        return peer_encoder(name)
    train = peer_trainer(name)  # (its library imported now, as the reference loads)
    if name not in peers.PEER_ENCODERS:
        return train
    factory = peer_encoder(name)

    def trainer_or_factory(first: Any, *args: Any, **options: Any) -> Any:
        return (train if isinstance(first, (str, os.PathLike)) else factory)(first, *args, **options)

    return trainer_or_factory
