"""Split patterns and special tokens, shared by counting and encoding.

The text is first split on the special tokens (escaped, longest first, so they never take part in
a merge and no pair crosses one); each piece between them is cut into pre-tokens by a split
pattern. Training counts those pre-tokens as UTF-8 `bytes`; encoding merges each one's bytes.

The presets are tiktoken's patterns, character for character (`tiktoken_ext/openai_public.py`):
"gpt2" (GPT-2, r50k), "cl100k" (GPT-4) and "o200k" (GPT-4o). Any other regex the `regex` module
accepts is a custom pattern, translated to match by Unicode 16.0's classes as tiktoken does
(custom_regex.py). What is proven about a preset (where a corpus may be cut into
independent pieces, how much text decides a pre-token) is recorded with it; a custom pattern gets
only what holds for every regex: cuts after special tokens, nothing settled before one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache

import regex

from .char_classes import PinnedRegex
from .custom_regex import CustomRegex
from .errors import ConfigError

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
# GPT-2's pattern as published with GPT-2 (tiktoken's r50k string above is its faster equivalent).
GPT2_CLASSIC_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
    r"""\s+(?!\S)|\s"""
)
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

_PRESET_REGEXES = frozenset({GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN})


@dataclass(frozen=True)
class SplitPattern:
    """A split pattern and what is proven about it.

    prose_cuts: zero-width positions in ASCII prose where cutting a text cannot change its
    pre-tokens (the proofs are in PRESETS' comments), as a bytes regex; None for a custom pattern.
    settle_margin: a pre-token [p, e) of a text known up to n can no longer change once the first
    non-whitespace character at or after e is at an index q with q + settle_margin <= n (GPT-2:
    once e + 2 <= n, the rule the compiled encoder applies); None for a custom pattern, whose
    pre-tokens more text can always change.
    settle_run: characters a pre-token ending at e may still take in if more of them follow (o200k:
    a run of capitals is one pre-token with the lower-case letter after it, `[A-Z]*[a-z]+`, so a
    match ending inside a run of letters and marks waits for the run's end); q is then the first
    non-whitespace character after that run.
    """

    name: str  # "gpt2", "cl100k", "o200k" or "custom"
    regex: str
    prose_cuts: str | None = None
    settle_margin: int | None = None
    settle_run: str | None = None
    # Every pattern matches by Unicode 16.0's classes, as tiktoken does: the presets' regexes
    # (char_classes.py), and a custom one translated (custom_regex.py; a ConfigError names what
    # cannot be made to match as tiktoken does).
    compiled: PinnedRegex | CustomRegex = field(init=False, repr=False, compare=False)
    settle_run_compiled: PinnedRegex | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pinned = self.regex in _PRESET_REGEXES
        object.__setattr__(self, "compiled", PinnedRegex(self.regex) if pinned else _custom(self.regex))
        object.__setattr__(self, "settle_run_compiled", PinnedRegex(self.settle_run) if self.settle_run else None)

    def __reduce__(self):
        # To worker processes: a preset as its name, so it arrives as the same object (tests of
        # `pattern is GPT2` hold there too); any other pattern by its fields, compiled again there.
        if PRESETS.get(self.name) == self:
            return (_preset, (self.name,))
        return (SplitPattern, (self.name, self.regex, self.prose_cuts, self.settle_margin, self.settle_run))


def _preset(name: str) -> SplitPattern:
    return PRESETS[name]


@lru_cache(maxsize=32)
def _compile(pattern: str) -> regex.Pattern:
    return regex.compile(pattern)


@lru_cache(maxsize=32)
def _custom(pattern: str) -> CustomRegex:
    return CustomRegex(pattern)


# The prose cuts (each side ASCII, so a cut never lands inside a UTF-8 character):
#  * ASCII letter | ASCII punctuation: in all three presets no pre-token holds a letter followed by
#    punctuation (letter runs end at the first non-letter; punctuation starts its own pre-token,
#    alone or as the one-character prefix of a letter run), except o200k's contraction suffix
#    ('s, 't, 're, ...), so o200k leaves out the apostrophe. A letter run stops at the punctuation
#    whether or not the text goes on, and no pattern looks behind, so both halves scan as the whole.
#  * printable | "\n" | printable: the lone newline is a pre-token of its own, or the end of the
#    punctuation run before it (cl100k, o200k: `[\r\n]*` after punctuation), both when text
#    follows and when the chunk ends there; what follows starts a new pre-token, except o200k's
#    `/` (its punctuation runs end in `[\r\n/]*`), which o200k leaves out.
_LETTER_PUNCT = r"(?<=[A-Za-z])(?=[!-/:-@\[-`{-~])"
_LINE = r"(?<=[!-~]\n)(?=[!-~])"
PRESETS: dict[str, SplitPattern] = {
    "gpt2": SplitPattern("gpt2", GPT2_PATTERN, f"{_LETTER_PUNCT}|{_LINE}", 2),
    "cl100k": SplitPattern("cl100k", CL100K_PATTERN, f"{_LETTER_PUNCT}|{_LINE}", 2),
    "o200k": SplitPattern(
        "o200k",
        O200K_PATTERN,
        r"(?<=[A-Za-z])(?=[!-&(-/:-@\[-`{-~])|(?<=[!-~]\n)(?=[!-.0-~])",
        4,
        r"[\p{L}\p{M}]*",
    ),
}
GPT2 = PRESETS["gpt2"]
GPT2_REGEX = GPT2.compiled


def resolve_pattern(pattern: str | SplitPattern | None) -> SplitPattern:
    """A preset's name ("gpt2", "cl100k", "o200k"), a preset's regex, any regex, or None (gpt2)."""
    if pattern is None:
        return GPT2
    if isinstance(pattern, SplitPattern):
        return pattern
    if not isinstance(pattern, str) or not pattern:
        raise ConfigError(f"pattern must be a preset name ({', '.join(PRESETS)}) or a regex, got {pattern!r}")
    if pattern in PRESETS:
        return PRESETS[pattern]
    if pattern == GPT2_CLASSIC_PATTERN:
        return GPT2
    for preset in PRESETS.values():
        if pattern == preset.regex:
            return preset
    try:
        _compile(pattern)
    except regex.error as exc:
        raise ConfigError(f"pattern {pattern!r} is not a valid regex: {exc}") from None
    split = SplitPattern("custom", pattern)
    # The plain translation: exact on the probe, which holds no code point `regex` classes unlike
    # Unicode 16.0, and it needs no scan of them.
    custom = split.compiled
    assert isinstance(custom, CustomRegex)  # (a pattern that is not a preset's)
    compiled = custom.plain
    empty = compiled.search("") or next((m for m in compiled.finditer(_EMPTY_PROBE) if m.start() == m.end()), None)
    if empty is not None:
        raise empty_match(pattern, empty.string, empty.start())
    return split


# Text that puts a custom pattern's zero-width assertions (\b, \B, ^, $, lookarounds) where they
# can hold: letters, digits, an apostrophe, spaces, tabs, newlines, punctuation, non-ASCII.
_EMPTY_PROBE = "Ab c1 ,d's\n\n e  É\t-x ñ 中文 ! 42"


def empty_match(pattern: str, text: str, position: int) -> ConfigError:
    """The error for a pattern that matched the empty string: a pre-token cannot be empty.

    A pattern is checked twice: by resolve_pattern on "" and on _EMPTY_PROBE, to fail before a long
    count, and by iter_pretokens on every match of real text, which alone is complete: whether a
    regex can match empty *somewhere* (`\\b|\\w+|\\W` does only between a word and a non-word
    character) is not decidable from a few probes."""
    return ConfigError(
        f"split pattern {pattern!r} matches the empty string at {text[position : position + 12]!r}; "
        "every alternative must match at least one character"
    )


def validate_special_tokens(special_tokens: Iterable[str] | None) -> tuple[str, ...]:
    """Return the special tokens as a tuple, rejecting empty, duplicate or non-string ones, and
    those UTF-8 cannot encode (a lone surrogate)."""
    if special_tokens is None:
        return ()
    if isinstance(special_tokens, (str, bytes)):
        raise ConfigError(f"special_tokens must be a list of strings, not a single {type(special_tokens).__name__}")
    tokens = tuple(special_tokens)
    seen: set[str] = set()
    for index, token in enumerate(tokens):
        if not isinstance(token, str):
            raise ConfigError(f"special token #{index} is {type(token).__name__} {token!r}, not str")
        if not token:
            raise ConfigError(f"special token #{index} is empty")
        try:
            token.encode("utf-8")
        except UnicodeEncodeError as exc:
            # A token is matched and stored as UTF-8. Python's argv holds a byte that is not UTF-8
            # as a lone surrogate (surrogateescape: $'\xff' arrives as '\udcff').
            raise ConfigError(
                f"special token #{index} {token!r} is not valid Unicode text (lone surrogate "
                f"U+{ord(token[exc.start]):04X} at position {exc.start}): a special token must be text UTF-8 "
                "can encode; a command-line argument arrives so when its bytes are not UTF-8"
            ) from None
        if token in seen:
            raise ConfigError(f"special token {token!r} is given twice")
        seen.add(token)
    return tokens


@lru_cache(maxsize=64)
def special_token_regex(special_tokens: tuple[str, ...]) -> regex.Pattern | None:
    """A regex matching any special token, longest alternative first (None when there are none).

    Longest first makes `<|endoftext|><|endoftext|>` one match when both it and `<|endoftext|>`
    are special, instead of two matches of the shorter one.
    """
    if not special_tokens:
        return None
    ordered = sorted(special_tokens, key=len, reverse=True)
    return regex.compile("|".join(regex.escape(token) for token in ordered))


def split_on_special_tokens(text: str, special_tokens: tuple[str, ...]) -> list[str]:
    """The pieces of `text` between special tokens (the special tokens themselves dropped)."""
    pattern = special_token_regex(special_tokens)
    return [text] if pattern is None else pattern.split(text)


def iter_pretokens(text: str, pattern: SplitPattern = GPT2) -> Iterator[str]:
    """Pre-tokens of a text that contains no special token, lazily (finditer, not findall)."""
    if pattern.name != "custom":  # the presets match every character
        for match in pattern.compiled.finditer(text):
            yield match.group()
        return
    end = 0
    for match in pattern.compiled.finditer(text):
        if match.start() != end:
            raise uncovered(pattern, text, end)
        if match.end() == end:
            raise empty_match(pattern.regex, text, end)
        end = match.end()
        yield match.group()
    if end != len(text):
        raise uncovered(pattern, text, end)


def uncovered(pattern: SplitPattern, text: str, position: int) -> ConfigError:
    """The error for text a custom pattern does not match: byte-level BPE must lose no character,
    and a regex split keeps only what it matches (tiktoken drops the rest without a word)."""
    return ConfigError(
        f"split pattern {pattern.regex!r} matches nothing at {text[position : position + 12]!r}: a split "
        "pattern must match every character (end it with an alternative such as |\\s+|\\S)"
    )
