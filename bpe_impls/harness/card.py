"""`bpe report OUT --trainer REF --tokenizer REF`: one page about one implementation, its report card.

What a student with a CS336 adapter, or the author of a new trainer or encoder, asks at once: is
mine right, how fast and lean is it next to the best ones, and how does its cost grow. The card
answers each with the harness's own tools, run on the implementation in its isolated worker:

1. `bpe verify`: every clause of the contract, a verdict per clause, each divergence shrunk with
   its hint (verify/engine.py);
2. CS336's own resource checks, as the assignment's tests define them and with their figures
   (cs336.py);
3. `bpe compare`: train end to end and encode beside this project's own (and the peers' with
   `peers`), the implementation's rows highlighted (compare.py);
4. `bpe scaling`: its curves and fitted slopes beside native's, with a sentence on what each slope
   means (scaling.py; QUICK's sizes with `quick`);
5. memray: where its peak memory is held (compare.py's --memray), where memray is installed;
6. the machine and the versions.

The corpus is CS336's corpus.en (the shared fixture, else the sample bundled with the package; the
page says which) at vocab 500 and `<|endoftext|>`, as the assignment's speed test; `quick` cuts it
to its first 40 KB at vocab 300 and verifies with 25 cases a clause: a smoke run, marked as one.
The page is report.py's: offline, every figure inline, the data inline as JSON (and in card.json).
"""

from __future__ import annotations

import html
import importlib.util
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..base.atomic import atomic_write
from ..base.errors import ConfigError
from . import compare, report, scaling
from .cs336 import CS336Report, run_cs336_for
from .fixtures import missing_text, real_text
from .machine import describe_machine
from .verify import ImplementationError, SearchSettings, verify_tokenizer, verify_trainer

SPECIAL_TOKENS = ["<|endoftext|>"]
VOCAB_SIZE = 500  # CS336's speed test: corpus.en at vocab 500
QUICK_VOCAB_SIZE = 300
QUICK_CORPUS_BYTES = 40_000
QUICK_EXAMPLES = 25  # cases a clause in a smoke run
EXAMPLES = 200


@dataclass
class Card:
    trainers: list[str]
    tokenizers: list[str]
    corpus: str  # what the measurements ran on, described ("corpus.en (shared fixture)")
    quick: bool
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    compare: compare.Report | None = None
    cs336: list[CS336Report] = field(default_factory=list)
    scaling: scaling.ScalingReport | None = None
    machine: dict[str, Any] = field(default_factory=dict)


def _corpus(quick: bool, folder: Path) -> tuple[Path, str]:
    """(the card's corpus file, how the page describes it)."""
    found = real_text("corpus.en")
    if found is None:
        raise ConfigError(missing_text("corpus.en"))
    if not quick:
        return found.path, found.describe()
    data = found.path.read_bytes()[:QUICK_CORPUS_BYTES]
    cut = folder / "corpus_quick.txt"
    cut.write_bytes(data[: data.rfind(b"\n") + 1])  # whole lines
    return cut, f"the first {cut.stat().st_size} bytes of {found.describe()}"


def _verify(
    trainers: Sequence[str],
    tokenizers: Sequence[str],
    quick: bool,
    timeout: float,
    python: str | None,
    log: Callable[[str], None],
) -> list[dict[str, Any]]:
    options = SearchSettings(max_examples=QUICK_EXAMPLES if quick else EXAMPLES, python=python)
    verdicts = []
    jobs = [(ref, verify_trainer) for ref in trainers] + [(ref, verify_tokenizer) for ref in tokenizers]
    for ref, verify in jobs:
        log(f"bpe verify: {ref}")
        try:
            verdicts.append(verify(ref, options, call_timeout=min(timeout, 60.0)).to_json())
        except ImplementationError as exc:  # it cannot be loaded, or fails every call: the card says so
            verdicts.append({"status": "error", "error": str(exc), "ref": ref, "clauses": [], "divergences": []})
    return verdicts


def run_card(
    trainers: Sequence[str],
    tokenizers: Sequence[str],
    *,
    quick: bool = False,
    peers: bool = False,
    timeout: float = 600.0,
    python: str | None = None,
    memray_dir: Path | None = None,
    log: Callable[[str], None] = lambda message: None,
) -> Card:
    """Verify, check by CS336's tests, compare (and profile, into `memray_dir`) and scale the
    implementations named; `timeout`: seconds one call may take (verify's calls: at most 60)."""
    if not (trainers or tokenizers):
        raise ConfigError("a report card needs a --trainer or a --tokenizer")
    with tempfile.TemporaryDirectory(prefix="bpe_card_") as folder:
        corpus, described = _corpus(quick, Path(folder))
        card = Card(list(trainers), list(tokenizers), described, quick, machine=describe_machine())
        card.verdicts = _verify(trainers, tokenizers, quick, timeout, python, log)
        card.cs336 = run_cs336_for(trainers, tokenizers, quick=quick, timeout=timeout, python=python, log=log)
        if memray_dir is not None and importlib.util.find_spec("memray") is None:
            log("memray is not installed: no memory profile (pip install memray)")
            memray_dir = None
        card.compare = compare.run_compare(
            corpus,
            QUICK_VOCAB_SIZE if quick else VOCAB_SIZE,
            SPECIAL_TOKENS,
            impls=[],  # the merge phase from word counts: ours only, not what a CS336 trainer does
            peers=peers,
            builtins=peers,  # without the peers, one row of ours beside theirs
            log=log,
            trainers=trainers,
            tokenizers=tokenizers,
            timeout=timeout,
            python=python,
            memray_dir=memray_dir,
        )
        card.compare.corpus = described  # (not the temporary file's path)
    # (each point's timeout from the study's budget, not `timeout`: a point far over it is cut short)
    targets = scaling.Targets(tuple(trainers), tuple(tokenizers), builtins=False, python=python)
    card.scaling = scaling.run_scaling(scaling.sizes_for(targets, quick), targets=targets, log=log)
    return card


# --- the page ----------------------------------------------------------------------------------


def clause_section(verdicts: Sequence[dict[str, Any]]) -> str:
    """Every clause of every implementation verified, then each divergence with its hint."""
    rows, parts = [], []
    for verdict in verdicts:
        if verdict["status"] == "error":
            parts.append(f'<p class="note">{html.escape(verdict["ref"])}: {html.escape(verdict["error"])}</p>')
        names = verdict.get("checked", {}).get("implementations", {})
        for clause in verdict["clauses"]:
            status = {"passed": "passed", "diverged": "NO"}.get(clause["status"], clause["status"])
            target = names.get(clause["target"], clause["target"])
            rows.append([target, clause["clause"], clause["cases"], status, clause.get("reason", "")])
    if rows:
        parts.insert(0, report.html_table(["target", "clause", "cases", "verdict", "note"], rows, (0, 1, 3, 4)))
    for verdict in verdicts:
        for divergence in verdict["divergences"]:
            example = divergence["counterexample"]
            shown = example.get("corpus", example.get("text"))
            lines = [
                f"<b>{html.escape(divergence['target'])}</b>, clauses {html.escape(', '.join(divergence['clauses']))}: "
                f"{html.escape(divergence['summary'])}",
                f"smallest input found: <code>{html.escape(repr(shown))}</code>; "
                f"first difference: {html.escape(str(example.get('first_difference')))}",
            ]
            if divergence.get("diagnosis"):
                lines.append(f"hint: {html.escape(divergence['diagnosis'])}")
            if divergence.get("reproduces"):
                lines.append(f"reproduced {divergence['reproduces']['times']} of {divergence['reproduces']['of']} runs")
            parts.append("<p>" + "<br>".join(lines) + "</p>")
        parts += [f'<p class="note">{html.escape(note)}</p>' for note in verdict.get("notes", [])]
    return "\n".join(parts)


def cs336_section(reports: Sequence[CS336Report]) -> str:
    """Each check: its figure against upstream's threshold, the verdict, and how it was obtained."""
    parts = []
    for checked in reports:
        rows = [
            [c.name, c.subject or "-", c.figure, c.threshold, c.verdict.replace("fail", "NO", 1)]
            for c in checked.checks
        ]
        parts.append(report.html_table(["check", "implementation", "figure", "threshold", "verdict"], rows, (0, 1, 4)))
        parts += [
            f'<p class="note"><b>{html.escape(c.name)}</b> ({html.escape(c.source)}): '
            f"{html.escape(c.quote)}<br>{html.escape(c.note)}</p>"
            for c in checked.checks
            if c.status != "skipped"
        ]
    if reports:
        parts.insert(0, f'<p class="note">As {html.escape(reports[0].upstream)} defines them.</p>')
    return "\n".join(parts)


def _summary(card: Card) -> str:
    """The card's first lines: the verdicts, and the speed beside ours."""
    lines = []
    for verdict in card.verdicts:
        refs = verdict.get("ref") or ", ".join(verdict.get("checked", {}).get("implementations", {}).values())
        failed = sum(clause["status"] == "diverged" for clause in verdict["clauses"])
        state = {"passed": "passed every clause", "error": f"could not be checked: {verdict.get('error')}"}.get(
            verdict["status"], f"diverged in {failed} of {len(verdict['clauses'])} clauses"
        )
        lines.append(f"{refs}: {state}")
    if card.scaling is not None:
        lines += [f"{fit.name}, {fit.study}: {fit.sentence}" for fit in card.scaling.fits if fit.sentence]
    for checked in card.cs336:
        lines += [
            f"CS336 {c.name} ({c.subject}): {c.verdict}, {c.figure} against {c.threshold}"
            for c in checked.checks
            if c.status != "skipped"
        ]
    if card.compare is not None:
        rows = card.compare.rows
        ours = next(r for r in rows if r.table == "train")
        for row in rows:
            if row.user and row.table == "train" and row.seconds is not None and ours.seconds:
                lines.append(f"{row.name}: trains in {row.seconds:.3g} s, {row.seconds / ours.seconds:.3g}x ours")
            elif row.user and row.table.startswith("encode") and "encode_iterable" not in row.name and row.mb_per_s:
                first = next(r for r in rows if r.table == row.table)
                lines.append(
                    f"{row.name}: encodes {row.mb_per_s:.3g} MB/s on one core, "
                    f"{row.mb_per_s / (first.mb_per_s or row.mb_per_s):.3g}x ours"
                )
    return "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"


def render_card(card: Card) -> str:
    names = ", ".join([*card.trainers, *card.tokenizers])
    sections = [f"<h1>Report card: {html.escape(names)}{' (smoke run)' if card.quick else ''}</h1>"]
    if card.quick:
        sections.append(f'<p class="smoke" id="smoke">{html.escape(report.SMOKE_NOTE)}</p>')
    sections += [
        f'<p class="note">Measured on {html.escape(card.corpus)}; commit '
        f"<code>{html.escape(str(card.machine.get('commit')))}</code> of bpe_impls on "
        f"{html.escape(str(card.machine.get('cpu')))}, {card.machine.get('cores')} cores.</p>",
        _summary(card),
        "<h2>Correct? bpe verify, clause by clause</h2>",
        clause_section(card.verdicts),
        "<h2>CS336's own resource checks</h2>",
        cs336_section(card.cs336),
    ]
    if card.compare is not None:
        sections += ["<h2>How fast and lean, beside ours</h2>", report.compare_section(card.compare)]
    if card.scaling is not None:
        sections += ["<h2>How its cost grows</h2>", report.scaling_section(card.scaling)]
    if card.compare is not None and card.compare.memory:
        sections += ["<h2>Where its memory is held (memray)</h2>", report.memory_section(card.compare.memory)]
    sections += ["<h2>Machine and versions</h2>", report.machine_section(card.machine)]
    return report.html_page(f"report card: {names}", sections, card_json(card))


def card_json(card: Card) -> dict[str, Any]:
    data = asdict(card)
    data["verdicts"] = [report.without_tables(verdict) for verdict in card.verdicts]
    return data


def write_card(
    out_dir: Path,
    trainers: Sequence[str],
    tokenizers: Sequence[str],
    *,
    json_path: Path | None = None,
    quick: bool = False,
    peers: bool = False,
    timeout: float = 600.0,
    python: str | None = None,
    log: Callable[[str], None] = lambda message: None,
) -> Path:
    """OUT_DIR/index.html (the card), OUT_DIR/card.json (the same data; also to `json_path`),
    OUT_DIR/memray/ (the captures)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    card = run_card(
        trainers,
        tokenizers,
        quick=quick,
        peers=peers,
        timeout=timeout,
        python=python,
        memray_dir=out_dir / "memray",
        log=log,
    )
    for path in (out_dir / "card.json", json_path):
        if path is not None:
            with atomic_write(path, "w", encoding="utf-8") as out:
                json.dump(card_json(card), out, indent=2)
    page = out_dir / "index.html"
    with atomic_write(page, "w", encoding="utf-8") as out:
        out.write(render_card(card))
    return page
