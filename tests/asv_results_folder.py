"""An asv results folder written with asv's own API, as `asv run` leaves it: machine "vm", the
benchmarks' definitions in benchmarks.json, one results file per commit. For the tests of what
reads such folders (test_history.py, test_regress.py); import it after importorskip("asv.results")."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from asv.results import Results
from asv.runner import BenchmarkResult

# A benchmark's figures at one commit: one value per parameter combination, each with its samples
# (a list of values alone: one sample each, as a track_ benchmark has).
Figures = Sequence[float] | tuple[Sequence[float], Sequence[Sequence[float]]]


def write_results(
    folder: Path, benchmarks: Sequence[dict], runs: Iterable[tuple[str, int, Mapping[str, Figures]]]
) -> None:
    """`folder` as asv's results: each run is (commit, date in ms, {benchmark name: figures})."""
    (folder / "vm").mkdir(parents=True)
    (folder / "vm" / "machine.json").write_text(json.dumps({"machine": "vm", "version": 1}), encoding="utf-8")
    definitions = {benchmark["name"]: benchmark for benchmark in benchmarks}
    (folder / "benchmarks.json").write_text(json.dumps({**definitions, "version": 2}), encoding="utf-8")
    for commit, date, figures in runs:
        result = Results({"machine": "vm", "python": "3.11"}, {}, commit, date, "3.11", "virtualenv-py3.11", {})
        for name, given in figures.items():
            values, samples = given if isinstance(given, tuple) else (given, [[value] for value in given])
            result.add_result(
                definitions[name],
                BenchmarkResult(list(values), [list(s) for s in samples], [1] * len(values), 0, "", None),
            )
        result.save(str(folder))
