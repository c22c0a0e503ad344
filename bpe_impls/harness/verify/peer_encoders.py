"""Other libraries' encoders over a given vocab, each as a `get_tokenizer(vocab, merges, special_tokens)`
factory whose result has `encode(str) -> list[int]` (the shape `bpe verify` checks).

Each is built and called as `bpe compare` builds and calls it: its entry of harness/peers.py's
PEER_ENCODERS, with GPT-2's split pattern, special tokens allowed. A library that is not installed,
or that cannot take the vocab (peers.VocabRefused), is a ConfigError saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...base.errors import ConfigError
from ...base.patterns import GPT2
from .. import peers

PEER_NAMES = tuple(peers.PEER_ENCODERS)


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
    if not peers.installed(peer.module):
        raise ConfigError(f"peer {name!r} needs {peer.module}, which is not installed (pip install {peer.pip_name})")

    def get_tokenizer(
        vocab: dict[int, bytes], merges: Sequence, special_tokens: Sequence[str] | None = None
    ) -> _Adapter:
        try:
            native = peer.build(vocab, list(merges), list(special_tokens or ()), GPT2)
        except peers.VocabRefused as refused:
            raise ConfigError(str(refused)) from None
        return _Adapter(native, peer)

    return get_tokenizer
