"""What the encode and decode methods take, checked: text as str or UTF-8 bytes (whole, or as a
stream of chunks), ids as ints, and special tokens that may not appear. Each fault is an error
naming where it is."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any, AnyStr, TypeVar

import regex

from ..base.errors import EncodeError

_T = TypeVar("_T")
# What the encode methods take: a str, or its UTF-8 as bytes (text read from a file: no str built).
Text = str | bytes


def on_text(encode: Callable[..., _T], text: Text, *args: Any, **kwargs: Any) -> _T:
    """encode(text, ...) of a str (which the compiled core reads as the UTF-8 CPython keeps, with no
    copy) or of UTF-8 bytes. Anything else is a TypeError; a lone surrogate or invalid UTF-8 is an
    EncodeError naming its position."""
    if not isinstance(text, (str, bytes)):
        raise TypeError(f"expected str or bytes, got {type(text).__name__}")
    try:
        return encode(text, *args, **kwargs)
    except UnicodeEncodeError:
        raise surrogate_error(text, 0) from None  # type: ignore[arg-type]  # (only a str raises it: text is one)
    except ValueError:
        error = invalid_utf8(text) if isinstance(text, bytes) else None
        if error is None:
            raise
        raise error from None


def utf8_of(chunk: object, offset: int) -> bytes:
    """The UTF-8 of a str (a lone surrogate is an EncodeError naming its position, counted from
    `offset`), or bytes as they are; anything else is a TypeError."""
    if type(chunk) is bytes:
        return chunk
    if not isinstance(chunk, str):
        raise TypeError(f"expected str or bytes, got {type(chunk).__name__}")
    try:
        return chunk.encode("utf-8")
    except UnicodeEncodeError:
        raise surrogate_error(chunk, offset) from None


def surrogate_error(text: str, offset: int, where: str = "") -> EncodeError:
    """The error for a str with a lone surrogate (text[i] at position offset + i of the input)."""
    at = next(i for i, char in enumerate(text) if "\ud800" <= char <= "\udfff")
    return EncodeError(f"{where}lone surrogate U+{ord(text[at]):04X} at position {offset + at} cannot be encoded")


def invalid_utf8(data: bytes, where: str = "", offset: int = 0) -> EncodeError | None:
    """The error for bytes that are not UTF-8, naming the first bad byte's offset (counted from
    `offset`), or None if they are valid."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return EncodeError(f"{where}not valid UTF-8 at byte offset {offset + exc.start}")
    return None


def as_ids(ids: Iterable[int] | Any) -> list[int]:
    """`decode`'s ids as a list of ints: a list of ints as it is, an integer numpy array or numpy
    integers converted; anything else (a bool or float among them, or a str) a TypeError naming it."""
    np = sys.modules.get("numpy")  # (an array can only come from numpy already imported)
    if np is not None and isinstance(ids, np.ndarray):
        if ids.dtype.kind not in "iu":
            raise TypeError(f"expected an integer array of ids, got dtype {ids.dtype}")
        converted: list[int] = ids.tolist()
        return converted
    if isinstance(ids, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"expected a sequence of ids, got {type(ids).__name__}")
    ids = ids if isinstance(ids, list) else list(ids)
    if not set(map(type, ids)) - {int}:  # one C pass: a bool or float would index the dict
        return ids
    out = []
    for position, token_id in enumerate(ids):
        if type(token_id) is int:
            out.append(token_id)
        elif np is not None and isinstance(token_id, np.integer):
            out.append(int(token_id))
        else:
            raise TypeError(f"token id at position {position} is {token_id!r} ({type(token_id).__name__}), not an int")
    return out


def refuse_disallowed(text: Text, disallowed: set[str], index: int | None) -> None:
    """tiktoken's check: a disallowed special token anywhere in the text is an error naming it."""
    found: tuple[str | bytes, int] | None
    if isinstance(text, bytes):
        found = _special_search(tuple(sorted(token.encode("utf-8") for token in disallowed)), text)
        unit = "byte offset"
    elif isinstance(text, str):
        found = _special_search(tuple(sorted(disallowed)), text)
        unit = "position"
    else:
        return  # the encoder names the wrong type
    if found is not None:
        token, at = found
        where = f"batch index {index}: " if index is not None else ""
        shown = token.decode("utf-8") if isinstance(token, bytes) else token
        raise EncodeError(
            f"{where}disallowed special token {shown!r} at {unit} {at}; pass allowed_special to encode it as "
            f"a special token, or disallowed_special=() to encode it as text"
        )


def _special_search(tokens: tuple[AnyStr, ...], text: AnyStr) -> tuple[AnyStr, int] | None:
    """The first special token in `text` (longest first at a position) and where it starts."""
    match = _special_regex(tokens).search(text)
    return None if match is None else (match.group(), match.start())


@lru_cache(maxsize=64)
def _special_regex(tokens: tuple[AnyStr, ...]) -> regex.Pattern[AnyStr]:
    """Longest first, as the encoders match (a token another one starts with is not found inside it)."""
    ordered = sorted(tokens, key=len, reverse=True)
    separator = b"|" if isinstance(ordered[0], bytes) else "|"
    return regex.compile(separator.join(regex.escape(token) for token in ordered))


def chunk_kind(chunk: object, kind: type | None) -> type:
    """The kind of an encode_iterable stream (str or bytes) after `chunk`, the first chunk's."""
    if not isinstance(chunk, (str, bytes)):
        raise TypeError(f"expected str or bytes chunks, got {type(chunk).__name__}")
    found = str if isinstance(chunk, str) else bytes
    if kind is not None and found is not kind:
        raise TypeError(f"a {found.__name__} chunk in a stream of {kind.__name__} chunks: give one kind")
    return found


def complete_utf8(data: bytes) -> int:
    """The length of `data`'s longest prefix that does not end inside a UTF-8 character."""
    end = len(data)
    for back in range(1, min(4, end) + 1):
        byte = data[end - back]
        if byte < 0x80:
            return end
        if byte >= 0xC0:  # the lead byte of the last character: does the character end here?
            length = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return end if back >= length else end - back
    return end  # (no lead byte: not UTF-8, which the encoder names)


def name_invalid_utf8(buffer: bytes, offset: int) -> None:
    """Raise the error naming where stream bytes are not UTF-8 (`buffer` starts at byte `offset`),
    if they are not (the encoder says only that they are not)."""
    error = invalid_utf8(buffer, offset=offset)
    if error is not None:
        raise error from None
