"""Per-merge statistics of the Python trainers, for `bpe scaling`, counted around their merge loops.

Each trainer's loop calls its steps by their module-level names: route_a `pop_best` and
`_apply_merge`, route_b `pop_best` and `_merge_pair`, bucket `_merge_in_words`. `train_with_stats`
runs the trainer's own code (the same code object) with its global names looked up in a copy of its
module's namespace, in which those steps are wrapped to count. So:

- the trainer modules hold no statistics code, and a run without statistics costs nothing extra;
- no module is ever changed: there is nothing to install or to restore, even when a run raises,
  and instrumented runs in several threads at once, or beside plain runs, cannot see each other;
- the counts are those of the real run: the same code on the same data, making the same merges.

What a loop does not hold already (bucket's stale words) is found here by re-scanning, before the
step runs; that cost falls on instrumented runs only.

Counters, one value per merge (`MergeStats.per_merge[counter][i]` is merge i's):
- route_a: words_touched (words rewritten), heap_pushes (entries pushed for pairs that rose) and
  stale_discarded (heap entries popped and dropped as out of date before the best one);
- route_b: index_entries (occurrence-index entries visited, stale ones included), heap_pushes and
  stale_discarded;
- bucket: words_touched (word ids visited from the index), stale_words (those no longer holding
  the pair) and bucket_moves (pairs whose count changed).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from typing import Any

from ..base.errors import ConfigError
from . import count_buckets, inverted_index, linked_list
from .common import Merges, Trainer, Vocab, WordCounts

Steps = dict[str, Callable[..., Any]]  # a step's name in the trainer's module -> its wrapper
# Given the counts to fill and the trainer's namespace (its original steps): the wrappers, and what
# to call when the run has ended.
Instrument = Callable[["MergeStats", Mapping[str, Any]], tuple[Steps, Callable[[], None]]]


class MergeStats:
    """Per-merge counters: `per_merge[name][i]` is counter `name` for merge i."""

    __slots__ = ("per_merge",)

    def __init__(self) -> None:
        self.per_merge: dict[str, list[int]] = {}

    def add(self, **counters: int) -> None:
        for name, value in counters.items():
            self.per_merge.setdefault(name, []).append(value)

    def summary(self) -> dict[str, dict[str, float]]:
        """Each counter's mean, median, maximum and total over the merges."""
        out = {}
        for name, values in self.per_merge.items():
            ordered = sorted(values)
            out[name] = {
                "mean": sum(values) / len(values),
                "median": ordered[len(ordered) // 2],
                "max": ordered[-1],
                "total": sum(values),
            }
        return out


class _LazyHeapCounts:
    """For a loop that pops with `common.pop_best`, rewrites, then pushes the pairs that rose: each
    merge's stale_discarded (heap length before and after its pop) and heap_pushes (its growth
    after the pop), after the one counter its rewrite step reports (`rewriting`).

    A merge's pushes are known only when the next pop starts, or the run ends (`finish`): its
    record is added then.
    """

    def __init__(self, stats: MergeStats, pop_best: Callable[..., Any]) -> None:
        self.stats = stats
        self._pop_best = pop_best
        self.heap: list = []
        self.after_pop = self.stale = 0
        self.pending: dict[str, int] | None = None  # the rewrite's counter, until the pushes are known

    def pop_best(self, heap: list, counts: Mapping) -> Any:
        self.finish()
        before = len(heap)
        key = self._pop_best(heap, counts)
        if key is not None:
            self.heap, self.after_pop, self.stale = heap, len(heap), before - len(heap) - 1
        return key

    def rewriting(self, **counter: int) -> None:
        self.pending = counter

    def finish(self) -> None:
        if self.pending is not None:
            self.stats.add(**self.pending, heap_pushes=len(self.heap) - self.after_pop, stale_discarded=self.stale)
            self.pending = None


def _route_a(stats: MergeStats, original: Mapping[str, Any]) -> tuple[Steps, Callable[[], None]]:
    heap = _LazyHeapCounts(stats, original["pop_best"])
    apply_merge = original["_apply_merge"]

    def _apply_merge(best, new, words, counts, pair_counts, index):
        heap.rewriting(words_touched=len(index[best]))
        return apply_merge(best, new, words, counts, pair_counts, index)

    return {"pop_best": heap.pop_best, "_apply_merge": _apply_merge}, heap.finish


def _route_b(stats: MergeStats, original: Mapping[str, Any]) -> tuple[Steps, Callable[[], None]]:
    heap = _LazyHeapCounts(stats, original["pop_best"])
    merge_pair = original["_merge_pair"]

    def _merge_pair(a, b, new, shift, counts, index):
        heap.rewriting(index_entries=len(index[a << shift | b]))
        return merge_pair(a, b, new, shift, counts, index)

    return {"pop_best": heap.pop_best, "_merge_pair": _merge_pair}, heap.finish


def _holds(tokens: list[int], a: int, b: int) -> bool:
    """Whether `a` is followed by `b` somewhere in tokens."""
    return any(left == a and right == b for left, right in pairwise(tokens))


def _bucket(stats: MergeStats, original: Mapping[str, Any]) -> tuple[Steps, Callable[[], None]]:
    merge_in_words = original["_merge_in_words"]

    def _merge_in_words(words, word_ids, a, b, new, index, key_shift):
        # The rewrite skips stale words without saying which: re-scan them first, for the count only.
        stale = sum(1 for wid in word_ids if not _holds(words[wid].tokens, a, b))
        delta = merge_in_words(words, word_ids, a, b, new, index, key_shift)
        stats.add(
            words_touched=len(word_ids), stale_words=stale, bucket_moves=sum(1 for change in delta.values() if change)
        )
        return delta

    return {"_merge_in_words": _merge_in_words}, lambda: None


# Trainer -> how to count around its loop. A Python trainer gains statistics by a line here.
INSTRUMENTS: dict[Trainer, Instrument] = {
    inverted_index.train: _route_a,
    linked_list.train: _route_b,
    count_buckets.train: _bucket,
}


def has_stats(trainer: Trainer) -> bool:
    """Whether `train_with_stats` can count per-merge statistics for this trainer."""
    return trainer in INSTRUMENTS


def _with_steps(function: Callable[..., Any], steps: Steps) -> Callable[..., Any]:
    """`function`'s own code, its global names looked up in a copy of its module's namespace with
    `steps` in place of the functions of those names. The module itself is left as it is."""
    missing = [name for name in steps if name not in function.__code__.co_names]
    if missing:  # renamed, or no longer called by name: counting would silently miss it
        raise RuntimeError(
            f"{function.__module__}.{function.__qualname__} no longer calls "
            f"{', '.join(missing)} by name; update {__name__}"
        )
    clone = types.FunctionType(
        function.__code__,
        {**function.__globals__, **steps},
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    clone.__kwdefaults__ = function.__kwdefaults__
    return clone


def train_with_stats(
    trainer: Trainer,
    word_counts: WordCounts,
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    *,
    progress: bool = False,
) -> tuple[Vocab, Merges, MergeStats]:
    """Run `trainer` (a function of `INSTRUMENTS`) as it is, counting per merge; returns what it
    returns and the counts. Thread-safe: each call counts in its own copy of the namespace."""
    instrument = INSTRUMENTS.get(trainer)
    if instrument is None or not isinstance(trainer, types.FunctionType):
        raise ConfigError(
            f"{trainer.__module__}.{getattr(trainer, '__qualname__', trainer)} has no per-merge statistics; "
            f"these have: {', '.join(t.__module__ for t in INSTRUMENTS)}"
        )
    stats = MergeStats()
    steps, finish = instrument(stats, trainer.__globals__)
    vocab, merges = _with_steps(trainer, steps)(word_counts, vocab_size, special_tokens, progress=progress)
    finish()
    uneven = {name: len(values) for name, values in stats.per_merge.items() if len(values) != len(merges)}
    if uneven:
        raise RuntimeError(
            f"{trainer.__module__}: counted {uneven} values for {len(merges)} merges; "
            f"its loop no longer calls its steps once per merge: update {__name__}"
        )
    return vocab, merges, stats
