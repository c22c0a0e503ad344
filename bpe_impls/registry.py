"""The trainers, by name. A new trainer is one module plus one line here; tests, benchmarks and
`bpe compare` iterate this dict, so it is tested and measured without further edits."""

from __future__ import annotations

from . import bucket, naive, native_train, route_a, route_b
from .common import Trainer

IMPLEMENTATIONS: dict[str, Trainer] = {
    "naive": naive.train,
    "route_a": route_a.train,
    "route_b": route_b.train,
    "bucket": bucket.train,
}
if native_train.AVAILABLE:  # the C merge loop is optional: built only where a compiler was found
    IMPLEMENTATIONS["native"] = native_train.train

# The trainer `train_bpe` uses when none is named: the fastest registered one, as measured by
# `bpe compare` (see README, Performance): native where it was built, else route_b.
DEFAULT_IMPL = "native" if "native" in IMPLEMENTATIONS else "route_b"


def get_trainer(name: str | None) -> Trainer:
    from .errors import ConfigError

    name = DEFAULT_IMPL if name is None else name
    try:
        return IMPLEMENTATIONS[name]
    except KeyError:
        raise ConfigError(f"unknown trainer {name!r}; choose from {', '.join(IMPLEMENTATIONS)}") from None
