"""asv: training speed and peak memory, per trainer x corpus x vocab size.

    time_pretokenize  the shared first phase: counting pre-tokens, per corpus and worker count
    time_merge        the merge phase alone, from word counts counted once per run (setup_cache)
    time_train        end to end via train_bpe (one counting worker); peers train from the file
    peakmem_train     the same, as asv's peak RSS of the benchmark process

Trainers are the names in IMPLEMENTATIONS (read from this checkout's registry, so the grid is the
same at every commit asv runs; a new one is benchmarked without edits); peers (HuggingFace
tokenizers, rustbpe) are extra values of `impl`, skipped when not installed. Skips (asv shows
"n/a"): a missing fixture, a trainer the commit does not have, naive where it takes over ~30 s.
"""

from __future__ import annotations

from collections import Counter
from functools import partial

from ._common import (
    CORPORA,
    PEER_TRAINERS,
    SPECIAL_TOKENS,
    TRAINERS,
    VOCAB_SIZES,
    corpus_path,
    count_pretokens,
    peer_or_skip,
    skip,
    too_slow,
    train_peer,
    trainer_or_skip,
    word_counts,
)


class Pretokenize:
    params = (CORPORA, [1, 2])
    param_names = ["corpus", "workers"]
    timeout = 120
    # kjv.txt takes ~0.7 s: a few samples are plenty; one process per benchmark, not asv's two.
    repeat = (1, 5, 10.0)
    rounds = 1

    def setup(self, corpus: str, workers: int) -> None:
        if count_pretokens is None:
            skip("bpe_impls is not importable")
        self.path = corpus_path(corpus)

    def time_pretokenize(self, corpus: str, workers: int) -> None:
        count_pretokens(self.path, SPECIAL_TOKENS, workers)


class Merge:
    params = (TRAINERS, CORPORA, VOCAB_SIZES)
    param_names = ["impl", "corpus", "vocab_size"]
    timeout = 180
    number = 1
    repeat = (1, 5, 20.0)
    rounds = 1

    def setup_cache(self) -> dict[str, Counter[bytes] | None]:
        # Counted once per environment and commit, then handed (pickled) to every combination, so
        # setup costs nothing and the timing is the merge phase alone.
        counts: dict[str, Counter[bytes] | None] = {}
        for name in CORPORA:
            try:
                counts[name] = word_counts(name)
            except NotImplementedError:
                counts[name] = None
        return counts

    def setup(self, counts: dict, impl: str, corpus: str, vocab_size: int) -> None:
        self.train = trainer_or_skip(impl)
        if counts[corpus] is None:
            skip(f"fixture {corpus} not found")
        if too_slow(impl, corpus, vocab_size):
            skip(f"{impl} on {corpus} at {vocab_size} takes over 30 s (see _common.py)")
        self.counts = counts[corpus]

    def time_merge(self, counts: dict, impl: str, corpus: str, vocab_size: int) -> None:
        self.train(self.counts, vocab_size, SPECIAL_TOKENS)


class Train:
    params = (TRAINERS + PEER_TRAINERS, CORPORA, VOCAB_SIZES)
    param_names = ["impl", "corpus", "vocab_size"]
    timeout = 180
    number = 1
    repeat = (1, 3, 20.0)
    rounds = 1

    def setup(self, impl: str, corpus: str, vocab_size: int) -> None:
        path = corpus_path(corpus)
        if impl in PEER_TRAINERS:
            peer_or_skip(impl)
            self.run = partial(train_peer, impl, path, vocab_size)
            return
        trainer_or_skip(impl)
        if too_slow(impl, corpus, vocab_size):
            skip(f"{impl} on {corpus} at {vocab_size} takes over 30 s (see _common.py)")
        from bpe_impls import train_bpe

        # One counting worker: the numbers then measure the algorithms, not how busy the shared
        # machine's other core is (`bpe compare` reports the parallel wall time).
        self.run = partial(train_bpe, path, vocab_size, SPECIAL_TOKENS, impl=impl, num_workers=1)

    def time_train(self, impl: str, corpus: str, vocab_size: int) -> None:
        self.run()

    def peakmem_train(self, impl: str, corpus: str, vocab_size: int) -> None:
        self.run()
