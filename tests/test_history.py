"""`bpe report --asv-results / --memray`: asv's history over commits and memray's peaks, offline.

The asv results folder is written with asv's own API (the format asv run writes), with a step
planted in one benchmark; the memray capture is a real one of a known allocation.
"""

from __future__ import annotations

import datetime
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("asv.results", reason="asv is the bench extra's (pip install -e '.[bench]')")
from asv_results_folder import write_results  # noqa: E402

from bpe_impls import cli  # noqa: E402
from bpe_impls.base.errors import ConfigError  # noqa: E402
from bpe_impls.harness import history  # noqa: E402

FLAT = {
    "name": "bench_train.Train.time_merge",
    "version": "v1",
    "unit": "seconds",
    "type": "time",
    "params": [["'native'", "'route_b'"]],
    "param_names": ["impl"],
}
STEPPED = {
    "name": "bench_encode.peakmem_encode",
    "version": "v1",
    "unit": "bytes",
    "type": "peakmemory",
    "params": [],
    "param_names": [],
}
COMMITS = [f"{i:02x}" * 20 for i in range(16)]
# bench_instructions' kind of benchmark: a track_ counted in instructions
INSTRUCTIONS = {
    "name": "bench_instructions.MergeInstructions.track_merge_instructions",
    "version": "v1",
    "unit": "instructions",
    "type": "track",
    "params": [],
    "param_names": [],
}


def _write_results(folder: Path, step_at: int = 10, factor: float = 1.3, stepped: dict = STEPPED) -> None:
    """16 commits: the time benchmark flat with small noise; the `stepped` one steps up by `factor`
    at commit `step_at`."""
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    runs = []
    for i, commit in enumerate(COMMITS):
        date = int((start + datetime.timedelta(days=i)).timestamp() * 1000)
        noise = 1 + 0.01 * (-1) ** i
        times = [0.020 * noise, 0.150 * noise]
        value = 50e6 * (factor if i >= step_at else 1.0) * noise
        runs.append((commit, date, {FLAT["name"]: (times, [[t] * 3 for t in times]), stepped["name"]: [value]}))
    write_results(folder, [FLAT, stepped], runs)


def test_the_history_has_every_series_in_commit_order_and_finds_the_planted_step(tmp_path):
    _write_results(tmp_path / "results")
    series = history.load_asv_history(tmp_path / "results")
    assert [(s.benchmark, s.params) for s in series] == [
        (STEPPED["name"], ""),
        (FLAT["name"], "'native'"),
        (FLAT["name"], "'route_b'"),
    ]
    assert all(s.commits == [c[:8] for c in COMMITS] for s in series)
    stepped, *flat = series
    assert [(r.before, r.after) for r in stepped.regressions] == [(COMMITS[9][:8], COMMITS[10][:8])]
    assert stepped.regressions[0].value_after / stepped.regressions[0].value_before == pytest.approx(1.3, rel=0.05)
    assert all(s.regressions == [] for s in flat)  # 1% noise is not a regression


def test_bpe_report_draws_the_history_offline_with_no_measuring(tmp_path, capsys):
    _write_results(tmp_path / "results")
    out = tmp_path / "page"
    assert cli.main(["report", str(out), "--asv-results", str(tmp_path / "results"), "--no-run", "--quiet"]) == 0
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "<h2>asv: each benchmark over commits</h2>" in page and "bpe compare" not in page
    assert page.count("<figure>") == 2  # one per benchmark, a line per parameter
    regressions = re.search(r"<h2>asv.*?<table>(.*?)</table>", page, re.S).group(1)
    # Commit 10 against commit 9: the 1.3x step with the noise of both (1.01 / 0.99): +33%.
    assert regressions.count("<tr>") == 2 and COMMITS[10][:8] in regressions and "+33%" in regressions
    assert html.escape(history.FACTOR_RULE) in regressions  # one sample a commit: the factor alone
    data = json.loads(re.search(r'id="data">(.*?)</script>', page, re.S).group(1))
    assert len(data["asv_history"]) == 3 and data["compare"] is None


def test_an_instruction_count_step_is_reported_in_millions_of_instructions(tmp_path):
    _write_results(tmp_path / "results", factor=1.2, stepped=INSTRUCTIONS)
    out = tmp_path / "page"
    assert cli.main(["report", str(out), "--asv-results", str(tmp_path / "results"), "--no-run", "--quiet"]) == 0
    page = (out / "index.html").read_text(encoding="utf-8")
    regressions = re.search(r"<h2>asv.*?<table>(.*?)</table>", page, re.S).group(1)
    assert regressions.count("<tr>") == 2 and COMMITS[10][:8] in regressions
    before, after = (float(v) for v in re.findall(r"([\d.]+) million instructions", regressions))
    assert 49 <= before <= 51 and after / before == pytest.approx(1.2, rel=0.05)  # 50e6 and 1.2x, in millions


def test_a_folder_that_is_not_asv_results_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert cli.main(["report", str(tmp_path / "out"), "--asv-results", str(tmp_path / "empty"), "--no-run"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not an asv results folder" in err and str(tmp_path / "empty") in err
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match="no memray capture files"):
        history.load_memray_profiles(tmp_path / "empty")


def _hold_twelve_megabytes() -> bytearray:
    return bytearray(12 * 2**20)


def test_memray_profiles_give_the_peak_and_the_site_that_holds_it(tmp_path):
    memray = pytest.importorskip("memray", reason="memray is the bench extra's")
    with memray.Tracker(str(tmp_path / "held.bin"), trace_python_allocators=True):
        held = _hold_twelve_megabytes()
        del held
    (profile,) = history.load_memray_profiles(tmp_path)
    assert profile.name == "held" and profile.peak_bytes >= 12 * 2**20
    assert profile.top_sites[0].bytes >= 12 * 2**20 and "_hold_twelve_megabytes" in profile.top_sites[0].where
    out = tmp_path / "page"
    assert cli.main(["report", str(out), "--memray", str(tmp_path), "--no-run", "--quiet"]) == 0
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "held: where the peak is held" in page and "_hold_twelve_megabytes" in page


def _timing(values: list[float], spread: float) -> history.Series:
    """A timing series whose commits each have 10 samples spread by +-`spread` around their value."""
    line = history.Series(
        "bench.Suite.time_it", "", "vm", "env", "seconds", commits=[f"c{i}" for i in range(len(values))]
    )
    for value in values:
        samples = [value * (1 + spread * (k - 4.5) / 4.5) for k in range(10)]
        line.values.append(value)
        line.samples.append(samples)
        line.stats.append(
            {"ci_99_a": min(samples), "ci_99_b": max(samples), "q_25": samples[2], "q_75": samples[7], "repeat": 10}
        )
    return line


def test_a_timing_is_flagged_only_when_asv_would_call_it_significant():
    # The host: rounds spread 20-40%. +8% inside that spread is not a regression; +34% with
    # tight samples is, and says by which rule.
    assert history.find_regressions(_timing([0.276, 0.298], spread=0.3)) == []
    (found,) = history.find_regressions(_timing([0.276, 0.372], spread=0.05))
    assert (found.before, found.after, found.rule) == ("c0", "c1", history.SIGNIFICANT_RULE)
    assert found.spread_before and found.spread_after
    # Identical code, any spread: nothing.
    assert history.find_regressions(_timing([0.3, 0.3, 0.3], spread=0.4)) == []


def _commits_of_one_second(repo: Path, count: int) -> list[str]:
    """`count` commits of `repo`, parent first, all dated the same second, whose hashes do not sort
    in that order (the contents are salted until they do not: deterministic, as the dates are)."""
    env = {**os.environ, "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-C", str(repo)]
    for salt in range(64):
        subprocess.run([*git, "init", "-q", "-b", f"try{salt}"], check=True, env=env)
        subprocess.run([*git, "checkout", "-q", "--orphan", f"try{salt}"], check=True, env=env)
        commits = []
        for i in range(count):
            (repo / "code.py").write_text(f"salt = {salt}; version = {i}\n", encoding="utf-8")
            subprocess.run([*git, "add", "-A"], check=True, env=env)
            subprocess.run([*git, "commit", "-qm", f"{salt}.{i}"], check=True, env=env)
            done = subprocess.run([*git, "rev-parse", "HEAD"], check=True, env=env, capture_output=True, text=True)
            commits.append(done.stdout.strip())
        if sorted(commits) != commits:
            return commits
    raise AssertionError("no salt gave hashes out of order")


def test_commits_of_the_same_second_are_in_the_repositorys_order(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    commits = _commits_of_one_second(repo, 3)
    results = repo / ".asv" / "results"  # inside the repository, as asv keeps it
    values = (100e6, 100e6, 130e6)  # the last commit does 30% more work
    one_second = 1767225600000  # 2026-01-01T00:00:00Z, the commits' date
    write_results(
        results, [INSTRUCTIONS], [(c, one_second, {INSTRUCTIONS["name"]: [v]}) for c, v in zip(commits, values)]
    )
    (line,) = history.load_asv_history(results)  # the repository found from the folder
    assert line.commits == [c[:8] for c in commits]
    assert [(r.before, r.after) for r in line.regressions] == [(commits[1][:8], commits[2][:8])]
    elsewhere = tmp_path / "results"
    shutil.copytree(results, elsewhere)  # outside it: by hash, unless told the repository
    assert history.load_asv_history(elsewhere)[0].commits != line.commits
    assert history.load_asv_history(elsewhere, repo)[0].commits == line.commits
