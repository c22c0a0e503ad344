"""pytest-benchmark: every trainer, encoder and peer side by side, one table per phase.

    pytest benchmarks --benchmark-only --benchmark-group-by=group
    pytest benchmarks --benchmark-only -k "not naive"   # without the 10-30 s naive row

Not part of the test suite: pyproject's `testpaths = ["tests"]` keeps plain `pytest` out of
benchmarks/. Groups (one row per trainer/encoder in each):

    pretokenize                    counting pre-tokens, per corpus and worker count
    merge corpus.en v2000          the merge phase from word counts, every trainer
    merge kjv.txt v10000           the same on the 4 MB corpus, the fast trainers only
    train kjv.txt v10000           end to end from the file: one fast trainer of ours vs the peers
    encode corpus.en               Tokenizer.encode with the kjv v10000 tokenizer, per encoder, and the
                                   encode peers (peers.PEER_ENCODERS; quicktok skips:
                                   only its built-in vocabs)
    encode batch kjv.txt tN        kjv.txt's lines as one batch on N = 1, 2 threads: ours
                                   encode_batch_to_numpy, and the peers' batch APIs

asv also imports this module (it imports everything in benchmark_dir, in an environment without
pytest), so it stays import-safe: no module-level pytest import -- parametrization comes from the
`pytest_generate_tests` hook, pytest is imported inside the tests -- and no names asv would take
for benchmarks (time_*, peakmem_*, track_*, mem_*, timeraw_*).
"""

from __future__ import annotations

from collections import Counter
from functools import cache, lru_cache
from typing import Any

from ._common import (
    ENCODERS,
    IMPLEMENTATIONS,
    PEER_ENCODERS,
    PEER_TRAINERS,
    SPECIAL_TOKENS,
    corpus_path,
    fast_trainer,
    peer_encode,
    peer_encode_batch,
    peer_or_skip,
    too_slow,
    train_peer,
    word_counts,
)

_MERGE_RUNS = [("corpus.en", 2000), ("kjv.txt", 10000)]
_PRETOKENIZE_RUNS = [("corpus.en", 1), ("kjv.txt", 1), ("kjv.txt", 2)]


def pytest_generate_tests(metafunc: Any) -> None:
    """Parametrize from the registries at collection time, so new trainers/encoders appear."""
    fixtures = metafunc.fixturenames
    if "merge_case" in fixtures:
        # naive only where it finishes in seconds (the corpus.en row, 10-30 s); on kjv it takes minutes.
        cases = [
            (impl, corpus, vocab)
            for corpus, vocab in _MERGE_RUNS
            for impl in IMPLEMENTATIONS
            if not too_slow(impl, corpus, vocab)
        ]
        metafunc.parametrize("merge_case", cases, ids=[f"{c}-v{v}-{i}" for i, c, v in cases])
    if "train_impl" in fixtures:
        # Ours is one fast trainer (end to end the shared counting phase dominates anyway).
        metafunc.parametrize("train_impl", [*filter(None, [fast_trainer()]), *PEER_TRAINERS])
    if "encoder" in fixtures:
        metafunc.parametrize("encoder", [*ENCODERS, *PEER_ENCODERS])
    if "batch_encoder" in fixtures:
        metafunc.parametrize("batch_encoder", ["bpe_impls", *PEER_ENCODERS])
        metafunc.parametrize("threads", [1, 2])
    if "pretokenize_case" in fixtures:
        metafunc.parametrize("pretokenize_case", _PRETOKENIZE_RUNS, ids=[f"{c}-w{w}" for c, w in _PRETOKENIZE_RUNS])


def _or_skip(func, *args):
    """Call one of _common's helpers, turning its NotImplementedError (asv's skip) into pytest's."""
    try:
        return func(*args)
    except NotImplementedError as exc:
        import pytest

        pytest.skip(str(exc))


@cache
def _counts(corpus: str) -> Counter[bytes]:
    return word_counts(corpus)


@lru_cache(maxsize=1)
def _kjv_tokenizer_data() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    return IMPLEMENTATIONS[fast_trainer()](_counts("kjv.txt"), 10000, SPECIAL_TOKENS)


def test_pretokenize(benchmark, pretokenize_case: tuple[str, int]) -> None:
    from bpe_impls import count_pretokens

    corpus, workers = pretokenize_case
    path = _or_skip(corpus_path, corpus)
    benchmark.group = "pretokenize"
    benchmark.pedantic(count_pretokens, args=(path, SPECIAL_TOKENS, workers), rounds=3, warmup_rounds=1)


def test_merge(benchmark, merge_case: tuple[str, str, int]) -> None:
    impl, corpus, vocab_size = merge_case
    counts = _or_skip(_counts, corpus)
    benchmark.group = f"merge {corpus} v{vocab_size}"
    rounds = 1 if impl == "naive" else 3
    benchmark.pedantic(IMPLEMENTATIONS[impl], args=(counts, vocab_size, SPECIAL_TOKENS), rounds=rounds)


def test_train_end_to_end(benchmark, train_impl: str) -> None:
    path = _or_skip(corpus_path, "kjv.txt")
    benchmark.group = "train kjv.txt v10000"
    if train_impl in PEER_TRAINERS:
        _or_skip(peer_or_skip, train_impl)
        benchmark.pedantic(train_peer, args=(train_impl, path, 10000), rounds=3)
    else:
        from bpe_impls import train_bpe

        # All cores for counting, as a user runs it (the peers parallelise too).
        benchmark.pedantic(train_bpe, args=(path, 10000, SPECIAL_TOKENS), kwargs={"impl": train_impl}, rounds=3)


def test_encode(benchmark, encoder: str) -> None:
    text = _or_skip(corpus_path, "corpus.en").read_text(encoding="utf-8")
    _or_skip(corpus_path, "kjv.txt")
    vocab, merges = _kjv_tokenizer_data()
    benchmark.group = "encode corpus.en"
    benchmark.extra_info["MB"] = len(text.encode("utf-8")) / 1e6
    if encoder in PEER_ENCODERS:
        _or_skip(peer_encode, encoder, vocab, merges)  # skip here, not in the setup below

        # A fresh peer per round too: its caches start empty, as ours do.
        def fresh_peer() -> tuple[tuple[Any, str], dict]:
            return (peer_encode(encoder, vocab, merges), text), {}

        benchmark.pedantic(lambda encode, t: encode(t), setup=fresh_peer, rounds=5)
        return
    from bpe_impls import Tokenizer

    # A fresh tokenizer per round (untimed setup): each round starts with an empty pre-token cache.
    def fresh() -> tuple[tuple[Any, str], dict]:
        return (Tokenizer(vocab, merges, SPECIAL_TOKENS, encoder=encoder), text), {}

    benchmark.pedantic(lambda tok, t: tok.encode(t), setup=fresh, rounds=5)


def test_encode_batch(benchmark, batch_encoder: str, threads: int) -> None:
    path = _or_skip(corpus_path, "kjv.txt")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    vocab, merges = _kjv_tokenizer_data()
    benchmark.group = f"encode batch kjv.txt t{threads}"
    benchmark.extra_info["MB"] = path.stat().st_size / 1e6
    if batch_encoder in PEER_ENCODERS:
        encode = _or_skip(peer_encode_batch, batch_encoder, vocab, merges, threads)
    else:
        from bpe_impls import Tokenizer

        tokenizer = Tokenizer(vocab, merges, SPECIAL_TOKENS)
        encode = lambda batch: tokenizer.encode_batch_to_numpy(batch, threads)  # noqa: E731
    benchmark.pedantic(encode, args=(lines,), rounds=3, warmup_rounds=1)
