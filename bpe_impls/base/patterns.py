"""The split pattern and special tokens, shared by counting and encoding.

The text is first split on the special tokens (escaped, longest first, so they never take part in
a merge and no pair crosses one); each piece between them is cut into pre-tokens by the GPT-2
pattern. Training counts those pre-tokens as UTF-8 `bytes`; encoding merges each one's bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import lru_cache

import regex

from .errors import ConfigError

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT2_REGEX = regex.compile(GPT2_PATTERN)


def validate_special_tokens(special_tokens: Iterable[str] | None) -> tuple[str, ...]:
    """Return the special tokens as a tuple, rejecting empty, duplicate or non-string ones."""
    if special_tokens is None:
        return ()
    if isinstance(special_tokens, (str, bytes)):
        raise ConfigError(f"special_tokens must be a list of strings, not a single {type(special_tokens).__name__}")
    tokens = tuple(special_tokens)
    seen: set[str] = set()
    for index, token in enumerate(tokens):
        if not isinstance(token, str):
            raise ConfigError(f"special token #{index} is {type(token).__name__} {token!r}, not str")
        if not token:
            raise ConfigError(f"special token #{index} is empty")
        if token in seen:
            raise ConfigError(f"special token {token!r} is given twice")
        seen.add(token)
    return tokens


@lru_cache(maxsize=64)
def special_token_regex(special_tokens: tuple[str, ...]) -> regex.Pattern | None:
    """A regex matching any special token, longest alternative first (None when there are none).

    Longest first makes `<|endoftext|><|endoftext|>` one match when both it and `<|endoftext|>`
    are special, instead of two matches of the shorter one.
    """
    if not special_tokens:
        return None
    ordered = sorted(special_tokens, key=len, reverse=True)
    return regex.compile("|".join(regex.escape(token) for token in ordered))


def split_on_special_tokens(text: str, special_tokens: tuple[str, ...]) -> list[str]:
    """The pieces of `text` between special tokens (the special tokens themselves dropped)."""
    pattern = special_token_regex(special_tokens)
    return [text] if pattern is None else pattern.split(text)


def iter_pretokens(text: str) -> Iterator[str]:
    """GPT-2 pre-tokens of a text that contains no special token, lazily (finditer, not findall)."""
    for match in GPT2_REGEX.finditer(text):
        yield match.group()

