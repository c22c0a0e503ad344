"""Every picture the harness draws (matplotlib, Agg backend), made to be read at a glance.

  * `plot_scaling`: per study, log-log lines per implementation with the fitted exponent in the
    legend; this project's implementations in cool colours with solid lines, peers in warm colours
    with dashed lines, implementations under test (`--trainer/--tokenizer REF`) dash-dotted; axis
    labels with units and which way is better.
  * `plot_compare`: `bpe compare`'s tables as horizontal bars with the value printed on each bar,
    and the verdicts ("identical" to the reference trainer, "same ids" as ours) in the labels.

Each figure is written as PNG and/or SVG; `figure_svg` gives an SVG string for the HTML report.
matplotlib is imported on first use only (the `plot` extra).
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..base.atomic import atomic_write
from .history import display_scale

# This project's implementations in cool colours, peers in warm ones (each distinct within its group).
OURS = ["#1d3f8f", "#2a9d8f", "#7b2cbf", "#4895ef", "#52b788", "#6c757d", "#00b4d8"]
PEERS = ["#e85d04", "#d00000", "#ffb703", "#9c6644", "#ff006e"]
MARKERS = "osD^vP*X"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 10, "axes.titlesize": 11})
    return plt


def save(figure: Any, path: Path, dpi: int = 110) -> Path:
    """Write a figure atomically, in the format its suffix names (png or svg)."""
    with atomic_write(path, "wb") as out:
        figure.savefig(out, format=Path(path).suffix.lstrip(".") or "png", dpi=dpi, bbox_inches="tight")
    return Path(path)


def close(figure: Any) -> None:
    _pyplot().close(figure)


def figure_svg(figure: Any) -> str:
    """The figure as an <svg> element (no XML prolog), to inline in HTML."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _colour(name: str, peer: bool, names: dict[tuple[str, bool], str]) -> str:
    """One colour per implementation, stable across a figure's panels: ours cool, peers warm."""
    key = (name, peer)
    if key not in names:
        palette = PEERS if peer else OURS
        used = sum(1 for other in names if other[1] == peer)
        names[key] = palette[used % len(palette)]
    return names[key]


def _format_value(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


# --- scaling ------------------------------------------------------------------------------------

_PANELS = {  # metric -> (y attribute, y label, better)
    "merge": ("seconds", "merge phase: seconds", "lower is better"),
    "train": ("seconds", "end to end (read + count + merge): seconds", "lower is better"),
    "merge memory": ("peak_mb", "merge phase: peak memory above baseline (MB)", "lower is better"),
    "encode": ("seconds", "encode: seconds (cold cache)", "lower is better"),
    "encode cache": ("mb_per_s", "encode throughput (MB/s)", "higher is better"),
}
_X_LABELS = {
    "corpus MB": "corpus size (MB)",
    "merges": "merges (vocab size - 257)",
    "text MB": "text size (MB)",
    "cache entries": "pre-token cache size (entries; 0 = off)",
}


def _fit_of(report, curve, quantity_start: str):
    for fit in report.fits:
        if (fit.study, fit.metric, fit.name, fit.peer) == (
            curve.study,
            curve.metric,
            curve.name,
            curve.peer,
        ) and fit.quantity.startswith(quantity_start):
            return fit
    return None


def _legend_label(curve, fit) -> str:
    label = curve.name + (" (peer)" if curve.peer else "")
    if fit is not None and fit.slope is not None:
        spread = f" ± {(fit.high - fit.low) / 2:.2f}" if fit.low is not None else ""
        label += f": slope {fit.slope:.2f}{spread}"
    if curve.skipped:
        label += " (stopped by an error: see the table)" if curve.stopped else " (larger: over budget)"
    return label


def _draw_lines(axis, report, curves, attribute: str, colours: dict, log_x: bool = True) -> None:
    all_x: set[float] = set()
    quantity = "peak MB" if attribute == "peak_mb" else "seconds vs " if attribute == "seconds" else None
    for i, curve in enumerate(curves):
        if attribute == "mb_per_s":
            points = [(p.x, p.extra.get("mb_per_s")) for p in curve.points]
        else:
            points = [(p.x, getattr(p, attribute)) for p in curve.points]
        points = [(x, y) for x, y in points if y is not None and y > 0]
        if not points:
            if curve.skipped:  # say so in the legend rather than leave it out silently
                axis.plot(
                    [],
                    [],
                    linestyle="none",
                    marker="x",
                    color="#888888",
                    label=f"{curve.name}: not run ({'an error: see the table' if curve.stopped else 'over the time budget'})",
                )
            continue
        all_x.update(x for x, _ in points)
        fit = _fit_of(report, curve, quantity) if quantity else None
        axis.plot(
            [x for x, _ in points],
            [y for _, y in points],
            label=_legend_label(curve, fit),
            color=_colour(curve.name, curve.peer, colours),
            marker=MARKERS[i % len(MARKERS)],
            linestyle="--" if curve.peer else "-." if curve.user else "-",  # yours: dash-dot
            linewidth=1.8,
            markersize=5,
        )
    if log_x:
        axis.set_xscale("log")
    else:
        axis.set_xscale("symlog", linthresh=1)
    axis.set_yscale("log")
    _plain_ticks(axis)
    if all_x:  # a tick at every measured size (the sizes double, so they never crowd)
        axis.set_xticks(sorted(all_x), [f"{x:.3g}" if x < 1000 else f"{x:,.0f}" for x in sorted(all_x)])
    axis.grid(True, which="major", alpha=0.35)
    axis.grid(True, which="minor", alpha=0.12)


def _plain_ticks(axis, y: bool = True) -> None:
    """Tick labels as plain numbers (0.05, 2, 300), not powers of ten (x only when y holds names)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    plain = FuncFormatter(lambda value, _: f"{value:g}")
    if y and axis.get_yscale() == "log":  # 1, 2, 5, 10, ...: labels even on a range under a decade
        axis.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    for ax in (axis.xaxis, axis.yaxis) if y else (axis.xaxis,):
        ax.set_major_formatter(plain)
        ax.set_minor_formatter(NullFormatter())


def _better(axis, text: str) -> None:
    axis.text(
        0.99,
        0.02,
        text,
        transform=axis.transAxes,
        ha="right",
        va="bottom",
        fontsize=9,
        style="italic",
        color="#555555",
        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8},
    )


def scaling_figures(report) -> list[tuple[str, Any]]:
    """(file stem, figure) for each study in a ScalingReport."""
    plt = _pyplot()
    figures = []
    studies = list(dict.fromkeys(c.study for c in report.curves))
    colours: dict = {}  # shared by every figure: an implementation keeps its colour throughout
    for study in studies:
        curves = [c for c in report.curves if c.study == study]
        kind = curves[0].kind
        if kind in ("corpus", "vocab"):
            panels = [
                ("merge", [c for c in curves if c.metric == "merge"], "seconds"),
                ("train", [c for c in curves if c.metric == "train"], "seconds"),
                ("merge memory", [c for c in curves if c.metric == "merge"], "peak_mb"),
            ]
        elif kind == "encode text":
            panels = [("encode", curves, "seconds")]
        else:
            panels = [("encode cache", curves, "mb_per_s")]
        figure, axes = plt.subplots(1, len(panels), figsize=(7.2 * len(panels), 5.6), squeeze=False)
        for axis, (panel, panel_curves, attribute) in zip(axes[0], panels):
            _draw_lines(axis, report, panel_curves, attribute, colours, log_x=kind != "encode cache")
            _, title, better = _PANELS[panel]
            axis.set_title(title)
            axis.set_ylabel(
                {"seconds": "seconds (log scale)", "peak_mb": "MB (log scale)", "mb_per_s": "MB/s (log scale)"}[
                    attribute
                ]
            )
            axis.set_xlabel(
                _X_LABELS.get(curves[0].x_label, curves[0].x_label) + (" (log scale)" if kind != "encode cache" else "")
            )
            _better(axis, better)
            # Below the plot, so it never hides a line.
            axis.legend(fontsize=8.5, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
        where = f"{report.machine.get('cores')} cores, {report.machine.get('cpu', '')}"
        legend = "" if kind == "encode cache" else " (legend: fitted log-log slope ± 95% interval)"
        figure.suptitle(f"{study}: how cost grows{legend}\n{where}", fontsize=11)
        figure.tight_layout()
        stem = "scaling-" + "".join(ch if ch.isalnum() else "-" for ch in study).strip("-").replace("--", "-")
        figures.append((stem, figure))
    return figures


def plot_scaling(report, directory: Path, formats: Sequence[str] = ("png", "svg"), dpi: int = 110) -> list[Path]:
    """Each study of a ScalingReport as PNG and SVG in `directory`; returns the files written."""
    plt = _pyplot()
    Path(directory).mkdir(parents=True, exist_ok=True)
    written = []
    for stem, figure in scaling_figures(report):
        for suffix in formats:
            written.append(save(figure, Path(directory) / f"{stem}.{suffix}", dpi))
        plt.close(figure)
    return written


# --- compare ------------------------------------------------------------------------------------


def _is_peer(row) -> bool:
    return not row.name.startswith(("bpe_impls", "bpe ")) and row.table != "merge"  # "bpe encode ...": ours


def _bars(axis, rows, attribute: str, title: str, better: str, colours: dict, verdict: str | None) -> None:
    rows = [r for r in rows if getattr(r, attribute) is not None]
    labels, values, colors = [], [], []
    for row in rows:
        label = re.sub(r"\S*/", "", row.name)  # a path/to/file.py:function reference: its file's name
        if verdict and row.identical is not None:
            label += f"\n{verdict}: {'yes' if row.identical else 'NO'}"
        labels.append(label)
        values.append(getattr(row, attribute))
        colors.append(_colour(row.name, _is_peer(row), colours))
    positions = range(len(rows))
    axis.barh(list(positions), values, color=colors, height=0.65)
    axis.set_yticks(list(positions), labels, fontsize=8.5)
    axis.set_ylim(max(len(rows), 3) - 0.5, -0.5)  # first row on top, as in the printed table; bars never fat
    log = attribute == "seconds" and values and max(values) / max(min(values), 1e-9) > 30
    if log:
        axis.set_xscale("log")  # naive and the compiled trainer differ by orders of magnitude
        _plain_ticks(axis, y=False)
    top = max(values) if values else 1
    for position, value in zip(positions, values):
        axis.text(value, position, " " + _format_value(value), va="center", ha="left", fontsize=8.5)
    axis.set_xlim(right=top * (6 if log else 1.3))
    unit = {"seconds": "seconds", "peak_mb": "MB", "mb_per_s": "MB/s"}[attribute]
    axis.set_xlabel(f"{unit}{' (log scale)' if log else ''} - {better}")
    axis.set_title(title)
    axis.grid(True, axis="x", alpha=0.3)


def compare_figure(report) -> Any:
    """`bpe compare`'s results: merge phase, end to end and encode panels."""
    plt = _pyplot()
    rows = report.rows
    panels = [
        (
            [r for r in rows if r.table == "merge"],
            "seconds",
            "merge phase: seconds",
            "lower is better",
            f"identical to {report.reference}",
        ),
        ([r for r in rows if r.table == "merge"], "peak_mb", "merge phase: peak MB", "lower is better", None),
        ([r for r in rows if r.table == "train"], "seconds", "train end to end: seconds", "lower is better", None),
        (
            [r for r in rows if r.table == "train"],
            "peak_mb",
            "train end to end: peak MB (process tree)",
            "lower is better",
            None,
        ),
    ]
    # Every throughput table: one-core encode, batch encode on every core, corpus to ids file.
    for table in dict.fromkeys(r.table for r in rows if r.table not in ("merge", "train") and r.mb_per_s is not None):
        panels.append(
            ([r for r in rows if r.table == table], "mb_per_s", f"{table}: MB/s", "higher is better", "same ids")
        )
    panels = [p for p in panels if p[0]]
    columns = 2
    lines = max(len(p[0]) for p in panels)
    figure, axes = plt.subplots(
        math.ceil(len(panels) / columns),
        columns,
        figsize=(13, (1.0 + 0.42 * lines) * math.ceil(len(panels) / columns) + 0.8),
        squeeze=False,
    )
    colours: dict = {}
    for axis, (panel_rows, attribute, title, better, verdict) in zip(axes.flat, panels):
        _bars(axis, panel_rows, attribute, title, better, colours, verdict)
    for axis in list(axes.flat)[len(panels) :]:
        axis.set_visible(False)
    cores = report.machine.get("cores")
    figure.suptitle(
        f"bpe compare: {Path(report.corpus).name} ({report.corpus_mb:.1f} MB), vocab {report.vocab_size}, "
        f"{cores} cores    this project in cool colours, peers in warm colours",
        fontsize=11,
    )
    # Leave the top 0.6 inch to the title: plain tight_layout lets it run into the first panels'.
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.6 / figure.get_figheight()))
    return figure


def plot_compare(report, path: Path) -> list[Path]:
    """Draw `bpe compare`'s results to `path` (PNG or SVG by its suffix)."""
    plt = _pyplot()
    figure = compare_figure(report)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    written = [save(figure, Path(path))]
    plt.close(figure)
    return written


def history_figure(series: Sequence[Any]) -> Any:
    """One benchmark's history over commits (`history.Series` of one benchmark, machine and
    environment; a line per parameter combination), each regression asv found ringed in red with
    its size."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(9, 3.2))
    # The lines may cover different commits (a benchmark's parameters changed): one shared axis, in
    # the order history.load_asv_history put the commits in.
    ranked = {commit: rank for line in series for commit, rank in zip(line.commits, line.ranks)}
    commits = sorted(ranked, key=ranked.__getitem__)
    where = {commit: i for i, commit in enumerate(commits)}
    largest = max((v for line in series for v in line.values if v is not None), default=1.0)
    scale, unit = display_scale(series[0].unit, largest)
    for index, line in enumerate(series):
        points = [(where[c], v / scale) for c, v in zip(line.commits, line.values) if v is not None]
        if points:
            axis.plot(
                [i for i, _ in points],
                [v for _, v in points],
                marker=MARKERS[index % len(MARKERS)],
                markersize=4,
                color=OURS[index % len(OURS)],
                label=line.params or line.benchmark,
            )
        for regression in line.regressions:
            after = (where[regression.after], regression.value_after / scale)
            axis.plot(
                *after,
                marker="o",
                markersize=11,
                markerfacecolor="none",
                markeredgecolor="#d00000",
                markeredgewidth=1.5,
            )
            axis.annotate(
                f"+{regression.value_after / regression.value_before - 1:.0%}",
                after,
                color="#d00000",
                fontsize=8,
                textcoords="offset points",
                xytext=(6, 4),
            )
    step = max(1, len(commits) // 12)  # at most about a dozen commit labels
    axis.set_xticks(
        range(0, len(commits), step),
        [commits[i] for i in range(0, len(commits), step)],
        rotation=30,
        ha="right",
        fontsize=8,
    )
    axis.set_xlim(-0.5, len(commits) - 0.5)
    axis.set_xlabel("commit (oldest first); red rings: regressions by asv compare's rule")
    quantity = {"ms": "time (ms)", "s": "time (s)", "MiB": "memory (MiB)"}.get(unit, unit or "value")
    axis.set_ylabel(f"{quantity}, lower is better")
    axis.set_ylim(0, largest / scale * 1.15)  # room above the top point for a regression's label
    axis.grid(alpha=0.3)
    axis.set_title(f"{series[0].benchmark}  [{series[0].machine}, {series[0].environment}]", fontsize=10)
    if len(series) > 1:
        axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    figure.tight_layout()
    return figure
