"""Write bpe_impls/base/unicode16.py: Unicode 16.0's character classes, as tiktoken's regex has them.

Run with unicodedata2 16.0.0 installed (`pip install unicodedata2==16.0.0`, the test extra has it):
    python tools/unicode16.py > bpe_impls/base/unicode16.py
tests/test_unicode_version.py regenerates the module this way and compares it with the committed one.

Sources: the general categories from unicodedata2 16.0.0; White_Space, Join_Control and the part of
Other_Alphabetic outside the marks from PropList.txt 16.0 (below, short); the simple case folding
orbits from the installed `regex` module's case table, kept to the code points Unicode 16.0
assigns. That last is exact for any `regex` of Unicode 16.0 or later, by Unicode's Case Pair
Stability policy (two characters that form a case pair, or do not, keep doing so in every later
version): a later version only adds pairs with the characters it assigns, and those are dropped.
Rust's regex (tiktoken's) folds by CaseFolding.txt's C and S lines; `regex` also links the Turkic
pairs (T lines: I with dotless ı, dotted İ with i), which are dropped too.
"""

from __future__ import annotations

import sys

import regex
import unicodedata2
from regex import _regex

VERSION = "16.0.0"
CODE_POINTS = 0x110000
# White_Space (PropList.txt), what `\s` matches in `regex` and in Rust's regex; unchanged since
# Unicode 6.3 (unicodedata has no White_Space property).
WHITE_SPACE = (
    (0x09, 0x0D),
    (0x20, 0x20),
    (0x85, 0x85),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
)
JOIN_CONTROL = ((0x200C, 0x200D),)
# Other_Alphabetic (PropList.txt 16.0) outside the marks: the circled, parenthesized and squared
# Latin letters (all So). `\w` is Alphabetic + M + Nd + Pc + Join_Control (UTS #18), and Alphabetic
# is L + Nl + Other_Alphabetic, so these are all `\w` needs beyond the general categories.
WORD_SYMBOLS = ((0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189))
# Case-folding links of `regex` that CaseFolding.txt makes only for Turkic (status T).
TURKIC = (0x130, 0x131)
# An alternating run ("Lu/Ll") needs at least this many code points to be written as one.
_MIN_ALTERNATING = 4


def _span(start: int, end: int) -> str:
    return f"{start:04X}..{end:04X}" if end > start else f"{start:04X}"


def category_lines() -> list[str]:
    """The general category of every assigned code point (Cn, unassigned, is left out), as runs;
    a run of code points alternating between two categories (Lu, Ll, Lu, ...) is one line "Lu/Ll"."""
    runs: list[list] = []  # [start, end, category]
    for code_point in range(CODE_POINTS):
        category = unicodedata2.category(chr(code_point))
        if runs and runs[-1][1] == code_point - 1 and runs[-1][2] == category:
            runs[-1][1] = code_point
        else:
            runs.append([code_point, code_point, category])
    runs = [run for run in runs if run[2] != "Cn"]
    lines = []
    index = 0
    while index < len(runs):
        start, end, category = runs[index]
        other = runs[index + 1][2] if index + 1 < len(runs) else None
        last = index
        # single code points in a row, the two categories taking turns
        while last + 1 < len(runs):
            following = runs[last + 1]
            turn = other if (last + 1 - index) % 2 else category
            if not (runs[last][0] == runs[last][1] == following[0] - 1 == following[1] - 1 and following[2] == turn):
                break
            last += 1
        if last + 1 - index >= _MIN_ALTERNATING:
            lines.append(f"{_span(start, runs[last][0])} {category}/{other}")
            index = last + 1
        else:
            lines.append(f"{_span(start, end)} {category}")
            index += 1
    return lines


def case_orbits() -> list[list[int]]:
    """Unicode 16.0's simple case folding orbits of two or more code points (see the docstring)."""
    assigned = bytearray(CODE_POINTS)
    for code_point in range(CODE_POINTS):
        assigned[code_point] = unicodedata2.category(chr(code_point)) != "Cn"
    every = "".join(chr(c) for c in range(CODE_POINTS) if assigned[c])
    if regex.search(r"\p{Cn}", every):
        raise SystemExit("the installed regex module has an older Unicode than 16.0: its case table would miss pairs")
    parent = list(range(CODE_POINTS))

    def root(c: int) -> int:
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    flags = regex.IGNORECASE | regex.UNICODE
    for code_point in range(CODE_POINTS):
        if not assigned[code_point] or code_point in TURKIC:
            continue
        for other in _regex.get_all_cases(flags, code_point):
            if assigned[other] and other not in TURKIC:
                parent[root(other)] = root(code_point)
    orbits: dict[int, list[int]] = {}
    for code_point in range(CODE_POINTS):
        if parent[code_point] != code_point or root(code_point) != code_point:
            orbits.setdefault(root(code_point), []).append(code_point)
    for code_point, members in orbits.items():
        members.append(code_point)
    return sorted(sorted(set(members)) for members in orbits.values())


def case_lines() -> list[str]:
    """Each code point of an orbit but its smallest, mapped to that smallest: "start..end[/2] delta"
    maps start, start + step, ... end (step 2 where written /2) each to itself plus delta."""
    mapping = sorted((c, members[0] - c) for members in case_orbits() for c in members[1:])
    lines = []
    index = 0
    while index < len(mapping):
        start, delta = mapping[index]
        best_count, best_step = 1, 1
        for step in (1, 2):
            last = index
            while (
                last + 1 < len(mapping)
                and mapping[last + 1][1] == delta
                and mapping[last + 1][0] == mapping[last][0] + step
            ):
                last += 1
            if last + 1 - index > best_count:
                best_count, best_step = last + 1 - index, step
        end = start + (best_count - 1) * best_step
        lines.append(f"{_span(start, end)}{'/2' if best_step == 2 else ''} {delta:+X}")
        index += best_count
    return lines


def _spans(ranges: tuple[tuple[int, int], ...]) -> str:
    return " ".join(_span(start, end) for start, end in ranges)


def module_text() -> str:
    if unicodedata2.unidata_version != VERSION:
        raise SystemExit(f"unicodedata2 has Unicode {unicodedata2.unidata_version}; this table is {VERSION}")
    categories = "\n".join(category_lines())
    cases = "\n".join(case_lines())
    return (
        f"\"\"\"Unicode {VERSION}'s character classes, as tiktoken's regex (Rust's regex crate) has them.\n\n"
        "CATEGORIES: the general category of every assigned code point, as runs (start..end category); a\n"
        'run "Lu/Ll" alternates between the two, one code point each, from the first. Every code point\n'
        "not listed is unassigned (Cn).\n"
        "WHITE_SPACE, JOIN_CONTROL: those properties; WORD_SYMBOLS: the code points of \\\\w beyond\n"
        "L, M, Nd, Nl, Pc and Join_Control (Other_Alphabetic outside the marks).\n"
        "CASE_ORBITS: the code points that simple case folding makes equal (what (?i) matches alike):\n"
        '"start..end[/2] delta" maps start, start + step, ... end (step 2 where written /2) each to the\n'
        "smallest code point of its orbit, itself plus delta; a code point not listed is alone.\n\n"
        "Generated by tools/unicode16.py from unicodedata2 16.0.0 (see there); do not edit.\n"
        '"""\n\n'
        f'VERSION = "{VERSION}"\n\n'
        f'WHITE_SPACE = "{_spans(WHITE_SPACE)}"\n'
        f'JOIN_CONTROL = "{_spans(JOIN_CONTROL)}"\n'
        f'WORD_SYMBOLS = "{_spans(WORD_SYMBOLS)}"\n\n'
        f'CATEGORIES = """\\\n{categories}\n"""\n\n'
        f'CASE_ORBITS = """\\\n{cases}\n"""\n'
    )


if __name__ == "__main__":
    sys.stdout.write(module_text())
