"""What `bpe report` shows of the past: asv's results over commits and memray's profiles.

`load_asv_history` reads an asv results folder (`.asv/results`: one JSON file per machine, commit
and environment, plus `benchmarks.json`) with asv's own reader, and gives one `Series` per
benchmark, parameter combination, machine and environment, its commits in commit-date order. The
regressions are found by the rule `asv compare` and `asv continuous` judge two commits by, applied
to each commit and the one before it: worse by the factor (5%, asv's default), and, where asv kept
the samples' statistics (timings), a difference its statistics call significant too; where it kept
none (`track_` and `peakmem_` benchmarks, deterministic counts) the factor alone. Each regression
says which rule flagged it and the spread of the samples on either side. (asv's step detection,
which `asv publish` uses, fits steps over the whole noisy history: it listed a +5% step of code
nobody touched and missed a real +34% one, issue 38.)

`load_memray_profiles` reads the capture files `benchmarks/memray_profile.py` (or `memray run`)
writes, with memray's reader: the peak of live heap allocations and the call sites that held the
most at that peak.

asv and memray are the `bench` extra's; each is imported only when its data is asked for.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import ConfigError

# asv's default threshold for the regressions it reports (`asv publish`, `asv compare`): 5%.
REGRESSION_THRESHOLD = 0.05


@dataclass
class Regression:
    before: str  # the last commit at the good value
    after: str  # the first commit of the worse one
    value_before: float
    value_after: float
    rule: str = ""  # which of asv's rules flagged it
    spread_before: str = ""  # the samples' interquartile range, where asv kept it ("" for a count)
    spread_after: str = ""


@dataclass
class Series:
    benchmark: str
    params: str  # "" for an unparametrized benchmark, else "a, b, c" as asv prints them
    machine: str
    environment: str
    unit: str
    commits: list[str] = field(default_factory=list)  # short hashes, oldest first
    dates: list[int] = field(default_factory=list)  # commit dates, ms since the epoch
    ranks: list[int] = field(default_factory=list)  # each commit's place among its machine's commits
    values: list[float | None] = field(default_factory=list)  # None: failed or skipped there
    stats: list[dict | None] = field(default_factory=list)  # asv's statistics of each commit's samples
    samples: list[list[float] | None] = field(default_factory=list)
    regressions: list[Regression] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.benchmark}({self.params})" if self.params else self.benchmark


def display_scale(unit: str, largest: float) -> tuple[float, str]:
    """How values in asv's `unit` (or memray's bytes) up to `largest` are shown, in the report's
    tables and on its axes alike: divide by the first, name with the second."""
    if unit == "seconds":
        return (1e-3, "ms") if largest < 1 else (1.0, "s")
    if unit == "bytes":
        return 2**20, "MiB"
    if unit == "instructions":
        return 1e6, "million instructions"
    return 1.0, unit


def _asv():
    try:
        import asv.results
        import asv.step_detect
    except ImportError:
        raise ConfigError("reading asv results needs asv (pip install -e '.[bench]')") from None
    return asv


def _param_labels(params: list[list[str]]) -> list[str]:
    """asv's results hold one value per combination of the parameters, in itertools.product order."""
    return [", ".join(combo) for combo in itertools.product(*params)] if params else [""]


def factor_rule(threshold: float = REGRESSION_THRESHOLD) -> str:
    return f"worse by {threshold:.0%} or more (asv's rule where it keeps no samples)"


def significant_rule(threshold: float = REGRESSION_THRESHOLD) -> str:
    return f"worse by {threshold:.0%} or more and a significant difference of the samples (asv compare's rule)"


FACTOR_RULE = factor_rule()
SIGNIFICANT_RULE = significant_rule()


def _spread(stats: dict | None) -> str:
    if not stats or stats.get("q_25") is None:
        return ""
    return f"{stats['q_25']:.4g}-{stats['q_75']:.4g}"


def judge(series: Series, before: int, after: int, threshold: float = REGRESSION_THRESHOLD) -> Regression | None:
    """Commit `after` of the series against commit `before` by asv's own rule (`asv compare`'s
    `_is_result_better`: worse by the factor, and a significant difference of the samples where asv
    kept them): the Regression, or None where it is not worse (or a value is missing). Lower is
    better, as asv takes every benchmark."""
    _asv()
    from asv.commands.compare import _is_result_better  # asv's rule itself, not a copy of it

    old, new = series.values[before], series.values[after]
    if old is None or new is None:
        return None
    stats = (series.stats[before], series.stats[after]) if series.stats else (None, None)
    samples = (series.samples[before], series.samples[after]) if series.samples else (None, None)
    if not _is_result_better(old, new, (stats[0], samples[0]), (stats[1], samples[1]), 1 + threshold):
        return None
    with_stats = bool(stats[0] and stats[1] and stats[0].get("repeat", 0) != 1 and stats[1].get("repeat", 0) != 1)
    return Regression(
        series.commits[before],
        series.commits[after],
        old,
        new,
        (significant_rule if with_stats else factor_rule)(threshold),
        _spread(stats[0]),
        _spread(stats[1]),
    )


def find_regressions(series: Series, threshold: float = REGRESSION_THRESHOLD) -> list[Regression]:
    """Each commit worse than the one before it (the one before it that has a value) by `judge`."""
    kept = [i for i, value in enumerate(series.values) if value is not None]
    found = (judge(series, before, after, threshold) for before, after in zip(kept, kept[1:]))
    return [regression for regression in found if regression is not None]


def git_order(repo: str | Path | None) -> dict[str, int]:
    """{full hash: position} of every commit of the git repository `repo` (or the one the folder
    is in), parents before children (`git rev-list --topo-order --reverse --all`); {} where there
    is no repository or no git."""
    git = shutil.which("git")
    if repo is None or git is None:
        return {}
    done = subprocess.run(
        [git, "-C", str(repo), "rev-list", "--topo-order", "--reverse", "--all"],
        capture_output=True,
        text=True,
        check=False,
    )
    return {commit: i for i, commit in enumerate(done.stdout.split())} if done.returncode == 0 else {}


def load_asv_history(results_dir: str | Path, repo: str | Path | None = None) -> list[Series]:
    """Every benchmark's history in an asv results folder, each with its regressions. Commits are
    in the order of their dates; commits of the same second (a rebase, a script's commits) in the
    order of the git repository `repo` (by default the one the results folder is in, if any), where
    a parent comes before its child, and else by hash."""
    asv = _asv()
    results_dir = Path(results_dir)
    index = results_dir / "benchmarks.json"
    if not index.is_file():
        raise ConfigError(f"{results_dir}: not an asv results folder (no benchmarks.json; run `asv run` first)")
    benchmarks = json.loads(index.read_text(encoding="utf-8"))
    order = git_order(repo if repo is not None else results_dir)
    series: dict[tuple[str, str, str, str], Series] = {}
    machines = sorted(p.name for p in results_dir.iterdir() if (p / "machine.json").is_file())
    for machine in machines:
        runs = sorted(
            asv.results.iter_results_for_machine(str(results_dir), machine),
            key=lambda result: (result.date or 0, order.get(result.commit_hash, -1), result.commit_hash),
        )
        ranks: dict[str, int] = {}
        for result in runs:
            rank = ranks.setdefault(result.commit_hash, len(ranks))
            for name in result.get_result_keys(benchmarks):
                params = result.get_result_params(name)
                values = result.get_result_value(name, params)
                stats = result.get_result_stats(name, params) or [None] * len(values)
                samples = result.get_result_samples(name, params) or [None] * len(values)
                for label, value, stat, sample in zip(_param_labels(params), values, stats, samples):
                    key = (name, label, machine, result.env_name)
                    if key not in series:
                        unit = benchmarks.get(name, {}).get("unit", "")
                        series[key] = Series(name, label, machine, result.env_name, unit)
                    line = series[key]
                    line.commits.append(result.commit_hash[:8])
                    line.dates.append(result.date or 0)
                    line.ranks.append(rank)
                    line.values.append(None if value is None or value != value else float(value))  # NaN: failed
                    line.stats.append(stat)
                    line.samples.append(sample)
    for line in series.values():
        line.regressions = find_regressions(line)
    return sorted(series.values(), key=lambda s: (s.benchmark, s.machine, s.environment, s.params))


@dataclass
class AllocationSite:
    bytes: int
    allocations: int
    where: str  # the innermost frames, "function (file:line) < caller (...)"


@dataclass
class MemoryProfile:
    name: str  # the capture file's stem: the trainer, for memray_profile.py's files
    peak_bytes: int
    total_allocations: int
    command: str
    top_sites: list[AllocationSite] = field(default_factory=list)


# The worker an implementation under test runs in (verify/worker.py): its frames say nothing of
# where the implementation holds memory, so a profile of one shows the implementation's own.
_WORKER_FILES = {str(Path(__file__).with_name("verify") / name) for name in ("worker.py", "protocol.py")}


def _frames(record, depth: int) -> str:
    frames = record.stack_trace(max_stacks=depth + 8) or record.hybrid_stack_trace(max_stacks=depth + 8)
    own = [frame for frame in frames if frame[1] not in _WORKER_FILES][:depth]
    if frames and not own:
        return "(the harness's worker, around the call)"
    frames = own
    return (
        " < ".join(f"{function} ({Path(file).name}:{line})" for function, file, line in frames) or "(no Python frame)"
    )


def load_memray_profiles(folder: str | Path, top: int = 5, depth: int = 3) -> list[MemoryProfile]:
    """Each memray capture (*.bin) in `folder`: its heap peak and the `top` call sites holding the
    most memory at that peak."""
    folder = Path(folder)
    files = sorted(folder.glob("*.bin"))
    if not files:
        raise ConfigError(f"{folder}: no memray capture files (*.bin; benchmarks/memray_profile.py writes them)")
    return [load_memray_profile(path, top, depth) for path in files]


def load_memray_profile(path: str | Path, top: int = 5, depth: int = 3, name: str | None = None) -> MemoryProfile:
    """One memray capture: its heap peak and the `top` call sites holding the most memory at that
    peak; named `name` (default: the file's stem)."""
    try:
        import memray
    except ImportError:
        raise ConfigError("reading memray profiles needs memray (pip install -e '.[bench]')") from None
    path = Path(path)
    try:
        reader = memray.FileReader(str(path))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a memray capture file ({exc})") from None
    records = sorted(reader.get_high_watermark_allocation_records(merge_threads=True), key=lambda r: -r.size)
    sites = [AllocationSite(record.size, record.n_allocations, _frames(record, depth)) for record in records[:top]]
    metadata = reader.metadata
    return MemoryProfile(
        name or path.stem, metadata.peak_memory, metadata.total_allocations, metadata.command_line, sites
    )
