"""The pictures: every figure is written, readable, and says what it shows (names, fitted slopes,
units, which way is better, verdicts). The SVGs keep their text as text, so it can be read back."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="plots need matplotlib: pip install -e '.[plot]'")

from bpe_impls.harness import compare, plots, scaling  # noqa: E402

EOT = "<|endoftext|>"


def _svg_text(path: Path) -> str:
    """The visible text of an SVG written with svg.fonttype 'none' (one <text> per label)."""
    return " ".join(
        re.sub(r"<[^>]+>", " ", match) for match in re.findall(r"<text[^>]*>.*?</text>", path.read_text(), flags=re.S)
    )


@pytest.fixture(scope="module")
def compare_report(tmp_path_factory) -> compare.Report:
    corpus = tmp_path_factory.mktemp("c") / "corpus.txt"
    corpus.write_text(("once upon a time there was a cat. " * 30 + EOT) * 20, encoding="utf-8")
    return compare.run_compare(corpus, 300, [EOT], impls=["naive", "route_b"])


def test_compare_plot_shows_every_row_its_value_verdict_and_direction(compare_report, tmp_path):
    png, svg = tmp_path / "c.png", tmp_path / "c.svg"
    plots.plot_compare(compare_report, png)
    plots.plot_compare(compare_report, svg)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = _svg_text(svg)
    for row in compare_report.rows:
        assert row.name in text
    assert "identical to naive: yes" in text and "same ids: yes" in text
    assert "lower is better" in text and "higher is better" in text
    merge = next(r for r in compare_report.rows if r.table == "merge" and r.name == "route_b")
    assert plots._format_value(merge.peak_mb) in text  # the value printed on its bar


def test_compare_plot_marks_a_row_that_differs(compare_report, tmp_path):
    rows = [
        dataclasses.replace(r, identical=False) if r.name == "route_b" and r.table == "merge" else r
        for r in compare_report.rows
    ]
    svg = tmp_path / "c.svg"
    plots.plot_compare(dataclasses.replace(compare_report, rows=rows), svg)
    assert "identical to naive: NO" in _svg_text(svg)


def test_scaling_plots_one_png_and_svg_per_study_with_fitted_slopes(tmp_path):
    report = scaling.ScalingReport(sizes={}, machine={"cores": 2, "cpu": "test cpu"})
    for name, k, peer in [("route_b", 0.5, False), ("native", 0.8, False), ("rustbpe", 1.0, True)]:
        for metric in ("merge", "train") if not peer else ("train",):
            curve = scaling.Curve("corpus: generated", metric, name, peer, "corpus MB")
            curve.points = [
                scaling.Point(x, 0.01 * x**k, 2.0 * x**0.5, {"distinct_bytes": 1000 * x**0.6}) for x in (1, 2, 4, 8)
            ]
            report.curves.append(curve)
    report.fits, report.interval = scaling.fit_curves(report.curves)
    written = plots.plot_scaling(report, tmp_path)
    assert sorted(p.name for p in written) == ["scaling-corpus-generated.png", "scaling-corpus-generated.svg"]
    text = _svg_text(tmp_path / "scaling-corpus-generated.svg")
    # Exact power laws: the legend shows each slope, and a zero-width interval.
    assert "route_b: slope 0.50 ± 0.00" in text and "native: slope 0.80 ± 0.00" in text
    assert "rustbpe (peer): slope 1.00 ± 0.00" in text
    assert "corpus size (MB)" in text and "seconds" in text and "lower is better" in text


def test_ours_and_peers_get_colours_from_different_families():
    colours: dict = {}
    ours = {plots._colour(name, False, colours) for name in ("naive", "route_a", "native")}
    peers = {plots._colour(name, True, colours) for name in ("huggingface", "rustbpe")}
    assert len(ours) == 3 and len(peers) == 2
    assert ours <= set(plots.OURS) and peers <= set(plots.PEERS) and not set(plots.OURS) & set(plots.PEERS)
