"""Custom split patterns split as tiktoken splits them: by Unicode 16.0's classes, at every code point.

tiktoken compiles a pattern with Rust's regex (Unicode 16.0); `regex` has a newer Unicode, so a
custom pattern is translated first (base/custom_regex.py). tiktoken, built offline, is the oracle:

- Classes, exactly, at every code point but the surrogates: tiktoken encodes only the text its
  pattern matches and drops the rest, so with a pattern that is one class and a vocab of the 256
  bytes, its ids are the UTF-8 of exactly the characters the class matches in Rust's regex. Ours
  must match the same ones: the plain translation on every code point where `regex`'s tables agree
  with Unicode 16.0's (the text it is used for), the pinned one on all.
- Splits, exactly, at chosen code points in many contexts (those `regex` classes otherwise, every
  code point with case variants, both ends of every run of a general category, a stride of the
  rest): with a vocab of the 256 bytes, each of our pre-tokens and each two adjacent ones joined,
  tiktoken's ids are one id per pre-token of ours exactly when its pre-tokens are ours (a
  pre-token of its spanning two of ours is a token itself; one spanning more cannot end as ours,
  since two adjacent would merge; a cut of its inside one of ours is a cut between tokens).
- Splits at every code point (slow), by ids under a vocab of every byte pair, ranked so that a
  byte merges with its neighbour within a pre-token first (test_unicode_version.py's probe).
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from itertools import chain

import pytest
import regex
from conftest import pair_vocab

from bpe_impls import Tokenizer, count_pretokens
from bpe_impls.base import compiled, custom_regex, unicode_sets
from bpe_impls.base.errors import ConfigError
from bpe_impls.base.patterns import O200K_PATTERN, PRESETS, iter_pretokens, resolve_pattern
from bpe_impls.harness.fixtures import openai_rank_file

tiktoken = pytest.importorskip("tiktoken")

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_PATTERN = LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")
PATTERNS = {
    "gpt2": "gpt2",
    "cl100k": "cl100k",
    "o200k": "o200k",
    "llama3": LLAMA3_PATTERN,
    "qwen2": QWEN2_PATTERN,
    "o200k-custom": f"(?:{O200K_PATTERN})",
}
# Custom patterns for what the translation rewrites besides classes: (?i) on classes and ranges,
# a flag to the end of its group, (?-i:..), $ (the end of the text only), (?m:^), \b, \B, `.`.
EXTRA_PATTERNS = {
    "case-classes": r"(?i:[a-z]+|\p{Lu}+|[^\W\d_]+)|\w+$|\d+|\s+|\S",
    "flags": r"(?i)'(?:S|T|RE)|(?-i:[A-Z])+|\p{gc=Ll}+|\P{L}|\p{L}",
    "boundaries": r"\b\w+\b|\B\W+\B|(?m:^\s+)|[^\w\s]+|\s+|\w",
    "categories": r"\p{Lu}\p{Ll}*|\p{N}+|\p{P}+|\p{S}+|\p{Z}+|\p{C}+|\p{M}+|\p{L}|(?s:.)",
}
SCALARS = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
EVERY = "".join(map(chr, SCALARS))
# A code point in many contexts: alone on a line, after a space, before and after an ASCII letter,
# before 's, between digits, after a newline, before and after a capital and an apostrophe,
# before two spaces, between punctuation, before a tab. Probes are joined by "\n".
TEMPLATE = "{c}\n {c}a{c}'s 1{c}2\n{c}A{c}'{c}x{c}  {c}!{c}\t"
SWEEP_TEMPLATE = "{c}\n {c}a{c}'s 1{c}2\n{c}A"  # the full sweep's: fewer contexts, every code point


def probes(code_points, template: str = TEMPLATE, block: int = 512) -> list[str]:
    return [
        "\n".join(template.format(c=chr(c)) for c in code_points[i : i + block])
        for i in range(0, len(code_points), block)
    ]


def our_split(given: str, text: str) -> list[str]:
    """Our pre-tokens under a preset's name or a regex: the regex path (a preset's PinnedRegex, a
    custom pattern's translation), checked against the C scanner where a preset has one."""
    pattern = resolve_pattern(given)
    pieces = list(iter_pretokens(text, pattern))
    if compiled.scanner_name(pattern) is not None and compiled.AVAILABLE:
        assert [p.decode() for p in compiled.core().pretokenize(text.encode(), pattern.name)] == pieces
    return pieces


def exact_oracle(pat_str: str, splits: list[list[str]]) -> tuple[object, dict[bytes, int]]:
    """tiktoken with the 256 bytes, each piece of `splits` and each two adjacent pieces joined."""
    ranks = {bytes([b]): b for b in range(256)}
    for pieces in splits:
        encoded = [piece.encode() for piece in pieces]
        for token in chain(encoded, map(bytes.__add__, encoded, encoded[1:])):
            ranks.setdefault(token, len(ranks))
    return tiktoken.Encoding("exact", pat_str=pat_str, mergeable_ranks=ranks, special_tokens={}), ranks


def splits_unlike_tiktoken(given: str, texts: list[str]) -> list[str]:
    """The probes (one line each) whose pre-tokens differ from tiktoken's, with both splits."""
    pat_str = resolve_pattern(given).regex
    splits = [our_split(given, text) for text in texts]
    oracle, ranks = exact_oracle(pat_str, splits)
    bad = [
        text
        for text, pieces, ids in zip(texts, splits, oracle.encode_ordinary_batch(texts, num_threads=2))
        if ids != [ranks[piece.encode()] for piece in pieces]
    ]
    if not bad:
        return []
    # Narrow down to the probes: each one alone, with its own oracle.
    lines = [line for text in bad for line in text.split("\n")]
    line_splits = [our_split(given, line) for line in lines]
    oracle, ranks = exact_oracle(pat_str, line_splits)
    theirs = oracle.encode_ordinary_batch(lines, num_threads=2)
    return [
        f"{line!r}: ours {pieces} tiktoken's {[oracle.decode_single_token_bytes(i) for i in ids]}"
        for line, pieces, ids in zip(lines, line_splits, theirs)
        if ids != [ranks[piece.encode()] for piece in pieces]
    ][:10] or bad[:3]


@pytest.fixture(scope="module")
def divergent() -> set[int]:
    return set(custom_regex.divergent().points)


@pytest.fixture(scope="module")
def chosen(divergent) -> list[int]:
    """Code points where a split can go wrong: those `regex` classes unlike Unicode 16.0, those
    with case variants, both ends of every general category's run, and every 257th."""
    ends = set()
    for start, stop, step, _ in unicode_sets.category_runs():
        ends.update((start, stop - step, stop))
    picked = divergent | set(unicode_sets.case_orbits()) | ends | set(range(0, 0x110000, 257))
    return sorted(c for c in picked if c < 0x110000 and not 0xD800 <= c < 0xE000)


# --- classes -------------------------------------------------------------------------------------

BYTES = {bytes([b]): b for b in range(256)}
# Each class over every code point: the general categories and groups, the other properties, the
# Perl classes, the presets' classes, and (?i) on the sets folding changes most.
CLASSES = [
    *(f"\\p{{{name}}}" for name in (*unicode_sets.CATEGORY_NAMES, *unicode_sets.GROUPS) if name != "Cs"),
    r"\p{LC}",
    r"\p{Any}",
    r"\p{ASCII}",
    r"\p{Assigned}",
    r"\p{White_Space}",
    r"\p{Join_Control}",
    r"\d",
    r"\s",
    r"\w",
    r"\D",
    r"\S",
    r"\W",
    r"\P{L}",
    r"[^\r\n\p{L}\p{N}]",
    r"[^\s\p{L}\p{N}]",
    r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]",
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]",
    r".",
    r"(?s:.)",
    r"(?i)\p{L}",
    r"(?i)\p{M}",
    r"(?i)\p{Lt}",
    r"(?i)[a-z]",
    r"(?i)\w",
    r"(?i)[\w]",
]
# The same over the code points where a class can go wrong (see `chosen`), every code point under
# the slow mark: the other spellings of a name, sets and negations, (?i) on the rest.
SAMPLED_CLASSES = [
    r"\pN",
    r"\p{Letter}",
    r"\p{gc=Lu}",
    r"\p{General_Category:Nd}",
    r"\p{gc!=L}",
    r"\P{gc!=L}",
    r"\p{IsLu}",
    r"\p{digit}",
    r"\p{punct}",
    r"\p{space}",
    r"\p{cf}",
    r"\p{sc}",
    r"[\d\s]",
    r"[^\d\s]",
    r"[^\W\d_]",
    r"[\x00-\x7f\u00e9]",
    # (?i): Rust folds a \p{..} and a bracketed class (before negating them), not \d, \s, \w.
    r"(?i)\p{Lu}",
    r"(?i)\p{Ll}",
    r"(?i)\p{So}",
    r"(?i)\p{Nl}",
    r"(?i)\p{LC}",
    r"(?i)\P{Lu}",
    r"(?i)[^\p{Lu}]",
    r"(?i)[\P{Lu}]",
    r"(?i)[^a-z]",
    r"(?i)\W",
    r"(?i)[^\W]",
    r"(?i)\p{ASCII}",
    r"(?i)[\p{Ll}\p{Lm}\p{Lo}\p{M}]",
    r"(?i)[^\s\p{L}\p{N}]",
    r"(?i)[\p{Cn}]",
    r"(?i)s",
    r"(?i)k",
    r"(?i)\u00b5",
    r"(?i)\u03b9",
    r"(?i)[\u0130\u0131]",
]


def matched_by_tiktoken(pat_str: str, text: str) -> str:
    encoding = tiktoken.Encoding("class", pat_str=pat_str, mergeable_ranks=BYTES, special_tokens={})
    return bytes(encoding.encode_ordinary(text)).decode("utf-8")


def class_matches_as_tiktoken(cls: str, text: str, divergent: set[int]) -> None:
    """Both translations, run over `text` (the plain one over its code points where `regex`
    agrees with Unicode 16.0, the text it is used for), keep exactly the characters tiktoken keeps."""
    ours = custom_regex.CustomRegex(f"{cls}+")
    theirs = matched_by_tiktoken(f"{cls}+", text)
    pinned = "".join(regex.findall(ours.pinned_text(), text))
    assert pinned == theirs, f"pinned: {len(set(pinned) ^ set(theirs))} code points differ"
    agreeing = "".join(c for c in text if ord(c) not in divergent)
    plain = "".join(ours.plain.findall(agreeing))
    assert plain == "".join(c for c in theirs if ord(c) not in divergent), "the plain translation differs"


@pytest.mark.parametrize("cls", CLASSES)
def test_a_class_matches_the_code_points_tiktoken_matches(cls, divergent):
    class_matches_as_tiktoken(cls, EVERY, divergent)


@pytest.mark.parametrize("cls", SAMPLED_CLASSES)
def test_a_class_matches_the_chosen_code_points_tiktoken_matches(cls, divergent, chosen):
    class_matches_as_tiktoken(cls, "".join(map(chr, chosen)), divergent)


@pytest.mark.slow
@pytest.mark.parametrize("cls", SAMPLED_CLASSES)
def test_a_class_matches_every_code_point_tiktoken_matches(cls, divergent):
    class_matches_as_tiktoken(cls, EVERY, divergent)


# --- splits --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*PATTERNS, *EXTRA_PATTERNS])
def test_a_pattern_splits_chosen_code_points_in_many_contexts_as_tiktoken(name, chosen, divergent):
    if name in EXTRA_PATTERNS:  # they test the rewriting, not the tables: fewer code points
        chosen = sorted(set(chosen[::7]) | set(unicode_sets.case_orbits()))
    texts = probes(chosen)
    # Both of a custom pattern's translations are run: texts with and without divergent code points.
    holding = [bool(divergent.intersection(map(ord, text))) for text in texts]
    assert any(holding) and not all(holding)
    differing = splits_unlike_tiktoken({**PATTERNS, **EXTRA_PATTERNS}[name], texts)
    assert not differing, "\n".join(differing)


STRUCTURES = [
    r"\w+$|\s+|\S",
    r"(?m:\w+$)|\s+|\S",
    r"(?m:^\w+)|\s+|\S",
    r"\A\w+|\w+\z|\s+|\S",
    r"(?m)^ ?\w+$|\s+|\S",
    r"(?s:\w.)|(?-s:.)|\n",
    r"(?:a(?i)b)c|\s+|\S",
    r"a(?i)b|c|\s+|\S",
    r"(?i:a(?-i)b)c|\s+|\S",
    r"(?i)(?:A|(?-i)b)C|\s+|\S",
]
STRUCTURE_TEXTS = [
    "ab\n",
    "ab\ncd\n",
    "ab\n\n",
    " x\n y",
    "ab",
    "\nab\n",
    "a b\r\nc\n",
    "é\u0558\n",
    "\u0558\n\u0558",
    "abc aBc abC aBC ABC Abc c C bc bC Bc BC ac AC",
]


@pytest.mark.parametrize("pattern", STRUCTURES)
def test_anchors_the_dot_and_flags_split_as_tiktoken(pattern):
    """`$` is the end of the text only (regex's also matches before a final newline), (?m) makes
    ^ and $ lines', (?s) lets `.` take a newline; a flag holds to the end of its group, and in the
    alternatives after it there."""
    assert not splits_unlike_tiktoken(pattern, STRUCTURE_TEXTS)


@pytest.mark.parametrize("name", ["llama3", "qwen2", "o200k-custom"])
def test_a_custom_pattern_encodes_as_tiktoken_where_regex_has_another_unicode(name, divergent):
    """Final ids: our Tokenizer (the pure-Python encoder, the one that runs a custom pattern)
    against tiktoken on every byte pair's ranks, at the code points `regex` classes unlike
    Unicode 16.0 and those with case variants."""
    vocab, merges, ranks = pair_vocab()
    pattern = PATTERNS[name]
    code_points = sorted(set(sorted(divergent)[::3]) | set(unicode_sets.case_orbits()))
    texts = probes(code_points, block=256)
    ours = Tokenizer(vocab, merges, pattern=pattern, encoder="hybrid").encode_batch(texts)
    theirs = tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    assert ours == theirs.encode_ordinary_batch(texts, num_threads=2)


def test_o200k_s_own_vocab_encodes_as_tiktoken_where_regex_has_another_unicode(tmp_path):
    """o200k's pattern as a custom one, with o200k's ranks: U+0558 is a letter to `regex` and
    other to tiktoken, so "\u0558's" was 145, 246, 885 (the letter run taking 's); tiktoken's is
    145, 246, 6, 82."""
    from tiktoken.load import load_tiktoken_bpe

    try:
        path = openai_rank_file("o200k_base", tmp_path)
    except ConfigError as exc:
        pytest.skip(str(exc))
    pattern = PATTERNS["o200k-custom"]
    ours = Tokenizer.load(path, pattern=pattern, encoder="hybrid")
    ranks = load_tiktoken_bpe(str(path))
    theirs = tiktoken.Encoding("o200k", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    assert theirs.encode_ordinary("\u0558's") == [145, 246, 6, 82]
    texts = probes(sorted(custom_regex.divergent().points)[::31], block=256)
    assert ours.encode("\u0558's") == [145, 246, 6, 82]
    assert ours.encode_batch(texts) == theirs.encode_ordinary_batch(texts, num_threads=2)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PATTERNS))
def test_a_pattern_splits_every_code_point_as_tiktoken(name, divergent):
    """Every code point in SWEEP_TEMPLATE's contexts, by ids under the every-byte-pair vocab: a
    preset through our Tokenizer (the C scanner where built), a custom pattern by its pre-tokens
    each merged by tiktoken (its BPE is proven equal to ours elsewhere; the split is what is
    tested). Blocks of 4096 code points: ASCII's, then those `regex` classes as Unicode 16.0 does
    (the plain translation), then the others (the pinned one)."""
    vocab, merges, ranks = pair_vocab()
    pat_str = resolve_pattern(PATTERNS[name]).regex
    theirs = tiktoken.Encoding(name, pat_str=pat_str, mergeable_ranks=ranks, special_tokens={})
    rest = SCALARS[0x80:]
    ordered = [c for c in rest if c not in divergent] + [c for c in rest if c in divergent]
    blocks = [SCALARS[:0x80]] + [ordered[i : i + 4096] for i in range(0, len(ordered), 4096)]
    texts = [probes(block, SWEEP_TEMPLATE, block=len(block))[0] for block in blocks]
    expected = theirs.encode_ordinary_batch(texts, num_threads=2)
    if name in PRESETS:
        ours = Tokenizer(vocab, merges, pattern=name).encode_batch(texts)
    else:
        # Our pre-tokens joined by a character the text does not hold, which `whole` splits at
        # and nowhere else: "\xff" in the ASCII block, "\x01" in the others.
        pattern = resolve_pattern(PATTERNS[name])
        ours = []
        for index, text in enumerate(texts):
            if index < 2:
                separator = "\xff" if index == 0 else "\x01"
                whole = tiktoken.Encoding(
                    "whole", pat_str=f"[^{separator}]+|{separator}", mergeable_ranks=ranks, special_tokens={}
                )
                dropped = whole.encode_single_token(separator)
            ids = whole.encode_ordinary(separator.join(iter_pretokens(text, pattern)))
            ours.append([i for i in ids if i != dropped])
    differing = [blocks[i][0] for i, (a, b) in enumerate(zip(ours, expected)) if a != b]
    assert not differing, f"blocks starting at {[hex(c) for c in differing[:10]]} split unlike tiktoken"


# --- training ------------------------------------------------------------------------------------


def test_counting_with_a_custom_pattern_splits_as_tiktoken(tmp_path, divergent):
    """count_pretokens counts the pre-tokens tiktoken makes (in-process and in two workers)."""
    code_points = sorted(divergent)[::5] + list(range(0x20, 0x3000, 37))
    text = "\n".join(TEMPLATE.format(c=chr(c)) for c in code_points)
    assert not splits_unlike_tiktoken(LLAMA3_PATTERN, [text])
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    expected = Counter(piece.encode() for piece in our_split(LLAMA3_PATTERN, text))
    for workers in (1, 2):
        assert count_pretokens(path, num_workers=workers, pattern=LLAMA3_PATTERN) == expected


# --- refusals ------------------------------------------------------------------------------------

REFUSED = {
    r"\p{Greek}+|\s+|\S": r"\p{Greek}",
    r"\p{Script=Latin}|\s+|\S": r"\p{Script=Latin}",
    r"\p{Alphabetic}+|\s+|\S": r"\p{Alphabetic}",
    r"\p{^L}|\s+|\S": r"\p{^L}",
    r"\X|\s+|\S": r"\X",
    r"\<\w+|\s+|\S": r"\<",
    r"\w+\Z|\s+|\S": r"\Z",
    r"\N{LATIN SMALL LETTER A}|\s+|\S": r"\N",
    r"\Gx|\s+|\S": r"\G",
    r"(?x)a b|\s+|\S": "(?x)",
    r"(?a)\w+|\s+|\S": "(?a)",
    r"[[:alpha:]]+|\s+|\S": "[[",
    r"[a&&b]|\s+|\S": "[a&&",
    r"[+--]|\s+|\S": "[+--",
    r"[\w-z]|\s+|\S": r"[\w-",
    r"x{,3}|\s+|\S": "{",
    r"(?#note)x|\s+|\S": "(?#",
    r"(?i)(a)\1|\s+|\S": r"\1",
    r"a(*PRUNE)b|\s+|\S": "(*",
    r"(?V1)[\w--a]|\s+|\S": "(?V",
}


@pytest.mark.parametrize("pattern", list(REFUSED))
def test_a_construct_that_cannot_match_as_tiktoken_is_one_line_naming_it(pattern):
    with pytest.raises(ConfigError) as raised:
        resolve_pattern(pattern)
    message = str(raised.value)
    assert "\n" not in message and REFUSED[pattern] in message and "cannot match as tiktoken does" in message


def test_the_cli_reports_a_refused_pattern_as_one_line(tmp_path):
    corpus = tmp_path / "ok.txt"
    corpus.write_text("hello world\n", encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe_impls",
            "train",
            str(corpus),
            "--vocab-size",
            "300",
            "--pattern",
            r"\p{Greek}+|\s+|\S",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("bpe: error: ") and r"\p{Greek}" in result.stderr
    assert not (tmp_path / "out").exists()
