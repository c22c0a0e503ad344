"""manifest.json: what a token-shard directory holds, and what a rerun needs to resume it.

The manifest is the directory's only source of truth: a shard is part of the data set when the
manifest lists it, and not before (a shard file it does not list is left over from a run that was
stopped between renaming the shard into place and rewriting the manifest, and is replaced). It is
rewritten atomically (base.atomic) after every shard, so it always describes complete shards only.

Nothing in it depends on the worker count or on when the run was stopped and resumed: two runs
over the same inputs with the same tokenizer and options write the same shards and shard entries.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...base.atomic import atomic_write
from ...base.errors import CorpusError
from ...corpus.units import SkipReport
from ..tokenizer import Tokenizer

FORMAT = "bpe_impls.token_shards"
VERSION = 1
MANIFEST_NAME = "manifest.json"
# 100 M ids: 200 MB of uint16 per shard, nanoGPT's FineWeb shard size.
DEFAULT_SHARD_TOKENS = 100_000_000


def shard_name(index: int, suffix: str) -> str:
    """`shard-000042.bin` / `.idx`: six digits sort as numbers up to a million shards."""
    return f"shard-{index:06d}{suffix}"


@dataclass(frozen=True)
class Position:
    """A place in the stream of documents: `token` ids into document `record` of input `file`.

    `file` indexes the manifest's inputs (resolved order); `record` counts the documents that file
    yields, from 0 (JSON Lines: its non-blank lines, bad records skipped not counted; Parquet: its
    rows, likewise; a text file is document 0).
    """

    file: int
    record: int
    token: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"file": self.file, "record": self.record, "token": self.token}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Position:
        return cls(_int(data["file"]), _int(data["record"]), _int(data["token"]))


@dataclass(frozen=True)
class InputFile:
    """One input as it was when the run started: a size or mtime that differs later is a change."""

    path: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> InputFile:
        st = os.stat(path)
        return cls(os.fspath(path), st.st_size, st.st_mtime_ns)

    def change(self) -> str | None:
        """How the file differs now from this record of it (a few words), or None."""
        try:
            now = InputFile.of(self.path)
        except FileNotFoundError:
            return "removed"
        except OSError as exc:
            return f"cannot stat: {exc.strerror or exc}"
        if now.size != self.size:
            return f"size {self.size} -> {now.size} bytes"
        if now.mtime_ns != self.mtime_ns:
            return f"modified (mtime_ns {self.mtime_ns} -> {now.mtime_ns})"
        return None


@dataclass(frozen=True)
class TokenizerInfo:
    """The tokenizer the ids are from: its digest identifies it; the rest is for people."""

    sha256: str
    n_vocab: int
    pattern: str
    special_tokens: dict[str, int]
    source: str | None = None  # the path it was loaded from, when given as one
    format: str | None = None  # that file's format (gpt2, hf, tiktoken)

    @classmethod
    def of(cls, tokenizer: Tokenizer, source: str | None = None, format: str | None = None) -> TokenizerInfo:
        return cls(
            tokenizer_digest(tokenizer),
            tokenizer.n_vocab,
            tokenizer.pattern.name,
            dict(tokenizer.special_token_ids),
            source,
            format,
        )


def tokenizer_digest(tokenizer: Tokenizer) -> str:
    """sha256 over what decides the ids: vocab (id and bytes), merges in rank order, special tokens
    and their ids, and the split pattern's regex. Computed from the tokenizer's data, so the same
    tokenizer saved in another format or at another path has the same digest.

    Each section is its count, then little-endian uint64 arrays (ids, byte lengths), then the
    bytes joined: unambiguous, and built with no Python loop per token (50k tokens: ~10 ms)."""
    vocab = tokenizer.vocab
    ids = sorted(vocab)
    tokens = [vocab[i] for i in ids]
    merges = tokenizer.merges
    lefts, rights = [left for left, _ in merges], [right for _, right in merges]
    specials = sorted(tokenizer.special_token_ids.items(), key=lambda item: (item[1], item[0]))
    names = [text.encode("utf-8") for text, _ in specials]
    pattern = tokenizer.pattern.regex.encode("utf-8")

    def u64(values: list[int]) -> bytes:
        return np.asarray(values, dtype="<u8").tobytes()

    def lengths(items: list[bytes]) -> bytes:
        return np.fromiter(map(len, items), dtype="<u8", count=len(items)).tobytes()

    parts = [
        b"bpe_impls tokenizer digest 1\0",
        u64([len(ids), len(merges), len(specials), len(pattern)]),
        u64(ids),
        lengths(tokens),
        b"".join(tokens),
        lengths(lefts),
        lengths(rights),
        b"".join(lefts),
        b"".join(rights),
        u64([token_id for _, token_id in specials]),
        lengths(names),
        b"".join(names),
        pattern,
    ]
    return hashlib.sha256(b"".join(parts)).hexdigest()


@dataclass(frozen=True)
class ShardEntry:
    """One complete shard: its files and checksums, and the stretch of input it holds.

    first: its first id's document, and `token`: how many of that document's ids came before this
        shard (> 0: the shard starts inside a document longer than a shard).
    last: the document of its last id, and `token`: that document's ids up to this shard's end.
    resume: where the input goes on after this shard (the next shard's first id; the inputs'
        count as `file` after the last shard).
    skipped: the bad records skipped in the inputs before `resume.file` (a rerun reads that file
        from its start, so its own are counted again there).
    """

    index: int
    bin: str
    idx: str
    tokens: int
    documents: int
    bin_sha256: str
    idx_sha256: str
    first: Position
    last: Position
    resume: Position
    skipped: SkipReport = field(default_factory=SkipReport)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "bin": self.bin,
            "idx": self.idx,
            "tokens": self.tokens,
            "documents": self.documents,
            "bin_sha256": self.bin_sha256,
            "idx_sha256": self.idx_sha256,
            "first": self.first.to_dict(),
            "last": self.last.to_dict(),
            "resume": self.resume.to_dict(),
            "skipped": _skips_to_dict(self.skipped),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ShardEntry:
        return cls(
            _int(data["index"]),
            _str(data["bin"]),
            _str(data["idx"]),
            _int(data["tokens"]),
            _int(data["documents"]),
            _str(data["bin_sha256"]),
            _str(data["idx_sha256"]),
            Position.from_dict(data["first"]),
            Position.from_dict(data["last"]),
            Position.from_dict(data["resume"]),
            _skips_from_dict(data["skipped"]),
        )


@dataclass
class Manifest:
    """A token-shard directory's manifest.json (see the package docstring for the layout).

    `kept` is not saved: how many shards the run that returned this manifest found complete and
    kept from an earlier run (0 for a fresh one).
    """

    tokenizer: TokenizerInfo
    dtype: str
    eot: int | None
    eot_token: str | None
    text_field: str
    shard_tokens: int
    inputs: list[InputFile]
    shards: list[ShardEntry] = field(default_factory=list)
    complete: bool = False
    skipped: SkipReport = field(default_factory=SkipReport)
    kept: int = field(default=0, compare=False)

    @property
    def tokens(self) -> int:
        return sum(shard.tokens for shard in self.shards)

    @property
    def documents(self) -> int:
        """Documents that start in the shards written (a last one may still be incomplete)."""
        return sum(shard.documents for shard in self.shards)

    @property
    def resume(self) -> Position:
        """Where encoding goes on: after the last shard, or at the start."""
        return self.shards[-1].resume if self.shards else Position(0, 0, 0)

    def to_dict(self) -> dict[str, Any]:
        info = self.tokenizer
        return {
            "format": FORMAT,
            "version": VERSION,
            "complete": self.complete,
            "tokens": self.tokens,
            "documents": self.documents,
            "dtype": self.dtype,
            "byte_order": "little",
            "eot": self.eot,
            "eot_token": self.eot_token,
            "tokenizer": {
                "sha256": info.sha256,
                "n_vocab": info.n_vocab,
                "pattern": info.pattern,
                "special_tokens": info.special_tokens,
                "source": info.source,
                "format": info.format,
            },
            "options": {"text_field": self.text_field, "shard_tokens": self.shard_tokens},
            "inputs": [{"path": i.path, "size": i.size, "mtime_ns": i.mtime_ns} for i in self.inputs],
            "skipped": _skips_to_dict(self.skipped),
            "shards": [shard.to_dict() for shard in self.shards],
        }

    def to_json(self) -> str:
        """The text of manifest.json: indented, each shard entry on one line (it is rewritten after
        every shard, so it stays small for thousands of them)."""
        data = self.to_dict()
        shards = data.pop("shards")
        # ASCII: a file name that is not UTF-8 (a surrogate escape in Python) stays writable.
        head = json.dumps(data, indent=1)
        lines = ",\n".join("  " + json.dumps(shard) for shard in shards)
        return head[:-2] + ',\n "shards": [' + (f"\n{lines}\n ]" if lines else "]") + "\n}\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        if data.get("format") != FORMAT:
            raise ValueError(f"format is {data.get('format')!r}, not {FORMAT!r}")
        if data.get("version") != VERSION:
            raise ValueError(f"version {data.get('version')!r}; this bpe_impls reads version {VERSION}")
        if data.get("byte_order") != "little":
            raise ValueError(f"byte_order {data.get('byte_order')!r}")
        tok, options = data["tokenizer"], data["options"]
        eot = data["eot"]
        return cls(
            tokenizer=TokenizerInfo(
                _str(tok["sha256"]),
                _int(tok["n_vocab"]),
                _str(tok["pattern"]),
                {_str(k): _int(v) for k, v in tok["special_tokens"].items()},
                tok.get("source"),
                tok.get("format"),
            ),
            dtype=_str(data["dtype"]),
            eot=None if eot is None else _int(eot),
            eot_token=data["eot_token"],
            text_field=_str(options["text_field"]),
            shard_tokens=_int(options["shard_tokens"]),
            inputs=[InputFile(_str(i["path"]), _int(i["size"]), _int(i["mtime_ns"])) for i in data["inputs"]],
            shards=[ShardEntry.from_dict(shard) for shard in data["shards"]],
            complete=bool(data["complete"]),
            skipped=_skips_from_dict(data["skipped"]),
        )

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        return cls.from_dict(json.loads(text))


def load_manifest(out_dir: str | os.PathLike[str]) -> Manifest:
    """The manifest of a directory `encode_dataset` wrote; a one-line CorpusError if there is none
    or it cannot be read."""
    path = Path(out_dir) / MANIFEST_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CorpusError(f"{out_dir}: no {MANIFEST_NAME}: not a directory of token shards bpe encode wrote") from None
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return Manifest.from_json(text)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise CorpusError(f"{path}: not a token-shard manifest this bpe_impls reads ({what})") from None


def save_manifest(out_dir: Path, manifest: Manifest) -> None:
    """Rewrite manifest.json atomically (temp file, fsync, rename, then the directory synced)."""
    with atomic_write(out_dir / MANIFEST_NAME, "w", encoding="utf-8") as out:
        out.write(manifest.to_json())
    sync_directory(out_dir)


def sync_directory(directory: Path) -> None:
    """fsync a directory, so the renames into it survive a power loss (where the OS allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # (some file systems refuse fsync on a directory; the rename is still atomic)
    finally:
        os.close(fd)


def first_change(old: Manifest, new: Manifest) -> str | None:
    """What differs between a directory's manifest and the run asked for now (a few words), or
    None: the tokenizer, the dtype, an option, or the inputs (the list, or one's size or mtime)."""
    if old.tokenizer.sha256 != new.tokenizer.sha256:
        return f"the tokenizer changed (sha256 {old.tokenizer.sha256[:12]}... -> {new.tokenizer.sha256[:12]}...)"
    if old.dtype != new.dtype:
        return f"the dtype changed ({old.dtype} -> {new.dtype})"
    if old.eot != new.eot:
        return f"option eot changed ({old.eot} -> {new.eot})"
    if old.text_field != new.text_field:
        return f"option text_field changed ({old.text_field!r} -> {new.text_field!r})"
    if old.shard_tokens != new.shard_tokens:
        return f"option shard_tokens changed ({old.shard_tokens} -> {new.shard_tokens})"
    before = [i.path for i in old.inputs]
    now = [i.path for i in new.inputs]
    if before != now:
        added = [p for p in now if p not in before]
        gone = [p for p in before if p not in now]
        if added:
            return f"the inputs changed ({added[0]} is new{f', and {len(added) - 1} more' if len(added) > 1 else ''})"
        if gone:
            return f"the inputs changed ({gone[0]} is no longer one{f', and {len(gone) - 1} more' if len(gone) > 1 else ''})"
        return "the inputs changed (their order)"
    for was, now_file in zip(old.inputs, new.inputs):
        if was.size != now_file.size:
            return f"input {was.path} changed (size {was.size} -> {now_file.size} bytes)"
        if was.mtime_ns != now_file.mtime_ns:
            return f"input {was.path} changed (modified: mtime_ns {was.mtime_ns} -> {now_file.mtime_ns})"
    return None


def _skips_to_dict(report: SkipReport) -> dict[str, Any]:
    return {
        "count": report.count,
        "examples": [
            {"path": path, "position": position, "message": message} for path, position, message in report.examples
        ],
    }


def _skips_from_dict(data: Mapping[str, Any]) -> SkipReport:
    examples = tuple((_str(e["path"]), _int(e["position"]), _str(e["message"])) for e in data["examples"])
    return SkipReport(_int(data["count"]), examples)


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value
