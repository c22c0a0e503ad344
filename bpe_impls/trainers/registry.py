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

# Trainers that take PackedCounts as they are (the others get them as a Mapping, unpacked):
# `train_bpe` asks the counting backend for packed counts for these.
TAKES_PACKED: frozenset[str] = frozenset({"native"})

# The trainer `train_bpe` uses when none is named: the fastest registered one, as measured by
# `bpe compare` (see README, Performance): native where it was built, else route_b.
DEFAULT_IMPL = "native" if "native" in IMPLEMENTATIONS else "route_b"


def takes_packed(name: str | None) -> bool:
    """Whether the trainer `name` (None: DEFAULT_IMPL) reads PackedCounts without unpacking them."""
    return (DEFAULT_IMPL if name is None else name) in TAKES_PACKED


def get_trainer(name: str | None) -> Trainer:
    """The trainer registered as `name` (None: DEFAULT_IMPL); a ConfigError listing them otherwise."""
    name = DEFAULT_IMPL if name is None else name
    try:
        return IMPLEMENTATIONS[name]
    except KeyError:
        raise ConfigError(f"unknown trainer {name!r}; choose from {', '.join(IMPLEMENTATIONS)}") from None
