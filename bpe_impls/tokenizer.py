"""Encoding text to token ids with a trained (vocab, merges) pair, and decoding back.

Modelled on tiktoken's core.py. The text is split on the special tokens (longest first, so they
are never split or merged), each piece between them is cut into pre-tokens by the shared GPT-2
pattern, and each pre-token's UTF-8 bytes are merged by BPE: repeatedly merge the adjacent pair
whose merge comes earliest in `merges` (the leftmost such pair on a tie) until no pair has a merge.

    tok = Tokenizer.from_files("vocab.json", "merges.txt", ["<|endoftext|>"])
    ids = tok.encode("Hello world<|endoftext|>")
    assert tok.decode(ids) == "Hello world<|endoftext|>"

The text between special tokens is encoded by one of the interchangeable encoders in `ENCODERS`
(all give identical ids): pure Python around a choice of merge loop, or the compiled core where it
was built (bpe_impls.native). Each keeps a bounded cache of pre-token -> ids.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from heapq import heapify, heappop, heappush
from itertools import chain, pairwise, repeat
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from . import gpt2_format, native
from .errors import ConfigError, EncodeError
from .pretokenize import GPT2_REGEX, special_token_regex, validate_special_tokens

# (left id, right id) -> (rank = index in merges, id of the merged token).
RankTable = dict[tuple[int, int], tuple[int, int]]
# Merges one pre-token: its byte ids in (the list may be changed in place), its token ids out.
BpeFunction = Callable[[list[int], RankTable], list[int]]

# Stands for "no merge" in bpe_scan: compares above every real (rank, id) and is found by identity.
_NO_MERGE = (1 << 62, -1)


def bpe_scan(ids: list[int], ranks: RankTable) -> list[int]:
    """Plain BPE: find the lowest-ranked adjacent pair (leftmost on a tie), merge it, repeat.

    Keeps the (rank, merged id) of every adjacent pair in a list and, after a merge, looks up
    only the two pairs that changed (as tiktoken's `_byte_pair_merge` does). Finding the minimum
    is then one C-level `min` + `index` per merge: O(n^2) in the pre-token length, but the
    fastest choice for the short pre-tokens of real text.
    """
    get = ranks.get
    found = list(map(get, pairwise(ids), repeat(_NO_MERGE)))
    while found:
        best = min(found)
        if best is _NO_MERGE:
            break
        i = found.index(best)  # the first occurrence: the leftmost pair with that rank
        new = best[1]
        ids[i] = new
        del ids[i + 1]
        del found[i]
        if i < len(found):
            found[i] = get((new, ids[i + 1]), _NO_MERGE)
        if i:
            found[i - 1] = get((ids[i - 1], new), _NO_MERGE)
    return ids


def bpe_heap(ids: list[int], ranks: RankTable) -> list[int]:
    """BPE with a min-heap of (rank, position) over a doubly linked list; O(n log n).

    Positions are the indices of the original bytes, so the heap's tie-break on position is the
    leftmost-first rule. A merged token keeps its left position; its right neighbour is marked
    dead (-1). Heap entries are never removed when a neighbour changes: an entry is acted on
    only if the pair now at its position still has that rank (lazy invalidation). Ranks are
    unique per pair, so "same rank" means "same pair".
    """
    n = len(ids)
    if n < 2:
        return ids
    get = ranks.get
    heap = []
    for i in range(n - 1):
        merge = get((ids[i], ids[i + 1]))
        if merge is not None:
            heap.append((merge[0], i))
    if not heap:
        return ids
    heapify(heap)
    nxt = list(range(1, n + 1))  # n means "no next"
    prv = list(range(-1, n - 1))  # -1 means "no previous"
    while heap:
        rank, i = heappop(heap)
        j = nxt[i]
        if j == n:
            continue
        merge = get((ids[i], ids[j]))  # a dead i has id -1, which is in no pair
        if merge is None or merge[0] != rank:
            continue  # stale: a neighbour merged since this entry was pushed
        new = merge[1]
        ids[i] = new
        ids[j] = -1
        k = nxt[j]
        nxt[i] = k
        if k != n:
            prv[k] = i
            merge = get((new, ids[k]))
            if merge is not None:
                heappush(heap, (merge[0], i))
        p = prv[i]
        if p != -1:
            merge = get((ids[p], new))
            if merge is not None:
                heappush(heap, (merge[0], p))
    return [t for t in ids if t != -1]


# Where bpe_heap starts to beat bpe_scan: measured on GPT-2 between 24 and 32 bytes.
_SCAN_LIMIT = 24


def bpe_hybrid(ids: list[int], ranks: RankTable) -> list[int]:
    """`bpe_scan` for short pre-tokens, `bpe_heap` for long ones (where O(n^2) would hurt)."""
    return bpe_scan(ids, ranks) if len(ids) <= _SCAN_LIMIT else bpe_heap(ids, ranks)


class PythonEncoder:
    """Encodes ordinary text (no special tokens) in pure Python: GPT2_REGEX, then a BpeFunction.

    A bounded cache maps each pre-token str already seen to its ids.
    """

    def __init__(self, bpe: BpeFunction, byte_ids: Sequence[int], ranks: RankTable, cache_size: int):
        self._bpe = bpe
        self._byte_ids = list(byte_ids)
        self._ranks = ranks
        self._cache_size = cache_size
        self._cache: dict[str, tuple[int, ...]] = {}

    def encode(self, text: str) -> list[int]:
        """The ids of `text`."""
        # The hot loop: one dict lookup per pre-token when it is cached.
        out: list[int] = []
        cache = self._cache
        encode_pretoken = self._encode_pretoken
        extend = out.extend
        for match in GPT2_REGEX.finditer(text):
            piece = match.group()
            ids = cache.get(piece)
            extend(ids if ids is not None else encode_pretoken(piece))
        return out

    def encode_settled(self, text: str) -> tuple[list[int], int]:
        """(ids, cut): the ids of text[:cut], the pre-tokens that more text could not change.

        A match ending at e is final once e + 2 <= len(text) (see Tokenizer._encode_settled).
        """
        out: list[int] = []
        last_final = len(text) - 2
        cut = 0
        cache = self._cache
        for match in GPT2_REGEX.finditer(text):
            if match.end() > last_final:
                break
            piece = match.group()
            ids = cache.get(piece)
            out.extend(ids if ids is not None else self._encode_pretoken(piece))
            cut = match.end()
        return out, cut

    def cache_len(self) -> int:
        return len(self._cache)

    def _encode_pretoken(self, piece: str) -> tuple[int, ...]:
        # Keyed by the str, not its bytes, so a cache hit costs no UTF-8 encoding; the two are
        # in one-to-one correspondence for text without surrogates (checked before encoding).
        ids = tuple(self._bpe(list(map(self._byte_ids.__getitem__, piece.encode("utf-8"))), self._ranks))
        if self._cache_size and len(piece) <= _MAX_CACHED_LEN:
            if len(self._cache) >= self._cache_size:
                self._cache.clear()  # cheaper than LRU bookkeeping on every hit; refills quickly
            self._cache[piece] = ids
        return ids


# Pre-tokens longer than this are not cached: they are rare and would pin large keys in memory.
_MAX_CACHED_LEN = 256


def native_encoder(byte_ids: Sequence[int], ranks: RankTable, cache_size: int) -> TextEncoder:
    """The compiled core's encoder (bpe_impls._native.Encoder): the same steps as PythonEncoder
    with `bpe_hybrid`, in C (its pre-token cache is keyed by UTF-8 bytes). It takes whole texts as
    UTF-8, special tokens included (`encode_utf8`), so it needs no str methods."""
    merges = [(left, right, merged) for (left, right), (_, merged) in sorted(ranks.items(), key=lambda kv: kv[1][0])]
    return native.core().Encoder(byte_ids, merges, cache_size)


class TextEncoder(Protocol):
    """What the Tokenizer needs of an encoder: either `encode` and `encode_settled` over the str
    pieces between special tokens (PythonEncoder), or `encode_utf8` over whole UTF-8 texts, special
    tokens included (the compiled encoder), which the Tokenizer then uses for everything."""

    def cache_len(self) -> int: ...


# name -> factory(byte ids, rank table, cache size). Every encoder gives identical ids for every
# input (tests check each one against tiktoken).
ENCODERS: dict[str, Callable[[Sequence[int], RankTable, int], TextEncoder]] = {
    "scan": partial(PythonEncoder, bpe_scan),
    "heap": partial(PythonEncoder, bpe_heap),
    "hybrid": partial(PythonEncoder, bpe_hybrid),
}
if native.AVAILABLE:
    ENCODERS["native"] = native_encoder

# Measured with GPT-2's vocab (CPU time, best of 15, shared 2-core machine). BPE alone on the
# 4763 distinct pre-tokens of corpus.en: scan 5.8-6.5 us each, hybrid 5.9-6.6, heap 8.0-8.9.
# Tokenizer.encode(corpus.en), cache on, cold: scan 2.0-2.5 MB/s, hybrid 1.7-2.4 (the same
# code path, within noise), heap 1.5-1.9; tiktoken 16-18. hybrid is the pure-Python default: as
# fast as scan on real text, and one 20,000-letter pre-token takes it 0.07 s against scan's 8.6 s.
# native, where built, is the default: 50-60 MB/s on kjv.txt with GPT-2's vocab, cold cache
# (`bpe compare --peers`, README), 3-5x tiktoken's single thread.
DEFAULT_ENCODER = "native" if native.AVAILABLE else "hybrid"


# Characters encode_iterable gathers before it encodes: per-call costs vanish, memory stays small.
_ITERABLE_BATCH = 1 << 15


class Tokenizer:
    """A byte-level BPE tokenizer: text <-> token ids, given a vocab, merges and special tokens.

    `vocab` maps id -> token bytes and must hold all 256 single bytes; `merges` are (left, right)
    byte pairs in rank order, each part a single byte or the result of an earlier merge, each part
    and result in the vocab. Special tokens not already in the vocab (by bytes) get new ids after
    the largest one. `encoder` names the merge loop in ENCODERS; `cache_size` bounds the
    pre-token cache (0 turns it off).
    """

    special_tokens: tuple[str, ...]
    special_token_ids: dict[str, int]

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Sequence[str] | None = None,
        *,
        encoder: str = DEFAULT_ENCODER,
        cache_size: int = 2**16,
    ):
        if encoder not in ENCODERS:
            raise ConfigError(f"unknown encoder {encoder!r}; choose from {', '.join(ENCODERS)}")
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ConfigError(f"cache_size must be a non-negative integer, got {cache_size!r}")
        self.special_tokens = validate_special_tokens(special_tokens)
        self._encoder_name = encoder
        self._cache_size = cache_size

        self._vocab: dict[int, bytes] = {}
        for token_id in sorted(vocab):
            token = vocab[token_id]
            if isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < 0:
                raise ConfigError(f"vocab id {token_id!r} is not a non-negative integer")
            if not isinstance(token, bytes) or not token:
                raise ConfigError(f"vocab id {token_id} maps to {token!r}, not non-empty bytes")
            self._vocab[token_id] = token

        # Special tokens: reuse an existing id with the same bytes (the lowest, which is where
        # common.build_vocab puts them), else append a new id.
        ids_of: dict[bytes, list[int]] = {}
        for token_id, token in self._vocab.items():
            ids_of.setdefault(token, []).append(token_id)
        self.special_token_ids = {}
        next_id = max(self._vocab, default=-1) + 1
        for special in self.special_tokens:
            try:
                token = special.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ConfigError(f"special token {special!r} has a lone surrogate at position {exc.start}") from None
            if token in ids_of:
                self.special_token_ids[special] = ids_of[token][0]
            else:
                self._vocab[next_id] = token
                ids_of[token] = [next_id]
                self.special_token_ids[special] = next_id
                next_id += 1

        # The id BPE uses for given bytes. When a special token's bytes also appear as an
        # ordinary token (a single-byte special such as "a"), the special one keeps the first id
        # and text uses the other, so "a" in text and the special "a" stay distinguishable.
        special_bytes = {special.encode("utf-8") for special in self.special_tokens}
        self._ordinary: dict[bytes, int] = {
            token: ids[1] if token in special_bytes and len(ids) > 1 else ids[0] for token, ids in ids_of.items()
        }
        missing = [b for b in range(256) if bytes([b]) not in self._ordinary]
        if missing:
            raise ConfigError(f"vocab has no token for byte 0x{missing[0]:02X} ({len(missing)} bytes missing)")
        self._byte_ids = [self._ordinary[bytes([b])] for b in range(256)]

        self._merges: list[tuple[bytes, bytes]] = []
        self._ranks: RankTable = {}
        made: set[bytes] = set()
        for rank, (left, right) in enumerate(merges):
            self._check_merge(rank, left, right, made)
            made.add(left + right)
            self._merges.append((left, right))
            pair = (self._ordinary[left], self._ordinary[right])
            self._ranks.setdefault(pair, (rank, self._ordinary[left + right]))  # a repeated pair keeps its first rank

        self._encoder = ENCODERS[encoder](self._byte_ids, self._ranks, cache_size)
        # An encoder that can also split on special tokens takes whole texts as UTF-8 (native).
        self._encode_utf8 = getattr(self._encoder, "encode_utf8", None)
        self._special_bytes = [special.encode("utf-8") for special in self.special_tokens]
        self._special_id_list = [self.special_token_ids[special] for special in self.special_tokens]
        self._special_regex = special_token_regex(self.special_tokens)
        self._max_special_len = max((len(special) for special in self.special_tokens), default=0)

    def _check_merge(self, rank: int, left: object, right: object, made: set[bytes]) -> None:
        if not isinstance(left, bytes) or not isinstance(right, bytes):
            raise ConfigError(f"merge #{rank} is {(left, right)!r}, not a pair of bytes")
        for side, token in (("left", left), ("right", right)):
            if token not in self._ordinary:
                raise ConfigError(f"merge #{rank} {left!r} + {right!r}: {side} token is not in the vocab")
            if len(token) > 1 and token not in made:
                raise ConfigError(
                    f"merge #{rank} {left!r} + {right!r}: {side} token is not a single byte and no earlier merge makes it"
                )
        if left + right not in self._ordinary:
            raise ConfigError(f"merge #{rank} {left!r} + {right!r}: merged token {left + right!r} is not in the vocab")

    # --- construction from files ------------------------------------------------------------

    @classmethod
    def from_files(
        cls,
        vocab_path: str | os.PathLike,
        merges_path: str | os.PathLike,
        special_tokens: list[str] | None = None,
        **options: object,
    ) -> Tokenizer:
        """A tokenizer from a GPT-2 vocab.json + merges.txt pair (`options` as for the constructor)."""
        vocab, merges = gpt2_format.load_tokenizer_files(vocab_path, merges_path)
        return cls(vocab, merges, special_tokens, **options)  # type: ignore[arg-type]

    @classmethod
    def from_directory(cls, directory: str | os.PathLike, **options: object) -> Tokenizer:
        """A tokenizer from what `save` wrote (special_tokens.json is optional: none if absent)."""
        folder = Path(directory)
        specials_path = folder / gpt2_format.SPECIAL_TOKENS_FILE
        specials = gpt2_format.load_special_tokens(specials_path) if specials_path.exists() else []
        return cls.from_files(folder / gpt2_format.VOCAB_FILE, folder / gpt2_format.MERGES_FILE, specials, **options)

    def save(self, directory: str | os.PathLike) -> None:
        """Write vocab.json, merges.txt and special_tokens.json into `directory` (atomically, per file)."""
        gpt2_format.save_tokenizer_files(directory, self._vocab, self._merges, self.special_tokens)

    # --- properties -------------------------------------------------------------------------

    @property
    def n_vocab(self) -> int:
        """One more than the largest token id (as tiktoken: the size an embedding table needs)."""
        return max(self._vocab) + 1

    @property
    def vocab(self) -> Mapping[int, bytes]:
        """id -> token bytes, including any special tokens this tokenizer appended (read-only view).

        A view, not a copy, so `token_id in tok.vocab` in a loop stays cheap.
        """
        return MappingProxyType(self._vocab)

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges in rank order (a copy)."""
        return list(self._merges)

    @property
    def encoder(self) -> str:
        """The name of the merge loop in ENCODERS this tokenizer uses."""
        return self._encoder_name

    def __repr__(self) -> str:
        return (
            f"Tokenizer(n_vocab={self.n_vocab}, merges={len(self._merges)}, "
            f"special_tokens={list(self.special_tokens)!r}, encoder={self._encoder_name!r}, "
            f"cache_size={self._cache_size})"
        )

    # --- encoding ---------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """Encode text; every occurrence of a special token becomes its id.

        >>> tok.encode("hello world<|endoftext|>")  # with GPT-2's files
        [31373, 995, 50256]
        """
        data = _check_text(text, 0)
        if self._encode_utf8 is not None:  # the whole job in C: split, scan, merge
            return self._encode_utf8(data, self._special_bytes, self._special_id_list)
        if self._special_regex is None:
            return self._encoder.encode(text)
        out: list[int] = []
        self._encode_into(text, out)
        return out

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text, treating special-token strings as plain text (tiktoken's name)."""
        data = _check_text(text, 0)
        if self._encode_utf8 is not None:
            return self._encode_utf8(data, (), ())
        return self._encoder.encode(text)

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Encode a stream of text chunks lazily: exactly `encode("".join(iterable))`.

        Works on an open text file, of any size (read in blocks rather than lines: the same text,
        fewer calls). Chunk boundaries may fall anywhere, even inside a pre-token or a special
        token: text whose tokens could still change when more arrives is carried over to the next
        round (see `_encode_settled`). Memory stays bounded by a batch of text
        (_ITERABLE_BATCH characters) plus the longest run without a settled token boundary.
        """
        if isinstance(iterable, io.TextIOBase):
            iterable = iter(partial(iterable.read, _ITERABLE_BATCH), "")
        # chain.from_iterable hands out the ids of each batch at C speed; a generator yielding
        # them one by one would cost more than encoding them.
        return chain.from_iterable(self._encode_batches(iterable))

    def _encode_batches(self, iterable: Iterable[str]) -> Iterator[list[int]]:
        # With the compiled encoder the buffer and its carry are UTF-8 bytes, and each round is
        # one C call (encode_utf8 with settled=True: _encode_settled's rules, in bytes).
        in_c = self._encode_utf8 is not None
        carry: str | bytes = b"" if in_c else ""
        pending: list[str] = []
        pending_len = 0
        checked = 0  # characters checked for surrogates so far, for the position in an error
        # Rescanning the carry costs its length, so wait until new text at least matches it: a
        # huge unbroken run is then rescanned O(log n) times, not once per chunk. And wait for a
        # batch of text, so short lines cost one encoder call per batch, not one per line.
        wanted = _ITERABLE_BATCH
        for chunk in iterable:
            if type(chunk) is not str:  # the per-line loop is hot: no call for the common case
                _require_str(chunk)
            pending.append(chunk)
            pending_len += len(chunk)
            if pending_len < wanted:
                continue
            new = "".join(pending)
            data = _check_text(new, checked)
            checked += len(new)
            pending.clear()
            pending_len = 0
            if in_c:
                buffer = carry + data
                ids, cut = self._encode_utf8(buffer, self._special_bytes, self._special_id_list, True)
            else:
                buffer = carry + new
                ids, cut = self._encode_settled(buffer)
            carry = buffer[cut:]
            wanted = max(len(carry), _ITERABLE_BATCH)
            yield ids
        new = "".join(pending)
        data = _check_text(new, checked)
        if in_c:
            yield self._encode_utf8(carry + data, self._special_bytes, self._special_id_list)
        else:
            yield self._encode_unchecked(carry + new)

    def _encode_settled(self, buffer: str) -> tuple[list[int], int]:
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
        pos = 0
        settle = len(buffer) - self._max_special_len + 1 if self._special_regex is not None else len(buffer) + 1
        if self._special_regex is not None:
            for match in self._special_regex.finditer(buffer):
                if match.start() >= settle:
                    break
                pos = match.end()
        # Up to the end of the last settled special token, the text encodes as a whole would.
        out = self._encode_unchecked(buffer[:pos]) if pos else []
        # The ordinary text from pos is known only up to `settle`: a special token may start there.
        known = buffer[pos : max(pos, min(settle, len(buffer)))]  # never a negative slice end
        ids, cut = self._encoder.encode_settled(known)
        out.extend(ids)
        return out, pos + cut

    def _encode_unchecked(self, text: str) -> list[int]:
        """`encode` by the str pieces, for text already checked (a str without lone surrogates)."""
        out: list[int] = []
        self._encode_into(text, out)
        return out

    def _encode_into(self, text: str, out: list[int]) -> None:
        if self._special_regex is None:
            self._encode_ordinary_into(text, out)
            return
        start = 0
        for match in self._special_regex.finditer(text):
            self._encode_ordinary_into(text[start : match.start()], out)
            out.append(self.special_token_ids[match.group()])
            start = match.end()
        self._encode_ordinary_into(text[start:], out)

    def _encode_ordinary_into(self, text: str, out: list[int]) -> None:
        out.extend(self._encoder.encode(text))

    # --- decoding ---------------------------------------------------------------------------

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The concatenated bytes of the tokens."""
        ids = ids if isinstance(ids, Sequence) else list(ids)
        try:
            return b"".join(map(self._vocab.__getitem__, ids))
        except (KeyError, TypeError):
            pass
        for position, token_id in enumerate(ids):
            try:
                self._vocab[token_id]
            except (KeyError, TypeError):
                raise EncodeError(f"unknown token id {token_id!r} at position {position}") from None
        raise AssertionError("unreachable: decode failed but every id is known")

    def decode(self, ids: Iterable[int]) -> str:
        """The text of the tokens; bytes that are not valid UTF-8 become U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


def _require_str(text: object) -> None:
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")


def _check_text(text: str, offset: int) -> bytes:
    """The UTF-8 of `text`; rejects a non-str or a str with a lone surrogate (it has no UTF-8)."""
    _require_str(text)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EncodeError(
            f"lone surrogate U+{ord(text[exc.start]):04X} at position {offset + exc.start} cannot be encoded"
        ) from None
