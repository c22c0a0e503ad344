"""GPT-2's tokenizer file format: vocab.json, merges.txt, and the byte <-> unicode table they use.

GPT-2 stores token *bytes* as printable strings: every byte maps to one printable character
(`bytes_to_unicode`), so `b" the"` is written `"Ġthe"`. vocab.json is an object of such strings
to ids; merges.txt has a `#version: 0.2` header, then one `left right` line per merge, in rank
order. A directory saved here also holds special_tokens.json (a JSON list of strings) and
split_pattern.json ({"name": preset or "custom", "regex": the pattern}); without it, GPT-2's.

Every problem in a file is a `TokenizerFileError` with one line naming the file and the line or
value at fault. Writes are atomic (temp file beside the target, fsync, `os.replace`), so a
failing save never leaves a half-written file behind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate
from pathlib import Path

from ...base import compiled
from ...base.errors import ConfigError, TokenizerFileError
from ...base.patterns import GPT2, PRESETS, SplitPattern, resolve_pattern
from .. import tables
from ..tables import PackedTokenizer, RankTables
from .common import read_json, read_text, write_files

VOCAB_FILE = "vocab.json"
MERGES_FILE = "merges.txt"
SPECIAL_TOKENS_FILE = "special_tokens.json"
PATTERN_FILE = "split_pattern.json"
MERGES_HEADER = "#version: 0.2"


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table from each byte 0..255 to a printable character.

    Printable Latin-1 bytes map to themselves; the other 68 bytes (controls, space, 0x7F-0xA0,
    0xAD) map in order to U+0100 onwards, so no token string contains whitespace or a control
    character and merges.txt can separate tokens by one space.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table: dict[int, str] = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return dict(sorted(table.items()))


def unicode_to_bytes() -> dict[str, int]:
    """The inverse of `bytes_to_unicode`."""
    return {char: b for b, char in bytes_to_unicode().items()}


def _translation_tables() -> tuple[dict[int, int], dict[int, int]]:
    to_str = {b: ord(char) for b, char in bytes_to_unicode().items()}
    # Code points below 0x144 that are not in the table map to U+0100+, which latin-1 rejects,
    # so `str_to_token` fails on every character outside the table, not only those above 0xFF.
    to_bytes = {code: 0x100 for code in range(0x144)}
    to_bytes.update({code: b for b, code in to_str.items()})
    return to_str, to_bytes


_TO_STR, _TO_BYTES = _translation_tables()


def token_to_str(token: bytes) -> str:
    """Token bytes in GPT-2's printable form (`b" the"` -> `"Ġthe"`)."""
    # latin-1 turns each byte into the code point of the same value, which translate then maps.
    return token.decode("latin-1").translate(_TO_STR)


def str_to_token(text: str, where: str) -> bytes:
    """Inverse of `token_to_str`; `where` names the file/line for the error on a char outside the table."""
    try:
        return text.translate(_TO_BYTES).encode("latin-1")
    except UnicodeEncodeError:
        table = unicode_to_bytes()
        char = next(char for char in text if char not in table)
        raise TokenizerFileError(
            f"{where}: token {text!r} has character {char!r} (U+{ord(char):04X}) outside the GPT-2 byte table"
        ) from None


def strs_to_tokens(texts: Sequence[str]) -> list[bytes] | None:
    """`str_to_token` of each text, in one translate over them all (each character is one byte, so
    the bytes cut at the texts' lengths); None where one has a character outside the table, which
    `str_to_token` then names."""
    try:
        data = "".join(texts).translate(_TO_BYTES).encode("latin-1")
    except UnicodeEncodeError:
        return None
    ends = list(accumulate(map(len, texts)))
    return list(map(data.__getitem__, map(slice, [0, *ends], ends)))


# --- reading ----------------------------------------------------------------------------------


def load_vocab(vocab_path: str | os.PathLike) -> dict[int, bytes]:
    """Read a GPT-2 vocab.json (token string -> id) as id -> token bytes."""
    path = Path(vocab_path)
    # json keeps the last of two equal keys silently, which would drop an id; refuse instead.
    data = read_json(path, lambda token, first, second: f"token {token!r} appears twice (ids {first!r} and {second!r})")
    if not isinstance(data, dict):
        raise TokenizerFileError(f"{path}: expected a JSON object of token string -> id, got {type(data).__name__}")
    # A sound file at C speed; any fault sends it through the loop below, which names the first.
    strings, ids = list(data), list(data.values())
    if (
        all(type(token_id) is int for token_id in ids)
        and min(ids, default=0) >= 0
        and all(strings)
        and (len(set(ids)) == len(ids))
    ):
        tokens = strs_to_tokens(strings)
        if tokens is not None:
            return dict(sorted(zip(ids, tokens)))
    vocab: dict[int, bytes] = {}
    owner: dict[int, str] = {}
    for token, token_id in data.items():
        # bool is an int subclass; `true` as an id is a mistake, not 1.
        if isinstance(token_id, bool) or not isinstance(token_id, int):
            raise TokenizerFileError(f"{path}: token {token!r} has id {token_id!r}, not an integer")
        if token_id < 0:
            raise TokenizerFileError(f"{path}: token {token!r} has negative id {token_id}")
        if not token:
            raise TokenizerFileError(f"{path}: empty token string (id {token_id})")
        if token_id in owner:
            raise TokenizerFileError(f"{path}: id {token_id} is given to both {owner[token_id]!r} and {token!r}")
        owner[token_id] = token
        vocab[token_id] = str_to_token(token, f"{path} (id {token_id})")
    return dict(sorted(vocab.items()))


def _show(token: bytes) -> str:
    return repr(token_to_str(token))


def check_merge(left: bytes, right: bytes, known: set[bytes], made: set[bytes], where: str) -> None:
    """`tables.check_merge` with tokens shown in GPT-2's printable form, as TokenizerFileErrors."""
    tables.check_merge(left, right, known, made, where, _show, TokenizerFileError)


def load_merges(merges_path: str | os.PathLike, vocab: Mapping[int, bytes]) -> list[tuple[bytes, bytes]]:
    """Read a GPT-2 merges.txt, checking every merge against `vocab` and against the earlier merges.

    A merge's parts must each be a single byte or the result of an earlier merge: a merge that
    uses a token only a later line creates could never fire in rank order, so the file is corrupt.
    """
    path = Path(merges_path)
    known = set(vocab.values())
    lines = read_text(path).split("\n")
    merges = _sound_merges(lines, known)
    if merges is not None:
        return merges
    made: set[bytes] = set()
    merges = []
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r")
        if number == 1 and line.startswith("#version"):
            continue
        if not line:
            continue  # blank lines (the final newline, a trailing empty line) carry no merge
        parts = line.split(" ")
        if len(parts) != 2 or not all(parts):
            raise TokenizerFileError(f"{path} line {number}: expected two tokens separated by one space, got {line!r}")
        where = f"{path} line {number}"
        left, right = str_to_token(parts[0], where), str_to_token(parts[1], where)
        check_merge(left, right, known, made, where)
        made.add(left + right)
        merges.append((left, right))
    return merges


def _sound_merges(lines: list[str], known: set[bytes]) -> list[tuple[bytes, bytes]] | None:
    """`load_merges` of a file without a fault, at C speed where it can be; None at any fault
    (`load_merges` then names the first, line by line)."""
    if lines and lines[0].rstrip("\r").startswith("#version"):
        lines = lines[1:]
    rows = [line.rstrip("\r").split(" ") for line in lines]
    rows = [row for row in rows if row != [""]]  # blank lines carry no merge
    if not all(len(row) == 2 and row[0] and row[1] for row in rows):
        return None
    tokens = strs_to_tokens([part for row in rows for part in row])
    if tokens is None:
        return None
    made: set[bytes] = set()
    merges = list(zip(tokens[0::2], tokens[1::2]))
    for left, right in merges:
        merged = left + right
        # check_merge's rules, inlined
        if not (
            left in known
            and right in known
            and merged in known
            and (len(left) == 1 or left in made)
            and (len(right) == 1 or right in made)
        ):
            return None
        made.add(merged)
    return merges


def check_every_token_made(
    vocab: Mapping[int, bytes],
    merges: Iterable[tuple[bytes, bytes]],
    special_tokens: Sequence[str],
    vocab_path: str | os.PathLike,
    merges_path: str | os.PathLike,
) -> None:
    """Raise unless every multi-byte token of the vocab is a special token or some merge's result.

    A merges.txt cut short at a line boundary parses cleanly; this is what notices it.
    """
    # One set, built once: `token not in made | specials` would build the union for every token.
    made = {left + right for left, right in merges} | {token.encode("utf-8") for token in special_tokens}
    unmade = [(i, token) for i, token in sorted(vocab.items()) if len(token) > 1 and token not in made]
    if unmade:
        token_id, token = unmade[0]
        count = len(unmade)
        raise TokenizerFileError(
            f"{merges_path}: no merge makes {count} multi-byte token{'s' * (count > 1)} of {vocab_path} "
            f"(first: {token_to_str(token)!r}, id {token_id}); is the file cut short, or is it a special "
            "token that was not declared?"
        )


def load_special_tokens(path: str | os.PathLike) -> list[str]:
    """Read special_tokens.json: a JSON list of non-empty, distinct strings."""
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, list):
        raise TokenizerFileError(f"{path}: expected a JSON list of strings, got {type(data).__name__}")
    seen: set[str] = set()
    for index, token in enumerate(data):
        if not isinstance(token, str) or not token:
            raise TokenizerFileError(f"{path}: entry {index} is {token!r}, not a non-empty string")
        if token in seen:
            raise TokenizerFileError(f"{path}: special token {token!r} is listed twice")
        seen.add(token)
    return data


def load_tokenizer_files(
    vocab_path: str | os.PathLike, merges_path: str | os.PathLike
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Read a GPT-2 vocab.json + merges.txt pair as (id -> token bytes, merges as byte pairs)."""
    vocab = load_vocab(vocab_path)
    return vocab, load_merges(merges_path, vocab)


def load_packed(
    vocab_path: str | os.PathLike,
    merges_path: str | os.PathLike,
    special_tokens: tuple[str, ...],
    pattern: SplitPattern,
) -> PackedTokenizer | None:
    """`load_tokenizer_files`, then what the Tokenizer makes of them with `special_tokens` (already
    validated: build_tables, check_every_token_made), in the compiled core (csrc/vocab_files.c):
    the same tables with no Python object per token. None where the core is not built, a file
    cannot be read, or the core leaves the files to the Python path (a fault, which that path then
    names, or a case it handles)."""
    if not compiled.AVAILABLE:
        return None
    try:
        vocab, merges = Path(vocab_path).read_bytes(), Path(merges_path).read_bytes()
        specials = [special.encode("utf-8") for special in special_tokens]
    except (OSError, UnicodeEncodeError):
        return None
    found = compiled.core().gpt2_tables(vocab, merges, specials)
    if found is None:
        return None
    packed = RankTables(*found[:6])
    max_id = memoryview(packed.ranks).cast("I")[-1]
    return PackedTokenizer(packed, dict(zip(special_tokens, found[5])), pattern, max_id, found[6])


# --- writing ----------------------------------------------------------------------------------


def _vocab_json(vocab: Mapping[int, bytes]) -> str:
    seen: dict[bytes, int] = {}
    vocab = tables.checked_vocab(vocab, f"cannot save {VOCAB_FILE}: vocab", TokenizerFileError)
    for token_id, token in vocab.items():
        # vocab.json is keyed by token, so a second id with the same bytes would silently vanish.
        if token in seen:
            raise TokenizerFileError(
                f"cannot save {VOCAB_FILE}: ids {seen[token]} and {token_id} both have bytes {token!r} "
                "(a token can have only one id in vocab.json)"
            )
        seen[token] = token_id
    body = {token_to_str(token): token_id for token_id, token in vocab.items()}
    return json.dumps(body, ensure_ascii=False, indent=1) + "\n"


def _merges_txt(merges: Iterable[tuple[bytes, bytes]], vocab: Mapping[int, bytes]) -> str:
    known = set(vocab.values())
    made: set[bytes] = set()
    lines = [MERGES_HEADER]
    for index, (left, right) in enumerate(merges):
        # The same checks load_merges makes, so whatever is saved loads back.
        check_merge(left, right, known, made, f"cannot save {MERGES_FILE}: merge #{index}")
        made.add(left + right)
        lines.append(f"{token_to_str(left)} {token_to_str(right)}")
    return "\n".join(lines) + "\n"


def save_vocab(vocab_path: str | os.PathLike, vocab: Mapping[int, bytes]) -> None:
    """Write id -> bytes as a GPT-2 vocab.json (atomically)."""
    write_files([(Path(vocab_path), _vocab_json(vocab))])


def save_merges(
    merges_path: str | os.PathLike, merges: Iterable[tuple[bytes, bytes]], vocab: Mapping[int, bytes]
) -> None:
    """Write merges as a GPT-2 merges.txt with its `#version: 0.2` header (atomically)."""
    write_files([(Path(merges_path), _merges_txt(merges, vocab))])


def save_tokenizer_files(
    directory: str | os.PathLike,
    vocab: Mapping[int, bytes],
    merges: Iterable[tuple[bytes, bytes]],
    special_tokens: Sequence[str] = (),
    pattern: SplitPattern = GPT2,
) -> tuple[Path, ...]:
    """Write vocab.json, merges.txt, special_tokens.json and split_pattern.json into `directory`
    (created if missing).

    Everything is serialised and checked before the first byte is written, and each file is
    renamed into place only after all the temp files were written, so an error leaves the
    directory as it was. Returns the paths.
    """
    folder = Path(directory)
    specials = list(special_tokens)
    if not all(isinstance(token, str) and token for token in specials):
        raise TokenizerFileError(f"cannot save {SPECIAL_TOKENS_FILE}: special tokens must be non-empty strings")
    contents = [
        (folder / VOCAB_FILE, _vocab_json(vocab)),
        (folder / MERGES_FILE, _merges_txt(merges, vocab)),
        (folder / SPECIAL_TOKENS_FILE, json.dumps(specials, ensure_ascii=False) + "\n"),
        (folder / PATTERN_FILE, json.dumps({"name": pattern.name, "regex": pattern.regex}, ensure_ascii=False) + "\n"),
    ]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TokenizerFileError(f"cannot create directory {folder}: {exc.strerror or exc}") from None
    write_files(contents)
    return tuple(path for path, _ in contents)


def load_sidecars(directory: str | os.PathLike) -> tuple[tuple[str, ...], SplitPattern | None]:
    """(special tokens, split pattern) of a saved directory: none, and None (the caller's choice,
    GPT-2's by default), where special_tokens.json or split_pattern.json is absent."""
    folder = Path(directory)
    specials_path, pattern_path = folder / SPECIAL_TOKENS_FILE, folder / PATTERN_FILE
    specials = tuple(load_special_tokens(specials_path)) if specials_path.exists() else ()
    return specials, load_split_pattern(pattern_path) if pattern_path.exists() else None


def load_split_pattern(path: str | os.PathLike) -> SplitPattern:
    """Read split_pattern.json: {"name": a preset or "custom", "regex": the pattern}."""
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not isinstance(data.get("regex"), str):
        raise TokenizerFileError(f'{path}: expected {{"name": ..., "regex": ...}} with two strings')
    name, regex_text = data["name"], data["regex"]
    if name in PRESETS and PRESETS[name].regex != regex_text:
        raise TokenizerFileError(f'{path}: the regex differs from the {name!r} preset\'s; name it "custom"')
    try:
        pattern = resolve_pattern(regex_text)
    except ConfigError as exc:
        raise TokenizerFileError(f"{path}: {exc}") from None
    if name not in PRESETS and name != "custom":
        raise TokenizerFileError(f"{path}: unknown pattern name {name!r} (a preset: {', '.join(PRESETS)}; or custom)")
    return pattern
