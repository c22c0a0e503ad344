"""Encoding text to token ids with a trained (vocab, merges) pair, and decoding back.

Modelled on tiktoken's core.py: a thin, typed class over an encoder (encoding.encoders), which does
the work on whole UTF-8 texts. Loading a saved tokenizer lives in formats/load.py, batches on
threads in batches.py, the checks of what the methods take in text.py.
"""

from __future__ import annotations

import io
import os
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence, Set
from functools import partial
from itertools import chain
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from ..base.checks import require_int
from ..base.errors import ConfigError, EncodeError
from ..base.patterns import SplitPattern, resolve_pattern, validate_special_tokens
from . import batches
from .encoders import ENCODERS, default_encoder
from .tables import tables_for
from .text import (
    Text,
    as_ids,
    chunk_kind,
    complete_utf8,
    name_invalid_utf8,
    on_text,
    refuse_disallowed,
    surrogate_error,
    utf8_of,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

AllowedSpecial = Literal["all"] | Set[str]
DisallowedSpecial = Literal["all"] | Collection[str]

# The pre-token cache's default bound in the compiled encoder: every distinct pre-token of 64 MB of
# multilingual text (1.3 M), in a table of 2**21 slots loaded to 3/4 (docs/design-notes.md, "Cache
# size"). The pure-Python encoders' dict costs about 200 bytes an entry: theirs is smaller.
DEFAULT_CACHE_SIZE = 3 * 2**19
PYTHON_CACHE_SIZE = 2**18
# Characters (or bytes) encode_iterable gathers before it encodes: per-call costs vanish, memory stays small.
_ITERABLE_BATCH = 1 << 15
# The id dtypes the numpy methods give (native byte order): the smallest that holds every id.
_ID_DTYPES = ("uint16", "uint32")


class Tokenizer:
    """A byte-level BPE tokenizer: text <-> token ids, given a vocab, merges and special tokens.

    Text is split on the special tokens (longest first, so they are never split or merged), each
    piece between them is cut into pre-tokens by the split pattern, and each pre-token's UTF-8 bytes
    are merged by BPE: repeatedly merge the adjacent pair whose merge comes earliest in `merges`
    (the leftmost such pair on a tie) until no pair has a merge.

    Encoding has four methods, one per output shape: `encode` (a list, as tiktoken and CS336),
    `encode_to_numpy` (an array, no Python int per token), `encode_batch` and
    `encode_batch_to_numpy` (many texts on every core); `encode_iterable` streams one text. Each
    takes `str` or its UTF-8 as `bytes`, and special tokens are handled by tiktoken's two keywords,
    except that every special token is allowed by default (`allowed_special="all"`): a tokenizer
    built with special tokens is asked to recognise them, as CS336's contract and HF's tokenizers
    do. `allowed_special=set()` encodes them as plain text (tiktoken's `encode_ordinary`); a special
    token in `disallowed_special` found in the text is an EncodeError naming it and its offset.

    Args:
        vocab: id -> token bytes; must hold all 256 single bytes.
        merges: (left, right) byte pairs in rank order, each part a single byte or the result of an
            earlier merge, each part and result in the vocab.
        special_tokens: texts matched before the split pattern. A list gives each the id its bytes
            have in the vocab, else a new id after the largest; a mapping gives each the id it
            names, or is refused (a ConfigError) where the vocab holds those bytes at another id or
            that id for other bytes.
        pattern: the split pattern: "gpt2" (the default), "cl100k", "o200k" or any regex.
        encoder: the merge loop, a name in ENCODERS (default: the fastest that scans `pattern`).
        cache_size: the most pre-tokens the pre-token cache holds (0: no cache; None: the
            encoder's default, DEFAULT_CACHE_SIZE (1,572,864) for the compiled one,
            PYTHON_CACHE_SIZE (262,144) for the others). Each thread encoding at a time has a cache
            of its own, grown as it fills; the compiled encoder's holds under 150 bytes per entry
            of cache_size (at most 160 MiB at the default), however long its pre-tokens.

    Raises:
        ConfigError: a vocab, merge, special token, pattern or encoder that cannot be used, named.

    Example (the methods' examples use this `tok`):
        >>> from bpe_impls import Tokenizer
        >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"he", 257: b"ll", 258: b"hell"}
        >>> tok = Tokenizer(vocab, [(b"h", b"e"), (b"l", b"l"), (b"he", b"ll")], ["<|endoftext|>"])
        >>> tok.encode("hello world<|endoftext|>")
        [258, 111, 32, 119, 111, 114, 108, 100, 259]
        >>> tok.decode([258, 111])
        'hello'
    """

    special_tokens: tuple[str, ...]
    special_token_ids: dict[str, int]
    pattern: SplitPattern

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Sequence[str] | Mapping[str, int] | None = None,
        *,
        pattern: str | SplitPattern | None = None,
        encoder: str | None = None,
        cache_size: int | None = None,
    ) -> None:
        self.pattern = resolve_pattern(pattern)
        encoder = default_encoder(self.pattern) if encoder is None else encoder
        if encoder not in ENCODERS:
            raise ConfigError(f"unknown encoder {encoder!r}; choose from {', '.join(ENCODERS)}")
        if cache_size is None:
            cache_size = DEFAULT_CACHE_SIZE if encoder == "native" else PYTHON_CACHE_SIZE
        self._cache_size = require_int(cache_size, "cache_size", minimum=0)
        self.special_tokens = validate_special_tokens(special_tokens)
        given = special_tokens if isinstance(special_tokens, Mapping) else self.special_tokens
        # Tables a loader read and checked come as views of them (tables.TableVocab) and are taken
        # as they are; anything else is checked and its tables built here.
        self._tables = tables_for(vocab, merges, given)
        self.special_token_ids = dict(self._tables.special_token_ids)
        self._encoder_name = encoder
        self._encoder = ENCODERS[encoder](self._tables, self._cache_size, self.pattern)
        self._special_bytes = [special.encode("utf-8") for special in self.special_tokens]
        self._special_id_list = [self.special_token_ids[special] for special in self.special_tokens]

    # --- files -------------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        format: str | None = None,
        *,
        merges_path: str | os.PathLike[str] | None = None,
        special_tokens: Sequence[str] | Mapping[str, int] | None = None,
        pattern: str | SplitPattern | None = None,
        cache: bool = True,
        encoder: str | None = None,
        cache_size: int | None = None,
    ) -> Tokenizer:
        """A tokenizer saved in any format `save` writes, or by GPT-2, HF `tokenizers` or tiktoken.

        Formats (docs/formats.md has every rule and refusal):
        - gpt2: a directory `save` wrote (vocab.json, merges.txt and the optional
          special_tokens.json and split_pattern.json), or a vocab .json file whose merges are
          `merges_path` (GPT-2's own encoder.json + vocab.bpe; `merges_path` implies gpt2).
        - hf: a tokenizer.json, or a directory holding one.
        - tiktoken: a .tiktoken rank file, or a directory holding one, its merges rebuilt from the
          ranks; its sidecar NAME.tiktoken.json, if present, gives the pattern and special tokens.

        Args:
            path: the file or directory.
            format: "gpt2", "hf" or "tiktoken"; None tells them apart by what `path` holds.
            merges_path: a gpt2 vocab file's merges file.
            special_tokens: what a file does not say (a gpt2 pair, a .tiktoken file without
                sidecar): a list, or a mapping of each to its id, honoured or refused as in the
                constructor; they replace a gpt2 directory's sidecar, and are refused for an HF
                file or a .tiktoken with a sidecar, which say it themselves.
            pattern: the split pattern, where the files do not say it or to replace theirs.
            cache: keep the tables a gpt2 or hf load reads in the load cache (base/cache.py) and
                take them from there when the same files load again; False reads and writes
                nothing there.
            encoder: as in the constructor.
            cache_size: as in the constructor.

        Returns:
            The tokenizer, with exactly the ids its own library gives.

        Raises:
            TokenizerFileError: a file that is missing, malformed, or would give other ids than
                its own library, in one line naming the file and the field.
            ConfigError: an argument that cannot be used.

        Example:
            >>> paths = tok.save(tmp / "tok")
            >>> Tokenizer.load(tmp / "tok").encode("hello")
            [258, 111]
        """
        from .formats.load import read_tokenizer  # (the formats load with the first file)

        loaded = read_tokenizer(
            path, format, merges_path=merges_path, special_tokens=special_tokens, pattern=pattern, cache=cache
        )
        return cls(
            loaded.vocab,
            loaded.merges,
            loaded.special_tokens,
            pattern=loaded.pattern,
            encoder=encoder,
            cache_size=cache_size,
        )

    def save(self, path: str | os.PathLike[str], format: str = "gpt2") -> tuple[Path, ...]:
        """Save in a format `load` reads; no file is renamed into place unless all were written.

        Args:
            path: gpt2: the directory for vocab.json, merges.txt, special_tokens.json and
                split_pattern.json. hf: the directory for tokenizer.json, or the file if the path
                ends in .json. tiktoken: the directory for tokenizer.tiktoken and its sidecar
                tokenizer.tiktoken.json, or NAME.tiktoken and NAME.tiktoken.json.
            format: "gpt2", "hf" or "tiktoken".

        Returns:
            The paths written.

        Raises:
            TokenizerFileError: a file that cannot be written, or a tokenizer the format cannot
                hold exactly (tiktoken's rank-order merging would give other ids), naming the token.

        Example:
            >>> [p.name for p in tok.save(tmp / "hf", format="hf")]
            ['tokenizer.json']
        """
        from .formats import FORMATS, TokenizerData

        if format not in FORMATS:
            raise ConfigError(f"unknown format {format!r}; choose from {', '.join(FORMATS)}")
        tables = self._tables
        data = TokenizerData(tables.vocab, tables.merges, self.special_tokens, self.pattern, self.special_token_ids)
        return FORMATS[format].save(path, data)

    # --- properties -------------------------------------------------------------------------

    @property
    def n_vocab(self) -> int:
        """One more than the largest token id (as tiktoken: the size an embedding table needs)."""
        return self._tables.n_vocab

    @property
    def vocab(self) -> Mapping[int, bytes]:
        """id -> token bytes, special tokens included: a read-only view, so `token_id in tok.vocab`
        in a loop stays cheap."""
        return MappingProxyType(self._tables.vocab)

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges in rank order (a copy)."""
        return list(self._tables.merges)

    @property
    def encoder(self) -> str:
        """The name of the merge loop in ENCODERS this tokenizer uses."""
        return self._encoder_name

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as what builds it (multiprocessing, Dask: the compiled encoder itself is not
        picklable); unpickling builds the same tokenizer, which gives the same ids."""
        specials = {token: self.special_token_ids[token] for token in self.special_tokens}
        options = {"pattern": self.pattern, "encoder": self._encoder_name, "cache_size": self._cache_size}
        return (_rebuild, (dict(self._tables.vocab), list(self._tables.merges), specials, options))

    def __repr__(self) -> str:
        return (
            f"Tokenizer(n_vocab={self.n_vocab}, merges={self._tables.merge_count}, "
            f"special_tokens={list(self.special_tokens)!r}, encoder={self._encoder_name!r}, "
            f"cache_size={self._cache_size}, pattern={self.pattern.name!r})"
        )

    # --- encoding ---------------------------------------------------------------------------

    def encode(
        self, text: Text, *, allowed_special: AllowedSpecial = "all", disallowed_special: DisallowedSpecial = ()
    ) -> list[int]:
        """The ids of a text.

        Args:
            text: a str, or its UTF-8 as bytes.
            allowed_special: the special tokens recognised as such ("all", or a set of them);
                the others are encoded as plain text.
            disallowed_special: special tokens that may not appear in the text ("all": every one
                not allowed).

        Returns:
            The token ids.

        Raises:
            EncodeError: a lone surrogate, invalid UTF-8 or a disallowed special token, naming
                its offset.
            TypeError: `text` is neither str nor bytes.

        Example:
            >>> tok.encode("hello<|endoftext|>")
            [258, 111, 259]
            >>> tok.encode("hello<|endoftext|>", allowed_special=set())[:4]
            [258, 111, 60, 124]
        """
        if allowed_special == "all" and not disallowed_special and type(text) is str:
            # The common call, inlined: it is the hot path for short texts.
            try:
                return self._encoder.encode_utf8(text, self._special_bytes, self._special_id_list)
            except UnicodeEncodeError:
                raise surrogate_error(text, 0) from None
        specials, ids = self._specials(allowed_special, disallowed_special, text)
        return on_text(self._encoder.encode_utf8, text, specials, ids)

    def encode_ordinary(self, text: Text) -> list[int]:
        """`encode(text, allowed_special=set())`: special-token strings as plain text (tiktoken's name).

        Example:
            >>> tok.encode_ordinary("<|endoftext|>") == list(b"<|endoftext|>")
            True
        """
        return on_text(self._encoder.encode_utf8, text, (), ())

    def encode_iterable(self, iterable: Iterable[str] | Iterable[bytes]) -> Iterator[int]:
        """The ids of a stream of text chunks, lazily: exactly `encode` of their concatenation.

        Chunk boundaries may fall anywhere, inside a pre-token, a special token or (for bytes) a
        UTF-8 character: text whose tokens could still change when more arrives is carried over to
        the next round (see `encoders.PythonEncoder._settled`). Memory stays bounded by a batch of
        text (_ITERABLE_BATCH characters) plus the longest run without a settled token boundary.
        Special tokens are always recognised: one cut across chunks is still found.

        Args:
            iterable: str chunks or UTF-8 bytes chunks (not both), such as a file opened in text
                or binary mode (read in blocks rather than lines: the same text, fewer calls).

        Returns:
            An iterator over the ids.

        Raises:
            EncodeError: a lone surrogate or invalid UTF-8, naming its offset in the stream.
            TypeError: a chunk that is not str or bytes, or of the other kind than the first.

        Example:
            >>> list(tok.encode_iterable(["hel", "lo<|endo", "ftext|>"]))
            [258, 111, 259]
            >>> list(tok.encode_iterable([b"hel", b"lo"]))
            [258, 111]
        """
        if isinstance(iterable, io.TextIOBase):
            iterable = iter(partial(iterable.read, _ITERABLE_BATCH), "")
        elif isinstance(iterable, (io.BufferedIOBase, io.RawIOBase)):
            iterable = iter(partial(iterable.read, _ITERABLE_BATCH), b"")
        elif isinstance(iterable, (str, bytes)):
            raise TypeError(f"expected an iterable of text chunks, got a single {type(iterable).__name__}")
        # chain.from_iterable hands out the ids of each batch at C speed; a generator yielding
        # them one by one would cost more than encoding them.
        return chain.from_iterable(self._encode_chunks(iterable))

    def _encode_chunks(self, iterable: Iterable[str] | Iterable[bytes]) -> Iterator[list[int]]:
        # The buffer and its carry are UTF-8 bytes, and each round is one encoder call that
        # encodes the settled prefix (see PythonEncoder._settled for the rule) and says where it ends.
        encode_utf8 = self._encoder.encode_utf8
        specials, special_ids = self._special_bytes, self._special_id_list
        carry = b""
        pending: list[Any] = []  # chunks all of one kind, str or bytes (`kind`)
        pending_len = 0
        kind: type | None = None
        taken = 0  # characters (str) or bytes taken from the stream, for the offset in an error
        # Rescanning the carry costs its length, so wait until new text at least matches it: a
        # huge unbroken run is then rescanned O(log n) times, not once per chunk. And wait for a
        # batch of text, so short lines cost one encoder call per batch, not one per line.
        wanted = _ITERABLE_BATCH
        for chunk in iterable:
            if type(chunk) is not kind:  # the per-line loop is hot: no call for the common case
                kind = chunk_kind(chunk, kind)
            pending.append(chunk)
            pending_len += len(chunk)
            if pending_len < wanted:
                continue
            new = "".join(pending) if kind is str else b"".join(pending)
            buffer = carry + utf8_of(new, taken)
            taken += len(new)
            pending.clear()
            pending_len = 0
            # Bytes may end inside a UTF-8 character: its start waits for the rest, in the carry.
            whole = buffer if kind is str else buffer[: complete_utf8(buffer)]
            try:
                ids, cut = encode_utf8(whole, specials, special_ids, True)
            except ValueError:
                name_invalid_utf8(whole, taken - len(buffer))
                raise
            carry = buffer[cut:]
            wanted = max(len(carry), _ITERABLE_BATCH)
            yield ids
        new = "".join(pending) if kind is not bytes else b"".join(pending)
        buffer = carry + utf8_of(new, taken)
        try:
            last = encode_utf8(buffer, specials, special_ids)
        except ValueError:
            name_invalid_utf8(buffer, taken + len(new) - len(buffer))
            raise
        yield last

    # --- batches and numpy ------------------------------------------------------------------

    def id_dtype(self, dtype: npt.DTypeLike | None = None) -> np.dtype:
        """The dtype of the numpy methods' ids.

        Args:
            dtype: uint16 or uint32 (uint16 only when every id fits), or None: uint16 when
                n_vocab <= 65536, else uint32.

        Returns:
            The numpy dtype.

        Example:
            >>> tok.id_dtype().name
            'uint16'
        """
        import numpy as np  # (a tokenizer that only gives lists never pays for numpy)

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
        self,
        text: Text,
        dtype: npt.DTypeLike | None = None,
        *,
        allowed_special: AllowedSpecial = "all",
        disallowed_special: DisallowedSpecial = (),
    ) -> np.ndarray:
        """`encode(text)` as a 1-D numpy array, built without a Python int per token.

        Args:
            text: a str, or its UTF-8 as bytes.
            dtype: the ids' dtype, as `id_dtype` takes it.
            allowed_special, disallowed_special: as in `encode`.

        Returns:
            The ids, of `id_dtype(dtype)`.

        Example:
            >>> tok.encode_to_numpy(b"hello").tolist()
            [258, 111]
        """
        chosen = self.id_dtype(dtype)
        specials, ids = self._specials(allowed_special, disallowed_special, text)
        buffer = on_text(self._encoder.encode_utf8_buffer, text, specials, ids, itemsize=chosen.itemsize)
        import numpy as np

        return np.frombuffer(buffer, dtype=chosen)

    def encode_batch(
        self,
        texts: Sequence[Text],
        num_threads: int | None = None,
        *,
        allowed_special: AllowedSpecial = "all",
        disallowed_special: DisallowedSpecial = (),
    ) -> list[list[int]]:
        """`[encode(text) for text in texts]` on several threads (tiktoken's encode_batch).

        The batch is cut into contiguous runs of about equal UTF-8 size, several per thread,
        encoded without the GIL.

        Args:
            texts: all str or all bytes.
            num_threads: None: every core available to this process; 1: this thread only.
            allowed_special, disallowed_special: as in `encode`.

        Returns:
            Each text's ids.

        Raises:
            EncodeError: as `encode`, naming the batch index.
            TypeError: an item of another type, naming its index.

        Example:
            >>> tok.encode_batch(["hello", "hell"], num_threads=2)
            [[258, 111], [258]]
        """
        datas, kind, specials, ids = self._batch_args(texts, allowed_special, disallowed_special)
        encoder = self._encoder

        def encode_run(run: tuple[int, int]) -> list[list[int]]:
            # Each thread turns its run into lists (with the GIL) as soon as it has encoded it, while
            # the other threads still encode theirs without the GIL.
            lists = encoder.encode_many_lists(datas, specials, ids, *run)
            if collecting:
                batches.collect_young(len(lists), several_runs=run != whole)
            return lists

        whole = (0, len(datas))
        with batches.gc_paused() as collecting:
            return batches.join_lists(batches.encode_runs(datas, kind, num_threads, encode_run))

    def encode_batch_to_numpy(
        self,
        texts: Sequence[Text],
        num_threads: int | None = None,
        dtype: npt.DTypeLike | None = None,
        *,
        allowed_special: AllowedSpecial = "all",
        disallowed_special: DisallowedSpecial = (),
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every text encoded as `encode` does, as one array of ids and the offsets of each text's.

        Args:
            texts: all str or all bytes.
            num_threads: as in `encode_batch`.
            dtype: the ids' dtype, as `id_dtype` takes it.
            allowed_special, disallowed_special: as in `encode`.

        Returns:
            (ids, offsets): the texts' ids one after another in one 1-D array of `id_dtype(dtype)`,
            and int64 offsets (len(texts) + 1 of them): text i's ids are ids[offsets[i]:offsets[i + 1]].

        Example:
            >>> ids, offsets = tok.encode_batch_to_numpy([b"hello", b"hell"])
            >>> ids.tolist(), offsets.tolist()
            ([258, 111, 258], [0, 2, 3])
        """
        chosen = self.id_dtype(dtype)  # before the work: a bad dtype fails at once
        datas, kind, specials, ids = self._batch_args(texts, allowed_special, disallowed_special)
        encoder = self._encoder

        def encode_run(run: tuple[int, int]) -> tuple[bytearray, bytearray]:
            return encoder.encode_many_buffer(datas, specials, ids, chosen.itemsize, *run)

        return batches.join_runs(batches.encode_runs(datas, kind, num_threads, encode_run), chosen)

    def encode_packed_to_numpy(
        self,
        data: bytes,
        offsets: npt.ArrayLike,
        num_threads: int | None = None,
        dtype: npt.DTypeLike | None = None,
        *,
        allowed_special: AllowedSpecial = "all",
        disallowed_special: DisallowedSpecial = (),
        separator: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Texts packed in one bytes object (as an Arrow string array, or a data set's records, hold
        them) encoded as `encode_batch_to_numpy` encodes them, with no object per text.

        Args:
            data: the texts' UTF-8 back to back.
            offsets: len(texts) + 1 non-decreasing integers: text i is data[offsets[i]:offsets[i + 1]].
            num_threads, dtype, allowed_special, disallowed_special: as in `encode_batch_to_numpy`.
            separator: an id written after each text's ids, within its offsets (a data set's
                end-of-text id between documents), or None.

        Returns:
            (ids, offsets) as `encode_batch_to_numpy` returns them for those texts (with the
            separator, texts[i]'s ids and then the separator).

        Raises:
            EncodeError: a text that is not valid UTF-8, or holds a disallowed special token (named by
                its index).
            ValueError: offsets that are not ranges of `data`.
            ConfigError: a separator that is not an id of this tokenizer.

        Example:
            >>> ids, offsets = tok.encode_packed_to_numpy(b"hellohell", [0, 5, 9])
            >>> ids.tolist(), offsets.tolist()
            ([258, 111, 258], [0, 2, 3])
            >>> tok.encode_packed_to_numpy(b"hellohell", [0, 5, 9], separator=259)[0].tolist()
            [258, 111, 259, 258, 259]
        """
        import numpy as np

        chosen = self.id_dtype(dtype)
        after = -1  # (the encoders' "none")
        if separator is not None:
            after = require_int(separator, "separator", minimum=0)
            if after >= self.n_vocab:
                raise ConfigError(f"separator {after} is not an id of this tokenizer (ids 0-{self.n_vocab - 1})")
        if not isinstance(data, bytes):
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        bounds = np.ascontiguousarray(offsets, dtype=np.int64)
        if bounds.ndim != 1 or len(bounds) == 0:
            raise ValueError(f"offsets must be one or more integers in one dimension, got shape {bounds.shape}")
        steps = np.flatnonzero(np.diff(bounds) < 0)
        if bounds[0] < 0 or bounds[-1] > len(data) or len(steps):
            at = int(steps[0]) if len(steps) else (0 if bounds[0] < 0 else len(bounds) - 1)
            raise ValueError(
                f"offsets are not ranges of data's {len(data)} bytes: offsets[{at}] = {int(bounds[at])}"
                + (f", offsets[{at + 1}] = {int(bounds[at + 1])}" if len(steps) else "")
            )
        specials, ids = self._specials(allowed_special, disallowed_special, None)
        if disallowed_special:
            disallowed = self._disallowed(self._special_set(allowed_special, "allowed_special"), disallowed_special)
            for index in range(len(bounds) - 1) if disallowed else ():
                refuse_disallowed(data[bounds[index] : bounds[index + 1]], disallowed, index)
        encoder = self._encoder

        def encode_run(run: tuple[int, int]) -> tuple[bytearray, bytearray]:
            return encoder.encode_packed_buffer(
                data, bounds.data, specials, ids, chosen.itemsize, *run, separator=after
            )

        return batches.join_runs(batches.encode_packed_runs(data, bounds, num_threads, encode_run), chosen)

    def _batch_args(
        self,
        texts: Sequence[Text],
        allowed_special: AllowedSpecial,
        disallowed_special: DisallowedSpecial,
    ) -> tuple[list[Text], type, Sequence[bytes], Sequence[int]]:
        """The batch as a list, its kind (str or bytes), and the special tokens and ids to encode
        it with; a disallowed special token in any text is an EncodeError naming its index."""
        datas = batches.as_list(texts)
        kind = bytes if datas and type(datas[0]) is bytes else str
        specials, ids = self._specials(allowed_special, disallowed_special, None)
        if disallowed_special:
            disallowed = self._disallowed(self._special_set(allowed_special, "allowed_special"), disallowed_special)
            if disallowed:
                for index, data in enumerate(datas):
                    refuse_disallowed(data, disallowed, index)
        return datas, kind, specials, ids

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
            refuse_disallowed(text, disallowed, None)
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
        """The concatenated bytes of the tokens: exact, whether or not they are UTF-8.

        Args:
            ids: ints, numpy integers, or an integer numpy array.

        Returns:
            The bytes.

        Raises:
            EncodeError: an id not in the vocab, naming its position.
            TypeError: an id that is not an integer (a bool or float among them), naming it.

        Example:
            >>> tok.decode_bytes([258, 111, 259])
            b'hello<|endoftext|>'
        """
        ids = as_ids(ids)
        vocab = self._tables.vocab
        try:
            return b"".join(map(vocab.__getitem__, ids))
        except KeyError:
            pass
        for position, token_id in enumerate(ids):
            if token_id not in vocab:
                raise EncodeError(f"unknown token id {token_id!r} at position {position}") from None
        raise AssertionError("unreachable: decode failed but every id is known")

    def decode(self, ids: Iterable[int] | np.ndarray) -> str:
        """The text of the tokens; bytes that are not valid UTF-8 become U+FFFD.

        Args:
            ids: as in `decode_bytes`.

        Returns:
            The text.

        Example:
            >>> tok.decode([258, 111, 32, 119])
            'hello w'
        """
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


def _rebuild(
    vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], specials: dict[str, int], options: dict[str, Any]
) -> Tokenizer:
    """A pickled Tokenizer, built again (Tokenizer.__reduce__)."""
    return Tokenizer(vocab, merges, specials, **options)
