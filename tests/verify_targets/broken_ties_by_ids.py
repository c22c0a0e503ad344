"""Bug: a tie between pairs goes to the greatest pair of token *ids*, not of token bytes (the two
orders differ once merged tokens, whose ids are above 255, meet single bytes)."""

import reference
from reference import *  # noqa: F403

_ids: dict[bytes, int] = {}


def _best_pair(pairs):
    for pair in pairs:
        for token in pair:
            _ids.setdefault(token, token[0] if len(token) == 1 else 256 + len(_ids))
    return max(pairs, key=lambda pair: (pairs[pair], _ids[pair[0]], _ids[pair[1]]))


reference.best_pair = _best_pair
