"""The trainers, by name. A new trainer is one module plus one line here; tests, benchmarks and
`bpe compare` iterate this dict, so it is tested and measured without further edits."""

from __future__ import annotations

from ..base.errors import ConfigError
from . import count_buckets, inverted_index, linked_list, naive, native
from .common import Trainer

IMPLEMENTATIONS: dict[str, Trainer] = {
    "naive": naive.train,
    "route_a": inverted_index.train,
    "route_b": linked_list.train,
    "bucket": count_buckets.train,
}
if native.AVAILABLE:  # the C merge loop is optional: built only where a compiler was found
    IMPLEMENTATIONS["native"] = native.train

# Each trainer is also known by its module's name (the registry's short names came first and stay:
# results files, benchmarks and scripts use them). Aliases resolve everywhere a name is taken but are
# not keys of IMPLEMENTATIONS, so nothing that iterates the trainers runs one twice.
ALIASES: dict[str, str] = {
    "inverted_index": "route_a",
    "linked_list": "route_b",
    "count_buckets": "bucket",
}

# Trainers that take PackedCounts as they are (the others get them as a Mapping, unpacked):
# `train_bpe` asks the counting backend for packed counts for these.
TAKES_PACKED: frozenset[str] = frozenset({"native"})

# The trainer `train_bpe` uses when none is named: the fastest registered one, as measured by
# `bpe compare` (see README, Performance): native where it was built, else route_b.
DEFAULT_IMPL = "native" if "native" in IMPLEMENTATIONS else "route_b"


def trainer_names() -> list[str]:
    """Every name a trainer answers to: the registry's, then the module-name aliases of those built."""
    return [*IMPLEMENTATIONS, *(alias for alias, name in ALIASES.items() if name in IMPLEMENTATIONS)]


def canonical_name(name: str | None) -> str:
    """The registry name of trainer `name` (None: DEFAULT_IMPL; an alias: its registry name)."""
    name = DEFAULT_IMPL if name is None else ALIASES.get(name, name)
    if name not in IMPLEMENTATIONS:
        raise ConfigError(f"unknown trainer {name!r}; choose from {', '.join(trainer_names())}")
    return name


def takes_packed(name: str | None) -> bool:
    """Whether the trainer `name` (None: DEFAULT_IMPL) reads PackedCounts without unpacking them."""
    return canonical_name(name) in TAKES_PACKED


def get_trainer(name: str | None) -> Trainer:
    """The trainer registered in IMPLEMENTATIONS as `name`, or as the module `name` aliases.

    Args:
        name: a trainer's short name ("naive", "route_a", "route_b", "bucket", "native") or its
            module's name ("inverted_index", ...); None: DEFAULT_IMPL, the fastest.

    Returns:
        `trainer(word_counts, vocab_size, special_tokens, *, progress=False) -> (vocab, merges)`.

    Raises:
        ConfigError: no trainer has that name (the message lists them).

    Example:
        >>> get_trainer("bucket")({b"low": 5, b"lower": 2}, 258)[1]
        [(b'o', b'w'), (b'l', b'ow')]
    """
    return IMPLEMENTATIONS[canonical_name(name)]
