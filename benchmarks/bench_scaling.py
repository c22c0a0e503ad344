"""asv: how the merge phase's cost grows with the corpus, so a regression in growth shows in the
history, not only a regression at one point (`bpe scaling` is the full study, with fitted
exponents; a fitted slope over three sizes is too noisy to track here).

    time_merge   the merge phase from the word counts of the generated TinyStories corpus at 4, 16
                 and 64 MB (vocab 10000), per compiled trainer

The Python trainers are left out (0.2 s to minutes per run here; bench_train times them on
corpus.en, `bpe scaling` measures their growth).
Times are CPU seconds of the process (_common.Timed). Counting those corpora is timed in
bench_train.Pretokenize. Commits without the generated corpus (bpe_impls.harness.generators) skip.
"""

from __future__ import annotations

from collections import Counter

from ._common import PURE_PYTHON_TRAINERS, SPECIAL_TOKENS, TRAINERS, Timed, skip, trainer_or_skip, word_counts

SIZES_MB = [4, 16, 64]
VOCAB = 10000
SCALING_TRAINERS = [name for name in TRAINERS if name not in PURE_PYTHON_TRAINERS] or ["native"]


class MergeGrowth(Timed):
    params = (SCALING_TRAINERS, SIZES_MB)
    param_names = ["impl", "corpus_mb"]

    def setup_cache(self) -> dict[int, Counter[bytes] | None]:
        # Once per environment and commit: the timings are the merge phase alone.
        counts: dict[int, Counter[bytes] | None] = {}
        for mb in SIZES_MB:
            try:
                counts[mb] = word_counts(f"tinystories-{mb}MB")
            except NotImplementedError:
                counts[mb] = None
        return counts

    def setup(self, counts: dict, impl: str, corpus_mb: int) -> None:
        self.train = trainer_or_skip(impl)
        if counts[corpus_mb] is None:
            skip("no generated corpus at this commit")
        self.counts = counts[corpus_mb]

    def time_merge(self, counts: dict, impl: str, corpus_mb: int) -> None:
        self.train(self.counts, VOCAB, SPECIAL_TOKENS)
