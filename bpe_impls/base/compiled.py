"""The compiled core, when it was built: the GPT-2 pre-tokenizer, pre-token counting, BPE encoding.

`bpe_impls._native` (C, built by setup.py when a compiler is there) does exactly what
corpus/tally.py and encoding/encoders.py do in Python, many times faster; tests/test_native.py proves them
equal. Everything that uses it asks `AVAILABLE` first and otherwise takes the pure-Python path, so
the package works without a compiler. Setting BPE_IMPLS_PURE=1 turns the core off, to measure or
test the pure-Python path on a machine that has it.

The C scanner needs the class of each code point (letter, number, whitespace, other), which it
gets from here, computed by the same `regex` module and the same class names as GPT2_PATTERN:
whatever Unicode version `regex` has, both paths split text identically.
"""

from __future__ import annotations

import os
import threading

import regex

try:
    from .. import _native
except ImportError:  # not built (no compiler at install time)
    _native = None

# BPE_IMPLS_PURE=1 turns off every compiled part (this core and the native trainer).
DISABLED: bool = os.environ.get("BPE_IMPLS_PURE", "") not in ("", "0")
AVAILABLE: bool = _native is not None and not DISABLED

# Class codes as the C scanner knows them; the regexes are the classes GPT2_PATTERN names.
_CLASSES = ((3, r"\s"), (2, r"\p{N}"), (1, r"\p{L}"))
_CODEPOINTS = 0x110000


def char_classes() -> bytes:
    """The class of every code point: 0 other, 1 \\p{L}, 2 \\p{N}, 3 \\s (about 30 ms to build)."""
    every = _native.every_code_point()  # one str of every code point, surrogates included
    table = bytearray(_CODEPOINTS)
    claimed = bytearray(_CODEPOINTS)
    for code, name in _CLASSES:
        for match in regex.finditer(name + "+", every):
            start, end = match.span()
            if any(claimed[start:end]):
                # The scanner assumes the classes are disjoint, as they are in Unicode.
                raise RuntimeError(f"code points {start:#x}-{end:#x} are in more than one class")
            table[start:end] = bytes([code]) * (end - start)
            claimed[start:end] = b"\x01" * (end - start)
    return bytes(table)


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
                _native.set_char_classes(char_classes())
                _loaded = True
    return _native
