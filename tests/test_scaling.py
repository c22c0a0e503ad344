"""bpe scaling: the slope fit, the per-merge statistics, the time budget, and the command."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import sys
import threading

import numpy as np
import pytest

from bpe_impls import cli
from bpe_impls.base.errors import ConfigError
from bpe_impls.corpus import count_pretokens, count_texts
from bpe_impls.harness import scaling
from bpe_impls.trainers import IMPLEMENTATIONS, count_buckets, inverted_index, linked_list, naive
from bpe_impls.trainers.instrumented import MergeStats, train_with_stats
from bpe_impls.trainers.naive import merge_word

EOT = "<|endoftext|>"


# --- the fit --------------------------------------------------------------------------------------


def test_fit_recovers_an_exact_power_law_with_a_collapsed_interval():
    xs = [1, 2, 4, 8, 16]
    slope, low, high, _ = scaling.fit_slope(xs, [3.0 * x**1.5 for x in xs])
    assert slope == pytest.approx(1.5) and low == pytest.approx(1.5) and high == pytest.approx(1.5)


def test_fit_interval_covers_the_true_exponent_under_noise():
    rng = np.random.default_rng(0)
    xs = np.array([1, 2, 4, 8, 16, 32], dtype=float)
    covered = 0
    for _ in range(200):
        ys = 0.1 * xs**0.7 * np.exp(rng.normal(0, 0.1, len(xs)))
        _, low, high, method = scaling.fit_slope(xs, ys)
        covered += low <= 0.7 <= high
    # A 95% interval covers the truth about 95% of the time (the normal approximation, for 4
    # degrees of freedom, noticeably less: that is why the method is stated).
    assert covered >= (180 if method == "Student's t" else 150)


def test_fit_without_scipy_uses_the_normal_approximation_and_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy", None)  # import scipy now raises ImportError
    _, low, high, method = scaling.fit_slope([1, 2, 4], [1.0, 2.2, 3.9])
    assert method.startswith("normal approximation")
    xs, ys = np.log([1, 2, 4]), np.log([1.0, 2.2, 3.9])
    residual = ys - np.polyval(np.polyfit(xs, ys, 1), xs)
    half = 1.959964 * math.sqrt(residual @ residual / 1 / ((xs - xs.mean()) @ (xs - xs.mean())))
    assert (high - low) / 2 == pytest.approx(half)


def test_fit_needs_two_points_for_a_slope_and_three_for_an_interval():
    assert scaling.fit_slope([1], [1.0])[0] is None
    assert scaling.fit_slope([1, 2], [1.0, 4.0])[:3] == (pytest.approx(2.0), None, None)
    assert scaling.fit_slope([1, 2, 4], [1.0, None, 16.0])[:3] == (pytest.approx(2.0), None, None)


def _curve(xs, seconds):
    return scaling.Curve(
        "corpus: generated", "train", "route_b", False, "corpus MB", [scaling.Point(x, s) for x, s in zip(xs, seconds)]
    )


@pytest.mark.parametrize(
    ("xs", "marked"),
    [
        ([1, 2, 4], "3 points over 4x"),  # --quick's shape: three sizes, a factor 4 apart
        ([1, 2, 4, 6], "4 points over 6x"),  # enough points, too narrow a range
        ([1, 2, 4, 8], ""),
        ([1, 2, 4, 8, 16], ""),
    ],
)
def test_a_fit_on_too_few_points_is_marked_in_the_table(xs, marked):
    report = scaling.ScalingReport(sizes={}, curves=[_curve(xs, [0.1 * x for x in xs])])
    report.fits, report.interval = scaling.fit_curves(report.curves)
    cell = scaling.exponent_rows(report)[0][3]
    if marked:
        assert cell.startswith("(1.00") and f"{marked}: too few to fit)" in cell
        assert "too few for the slope to mean anything" in scaling.format_scaling(report)
    else:
        assert cell.startswith("1.00") and "too few" not in scaling.format_scaling(report)


# --- per-merge statistics -------------------------------------------------------------------------


def _words_holding_each_merge(word_counts, merges):
    """For each merge in order, how many distinct words hold its pair just before it: replayed
    with the naive trainer's own merge_word, independently of the trainers' bookkeeping."""
    words = [tuple(bytes([b]) for b in word) for word in word_counts if len(word) > 1]
    holding = []
    for pair in merges:
        holding.append(sum(1 for word in words if any(p == pair for p in zip(word, word[1:]))))
        words = [merge_word(word, pair) for word in words]
    return holding


@pytest.fixture(scope="module")
def word_counts(request):
    text = "".join(["the cat sat on the mat. ", "aaaa bbbb abab ", "hello there, the theme then. "] * 40)
    return count_texts([text, "aaaaaaa the end", "mat mat matter"], [EOT])


INSTRUMENTED = [inverted_index, linked_list, count_buckets]


@pytest.mark.parametrize("module", INSTRUMENTED)
def test_stats_leave_the_result_unchanged(module, word_counts):
    vocab, merges, stats = train_with_stats(module.train, word_counts, 400, [EOT])
    assert (vocab, merges) == naive.train(word_counts, 400, [EOT])
    assert all(len(values) == len(merges) for values in stats.per_merge.values())


def test_route_a_counts_exactly_the_words_holding_each_pair(word_counts):
    _, merges, stats = train_with_stats(inverted_index.train, word_counts, 400, [EOT])
    assert stats.per_merge["words_touched"] == _words_holding_each_merge(word_counts, merges)


def test_bucket_visits_the_holding_words_plus_the_stale_ones(word_counts):
    _, merges, stats = train_with_stats(count_buckets.train, word_counts, 400, [EOT])
    live = [t - s for t, s in zip(stats.per_merge["words_touched"], stats.per_merge["stale_words"])]
    assert live == _words_holding_each_merge(word_counts, merges)


def test_route_b_visits_at_least_every_holding_word(word_counts):
    _, merges, stats = train_with_stats(linked_list.train, word_counts, 400, [EOT])
    holding = _words_holding_each_merge(word_counts, merges)
    assert all(entries >= words for entries, words in zip(stats.per_merge["index_entries"], holding))
    assert sum(stats.per_merge["heap_pushes"]) > 0


# Per-merge statistics as the trainers counted them inline (their old `stats=MergeStats()` argument,
# at commit 3849349), before the counting moved out of their loops into trainers/instrumented.py.
# Counted on a fixed dict (no pre-tokenizer involved) at vocab 300 with one special token ...
LITERAL_WORDS = {
    b"aaaa": 5,
    b"aaaaaaa": 1,
    b"abab": 3,
    b"bbbb": 3,
    b" the": 9,
    b"the": 4,
    b" there": 3,
    b" then": 3,
    b" theme": 2,
    b"hello": 2,
    b" mat": 4,
    b" matter": 2,
    b" cat": 3,
    b" sat": 3,
    b"a": 7,
    b".": 6,
    b"baba": 2,
    b" abba": 2,
    b"ba": 3,
    b" bat": 2,
}
LITERAL_STATS = {
    "route_a": {
        "words_touched": [
            6,
            5,
            2,
            4,
            5,
            4,
            1,
            2,
            2,
            2,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
        ],
        "heap_pushes": [
            5,
            4,
            2,
            3,
            6,
            4,
            1,
            1,
            2,
            1,
            1,
            1,
            1,
            0,
            1,
            0,
            0,
            0,
            0,
            0,
            2,
            1,
            1,
            1,
            1,
            0,
            1,
            0,
            1,
            1,
            0,
            0,
            0,
            0,
            1,
            0,
        ],
        "stale_discarded": [
            0,
            0,
            1,
            0,
            1,
            0,
            0,
            0,
            0,
            1,
            3,
            1,
            3,
            1,
            0,
            0,
            1,
            1,
            0,
            1,
            3,
            0,
            1,
            0,
            0,
            2,
            4,
            0,
            0,
            1,
            1,
            1,
            2,
            2,
            1,
            0,
        ],
    },
    "route_b": {
        "index_entries": [
            6,
            5,
            9,
            4,
            6,
            5,
            4,
            3,
            2,
            2,
            1,
            1,
            1,
            1,
            2,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
        ],
        "heap_pushes": [
            5,
            4,
            2,
            3,
            6,
            4,
            1,
            1,
            2,
            1,
            1,
            1,
            1,
            0,
            1,
            0,
            0,
            0,
            0,
            0,
            2,
            1,
            1,
            1,
            1,
            0,
            1,
            0,
            1,
            1,
            0,
            0,
            0,
            0,
            1,
            0,
        ],
        "stale_discarded": [
            0,
            0,
            1,
            0,
            1,
            0,
            0,
            0,
            0,
            1,
            3,
            1,
            3,
            1,
            0,
            0,
            1,
            1,
            0,
            1,
            3,
            0,
            1,
            0,
            0,
            2,
            4,
            0,
            0,
            1,
            1,
            1,
            2,
            2,
            1,
            0,
        ],
    },
    "bucket": {
        "words_touched": [
            6,
            5,
            2,
            4,
            5,
            5,
            2,
            2,
            2,
            2,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
            1,
        ],
        "stale_words": [
            0,
            0,
            0,
            0,
            0,
            1,
            1,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ],
        "bucket_moves": [
            11,
            9,
            3,
            7,
            11,
            9,
            2,
            2,
            5,
            3,
            3,
            3,
            3,
            1,
            3,
            1,
            1,
            1,
            1,
            1,
            5,
            3,
            3,
            3,
            3,
            1,
            3,
            1,
            3,
            3,
            1,
            1,
            1,
            1,
            3,
            1,
        ],
    },
}
# ... and on corpus.en's pre-tokens (4763 distinct, 27758 in all, with <|endoftext|> special) at
# vocab 300, as `bpe scaling` counts them (`_stats_run`).
CORPUS_EN_STATS = {
    "route_a": {
        "words_touched": [
            190,
            222,
            163,
            561,
            17,
            452,
            79,
            1,
            448,
            349,
            330,
            3,
            134,
            186,
            239,
            122,
            335,
            394,
            150,
            153,
            150,
            214,
            309,
            337,
            10,
            268,
            283,
            87,
            293,
            255,
            153,
            1,
            184,
            233,
            233,
            14,
            126,
            27,
            176,
            224,
            77,
            136,
            18,
        ],
        "heap_pushes": [
            9,
            16,
            31,
            66,
            7,
            70,
            13,
            0,
            60,
            20,
            53,
            1,
            27,
            54,
            58,
            13,
            14,
            77,
            14,
            14,
            50,
            55,
            64,
            64,
            2,
            16,
            42,
            16,
            50,
            72,
            16,
            0,
            15,
            59,
            66,
            6,
            43,
            13,
            57,
            18,
            15,
            19,
            5,
        ],
        "stale_discarded": [
            0,
            0,
            0,
            0,
            0,
            0,
            1,
            0,
            0,
            1,
            0,
            2,
            0,
            0,
            1,
            1,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            1,
            1,
            0,
            0,
            1,
            0,
            0,
            1,
            0,
            0,
            0,
            1,
            0,
            0,
            0,
            0,
            3,
            0,
            0,
            0,
        ],
    },
    "route_b": {
        "index_entries": [
            190,
            222,
            164,
            585,
            17,
            477,
            79,
            1,
            545,
            349,
            340,
            3,
            165,
            188,
            280,
            122,
            335,
            427,
            150,
            153,
            159,
            214,
            393,
            444,
            10,
            268,
            285,
            88,
            349,
            275,
            153,
            1,
            184,
            307,
            291,
            19,
            129,
            44,
            176,
            224,
            101,
            136,
            18,
        ],
        "heap_pushes": [
            9,
            16,
            31,
            50,
            7,
            54,
            13,
            0,
            60,
            20,
            52,
            1,
            24,
            51,
            58,
            13,
            14,
            47,
            14,
            14,
            48,
            55,
            51,
            54,
            2,
            16,
            42,
            16,
            50,
            69,
            16,
            0,
            15,
            59,
            62,
            6,
            42,
            13,
            57,
            18,
            15,
            19,
            5,
        ],
        "stale_discarded": [
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ],
    },
    "bucket": {
        "words_touched": [
            190,
            222,
            163,
            561,
            17,
            452,
            79,
            1,
            537,
            349,
            339,
            3,
            161,
            186,
            275,
            122,
            335,
            411,
            150,
            153,
            155,
            214,
            383,
            434,
            10,
            268,
            283,
            88,
            344,
            273,
            153,
            1,
            184,
            305,
            288,
            19,
            128,
            44,
            176,
            224,
            101,
            136,
            18,
        ],
        "stale_words": [
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            89,
            0,
            9,
            0,
            27,
            0,
            36,
            0,
            0,
            17,
            0,
            0,
            5,
            0,
            74,
            97,
            0,
            0,
            0,
            1,
            51,
            18,
            0,
            0,
            0,
            72,
            55,
            5,
            2,
            17,
            0,
            0,
            24,
            0,
            0,
        ],
        "bucket_moves": [
            19,
            33,
            63,
            99,
            15,
            108,
            27,
            1,
            121,
            41,
            104,
            3,
            49,
            101,
            116,
            27,
            29,
            94,
            29,
            29,
            97,
            110,
            103,
            108,
            5,
            33,
            84,
            33,
            99,
            138,
            33,
            1,
            31,
            118,
            124,
            13,
            85,
            27,
            115,
            37,
            31,
            39,
            11,
        ],
    },
}
TRAINER_OF = {"route_a": inverted_index.train, "route_b": linked_list.train, "bucket": count_buckets.train}


@pytest.mark.parametrize("name", TRAINER_OF)
def test_stats_are_those_the_loops_counted_inline_on_a_fixed_input(name):
    vocab, merges, stats = train_with_stats(TRAINER_OF[name], LITERAL_WORDS, 300, [EOT])
    assert (vocab, merges) == naive.train(LITERAL_WORDS, 300, [EOT])
    assert stats.per_merge == LITERAL_STATS[name]
    assert list(stats.per_merge) == list(LITERAL_STATS[name])  # the same counters in the same order


@pytest.mark.parametrize("name", TRAINER_OF)
def test_scaling_stats_are_those_the_loops_counted_inline_on_corpus_en(name, corpus_en):
    counts = count_pretokens(corpus_en, scaling.SPECIALS, 1)
    # If this fails, the pre-tokenizer changed, not the statistics: the values below need recounting.
    assert (len(counts), sum(counts.values())) == (4763, 27758)
    expected = MergeStats()
    for values in zip(*CORPUS_EN_STATS[name].values()):
        expected.add(**dict(zip(CORPUS_EN_STATS[name], values)))
    assert scaling._stats_run(name, counts, 300) == expected.summary()
    assert train_with_stats(TRAINER_OF[name], counts, 300, scaling.SPECIALS)[2].per_merge == CORPUS_EN_STATS[name]


def test_which_trainers_have_statistics():
    assert {name: scaling.has_stats(name) for name in IMPLEMENTATIONS} == {
        name: name in {"route_a", "route_b", "bucket"} for name in IMPLEMENTATIONS
    }
    for trainer in IMPLEMENTATIONS.values():  # the registry's shape: no trainer takes `stats` any more
        assert list(inspect.signature(trainer).parameters) == [
            "word_counts",
            "vocab_size",
            "special_tokens",
            "progress",
        ]
    with pytest.raises(ConfigError, match="no per-merge statistics"):
        train_with_stats(naive.train, LITERAL_WORDS, 300)


def _functions(module):
    """The module's callables by name, but for the progress bar, which the tests below stand in for."""
    return {name: value for name, value in vars(module).items() if callable(value) and name != "merge_progress"}


class _Bar:
    """A stand-in for the trainers' progress bar: `on_update` runs inside the merge loop, once per merge."""

    def __init__(self, on_update):
        self.on_update = on_update

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self):
        self.on_update()


@pytest.mark.parametrize("module", INSTRUMENTED)
def test_no_wrapper_is_ever_installed_in_the_trainer_module(module, monkeypatch):
    # Checked merge by merge from inside the loop, in a plain run and an instrumented one: the
    # module's functions are the originals (the wrappers live in the run's own copy of the
    # namespace); and so they are after an instrumented run that raised mid-loop.
    originals = _functions(module)
    seen = []
    monkeypatch.setattr(
        module, "merge_progress", lambda total, enabled: _Bar(lambda: seen.append(_functions(module) == originals))
    )
    plain = module.train(LITERAL_WORDS, 300, [EOT])
    assert train_with_stats(module.train, LITERAL_WORDS, 300, [EOT])[:2] == plain
    assert len(seen) == 2 * len(plain[1]) and all(seen)

    def fail_at_the_third_merge():
        if len(seen) == 3:
            raise RuntimeError("stopped mid-loop")
        seen.append(True)

    seen.clear()
    monkeypatch.setattr(module, "merge_progress", lambda total, enabled: _Bar(fail_at_the_third_merge))
    with pytest.raises(RuntimeError, match="stopped mid-loop"):
        train_with_stats(module.train, LITERAL_WORDS, 300, [EOT])
    assert _functions(module) == originals  # function equality is identity
    monkeypatch.undo()
    assert module.train(LITERAL_WORDS, 300, [EOT]) == plain


@pytest.mark.parametrize("module", INSTRUMENTED)
def test_instrumented_runs_in_threads_at_once_count_only_their_own_run(module, word_counts, monkeypatch):
    # Three runs of one trainer in lock step, merge by merge (a barrier in the progress bar): two
    # instrumented on different inputs and one plain. Each gets what it gets alone.
    vocab = 280  # 23 merges: both inputs have more pairs than that
    inputs = {"literal": LITERAL_WORDS, "words": word_counts}
    alone = {key: train_with_stats(module.train, counts, vocab, [EOT]) for key, counts in inputs.items()}
    assert all(len(result[1]) == vocab - 257 for result in alone.values())
    barrier = threading.Barrier(3, timeout=30)
    monkeypatch.setattr(module, "merge_progress", lambda total, enabled: _Bar(barrier.wait))
    results, errors = {}, []

    def run(key, job):
        try:
            results[key] = job()
        except BaseException as exc:  # noqa: BLE001 -- reported below
            errors.append(exc)
            barrier.abort()

    threads = [
        threading.Thread(
            target=run, args=(key, lambda counts=counts: train_with_stats(module.train, counts, vocab, [EOT]))
        )
        for key, counts in inputs.items()
    ]
    threads.append(threading.Thread(target=run, args=("plain", lambda: module.train(LITERAL_WORDS, vocab, [EOT]))))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for key, (vocab_, merges, stats) in alone.items():
        assert results[key][:2] == (vocab_, merges) and results[key][2].per_merge == stats.per_merge
    assert results["plain"] == alone["literal"][:2]


def test_summary_gives_mean_median_max_and_total():
    stats = MergeStats()
    for value in (1, 5, 3):
        stats.add(words=value)
    assert stats.summary() == {"words": {"mean": 3.0, "median": 3, "max": 5, "total": 9}}


# --- the study ------------------------------------------------------------------------------------

TINY = dataclasses.replace(
    scaling.QUICK,
    generated_mb=(0.02, 0.04),
    real_parts=(2, 1),
    real_cap_mb=0.02,
    vocabs=(300, 330),
    vocab_corpus_mb=0.02,
    text_mb=(0.01, 0.02),
    cache_sizes=(0, 64),
    cache_text_mb=0.01,
    encode_vocab=300,
)


def test_a_point_over_budget_is_skipped_with_every_larger_one_and_the_table_says_so():
    # naive's first point is predicted from its cost per byte and merge; the others from their
    # first measured point, so a budget of a microsecond lets each of them measure one point only.
    report = scaling.run_scaling(dataclasses.replace(TINY, budget=1e-6), real=[], studies=("corpus",))
    curves = {(c.metric, c.name): c for c in report.curves}
    assert curves["merge", "naive"].points == []
    assert curves["merge", "naive"].skipped[0].startswith("skipped from 0.02 MB: predicted")
    assert curves["train", "naive"].skipped == ["skipped from 0.02 MB: its merge phase was over budget"]
    for name in IMPLEMENTATIONS:
        if name != "naive":
            assert [p.x for p in curves["merge", name].points] == [0.02]
            assert curves["merge", name].skipped[0].startswith("skipped from 0.04 MB")
    table = scaling.format_scaling(report)
    naive_row = next(line for line in table.splitlines() if " merge " in line and " naive " in line)
    assert "skipped from 0.02 MB" in naive_row


@pytest.mark.slow
def test_the_study_measures_every_trainer_and_encoder_and_fits_each_curve(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("In the beginning God created the heaven and the earth.\n" * 800, encoding="utf-8")
    report = scaling.run_scaling(TINY, real=[real])
    studies = {c.study for c in report.curves}
    assert studies == {
        "corpus: generated",
        "corpus: real.txt",
        "vocab: generated 0.02 MB",
        "encode text",
        "encode cache",
    }
    from bpe_impls.encoding import ENCODERS

    for study in ("corpus: generated", "corpus: real.txt"):
        merged = {c.name for c in report.curves if c.study == study and c.metric == "merge" and c.points}
        assert merged == set(IMPLEMENTATIONS)
    assert {c.name for c in report.curves if c.study == "encode text"} == set(ENCODERS)
    # Distinct pre-token bytes are recorded per point, and each curve got a fit row.
    point = next(c for c in report.curves if c.study == "corpus: generated").points[-1]
    assert point.extra["distinct_bytes"] > point.extra["distinct_pretokens"] > 0
    fitted = {(f.study, f.metric, f.name) for f in report.fits}
    assert all((c.study, c.metric, c.name) in fitted for c in report.curves if c.kind != "encode cache")
    # The Python trainers' statistics ride along; the compiled one has none.
    for curve in report.curves:
        if curve.metric == "merge" and curve.kind == "corpus":
            assert bool(curve.points[0].extra.get("stats")) == (curve.name in {"route_a", "route_b", "bucket"})
    assert (
        "per-merge statistics of route_a, route_b, bucket (untimed instrumented runs; none for naive"
        in scaling.format_scaling(report)
    )


def test_cli_scaling_writes_json_that_loads_back(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert cli.main(["scaling", "--quick", "--study", "encode", "--json", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "time exponent [95% CI]" in printed and "encode text" in printed
    loaded = scaling.load_json(out)
    assert {c.study for c in loaded.curves} == {"encode text", "encode cache"}
    assert json.loads(out.read_text())["machine"]["cores"] >= 1
    assert [f.slope for f in loaded.fits] == [f.slope for f in scaling.fit_curves(loaded.curves)[0]]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["scaling", "--budget", "0"], "--budget must be a positive number of seconds, got 0.0"),
        (["scaling", "--real", "/nonexistent/corpus.txt"], "/nonexistent/corpus.txt: no such file"),
    ],
)
def test_bad_scaling_arguments_are_one_line_errors(argv, message, capsys):
    assert cli.main(argv) == 1
    assert capsys.readouterr().err.strip() == f"bpe: error: {message}"
