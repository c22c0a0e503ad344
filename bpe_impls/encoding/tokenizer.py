"""Encoding text to token ids with a trained (vocab, merges) pair, and decoding back.

Modelled on tiktoken's core.py: a thin, typed class over an encoder (encoding.encoders), which does
the work on whole UTF-8 texts. The text is split on the special tokens (longest first, so they
are never split or merged), each piece between them is cut into pre-tokens by the split pattern
(GPT-2's unless `pattern=` names another), and each pre-token's UTF-8 bytes are merged by BPE:
repeatedly merge the adjacent pair whose merge comes earliest in `merges` (the leftmost such pair on
a tie) until no pair has a merge.

    tok = Tokenizer.load("gpt2/encoder.json", special_tokens=["<|endoftext|>"])
    ids = tok.encode("Hello world<|endoftext|>")
    assert tok.decode(ids) == "Hello world<|endoftext|>"
"""

from __future__ import annotations

import gc
import io
import os
import sys
import warnings
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence, Set
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import cached_property, lru_cache, partial
from itertools import accumulate, chain, pairwise
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import regex

from ..base import compiled
from ..base.checks import require_int, resolve_workers
from ..base.errors import ConfigError, EncodeError
from ..base.patterns import SplitPattern, resolve_pattern, validate_special_tokens
from .encoders import ENCODERS, default_encoder
from .tables import MAX_TOKEN_ID, build_tables

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .formats import table_cache
    from .formats.common import PackedTokenizer

_T = TypeVar("_T")
# What the encode methods take: a str, or its UTF-8 as bytes (text read from a file: no str built).
Text = str | bytes
AllowedSpecial = Literal["all"] | Set[str]
DisallowedSpecial = Literal["all"] | Collection[str]

# Characters encode_iterable gathers before it encodes: per-call costs vanish, memory stays small.
_ITERABLE_BATCH = 1 << 15
# The id dtypes the numpy methods give (native byte order): the smallest that holds every id.
_ID_DTYPES = ("uint16", "uint32")
# A threaded batch is cut into up to this many runs per thread, each of at least _MIN_RUN_BYTES.
_RUNS_PER_THREAD = 8
_MIN_RUN_BYTES = 1 << 16


class Tokenizer:
    """A byte-level BPE tokenizer: text <-> token ids, given a vocab, merges and special tokens.

    `vocab` maps id -> token bytes and must hold all 256 single bytes; `merges` are (left, right)
    byte pairs in rank order, each part a single byte or the result of an earlier merge, each part
    and result in the vocab. Special tokens not already in the vocab (by bytes) get new ids after
    the largest one. `pattern` is the split pattern: a preset ("gpt2", the default; "cl100k";
    "o200k") or any regex. `encoder` names the merge loop in ENCODERS (default: the fastest that
    scans the pattern); `cache_size` bounds the pre-token cache (0 turns it off). The default,
    2**18 pre-tokens, holds every distinct pre-token of a few MB of multilingual text, so a second
    pass over such text hits the cache. The compiled encoder's cache grows with use, so short texts
    pay nothing for the bound.

    The surface, and why. Encoding has four methods, one per output shape: `encode` (a list, as
    tiktoken and CS336), `encode_to_numpy` (an array, no Python int per token), `encode_batch` and
    `encode_batch_to_numpy` (many texts on every core). The other axes are arguments, so every
    combination exists and behaves alike:
    - the input is a `str` or its UTF-8 as `bytes` in every method (the encoders read UTF-8, so
      text read from a file needs no str; invalid UTF-8 is an EncodeError naming the byte offset);
    - special tokens are handled by tiktoken's two keywords in every method. Unlike tiktoken, every
      special token is allowed by default (`allowed_special="all"`): a tokenizer built with special
      tokens is asked to recognise them, as CS336's contract and HF's tokenizers do.
      `allowed_special=set()` encodes them as plain text (tiktoken's `encode_ordinary`, kept as a
      name for it); a special token in `disallowed_special` found in the text is an EncodeError
      naming it and its offset, as tiktoken raises.
    `encode_iterable` streams one text in chunks (CS336's method) and always recognises special
    tokens: a token split across chunks is still found, which a per-chunk check could not promise.
    Files: one `load(path, format=None)` reads every format `save(path, format=)` writes (HF's
    `from_file` / `save` pair), detecting the format from what `path` holds.
    """

    special_tokens: tuple[str, ...]
    special_token_ids: dict[str, int]
    pattern: SplitPattern

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Sequence[str] | None = None,
        *,
        pattern: str | SplitPattern | None = None,
        encoder: str | None = None,
        cache_size: int = 2**18,
    ):
        self.pattern = resolve_pattern(pattern)
        encoder = default_encoder(self.pattern) if encoder is None else encoder
        if encoder not in ENCODERS:
            raise ConfigError(f"unknown encoder {encoder!r}; choose from {', '.join(ENCODERS)}")
        self._cache_size = require_int(cache_size, "cache_size", minimum=0)
        self.special_tokens = validate_special_tokens(special_tokens)
        self._encoder_name = encoder
        self._tables = build_tables(vocab, merges, self.special_tokens)
        self._vocab = self._tables.vocab
        self._n_vocab = max(self._vocab) + 1  # (the numpy methods ask on every call)
        self._merges = self._tables.merges
        self.special_token_ids = self._tables.special_token_ids
        self._merge_count = len(self._merges)
        self._encoder = ENCODERS[encoder](self._tables.byte_ids, self._tables.ranks, cache_size, self.pattern)
        self._special_bytes = [special.encode("utf-8") for special in self.special_tokens]
        self._special_id_list = [self.special_token_ids[special] for special in self.special_tokens]

    @staticmethod
    def _packs(options: Mapping[str, object]) -> bool:
        """Whether a load with these constructor `options` may build its tokenizer from packed
        tables (`_from_packed`): none but the cache size, or the compiled encoder asked for."""
        return set(options) <= {"encoder", "cache_size"} and options.get("encoder", "native") == "native"

    @classmethod
    def _from_packed(cls, packed: PackedTokenizer, options: Mapping[str, object]) -> Tokenizer | None:
        """The tokenizer `cls(vocab, merges, specials, pattern=..., **options)` builds from a
        tokenizer's files, from their tables read and packed by the compiled core (a rank file
        by `tiktoken_file.load_packed`, a gpt2 pair or an HF file by their `load_packed`, or the
        tables the cache kept) with no Python object per token (the vocab and merges are made on
        first use). None where that constructor would do more than the packed tables say (an id
        it refuses, an encoder other than the compiled one): the caller then takes the general
        path. `options` are those `_packs` allows."""
        pattern = packed.pattern
        scanner = compiled.scanner_name(pattern)
        special_ids = packed.special_token_ids
        if default_encoder(pattern) != "native" or scanner is None or max(special_ids.values(), default=0) > MAX_TOKEN_ID:
            return None
        self = cls.__new__(cls)
        self.pattern = pattern
        self._cache_size = cache_size = require_int(options.get("cache_size", 2**18), "cache_size", minimum=0)
        self.special_tokens = validate_special_tokens(tuple(special_ids))
        self._encoder_name = "native"
        self._packed = packed
        self._n_vocab = max([packed.max_rank, *special_ids.values()]) + 1
        self._merge_count = len(packed.tables.merges) // 12
        self.special_token_ids = dict(special_ids)
        merges = packed.tables.merges if packed.encoder_merges is None else packed.encoder_merges
        self._encoder = compiled.core().Encoder(packed.tables.byte_ids, merges, cache_size, scanner)
        self._special_bytes = [special.encode("utf-8") for special in self.special_tokens]
        self._special_id_list = [special_ids[special] for special in self.special_tokens]
        return self

    @cached_property
    def _vocab(self) -> dict[int, bytes]:
        # Only a tokenizer made by _from_packed gets here (the constructor sets _vocab).
        vocab = self._packed.tables.tokens()
        for special, token_id in self.special_token_ids.items():
            vocab[token_id] = special.encode("utf-8")
        return vocab if all(map(int.__lt__, vocab, list(vocab)[1:])) else dict(sorted(vocab.items()))

    @cached_property
    def _merges(self) -> list[tuple[bytes, bytes]]:
        vocab = self._vocab
        triples = memoryview(self._packed.tables.merges).cast("I").tolist()
        return [(vocab[left], vocab[right]) for left, right in zip(triples[0::3], triples[1::3])]

    # --- files -------------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        format: str | None = None,
        *,
        merges_path: str | os.PathLike | None = None,
        special_tokens: Sequence[str] | Mapping[str, int] | None = None,
        pattern: str | SplitPattern | None = None,
        cache: bool = True,
        **options: object,
    ) -> Tokenizer:
        """A tokenizer from a file or directory in any format `save` writes (`format` None: told
        apart by what `path` holds; else "gpt2", "hf" or "tiktoken").

        - gpt2: a directory `save` wrote (vocab.json, merges.txt and the optional
          special_tokens.json and split_pattern.json), or a vocab .json file whose merges are
          `merges_path` (GPT-2's own encoder.json + vocab.bpe; giving `merges_path` implies gpt2).
        - hf: a tokenizer.json, or a directory holding one (see formats/hf.py for what is read).
        - tiktoken: a .tiktoken ranks file, or a directory holding one, its merges rebuilt from the
          ranks; its sidecar NAME.tiktoken.json, if present, gives the pattern and special tokens.
        `special_tokens` and `pattern` stand in for what a file does not say (a gpt2 pair, a
        .tiktoken file without sidecar, where special tokens may map text -> id); they replace a
        gpt2 directory's sidecars, and are refused for an HF file or a .tiktoken with a sidecar,
        which say it themselves. `options` go to the constructor (encoder, cache_size).
        `cache`: keep the tables a gpt2 or hf load builds in the cache folder (base/cache.py),
        named by the files' content, and take them from there when the same files load again
        (see formats/table_cache.py); False reads and writes nothing there.
        """
        # A load makes a few objects per token and no cycles, but each counts towards the cyclic
        # collector's next run, which would otherwise run many times over them as they are made.
        with _gc_paused():
            return cls._load(path, format, merges_path, special_tokens, pattern, cache, options)

    @classmethod
    def _load(
        cls, path: str | os.PathLike, format: str | None, merges_path: str | os.PathLike | None,
        special_tokens: Sequence[str] | Mapping[str, int] | None, pattern: str | SplitPattern | None, cache: bool,
        options: dict[str, object],
    ) -> Tokenizer:
        from .formats import FORMATS, detect, gpt2, hf, tiktoken_file  # (the formats load with the first file)
        from .formats.common import special_ids_match

        if merges_path is not None:
            if format not in (None, "gpt2"):
                raise ConfigError(f"merges_path is for the gpt2 format, not {format!r}")
            return cls._load_gpt2_pair(path, merges_path, special_tokens, pattern, options, cache)
        if format is None:
            format, where = detect(path)
        elif format not in FORMATS:
            raise ConfigError(f"unknown format {format!r}; choose from {', '.join(FORMATS)}")
        else:
            where = Path(path)
        if format == "gpt2":
            folder = where if where.is_dir() else where.parent
            specials, saved_pattern = gpt2.load_sidecars(folder)
            return cls._load_gpt2_pair(
                folder / gpt2.VOCAB_FILE, folder / gpt2.MERGES_FILE,
                list(specials) if special_tokens is None else special_tokens,
                saved_pattern if pattern is None else pattern, options, cache,
            )
        slot = None
        packed_ok = cls._packs(options)
        if format == "tiktoken":
            if packed_ok:
                packed = tiktoken_file.load_packed(where, pattern, special_tokens)
                tokenizer = cls._from_packed(packed, options) if packed is not None else None
                if tokenizer is not None:
                    return tokenizer
            data = tiktoken_file.load(where, pattern, special_tokens)
        else:
            if special_tokens is not None:
                raise ConfigError("an HF tokenizer.json lists its own special tokens; do not pass special_tokens")
            file = hf.tokenizer_file(where)
            if cache:
                slot = cls._cache_slot("hf", [file], pattern, None, options)
                tokenizer = cls._from_cache(slot, options) if slot is not None else None
                if tokenizer is not None:
                    return tokenizer
            packed = hf.load_packed(file) if packed_ok else None
            if packed is not None:
                if pattern is not None:  # (resolved here, after the file's checks, as the constructor would)
                    packed = packed._replace(pattern=resolve_pattern(pattern))
                tokenizer = cls._from_packed(packed, options)
                if tokenizer is not None:
                    if slot is not None:
                        tokenizer._keep_tables(slot)
                    return tokenizer
            data = FORMATS[format].load(where)
            if pattern is not None:
                options["pattern"] = pattern
        options.setdefault("pattern", data.pattern)
        tokenizer = cls(data.vocab, data.merges, data.special_tokens, **options)  # type: ignore[arg-type]
        special_ids_match(data, tokenizer.special_token_ids, where)
        if slot is not None:
            tokenizer._keep_tables(slot)
        return tokenizer

    @classmethod
    def _load_gpt2_pair(
        cls, vocab_path: str | os.PathLike, merges_path: str | os.PathLike,
        special_tokens: Sequence[str] | Mapping[str, int] | None, pattern: str | SplitPattern | None,
        options: dict[str, object], cache: bool = True,
    ) -> Tokenizer:
        from .formats import gpt2

        specials = list(special_tokens) if special_tokens is not None else None
        slot = None
        if cache:
            paths = [Path(vocab_path), Path(merges_path)]
            slot = cls._cache_slot("gpt2", paths, pattern, specials, options)
            tokenizer = cls._from_cache(slot, options) if slot is not None else None
            if tokenizer is not None:
                return tokenizer
        if cls._packs(options):
            try:  # (else the constructor names the fault, after the files' checks)
                chosen, names = resolve_pattern(pattern), validate_special_tokens(specials)
            except ConfigError:
                chosen = None
            packed = gpt2.load_packed(vocab_path, merges_path, names, chosen) if chosen is not None else None
            tokenizer = cls._from_packed(packed, options) if packed is not None else None
            if tokenizer is not None:
                if slot is not None:
                    tokenizer._keep_tables(slot)
                return tokenizer
        vocab, merges = gpt2.load_tokenizer_files(vocab_path, merges_path)
        if pattern is not None:
            options["pattern"] = pattern
        tokenizer = cls(vocab, merges, specials, **options)  # type: ignore[arg-type]
        # After the constructor's checks, which name more basic faults (a byte with no token).
        gpt2.check_every_token_made(vocab, merges, tokenizer.special_tokens, vocab_path, merges_path)
        if slot is not None:
            tokenizer._keep_tables(slot)
        return tokenizer

    # --- the table cache (formats/table_cache.py): only where the result is the compiled encoder's ------

    @staticmethod
    def _cache_slot(
        kind: str, paths: list[Path], pattern: str | SplitPattern | None, specials: list[str] | None,
        options: Mapping[str, object],
    ) -> table_cache.Slot | None:
        """The cache slot of a load, or None where the tokenizer it makes is not kept (another
        encoder asked for, a pattern the compiled encoder does not scan). A pattern that does not
        resolve is left to the load, which names it where it would without a cache."""
        if not set(options) <= {"encoder", "cache_size"} or options.get("encoder") not in (None, "native"):
            return None
        chosen: list[str] | None = None
        if pattern is not None or kind == "gpt2":
            try:
                resolved = resolve_pattern(pattern)
            except ConfigError:
                return None
            if compiled.scanner_name(resolved) is None:
                return None
            chosen = [resolved.name, resolved.regex]
        from .formats import table_cache

        return table_cache.slot(kind, paths, [chosen, specials])

    @classmethod
    def _from_cache(cls, slot: table_cache.Slot, options: Mapping[str, object]) -> Tokenizer | None:
        from .formats import table_cache

        found = table_cache.lookup(slot)
        return cls._from_packed(found, options) if found is not None else None

    def _keep_tables(self, slot: table_cache.Slot) -> None:
        """Write this freshly built tokenizer's tables to `slot`, if it runs the compiled encoder."""
        from .formats import table_cache

        if self._encoder_name != "native":
            return
        packed = getattr(self, "_packed", None)
        if packed is None:
            tables = self._tables
            packed = table_cache.packed_tables(self._vocab, self._merges, self.special_token_ids, self.pattern,
                                               tables.byte_ids, tables.ranks)
        table_cache.store(slot, table_cache.pack(slot.name, packed))

    @classmethod
    def from_files(cls, vocab_path: str | os.PathLike, merges_path: str | os.PathLike,
                   special_tokens: list[str] | None = None, **options: object) -> Tokenizer:
        """Deprecated: `Tokenizer.load(vocab_path, merges_path=merges_path, special_tokens=...)`."""
        _deprecated("from_files(vocab, merges, ...)", "load(vocab, merges_path=merges, special_tokens=...)")
        return cls.load(vocab_path, merges_path=merges_path, special_tokens=special_tokens, **options)  # type: ignore[arg-type]

    @classmethod
    def from_directory(cls, directory: str | os.PathLike, **options: object) -> Tokenizer:
        """Deprecated: `Tokenizer.load(directory, format="gpt2")`."""
        _deprecated("from_directory(path)", 'load(path, format="gpt2")')
        return cls.load(directory, "gpt2", **options)  # type: ignore[arg-type]

    @classmethod
    def from_hf(cls, path: str | os.PathLike, **options: object) -> Tokenizer:
        """Deprecated: `Tokenizer.load(path, format="hf")`."""
        _deprecated("from_hf(path)", 'load(path, format="hf")')
        return cls.load(path, "hf", **options)  # type: ignore[arg-type]

    @classmethod
    def from_tiktoken(cls, path: str | os.PathLike, pattern: str | SplitPattern | None = None,
                      special_tokens: Mapping[str, int] | Sequence[str] | None = None, **options: object) -> Tokenizer:
        """Deprecated: `Tokenizer.load(path, format="tiktoken", pattern=..., special_tokens=...)`."""
        _deprecated("from_tiktoken(path, ...)", 'load(path, format="tiktoken", ...)')
        return cls.load(path, "tiktoken", pattern=pattern, special_tokens=special_tokens, **options)  # type: ignore[arg-type]

    def save(self, directory: str | os.PathLike, format: str = "gpt2") -> tuple[Path, ...]:
        """Save in a format of FORMATS; returns the paths written (none is renamed into place
        unless all were written).

        gpt2 (the default): vocab.json, merges.txt, special_tokens.json and split_pattern.json in
        `directory`. hf: `directory`/tokenizer.json, or the file itself if the path ends in .json.
        tiktoken: `directory`/tokenizer.tiktoken and tokenizer.tiktoken.json, or NAME.tiktoken and
        NAME.tiktoken.json if the path ends in .tiktoken; refused (naming the token) where tiktoken's
        rank-order merging would not give this tokenizer's ids.
        """
        from .formats import FORMATS, TokenizerData

        if format not in FORMATS:
            raise ConfigError(f"unknown format {format!r}; choose from {', '.join(FORMATS)}")
        data = TokenizerData(self._vocab, self._merges, self.special_tokens, self.pattern, self.special_token_ids)
        return FORMATS[format].save(directory, data)

    # --- properties -------------------------------------------------------------------------

    @property
    def n_vocab(self) -> int:
        """One more than the largest token id (as tiktoken: the size an embedding table needs)."""
        return self._n_vocab

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
            f"Tokenizer(n_vocab={self.n_vocab}, merges={self._merge_count}, "
            f"special_tokens={list(self.special_tokens)!r}, encoder={self._encoder_name!r}, "
            f"cache_size={self._cache_size}, pattern={self.pattern.name!r})"
        )

    # --- encoding ---------------------------------------------------------------------------

    def encode(
        self, text: Text, *, allowed_special: AllowedSpecial = "all", disallowed_special: DisallowedSpecial = ()
    ) -> list[int]:
        """The ids of `text` (a str, or its UTF-8 as bytes); special tokens as the class docstring says.

        >>> tok.encode("hello world<|endoftext|>")  # with GPT-2's files
        [31373, 995, 50256]
        """
        if allowed_special == "all" and not disallowed_special and type(text) is str:
            # The common call, inlined: it is the hot path for short texts.
            try:
                return self._encoder.encode_utf8(text, self._special_bytes, self._special_id_list)
            except UnicodeEncodeError:
                raise _surrogate_error(text, 0) from None
        specials, ids = self._specials(allowed_special, disallowed_special, text)
        return _on_text(self._encoder.encode_utf8, text, specials, ids)

    def encode_ordinary(self, text: Text) -> list[int]:
        """`encode(text, allowed_special=set())`: special-token strings as plain text (tiktoken's name)."""
        return _on_text(self._encoder.encode_utf8, text, (), ())

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Encode a stream of text chunks lazily: exactly `encode("".join(iterable))`.

        Works on an open text file, of any size (read in blocks rather than lines: the same text,
        fewer calls). Chunk boundaries may fall anywhere, even inside a pre-token or a special
        token: text whose tokens could still change when more arrives is carried over to the next
        round (see `encoders.PythonEncoder._settled`). Memory stays bounded by a batch of text
        (_ITERABLE_BATCH characters) plus the longest run without a settled token boundary.
        """
        if isinstance(iterable, io.TextIOBase):
            iterable = iter(partial(iterable.read, _ITERABLE_BATCH), "")
        # chain.from_iterable hands out the ids of each batch at C speed; a generator yielding
        # them one by one would cost more than encoding them.
        return chain.from_iterable(self._encode_batches(iterable))

    def _encode_batches(self, iterable: Iterable[str]) -> Iterator[list[int]]:
        # The buffer and its carry are UTF-8 bytes, and each round is one encoder call that
        # encodes the settled prefix (see PythonEncoder._settled for the rule) and says where it ends.
        encode_utf8 = self._encoder.encode_utf8
        carry = b""
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
            buffer = carry + data
            ids, cut = encode_utf8(buffer, self._special_bytes, self._special_id_list, True)
            carry = buffer[cut:]
            wanted = max(len(carry), _ITERABLE_BATCH)
            yield ids
        data = _check_text("".join(pending), checked)
        yield encode_utf8(carry + data, self._special_bytes, self._special_id_list)

    # --- batches and numpy ------------------------------------------------------------------

    def id_dtype(self, dtype: npt.DTypeLike | None = None) -> np.dtype:
        """The dtype of the numpy methods' ids: `dtype` if given (uint16 or uint32, and uint16 only
        when every id fits), else uint16 when n_vocab <= 65536, else uint32."""
        np = _numpy()
        if dtype is None:
            return np.dtype(np.uint16 if self.n_vocab <= 1 << 16 else np.uint32)
        try:
            chosen = np.dtype(dtype)
        except TypeError:
            chosen = None
        if chosen is None or chosen.name not in _ID_DTYPES:
            raise ConfigError(f"unknown id dtype {dtype!r}; choose uint16 or uint32")
        if chosen.itemsize == 2 and self.n_vocab > 1 << 16:
            raise ConfigError(f"dtype uint16 cannot hold this vocab's ids (n_vocab {self.n_vocab} > 65536)")
        return np.dtype(chosen.name)

    def encode_to_numpy(
        self, text: Text, dtype: npt.DTypeLike | None = None, *,
        allowed_special: AllowedSpecial = "all", disallowed_special: DisallowedSpecial = (),
    ) -> np.ndarray:
        """`encode(text)` as a 1-D numpy array of `id_dtype(dtype)`, built without a Python int per token."""
        chosen = self.id_dtype(dtype)
        specials, ids = self._specials(allowed_special, disallowed_special, text)
        buffer = _on_text(self._encoder.encode_utf8_buffer, text, specials, ids, itemsize=chosen.itemsize)
        return _numpy().frombuffer(buffer, dtype=chosen)

    def encode_batch(
        self, texts: Sequence[Text], num_threads: int | None = None, *,
        allowed_special: AllowedSpecial = "all", disallowed_special: DisallowedSpecial = (),
    ) -> list[list[int]]:
        """`[encode(text) for text in texts]`, on `num_threads` threads (None: every core available
        to this process; 1: this thread only). tiktoken's encode_batch."""
        datas, kind, specials, ids = self._batch_args(texts, allowed_special, disallowed_special)
        encoder = self._encoder

        def encode_run(run: tuple[int, int]) -> list[list[int]]:
            # Each thread turns its run into lists (with the GIL) as soon as it has encoded it, while
            # the other threads still encode theirs without the GIL.
            lists = encoder.encode_many_lists(datas, specials, ids, *run)
            if collecting:
                _collect_young()
            return lists

        # Lists hold no cycles, but each one counts towards the cyclic collector's next run, which
        # would otherwise run many times over a large batch's lists (see docs/design-notes.md).
        with _gc_paused() as collecting:
            return _join_lists(self._encode_runs(datas, kind, num_threads, encode_run))

    def encode_batch_to_numpy(
        self, texts: Sequence[Text], num_threads: int | None = None, dtype: npt.DTypeLike | None = None, *,
        allowed_special: AllowedSpecial = "all", disallowed_special: DisallowedSpecial = (),
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every text encoded as `encode` does, as (ids, offsets): the texts' ids one after another
        in one 1-D array of `id_dtype(dtype)`, and int64 offsets (len(texts) + 1 of them) so that
        text i's ids are ids[offsets[i]:offsets[i + 1]]. Threads as in `encode_batch`: the batch is
        cut into contiguous runs of about equal UTF-8 size, several per thread, encoded without the GIL.

        A batch is all str or all bytes. An item of another type is a TypeError, a lone surrogate
        or invalid UTF-8 an EncodeError, each naming the batch index.
        """
        chosen = self.id_dtype(dtype)  # before the work: a bad dtype fails at once
        datas, kind, specials, ids = self._batch_args(texts, allowed_special, disallowed_special)
        return self._encode_utf8_batch(datas, kind, num_threads, chosen, specials, ids)

    def encode_utf8_to_numpy(self, data: bytes, dtype: npt.DTypeLike | None = None) -> np.ndarray:
        """Deprecated: `encode_to_numpy` takes bytes."""
        _deprecated("encode_utf8_to_numpy(data)", "encode_to_numpy(data)")
        if not isinstance(data, bytes):
            raise TypeError(f"expected bytes, got {type(data).__name__}")
        return self.encode_to_numpy(data, dtype)

    def encode_utf8_batch_to_numpy(
        self, datas: Sequence[bytes], num_threads: int | None = None, dtype: npt.DTypeLike | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Deprecated: `encode_batch_to_numpy` takes bytes."""
        _deprecated("encode_utf8_batch_to_numpy(datas)", "encode_batch_to_numpy(datas)")
        return self._encode_utf8_batch(_as_list(datas), bytes, num_threads, self.id_dtype(dtype),
                                       self._special_bytes, self._special_id_list)

    def encode_ordinary_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        """Deprecated: `encode_batch(texts, allowed_special=set())`."""
        _deprecated("encode_ordinary_batch(texts)", "encode_batch(texts, allowed_special=set())")
        return self.encode_batch(texts, num_threads, allowed_special=set())

    def _batch_args(
        self, texts: Sequence[Text], allowed_special: AllowedSpecial, disallowed_special: DisallowedSpecial,
    ) -> tuple[list, type, Sequence[bytes], Sequence[int]]:
        """The batch as a list, its kind (str or bytes), and the special tokens and ids to encode
        it with; a disallowed special token in any text is an EncodeError naming its index."""
        datas = _as_list(texts)
        kind = bytes if datas and type(datas[0]) is bytes else str
        specials, ids = self._specials(allowed_special, disallowed_special, None)
        if disallowed_special:
            disallowed = self._disallowed(self._special_set(allowed_special, "allowed_special"), disallowed_special)
            if disallowed:
                for index, data in enumerate(datas):
                    _refuse_disallowed(data, disallowed, index)
        return datas, kind, specials, ids

    def _encode_utf8_batch(
        self, datas: list[bytes] | list[str], kind: type, num_threads: int | None, dtype: np.dtype,
        specials: Sequence[bytes], ids: Sequence[int],
    ) -> tuple[np.ndarray, np.ndarray]:
        encoder = self._encoder

        def encode_run(run: tuple[int, int]) -> tuple[bytearray, bytearray]:
            return encoder.encode_many_buffer(datas, specials, ids, dtype.itemsize, *run)

        return _join_runs(self._encode_runs(datas, kind, num_threads, encode_run), dtype)

    def _encode_runs(
        self, datas: list[bytes] | list[str], kind: type, num_threads: int | None,
        encode_run: Callable[[tuple[int, int]], _T],
    ) -> list[_T]:
        """encode_run of each run of the batch, in order, on up to `num_threads` threads."""
        threads = resolve_workers(num_threads) if num_threads is None else require_int(num_threads, "num_threads", minimum=1)
        threads = min(threads, max(1, len(datas)))  # no run is shorter than one text
        # More runs than threads, handed out as threads free up: equal bytes are not equal work (a
        # run of new words or another script costs several times a run of cached English), so one
        # run per thread leaves a thread idle while the other finishes. Runs stay >= _MIN_RUN_BYTES
        # where the batch allows, so each one's GIL round trip is noise. The same pass checks
        # every item is a `kind`.
        bounds = _BATCH_RUNS(datas, kind, 1 if threads == 1 else threads * _RUNS_PER_THREAD, threads, _MIN_RUN_BYTES)
        runs = list(pairwise(bounds))
        size = bounds[-1] if bounds else 0  # the length the runs were planned for (another thread may change it)
        try:
            if len(runs) <= 1:
                results = [encode_run(run) for run in runs]
            else:
                with ThreadPoolExecutor(min(threads, len(runs))) as pool:
                    results = list(pool.map(encode_run, runs))
        except UnicodeEncodeError:
            _name_bad_text(datas)
            raise
        except ValueError:
            if len(datas) != size:
                raise RuntimeError(
                    f"the batch changed size while it was encoded ({size} items, now {len(datas)}): "
                    f"another thread modified the list"
                ) from None
            _raise_invalid_utf8(datas)
            raise
        return results

    # --- special tokens ---------------------------------------------------------------------

    def _specials(
        self, allowed_special: AllowedSpecial, disallowed_special: DisallowedSpecial, text: Text | None
    ) -> tuple[Sequence[bytes], Sequence[int]]:
        """The special tokens (UTF-8) and their ids the encoder is to recognise. A disallowed
        special token found in `text` is an EncodeError (None: no text to check here)."""
        if allowed_special == "all" and not disallowed_special:  # the default: no work per call
            return self._special_bytes, self._special_id_list
        allowed = self._special_set(allowed_special, "allowed_special")
        disallowed = self._disallowed(allowed, disallowed_special)
        if disallowed and text is not None:
            _refuse_disallowed(text, disallowed, None)
        if len(allowed) == len(self.special_tokens):
            return self._special_bytes, self._special_id_list
        chosen = [i for i, token in enumerate(self.special_tokens) if token in allowed]
        return [self._special_bytes[i] for i in chosen], [self._special_id_list[i] for i in chosen]

    def _disallowed(self, allowed: set[str], disallowed_special: DisallowedSpecial) -> set[str]:
        """tiktoken's rule: "all" disallows every special token that is not allowed."""
        if disallowed_special == "all":
            return set(self.special_tokens) - allowed
        return self._special_set(disallowed_special, "disallowed_special")

    def _special_set(self, names: Collection[str] | str, argument: str) -> set[str]:
        if names == "all":
            return set(self.special_tokens)
        if isinstance(names, (str, bytes)):
            raise TypeError(f'{argument} must be "all" or a collection of special tokens, not {names!r}')
        chosen = set(names)
        unknown = sorted(chosen - set(self.special_tokens))
        if unknown:
            raise ConfigError(
                f"{argument}: {unknown[0]!r} is not a special token of this tokenizer "
                f"(its special tokens: {list(self.special_tokens)!r})"
            )
        return chosen

    # --- decoding ---------------------------------------------------------------------------

    def decode_bytes(self, ids: Iterable[int] | np.ndarray) -> bytes:
        """The concatenated bytes of the tokens. `ids` holds ints (or numpy integers, or is an
        integer numpy array); anything else, a bool or float among them, is a TypeError naming it."""
        np = sys.modules.get("numpy")  # (an array can only come from numpy already imported)
        if np is not None and isinstance(ids, np.ndarray):
            if ids.dtype.kind not in "iu":
                raise TypeError(f"expected an integer array of ids, got dtype {ids.dtype}")
            ids = ids.tolist()
        elif isinstance(ids, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"expected a sequence of ids, got {type(ids).__name__}")
        else:
            ids = ids if isinstance(ids, list) else list(ids)
            if set(map(type, ids)) - {int}:  # one C pass: a bool or float would index the dict
                ids = _as_ids(ids)
        try:
            return b"".join(map(self._vocab.__getitem__, ids))
        except KeyError:
            pass
        for position, token_id in enumerate(ids):
            if token_id not in self._vocab:
                raise EncodeError(f"unknown token id {token_id!r} at position {position}") from None
        raise AssertionError("unreachable: decode failed but every id is known")

    def decode(self, ids: Iterable[int] | np.ndarray) -> str:
        """The text of the tokens; bytes that are not valid UTF-8 become U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


def _as_ids(ids: list) -> list[int]:
    """The ids as ints: numpy integers converted; anything else a TypeError naming its position."""
    np = sys.modules.get("numpy")
    out = []
    for position, token_id in enumerate(ids):
        if type(token_id) is int:
            out.append(token_id)
        elif np is not None and isinstance(token_id, np.integer):
            out.append(int(token_id))
        else:
            raise TypeError(f"token id at position {position} is {token_id!r} ({type(token_id).__name__}), not an int")
    return out


def _as_list(texts: Sequence[Text]) -> list:
    """The batch as a list: a list as it is, any other sequence copied (its items' types are
    checked by `_BATCH_RUNS`, in one pass with their sizes). A lone str or bytes is a TypeError: it
    is one text, not a batch.

    A list is not copied: a copy touches every item's reference count, scattered over memory. The
    compiled encoder holds its own reference to each item it reads, so a list changed by another
    thread while it is encoded gives a mix of old and new items, never a crash."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"expected a sequence of str or bytes, got {type(texts).__name__}")
    return texts if type(texts) is list else list(texts)


def _name_bad_text(texts: Sequence[str]) -> None:
    """Raise the EncodeError naming the first text with a lone surrogate and its position (the
    encoder's UnicodeEncodeError says only that one has)."""
    for index, text in enumerate(texts):
        try:
            _check_text(text, 0)
        except EncodeError as exc:
            raise EncodeError(f"batch index {index}: {exc}") from None


def _raise_invalid_utf8(datas: Sequence[bytes] | Sequence[str]) -> None:
    """Name the first item that is not valid UTF-8 (the encoder says only that one is not)."""
    for index, data in enumerate(datas):
        if isinstance(data, str):  # (valid by construction)
            continue
        error = _invalid_utf8(data)
        if error is not None:
            raise EncodeError(f"batch index {index}: {error}")


def _invalid_utf8(data: bytes) -> EncodeError | None:
    """The error for bytes that are not UTF-8, naming the first bad byte's offset (None if valid)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return EncodeError(f"not valid UTF-8 at byte offset {exc.start}")
    return None


def _batch_runs(items: list, kind: type, max_parts: int, min_parts: int, min_size: int) -> list[int]:
    """The bounds of contiguous, non-empty runs covering every item, of about equal total size (len):
    total // min_size runs, clamped to [min_parts, max_parts] and to the number of items. An item
    that is not a `kind` is a TypeError naming its batch index. The pure-Python twin of the compiled
    core's `batch_runs`."""
    for index, item in enumerate(items):
        if not isinstance(item, kind):
            raise TypeError(f"batch index {index}: expected {kind.__name__}, got {type(item).__name__}")
    if not items:
        return []
    ends = list(accumulate(map(len, items)))
    total = ends[-1]
    parts = min(max_parts, max(min_parts, total // min_size))
    bounds = {0, len(items)}
    for k in range(1, parts):
        # Run k ends after the item whose cumulative size is nearest k/parts of the total.
        target = total * k / parts
        i = bisect_left(ends, target)
        if i == len(ends) or (i > 0 and target - ends[i - 1] < ends[i] - target):
            i -= 1
        bounds.add(i + 1)
    return sorted(bounds)


def _batch_runs_fast(items: list, kind: type, max_parts: int, min_parts: int, min_size: int) -> list[int]:
    """`_batch_runs` in the compiled core where it was built."""
    return compiled.core().batch_runs(items, kind, max_parts, min_parts, min_size)


_BATCH_RUNS = _batch_runs_fast if compiled.AVAILABLE else _batch_runs


def _numpy():
    """numpy, imported by the methods that return arrays: a tokenizer that only gives lists never pays for it."""
    import numpy

    return numpy


def _join_runs(results: Sequence[tuple[bytearray, bytearray]], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """One (ids, offsets) from each run's buffers, in order."""
    np = _numpy()
    if not results:
        return np.empty(0, dtype=dtype), np.zeros(1, dtype=np.int64)
    ids = [np.frombuffer(buffer, dtype=dtype) for buffer, _ in results]
    offsets = [np.frombuffer(buffer, dtype=np.int64) for _, buffer in results]
    if len(results) == 1:
        return ids[0], offsets[0]
    starts = np.cumsum([0, *(len(part) for part in ids[:-1])])
    joined = np.concatenate([offsets[0], *(part[1:] + start for part, start in zip(offsets[1:], starts[1:]))])
    return np.concatenate(ids), joined


def _join_lists(runs: Sequence[list[list[int]]]) -> list[list[int]]:
    """Each run's lists, in order, in one list."""
    if len(runs) == 1:
        return runs[0]
    return list(chain.from_iterable(runs))


@contextmanager
def _gc_paused() -> Iterator[bool]:
    """The cyclic garbage collector off for the block (as it was, after); yields whether it was on."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield collecting
    finally:
        if collecting:
            gc.enable()


def _collect_young() -> None:
    """The young generation's collection, if the collector would run it at its next allocation once
    resumed: run by each batch thread after its run, while the other threads still encode, rather
    than by the caller's thread alone after the batch (a pass over every list of the batch)."""
    threshold = gc.get_threshold()[0]
    if threshold and gc.get_count()[0] > threshold:
        gc.collect(0)


def _require_str(text: object) -> None:
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")


def _check_text(text: str, offset: int) -> bytes:
    """The UTF-8 of `text`; rejects a non-str or a str with a lone surrogate (it has no UTF-8)."""
    _require_str(text)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise _surrogate_error(text, offset) from None


def _on_text(encode: Callable[..., _T], text: Text, *args: Any, **kwargs: Any) -> _T:
    """encode(text, ...) of a str (which the compiled core reads as the UTF-8 CPython keeps, with no
    copy) or of UTF-8 bytes. Anything else is a TypeError; a lone surrogate or invalid UTF-8 is an
    EncodeError naming its position."""
    if not isinstance(text, (str, bytes)):
        raise TypeError(f"expected str or bytes, got {type(text).__name__}")
    try:
        return encode(text, *args, **kwargs)
    except UnicodeEncodeError:
        raise _surrogate_error(text, 0) from None  # type: ignore[arg-type]
    except ValueError:
        error = _invalid_utf8(text) if isinstance(text, bytes) else None
        if error is None:
            raise
        raise error from None


def _refuse_disallowed(text: Text, disallowed: set[str], index: int | None) -> None:
    """tiktoken's check: a disallowed special token anywhere in the text is an error naming it."""
    if isinstance(text, bytes):
        found = _special_search(tuple(sorted(token.encode("utf-8") for token in disallowed)), text)
        unit = "byte offset"
    elif isinstance(text, str):
        found = _special_search(tuple(sorted(disallowed)), text)
        unit = "position"
    else:
        return  # the encoder names the wrong type
    if found is not None:
        token, at = found
        where = f"batch index {index}: " if index is not None else ""
        shown = token.decode("utf-8") if isinstance(token, bytes) else token
        raise EncodeError(
            f"{where}disallowed special token {shown!r} at {unit} {at}; pass allowed_special to encode it as "
            f"a special token, or disallowed_special=() to encode it as text"
        )


def _special_search(tokens: tuple, text: Text) -> tuple[Any, int] | None:
    """The first special token in `text` (longest first at a position) and where it starts."""
    match = _special_regex(tokens).search(text)
    return None if match is None else (match.group(), match.start())


@lru_cache(maxsize=64)
def _special_regex(tokens: tuple[str, ...] | tuple[bytes, ...]) -> regex.Pattern:
    """Longest first, as the encoders match (a token another one starts with is not found inside it)."""
    ordered = sorted(tokens, key=len, reverse=True)
    separator = b"|" if isinstance(ordered[0], bytes) else "|"
    return regex.compile(separator.join(regex.escape(token) for token in ordered))


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"Tokenizer.{old} is deprecated; use Tokenizer.{new}", DeprecationWarning, stacklevel=3)


def _surrogate_error(text: str, offset: int) -> EncodeError:
    """The error for a str with a lone surrogate (text[i] at position offset + i of the input)."""
    at = next(i for i, char in enumerate(text) if "\ud800" <= char <= "\udfff")
    return EncodeError(f"lone surrogate U+{ord(text[at]):04X} at position {offset + at} cannot be encoded")
