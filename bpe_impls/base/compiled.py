"""The compiled core, when it was built: the presets' pre-tokenizers, pre-token counting, BPE encoding.

`bpe_impls._native` (C, built by setup.py when a compiler is there) does exactly what
corpus/tally.py and encoding/encoders.py do in Python, many times faster; tests/test_native.py proves them
equal. Everything that uses it asks `AVAILABLE` first and otherwise takes the pure-Python path, so
the package works without a compiler. Setting BPE_IMPLS_PURE=1 turns the core off, to measure or
test the pure-Python path on a machine that has it.

The C scanners need the class of each code point (letter, number, whitespace, other, and o200k's
two letter sets), which they get from here, computed by the same `regex` module and the same class
names as the preset patterns: whatever Unicode version `regex` has, both paths split text
identically. Computing that table takes a fifth of a second, so it is kept in the cache folder
(base/cache.py), in a file named by the `regex` version and Python's Unicode version: a new
`regex` computes it again.
"""

from __future__ import annotations

import os
import threading
import unicodedata
from pathlib import Path

import regex

from .cache import cache_dir, read_entry, write_entry
from .patterns import PRESETS, SplitPattern

try:
    from .. import _native
except ImportError:  # not built (no compiler at install time)
    _native = None

# BPE_IMPLS_PURE=1 turns off every compiled part (this core and the native trainer).
DISABLED: bool = os.environ.get("BPE_IMPLS_PURE", "") not in ("", "0")
AVAILABLE: bool = _native is not None and not DISABLED

# The class table as the C scanners know it (csrc/scanner.h), one byte per code point. The low two
# bits are the class all three presets use: 0 other, 1 \p{L}, 2 \p{N}, 3 \s; bit 4 and bit 8 say
# the code point is in o200k's letter sets [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and
# [\p{Ll}\p{Lm}\p{Lo}\p{M}]. Each regex below names a class exactly as the patterns do.
_BASE = ((3, r"\s"), (2, r"\p{N}"), (1, r"\p{L}"))
_UP, _LOW = 4, 8
_SETS = ((_UP, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"), (_LOW, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"))
# What the scanners assume of these sets, checked as the table is built: every letter is in one
# of them or both (in both exactly when Lm or Lo), a mark is in both and is no letter, number or
# whitespace, and nothing else is in either.
_EXPECTED = {
    r"\p{Lu}": 1 | _UP, r"\p{Lt}": 1 | _UP, r"\p{Ll}": 1 | _LOW, r"\p{Lm}": 1 | _UP | _LOW,
    r"\p{Lo}": 1 | _UP | _LOW, r"\p{M}": _UP | _LOW,
}
_CODEPOINTS = 0x110000


def _spans(name: str, every: str):
    for match in regex.finditer(name + "+", every):
        yield match.span()


def char_classes() -> bytes:
    """The class of every code point (see above)."""
    every = _native.every_code_point()  # one str of every code point, surrogates included
    table = bytearray(_CODEPOINTS)
    claimed = bytearray(_CODEPOINTS)
    for code, name in _BASE:
        for start, end in _spans(name, every):
            if any(claimed[start:end]):
                # The scanners assume the classes are disjoint, as they are in Unicode.
                raise RuntimeError(f"code points {start:#x}-{end:#x} are in more than one class")
            table[start:end] = bytes([code]) * (end - start)
            claimed[start:end] = b"\x01" * (end - start)
    for bit, name in _SETS:
        with_bit = bytes(value | bit for value in range(256))
        for start, end in _spans(name, every):
            table[start:end] = table[start:end].translate(with_bit)  # OR the bit in, at C speed
    # Each category gives exactly its expected entry, and those are all the letters and marks.
    covered = 0
    for name, expected in _EXPECTED.items():
        for start, end in _spans(name, every):
            covered += end - start
            if table[start:end] != bytes([expected]) * (end - start):
                raise RuntimeError(f"code points {start:#x}-{end:#x} ({name}) are not all class {expected}")
    in_a_set = bytes(1 if value & (_UP | _LOW) else 0 for value in range(256))
    if covered != table.translate(in_a_set).count(1):
        raise RuntimeError("o200k's letter sets hold more than the letters and the marks")
    return bytes(table)


# Names what the table's content depends on besides `regex`; bump it when char_classes changes.
_TABLE_VERSION = 1


def _table_path() -> Path:
    return cache_dir() / _table_name()


def _table_name() -> str:
    return f"char-classes-v{_TABLE_VERSION}-regex-{regex.__version__}-unicode-{unicodedata.unidata_version}.bin"


def cached_char_classes() -> bytes:
    """`char_classes()`, read from the cache folder when it holds them for this `regex` (checked
    against the digest stored with them), else computed and written there for the next process. A
    cache that cannot be written is only slower."""
    name = _table_name()
    table = read_entry(name)
    if table is not None and len(table) == _CODEPOINTS:
        return table
    table = char_classes()
    write_entry(name, table)
    return table


def scanner_name(pattern: SplitPattern) -> str | None:
    """The name of the compiled scanner that splits text as `pattern` does ("gpt2", "cl100k" or
    "o200k": the presets, each with its settle rule), or None for any other pattern (the regex
    path)."""
    preset = PRESETS.get(pattern.name)
    return pattern.name if preset is not None and preset == pattern else None


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
                _native.set_char_classes(cached_char_classes())
                _loaded = True
    return _native
