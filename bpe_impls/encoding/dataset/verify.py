"""Reading a token-shard directory back: a document's ids, and a check of every shard's checksums."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...base.checks import require_int
from ...base.errors import ConfigError, CorpusError
from .manifest import MANIFEST_NAME, Manifest, ShardEntry, load_manifest
from .shards import IDX_DTYPE, read_ids, read_idx


def file_sha256(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def shard_fault(out_dir: Path, entry: ShardEntry, dtype: str) -> str | None:
    """What is wrong with a shard's files against its manifest entry (one line naming the file),
    or None: missing, the wrong size, or a sha256 that differs."""
    itemsize = np.dtype(dtype).itemsize
    for name, size, digest in (
        (entry.bin, entry.tokens * itemsize, entry.bin_sha256),
        (entry.idx, entry.documents * IDX_DTYPE.itemsize, entry.idx_sha256),
    ):
        path = out_dir / name
        try:
            actual = path.stat().st_size
            if actual != size:
                return f"{path}: {actual} bytes, but the manifest says {size}"
            found = file_sha256(path)
        except FileNotFoundError:
            return f"{path}: missing (the manifest lists it)"
        except OSError as exc:
            return f"{path}: cannot read: {exc.strerror or exc}"
        if found != digest:
            return f"{path}: sha256 {found[:16]}... differs from the manifest's {digest[:16]}...: the shard is corrupt or was changed"
    return None


@dataclass(frozen=True)
class DatasetSummary:
    """What `inspect_dataset` found: the totals, all shards' checksums verified."""

    out_dir: str
    shards: int
    documents: int
    tokens: int
    dtype: str
    eot: int | None
    eot_token: str | None
    complete: bool
    skipped: int
    tokenizer_sha256: str
    n_vocab: int
    shard_tokens: int

    def lines(self) -> list[str]:
        """The summary as `bpe inspect` prints it."""
        eot = "none" if self.eot is None else f"{self.eot}" + (f" ({self.eot_token})" if self.eot_token else "")
        return [
            f"directory   {self.out_dir}",
            f"complete    {'yes' if self.complete else 'no (run the same encode again to finish it)'}",
            f"shards      {self.shards} (at most {self.shard_tokens} ids each)",
            f"documents   {self.documents}",
            f"tokens      {self.tokens}",
            f"dtype       {self.dtype}, little-endian: numpy.memmap(path, dtype=numpy.{self.dtype}, mode='r')",
            f"eot         {eot}",
            f"tokenizer   n_vocab {self.n_vocab}, sha256 {self.tokenizer_sha256}",
            f"skipped     {self.skipped} bad records",
            f"checksums   ok (sha256 of {self.shards} .bin and {self.shards} .idx files)",
        ]


def inspect_dataset(out_dir: str | os.PathLike[str]) -> DatasetSummary:
    """The totals of a directory `encode_dataset` wrote, after checking every shard against the
    manifest (size and sha256 of each .bin and .idx, the .idx offsets in order and in range).

    Raises:
        CorpusError: no readable manifest, or a shard that is missing or differs, in one line
            naming the file.
    """
    out = Path(out_dir)
    manifest = load_manifest(out)
    for entry, after in zip(manifest.shards, manifest.shards[1:]):
        if after.first != entry.resume or after.index != entry.index + 1:
            raise CorpusError(
                f"{out / MANIFEST_NAME}: shard {after.index} does not start where shard {entry.index} ends"
            )
    for entry in manifest.shards:
        fault = shard_fault(out, entry, manifest.dtype)
        if fault is not None:
            raise CorpusError(fault)
        starts = read_idx(out / entry.idx)
        if len(starts) and (np.any(np.diff(starts.astype(np.int64)) < 0) or int(starts[-1]) > entry.tokens):
            raise CorpusError(
                f"{out / entry.idx}: document offsets out of order or past the shard's {entry.tokens} ids"
            )
    return DatasetSummary(
        os.fspath(out),
        len(manifest.shards),
        manifest.documents,
        manifest.tokens,
        manifest.dtype,
        manifest.eot,
        manifest.eot_token,
        manifest.complete,
        manifest.skipped.count,
        manifest.tokenizer.sha256,
        manifest.tokenizer.n_vocab,
        manifest.shard_tokens,
    )


def readable_documents(manifest: Manifest) -> int:
    """Documents whose ids are all written (an unfinished run's last one may go on in a shard to come)."""
    total = manifest.documents
    if manifest.shards and not manifest.complete and manifest.shards[-1].resume.token > 0:
        return total - 1
    return total


def read_document(out_dir: str | os.PathLike[str], n: int) -> np.ndarray:
    """The ids of document `n` (from 0, in input order), without its EOT, through the manifest and
    the .idx files (a document longer than a shard is read from each shard it spans).

    Raises:
        ConfigError: `n` is out of range.
        CorpusError: no readable manifest, or shards that do not match it.
    """
    out = Path(out_dir)
    manifest = load_manifest(out)
    n = require_int(n, "n", minimum=0)
    available = readable_documents(manifest)
    if n >= available:
        raise ConfigError(f"document {n} is out of range: {out} holds {available} documents (0-{available - 1})")
    dtype = np.dtype(manifest.dtype)
    counts = np.cumsum([entry.documents for entry in manifest.shards])
    s = int(np.searchsorted(counts, n, side="right"))
    entry = manifest.shards[s]
    j = n - (int(counts[s - 1]) if s else 0)
    starts = read_idx(out / entry.idx)
    if len(starts) != entry.documents:
        raise CorpusError(
            f"{out / entry.idx}: {len(starts)} offsets, but the manifest says {entry.documents} documents"
        )
    begin = int(starts[j])
    parts = [read_ids(out / entry.bin, dtype, begin, int(starts[j + 1]) if j + 1 < len(starts) else entry.tokens)]
    if j + 1 == len(starts):  # the shard's last document may go on in the next shards
        for following in manifest.shards[s + 1 :]:
            if following.first.token == 0:
                break
            more = read_idx(out / following.idx)
            stop = int(more[0]) if len(more) else following.tokens
            parts.append(read_ids(out / following.bin, dtype, 0, stop))
            if len(more):
                break
    ids = np.concatenate(parts) if len(parts) > 1 else parts[0]
    if manifest.eot is not None:
        if not len(ids) or int(ids[-1]) != manifest.eot:
            raise CorpusError(f"{out / entry.bin}: document {n} does not end with the EOT id {manifest.eot}")
        ids = ids[:-1]
    return ids
