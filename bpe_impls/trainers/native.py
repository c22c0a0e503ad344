"""The native trainer: route_b's design with its merge loop in C (`csrc/trainer*.c`).

The C extension is optional (setup.py builds it when a compiler is present); AVAILABLE says
whether it was built, and the registry lists "native" only then. Its data structures, the cost of
one merge and how it keeps memory low are described at the top of `csrc/trainer.c`: a cell array
of all words (a token's first cell holds its id, its last the offset back), a pair table of 32-byte
records with append-only occurrence lists, per-merge shift arrays, and a lazy max-heap of the pairs
above a moving floor. It takes word counts as a mapping or as PackedCounts, which the C side reads
directly, so a corpus's distinct pre-tokens never become Python objects on the way from the counter
to the merge loop.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..base import compiled
from ..base.errors import ConfigError
from ..corpus.tally import PackedCounts
from .common import Merges, Vocab, WordCounts, build_vocab, checked_budget, merge_budget, merge_progress

try:
    from .. import _native_train
except ImportError:  # built without a C compiler: the pure-Python trainers still work
    _native_train = None  # type: ignore[assignment]  # (AVAILABLE says so before any use)

AVAILABLE: bool = _native_train is not None and not compiled.DISABLED  # BPE_IMPLS_PURE=1 turns it off


def train(
    word_counts: WordCounts, vocab_size: int, special_tokens: Sequence[str] = (), *, progress: bool = False
) -> tuple[Vocab, Merges]:
    if not AVAILABLE:
        raise ConfigError(
            "the compiled trainer 'native' is not available (bpe_impls._native_train was not built, "
            "or BPE_IMPLS_PURE=1): reinstall with a C compiler available, or choose another trainer"
        )
    if isinstance(word_counts, PackedCounts):
        # Read by the C loader straight from the packed bytes (which it validates): no Python
        # object per word, and no unpacking.
        num_merges = merge_budget(vocab_size, special_tokens)
        source: WordCounts | bytes | list[bytes] = (
            word_counts.hand_over() if word_counts.disposable else word_counts.data
        )
    else:
        num_merges = checked_budget(word_counts, vocab_size, special_tokens)
        source = word_counts
    with merge_progress(num_merges, progress) as bar:
        # The C loop calls bar.update(k) after each batch of k merges (a few hundred), and
        # stops by itself when no pair is left, so a budget beyond sys.maxsize changes nothing.
        on_merges = bar.update if progress else None
        merges = _native_train.train(source, min(num_merges, sys.maxsize), on_merges)
    return build_vocab(special_tokens, merges), merges
