"""The class of every code point, as the presets split by it: Unicode 16.0's, the version tiktoken follows.

tiktoken splits text with Rust's regex crate, whose tables are Unicode 16.0 (tiktoken 0.14). The
`regex` module follows the newest Unicode (18.0 in regex 2026.11.19): the 17,000 or so letters,
marks and digits assigned since 16.0 are letters, marks or numbers to `regex` and "other" to
tiktoken, and a few code points changed category (U+0295: Ll, then Lo). A preset split with
`regex`'s own tables would cut text holding them where tiktoken does not. So the presets split by
Unicode 16.0's classes, whatever `regex` is installed:

- the C scanners read `pinned_table()`, built from the general categories in unicode16.py;
- the pure-Python path compiles each preset as `PinnedRegex`: the preset's own regex on text with
  no code point that `regex` classes differently from Unicode 16.0 (nearly all text: ASCII is
  checked first), else the preset rewritten so that each of its classes matches those code points
  as Unicode 16.0 does.

Custom patterns match by Unicode 16.0's classes too, translated (custom_regex.py).

A table is one byte per code point. The low two bits are the class all three presets use: 0 other,
1 \\p{L}, 2 \\p{N}, 3 \\s; bit 4 and bit 8 say the code point is in o200k's letter sets
[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}] and [\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}] (csrc/scanner.h reads the same).
"""

from __future__ import annotations

import threading
import unicodedata
from functools import lru_cache

import regex

from . import unicode16, unicode_sets
from .cache import read_entry, write_entry

UNICODE_VERSION = unicode16.VERSION
CODE_POINTS = 0x110000
_UP, _LOW = 4, 8
# Each general category's value (0, other, for those not here); White_Space, 3, is set over them.
_VALUES = {
    "Lu": 1 | _UP,
    "Lt": 1 | _UP,
    "Ll": 1 | _LOW,
    "Lm": 1 | _UP | _LOW,
    "Lo": 1 | _UP | _LOW,
    "Mn": _UP | _LOW,
    "Mc": _UP | _LOW,
    "Me": _UP | _LOW,
    "Nd": 2,
    "Nl": 2,
    "No": 2,
}
_WHITE_SPACE = 3

# The classes as `regex` names them in the presets; each is checked against the table as it is
# built from `regex`: every letter is in one of o200k's sets or both (both exactly when Lm or Lo),
# a mark is in both and is no letter, number or white space, and nothing else is in either.
_BASE = ((3, r"\s"), (2, r"\p{N}"), (1, r"\p{L}"))
_SETS = ((_UP, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"), (_LOW, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"))
_EXPECTED = {
    r"\p{Lu}": 1 | _UP,
    r"\p{Lt}": 1 | _UP,
    r"\p{Ll}": 1 | _LOW,
    r"\p{Lm}": 1 | _UP | _LOW,
    r"\p{Lo}": 1 | _UP | _LOW,
    r"\p{M}": _UP | _LOW,
}


@lru_cache(maxsize=1)
def pinned_table() -> bytes:
    """Unicode 16.0's class of every code point (see above)."""
    table = bytearray(CODE_POINTS)
    for start, stop, step, name in unicode_sets.category_runs():
        value = _VALUES.get(name)
        if value:
            table[start:stop:step] = bytes([value]) * len(range(start, stop, step))
    for start, end in unicode_sets.named_set("White_Space").ranges():
        table[start:end] = bytes([_WHITE_SPACE]) * (end - start)
    return bytes(table)


def _every_code_point() -> str:
    return "".join(map(chr, range(CODE_POINTS)))  # surrogates included: a str may hold them


def _spans(name: str, every: str):
    for match in regex.finditer(name + "+", every):
        yield match.span()


def regex_table() -> bytes:
    """The class of every code point as the installed `regex` module sees it (its Unicode version)."""
    every = _every_code_point()
    table = bytearray(CODE_POINTS)
    claimed = bytearray(CODE_POINTS)
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


# Names what the table's content depends on besides `regex`; bump it when regex_table changes.
_TABLE_VERSION = 1


def regex_table_name() -> str:
    """The cache entry's name: what the table depends on."""
    return f"char-classes-v{_TABLE_VERSION}-regex-{regex.__version__}-unicode-{unicodedata.unidata_version}.bin"


def cached_regex_table() -> bytes:
    """`regex_table()`, kept in the cache folder (base/cache.py) under a name holding the `regex`
    version: computing it takes a fifth of a second."""
    name = regex_table_name()
    table = read_entry(name)
    if table is not None and len(table) == CODE_POINTS:
        return table
    table = regex_table()
    write_entry(name, table)
    return table


def _escape(code_point: int) -> str:
    return f"\\U{code_point:08x}" if code_point > 0xFFFF else f"\\u{code_point:04x}"


def _class_of(code_points: list[int]) -> str:
    """A regex character class of the code points (sorted), as ranges."""
    parts = []
    start = previous = code_points[0]
    for code_point in [*code_points[1:], -1]:
        if code_point != previous + 1:
            parts.append(_escape(start) if start == previous else f"{_escape(start)}-{_escape(previous)}")
            start = code_point
        previous = code_point
    return "[" + "".join(parts) + "]"


@lru_cache(maxsize=1)
def regex_differences() -> tuple[list[int], bytes, bytes]:
    """The code points `regex` classes differently from Unicode 16.0 (sorted), and both tables."""
    ours, theirs = pinned_table(), cached_regex_table()
    xor = (int.from_bytes(ours, "big") ^ int.from_bytes(theirs, "big")).to_bytes(CODE_POINTS, "big")
    return [match.start() for match in regex.finditer(b"[^\x00]", xor)], ours, theirs


def _atoms(pattern: str):
    """The pattern cut into (text, is_class) pieces: each \\p{..}/\\P{..} outside brackets and each
    bracketed class that holds one is a class; the presets have no nested brackets."""
    position = 0
    while position < len(pattern):
        char = pattern[position]
        if char == "\\" and pattern[position + 1] in "pP":
            end = pattern.index("}", position) + 1
            yield pattern[position:end], True
        elif char == "\\":
            end = position + 2
            yield pattern[position:end], False
        elif char == "[":
            end = position + 1
            while pattern[end] != "]":
                end += 2 if pattern[end] == "\\" else 1
            end += 1
            yield pattern[position:end], "\\p" in pattern[position:end] or "\\P" in pattern[position:end]
        else:
            end = position + 1
            yield char, False
        position = end


def pin(pattern: str) -> str:
    """`pattern` with each class rewritten to match as Unicode 16.0 does, or `pattern` itself when
    the installed `regex` classes every code point as Unicode 16.0 does."""
    differing, ours, theirs = regex_differences()
    if not differing:
        return pattern
    # A code point of each class as `regex` sees it, outside ASCII (no preset's literal is there):
    # a class matches a code point exactly when it matches the sample of the code point's class.
    samples: dict[int, str] = {}
    wanted = set(theirs[0x80:])
    for code_point in range(0x80, CODE_POINTS):
        samples.setdefault(theirs[code_point], chr(code_point))
        if len(samples) == len(wanted):
            break
    if set(ours[0x80:]) - samples.keys():
        raise RuntimeError("Unicode 16.0 has a class the installed `regex` has no code point of")
    pieces = []
    for text, is_class in _atoms(pattern):
        if not is_class:
            pieces.append(text)
            continue
        compiled = regex.compile(text)
        matches = {value: compiled.fullmatch(sample) is not None for value, sample in samples.items()}
        drop = [c for c in differing if matches[theirs[c]] and not matches[ours[c]]]
        add = [c for c in differing if matches[ours[c]] and not matches[theirs[c]]]
        piece = f"(?!{_class_of(drop)}){text}" if drop else text
        pieces.append(f"(?:{piece}|{_class_of(add)})" if add else f"(?:{piece})")
    return "".join(pieces)


class PinnedRegex:
    """A preset's regex that matches as Unicode 16.0 does (see above): `finditer`, `findall` and
    `match` take the preset's own compiled regex on text holding no code point `regex` classes
    differently, and the rewritten one otherwise."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self._plain = regex.compile(pattern)
        self._lock = threading.Lock()
        self._built = False
        self._pinned: regex.Pattern | None = None
        self._differing: frozenset[str] = frozenset()

    def __reduce__(self):
        return (PinnedRegex, (self.pattern,))

    def __repr__(self) -> str:
        return f"PinnedRegex({self.pattern!r})"

    def _for(self, text: str) -> regex.Pattern:
        if text.isascii():
            return self._plain
        if not self._built:
            with self._lock:
                if not self._built:
                    differing = regex_differences()[0]
                    if differing:
                        self._pinned = regex.compile(pin(self.pattern))
                        self._differing = frozenset(map(chr, differing))
                    self._built = True
        # (a set of the text's characters: a fifth of the time of a regex search for them)
        if self._pinned is None or self._differing.isdisjoint(set(text)):
            return self._plain
        return self._pinned

    def finditer(self, text: str, pos: int = 0):
        return self._for(text).finditer(text, pos)

    def findall(self, text: str, pos: int = 0) -> list[str]:
        return self._for(text).findall(text, pos)

    def match(self, text: str, pos: int = 0):
        return self._for(text).match(text, pos)
