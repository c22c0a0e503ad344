"""Reading a saved tokenizer: which format a path holds, the fast paths, and the load cache.

`read_tokenizer` gives what the Tokenizer's constructor takes (`TokenizerArgs`), with the vocab and
merges as views of tables already read and checked (tables.TableVocab, TableMerges), so the
constructor takes them as they are. Each load tries, in turn:

1. the load cache (table_cache.py): the tables a load of the same files, with the same options,
   read and checked before (gpt2 and hf; a preset pattern, the compiled core built);
2. the compiled core's reader of the format (gpt2.load_packed, hf.load_packed,
   tiktoken_file.load_packed): the tables with no Python object per token;
3. the format's Python reader, which names any fault in one line, and `build_tables`.

Every path gives the same tables (tests/test_vocab_files.py, tests/test_load_cache.py).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from ...base import compiled
from ...base.errors import ConfigError
from ...base.patterns import SplitPattern, resolve_pattern, validate_special_tokens
from ..tables import MAX_TOKEN_ID, PackedTables, PackedTokenizer, TableMerges, Tables, TableVocab, build_tables
from . import FORMATS, detect, gpt2, hf, table_cache, tiktoken_file
from .common import TokenizerData, special_ids_match

SpecialTokens = Sequence[str] | Mapping[str, int]


class TokenizerArgs(NamedTuple):
    """What `Tokenizer(vocab, merges, special_tokens, pattern=pattern)` is given for a saved tokenizer."""

    vocab: Mapping[int, bytes]
    merges: Sequence[tuple[bytes, bytes]]
    special_tokens: Mapping[str, int]
    pattern: SplitPattern


def read_tokenizer(
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    merges_path: str | os.PathLike[str] | None = None,
    special_tokens: SpecialTokens | None = None,
    pattern: str | SplitPattern | None = None,
    cache: bool = True,
) -> TokenizerArgs:
    """The constructor's arguments for the tokenizer saved at `path` (see `Tokenizer.load`)."""
    # A load makes a few objects per token and no cycles, but each counts towards the cyclic
    # collector's next run, which would otherwise run many times over them as they are made.
    with _gc_paused():
        if merges_path is not None:
            if format not in (None, "gpt2"):
                raise ConfigError(f"merges_path is for the gpt2 format, not {format!r}")
            return _gpt2_pair(Path(path), Path(merges_path), special_tokens, pattern, cache)
        if format is None:
            format, where = detect(path)
        elif format not in FORMATS:
            raise ConfigError(f"unknown format {format!r}; choose from {', '.join(FORMATS)}")
        else:
            where = Path(path)
        if format == "gpt2":
            folder = where if where.is_dir() else where.parent
            saved_specials, saved_pattern = gpt2.load_sidecars(folder)
            return _gpt2_pair(
                folder / gpt2.VOCAB_FILE,
                folder / gpt2.MERGES_FILE,
                saved_specials if special_tokens is None else special_tokens,
                saved_pattern if pattern is None else pattern,
                cache,
            )
        if format == "tiktoken":
            return _tiktoken(where, special_tokens, pattern)
        return _hf(where, special_tokens, pattern, cache)


def _gpt2_pair(
    vocab_path: Path,
    merges_path: Path,
    special_tokens: SpecialTokens | None,
    pattern: str | SplitPattern | None,
    cache: bool,
) -> TokenizerArgs:
    """A vocab.json + merges.txt pair (GPT-2's own encoder.json + vocab.bpe among them)."""
    try:  # (a fault here is named after the files' own faults, as the constructor would)
        chosen: SplitPattern | None = resolve_pattern(pattern)
        names = validate_special_tokens(special_tokens)
        fault = None
    except ConfigError as exc:
        chosen, names, fault = None, (), exc
    wanted = special_tokens if isinstance(special_tokens, Mapping) else None
    slot = None
    if chosen is not None:
        slot = (
            _slot("gpt2", [vocab_path, merges_path], chosen, list(wanted.items()) if wanted else list(names))
            if cache
            else None
        )
        packed = table_cache.lookup(slot) if slot is not None else None
        if packed is None:
            packed = gpt2.load_packed(vocab_path, merges_path, names, chosen)
            # The core gives a special token the id its bytes have, or the next one: ids asked for
            # that differ are the Python path's to honour or refuse.
            if packed is not None and wanted and packed.special_token_ids != dict(wanted):
                packed = None
            _store(slot, packed)
        if packed is not None:
            return _args(PackedTables(packed), chosen)
    vocab, merges = gpt2.load_tokenizer_files(vocab_path, merges_path)
    if fault is not None:
        raise fault
    assert chosen is not None
    tables = build_tables(vocab, merges, wanted if wanted else names)
    # After the tables' checks, which name more basic faults (a byte with no token).
    gpt2.check_every_token_made(vocab, merges, names, vocab_path, merges_path)
    _keep(slot, tables, chosen)
    return _args(tables, chosen)


def _tiktoken(where: Path, special_tokens: SpecialTokens | None, pattern: str | SplitPattern | None) -> TokenizerArgs:
    """A .tiktoken rank file (and its sidecar): the merges rebuilt from the ranks."""
    packed = tiktoken_file.load_packed(where, pattern, special_tokens)
    if packed is not None and max(packed.special_token_ids.values(), default=0) <= MAX_TOKEN_ID:
        return _args(PackedTables(packed), packed.pattern)
    return _from_data(tiktoken_file.load(where, pattern, special_tokens), where, None)


def _hf(
    where: Path, special_tokens: SpecialTokens | None, pattern: str | SplitPattern | None, cache: bool
) -> TokenizerArgs:
    """A HuggingFace tokenizer.json (the file, or the directory holding one)."""
    if special_tokens is not None:
        raise ConfigError("an HF tokenizer.json lists its own special tokens; do not pass special_tokens")
    file = hf.tokenizer_file(where)
    slot = None
    if cache:
        try:  # (a pattern that does not resolve is named after the file's checks, as without a cache)
            slot = _slot("hf", [file], None if pattern is None else resolve_pattern(pattern), None)
        except ConfigError:
            slot = None
    packed = table_cache.lookup(slot) if slot is not None else None
    if packed is None:
        packed = hf.load_packed(file)
        if packed is not None and pattern is not None:  # (resolved after the file's checks)
            packed = packed._replace(pattern=resolve_pattern(pattern))
        _store(slot, packed)
    if packed is not None:
        return _args(PackedTables(packed), packed.pattern)
    data = hf.load(file)
    if pattern is not None:
        data = data._replace(pattern=resolve_pattern(pattern))
    return _from_data(data, file, slot)


def _from_data(data: TokenizerData, where: Path, slot: table_cache.Slot | None) -> TokenizerArgs:
    """The tables of what a Python reader read; each special token must get the id the file names."""
    tables = build_tables(data.vocab, data.merges, data.special_tokens)
    special_ids_match(data, tables.special_token_ids, where)
    _keep(slot, tables, data.pattern)
    return _args(tables, data.pattern)


def _args(tables: Tables, pattern: SplitPattern) -> TokenizerArgs:
    return TokenizerArgs(TableVocab(tables), TableMerges(tables), tables.special_token_ids, pattern)


def _slot(
    kind: str, paths: list[Path], pattern: SplitPattern | None, specials: list[object] | None
) -> table_cache.Slot | None:
    """The cache slot of a load, or None where its tables are not kept: a pattern the compiled core
    does not scan (the cache keeps only presets' tables). `pattern` None: the file's own (hf)."""
    chosen = None
    if pattern is not None:
        if compiled.scanner_name(pattern) is None:
            return None
        chosen = [pattern.name, pattern.regex]
    return table_cache.slot(kind, paths, [chosen, specials])


def _store(slot: table_cache.Slot | None, packed: PackedTokenizer | None) -> None:
    """Keep packed tables in `slot`, for a preset pattern only (an entry names its pattern by name)."""
    if slot is not None and packed is not None and compiled.scanner_name(packed.pattern) is not None:
        table_cache.store(slot, table_cache.pack(slot.name, packed))


def _keep(slot: table_cache.Slot | None, tables: Tables, pattern: SplitPattern) -> None:
    """Keep tables the Python path built in `slot`."""
    if slot is not None and compiled.scanner_name(pattern) is not None:
        _store(
            slot,
            table_cache.packed_tables(
                tables.vocab, tables.merges, tables.special_token_ids, pattern, tables.byte_ids, tables.ranks
            ),
        )


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (as it was, after)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
