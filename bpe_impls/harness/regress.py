"""`bpe regress BASE HEAD`: the deterministic benchmarks for two commits, and what moved.

The figures are the ones that do not move with the host (benchmarks/bench_instructions.py's
instruction counts and bench_heap.py's peak heap bytes: the same to within 0.02% and to the byte
between runs of one commit), so one run per commit tells a change from identical code on a loaded
machine, where the time suites spread 20-40%. asv does the work: `asv continuous` builds each commit
into its environment, runs the selected benchmarks at both and records the results. Then both are
judged here, from asv's results, by the rule `bpe report --asv-results` applies to each commit and
the one before it (history.judge, which is asv compare's own `_is_result_better`), so the two agree
by construction; the verdict comes with every row that moved beyond the threshold.

Why 5% by default, where `asv continuous` takes 10%: counts that repeat to 0.02% leave over a hundred
times that as margin, and a real 10% increase in work sits on asv's 10% line (`new > old x 1.1`
is what it flags), where a count a hair under it would pass.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import ConfigError
from . import history

# Every class of the deterministic set is named *Instructions or *HeapMemory (benchmarks/README).
DEFAULT_BENCH = "Instructions|HeapMemory"
DEFAULT_FACTOR = 1.05


@dataclass
class Change:
    benchmark: str
    params: str  # "" for an unparametrized benchmark, else as asv prints them: "'route_a'"
    unit: str
    base: float | None  # None: failed or skipped at that commit
    head: float | None
    verdict: str  # "worse", "better", "same" (within the factor); "failed" (a value at BASE, none at
    # HEAD: counted as worse), "new" (a value at HEAD only), "skipped" (at neither)
    rule: str = ""

    @property
    def label(self) -> str:
        return f"{self.benchmark}({self.params})" if self.params else self.benchmark

    @property
    def ratio(self) -> float | None:
        return self.head / self.base if self.base and self.head is not None else None


@dataclass
class Verdict:
    base: str  # full hashes
    head: str
    factor: float
    bench: str
    changes: list[Change] = field(default_factory=list)
    asv_status: int | None = None  # asv continuous's exit status; None when it was not run

    @property
    def worse(self) -> list[Change]:
        return [c for c in self.changes if c.verdict in ("worse", "failed")]

    @property
    def better(self) -> list[Change]:
        return [c for c in self.changes if c.verdict == "better"]


def selected(name: str, params: str, bench: str) -> bool:
    """Whether asv's `-b bench` selects this benchmark and parameter combination: a regular
    expression searched in `name(params)` for a parametrized one, in the name alone otherwise (asv's
    benchmarks.Benchmarks)."""
    return re.search(bench, f"{name}({params})" if params else name) is not None


def compare_results(results_dir: Path, base: str, head: str, bench: str, factor: float) -> list[Change]:
    """Every selected benchmark with a result at `base` or `head` (full hashes) in asv's results
    folder, judged head against base by history.judge at `factor`; sorted worst first."""
    threshold = factor - 1
    changes = []
    for line in history.load_asv_history(results_dir):
        if not selected(line.benchmark, line.params, bench):
            continue
        # (A series holds a commit once: asv keeps one results file a machine, commit and environment.)
        at = {commit: i for i, commit in enumerate(line.commits)}
        i, j = at.get(base[:8]), at.get(head[:8])
        if i is None and j is None:
            continue
        old = line.values[i] if i is not None else None
        new = line.values[j] if j is not None else None
        if old is None or new is None:
            # HEAD lost a figure BASE had: worse. None at either (skipped there, as where a tool is
            # missing), or one HEAD adds, judges nothing.
            verdict = "failed" if new is None and old is not None else "skipped" if new is None else "new"
            changes.append(Change(line.benchmark, line.params, line.unit, old, new, verdict, "no value at one commit"))
            continue
        assert i is not None and j is not None
        worse = history.judge(line, i, j, threshold)
        if worse is not None:
            changes.append(Change(line.benchmark, line.params, line.unit, old, new, "worse", worse.rule))
        elif history.judge(line, j, i, threshold) is not None:
            changes.append(Change(line.benchmark, line.params, line.unit, old, new, "better"))
        else:
            changes.append(Change(line.benchmark, line.params, line.unit, old, new, "same"))
    order = {"failed": 0, "worse": 1, "better": 2, "new": 3, "same": 4, "skipped": 5}
    return sorted(changes, key=lambda c: (order[c.verdict], -(c.ratio or 0), c.label))


def _asv_config(config: Path) -> tuple[Path, Path]:
    """(the repository's folder, the results folder) of an asv configuration, as asv reads it (asv
    runs from the configuration's folder, so its paths are relative to that)."""
    if not config.is_file():
        raise ConfigError(f"{config}: no such asv configuration (run from a clone, or give --config)")
    try:
        import asv.config
        import asv.util
    except ImportError:
        raise ConfigError("bpe regress needs asv (pip install -e '.[bench]')") from None
    try:
        conf = asv.config.Config.load(str(config))
    except asv.util.UserError as exc:
        raise ConfigError(f"{config}: {exc}") from None
    here = config.resolve().parent
    return (here / conf.repo).resolve(), (here / conf.results_dir).resolve()


def resolve_commit(repo: Path, name: str) -> str:
    """The full hash of commit `name` in the git repository at `repo`; one line when there is none."""
    git = shutil.which("git")
    if git is None:
        raise ConfigError("bpe regress needs git on PATH")
    done = subprocess.run(
        [git, "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ConfigError(f"{name}: not a commit in {repo}")
    return done.stdout.strip()


def _machine_ready(asv_command: list[str], cwd: Path, log: Callable[[str], None]) -> None:
    """asv refuses to run on a machine it has no description of (~/.asv-machine.json): describe
    this one with asv's defaults, as `asv machine --yes` does, when it is not there yet."""
    import asv.machine
    import asv.util

    try:
        asv.machine.MachineCollection.load(asv.machine.Machine.get_unique_machine_name())
        return
    except asv.util.UserError:
        pass
    log("asv machine --yes (this machine is not described yet)")
    subprocess.run([*asv_command, "machine", "--yes"], cwd=cwd, check=True, capture_output=True)


def run_asv_continuous(
    config: Path, base: str, head: str, bench: str, factor: float, *, quiet: bool, log: Callable[[str], None]
) -> int:
    """`asv continuous --factor F -b BENCH BASE HEAD` in the configuration's folder: asv's exit
    status (0 unchanged, 1 worse). asv's own output goes to stderr, unless `quiet` (then only its
    last lines, when it fails)."""
    asv = [sys.executable, "-m", "asv"]
    cwd = config.resolve().parent
    _machine_ready(asv, cwd, log)
    command = [*asv, "continuous", "--config", config.name, "--factor", str(factor), "-b", bench, base, head]
    log("$ asv " + " ".join(command[3:]))
    # Quiet: asv's output kept for the one line of an error; else it goes to stderr as it comes.
    done = subprocess.run(
        command, cwd=cwd, stdout=subprocess.PIPE if quiet else sys.stderr, stderr=subprocess.STDOUT, text=True
    )
    output = done.stdout or ""
    if done.returncode not in (0, 1):
        said = [line.strip() for line in output.splitlines() if line.strip()]
        raise ConfigError(f"asv continuous exited {done.returncode}" + (f": {said[-1]}" if said else ""))
    return done.returncode


def regress(
    base: str,
    head: str,
    *,
    bench: str = DEFAULT_BENCH,
    factor: float = DEFAULT_FACTOR,
    config: Path = Path("asv.conf.json"),
    run: bool = True,
    quiet: bool = False,
    log: Callable[[str], None] = lambda message: None,
) -> Verdict:
    """The deterministic benchmarks selected by `bench` (asv's -b) at commits `base` and `head`,
    run by `asv continuous` unless `run` is false (then asv's saved results alone), and each judged
    head against base: worse or better by more than `factor`, or the same."""
    if factor <= 1:
        raise ConfigError(f"--factor must be above 1, not {factor}")
    try:
        re.compile(bench)
    except re.error as exc:
        raise ConfigError(f"-b {bench!r}: not a regular expression ({exc})") from None
    repo, results = _asv_config(config)
    base_hash, head_hash = resolve_commit(repo, base), resolve_commit(repo, head)
    status = None
    if run:
        status = run_asv_continuous(config, base_hash, head_hash, bench, factor, quiet=quiet, log=log)
    if not (results / "benchmarks.json").is_file():
        raise ConfigError(f"{results}: no asv results (run without --no-run first)")
    changes = compare_results(results, base_hash, head_hash, bench, factor)
    if not changes:
        raise ConfigError(f"no results of benchmarks matching -b {bench!r} at {base} or {head} in {results}")
    return Verdict(base_hash, head_hash, factor, bench, changes, status)


def format_verdict(verdict: Verdict, show_all: bool = False) -> str:
    """The table of what moved (every row with `show_all`), then one line of totals."""
    rows = verdict.changes if show_all else [c for c in verdict.changes if c.verdict not in ("same", "skipped")]
    lines = []
    if rows:
        width = max(len(c.label) for c in rows)
        lines.append(f"{'benchmark':<{width}}  {'base':>12}  {'head':>12}  {'ratio':>7}  verdict")
        for change in rows:
            ratio = f"{change.ratio:.3f}x" if change.ratio is not None else "-"
            lines.append(
                f"{change.label:<{width}}  {_value(change.base, change.unit):>12}  "
                f"{_value(change.head, change.unit):>12}  {ratio:>7}  {change.verdict}"
            )
    same = sum(c.verdict == "same" for c in verdict.changes)
    unjudged = sum(c.verdict in ("new", "skipped") for c in verdict.changes)
    lines.append(
        f"{verdict.base[:8]} -> {verdict.head[:8]}: {len(verdict.worse)} worse, {len(verdict.better)} better, "
        f"{same} within {verdict.factor - 1:.0%}{f', {unjudged} with no value at one commit' if unjudged else ''} "
        f"(of {len(verdict.changes)} matching -b {verdict.bench!r}); "
        f"rule: {history.factor_rule(verdict.factor - 1)}, asv compare's _is_result_better, as bpe report's"
    )
    return "\n".join(lines)


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    scale, name = history.display_scale(unit, value)
    short = {"million instructions": "M", "MiB": "MiB", "ms": "ms", "s": "s"}.get(name, name)
    return f"{value / scale:,.3f}{short}"
