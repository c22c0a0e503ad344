"""HuggingFace `tokenizers`' file format: one tokenizer.json, written and read without the library.

What is written (the shape `tokenizers.Tokenizer.to_str()` gives a BPE model, version 0.2x):
- model: BPE with the vocab (token string -> id, tokens in GPT-2's printable byte form, see
  gpt2.token_to_str) and the merges as pairs of token strings, in rank order; no unk token, no
  dropout, no byte fallback, no prefix/suffix, ignore_merges false (BPE by the merges only);
- pre_tokenizer: Sequence[Split(the pattern, Isolated), ByteLevel(use_regex=false)]: the split
  pattern cuts pre-tokens, ByteLevel only maps their bytes to the printable form;
- decoder: ByteLevel; normalizer: none; post_processor: none (nothing is added to the ids);
- added_tokens: the special tokens (special, not normalized, no strip), each with its id, in the
  order given. Each is also in the model vocab under its own text with that id: HF gives an added
  token the model's id for its text, and a new id (after the model vocab) only if it has none.

HF's regex engine is Oniguruma (Ruby syntax), which reads some constructs otherwise than the `regex`
module: `\\w`, `\\b`, `\\h`, `^`, `$`, `X{1,3}+` (a repeated interval there, not a possessive one),
case folding in `(?i:...)`. The presets are written in forms proven to split alike (cl100k's
`\\p{N}{1,3}+` as `(?>\\p{N}{1,3})`) and read back as the presets; a custom pattern is written and
read only if `dialect_problem` finds every construct in it on its allowlist, else one error names the
construct. A pattern must also match every character (as the presets do): text it skips is dropped
by bpe_impls and tiktoken but kept as a piece by HF's Split.

Loading accepts what this module writes, and GPT-2's own tokenizer.json shape (a lone ByteLevel
pre-tokenizer with its GPT-2 regex: the gpt2 preset); anything it cannot reproduce exactly (another
model, a normalizer, other pre-tokenizers, byte fallback, truncation or padding, added tokens that
are not special or strip, special tokens whose `normalized` flags would make HF match them in
another order, ...) is one TokenizerFileError naming the file and the field. A merge listed twice
keeps its last rank, as in HF.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import regex

from ...base import compiled
from ...base.errors import ConfigError, TokenizerFileError
from ...base.patterns import CL100K_PATTERN, GPT2, PRESETS, SplitPattern, resolve_pattern
from ..tables import PackedTokenizer, RankTables
from .common import TokenizerData, output_file, parse_json, read_json, write_files
from .gpt2 import str_to_token, strs_to_tokens, token_to_str

TOKENIZER_FILE = "tokenizer.json"

# Presets whose regex means something else to Oniguruma, written in a form that means the same to both.
_ONIGURUMA_FORMS = {"cl100k": CL100K_PATTERN.replace(r"\p{N}{1,3}+", r"(?>\p{N}{1,3})")}
assert all(form != PRESETS[name].regex for name, form in _ONIGURUMA_FORMS.items())

_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
_DECODER = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
_MODEL_OPTIONS = {
    "dropout": None,
    "unk_token": None,
    "continuing_subword_prefix": None,
    "end_of_word_suffix": None,
    "fuse_unk": False,
    "byte_fallback": False,
    "ignore_merges": False,
}
_ADDED_TOKEN_FLAGS = ("single_word", "lstrip", "rstrip", "normalized", "special")


def hf_regex(pattern: SplitPattern, where: str = "cannot save tokenizer.json") -> str:
    """The pattern as HF's Split gets it: a preset in a form Oniguruma reads as the `regex` module
    reads the preset (proven by tests); a custom pattern only if `dialect_problem` finds nothing."""
    if pattern.name in _ONIGURUMA_FORMS:
        return _ONIGURUMA_FORMS[pattern.name]
    if PRESETS.get(pattern.name) == pattern:
        return pattern.regex
    problem = dialect_problem(pattern.regex)
    if problem:
        raise TokenizerFileError(f"{where}: the pattern has {problem}")
    return pattern.regex


# --- the regex dialect --------------------------------------------------------------------------

# General categories: both engines read \p{X} by the Unicode tables they were built with.
_GENERAL_CATEGORIES = frozenset(
    "L Lu Ll Lt Lm Lo M Mn Mc Me N Nd Nl No P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So Z Zs Zl Zp C Cc Cf Co Cn".split()
)
# Two letters that one character folds to in full case folding (ß -> ss, ﬁ -> fi, ﬅ -> st, ...): Oniguruma
# matches such a pair inside (?i:...) against that one character, the regex module does not.
_MULTI_CHAR_FOLDS = frozenset({"ff", "fi", "fl", "ss", "st"})
_WHY = {
    "w": "takes other characters in Oniguruma (e.g. '²') than in the regex module",
    "b": "is a word boundary, and a word is not the same to Oniguruma as to the regex module",
    "h": "is a hex digit to Oniguruma but horizontal space to the regex module",
    "Z": "is 'end, or before a final newline' to Oniguruma but the very end to the regex module",
}
_INTERVAL = regex.compile(r"\{(\d*)(,?)(\d*)\}")
_HEX_ESCAPES = {"x": 2, "u": 4}
_MAX_REPEAT = 100_000  # Oniguruma's ONIG_MAX_REPEAT_NUM


def _escape(text: str, i: int, in_class: bool, ignore_case: bool) -> tuple[int, str | None, str | None]:
    """Read the escape at text[i] == '\\': (index after it, the literal character it stands for or
    None for a class such as \\s, the problem or None)."""
    char = text[i + 1] if i + 1 < len(text) else ""
    if char in "pP":
        found = regex.match(r"\{(\^?)(\w+)\}", text[i + 2 :])
        shown = text[i : i + 2 + (found.end() if found else 0)]
        if not found or found.group(2) not in _GENERAL_CATEGORIES or (char == "P" and found.group(1)):
            return (
                i + 2,
                None,
                (f"{shown!r}: only general categories (\\p{{L}}, \\p{{Nd}}, ...) are read alike by both engines"),
            )
        if ignore_case:
            return i + 2, None, f"{shown!r} inside (?i:...): the engines case-fold a property differently"
        return i + 2 + found.end(), None, None
    if char in "sSdD":
        return i + 2, None, None
    if char in "tnrfv":
        return i + 2, "\t\n\r\f\v"["tnrfv".index(char)], None
    if char in _HEX_ESCAPES:
        digits = text[i + 2 : i + 2 + _HEX_ESCAPES[char]]
        if len(digits) == _HEX_ESCAPES[char] and all(d in "0123456789abcdefABCDEF" for d in digits):
            return i + 2 + len(digits), chr(int(digits, 16)), None
        return i + 2, None, f"{text[i : i + 2]!r} without exactly {_HEX_ESCAPES[char]} hex digits"
    if char in "Az" and not in_class:  # the text's start and very end, in both
        return i + 2, None, None
    if char.isascii() and not char.isalnum() and char:
        return i + 2, char, None  # an escaped punctuation mark or space: that character in both
    why = _WHY.get(char.lower(), "is not an escape both engines are known to read alike")
    return i + 2, None, f"{text[i : i + 2]!r} {why}"


def _folding_problem(char: str, run: str) -> str | None:
    """Why `char`, a literal inside (?i:...) following the literal letters `run`, is read differently."""
    if not char.isascii():
        return f"{char!r} inside (?i:...): the engines case-fold non-ASCII characters differently"
    if char in "iI":
        return f"{char!r} inside (?i:...): Oniguruma does not fold 'İ' with it, the regex module does"
    if (run[-1:] + char).lower() in _MULTI_CHAR_FOLDS:
        return (
            f"{run[-1] + char!r} inside (?i:...): Oniguruma matches it to one character (e.g. 'ß', 'ﬁ'), "
            "the regex module does not"
        )
    return None


def _class(text: str, i: int, ignore_case: bool) -> tuple[int, str | None]:
    """Read the character class at text[i] == '[': (index after it, the problem or None)."""
    i += 1
    if text.startswith("^", i):
        i += 1
    if text.startswith("]", i):
        return i, "']' first in a character class: escape it as \\]"
    while i < len(text) and text[i] != "]":
        if text[i] == "[":
            return i, "'[' inside a character class (a nested class or [:posix:] to Oniguruma): escape it as \\["
        if text.startswith("&&", i):
            return i, "'&&' inside a character class (an intersection to Oniguruma): escape it"
        if text[i] == "\\":
            i, char, problem = _escape(text, i, True, ignore_case)
        else:
            i, char, problem = i + 1, text[i], None
        if problem:
            return i, problem
        if ignore_case and char is not None:
            if text.startswith("-", i) and not text.startswith("-]", i):
                return i, "a range inside (?i:...): the engines case-fold ranges differently"
            problem = _folding_problem(char, "")
            if problem:
                return i, problem
    return i + 1, None


def dialect_problem(text: str) -> str | None:
    """Why HF's regex engine (Oniguruma, Ruby syntax) may split with `text` otherwise than the `regex`
    module does, or None where every construct in it is one both read alike.

    An allowlist: literals, escaped punctuation, \\t \\n \\r \\f \\v \\xHH \\uHHHH, \\s \\S \\d \\D,
    \\p{general category} and \\P{...}, \\A \\z, classes of those with ranges, `.`, groups ( (?: (?= (?!
    (?>, (?i:...) holding ASCII literals only (no i, no pair one character folds to),
    and the quantifiers * + ? {n} {n,} {n,m}, lazy or possessive (not {n}? nor a possessive interval).
    """
    scopes: list[bool] = []  # per open group: is it case-insensitive
    lookahead: list[bool] = []  # per open group: is it a look-ahead
    consumes: list[bool] = []  # per open group: does it hold an atom that matches a character
    run = ""  # the literals just before, inside (?i:...): a pair of them may fold to one character
    quantifiable = False
    i = 0
    while i < len(text):
        char, ignore_case = text[i], any(scopes)
        literal: str | None = None
        if char == "\\":
            i, literal, problem = _escape(text, i, False, ignore_case)
            if problem:
                return problem
            quantifiable = text[i - 2 : i] not in ("\\A", "\\z")  # an anchor repeats nothing
            if literal is None:
                run = ""
        elif char == "[":
            i, problem = _class(text, i, ignore_case)
            if problem:
                return problem
            run, quantifiable = "", True
        elif char == "(":
            opened = regex.match(r"\((?:\?(?::|=|!|>|i:))?", text[i:])
            assert opened is not None  # (text[i] is "(")
            opener = opened.group()
            if text.startswith(("(?<=", "(?<!"), i):
                return (
                    f"look-behind {text[i : i + 4]!r}: Oniguruma takes only some fixed-length ones, "
                    "the regex module any"
                )
            if text.startswith("(?", i) and opener == "(":
                flag = regex.match(r"\(\?[^:)]?[:)]?", text[i:])
                assert flag is not None  # (text[i:] starts with "(?")
                shown = flag.group()
                return f"group or flag {shown!r}: only (?: (?= (?! (?> and (?i: are read alike by both engines"
            scopes.append(ignore_case or opener == "(?i:")
            lookahead.append(opener in ("(?=", "(?!"))
            consumes.append(False)
            i += len(opener)
            quantifiable = False
        elif char == ")":
            i, quantifiable = i + 1, False
            if scopes:  # else the regex module has refused the pattern already
                scopes.pop()
                look, consumed = lookahead.pop(), consumes.pop()
                # Oniguruma repeats no look-ahead, and no group that holds only anchors.
                quantifiable = consumed and not look
        elif char == "|":
            i, run, quantifiable = i + 1, "", False
        elif char in "*+?{":
            interval = _INTERVAL.match(text, i) if char == "{" else None
            if char == "{" and not interval:
                return "a '{' that starts no interval: escape it as \\{"
            if not quantifiable:
                return f"a quantifier {char!r} with nothing to repeat (Oniguruma repeats no look-ahead or anchor)"
            i = interval.end() if interval else i + 1
            modifier = text[i] if i < len(text) and text[i] in "?+" else ""
            i += len(modifier)
            if interval:
                shown = interval.group() + modifier
                if any(int(bound) > _MAX_REPEAT for bound in (interval.group(1), interval.group(3)) if bound):
                    return f"interval {shown!r}: Oniguruma repeats at most {_MAX_REPEAT} times"
                if not interval.group(1) and interval.group(2):
                    return f"interval {shown!r} without a lower bound: write {{0,...}}"
                if modifier == "+":
                    return (
                        f"possessive interval {shown!r}: a repeated interval to HF's regex engine (Oniguruma); "
                        "write it as an atomic group, e.g. (?>\\p{N}{1,3})"
                    )
                if modifier == "?" and not interval.group(2):
                    return f"{shown!r}: optional to Oniguruma, lazy to the regex module"
            if i < len(text) and text[i] in "*+?{":
                return f"a quantifier {text[i]!r} right after another: put the first in a group"
            quantifiable = False
        elif char in "^$":
            return (
                f"anchor {char!r}: it matches at every line to Oniguruma, at the text's end (or start) "
                "to the regex module"
            )
        elif char in "]}":
            return f"an unescaped {char!r}: escape it as \\{char}"
        elif char == ".":
            i, run, quantifiable = i + 1, "", True
        else:
            i, literal, quantifiable = i + 1, char, True
        if quantifiable and consumes:  # an atom that matches a character
            consumes[-1] = True
        if literal is not None and ignore_case:
            problem = _folding_problem(literal, run)
            if problem:
                return problem
            run += literal
    return None


# --- writing ----------------------------------------------------------------------------------


def _document(data: TokenizerData) -> dict:
    where = "cannot save tokenizer.json"
    special_ids = {token_id: special for special, token_id in data.special_token_ids.items()}
    vocab: dict[str, int] = {}
    for token_id in sorted(data.vocab):
        # A special token is in the model vocab under its own text (HF then gives it this id), the
        # others under their printable byte form; two ids with one key cannot both be kept.
        key = special_ids[token_id] if token_id in special_ids else token_to_str(data.vocab[token_id])
        if key in vocab:
            raise TokenizerFileError(
                f"{where}: token {key!r} would have two ids in the model vocab ({vocab[key]} and {token_id})"
            )
        vocab[key] = token_id
    added = [
        {
            "id": data.special_token_ids[special],
            "content": special,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for special in data.special_tokens
    ]
    split = {"type": "Split", "pattern": {"Regex": hf_regex(data.pattern)}, "behavior": "Isolated", "invert": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, dict(_BYTE_LEVEL)]},
        "post_processor": None,
        "decoder": dict(_DECODER),
        "model": {
            "type": "BPE",
            **_MODEL_OPTIONS,
            "vocab": vocab,
            "merges": [[token_to_str(left), token_to_str(right)] for left, right in data.merges],
        },
    }


def save(path: str | os.PathLike, data: TokenizerData) -> tuple[Path, ...]:
    """Write tokenizer.json at `path` (a file ending in .json, or a directory to hold tokenizer.json)."""
    text = json.dumps(_document(data), ensure_ascii=False, indent=2) + "\n"
    return write_files([(output_file(path, ".json", TOKENIZER_FILE), text)])


# --- reading ----------------------------------------------------------------------------------


def _require(condition: bool, path: Path, message: str) -> None:
    if not condition:
        raise _fault(path, message)


def _fault(path: Path, message: str) -> TokenizerFileError:
    """`_require`'s error, raised where the check also narrows a type (`if not isinstance(...)`)."""
    return TokenizerFileError(f"{path}: {message}")


def _pattern(pre_tokenizer: object, path: Path) -> SplitPattern:
    """The split pattern of a Sequence[Split(Regex, Isolated), ByteLevel(use_regex=false)], or of
    GPT-2's lone ByteLevel(use_regex=true)."""
    if not isinstance(pre_tokenizer, dict):
        raise _fault(path, f"pre_tokenizer is {pre_tokenizer!r}; expected Split + ByteLevel")
    kind = pre_tokenizer.get("type")
    if kind == "ByteLevel" and pre_tokenizer.get("use_regex", True):
        # GPT-2's own tokenizer.json: ByteLevel splits with GPT-2's regex, the gpt2 preset.
        _require(
            not pre_tokenizer.get("add_prefix_space", False),
            path,
            "pre_tokenizer ByteLevel has add_prefix_space true, which bpe_impls does not do",
        )
        return GPT2
    parts = pre_tokenizer.get("pretokenizers") if kind == "Sequence" else None
    if not (isinstance(parts, list) and len(parts) == 2 and all(isinstance(part, dict) for part in parts)):
        raise _fault(
            path, f"pre_tokenizer {kind!r} is not supported; expected Sequence[Split, ByteLevel(use_regex=false)]"
        )
    split, byte_level = parts
    _require(split.get("type") == "Split", path, f"pre_tokenizer part 1 is {split.get('type')!r}, expected Split")
    _require(
        split.get("behavior") == "Isolated" and split.get("invert") is False,
        path,
        f"pre_tokenizer Split has behavior {split.get('behavior')!r}, invert {split.get('invert')!r}; "
        "expected Isolated, false",
    )
    regex_text = split.get("pattern", {}).get("Regex") if isinstance(split.get("pattern"), dict) else None
    if not isinstance(regex_text, str):
        raise _fault(path, f"pre_tokenizer Split pattern {split.get('pattern')!r} is not a Regex")
    _require(
        byte_level.get("type") == "ByteLevel"
        and byte_level.get("use_regex") is False
        and not byte_level.get("add_prefix_space", False),
        path,
        f"pre_tokenizer part 2 is {byte_level!r}; expected ByteLevel with use_regex and add_prefix_space false",
    )
    for name, form in _ONIGURUMA_FORMS.items():
        if regex_text == form:
            return PRESETS[name]
    # A preset's name is a preset to resolve_pattern, but only that literal text to HF.
    _require(
        regex_text not in PRESETS,
        path,
        f"pre_tokenizer Split regex {regex_text!r} matches only that word in HF, but names a preset to bpe_impls",
    )
    try:
        pattern = resolve_pattern(regex_text)
    except ConfigError as exc:
        raise TokenizerFileError(f"{path}: pre_tokenizer Split {exc}") from None
    if PRESETS.get(pattern.name) != pattern:
        problem = dialect_problem(regex_text)
        _require(problem is None, path, f"pre_tokenizer Split regex has {problem}")
    return pattern


def _check_model(model: object, path: Path) -> tuple[dict, list]:
    if not isinstance(model, dict):
        raise _fault(path, "model is not an object")
    _require(model.get("type") == "BPE", path, f"model type is {model.get('type')!r}; only BPE can be loaded")
    for key, expected in _MODEL_OPTIONS.items():
        value = model.get(key, expected)
        if key in ("continuing_subword_prefix", "end_of_word_suffix") and value == "":
            value = None
        if key == "fuse_unk":  # without an unk token there is nothing to fuse
            continue
        _require(
            value == expected and type(value) is type(expected),
            path,
            f"model {key} is {value!r}; bpe_impls can load only {json.dumps(expected)}",
        )
    vocab, merges = model.get("vocab"), model.get("merges")
    if not isinstance(vocab, dict):
        raise _fault(path, "model vocab is not an object of token -> id")
    if not isinstance(merges, list):
        raise _fault(path, "model merges is not a list")
    return vocab, merges


def _merge(entry: object, index: int, path: Path) -> tuple[bytes, bytes]:
    if isinstance(entry, str):  # the older form: "left right"
        parts = entry.split(" ")
    else:
        parts = entry if isinstance(entry, list) else []
    _require(
        len(parts) == 2 and all(isinstance(part, str) and part for part in parts),
        path,
        f"merge #{index} is {entry!r}, not a pair of tokens",
    )
    where = f"{path} merge #{index}"
    return str_to_token(parts[0], where), str_to_token(parts[1], where)


def _sound_vocab(raw_vocab: dict, special_token_ids: dict[str, int]) -> dict[int, bytes] | None:
    """`load`'s model vocab as id -> bytes, in one translate, when its loop would find no fault:
    every id a distinct non-negative int, every key other than a special token's (under that
    token's id) a non-empty string of the byte table; else None (the loop then names the fault)."""
    ids = list(raw_vocab.values())
    if not all(type(token_id) is int for token_id in ids) or min(ids, default=0) < 0 or len(set(ids)) != len(ids):
        return None
    specials = {key: token_id for key, token_id in special_token_ids.items() if raw_vocab.get(key) == token_id}
    keys = [key for key in raw_vocab if key not in specials]
    tokens = strs_to_tokens(keys) if all(keys) else None
    if tokens is None:
        return None
    vocab = dict(zip(map(raw_vocab.__getitem__, keys), tokens))
    vocab.update((token_id, key.encode("utf-8")) for key, token_id in specials.items())
    return vocab


def _sound_merges(entries: list) -> list[tuple[bytes, bytes]] | None:
    """`_merge` of every entry when each is a pair of non-empty strings (a list, or "left right")
    with characters in the table, in one translate; else None (`_merge` then names the fault)."""
    # (JSON values: each a list, or None for an entry of neither form, until the check below)
    parts: list[Any] = [
        entry if type(entry) is list else entry.split(" ") if type(entry) is str else None for entry in entries
    ]
    if not all(
        type(pair) is list and len(pair) == 2 and type(pair[0]) is str and type(pair[1]) is str and pair[0] and pair[1]
        for pair in parts
    ):
        return None
    tokens = strs_to_tokens([part for pair in parts for part in pair])
    return None if tokens is None else list(zip(tokens[0::2], tokens[1::2]))


def _overlap(first: str, second: str) -> bool:
    """Whether an occurrence of `first` and one of `second` can share a character in some text."""
    if first in second or second in first:
        return True
    return any(first.endswith(second[:k]) or second.endswith(first[:k]) for k in range(1, min(len(first), len(second))))


def _added_tokens(added: object, model_id: Callable[[str], int | None], vocab_size: int, path: Path) -> dict[str, int]:
    """The special tokens of `added_tokens`, content -> id, where bpe_impls matches them as HF does.
    `model_id(content)` is the id of the model vocab's key `content` (None: no such key), and
    `vocab_size` the number of keys."""
    if not isinstance(added, list):
        raise _fault(path, "added_tokens is not a list")
    special_token_ids: dict[str, int] = {}
    normalized: dict[str, bool] = {}
    next_new_id = vocab_size  # where HF puts an added token the model vocab does not have
    for entry in added:
        if not (isinstance(entry, dict) and isinstance(entry.get("content"), str) and entry.get("content")):
            raise _fault(path, f"added token {entry!r} has no content")
        content, token_id = entry["content"], entry.get("id")
        try:
            content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise TokenizerFileError(
                f"{path}: added token {content!r} content has a lone surrogate at position {exc.start}"
            ) from None
        for flag in _ADDED_TOKEN_FLAGS:  # HF refuses an entry without one
            _require(
                isinstance(entry.get(flag), bool),
                path,
                f"added token {content!r} has {flag} {json.dumps(entry.get(flag))}, not true or false",
            )
        _require(
            entry["special"], path, f"added token {content!r} is not special; only special added tokens can be loaded"
        )
        for flag in ("single_word", "lstrip", "rstrip"):
            _require(not entry[flag], path, f"added token {content!r} has {flag} true; bpe_impls has no such option")
        if not (isinstance(token_id, int) and not isinstance(token_id, bool) and token_id >= 0):
            raise _fault(path, f"added token {content!r} has id {token_id!r}, not a non-negative integer")
        _require(content not in special_token_ids, path, f"added token {content!r} is listed twice")
        key_id = model_id(content)
        if key_id is None:
            _require(
                token_id == next_new_id,
                path,
                f"added token {content!r} has id {token_id}, but HF gives it {next_new_id} "
                "(it is not in the model vocab)",
            )
            next_new_id += 1
        else:
            _require(
                key_id == token_id,
                path,
                f"added token {content!r} has id {token_id}, but the model vocab gives it {key_id}",
            )
        special_token_ids[content] = token_id
        normalized[content] = entry["normalized"]
    # HF matches the tokens marked normalized: false first, then (in the text between them) those
    # marked true; bpe_impls matches all at once, longest first. With no normalizer that is the
    # same split unless a token of one kind can overlap one of the other in some text.
    for plain in (token for token, flag in normalized.items() if not flag):
        for other in (token for token, flag in normalized.items() if flag):
            _require(
                not _overlap(plain, other),
                path,
                f"added token {plain!r} has normalized false and {other!r} normalized true: HF matches "
                f"{plain!r} first where they overlap, bpe_impls the longest; give both the same flag",
            )
    return special_token_ids


def tokenizer_file(path: str | os.PathLike) -> Path:
    """The tokenizer.json that `path` names: the file, or the one in the directory `path`."""
    path = Path(path)
    return path / TOKENIZER_FILE if path.is_dir() else path


# The top-level keys of a tokenizer.json HF reads (any other one is an error there).
_TOP_LEVEL_KEYS = frozenset(
    {
        "version",
        "truncation",
        "padding",
        "added_tokens",
        "normalizer",
        "pre_tokenizer",
        "post_processor",
        "decoder",
        "model",
    }
)


def _checked(document: object, path: Path) -> tuple[SplitPattern, dict, list]:
    """(split pattern, model vocab, model merges) of a tokenizer.json's document, every field
    around them checked (the vocab and merges themselves are not)."""
    if not isinstance(document, dict):
        raise TokenizerFileError(f"{path}: not a JSON object")
    # HF's own reader refuses a key it does not know and any version but "1.0" (a string).
    unknown = sorted(set(document) - _TOP_LEVEL_KEYS)
    if unknown:
        raise TokenizerFileError(f"{path}: unknown key {unknown[0]!r} at the top level; HF tokenizers refuses the file")
    version = document.get("version", "1.0")
    _require(
        version == "1.0",
        path,
        f'version is {json.dumps(version)[:40]}; HF tokenizers reads only version "1.0" and refuses the file',
    )
    # HF applies these to each encoding (cut to max_length, pad to a length); bpe_impls returns every
    # id of the whole text, so a file that asks for either is refused rather than ignored.
    for field in ("truncation", "padding"):
        _require(
            document.get(field) is None,
            path,
            f"{field} is {json.dumps(document.get(field))[:60]}; bpe_impls encodes whole texts and can load only null",
        )
    _require(
        document.get("normalizer") is None,
        path,
        f"normalizer {json.dumps(document.get('normalizer'))[:60]} is set; bpe_impls has none",
    )
    post = document.get("post_processor")
    _require(
        post is None or (isinstance(post, dict) and post.get("type") == "ByteLevel"),
        path,
        f"post_processor {(post or {}).get('type')!r} may add tokens; only none or ByteLevel can be loaded",
    )
    decoder = document.get("decoder")
    _require(
        isinstance(decoder, dict) and decoder.get("type") == "ByteLevel",
        path,
        f"decoder is {json.dumps(decoder)[:60]}; only ByteLevel can be loaded",
    )
    pattern = _pattern(document.get("pre_tokenizer"), path)
    raw_vocab, raw_merges = _check_model(document.get("model"), path)
    return pattern, raw_vocab, raw_merges


def load(path: str | os.PathLike) -> TokenizerData:
    """Read a tokenizer.json (the file, or a directory holding one) that bpe_impls can reproduce exactly."""
    path = tokenizer_file(path)
    document = read_json(path)
    pattern, raw_vocab, raw_merges = _checked(document, path)
    assert isinstance(document, dict)  # (_checked refuses anything else)
    special_token_ids = _added_tokens(document.get("added_tokens", []), raw_vocab.get, len(raw_vocab), path)
    specials_by_id = {token_id: content for content, token_id in special_token_ids.items()}
    sound = _sound_vocab(raw_vocab, special_token_ids)
    vocab: dict[int, bytes] = sound if sound is not None else {}
    for key, token_id in raw_vocab.items() if sound is None else ():
        _require(
            isinstance(token_id, int) and not isinstance(token_id, bool) and token_id >= 0,
            path,
            f"model vocab token {key!r} has id {token_id!r}, not a non-negative integer",
        )
        _require(token_id not in vocab, path, f"model vocab gives id {token_id} to two tokens")
        if specials_by_id.get(token_id) == key:
            vocab[token_id] = key.encode("utf-8")
        else:
            _require(bool(key), path, f"model vocab has an empty token (id {token_id})")
            vocab[token_id] = str_to_token(key, f"{path} (model vocab id {token_id})")
    for content, token_id in special_token_ids.items():
        if token_id not in vocab:
            vocab[token_id] = content.encode("utf-8")
    merges = _sound_merges(raw_merges)
    if merges is None:
        merges = [_merge(entry, index, path) for index, entry in enumerate(raw_merges)]
    return TokenizerData(dict(sorted(vocab.items())), merges, tuple(special_token_ids), pattern, special_token_ids)


def load_packed(path: str | os.PathLike) -> PackedTokenizer | None:
    """`load`, then what the Tokenizer makes of it (build_tables), with the model vocab and merges
    read by the compiled core (csrc/vocab_files.c): the same checks, the same tables, no Python
    object per token. The rest of the document (the fields around the vocab and merges, a few
    hundred bytes) is parsed by `json` and checked by the code `load` runs. None where the core
    is not built, the file cannot be read, or the core leaves it to `load` (a fault, which `load`
    then names, or a case it handles, such as two ids with the same bytes)."""
    path = tokenizer_file(path)
    if not compiled.AVAILABLE:
        return None
    core = compiled.core()
    try:
        data = path.read_bytes()
    except OSError:
        return None
    spans = core.hf_model_spans(data)
    if spans is None:
        return None
    (vocab_start, vocab_end), (merges_start, merges_end) = spans[:2], spans[2:]
    cuts = sorted([(vocab_start, vocab_end, b"{}"), (merges_start, merges_end, b"[]")])
    rest = data[: cuts[0][0]] + cuts[0][2] + data[cuts[0][1] : cuts[1][0]] + cuts[1][2] + data[cuts[1][1] :]
    try:
        document = parse_json(rest.decode("utf-8"), path)
    except (UnicodeDecodeError, TokenizerFileError):
        return None
    added = document.get("added_tokens", []) if isinstance(document, dict) else None
    if not isinstance(added, list) or not all(
        isinstance(entry, dict) and isinstance(entry.get("content"), str) and type(entry.get("id")) is int
        for entry in added
    ):
        return None
    contents = [entry["content"] for entry in added]
    try:
        specials = [content.encode("utf-8") for content in contents]
    except UnicodeEncodeError:
        return None
    if len(set(contents)) != len(contents) or min((entry["id"] for entry in added), default=0) < 0:
        return None
    found = core.hf_tables(
        data[vocab_start:vocab_end], data[merges_start:merges_end], specials, [entry["id"] for entry in added]
    )
    if found is None:
        return None
    # The core read the vocab and merges as `load` would: what `load` checks besides, as it would.
    pattern, _, _ = _checked(document, path)
    key_ids = {content: key_id for content, key_id in zip(contents, found[8]) if key_id >= 0}
    special_token_ids = _added_tokens(added, key_ids.get, found[7], path)
    tables = RankTables(*found[:6])
    return PackedTokenizer(tables, special_token_ids, pattern, memoryview(tables.ranks).cast("I")[-1], found[6])
