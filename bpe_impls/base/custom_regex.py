"""A custom split pattern that matches as tiktoken matches it: by Unicode 16.0's classes.

tiktoken compiles a split pattern with Rust's regex crate (through fancy-regex), whose tables are
Unicode 16.0. The `regex` module follows the newest Unicode: some 17,500 code points assigned
since are letters, marks or numbers to it and unassigned ("other") to tiktoken, and it folds case
and names classes its own way (`(?i)\\p{Lu}` matches every cased letter, Rust's only the case
variants of the capitals). So a custom pattern is translated before `regex` compiles it:

- Each character class (`\\p{..}`, `\\P{..}`, `\\d`, `\\s`, `\\w`, their negations, a bracketed
  `[...]`) becomes the class itself in `regex`'s own terms (fast: `regex` looks a property up in a
  table) with the code points where that differs from Rust's class patched: `(?:(?![drop])class|[add])`.
  Rust's class is computed from Unicode 16.0's tables (unicode_sets.py), with Rust's rules: under
  (?i) a `\\p{..}` and a bracketed class take in the case variants of their code points (simple
  case folding) before a negation, `\\d`, `\\s` and `\\w` are left as they are.
- A literal under (?i) becomes the class of its case variants, in Unicode 16.0, so no (?i) reaches
  `regex`; `^`, `$` and `.` are written for their (?m) and (?s) flags, so no flag reaches it
  either; `$` without (?m) is `\\Z` (Rust's `$` is the end of the text only; `regex`'s also
  matches before a final newline); `\\b` and `\\B` become look-arounds on the translated `\\w`.

Two translations are kept, as PinnedRegex keeps two for the presets. The plain one patches only
what case folding changes: on text without a code point where `regex`'s tables differ from
Unicode 16.0's ("divergent": ASCII has none, checked first) it matches as Rust does. The pinned one
also patches every divergent code point (found by scanning all code points with `regex`, once,
kept in the cache folder) and is used for text holding one.

What cannot be made exact is refused with a ConfigError naming it: scripts and properties other
than the general categories, White_Space and Join_Control; `\\b{..}`, `\\<`, `\\>`, `\\Z`, `\\N`, `\\K`
and the other escapes Rust reads otherwise or not at all; a `[` or `&&`, `--`, `~~` inside a
class (Rust nests classes and takes set operations there, `regex` reads them as characters);
flags other than i, m, s, u (x ignores white space inside classes in Rust only); `{` that is not
a repetition; a backreference under (?i) (case-insensitive comparison by `regex`'s table).
"""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from array import array
from collections.abc import Iterator
from functools import lru_cache

import regex

from . import unicode16
from .cache import read_entry, write_entry
from .errors import ConfigError
from .unicode_sets import CATEGORY_NAMES, CODE_POINTS, GROUPS, CodePoints, case_fold, case_orbits, named_set

# --- Property names, resolved as Rust's regex-syntax resolves them (unicode.rs) --------------------

# Each general category's aliases (PropertyValueAliases.txt 16.0), normalized as below.
_CATEGORY_ALIASES = {
    "C": "c other",
    "Cc": "cc control cntrl",
    "Cf": "cf format",
    "Cn": "cn unassigned",
    "Co": "co privateuse",
    "Cs": "cs surrogate",
    "L": "l letter",
    "LC": "lc casedletter",
    "Ll": "ll lowercaseletter",
    "Lm": "lm modifierletter",
    "Lo": "lo otherletter",
    "Lt": "lt titlecaseletter",
    "Lu": "lu uppercaseletter",
    "M": "m mark combiningmark",
    "Mc": "mc spacingmark",
    "Me": "me enclosingmark",
    "Mn": "mn nonspacingmark",
    "N": "n number",
    "Nd": "nd decimalnumber digit",
    "Nl": "nl letternumber",
    "No": "no othernumber",
    "P": "p punctuation punct",
    "Pc": "pc connectorpunctuation",
    "Pd": "pd dashpunctuation",
    "Pe": "pe closepunctuation",
    "Pf": "pf finalpunctuation",
    "Pi": "pi initialpunctuation",
    "Po": "po otherpunctuation",
    "Ps": "ps openpunctuation",
    "S": "s symbol",
    "Sc": "sc currencysymbol",
    "Sk": "sk modifiersymbol",
    "Sm": "sm mathsymbol",
    "So": "so othersymbol",
    "Z": "z separator",
    "Zl": "zl lineseparator",
    "Zp": "zp paragraphseparator",
    "Zs": "zs spaceseparator",
    "Any": "any",
    "ASCII": "ascii",
    "Assigned": "assigned",
}
_CATEGORIES = {alias: name for name, aliases in _CATEGORY_ALIASES.items() for alias in aliases.split()}
# The binary properties supported (their PropertyAliases.txt names, normalized). Rust looks a name
# up as a property before as a category, but no category's alias is a property's name except
# cf, lc and sc, which it takes as categories.
_BINARY = {
    "whitespace": "White_Space",
    "wspace": "White_Space",
    "space": "White_Space",
    "joincontrol": "Join_Control",
    "joinc": "Join_Control",
}
_CATEGORY_PROPERTY = {"gc", "generalcategory"}
_SUPPORTED = (
    "custom patterns have the general categories, \\p{White_Space}, \\p{Join_Control}, \\p{Any}, "
    "\\p{ASCII}, \\p{Assigned}, \\d, \\s, \\w"
)


def _normalize(name: str) -> str:
    """UAX44-LM3 as Rust applies it: case, spaces, '_' and '-' ignored, an 'is' prefix dropped."""
    dropped_is = name[:2].lower() == "is"
    out = "".join(c.lower() for c in (name[2:] if dropped_is else name) if c.isascii() and c not in " _-")
    return "isc" if dropped_is and out == "c" else out  # ISO_Comment's alias, as Rust keeps it


def _resolve(body: str, construct: str) -> tuple[str, bool]:
    """A property class's name here (named_set's) and whether `!=` negates it."""
    negate = False
    if "!=" in body:
        name, value, negate = *body.split("!=", 1), True
    elif ":" in body or "=" in body:
        cut = min(i for i in (body.find(":"), body.find("=")) if i >= 0)
        name, value = body[:cut], body[cut + 1 :]
    else:
        name, value = None, body
    if name is not None and _normalize(name) not in _CATEGORY_PROPERTY:
        raise _refused(construct, f"the property {name!r} is not supported ({_SUPPORTED})")
    norm = _normalize(value)
    if name is None and norm in _BINARY:
        return _BINARY[norm], negate
    if norm in _CATEGORIES:
        return _CATEGORIES[norm], negate
    raise _refused(construct, f"not a general category: scripts and other properties are not supported ({_SUPPORTED})")


class _Refused(Exception):
    """A construct that cannot match as tiktoken's regex matches it (turned into a ConfigError)."""


def _refused(construct: str, why: str) -> _Refused:
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in construct)
    return _Refused(f"{shown}: {why}")


# --- The translation ---------------------------------------------------------------------------


def _escape(code_point: int) -> str:
    return f"\\U{code_point:08x}" if code_point > 0xFFFF else f"\\u{code_point:04x}"


def _class_text(points: CodePoints) -> str:
    """A bracketed class of `points` as ranges (every code point escaped)."""
    parts = [
        _escape(start) if end == start + 1 else f"{_escape(start)}-{_escape(end - 1)}" for start, end in points.ranges()
    ]
    return "[" + "".join(parts) + "]"


# The classes `regex` has in its own tables that a translation uses; `divergent()` compares each with
# Unicode 16.0's. The Perl classes are the same sets as their properties in both (UTS #18).
_NATIVE = {
    "digit": ("\\d", "\\D"),
    "space": ("\\s", "\\S"),
    "word": ("\\w", "\\W"),
    "White_Space": ("\\s", "\\S"),
    "Assigned": ("\\P{Cn}", "\\p{Cn}"),
}
_NATIVE.update({name: (f"\\p{{{name}}}", f"\\P{{{name}}}") for name in (*CATEGORY_NAMES, *GROUPS, "LC")})


class _Item:
    """One member of a class: `text` as `regex` reads it inside brackets ("" for nothing) and
    `alone` outside them, `native` what that matches by Unicode 16.0's tables, `target` what
    Rust's regex matches for it. (Plain classes, not dataclasses: each of those costs a
    millisecond at import.)"""

    __slots__ = ("alone", "native", "target", "text")

    def __init__(self, text: str, alone: str, native: CodePoints, target: CodePoints):
        self.text, self.alone, self.native, self.target = text, alone, native, target


def _named_item(name: str, negated: bool, fold: bool) -> _Item:
    points = named_set(name)
    # Rust folds a \p{..} under (?i) before it negates it; the Perl classes are never folded.
    target = case_fold(points) if fold and name not in ("digit", "space", "word") else points
    if negated:
        points, target = ~points, ~target
    if name in _NATIVE:
        return _Item(_NATIVE[name][negated], _NATIVE[name][negated], points, target)
    text = _class_text(points) if points else ""
    return _Item(text[1:-1], text, points, target)


class _Class:
    """A class in the translated pattern: `native` ("" when it matches nothing) matches `native_points`
    by Unicode 16.0's tables, and Rust's regex matches `target`."""

    __slots__ = ("native", "native_points", "target")

    def __init__(self, native: str, native_points: CodePoints, target: CodePoints):
        self.native, self.native_points, self.target = native, native_points, target

    def plain(self) -> str:
        if self.native_points == self.target:
            return self.native or "(?:(?!))"
        return _patched(self.native, self.native_points - self.target, self.target - self.native_points)

    def pinned(self, divergent: Divergent) -> str:
        # On the divergent code points, what `regex` itself matches for `native`.
        matched = (
            CodePoints.of(ord(m.group()) for m in regex.finditer(self.native, divergent.text))
            if self.native
            else CodePoints()
        )
        outside = ~divergent.points
        drop = ((self.native_points - self.target) & outside) | (matched - self.target)
        add = ((self.target - self.native_points) & outside) | ((self.target & divergent.points) - matched)
        return _patched(self.native, drop, add)


def _patched(native: str, drop: CodePoints, add: CodePoints) -> str:
    """`native` without `drop`, with `add`: one character."""
    parts = []
    if native:
        parts.append(f"(?!{_class_text(drop)}){native}" if drop else native)
    if add:
        parts.append(_class_text(add))
    if not parts:
        return "(?:(?!))"  # an empty class: matches nothing
    return parts[0] if len(parts) == 1 and not drop else "(?:" + "|".join(parts) + ")"


def _single(item: _Item) -> _Class:
    return _Class(item.alone, item.native, item.target)


_FLAGS = frozenset("imsu")
_FOLDED_BACKREFERENCE = "a backreference under (?i), which `regex` compares by its own case table"
_BOUNDARY = "(?:(?<={w})(?!{w})|(?<!{w})(?={w}))"
_NOT_BOUNDARY = "(?:(?<={w})(?={w})|(?<!{w})(?!{w}))"
_CONTROL = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a"}
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}
# Pattern syntax, ASCII: the standard `re` compiles these in a tenth of `regex`'s time.
_REPETITION = re.compile(r"\{[0-9]+(?:,[0-9]*)?\}")
_NAMED_GROUP = re.compile(r"\(\?P?<[A-Za-z_][A-Za-z0-9_]*>")
_NAMED_BACKREFERENCE = re.compile(r"\(\?P=[A-Za-z_][A-Za-z0-9_]*\)")
_FLAG_GROUP = re.compile(r"\(\?([A-Za-z]*)(?:-([A-Za-z]*))?([:)])")


class _Translator:
    """Reads a pattern as the `regex` module parses it (VERSION0) and writes it out piece by piece:
    text that means the same to both, and _Class pieces (see the module docstring)."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.position = 0
        self.pieces: list[str | _Class | tuple[str, _Class]] = []
        self.flags: list[set[str]] = [set()]  # each open group's flags

    def run(self) -> list[str | _Class | tuple[str, _Class]]:
        pattern = self.pattern
        while self.position < len(pattern):
            char = pattern[self.position]
            if char == "\\":
                self._escape()
            elif char == "[":
                self.pieces.append(self._bracket())
            elif char == "(":
                self._open()
            elif char == ")":
                if len(self.flags) > 1:
                    self.flags.pop()
                self._emit(")", 1)
            elif char == ".":
                self._emit("(?s:.)" if "s" in self.flags[-1] else ".", 1)
            elif char == "^":
                self._emit("(?m:^)" if "m" in self.flags[-1] else "^", 1)
            elif char == "$":
                self._emit("(?m:$)" if "m" in self.flags[-1] else "\\Z", 1)
            elif char == "{":
                repetition = _REPETITION.match(pattern, self.position)
                if repetition is None:
                    raise _refused(
                        self._construct(1), "not a repetition {m}, {m,} or {m,n} (escape a literal { as \\{)"
                    )
                self._emit(repetition.group(), repetition.end() - self.position)
            elif char in "*+?|":
                self._emit(char, 1)
            else:
                self._literal(ord(char), 1)
        return self.pieces

    def _construct(self, length: int) -> str:
        return self.pattern[self.position : self.position + length]

    def _emit(self, text: str, length: int) -> None:
        self.pieces.append(text)
        self.position += length

    def _literal(self, code_point: int, length: int) -> None:
        """A character outside a class: under (?i), the class of its case variants."""
        orbit = case_orbits().get(code_point) if "i" in self.flags[-1] else None
        if orbit:
            text = _class_text(CodePoints.of(orbit))
        else:
            char = chr(code_point)
            text = regex.escape(char) if char.isascii() and char.isprintable() else _escape(code_point)
        self._emit(text, length)

    def _open(self) -> None:
        pattern, start = self.pattern, self.position
        inherited = set(self.flags[-1])
        if pattern.startswith("(*", start):
            raise _refused(
                self._construct(2),
                "a backtracking verb of `regex`'s ((*PRUNE), (*SKIP), ...); tiktoken's regex has none",
            )
        if not pattern.startswith("(?", start):
            self.flags.append(inherited)
            self._emit("(", 1)
            return
        for opener in ("(?:", "(?=", "(?!", "(?<=", "(?<!", "(?>"):
            if pattern.startswith(opener, start):
                self.flags.append(inherited)
                self._emit(opener, len(opener))
                return
        named = _NAMED_GROUP.match(pattern, start)
        if named:
            self.flags.append(inherited)
            self._emit(named.group(), named.end() - start)
            return
        backreference = _NAMED_BACKREFERENCE.match(pattern, start)
        if backreference:
            if "i" in inherited:
                raise _refused(backreference.group(), _FOLDED_BACKREFERENCE)
            self._emit(backreference.group(), backreference.end() - start)
            return
        flags = _FLAG_GROUP.match(pattern, start)
        if flags is None:
            raise _refused(self._construct(3), "a group tiktoken's regex does not have or reads otherwise")
        on, off = set(flags.group(1)), set(flags.group(2) or "")
        if not (on | off) <= _FLAGS or "u" in off or not (on | off):
            raise _refused(
                flags.group(),
                "a flag other than i, m, s, u (x, for one, ignores white space inside classes in Rust's regex only)",
            )
        changed = (inherited | on) - off - {"u"}
        if flags.group(3) == ":":
            self.flags.append(changed)
            self._emit("(?:", flags.end() - start)
        else:  # to the end of the enclosing group, as in Rust's regex
            self.flags[-1] = changed
            self.position = flags.end()

    def _escape(self) -> None:
        pattern, start = self.pattern, self.position
        if start + 1 >= len(pattern):
            raise _refused("\\", "ends the pattern")
        kind = pattern[start + 1]
        fold = "i" in self.flags[-1]
        if kind in "pP":
            item, length = self._property(fold)
            self.pieces.append(_single(item))
            self.position += length
        elif kind in "dDsSwW":
            item = _named_item({"d": "digit", "s": "space", "w": "word"}[kind.lower()], kind.isupper(), fold)
            self.pieces.append(_single(item))
            self.position += 2
        elif kind in "bB":
            if pattern.startswith("{", start + 2):
                raise _refused(self._construct(3), "a word-boundary form of Rust's regex that `regex` does not have")
            word = _single(_named_item("word", False, False))
            self.pieces.append(((_BOUNDARY if kind == "b" else _NOT_BOUNDARY), word))
            self.position += 2
        elif kind == "A":
            self._emit("\\A", 2)
        elif kind == "z":
            self._emit("\\Z", 2)
        elif kind in "123456789" and not pattern[start + 2 : start + 3].isdigit():
            if fold:
                raise _refused(self._construct(2), _FOLDED_BACKREFERENCE)
            self._emit(self._construct(2), 2)
        else:
            code_point, length = self._escaped_character()
            self._literal(code_point, length)

    def _escaped_character(self) -> tuple[int, int]:
        """The character an escape at the position stands for, and the escape's length."""
        pattern, start = self.pattern, self.position
        kind = pattern[start + 1]
        if kind in _CONTROL:
            return ord(_CONTROL[kind]), 2
        if kind in _HEX_DIGITS:
            digits = pattern[start + 2 : start + 2 + _HEX_DIGITS[kind]]
            if len(digits) != _HEX_DIGITS[kind] or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise _refused(self._construct(2 + len(digits)), f"not \\{kind} with {_HEX_DIGITS[kind]} hex digits")
            return int(digits, 16), 2 + len(digits)
        if (kind.isascii() and kind.isalnum()) or kind in "<>":
            raise _refused(self._construct(2), "an escape tiktoken's regex does not have or reads otherwise")
        return ord(kind), 2

    def _property(self, fold: bool) -> tuple[_Item, int]:
        pattern, start = self.pattern, self.position
        negated = pattern[start + 1] == "P"
        if pattern.startswith("{", start + 2):
            end = pattern.find("}", start + 3)
            if end < 0:
                raise _refused(self._construct(3), "not closed by }")
            body, length = pattern[start + 3 : end], end + 1 - start
        else:
            body, length = pattern[start + 2 : start + 3], 3
        name, negate = _resolve(body, self._construct(length))
        return _named_item(name, negated != negate, fold), length

    def _bracket(self) -> _Class:
        """A bracketed class, read as `regex` (VERSION0) reads it; its target as Rust's regex builds it."""
        pattern, start = self.pattern, self.position
        fold = "i" in self.flags[-1]
        self.position += 1
        negated = pattern.startswith("^", self.position)
        self.position += negated
        items: list[_Item] = []
        first = True
        while True:
            if self.position >= len(pattern):
                raise _refused(pattern[start:], "not closed by ]")
            char = pattern[self.position]
            if char == "]" and not first:
                self.position += 1
                break
            first = False
            if char == "[" or pattern[self.position : self.position + 2] in ("&&", "--", "~~"):
                raise _refused(
                    pattern[start : self.position + 2],
                    "a [ or &&, -- or ~~ inside a class: tiktoken's regex "
                    "reads a nested class or a set operation there, `regex` characters (escape them)",
                )
            low = self._class_character()
            dash = pattern.startswith("-", self.position) and not pattern.startswith("-]", self.position)
            if isinstance(low, _Item):
                if dash:
                    raise _refused(pattern[start : self.position + 1], "a range that starts with a class")
                items.append(low)
                continue
            if dash:
                if pattern.startswith("--", self.position):
                    raise _refused(
                        pattern[start : self.position + 2],
                        "-- inside a class: tiktoken's regex reads a set "
                        "difference there, `regex` characters (escape them)",
                    )
                self.position += 1
                high = self._class_character()
                if isinstance(high, _Item):
                    raise _refused(pattern[start : self.position], "a range that ends in a class")
                if high < low:
                    raise _refused(pattern[start : self.position], "a range whose end comes before its start")
                points = CodePoints((low, high + 1))
            else:
                points = CodePoints((low, low + 1))
            items.append(_Item(_class_text(points)[1:-1], "", points, points))
        native = CodePoints.of_ranges(span for item in items for span in item.native.ranges())
        target = CodePoints.of_ranges(span for item in items for span in item.target.ranges())
        if fold:
            target = case_fold(target)
        text = "".join(item.text for item in items)
        if negated:
            native, target = ~native, ~target
            return _Class(f"[^{text}]" if text else "(?s:.)", native, target)
        return _Class(f"[{text}]" if text else "", native, target)

    def _class_character(self) -> int | _Item:
        """The character or class at the position inside brackets, the position moved past it."""
        pattern, start = self.pattern, self.position
        char = pattern[start]
        if char != "\\":
            self.position += 1
            return ord(char)
        if start + 1 >= len(pattern):
            raise _refused("\\", "ends the pattern")
        kind = pattern[start + 1]
        fold = False  # folded with the whole class
        if kind in "pP":
            item, length = self._property("i" in self.flags[-1])
            self.position += length
            return item
        if kind in "dDsSwW":
            self.position += 2
            return _named_item({"d": "digit", "s": "space", "w": "word"}[kind.lower()], kind.isupper(), fold)
        code_point, length = self._escaped_character()
        self.position += length
        return code_point


def translate(pattern: str) -> list[str | _Class | tuple[str, _Class]]:
    """The pattern's pieces (see _Translator); a ConfigError naming what cannot match as tiktoken."""
    try:
        return _Translator(pattern).run()
    except _Refused as refusal:
        raise ConfigError(f"split pattern {pattern!r} cannot match as tiktoken does: {refusal}") from None


def _render(pieces, render_class) -> str:
    out = []
    for piece in pieces:
        if isinstance(piece, str):
            out.append(piece)
        elif isinstance(piece, _Class):
            out.append(render_class(piece))
        else:
            template, word = piece
            out.append(template.format(w=render_class(word)))
    return "".join(out)


# --- Where `regex`'s tables differ from Unicode 16.0's ---------------------------------------------


class Divergent:
    """The code points some class of _NATIVE matches in `regex` and not in Unicode 16.0, or the
    reverse: as CodePoints, as a set of characters (to check a text against) and as one string."""

    __slots__ = ("chars", "points", "text")

    def __init__(self, points: CodePoints):
        self.points = points
        self.text = "".join(map(chr, points))
        self.chars = frozenset(self.text)


def _regex_points(native: str, every: str) -> CodePoints:
    return CodePoints.of_ranges(match.span() for match in regex.finditer(f"(?:{native})+", every))


def divergent_code_points() -> CodePoints:
    """Every code point where a class of _NATIVE matches in the installed `regex` otherwise than
    in Unicode 16.0 (a third of a second: every code point is scanned once per class group)."""
    # Every code point, surrogates included (a str may hold them); decoded, four times as fast as a join.
    every = array("I", range(CODE_POINTS)).tobytes().decode("utf-32-le", "surrogatepass")
    differ: list[CodePoints] = []
    # The categories, and the groups, are disjoint: one scan each, by which alternative matched.
    for names in (CATEGORY_NAMES, tuple(GROUPS)):
        scan = regex.compile("|".join(f"(?P<{name}>\\p{{{name}}}+)" for name in names))
        spans: dict[str, list[tuple[int, int]]] = {name: [] for name in names}
        for match in scan.finditer(every):
            spans[match.lastgroup or ""].append(match.span())  # (every alternative is a named group)
        differ += (CodePoints.of_ranges(spans[name]) ^ named_set(name) for name in names)
    differ += (_regex_points(_NATIVE[name][0], every) ^ named_set(name) for name in ("LC", "digit", "space", "word"))
    return CodePoints.of_ranges(span for one in differ for span in one.ranges())


# Names how the set is computed; bump it when divergent_code_points changes.
_DIVERGENT_VERSION = 1


def divergent_name() -> str:
    """The cache entry's name: what the set depends on, the `regex` version and the Unicode 16.0
    tables shipped (a digest: a fix to them must not meet a set computed before it)."""
    data = f"{unicode16.CATEGORIES}\n{unicode16.WHITE_SPACE}\n{unicode16.JOIN_CONTROL}\n{unicode16.WORD_SYMBOLS}"
    digest = hashlib.sha256(data.encode()).hexdigest()[:16]
    return (
        f"custom-divergent-v{_DIVERGENT_VERSION}-regex-{regex.__version__}-unicode-{unicodedata.unidata_version}"
        f"-{digest}.bin"
    )


@lru_cache(maxsize=1)
def divergent() -> Divergent:
    """divergent_code_points(), kept in the cache folder (base/cache.py) as its ranges' bounds."""
    stored = read_entry(divergent_name())
    if stored is not None and len(stored) % 8 == 0:
        points = CodePoints(array("I", stored))
    else:
        points = divergent_code_points()
        write_entry(divergent_name(), array("I", points.bounds).tobytes())
    if points.bounds and points.bounds[0] < 0x80:
        # The plain translation runs on ASCII text unchecked: ASCII's classes never change.
        raise RuntimeError("the installed regex module classes ASCII unlike Unicode 16.0")
    return Divergent(points)


class CustomRegex:
    """A custom pattern's translation (see the module docstring), with `regex.Pattern`'s
    `finditer`, `findall` and `match`: the plain translation on text holding no divergent code
    point, the pinned one otherwise."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self._pieces = translate(pattern)
        self.plain_text = _render(self._pieces, _Class.plain)
        self.plain = regex.compile(self.plain_text)
        self._lock = threading.Lock()
        self._pinned: regex.Pattern | None = None

    def __reduce__(self):
        return (CustomRegex, (self.pattern,))

    def __repr__(self) -> str:
        return f"CustomRegex({self.pattern!r})"

    def pinned_text(self) -> str:
        """The pinned translation."""
        found = divergent()
        return _render(self._pieces, lambda piece: piece.pinned(found))

    def _for(self, text: str) -> regex.Pattern:
        if text.isascii():
            return self.plain
        found = divergent()
        # (a set of the text's characters: a fifth of the time of a regex search for them)
        if found.chars.isdisjoint(set(text)):
            return self.plain
        if self._pinned is None:
            with self._lock:
                if self._pinned is None:
                    self._pinned = regex.compile(self.pinned_text())
        return self._pinned

    def finditer(self, text: str, pos: int = 0) -> Iterator[regex.Match]:
        return self._for(text).finditer(text, pos)

    def findall(self, text: str, pos: int = 0) -> list:
        return self._for(text).findall(text, pos)

    def match(self, text: str, pos: int = 0) -> regex.Match | None:
        return self._for(text).match(text, pos)

    def search(self, text: str, pos: int = 0) -> regex.Match | None:
        return self._for(text).search(text, pos)
