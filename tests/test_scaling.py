"""bpe scaling: the slope fit, the per-merge statistics, the time budget, and the command."""

from __future__ import annotations

import dataclasses
import json
import math
import sys

import numpy as np
import pytest

from bpe_impls.corpus import count_texts
from bpe_impls import cli
from bpe_impls.harness import scaling
from bpe_impls.trainers import IMPLEMENTATIONS, count_buckets, inverted_index, linked_list, naive
from bpe_impls.trainers.common import MergeStats
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
    slope, low, high, method = scaling.fit_slope([1, 2, 4], [1.0, 2.2, 3.9])
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
    return scaling.Curve("corpus: generated", "train", "route_b", False, "corpus MB",
                         [scaling.Point(x, s) for x, s in zip(xs, seconds)])


@pytest.mark.parametrize(
    ("xs", "marked"),
    [([1, 2, 4], "3 points over 4x"),          # --quick's shape: three sizes, a factor 4 apart
     ([1, 2, 4, 6], "4 points over 6x"),       # enough points, too narrow a range
     ([1, 2, 4, 8], ""), ([1, 2, 4, 8, 16], "")],
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


@pytest.mark.parametrize("module", [inverted_index, linked_list, count_buckets])
def test_stats_leave_the_result_unchanged(module, word_counts):
    stats = MergeStats()
    assert module.train(word_counts, 400, [EOT], stats=stats) == naive.train(word_counts, 400, [EOT])
    merges = len(naive.train(word_counts, 400, [EOT])[1])
    assert all(len(values) == merges for values in stats.per_merge.values())


def test_route_a_counts_exactly_the_words_holding_each_pair(word_counts):
    stats = MergeStats()
    _, merges = inverted_index.train(word_counts, 400, [EOT], stats=stats)
    assert stats.per_merge["words_touched"] == _words_holding_each_merge(word_counts, merges)


def test_bucket_visits_the_holding_words_plus_the_stale_ones(word_counts):
    stats = MergeStats()
    _, merges = count_buckets.train(word_counts, 400, [EOT], stats=stats)
    live = [t - s for t, s in zip(stats.per_merge["words_touched"], stats.per_merge["stale_words"])]
    assert live == _words_holding_each_merge(word_counts, merges)


def test_route_b_visits_at_least_every_holding_word(word_counts):
    stats = MergeStats()
    _, merges = linked_list.train(word_counts, 400, [EOT], stats=stats)
    holding = _words_holding_each_merge(word_counts, merges)
    assert all(entries >= words for entries, words in zip(stats.per_merge["index_entries"], holding))
    assert sum(stats.per_merge["heap_pushes"]) > 0


def test_summary_gives_mean_median_max_and_total():
    stats = MergeStats()
    for value in (1, 5, 3):
        stats.add(words=value)
    assert stats.summary() == {"words": {"mean": 3.0, "median": 3, "max": 5, "total": 9}}


# --- the study ------------------------------------------------------------------------------------

TINY = dataclasses.replace(
    scaling.QUICK, generated_mb=(0.02, 0.04), real_parts=(2, 1), real_cap_mb=0.02, vocabs=(300, 330),
    vocab_corpus_mb=0.02, text_mb=(0.01, 0.02), cache_sizes=(0, 64), cache_text_mb=0.01, encode_vocab=300,
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
    assert studies == {"corpus: generated", "corpus: real.txt", "vocab: generated 0.02 MB", "encode text",
                       "encode cache"}
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


def test_cli_scaling_writes_json_that_loads_back(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert cli.main(["scaling", "--quick", "--study", "encode", "--json", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "time exponent [95% CI]" in printed and "encode text" in printed
    loaded = scaling.load_json(out)
    assert {c.study for c in loaded.curves} == {"encode text", "encode cache"}
    assert json.loads(out.read_text())["machine"]["cores"] >= 1
    assert [f.slope for f in loaded.fits] == [f.slope for f in scaling.fit_curves(loaded.curves)[0]]


@pytest.mark.parametrize("argv, message", [
    (["scaling", "--budget", "0"], "--budget must be a positive number of seconds, got 0.0"),
    (["scaling", "--real", "/nonexistent/corpus.txt"], "/nonexistent/corpus.txt: no such file"),
])
def test_bad_scaling_arguments_are_one_line_errors(argv, message, capsys):
    assert cli.main(argv) == 1
    assert capsys.readouterr().err.strip() == f"bpe: error: {message}"
