"""tiktoken's file format: a .tiktoken ranks file plus a JSON sidecar, written and read without tiktoken.

NAME.tiktoken has one line per ordinary token, `base64(bytes) rank`, in rank order: exactly what
`tiktoken.load.load_tiktoken_bpe` reads. NAME.tiktoken.json holds the rest of what
`tiktoken.Encoding(...)` takes: {"name", "pat_str", "special_tokens": {text: id}, "explicit_n_vocab"}:

    enc = tiktoken.Encoding(mergeable_ranks=load_tiktoken_bpe("tok.tiktoken"), **json.load(open("tok.tiktoken.json")))

tiktoken has no merge list: it merges the adjacent pair whose concatenation has the lowest rank, and
a token's id is its rank. That equals BPE by our merges exactly when (checked on export, the first
failure named): the ids are dense 0..n-1; a special token's id is no ordinary token's; each
multi-byte token is made by exactly one merge and no two merges make the same bytes; merged tokens'
ids rise with the merge order; and `recover_merges` (below) rebuilds exactly our merges from the
ranks. Why that suffices: in any text, when tiktoken merges X + Y = T, the pieces inside T's span
went through the same merges as tiktoken on T's bytes alone (a merge inside the span was the
lowest-ranked pair overall, so also inside), whose only two-piece state is T's recovered merge; so
tiktoken only ever merges pairs that are our merges, in our order. Its shortcut (a pre-token that
is a whole token is that token) then agrees too, since our BPE rebuilds every token from its bytes.

Import rebuilds the merges from the ranks (`recover_merges`): for each multi-byte token in rank
order, BPE on its bytes with the lower ranks must end in exactly two pieces, its merge.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from array import array
from collections.abc import Iterable, Mapping, Sequence
from heapq import heapify, heappop, heappush
from itertools import accumulate
from pathlib import Path
from typing import NamedTuple

from ...base import compiled
from ...base.errors import ConfigError, TokenizerFileError
from ...base.patterns import GPT2, SplitPattern, resolve_pattern, validate_special_tokens
from ..tables import MAX_TOKEN_ID, PackedTokenizer, RankTables
from .common import TokenizerData, output_file, read_json, read_text, write_files

RANKS_FILE = "tokenizer.tiktoken"
RANKS_SUFFIX = ".tiktoken"
SIDECAR_SUFFIX = ".json"  # the sidecar of NAME.tiktoken is NAME.tiktoken.json


def sidecar_path(ranks_path: Path) -> Path:
    return ranks_path.with_name(ranks_path.name + SIDECAR_SUFFIX)


def bpe_pieces(token: bytes, ranks: Mapping[bytes, int], below: int) -> list[bytes]:
    """tiktoken's BPE on `token`'s bytes using only ranks below `below`: merge the adjacent pair
    whose concatenation has the lowest rank (the leftmost on a tie) until none has one.

    A heap of (rank, start) over a linked list of pieces, as `encoding.bpe.bpe_heap`: O(L log L)
    lookups for a token of L bytes (merging one pair per pass over the pieces is O(L^2)). An
    entry is acted on only if the pair now starting there still has its rank (ranks are unique
    per bytes, so the same rank means the same pair); csrc/rank_file.c does the same in C.
    """
    n = len(token)
    nxt = list(range(1, n + 1))  # the end of the piece starting at i (n: none after it)
    prv = list(range(-1, n - 1))  # the start of the piece before it (-1: none; n: i is merged away)

    def rank_of(start: int, end: int) -> int | None:
        rank = ranks.get(token[start:end])
        return rank if rank is not None and rank < below else None

    heap = [(rank, i) for i in range(n - 1) if (rank := rank_of(i, i + 2)) is not None]
    heapify(heap)
    while heap:
        rank, i = heappop(heap)
        j = nxt[i]
        if prv[i] == n or j >= n:
            continue
        end = nxt[j]
        if rank_of(i, end) != rank:
            continue  # stale: a neighbour merged since it was pushed
        nxt[i], prv[j] = end, n
        if end < n:
            prv[end] = i
            right = rank_of(i, nxt[end])
            if right is not None:
                heappush(heap, (right, i))
        if prv[i] >= 0:
            left = rank_of(prv[i], end)
            if left is not None:
                heappush(heap, (left, prv[i]))
    pieces, i = [], 0
    while i < n:
        pieces.append(token[i : nxt[i]])
        i = nxt[i]
    return pieces


def recover_merges(ranks: Mapping[bytes, int], where: str) -> list[tuple[bytes, bytes]]:
    """The merges, in rank order, that tiktoken's ranks amount to (one per multi-byte token).

    Raises naming the first token that BPE with the lower ranks does not bring to two pieces: no
    merge-based BPE makes it, while tiktoken returns it for a pre-token equal to it.
    """
    merges: list[tuple[bytes, bytes]] = []
    for token, rank in sorted(((t, r) for t, r in ranks.items() if len(t) > 1), key=lambda item: item[1]):
        pieces = bpe_pieces(token, ranks, rank)
        if len(pieces) != 2:
            raise TokenizerFileError(
                f"{where}: token {token!r} (rank {rank}) is not the merge of two lower-ranked tokens: BPE on its "
                f"bytes stops at {len(pieces)} pieces {pieces[:4]!r}{'...' * (len(pieces) > 4)}"
            )
        merges.append((pieces[0], pieces[1]))
    return merges


# --- writing ----------------------------------------------------------------------------------


def mergeable_ranks(data: TokenizerData, where: str = "cannot save .tiktoken") -> dict[bytes, int]:
    """The ordinary tokens as tiktoken's bytes -> rank, or a TokenizerFileError naming the token
    that makes tiktoken differ from BPE by the merges."""
    vocab, special_ids = data.vocab, data.special_token_ids
    count = len(vocab)
    if set(vocab) != set(range(count)):
        missing = next(i for i in range(count + 1) if i not in vocab)
        raise TokenizerFileError(
            f"{where}: token ids must be dense 0..n-1 (tiktoken's ids are ranks), but id {missing} is missing"
        )
    specials_at = {token_id: special for special, token_id in special_ids.items()}
    ordinary: dict[bytes, int] = {}
    for token_id, token in vocab.items():
        if token_id in specials_at:
            continue
        if token in ordinary:
            raise TokenizerFileError(
                f"{where}: ids {ordinary[token]} and {token_id} both have bytes {token!r} (a rank file holds a token once)"
            )
        ordinary[token] = token_id
    for special, token_id in special_ids.items():
        token = special.encode("utf-8")
        if token not in ordinary and (len(token) == 1 or any(left + right == token for left, right in data.merges)):
            raise TokenizerFileError(
                f"{where}: special token {special!r} has id {token_id}, which is also the id of the ordinary token "
                f"{token!r} (tiktoken needs special token ids apart from the ranks)"
            )
    made_by: dict[bytes, int] = {}
    last_id = -1
    for index, (left, right) in enumerate(data.merges):
        token = left + right
        if token in made_by:
            raise TokenizerFileError(
                f"{where}: merges #{made_by[token]} and #{index} both make {token!r} (tiktoken keeps one way to make a token)"
            )
        made_by[token] = index
        if ordinary[token] <= last_id:
            raise TokenizerFileError(
                f"{where}: merge #{index} makes {token!r} with id {ordinary[token]}, below an earlier merge's id "
                f"{last_id} (tiktoken merges in id order)"
            )
        last_id = ordinary[token]
    for token, token_id in ordinary.items():
        if len(token) > 1 and token not in made_by:
            raise TokenizerFileError(
                f"{where}: token {token!r} (id {token_id}) is made by no merge, but tiktoken would make it"
            )
    recovered = recover_merges(ordinary, where)
    for index, (ours, theirs) in enumerate(zip(data.merges, recovered)):
        if ours != theirs:
            raise TokenizerFileError(
                f"{where}: token {ours[0] + ours[1]!r} (id {ordinary[ours[0] + ours[1]]}) is merge #{index} "
                f"{ours[0]!r} + {ours[1]!r}, but tiktoken's ranks would build it as {theirs[0]!r} + {theirs[1]!r}"
            )
    return ordinary


def ranks_text(ranks: Mapping[bytes, int]) -> str:
    """A .tiktoken file's text: a line of base64 token and rank for each token, in rank order."""
    return "".join(
        f"{base64.b64encode(token).decode('ascii')} {rank}\n"
        for token, rank in sorted(ranks.items(), key=lambda item: item[1])
    )


def save(path: str | os.PathLike, data: TokenizerData) -> tuple[Path, ...]:
    """Write NAME.tiktoken and NAME.tiktoken.json at `path` (a file ending in .tiktoken, or a
    directory to hold tokenizer.tiktoken); the name tiktoken is given is NAME."""
    ranks_path = output_file(path, RANKS_SUFFIX, RANKS_FILE)
    ranks = mergeable_ranks(data, f"cannot save {ranks_path.name}")
    sidecar = {
        "name": ranks_path.name[: -len(RANKS_SUFFIX)],
        "pat_str": data.pattern.regex,
        "special_tokens": {special: data.special_token_ids[special] for special in data.special_tokens},
        "explicit_n_vocab": len(data.vocab),
    }
    return write_files(
        [
            (ranks_path, ranks_text(ranks)),
            (sidecar_path(ranks_path), json.dumps(sidecar, ensure_ascii=False, indent=2) + "\n"),
        ]
    )


# --- reading ----------------------------------------------------------------------------------


def load_ranks(path: Path) -> dict[bytes, int]:
    """Read a .tiktoken file as load_tiktoken_bpe does, refusing what it would silently accept
    (a token or rank given twice)."""
    return parse_ranks(read_text(path), path)


def parse_ranks(text: str, path: Path) -> dict[bytes, int]:
    """`load_ranks` of a file's text (`path` names it in errors)."""
    ranks: dict[bytes, int] = {}
    owner: dict[int, bytes] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise TokenizerFileError(f"{path} line {number}: expected 'base64-token rank', got {line[:60]!r}")
        try:
            token = base64.b64decode(parts[0], validate=True)
        except (binascii.Error, ValueError):
            raise TokenizerFileError(f"{path} line {number}: {parts[0][:40]!r} is not base64") from None
        if not parts[1].isascii() or not parts[1].isdigit():
            raise TokenizerFileError(f"{path} line {number}: rank {parts[1]!r} is not a non-negative integer")
        rank = int(parts[1])
        if not token:
            raise TokenizerFileError(f"{path} line {number}: empty token")
        if token in ranks:
            raise TokenizerFileError(
                f"{path} line {number}: token {token!r} appears twice (ranks {ranks[token]} and {rank})"
            )
        if rank in owner:
            raise TokenizerFileError(
                f"{path} line {number}: rank {rank} is given to both {owner[rank]!r} and {token!r}"
            )
        ranks[token], owner[rank] = rank, token
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise TokenizerFileError(f"{path}: no token for byte 0x{missing[0]:02X} ({len(missing)} bytes missing)")
    return ranks


def _sidecar(path: Path) -> tuple[str, dict[str, int] | None, int | None]:
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("pat_str"), str):
        raise TokenizerFileError(
            f'{path}: expected an object with "pat_str" (and "special_tokens", "explicit_n_vocab")'
        )
    unknown = sorted(set(data) - {"name", "pat_str", "special_tokens", "explicit_n_vocab"})
    if unknown:
        raise TokenizerFileError(f"{path}: unknown key {unknown[0]!r}")
    if not isinstance(data.get("name", ""), str):
        raise TokenizerFileError(f"{path}: name is {data['name']!r}, not a string")
    specials = data.get("special_tokens", {})
    if not isinstance(specials, dict) or not all(
        isinstance(k, str) and k and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        for k, v in specials.items()
    ):
        raise TokenizerFileError(f"{path}: special_tokens must map non-empty strings to non-negative ids")
    _refuse_surrogates(specials, f"{path}: special_tokens", TokenizerFileError)
    n_vocab = data.get("explicit_n_vocab")
    if n_vocab is not None and (not isinstance(n_vocab, int) or isinstance(n_vocab, bool)):
        raise TokenizerFileError(f"{path}: explicit_n_vocab is {n_vocab!r}, not an integer")
    return data["pat_str"], specials, n_vocab


def _refuse_surrogates(specials: Iterable[object], where: str, error: type[Exception]) -> None:
    """A special token with a lone surrogate has no UTF-8: refused in one line naming it."""
    for special in specials:
        if isinstance(special, str):
            try:
                special.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise error(
                    f"{where}: special token {special!r} has a lone surrogate at position {exc.start}"
                ) from None


class _Header(NamedTuple):
    """What a load reads before the ranks: the files, the pattern and the special tokens."""

    ranks_path: Path
    where: Path  # the file that says the pattern and special tokens (errors name it)
    pattern: SplitPattern
    special_tokens: Mapping[str, int] | Sequence[str] | None
    n_vocab: int | None


def _header(
    path: str | os.PathLike,
    pattern: str | SplitPattern | None,
    special_tokens: Mapping[str, int] | Sequence[str] | None,
) -> _Header:
    ranks_path = find_ranks_file(Path(path))
    side = sidecar_path(ranks_path)
    n_vocab = None
    if side.is_file():
        if pattern is not None or special_tokens is not None:
            raise ConfigError(f"{side} gives the pattern and special tokens; do not pass them too")
        pattern, special_tokens, n_vocab = _sidecar(side)
        where = side
    else:
        where = ranks_path
        if special_tokens is not None and not isinstance(special_tokens, (str, bytes)):
            _refuse_surrogates(special_tokens, "special_tokens", ConfigError)
    try:
        split_pattern = resolve_pattern(pattern) if pattern is not None else GPT2
    except ConfigError as exc:
        raise TokenizerFileError(f"{where}: pat_str: {exc}") from None
    return _Header(ranks_path, where, split_pattern, special_tokens, n_vocab)


def _special_ids(special_tokens: Mapping[str, int] | Sequence[str] | None, top: int) -> dict[str, int]:
    """Each special token's id: as the mapping says, or after `top` (the largest rank) in order."""
    if special_tokens is None:
        return {}
    if isinstance(special_tokens, Mapping):
        return dict(special_tokens)
    names = validate_special_tokens(special_tokens)
    return {special: top + 1 + index for index, special in enumerate(names)}


def load(
    path: str | os.PathLike,
    pattern: str | SplitPattern | None = None,
    special_tokens: Mapping[str, int] | Sequence[str] | None = None,
) -> TokenizerData:
    """Read NAME.tiktoken (the file, or a directory holding one .tiktoken file) and its sidecar.

    Without a sidecar, `pattern` (default gpt2) and `special_tokens` (text -> id, or texts given ids
    after the largest rank) say what it would hold; with one, they must be None.
    """
    header = _header(path, pattern, special_tokens)
    where = header.where
    ranks = load_ranks(header.ranks_path)
    merges = recover_merges(ranks, str(header.ranks_path))
    vocab = {rank: token for token, rank in ranks.items()}
    special_ids = _special_ids(header.special_tokens, max(vocab))
    for special, token_id in special_ids.items():
        if token_id in vocab:
            raise TokenizerFileError(
                f"{where}: special token {special!r} has id {token_id}, the rank of {vocab[token_id]!r}"
            )
        vocab[token_id] = special.encode("utf-8")
    n_vocab = header.n_vocab
    if n_vocab is not None and (n_vocab != len(vocab) or max(vocab) != n_vocab - 1):
        raise TokenizerFileError(
            f"{where}: explicit_n_vocab is {n_vocab}, but the ranks and special tokens hold {len(vocab)} ids up to {max(vocab)}"
        )
    return TokenizerData(dict(sorted(vocab.items())), merges, tuple(special_ids), header.pattern, special_ids)


# --- reading without a Python object per token -------------------------------------------------


def rank_tables_py(data: bytes, path: Path, specials: Sequence[bytes]) -> RankTables:
    """The pure-Python twin of the compiled core's `rank_file_tables`: the same tables from a rank
    file's bytes, through `parse_ranks` and `recover_merges`; raises the TokenizerFileError that
    names a fault (where the compiled core returns None)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TokenizerFileError(f"{path}: not valid UTF-8 at byte {exc.start}") from None
    ranks = parse_ranks(text, path)
    top = max(ranks.values())
    if top > MAX_TOKEN_ID:  # (the Tokenizer refuses such an id; the packed tables hold 32 bits)
        raise TokenizerFileError(f"{path}: rank {top} is too large: token ids go up to 2**32 - 2")
    merges = recover_merges(ranks, str(path))
    order = sorted(ranks.items(), key=lambda item: item[1])
    packed = array("I")
    for left, right in merges:
        packed.extend((ranks[left], ranks[right], ranks[left + right]))
    return RankTables(
        b"".join(token for token, _ in order),
        array("q", accumulate((len(token) for token, _ in order), initial=0)).tobytes(),
        array("I", [rank for _, rank in order]).tobytes(),
        packed.tobytes(),
        tuple(ranks[bytes([b])] for b in range(256)),
        tuple(ranks.get(special, -1) for special in specials),
    )


def load_packed(
    path: str | os.PathLike,
    pattern: str | SplitPattern | None = None,
    special_tokens: Mapping[str, int] | Sequence[str] | None = None,
) -> PackedTokenizer | None:
    """`load`, with the ranks read and the merges rebuilt by the compiled core: the same checks,
    the same tokenizer, no Python object per token. None where the compiled core is not built or
    leaves the file to `load` (a file not in the plain form, or one with a fault, which `load`
    then names), or where a special token's id or bytes is a rank's (`load` and the Tokenizer
    name or handle those)."""
    if not compiled.AVAILABLE:
        return None
    header = _header(path, pattern, special_tokens)
    try:
        data = header.ranks_path.read_bytes()
    except OSError:
        return None  # (load names it)
    names = list(header.special_tokens or ()) if not isinstance(header.special_tokens, (str, bytes)) else []
    tables = compiled.core().rank_file_tables(data, [name.encode("utf-8") for name in names if isinstance(name, str)])
    if tables is None:
        return None
    tables = RankTables(*tables)
    ranks = memoryview(tables.ranks).cast("I")
    max_rank = ranks[-1]
    special_ids = _special_ids(header.special_tokens, max_rank)
    used = set(special_ids.values())
    dense = max_rank == len(ranks) - 1
    if (
        len(used) != len(special_ids)
        or any(rank >= 0 for rank in tables.special_ranks)
        or any(token_id <= max_rank and (dense or token_id in set(ranks)) for token_id in used)
    ):
        return None
    n_vocab = header.n_vocab
    if n_vocab is not None and (n_vocab != len(ranks) + len(used) or max([max_rank, *used]) != n_vocab - 1):
        return None
    return PackedTokenizer(tables, special_ids, header.pattern, max_rank)


def find_ranks_file(path: Path) -> Path:
    """`path` if it is a file, else the one .tiktoken file in the directory `path`."""
    if not path.is_dir():
        if not path.exists():
            raise TokenizerFileError(f"{path}: file not found")
        return path
    found = sorted(path.glob(f"*{RANKS_SUFFIX}"))
    if len(found) != 1:
        what = (
            "no .tiktoken file"
            if not found
            else f"{len(found)} .tiktoken files ({', '.join(p.name for p in found[:3])})"
        )
        raise TokenizerFileError(f"{path}: holds {what}; name the file")
    return found[0]
