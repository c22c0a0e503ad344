"""Other libraries as references (`peer:NAME`): their encoders over a given vocab, each as a
`get_tokenizer(vocab, merges, special_tokens)` factory whose result has `encode(str) -> list[int]`
(the shape `bpe verify` checks), and their trainers in CS336's shape,
`run_train_bpe(input_path, vocab_size, special_tokens)`.

Each is built and called as `bpe compare` builds and calls it: its entry of harness/peers.py's
PEER_ENCODERS (GPT-2's split pattern, special tokens allowed) or TRAIN_PEERS. A library that is not
installed, or that cannot take the vocab (peers.VocabRefused), is a ConfigError saying so. A peer
that is both (HF tokenizers, gigatoken) is one reference: called with a file's path it trains,
with a vocab it builds a tokenizer.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence
from typing import Any

from ...base.errors import ConfigError
from ...base.patterns import GPT2, resolve_pattern
from .. import peers

PEER_NAMES = tuple(peers.PEER_ENCODERS)
PEER_TRAINER_NAMES = tuple(peers.TRAIN_PEERS)


class _Adapter:
    def __init__(self, native: Any, peer: peers.EncoderAdapter) -> None:
        self._native, self._peer = native, peer

    def encode(self, text: str) -> list[int]:
        return self._peer.ids(self._native, text)


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
        vocab: dict[int, bytes], merges: Sequence, special_tokens: Sequence[str] | None = None
    ) -> _Adapter:
        try:
            native = peer.build(vocab, list(merges), list(special_tokens or ()), GPT2)
        except peers.VocabRefused as refused:
            raise ConfigError(str(refused)) from None
        return _Adapter(native, peer)

    return get_tokenizer


class Trained:
    """A peer trainer's own result, and how to turn it into (vocab, merges). The worker times the
    trainer's call, then asks `untimed_result()` (for this project's references only): the table
    then shows the library's own time, as a user of the library would see it, not our conversion."""

    def __init__(self, result: Any, special_tokens: Sequence[str], peer: peers.PeerTrainer) -> None:
        self._result, self._specials, self._peer = result, list(special_tokens), peer

    def untimed_result(self) -> tuple[Any, Any]:
        return self._peer.vocab_and_merges(self._result, self._specials)


def _installed_or_refuse(name: str, module: str, pip_name: str) -> None:
    if not peers.installed(module):
        raise ConfigError(f"peer {name!r} needs {module}, which is not installed (pip install {pip_name})")


def peer_trainer(name: str) -> Callable[..., Trained]:
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
    ) -> Trained:
        split = resolve_pattern(pattern)
        return Trained(
            peer.train(str(input_path), vocab_size, list(special_tokens), num_workers, split), special_tokens, peer
        )

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
