"""Bug: a tie between pairs goes to the lexicographically *smallest* pair."""

import reference
from reference import *  # noqa: F403


def _best_pair(pairs):
    return min(pairs, key=lambda pair: (-pairs[pair], pair))


reference.best_pair = _best_pair
