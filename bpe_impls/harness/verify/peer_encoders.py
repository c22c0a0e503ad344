"""Other libraries' encoders over a given vocab, each as a `get_tokenizer(vocab, merges, special_tokens)`
factory whose result has `encode(str) -> list[int]` (the shape `bpe verify` checks).

Each adapter builds the library's own tokenizer from the vocab and merges (through the builders in
harness/peers.py, with GPT-2's split pattern) and calls its own encode method, special tokens
allowed. A library that is not installed is a ConfigError saying how to install it.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Sequence
from typing import Any

from ...base.errors import ConfigError
from .. import peers


def _from_tokenizer_json(load: Callable[[str], Any]) -> Callable[..., Any]:
    """A builder for a library that reads HF tokenizer.json files: ours, written as HF writes it."""
    return lambda vocab, merges, special_tokens: peers.from_tokenizer_json(load, vocab, merges, special_tokens)


def _bpe_openai(vocab: dict[int, bytes], merges: list, special_tokens: list[str]) -> Any:
    raise ConfigError(
        "bpe-openai builds only OpenAI's named encodings, which it downloads; it cannot load a given vocab"
    )


def _module(name: str) -> Any:
    return importlib.import_module(name)


# name -> (module to import, how to build it, how to encode with it)
_PEERS: dict[str, tuple[str, Callable[..., Any], Callable[[Any, str], list[int]]]] = {
    "tiktoken": (
        "tiktoken",
        lambda v, m, s: peers.tiktoken_encoding(v, s, "bpe_verify"),
        lambda enc, text: enc.encode(text, allowed_special="all"),
    ),
    "huggingface": ("tokenizers", peers.huggingface_tokenizer, lambda tok, text: tok.encode(text).ids),
    "gigatoken": ("gigatoken", peers.gigatoken_tokenizer, lambda tok, text: tok.encode(text).tolist()),
    "tokie": ("tokie", peers.tokie_tokenizer, lambda tok, text: list(tok.encode(text).ids)),
    "kitoken": (
        "kitoken",
        _from_tokenizer_json(lambda path: _module("kitoken").Kitoken.from_tokenizers_file(path)),
        lambda tok, text: tok.encode(text, True),
    ),
    "fastokens": (
        "fastokens",
        _from_tokenizer_json(lambda path: _module("fastokens").Tokenizer.from_file(path)),
        lambda tok, text: tok.encode(text).ids,
    ),
    "splintr": (
        "splintr",
        _from_tokenizer_json(lambda path: _module("splintr").from_json(path)),
        lambda tok, text: tok.encode_with_special(text),
    ),
    "quicktok": (
        "quicktok",
        _from_tokenizer_json(lambda path: _module("quicktok").import_tokenizer(path, "bpe_verify")),
        lambda tok, text: tok.encode(text, allowed_special="all"),
    ),
    "bpe-openai": ("bpe_openai", _bpe_openai, lambda tok, text: tok.encode(text, allowed_special="all")),
}
PEER_NAMES = tuple(_PEERS)


class _Adapter:
    def __init__(self, native: Any, encode: Callable[[Any, str], list[int]]) -> None:
        self._native, self._encode = native, encode

    def encode(self, text: str) -> list[int]:
        return [int(i) for i in self._encode(self._native, text)]


def available(name: str) -> bool:
    """Whether peer `name` is known and its library is installed."""
    return name in _PEERS and importlib.util.find_spec(_PEERS[name][0]) is not None


def peer_encoder(name: str) -> Callable[..., _Adapter]:
    """The factory of peer `name`; a ConfigError when it is unknown or not installed."""
    if name not in _PEERS:
        raise ConfigError(f"unknown peer encoder {name!r}; choose from {', '.join(_PEERS)}")
    module, build, encode = _PEERS[name]
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"peer {name!r} needs {module}, which is not installed (pip install {module})")

    def get_tokenizer(
        vocab: dict[int, bytes], merges: Sequence, special_tokens: Sequence[str] | None = None
    ) -> _Adapter:
        return _Adapter(build(vocab, list(merges), list(special_tokens or ())), encode)

    return get_tokenizer
