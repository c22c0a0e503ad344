"""Encoders: the one contract the Tokenizer needs, and the implementations that fulfil it.

An encoder is built from a tokenizer's tables (tables.Tables), a cache size and a split pattern,
and turns whole UTF-8 texts into ids, special tokens included, with `encode_utf8`:

    encode_utf8(data, special_tokens, special_ids)        -> ids
    encode_utf8(data, special_tokens, special_ids, True)  -> (ids, cut)

The text is split on the special tokens (longest first; each becomes its id), each piece between
them is cut into pre-tokens by the split pattern, and each pre-token's bytes are merged by BPE.
With `settled=True` only the longest prefix whose ids no later text can change is encoded, and
`cut` is its length in bytes (encode_iterable's rounds; see `PythonEncoder._settled`). `data` may
also be a str, standing for its UTF-8 (a lone surrogate is a UnicodeEncodeError): the compiled
core then reads the UTF-8 that CPython keeps with the str, with no copy and nothing to validate.

The buffer methods give the same ids with no Python int per token, as native-endian unsigned
integers of `itemsize` bytes (2 or 4) in a bytearray, for numpy.frombuffer:

    encode_utf8_buffer(data, special_tokens, special_ids, settled=False, itemsize=4)
        -> ids buffer, or (ids buffer, cut) with settled=True
    encode_many_buffer(datas, special_tokens, special_ids, itemsize=4, start=0, stop=len(datas))
        -> (ids buffer of each text of datas[start:stop] in turn, int64 offsets: stop - start + 1)

and `encode_many_lists(datas, special_tokens, special_ids, start=0, stop=len(datas))` gives each
text's list of ids, as `encode_utf8` does, from the same one pass over the range.
`encode_packed_buffer(data, offsets, special_tokens, special_ids, itemsize=4, start=0, stop=...,
separator=-1)` is encode_many_buffer of texts packed in one bytes object, text k being
data[offsets[k]:offsets[k + 1]] (native int64 offsets, as an Arrow string array or a data set's
records hold them), each text's ids followed by the id `separator` unless it is negative (a data
set's EOT, counted in that text's offsets).

An id that does not fit in 2 bytes is a ValueError naming it; an item of `datas` that is neither
bytes nor str is a TypeError naming its index. The compiled core runs them without the GIL
(encode_many_buffer once for the whole list), so several threads may encode with one encoder at once.

`PythonEncoder` does this in pure Python around a choice of merge loop (encoding.bpe); the compiled
core's Encoder (bpe_impls._native, where it was built) does it in C. Every encoder gives identical
ids for every input: tests prove each one against the others and against tiktoken.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from itertools import chain
from typing import Literal, Protocol, overload

import regex

from ..base import compiled
from ..base.errors import ConfigError
from ..base.patterns import GPT2, PRESETS, SplitPattern, iter_pretokens, special_token_regex
from .bpe import BpeFunction, RankTable, bpe_heap, bpe_hybrid, bpe_scan
from .tables import EncoderMerges, Tables

# Pre-tokens longer than this are not cached: they are rare and would pin large keys in memory.
_MAX_CACHED_LEN = 256
_NON_SPACE = regex.compile(r"\S")


class Encoder(Protocol):
    """What the Tokenizer needs of an encoder (see the module docstring)."""

    # (positional only: the compiled core's encode_utf8 takes no keywords)
    @overload
    def encode_utf8(
        self,
        data: bytes | str,
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        settled: Literal[False] = ...,
        /,
    ) -> list[int]: ...

    @overload
    def encode_utf8(
        self, data: bytes | str, special_tokens: Sequence[bytes], special_ids: Sequence[int], settled: Literal[True], /
    ) -> tuple[list[int], int]: ...

    @overload
    def encode_utf8_buffer(
        self,
        data: bytes | str,
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        settled: Literal[False] = ...,
        itemsize: int = ...,
    ) -> bytearray: ...

    @overload
    def encode_utf8_buffer(
        self,
        data: bytes | str,
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        settled: Literal[True],
        itemsize: int = ...,
    ) -> tuple[bytearray, int]: ...

    # (stop defaults to len(datas); the compiled core takes no None for it)
    def encode_many_buffer(
        self,
        datas: Sequence[bytes | str],
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        itemsize: int = 4,
        start: int = 0,
        stop: int = ...,
    ) -> tuple[bytearray, bytearray]: ...

    def encode_many_lists(
        self,
        datas: Sequence[bytes | str],
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        start: int = 0,
        stop: int = ...,
    ) -> list[list[int]]: ...

    def encode_packed_buffer(
        self,
        data: bytes,
        offsets: bytes | bytearray | memoryview,
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        itemsize: int = 4,
        start: int = 0,
        stop: int = ...,
        separator: int = -1,
    ) -> tuple[bytearray, bytearray]: ...

    def cache_len(self) -> int:
        """How many pre-tokens the cache holds now."""
        ...


# array typecodes of native unsigned integers by size (array's 'I' and 'H' are C's unsigned int
# and short: 4 and 2 bytes on every platform CPython supports, checked here).
_UNSIGNED_CODES = {2: "H", 4: "I"}
assert all(array(code).itemsize == size for size, code in _UNSIGNED_CODES.items())
assert array("q").itemsize == 8


def ids_to_buffer(ids: Sequence[int], itemsize: int) -> bytearray:
    """`ids` as native unsigned integers of `itemsize` bytes (2 or 4); ValueError naming an id that
    does not fit (what the compiled core's buffer methods return, in Python)."""
    code = _UNSIGNED_CODES.get(itemsize)
    if code is None:
        raise ValueError(f"itemsize must be 2 or 4, got {itemsize!r}")
    try:
        return bytearray(array(code, ids))
    except OverflowError:
        limit = 1 << (8 * itemsize)
        bad = next(token_id for token_id in ids if not 0 <= token_id < limit)
        raise ValueError(f"token id {bad} does not fit in {itemsize} bytes") from None


def _joined_buffers(lists: Iterable[list[int]], itemsize: int) -> tuple[bytearray, bytearray]:
    """Lists of ids as encode_many_buffer gives them: one buffer of the ids, and int64 offsets."""
    ids: list[int] = []
    offsets = array("q", [0])
    for one in lists:
        ids += one
        offsets.append(len(ids))
    return ids_to_buffer(ids, itemsize), bytearray(offsets)


class BufferFromLists:
    """The buffer methods, built on the class's own `encode_utf8` (its list of ids, packed).

    A mixin: `self` is annotated as the Encoder the class it is mixed into must be."""

    @overload
    def encode_utf8_buffer(
        self: Encoder,
        data: bytes | str,
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        settled: Literal[False] = ...,
        itemsize: int = ...,
    ) -> bytearray: ...

    @overload
    def encode_utf8_buffer(
        self: Encoder,
        data: bytes | str,
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        settled: Literal[True],
        itemsize: int = ...,
    ) -> tuple[bytearray, int]: ...

    def encode_utf8_buffer(
        self: Encoder,
        data: bytes | str,
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        settled: bool = False,
        itemsize: int = 4,
    ) -> bytearray | tuple[bytearray, int]:
        if settled:
            ids, cut = self.encode_utf8(data, special_tokens, special_ids, True)
            return ids_to_buffer(ids, itemsize), cut
        return ids_to_buffer(self.encode_utf8(data, special_tokens, special_ids), itemsize)

    def encode_many_buffer(
        self: Encoder,
        datas: Sequence[bytes | str],
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        itemsize: int = 4,
        start: int = 0,
        stop: int | None = None,
    ) -> tuple[bytearray, bytearray]:
        stop = len(datas) if stop is None else stop
        return _joined_buffers(self.encode_many_lists(datas, special_tokens, special_ids, start, stop), itemsize)

    def encode_packed_buffer(
        self: Encoder,
        data: bytes,
        offsets: bytes | bytearray | memoryview,
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        itemsize: int = 4,
        start: int = 0,
        stop: int | None = None,
        separator: int = -1,
    ) -> tuple[bytearray, bytearray]:
        if not isinstance(data, bytes):
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        if separator > 0xFFFFFFFF:
            raise ValueError(f"separator {separator} is not an id")
        bounds = memoryview(offsets).cast("B").cast("q")
        stop = len(bounds) - 1 if stop is None else stop
        if not 0 <= start <= stop <= len(bounds) - 1:
            raise ValueError(f"start {start} and stop {stop} are not a range of the {len(bounds) - 1} texts")
        texts = []
        for k in range(start, stop):
            first, last = bounds[k], bounds[k + 1]
            if not 0 <= first <= last <= len(data):
                raise ValueError(f"offsets[{k}:{k + 2}] = {first}, {last} is not a range of data's {len(data)} bytes")
            texts.append(data[first:last])
        lists: Iterable[list[int]] = self.encode_many_lists(texts, special_tokens, special_ids)
        if separator >= 0:
            lists = ([*one, separator] for one in lists)
        return _joined_buffers(lists, itemsize)

    def encode_many_lists(
        self: Encoder,
        datas: Sequence[bytes | str],
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        start: int = 0,
        stop: int | None = None,
    ) -> list[list[int]]:
        stop = len(datas) if stop is None else stop
        if not 0 <= start <= stop <= len(datas):
            raise ValueError(f"start {start} and stop {stop} are not a range of datas' {len(datas)} items")
        lists = []
        for index in range(start, stop):
            data = datas[index]
            if not isinstance(data, (bytes, str)):
                raise TypeError(f"item {index}: expected bytes or str, got {type(data).__name__}")
            lists.append(self.encode_utf8(data, special_tokens, special_ids))
        return lists


class PythonEncoder(BufferFromLists):
    """The contract in pure Python: special_token_regex, the split pattern, then a BpeFunction.

    A bounded cache maps each pre-token str already seen to its ids.
    """

    def __init__(
        self,
        bpe: BpeFunction,
        byte_ids: Sequence[int],
        ranks: RankTable,
        cache_size: int,
        pattern: SplitPattern = GPT2,
    ):
        self._pattern = pattern
        self._split = pattern.compiled
        self._settle_run = pattern.settle_run_compiled
        self._bpe = bpe
        self._byte_ids = list(byte_ids)
        self._ranks = ranks
        self._cache_size = cache_size
        self._cache: dict[str, tuple[int, ...]] = {}

    @overload
    def encode_utf8(
        self,
        data: bytes | str,
        special_tokens: Sequence[bytes],
        special_ids: Sequence[int],
        settled: Literal[False] = ...,
    ) -> list[int]: ...

    @overload
    def encode_utf8(
        self, data: bytes | str, special_tokens: Sequence[bytes], special_ids: Sequence[int], settled: Literal[True]
    ) -> tuple[list[int], int]: ...

    @overload
    def encode_utf8(
        self, data: bytes | str, special_tokens: Sequence[bytes], special_ids: Sequence[int], settled: bool
    ) -> list[int] | tuple[list[int], int]: ...

    def encode_utf8(
        self, data: bytes | str, special_tokens: Sequence[bytes], special_ids: Sequence[int], settled: bool = False
    ) -> list[int] | tuple[list[int], int]:
        if isinstance(data, str):
            data.encode("utf-8")  # (a lone surrogate raises UnicodeEncodeError, as in the core)
            text = data
        else:
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
        if self._pattern.name == "custom":  # one that may skip characters: checked, on the slow path
            out.extend(chain.from_iterable(map(self._cached_ids, iter_pretokens(text, self._pattern))))
            return
        # The hot loop: one dict lookup per pre-token when it is cached.
        cache = self._cache
        encode_pretoken = self._encode_pretoken
        extend = out.extend
        for match in self._split.finditer(text):
            piece = match.group()
            ids = cache.get(piece)
            extend(ids if ids is not None else encode_pretoken(piece))

    def _settled(self, buffer: str, specials: dict[str, int]) -> tuple[list[int], int]:
        """The ids of the longest prefix of `buffer` whose tokens no later text can change, and its length.

        Special tokens: a match starting at p is settled once every special token fits in
        buffer[p:] (p < settle), because then no longer alternative can still match there.
        Pre-tokens, in the ordinary text after the last settled special token: GPT-2's pattern
        decides a match [p, e) by looking at characters up to max(p + 2, e + 1) at most (the
        contraction alternative looks 3 characters ahead; greedy runs stop at the first character
        after them; `\\s+(?!\\S)` backs off one space before a non-space at e + 1), so a match
        with e + 2 <= the end of the known text is final. cl100k and o200k also end a match inside
        a run of whitespace by where the run ends (`\\s*[\\r\\n]` takes the run up to its last
        newline), and o200k's letter runs take a contraction of up to 3 characters after them and
        a run of capitals waits for the lower-case letter after it (`settle_run`): a match is final
        once the first non-space character at or after e (after the run, for o200k) is known, with
        `settle_margin` - 1 characters after it. A custom pattern settles nothing before a special
        token. The first match that is not final, and everything after it, is carried over. The cut
        is then both a special-token and a pre-token boundary, so encoding the rest separately
        gives the same tokens as encoding the whole (no pattern looks behind).
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
        margin = self._pattern.settle_margin
        if margin is None:
            return out, pos
        n = len(known)
        cut = 0
        for match in self._split.finditer(known):
            end = match.end()
            if self._pattern is GPT2:
                if end + 2 > n:
                    break
            else:
                run_end = self._settle_run.match(known, end).end() if self._settle_run else end
                after = _NON_SPACE.search(known, run_end)
                if after is None or after.start() + margin > n:
                    break
            piece = match.group()
            ids = self._cache.get(piece)
            out.extend(ids if ids is not None else self._encode_pretoken(piece))
            cut = match.end()
        return out, pos + cut

    def _cached_ids(self, piece: str) -> tuple[int, ...]:
        ids = self._cache.get(piece)
        return ids if ids is not None else self._encode_pretoken(piece)

    def _encode_pretoken(self, piece: str) -> tuple[int, ...]:
        # Keyed by the str, not its bytes, so a cache hit costs no UTF-8 encoding; the two are
        # in one-to-one correspondence for text without surrogates (the Tokenizer checks).
        ids = tuple(self._bpe(list(map(self._byte_ids.__getitem__, piece.encode("utf-8"))), self._ranks))
        if self._cache_size and len(piece) <= _MAX_CACHED_LEN:
            if len(self._cache) >= self._cache_size:
                self._cache.clear()  # cheaper than LRU bookkeeping on every hit; refills quickly
            self._cache[piece] = ids
        return ids


def native_encoder(
    byte_ids: Sequence[int], merges: RankTable | EncoderMerges, cache_size: int, pattern: SplitPattern = GPT2
) -> Encoder:
    """The compiled core's Encoder: PythonEncoder with `bpe_hybrid`, in C (its pre-token cache is
    keyed by UTF-8 bytes, and it never builds a str). It scans the presets (gpt2, cl100k, o200k),
    each with its own settled rule.

    Beyond the Encoder contract it encodes without the GIL, so threads sharing it run in parallel
    (each call has a cache of its own, of at most cache_size pre-tokens), into native unsigned ids
    of 2 or 4 bytes:

        encode_utf8_buffer(data, special_tokens, special_ids, settled=False, itemsize=4)
            -> bytearray (or (bytearray, cut) when settled), encode_utf8's ids
        encode_many_buffer(datas, special_tokens, special_ids, itemsize=4, start=0, stop=len(datas))
            -> (ids, offsets): each bytes of datas[start:stop] encoded, ids back to back, and
               stop - start + 1 native int64 offsets (datas[start + i]'s ids are
               ids[offsets[i]:offsets[i + 1]])
        encode_many_lists(datas, special_tokens, special_ids, start=0, stop=len(datas))
            -> the same encoding, then one list of ids per text, built with the GIL from one shared
               int object per id (no allocation per token)
    """
    scanner = compiled.scanner_name(pattern)
    if scanner is None:
        raise ConfigError(
            f"the native encoder scans the presets ({', '.join(PRESETS)}) only, not {pattern.name!r}; "
            "choose scan, heap or hybrid"
        )
    if isinstance(merges, dict):
        merges = [
            (left, right, merged) for (left, right), (_, merged) in sorted(merges.items(), key=lambda kv: kv[1][0])
        ]
    return compiled.core().Encoder(byte_ids, merges, cache_size, scanner)


def python_encoder(bpe: BpeFunction, tables: Tables, cache_size: int, pattern: SplitPattern = GPT2) -> Encoder:
    """A PythonEncoder with the merge loop `bpe` over `tables`."""
    return PythonEncoder(bpe, tables.byte_ids, tables.ranks, cache_size, pattern)


def native_encoder_of(tables: Tables, cache_size: int, pattern: SplitPattern = GPT2) -> Encoder:
    """The compiled core's Encoder over `tables` (merges as it takes them: packed ones as they are)."""
    return native_encoder(tables.byte_ids, tables.encoder_merges, cache_size, pattern)


# name -> factory(tables, cache size, split pattern). Every encoder gives identical ids for every
# input (tests check each one against tiktoken).
ENCODERS: dict[str, Callable[[Tables, int, SplitPattern], Encoder]] = {
    "scan": partial(python_encoder, bpe_scan),
    "heap": partial(python_encoder, bpe_heap),
    "hybrid": partial(python_encoder, bpe_hybrid),
}
if compiled.AVAILABLE:
    ENCODERS["native"] = native_encoder_of

# The fastest registered encoder (README, Performance): native where it was built; else hybrid,
# as fast as scan on real text and far faster on one very long pre-token (O(n log n), not O(n^2)).
DEFAULT_ENCODER = "native" if compiled.AVAILABLE else "hybrid"


def default_encoder(pattern: SplitPattern) -> str:
    """The fastest encoder that scans `pattern`: native for the presets where it was built."""
    return DEFAULT_ENCODER if compiled.scanner_name(pattern) is not None else "hybrid"
