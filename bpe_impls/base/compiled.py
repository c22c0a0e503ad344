"""The compiled core, when it was built: the presets' pre-tokenizers, pre-token counting, BPE encoding.

`bpe_impls._native` (C, built by setup.py when a compiler is there) does exactly what
corpus/tally.py and encoding/encoders.py do in Python, many times faster; tests/test_native.py proves them
equal. Everything that uses it asks `AVAILABLE` first and otherwise takes the pure-Python path, so
the package works without a compiler. Setting BPE_IMPLS_PURE=1 turns the core off, to measure or
test the pure-Python path on a machine that has it.

The C scanners need the class of each code point (letter, number, whitespace, other, and o200k's
two letter sets): Unicode 16.0's, the version tiktoken follows, from base/char_classes.py, which
also makes the pure-Python path match by the same classes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from .char_classes import pinned_table
from .patterns import PRESETS, SplitPattern

if TYPE_CHECKING:
    from .._native import Encoder, PretokenCounter, RankTablesResult, VocabTablesResult


class NativeCore(Protocol):
    """What the package calls in the compiled core (bpe_impls/_native.pyi has its types; mypy checks
    that the module fulfils this)."""

    @property
    def Encoder(self) -> type[Encoder]: ...
    @property
    def PretokenCounter(self) -> type[PretokenCounter]: ...
    def set_char_classes(self, table: bytes, /) -> None: ...
    def batch_runs(
        self,
        items: list[str | bytes] | list[str] | list[bytes],
        kind: type,
        max_parts: int,
        min_parts: int,
        min_size: int,
        /,
    ) -> list[int]: ...
    def rank_file_tables(self, data: bytes, specials: Sequence[bytes], /) -> RankTablesResult | None: ...
    def gpt2_tables(
        self, vocab_json: bytes, merges_txt: bytes, specials: Sequence[bytes], /
    ) -> VocabTablesResult | None: ...
    def hf_tables(
        self, vocab: bytes, merges: bytes, specials: Sequence[bytes], special_ids: Sequence[int], /
    ) -> VocabTablesResult | None: ...
    def hf_model_spans(self, document: bytes, /) -> tuple[int, int, int, int] | None: ...
    def jsonl_documents(
        self, block: bytes, field: bytes, start: int, end: int, bom: bool, /
    ) -> tuple[bytes, bytes, int, int, int]: ...


_native: NativeCore | None
try:
    from .. import _native as _built
except ImportError:  # not built (no compiler at install time)
    _native = None
else:
    _native = _built

# BPE_IMPLS_PURE=1 turns off every compiled part (this core and the native trainer).
DISABLED: bool = os.environ.get("BPE_IMPLS_PURE", "") not in ("", "0")
AVAILABLE: bool = _native is not None and not DISABLED


def scanner_name(pattern: SplitPattern) -> str | None:
    """The name of the compiled scanner that splits text as `pattern` does ("gpt2", "cl100k" or
    "o200k": the presets, each with its settle rule), or None for any other pattern (the regex
    path)."""
    preset = PRESETS.get(pattern.name)
    return pattern.name if preset is not None and preset == pattern else None


def module_path() -> str | None:
    """The file of the compiled core, where it was built (the load cache keys its entries on it)."""
    return getattr(_native, "__file__", None) if AVAILABLE else None


_loading = threading.Lock()
_loaded = False


def core() -> NativeCore:
    """The extension module, with its class table loaded (once per process, whichever thread asks first)."""
    global _loaded
    if not AVAILABLE or _native is None:
        raise RuntimeError("the compiled core is not available (not built, or BPE_IMPLS_PURE=1)")
    if not _loaded:
        with _loading:
            if not _loaded:
                _native.set_char_classes(pinned_table())
                _loaded = True
    return _native
