"""The tables an encoder runs on, built once from (vocab, merges, special tokens) and checked.

`build_tables` checks what a Tokenizer is given as `check_merge` checks a merges file (the one
rule for both: each merge's parts are single bytes or earlier merges' results, and every part
and result is in the vocab), gives special tokens their ids, and derives what the encoders take:
the id of each byte and the rank table of the merges.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..base.errors import BpeError, ConfigError
from .bpe import RankTable


def check_merge(
    left: bytes,
    right: bytes,
    known: Mapping[bytes, object] | set[bytes],
    made: set[bytes],
    where: str,
    show: Callable[[bytes], str] = repr,
    error: type[BpeError] = ConfigError,
) -> None:
    """Raise `error` if a merge's parts or result are not `known`, or a part is neither a single
    byte nor `made` by an earlier merge. `where` starts the message; `show` renders a token."""
    for side, token in (("left", left), ("right", right)):
        if token not in known:
            raise error(f"{where}: {side} token {show(token)} is not in the vocab")
        if len(token) > 1 and token not in made:
            raise error(f"{where}: {side} token {show(token)} is not a single byte and no earlier merge makes it")
    if left + right not in known:
        raise error(f"{where}: merged token {show(left + right)} is not in the vocab")


def checked_vocab(vocab: Mapping[int, bytes], where: str = "vocab", error: type[BpeError] = ConfigError) -> dict[int, bytes]:
    """`vocab` sorted by id, each id a non-negative int and each token non-empty bytes (else `error`)."""
    table: dict[int, bytes] = {}
    for token_id in sorted(vocab):
        token = vocab[token_id]
        if isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < 0:
            raise error(f"{where} id {token_id!r} is not a non-negative integer")
        if not isinstance(token, bytes) or not token:
            raise error(f"{where} id {token_id} maps to {token!r}, not non-empty bytes")
        table[token_id] = token
    return table


# The largest token id: the compiled encoder keeps ids in 32 bits, with 2**32 - 1 meaning "none".
# build_tables refuses larger ids for every encoder, so all of them accept exactly the same vocabs.
MAX_TOKEN_ID = 2**32 - 2


def _check_id(token_id: int, what: str) -> None:
    if token_id > MAX_TOKEN_ID:
        raise ConfigError(f"{what} {token_id} is too large: token ids go up to 2**32 - 2 ({MAX_TOKEN_ID})")


@dataclass(frozen=True)
class EncodingTables:
    """Everything a Tokenizer knows, checked and derived."""

    vocab: dict[int, bytes]  # id -> bytes, sorted by id, with any special tokens appended
    merges: list[tuple[bytes, bytes]]
    special_token_ids: dict[str, int]
    byte_ids: list[int]  # the id of each byte value 0..255
    ranks: RankTable  # (left id, right id) -> (rank, merged id)


def build_tables(
    vocab: Mapping[int, bytes], merges: Sequence[tuple[bytes, bytes]], special_tokens: Sequence[str]
) -> EncodingTables:
    """Check (vocab, merges) and derive the tables; special tokens must already be validated.

    Special tokens not already in the vocab (by bytes) get new ids after the largest one. No id
    may exceed MAX_TOKEN_ID.
    """
    table = checked_vocab(vocab)
    _check_id(max(table, default=0), "vocab id")

    # Special tokens: reuse an existing id with the same bytes (the lowest, which is where the
    # trainers' vocab layout puts them), else append a new id.
    ids_of: dict[bytes, list[int]] = {}
    for token_id, token in table.items():
        ids_of.setdefault(token, []).append(token_id)
    special_token_ids: dict[str, int] = {}
    next_id = max(table, default=-1) + 1
    for special in special_tokens:
        try:
            token = special.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ConfigError(f"special token {special!r} has a lone surrogate at position {exc.start}") from None
        if token in ids_of:
            special_token_ids[special] = ids_of[token][0]
        else:
            _check_id(next_id, f"special token {special!r} would get id")
            table[next_id] = token
            ids_of[token] = [next_id]
            special_token_ids[special] = next_id
            next_id += 1

    # The id BPE uses for given bytes. When a special token's bytes also appear as an ordinary
    # token (a single-byte special such as "a"), the special one keeps the first id and text uses
    # the other, so "a" in text and the special "a" stay distinguishable.
    special_bytes = {special.encode("utf-8") for special in special_tokens}
    ordinary: dict[bytes, int] = {
        token: ids[1] if token in special_bytes and len(ids) > 1 else ids[0] for token, ids in ids_of.items()
    }
    missing = [b for b in range(256) if bytes([b]) not in ordinary]
    if missing:
        raise ConfigError(f"vocab has no token for byte 0x{missing[0]:02X} ({len(missing)} bytes missing)")

    checked: list[tuple[bytes, bytes]] = []
    ranks: RankTable = {}
    made: set[bytes] = set()
    for rank, (left, right) in enumerate(merges):
        # The checks below, inlined for the common case of a sound merge (a call per merge costs
        # more than the checks); anything else goes the full way, which names the fault.
        sound = type(left) is bytes and type(right) is bytes
        merged = left + right if sound else b""
        if not (
            sound and left in ordinary and right in ordinary and merged in ordinary
            and (len(left) == 1 or left in made) and (len(right) == 1 or right in made)
        ):
            if not isinstance(left, bytes) or not isinstance(right, bytes):
                raise ConfigError(f"merge #{rank} is {(left, right)!r}, not a pair of bytes")
            check_merge(left, right, ordinary, made, f"merge #{rank} {left!r} + {right!r}")
            merged = left + right
        made.add(merged)
        checked.append((left, right))
        # A pair listed twice keeps its last rank, as HF `tokenizers` and GPT-2's encoder.py
        # (`dict(zip(merges, range(len(merges))))`) read such a file.
        ranks[(ordinary[left], ordinary[right])] = (rank, ordinary[merged])
    return EncodingTables(table, checked, special_token_ids, [ordinary[bytes([b])] for b in range(256)], ranks)
