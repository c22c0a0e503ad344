"""The tables an encoder runs on, checked once, however they were made.

A Tokenizer runs on `Tables`: the vocab and merges, each special token's id, the id of each byte,
and the merges as each kind of encoder takes them. Two kinds fulfil that contract:

- `EncodingTables`, which `build_tables` makes from a (vocab, merges, special tokens) given in
  Python. It checks them as `check_merge` checks a merges file (the one rule for both: each
  merge's parts are single bytes or earlier merges' results, and every part and result is in
  the vocab) and gives special tokens their ids;
- `PackedTables`, over the tables the compiled core read from a tokenizer's files (or the load
  cache kept), with no Python object per token until a vocab, a merge list or a Python rank table
  is asked for.

A loader hands the Tokenizer its tables as its `vocab` and `merges` arguments (`TableVocab`,
`TableMerges`), so the Tokenizer has one constructor: `tables_for` takes such views as they are
and builds the tables of anything else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple, Protocol, overload

from ..base.errors import BpeError, ConfigError
from .bpe import RankTable

if TYPE_CHECKING:
    from ..base.patterns import SplitPattern

# The merges as the compiled encoder takes them: (left id, right id, merged id) in rank order, as
# a list of triples or packed as native uint32 (12 bytes a merge).
EncoderMerges = list[tuple[int, int, int]] | bytes


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


def checked_vocab(
    vocab: Mapping[int, bytes], where: str = "vocab", error: type[BpeError] = ConfigError
) -> dict[int, bytes]:
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


class Tables(Protocol):
    """What a Tokenizer and its encoder read of a tokenizer's tables."""

    @property
    def vocab(self) -> dict[int, bytes]:
        """id -> token bytes, sorted by id, special tokens included."""
        ...

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges in rank order."""
        ...

    @property
    def special_token_ids(self) -> dict[str, int]: ...

    @property
    def byte_ids(self) -> Sequence[int]:
        """The id of each byte value 0..255 (where a special token shares a byte's bytes, the other id)."""
        ...

    @property
    def ranks(self) -> RankTable:
        """(left id, right id) -> (rank, merged id): what the pure-Python encoders take."""
        ...

    @property
    def encoder_merges(self) -> EncoderMerges:
        """What the compiled encoder takes (a pair listed twice only at its last rank)."""
        ...

    @property
    def n_vocab(self) -> int:
        """One more than the largest id."""
        ...

    @property
    def merge_count(self) -> int: ...


@dataclass(frozen=True)
class EncodingTables:
    """Tables built in Python by `build_tables`, checked and derived."""

    vocab: dict[int, bytes]  # id -> bytes, sorted by id, with any special tokens appended
    merges: list[tuple[bytes, bytes]]
    special_token_ids: dict[str, int]
    byte_ids: list[int]  # the id of each byte value 0..255
    ranks: RankTable  # (left id, right id) -> (rank, merged id)

    @cached_property
    def encoder_merges(self) -> EncoderMerges:
        return [(left, right, merged) for (left, right), (_, merged) in sorted(self.ranks.items(), key=_by_rank)]

    @cached_property
    def n_vocab(self) -> int:
        # (once: every numpy call asks, and a pass over a 50k-token vocab costs it 0.5 ms)
        return max(self.vocab) + 1

    @property
    def merge_count(self) -> int:
        return len(self.merges)


def _by_rank(item: tuple[tuple[int, int], tuple[int, int]]) -> int:
    return item[1][0]


class RankTables(NamedTuple):
    """A tokenizer's tables packed, as the compiled core's `rank_file_tables` (and `gpt2_tables`,
    `hf_tables`) give them; a token's rank is its id."""

    blob: bytes  # every token's bytes, back to back in rank order
    offsets: bytes  # native int64: token k is blob[offsets[k]:offsets[k + 1]] (n + 1 of them)
    ranks: bytes  # native uint32, ascending: token k's rank
    merges: bytes  # native uint32 (left rank, right rank, merged rank) of each merge, in rank order
    byte_ids: tuple[int, ...]  # the rank of each byte 0..255
    special_ranks: tuple[int, ...]  # the rank of each special token's bytes that is a token, else -1

    def tokens(self) -> dict[int, bytes]:
        """rank -> token bytes, in rank order."""
        blob = self.blob
        offsets = memoryview(self.offsets).cast("q").tolist()
        return dict(zip(memoryview(self.ranks).cast("I").tolist(), [blob[a:b] for a, b in zip(offsets, offsets[1:])]))


class PackedTokenizer(NamedTuple):
    """A tokenizer's files read and checked as the Python readers and `build_tables` would, the
    tables packed: what `PackedTables` serves."""

    tables: RankTables  # every token (special tokens too, except a rank file's) by id, and the merges
    special_token_ids: dict[str, int]
    pattern: SplitPattern  # the one the files name
    max_rank: int  # the largest id in tables
    # The merges the encoder takes where they differ from tables.merges: a pair listed twice only at its last rank.
    encoder_merges: bytes | None = None


class PackedTables:
    """`Tables` over packed tables: the vocab, the merges and the Python rank table are made on
    first use, so a tokenizer that only encodes with the compiled encoder never makes them."""

    def __init__(self, packed: PackedTokenizer):
        self.packed = packed
        self.special_token_ids = dict(packed.special_token_ids)
        self.byte_ids: Sequence[int] = packed.tables.byte_ids
        self.encoder_merges: EncoderMerges = (
            packed.tables.merges if packed.encoder_merges is None else packed.encoder_merges
        )
        self.n_vocab = max([packed.max_rank, *self.special_token_ids.values()]) + 1
        self.merge_count = len(packed.tables.merges) // 12

    @cached_property
    def vocab(self) -> dict[int, bytes]:
        vocab = self.packed.tables.tokens()
        for special, token_id in self.special_token_ids.items():
            vocab[token_id] = special.encode("utf-8")
        return vocab if all(map(int.__lt__, vocab, list(vocab)[1:])) else dict(sorted(vocab.items()))

    @cached_property
    def merges(self) -> list[tuple[bytes, bytes]]:
        vocab = self.vocab
        triples = memoryview(self.packed.tables.merges).cast("I").tolist()
        return [(vocab[left], vocab[right]) for left, right in zip(triples[0::3], triples[1::3])]

    @cached_property
    def ranks(self) -> RankTable:
        merges = self.encoder_merges
        triples = memoryview(merges).cast("I").tolist() if isinstance(merges, bytes) else [n for t in merges for n in t]
        lefts, rights, merged = triples[0::3], triples[1::3], triples[2::3]
        return {(left, right): (rank, new) for rank, (left, right, new) in enumerate(zip(lefts, rights, merged))}


class TableVocab(Mapping[int, bytes]):
    """Checked tables' vocab, as a loader hands it to the Tokenizer (read-only, made on first use)."""

    def __init__(self, tables: Tables):
        self.tables = tables

    def __getitem__(self, token_id: int) -> bytes:
        return self.tables.vocab[token_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self.tables.vocab)

    def __len__(self) -> int:
        return len(self.tables.vocab)


class TableMerges(Sequence[tuple[bytes, bytes]]):
    """Checked tables' merges, as a loader hands them to the Tokenizer (read-only, made on first use)."""

    def __init__(self, tables: Tables):
        self.tables = tables

    @overload
    def __getitem__(self, index: int) -> tuple[bytes, bytes]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[bytes, bytes]]: ...

    def __getitem__(self, index: int | slice) -> tuple[bytes, bytes] | Sequence[tuple[bytes, bytes]]:
        return self.tables.merges[index]

    def __len__(self) -> int:
        return self.tables.merge_count


def tables_for(
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[bytes, bytes]],
    special_tokens: Sequence[str] | Mapping[str, int],
) -> Tables:
    """The tables of a Tokenizer's arguments: a loader's views (`TableVocab`, `TableMerges`) as
    they are, where the special tokens are the ones the tables were made with; else `build_tables`."""
    if isinstance(vocab, TableVocab) and isinstance(merges, TableMerges) and vocab.tables is merges.tables:
        tables = vocab.tables
        given = special_tokens.items() if isinstance(special_tokens, Mapping) else special_tokens
        made = tables.special_token_ids.items() if isinstance(special_tokens, Mapping) else tables.special_token_ids
        if list(given) == list(made):
            return tables
    return build_tables(vocab, merges, special_tokens)


def build_tables(
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[bytes, bytes]],
    special_tokens: Sequence[str] | Mapping[str, int],
) -> EncodingTables:
    """Check (vocab, merges) and derive the tables; special tokens must already be validated.

    A special token given as a sequence keeps the id its bytes have in the vocab (the lowest, which
    is where the trainers' vocab layout puts it), else gets a new id after the largest. A special
    token given an id (a mapping) gets exactly that id, as tiktoken's special tokens do, and is
    refused where the vocab gives that id to other bytes. No id may exceed MAX_TOKEN_ID.
    """
    table = checked_vocab(vocab)
    _check_id(max(table, default=0), "vocab id")

    ids_of: dict[bytes, list[int]] = {}
    for token_id, token in table.items():
        ids_of.setdefault(token, []).append(token_id)
    wanted_ids = special_tokens if isinstance(special_tokens, Mapping) else {}
    special_token_ids: dict[str, int] = {}
    next_id = max(table, default=-1) + 1
    for special in special_tokens:
        try:
            token = special.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ConfigError(f"special token {special!r} has a lone surrogate at position {exc.start}") from None
        wanted = wanted_ids.get(special)
        if wanted is not None:
            if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 0:
                raise ConfigError(f"special token {special!r} has id {wanted!r}, not a non-negative integer")
            _check_id(wanted, f"special token {special!r} id")
            if wanted in table and table[wanted] != token:
                raise ConfigError(
                    f"special token {special!r} cannot have id {wanted}: the vocab gives it to {table[wanted]!r}"
                )
            if wanted not in table:
                table[wanted] = token
                ids_of.setdefault(token, []).append(wanted)
            special_token_ids[special] = wanted
        elif token in ids_of:
            special_token_ids[special] = ids_of[token][0]
        else:
            _check_id(next_id, f"special token {special!r} would get id")
            table[next_id] = token
            ids_of[token] = [next_id]
            special_token_ids[special] = next_id
            next_id += 1
    if wanted_ids and any(map(int.__gt__, table, list(table)[1:])):
        table = dict(sorted(table.items()))

    # The id BPE uses for given bytes. When a special token's bytes also appear as an ordinary
    # token (a single-byte special such as "a"), the special one keeps its id and text uses the
    # other, so "a" in text and the special "a" stay distinguishable.
    special_id_of = {special.encode("utf-8"): token_id for special, token_id in special_token_ids.items()}
    ordinary: dict[bytes, int] = {
        token: next((i for i in ids if i != special_id_of[token]), ids[0]) if token in special_id_of else ids[0]
        for token, ids in ids_of.items()
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
            sound
            and left in ordinary
            and right in ordinary
            and merged in ordinary
            and (len(left) == 1 or left in made)
            and (len(right) == 1 or right in made)
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
