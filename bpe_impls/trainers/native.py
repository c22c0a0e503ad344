"""The native trainer: route_b's design with its merge loop in C (`csrc/trainer.c`).

The C extension is optional (setup.py builds it when a compiler is present); AVAILABLE says
whether it was built, and the registry lists "native" only then.

Data structures (C arrays; the merge loop touches no Python object and runs with the GIL released):
- cells: every distinct word of two or more bytes, one byte per cell, in one int32 array with a
  boundary cell before each word that holds the word's count (counts from about 2**31 up: an index
  into a side table). A merge walks back to it for the count; in a word of 32 bytes or more it
  bisects the long words' boundary positions instead. About 4 bytes per byte of distinct words.
  A token covers consecutive cells (its bytes): its first cell holds its id, its last cell (if it
  has several) the offset back to its first. So the next token starts at `cell + len(token)` and
  the previous one is read off the cell before: the words need no prev/next links.
- tokens: every token's bytes back to back, plus a hash table bytes -> id. One id per byte
  string: a merge whose bytes already exist as a token (`a`+`bc` after `ab`+`c`) reuses that id,
  because the naive trainer compares tokens by their bytes.
- pairs: an open-addressing hash table (left id, right id) -> pair record (32 bytes): the pair's
  int64 count and its occurrence list, the cells where the pair was seen. A slot is 4 bytes: the
  record's id and, in the bits the id does not need, a tag of the key's hash, so a probe reads a
  record only when the tag matches. Lists are append-only, as in
  route_b: an entry is live only if the cell still starts the left token and the next token is the
  right one; stale and repeated entries are skipped on use. A list of one entry holds it in the
  record, the next few come from a shared arena, and one of 16384 entries or more gets pages of its
  own (on Linux), returned as soon as it shrinks or dies. Memory follows the live pairs, not all
  pairs ever made: a pair counted down to 0 frees its list at once and leaves the table after the
  merge (its record is reused), and a list whose pair's count falls below a quarter of its entries
  drops its stale ones (each live entry weighs >= 1, so the work is at most 4/3 of the entries
  dropped). Freed heap memory goes back to the system (malloc_trim) before the words' pairs are
  indexed and whenever 16 MB of lists have been freed.
- shifts: two arrays indexed by token id, filled once per merge of (a, b): for a neighbour token t,
  the ids of (t, a) and (t, new) on the left, (b, t) and (new, t) on the right. A merge's many
  occurrences share few neighbours, so most pair lookups are an array read, not a hash probe.
- heap: a binary max-heap of (count, left id, right id), ordered by `merge_priority` (count, then
  left bytes, then right bytes, as Python compares bytes; each token's first 8 bytes, kept as one
  integer, settle most ties). Lazy, as in route_b: an entry's count is an upper bound of the
  pair's count, which the pop checks against the table. It holds only the pairs at or above a
  floor: when it reaches its limit (65536 entries to start) the floor rises to keep about a quarter
  of them; when it runs dry the floor falls and the pairs above it are pushed again. Most of a web
  corpus's millions of pairs are too rare ever to be merged and never enter it.

One merge of (a, b) costs O(len(occurrences of (a, b))) cell and array updates -- each entry
once, live or stale; a run of a's is walked once more for a == b -- plus a hash probe per distinct
neighbour token, and O(log heap) per pair whose count grew and per stale entry popped later:
route_b's bounds, without its Python objects; plus the compactions (bounded by the entries
appended) and the floor's moves (a pass over the pairs each time the heap runs dry, a few times a
run). Counts are int64: word counts whose pair occurrences
sum past 2**63 - 1 raise OverflowError instead of wrapping.

It takes word counts as a mapping or as PackedCounts (bpe_impls.corpus.tally), which the C side
reads directly: `train_bpe` counts into packed form for this trainer, so a corpus's millions of
distinct pre-tokens never become Python objects on the way from the counter to the merge loop, and
hands them over (PackedCounts.disposable), so the packed bytes are freed once the words are laid
out, before the merges.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..base import compiled
from ..base.errors import ConfigError
from .common import Merges, Vocab, WordCounts
from .common import build_vocab, checked_budget, merge_budget, merge_progress
from ..corpus.tally import PackedCounts

try:
    from .. import _native_train
except ImportError:  # built without a C compiler: the pure-Python trainers still work
    _native_train = None

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
        source: object = word_counts.hand_over() if word_counts.disposable else word_counts.data
    else:
        num_merges = checked_budget(word_counts, vocab_size, special_tokens)
        source = word_counts
    with merge_progress(num_merges, progress) as bar:
        # The C loop calls bar.update(k) after each batch of k merges (a few hundred), and
        # stops by itself when no pair is left, so a budget beyond sys.maxsize changes nothing.
        on_merges = bar.update if progress else None
        merges = _native_train.train(source, min(num_merges, sys.maxsize), on_merges)
    return build_vocab(special_tokens, merges), merges
