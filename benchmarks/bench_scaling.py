"""asv: how cost grows with the corpus, so a regression in growth shows in the history, not only
a regression at one point (`bpe scaling` is the full study; this is its tracked core).

    time_merge / peakmem_merge   the merge phase from the word counts of the generated corpus at
                                 1, 4 and 16 MB (vocab 2048), per trainer
    time_count                   counting those corpora's pre-tokens (one worker)
    track_merge_exponent         the fitted log-log slope of merge seconds against corpus MB over
                                 the three sizes, per trainer: a change in growth, whatever the speed

naive is left out: its O(merges x corpus) takes minutes here (bench_train covers it on the small
fixtures). Commits without the generated corpus (bpe_impls.harness.generators) skip.
"""

from __future__ import annotations

import time
from collections import Counter

import numpy as np

from ._common import SPECIAL_TOKENS, TRAINERS, count_pretokens, skip, trainer_or_skip

SIZES_MB = [1, 4, 16]
VOCAB = 2048
SCALING_TRAINERS = [name for name in TRAINERS if name != "naive"] or ["route_b"]


def _generated(mb: int):
    try:
        from bpe_impls.harness.generators.tinystories import default_corpus
    except ImportError:
        skip("the generated corpus (bpe_impls.harness.generators.tinystories) is not in this commit")
    return default_corpus(mb * 1_000_000)


def _all_counts() -> dict[int, Counter[bytes] | None]:
    counts: dict[int, Counter[bytes] | None] = {}
    for mb in SIZES_MB:
        try:
            counts[mb] = count_pretokens(_generated(mb), SPECIAL_TOKENS, 1) if count_pretokens else None
        except NotImplementedError:
            counts[mb] = None
    return counts


class MergeGrowth:
    params = (SCALING_TRAINERS, SIZES_MB)
    param_names = ["impl", "corpus_mb"]
    timeout = 300
    number = 1
    repeat = (1, 5, 20.0)
    rounds = 1

    def setup_cache(self) -> dict[int, Counter[bytes] | None]:
        return _all_counts()  # once per environment and commit: the timings are the merge phase alone

    def setup(self, counts: dict, impl: str, corpus_mb: int) -> None:
        self.train = trainer_or_skip(impl)
        if counts[corpus_mb] is None:
            skip("no generated corpus at this commit")
        self.counts = counts[corpus_mb]

    def time_merge(self, counts: dict, impl: str, corpus_mb: int) -> None:
        self.train(self.counts, VOCAB, SPECIAL_TOKENS)

    def peakmem_merge(self, counts: dict, impl: str, corpus_mb: int) -> None:
        self.train(self.counts, VOCAB, SPECIAL_TOKENS)


class CountGrowth:
    params = [SIZES_MB]
    param_names = ["corpus_mb"]
    timeout = 300
    number = 1
    repeat = (1, 5, 20.0)
    rounds = 1

    def setup(self, corpus_mb: int) -> None:
        if count_pretokens is None:
            skip("bpe_impls is not importable")
        self.path = _generated(corpus_mb)

    def time_count(self, corpus_mb: int) -> None:
        count_pretokens(self.path, SPECIAL_TOKENS, 1)


class MergeExponent:
    params = [SCALING_TRAINERS]
    param_names = ["impl"]
    timeout = 600
    unit = "exponent"
    number = 1
    repeat = 1
    rounds = 1

    def setup_cache(self) -> dict[int, Counter[bytes] | None]:
        return _all_counts()

    def setup(self, counts: dict, impl: str) -> None:
        self.train = trainer_or_skip(impl)
        if any(value is None for value in counts.values()):
            skip("no generated corpus at this commit")

    def track_merge_exponent(self, counts: dict, impl: str) -> float:
        """Slope of log(best-of-3 seconds) against log(corpus MB)."""
        seconds = []
        for mb in SIZES_MB:
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                self.train(counts[mb], VOCAB, SPECIAL_TOKENS)
                best = min(best, time.perf_counter() - start)
            seconds.append(best)
        return float(np.polyfit(np.log(SIZES_MB), np.log(seconds), 1)[0])
