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

from .char_classes import pinned_table
from .patterns import PRESETS, SplitPattern

try:
    from .. import _native
except ImportError:  # not built (no compiler at install time)
    _native = None

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


def core():
    """The extension module, with its class table loaded (once per process, whichever thread asks first)."""
    global _loaded
    if not AVAILABLE:
        raise RuntimeError("the compiled core is not available (not built, or BPE_IMPLS_PURE=1)")
    if not _loaded:
        with _loading:
            if not _loaded:
                _native.set_char_classes(pinned_table())
                _loaded = True
    return _native
