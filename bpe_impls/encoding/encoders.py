"""Encoders: the one contract the Tokenizer needs, and the implementations that fulfil it.

An encoder is built from the tables (byte ids, rank table, cache size) and turns whole UTF-8 texts
into ids, special tokens included, with `encode_utf8`:

    encode_utf8(data, special_tokens, special_ids)        -> ids
    encode_utf8(data, special_tokens, special_ids, True)  -> (ids, cut)

The text is split on the special tokens (longest first; each becomes its id), each piece between
them is cut into pre-tokens by the GPT-2 pattern, and each pre-token's bytes are merged by BPE.
With `settled=True` only the longest prefix whose ids no later text can change is encoded, and
`cut` is its length in bytes (encode_iterable's rounds; see `PythonEncoder._settled`).

`PythonEncoder` does this in pure Python around a choice of merge loop (encoding.bpe); the compiled
core's Encoder (bpe_impls._native, where it was built) does it in C. Every encoder gives identical
ids for every input: tests prove each one against the others and against tiktoken.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Literal, Protocol, overload

from ..base import compiled
from ..base.patterns import GPT2_REGEX, special_token_regex
from .bpe import BpeFunction, RankTable, bpe_heap, bpe_hybrid, bpe_scan

# Pre-tokens longer than this are not cached: they are rare and would pin large keys in memory.
_MAX_CACHED_LEN = 256


class Encoder(Protocol):
    """What the Tokenizer needs of an encoder (see the module docstring)."""

    @overload
    def encode_utf8(
        self, data: bytes, special_tokens: Sequence[bytes], special_ids: Sequence[int], settled: Literal[False] = ...
    ) -> list[int]: ...

    @overload
    def encode_utf8(
        self, data: bytes, special_tokens: Sequence[bytes], special_ids: Sequence[int], settled: Literal[True]
    ) -> tuple[list[int], int]: ...

    def cache_len(self) -> int:
        """How many pre-tokens the cache holds now."""
        ...


class PythonEncoder:
    """The contract in pure Python: special_token_regex, GPT2_REGEX, then a BpeFunction.

    A bounded cache maps each pre-token str already seen to its ids.
    """

    def __init__(self, bpe: BpeFunction, byte_ids: Sequence[int], ranks: RankTable, cache_size: int):
        self._bpe = bpe
        self._byte_ids = list(byte_ids)
        self._ranks = ranks
        self._cache_size = cache_size
        self._cache: dict[str, tuple[int, ...]] = {}

    def encode_utf8(
        self, data: bytes, special_tokens: Sequence[bytes], special_ids: Sequence[int], settled: bool = False
    ) -> list[int] | tuple[list[int], int]:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("data is not valid UTF-8") from None
        if len(special_ids) != len(special_tokens):
            raise ValueError("one id is needed per special token")
        specials = {token.decode("utf-8"): token_id for token, token_id in zip(special_tokens, special_ids)}
        if not settled:
            out: list[int] = []
            self._encode_into(text, specials, out)
            return out
        ids, cut = self._settled(text, specials)
        return ids, len(text[:cut].encode("utf-8"))

    def cache_len(self) -> int:
        return len(self._cache)

    def _encode_into(self, text: str, specials: dict[str, int], out: list[int]) -> None:
        special_regex = special_token_regex(tuple(specials))
        if special_regex is None:
            self._encode_ordinary_into(text, out)
            return
        start = 0
        for match in special_regex.finditer(text):
            self._encode_ordinary_into(text[start : match.start()], out)
            out.append(specials[match.group()])
            start = match.end()
        self._encode_ordinary_into(text[start:], out)

    def _encode_ordinary_into(self, text: str, out: list[int]) -> None:
        # The hot loop: one dict lookup per pre-token when it is cached.
        cache = self._cache
        encode_pretoken = self._encode_pretoken
        extend = out.extend
        for match in GPT2_REGEX.finditer(text):
            piece = match.group()
            ids = cache.get(piece)
            extend(ids if ids is not None else encode_pretoken(piece))

    def _settled(self, buffer: str, specials: dict[str, int]) -> tuple[list[int], int]:
        """The ids of the longest prefix of `buffer` whose tokens no later text can change, and its length.

        Special tokens: a match starting at p is settled once every special token fits in
        buffer[p:] (p < settle), because then no longer alternative can still match there.
        Pre-tokens, in the ordinary text after the last settled special token: the regex decides
        a match [p, e) by looking at characters up to max(p + 2, e + 1) at most (the contraction
        alternative looks 3 characters ahead; greedy runs stop at the first character after them;
        `\\s+(?!\\S)` backs off one space before a non-space at e + 1). So a match with
        e + 2 <= the end of the known text is final; the first one that is not, and everything
        after it (a trailing word, trailing whitespace, a possible special-token prefix), is
        carried over. The cut is then both a special-token and a pre-token boundary, so encoding
        the rest separately gives the same tokens as encoding the whole (the pattern has no
        look-behind).
        """
        special_regex = special_token_regex(tuple(specials))
        pos = 0
        settle = len(buffer) + 1
        if special_regex is not None:
            settle = len(buffer) - max(map(len, specials)) + 1
            for match in special_regex.finditer(buffer):
                if match.start() >= settle:
                    break
                pos = match.end()
        # Up to the end of the last settled special token, the text encodes as a whole would.
        out: list[int] = []
        self._encode_into(buffer[:pos], specials, out)
        # The ordinary text from pos is known only up to `settle`: a special token may start there.
        known = buffer[pos : max(pos, min(settle, len(buffer)))]  # never a negative slice end
        last_final = len(known) - 2
        cut = 0
        for match in GPT2_REGEX.finditer(known):
            if match.end() > last_final:
                break
            piece = match.group()
            ids = self._cache.get(piece)
            out.extend(ids if ids is not None else self._encode_pretoken(piece))
            cut = match.end()
        return out, pos + cut

    def _encode_pretoken(self, piece: str) -> tuple[int, ...]:
        # Keyed by the str, not its bytes, so a cache hit costs no UTF-8 encoding; the two are
        # in one-to-one correspondence for text without surrogates (the Tokenizer checks).
        ids = tuple(self._bpe(list(map(self._byte_ids.__getitem__, piece.encode("utf-8"))), self._ranks))
        if self._cache_size and len(piece) <= _MAX_CACHED_LEN:
            if len(self._cache) >= self._cache_size:
                self._cache.clear()  # cheaper than LRU bookkeeping on every hit; refills quickly
            self._cache[piece] = ids
        return ids


def native_encoder(byte_ids: Sequence[int], ranks: RankTable, cache_size: int) -> Encoder:
    """The compiled core's Encoder: PythonEncoder with `bpe_hybrid`, in C (its pre-token cache is
    keyed by UTF-8 bytes, and it never builds a str)."""
    merges = [(left, right, merged) for (left, right), (_, merged) in sorted(ranks.items(), key=lambda kv: kv[1][0])]
    return compiled.core().Encoder(byte_ids, merges, cache_size)


# name -> factory(byte ids, rank table, cache size). Every encoder gives identical ids for every
# input (tests check each one against tiktoken).
ENCODERS: dict[str, Callable[[Sequence[int], RankTable, int], Encoder]] = {
    "scan": partial(PythonEncoder, bpe_scan),
    "heap": partial(PythonEncoder, bpe_heap),
    "hybrid": partial(PythonEncoder, bpe_hybrid),
}
if compiled.AVAILABLE:
    ENCODERS["native"] = native_encoder

# The fastest registered encoder (README, Performance): native where it was built; else hybrid,
# as fast as scan on real text and far faster on one very long pre-token (O(n log n), not O(n^2)).
DEFAULT_ENCODER = "native" if compiled.AVAILABLE else "hybrid"
