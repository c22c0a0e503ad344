"""Corpus inputs: which files a path, a glob, a directory or a list of them names, and their formats.

Formats are chosen by suffix:
  * plain text: `.txt` (and, when a file is named explicitly, any suffix not listed below);
  * compressed text: `.txt.gz`, `.txt.zst` (any explicitly named `X.gz` / `X.zst` that is not JSON
    Lines);
  * JSON Lines: `.jsonl`, `.jsonl.gz`, `.jsonl.zst`: one document per line;
  * Parquet: `.parquet`.
An unknown suffix in a data directory is an error rather than bytes counted as text.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import ConfigError, CorpusError

PathInput = str | os.PathLike
Inputs = PathInput | Sequence[PathInput]

_CODECS = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd"}
# Suffixes that look like data but that we do not read; a clear error beats counting bytes as text.
_UNSUPPORTED = {
    ".bz2",
    ".xz",
    ".lzma",
    ".lz4",
    ".br",
    ".zip",
    ".tar",
    ".tgz",
    ".7z",
    ".json",
    ".arrow",
    ".feather",
    ".orc",
    ".avro",
    ".npy",
    ".npz",
    ".pkl",
    ".pickle",
}
SUPPORTED = ".txt, .jsonl (each optionally .gz or .zst) and .parquet"


@dataclass(frozen=True)
class InputFormat:
    kind: str  # "text", "jsonl" or "parquet"
    codec: str | None  # None, "gzip" or "zstd"


def input_format(path: PathInput, *, strict: bool = False) -> InputFormat:
    """The format of a corpus file from its name.

    strict (files found in a directory or by a glob): only the documented suffixes. Otherwise (a
    file named explicitly) any other suffix is plain text, so `bpe train corpus.en` reads it as text.
    """
    name = os.fspath(path)
    lower = os.path.basename(name).lower()
    stem, suffix = os.path.splitext(lower)
    codec = _CODECS.get(suffix)
    inner = os.path.splitext(stem)[1] if codec else suffix
    if inner == ".parquet" and codec is None:
        return InputFormat("parquet", None)
    if inner == ".jsonl":
        return InputFormat("jsonl", codec)
    if inner == ".txt" or (not strict and inner not in _UNSUPPORTED and inner != ".parquet"):
        return InputFormat("text", codec)
    if inner == ".parquet":
        raise CorpusError(f"{name}: Parquet compresses internally; give the .parquet file itself")
    if inner == ".json":
        raise CorpusError(f"{name}: a .json file is not read; JSON Lines (one object per line) must end in .jsonl")
    raise CorpusError(f"{name}: unsupported file type; expected {SUPPORTED}")


def _hidden(name: str) -> bool:
    # Dot files (.DS_Store) and underscore files (_SUCCESS, _metadata) sit beside many data sets.
    return name.startswith((".", "_"))


def _walk_error(error: OSError) -> None:
    # os.walk skips an unreadable directory by default: its shards would go uncounted, silently.
    raise CorpusError(f"{error.filename}: cannot read directory: {error.strerror or error}")


def _walk(directory: Path) -> list[Path]:
    found = []
    seen: set[str] = set()
    # Following symlinks, since data directories are often links to where the shards live; each
    # real directory once, so a link cycle ends.
    for root, dirs, files in os.walk(directory, onerror=_walk_error, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if not _hidden(d))
        for name in sorted(files):
            if not _hidden(name):
                path = Path(root, name)
                input_format(path, strict=True)  # an unknown file in a data directory is an error
                found.append(path)
    if not found:
        raise CorpusError(f"{directory}: is a directory with no corpus files in it (expected {SUPPORTED})")
    return found


_GLOB_MAGIC = re.compile(r"[*?[]")


def resolve_inputs(inputs: Inputs) -> list[Path]:
    """The corpus files named by a path, a glob, a directory, or a list of them.

    Directories are searched recursively, skipping names that start with "." or "_"; a file found
    there or by a glob must have one of the supported suffixes. Returns absolute paths, sorted and
    without duplicates (a file named twice is counted once).
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    if isinstance(inputs, (bytes, bytearray)) or not isinstance(inputs, Sequence):
        raise ConfigError(f"inputs must be a path, a glob, a directory or a list of them, not {type(inputs).__name__}")
    if not inputs:
        raise ConfigError("no input files given")
    found: dict[str, Path] = {}

    def add(path: Path) -> None:
        found.setdefault(os.path.realpath(path), Path(os.path.abspath(path)))

    for item in inputs:
        if not isinstance(item, (str, os.PathLike)):
            raise ConfigError(f"an input path must be a str or os.PathLike, not {type(item).__name__}")
        path = Path(item)
        text = os.fspath(item)
        if path.is_dir():
            for file in _walk(path):
                add(file)
        elif path.is_file():
            input_format(path)
            add(path)
        elif path.exists():
            raise CorpusError(f"{text}: not a regular file or directory")
        elif _GLOB_MAGIC.search(text):
            matches = sorted(glob.glob(text, recursive=True))
            if not matches:
                raise CorpusError(f"{text}: no file matches this pattern")
            for match in map(Path, matches):
                if match.is_dir():
                    for file in _walk(match):
                        add(file)
                else:
                    input_format(match, strict=True)
                    add(match)
        else:
            raise CorpusError(f"{text}: no such file or directory")
    return sorted(found.values())
