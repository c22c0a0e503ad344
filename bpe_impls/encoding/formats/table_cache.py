"""A loaded tokenizer's tables, kept in the cache folder (base/cache.py) so the next load of the
same files skips parsing and checking them.

An entry is named by a digest of everything the tables depend on: the bytes of each source file
(sha256), what the load was told besides (special tokens, pattern), the byte order, the source of
the Python code that reads and checks the files, and the compiled core's file (whose readers do
the same in C). So an edited file, another option or a new version of the checks or of the core
misses, and only a load that passed every check writes an entry. An entry holds the
tables packed as `common.PackedTokenizer` (no Python object per token) and is verified on read
(its digest, its own name, every size); anything amiss reads as a miss, and the load then reads the
files as without a cache and writes the entry again.

Only tokenizers on the compiled encoder (a preset pattern, the compiled core built) are kept: the
others build their Python tables from the vocab and merges anyway.
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
from array import array
from collections.abc import Mapping, Sequence
from functools import lru_cache
from itertools import accumulate
from pathlib import Path
from typing import NamedTuple

from ...base import cache, compiled
from ...base.patterns import PRESETS, SplitPattern
from ..bpe import RankTable
from ..tables import PackedTokenizer, RankTables

# Bump when the entry layout changes.
_LAYOUT = 1
_HEADER = struct.Struct("<I")


# The modules whose rules decide what a file loads as (read as files: importing them would be a cycle).
_RULES = ("../../base/patterns.py", "../tables.py", "common.py", "gpt2.py", "hf.py", "load.py", "table_cache.py")


@lru_cache(maxsize=1)
def _code_digest() -> str:
    """sha256 of the source of the modules in _RULES and of the compiled core's file."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in _RULES:
        digest.update((here / name).read_bytes())
    core = compiled.module_path()
    if core is not None:
        digest.update(Path(core).read_bytes())
    return digest.hexdigest()


class Slot(NamedTuple):
    """Where the tables of one load are kept: the entry's name and the files it depends on."""

    name: str
    paths: tuple[Path, ...]
    digests: tuple[str, ...]


def _file_digests(paths: Sequence[Path]) -> tuple[str, ...] | None:
    try:
        return tuple(hashlib.sha256(path.read_bytes()).hexdigest() for path in paths)
    except OSError:
        return None  # (the load names the problem)


def slot(kind: str, paths: Sequence[Path], options: object) -> Slot | None:
    """The slot of a load of `paths` as `kind` with `options` (JSON-able), or None where the cache
    is off, the compiled core is not built or a file cannot be read."""
    if not cache.cache_enabled() or not compiled.AVAILABLE:
        return None
    digests = _file_digests(paths)
    if digests is None:
        return None
    try:
        material = json.dumps([_LAYOUT, sys.byteorder, _code_digest(), kind, digests, options])
    except (TypeError, ValueError, OSError):
        return None
    return Slot(f"tables-{kind}-{hashlib.sha256(material.encode()).hexdigest()[:48]}.bin", tuple(paths), digests)


def packed_tables(
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[bytes, bytes]],
    special_token_ids: Mapping[str, int],
    pattern: SplitPattern,
    byte_ids: Sequence[int],
    ranks: RankTable,
) -> PackedTokenizer:
    """A constructor-built tokenizer's tables (vocab sorted by id, its merges, and the rank table
    the encoder takes, as `encoders.native_encoder` orders it), packed."""
    id_of = {token: token_id for token_id, token in vocab.items()}
    triples = array("I")
    for left, right in merges:
        triples.extend((id_of[left], id_of[right], id_of[left + right]))
    encoder = array("I")
    for (left_id, right_id), (_, merged_id) in sorted(ranks.items(), key=lambda item: item[1][0]):
        encoder.extend((left_id, right_id, merged_id))
    tables = RankTables(
        b"".join(vocab.values()),
        array("q", accumulate(map(len, vocab.values()), initial=0)).tobytes(),
        array("I", vocab).tobytes(),
        triples.tobytes(),
        tuple(byte_ids),
        (),
    )
    return PackedTokenizer(tables, dict(special_token_ids), pattern, max(vocab), encoder.tobytes())


def pack(name: str, packed: PackedTokenizer) -> bytes:
    """An entry's payload: a tokenizer's packed tables."""
    tables = packed.tables
    encoder = tables.merges if packed.encoder_merges is None else packed.encoder_merges
    sections = [
        tables.ranks,
        tables.offsets,
        tables.blob,
        tables.merges,
        encoder,
        array("I", tables.byte_ids).tobytes(),
    ]
    header = json.dumps(
        {
            "name": name,
            "pattern": packed.pattern.name,
            "special_token_ids": list(packed.special_token_ids.items()),
            "sizes": [len(section) for section in sections],
        }
    ).encode()
    return b"".join([_HEADER.pack(len(header)), header, *sections])


def unpack(name: str, payload: bytes) -> PackedTokenizer | None:
    """The tables of an entry's payload, or None where it is not a whole entry named `name`."""
    try:
        (size,) = _HEADER.unpack_from(payload)
        header = json.loads(payload[_HEADER.size : _HEADER.size + size])
        start = _HEADER.size + size
        sections = []
        for length in header["sizes"]:
            sections.append(payload[start : start + length])
            start += length
        if header["name"] != name or start != len(payload) or len(sections) != 6:
            return None
        ids, offsets, blob, triples, encoder, byte_ids = sections
        count = len(ids) // 4
        if (
            not count
            or len(ids) % 4
            or len(offsets) != 8 * (count + 1)
            or len(triples) % 12
            or len(encoder) % 12
            or len(byte_ids) != 1024
            or memoryview(offsets).cast("q")[-1] != len(blob)
        ):
            return None
        pattern = PRESETS[header["pattern"]]
        special_token_ids = {str(special): int(token_id) for special, token_id in header["special_token_ids"]}
        max_id = memoryview(ids).cast("I")[-1]
    except (KeyError, TypeError, ValueError, struct.error, UnicodeDecodeError):
        return None
    tables = RankTables(blob, offsets, ids, triples, tuple(memoryview(byte_ids).cast("I")), ())
    return PackedTokenizer(tables, special_token_ids, pattern, max_id, encoder)


def lookup(where: Slot) -> PackedTokenizer | None:
    """The tables kept in `where`, or None."""
    payload = cache.read_entry(where.name)
    return unpack(where.name, payload) if payload is not None else None


def store(where: Slot, payload: bytes) -> None:
    """Keep `payload` in `where`, unless a source file changed since `slot` read it (the tables
    might then be of neither version)."""
    if _file_digests(where.paths) == where.digests:
        cache.write_entry(where.name, payload)
