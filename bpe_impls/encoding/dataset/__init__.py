"""A data set (JSON Lines, Parquet, text; gzip or zstd) to shards of token ids a training loop memmaps.

    from bpe_impls.encoding.dataset import encode_dataset, read_document
    manifest = encode_dataset("data/*.jsonl.zst", "tok/", "shards/", shard_tokens=100_000_000)
    ids = numpy.memmap("shards/shard-000000.bin", dtype=numpy.uint16, mode="r")

The directory `encode_dataset` writes:

  shard-000000.bin, ...  the ids, raw little-endian (uint16 when the vocab fits in 65536 ids, else
                         uint32: Tokenizer.id_dtype), each document's ids followed by the EOT id;
                         at most shard_tokens ids each. A document is split across shards only
                         when it alone is longer than shard_tokens (shards.py has the rule).
  shard-000000.idx, ...  uint64 little-endian: the offset (in ids) of each document that starts in
                         the shard. A shard's ids before its first offset continue the document
                         of the shard before (manifest: first.token > 0).
  manifest.json          what the shards hold and what a rerun needs (manifest.py): the format
                         and version, `complete`, the totals, the dtype, the EOT id, the tokenizer
                         (sha256 of its vocab, merges, special tokens and pattern; its size and,
                         when loaded from a path, that path and format), the options that decide
                         the ids (text_field, shard_tokens), the inputs (path, size, mtime_ns),
                         the bad records skipped, and per shard: its files, their sha256, its id
                         and document counts, the first and last document it holds (input file
                         index + record index), and the position after it (`resume`).

The modules: encode.py (`encode_dataset`: arguments, the directory, signals), run.py (the local
backend: reader and encoder threads), on_dask.py (the Dask backend: a task per unit writes its
part, the shards are written here from the parts), shards.py (the ShardWriter both feed, which alone
decides where shards end), manifest.py and verify.py (reading back, checking).

Shard bytes and entries are the same for any worker count, block size and backend, and for a run
interrupted (Ctrl-C, SIGTERM, SIGKILL, power loss) and run again: a shard appears under its name
only complete (temp file, fsync, rename) and then enters the manifest, itself rewritten
atomically. A rerun of the same call keeps the shards whose sha256 match, and goes on from the
last one's `resume` position (the documents before it in that file are read and counted, not
encoded again, and a split document's ids already written are dropped); a changed tokenizer,
option or input is refused with a one-line ConfigError naming it (overwrite=True starts over).
"""

from .encode import DEFAULT_BLOCK_SIZE, DEFAULT_EOT, encode_dataset, resolve_eot, shard_files
from .manifest import (
    DEFAULT_SHARD_TOKENS,
    MANIFEST_NAME,
    InputFile,
    Manifest,
    Position,
    ShardEntry,
    TokenizerInfo,
    load_manifest,
    tokenizer_digest,
)
from .verify import DatasetSummary, inspect_dataset, read_document, readable_documents

__all__ = [
    "encode_dataset",
    "read_document",
    "inspect_dataset",
    "load_manifest",
    "Manifest",
    "ShardEntry",
    "Position",
    "InputFile",
    "TokenizerInfo",
    "DatasetSummary",
    "tokenizer_digest",
    "resolve_eot",
    "readable_documents",
    "shard_files",
    "DEFAULT_SHARD_TOKENS",
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_EOT",
    "MANIFEST_NAME",
]
