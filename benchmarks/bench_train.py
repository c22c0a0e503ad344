"""asv: training speed and memory, per trainer x corpus x vocab size.

    time_pretokenize     the shared first phase: counting pre-tokens (one worker), the generated
                         TinyStories and web-style corpora at 16 MB
    time_merge           the merge phase alone, from word counts counted once per run (setup_cache):
                         the Python trainers on corpus.en, the compiled one on the generated web-16MB
    time_train           end to end from the file via train_bpe (one counting worker), the
                         generated TinyStories corpus at 16 MB at vocab 10000 (kjv.txt's 40-60 ms
                         moved 30% between identical commits), the compiled trainer (the Python
                         ones: time_merge); the peers train from the same file
    track_train_peak_mb  MB train_bpe adds to the process at its peak (above the baseline), on the
                         generated web-style corpus at 16 MB (350k distinct pre-tokens)

Times are CPU seconds of the process (_common.Timed). Trainers are the names in IMPLEMENTATIONS
(read from this checkout's registry, so the grid is the same at every commit asv runs; a new one is
benchmarked without edits); peers (HuggingFace tokenizers, rustbpe, gigatoken) are extra values of
`impl`, skipped when not installed. Skips (asv shows "n/a"): a missing fixture, a trainer the
commit does not have, and combinations outside `_merge_runs` (too slow, or too short to time).
"""

from __future__ import annotations

from collections import Counter
from functools import partial

from ._common import (
    CORPORA,
    PEER_TRAINERS,
    PURE_PYTHON_TRAINERS,
    SPECIAL_TOKENS,
    TRAINERS,
    VOCAB_SIZES,
    Timed,
    corpus_path,
    count_pretokens,
    peak_mb_above_baseline,
    peak_memory_or_skip,
    peer_or_skip,
    skip,
    train_peer,
    trainer_or_skip,
    word_counts,
)


class Pretokenize(Timed):
    # ~0.1 and ~0.2 s (kjv.txt and TinyStories at 4 MB, 25-35 ms, moved 30% between identical commits)
    params = [["tinystories-16MB", "web-16MB"]]
    param_names = ["corpus"]

    def setup(self, corpus: str) -> None:
        if count_pretokens is None:
            skip("bpe_impls is not importable")
        self.path = corpus_path(corpus)

    def time_pretokenize(self, corpus: str) -> None:
        count_pretokens(self.path, SPECIAL_TOKENS, 1)


def _merge_runs(impl: str, corpus: str, vocab_size: int) -> str | None:
    """Why this combination is not timed, or None to time it: each trainer where one merge phase
    takes 0.1 s to 1 s, the Python ones at vocab 10000 only. naive: 0.4 s on the 3.8 KB sample,
    minutes on the others; the other Python trainers: 1-10 ms on the sample, 0.15-0.3 s on
    corpus.en, up to 1 s on kjv.txt; the compiled one: 30-70 ms on kjv.txt and the TinyStories
    corpora (where the spread of a few ms flagged changes between identical commits), 0.55 s on
    the generated web corpus at 16 MB (350k distinct pre-tokens) at 10000, 0.65 s at 32000."""
    python = impl in PURE_PYTHON_TRAINERS
    if impl == "naive":
        if corpus != "tinystories_sample.txt":
            return "naive takes minutes here; timed on the sample"
    elif python:
        if corpus != "corpus.en":
            return f"{impl} is timed on corpus.en (a few ms on the sample, up to 1 s on kjv.txt, minutes on web-16MB)"
    elif corpus != "web-16MB":
        return f"{impl} is timed on web-16MB (under 70 ms here)"
    if python and vocab_size != 10000:
        return f"{impl} is timed at vocab 10000"
    return None


class Merge(Timed):
    params = (TRAINERS, CORPORA, VOCAB_SIZES)
    param_names = ["impl", "corpus", "vocab_size"]

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
        reason = _merge_runs(impl, corpus, vocab_size)
        if reason:
            skip(reason)
        self.counts = counts[corpus]

    def time_merge(self, counts: dict, impl: str, corpus: str, vocab_size: int) -> None:
        self.train(self.counts, vocab_size, SPECIAL_TOKENS)


class Train(Timed):
    params = (TRAINERS + PEER_TRAINERS, ["tinystories-16MB"], [10000])
    param_names = ["impl", "corpus", "vocab_size"]

    def setup(self, impl: str, corpus: str, vocab_size: int) -> None:
        path = corpus_path(corpus)
        if impl in PEER_TRAINERS:
            peer_or_skip(impl)
            self.run = partial(train_peer, impl, path, vocab_size)
            return
        trainer_or_skip(impl)
        if impl in PURE_PYTHON_TRAINERS:
            skip(f"{impl} takes 1 s to minutes on {corpus}; Merge times its merge phase")
        from bpe_impls import train_bpe

        # One counting worker: in-process, so the process's CPU time is all the work.
        self.run = partial(train_bpe, path, vocab_size, SPECIAL_TOKENS, impl=impl, num_workers=1)

    def time_train(self, impl: str, corpus: str, vocab_size: int) -> None:
        self.run()


class TrainMemory:
    params = (TRAINERS, ["web-16MB"], [10000])
    param_names = ["impl", "corpus", "vocab_size"]
    unit = "MB"
    rounds = 2
    timeout = 300

    def setup(self, impl: str, corpus: str, vocab_size: int) -> None:
        trainer_or_skip(impl)
        if impl in PURE_PYTHON_TRAINERS:
            skip(f"{impl} takes 10 s to minutes on {corpus}")
        peak_memory_or_skip()
        path = corpus_path(corpus)
        from bpe_impls import train_bpe

        self.run = partial(train_bpe, path, vocab_size, SPECIAL_TOKENS, impl=impl, num_workers=1)

    def track_train_peak_mb(self, impl: str, corpus: str, vocab_size: int) -> float:
        return peak_mb_above_baseline(self.run)
