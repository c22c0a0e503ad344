"""`bpe regress` (asv continuous over the deterministic benchmarks) in a scratch clone of this
checkout: quiet between two commits of identical code, and flagging planted regressions with the
rows named, while `bpe report --asv-results` over the same results agrees (issue 38).

The clone gets two commits on top of HEAD: an empty one (the same tree under another hash, built
again), then the plants of tests/plants.py: route_a's merge lists the rewritten words' pairs again
and keeps a slice of each (instructions and peak heap), and the compiled encoder hashes each
missed pre-token's bytes four times before its BPE (about +10% of a cold encode's instructions).
CountInstructions is the control a plant does not touch. asv builds each commit into the
environment of this checkout's asv.conf.json (.asv/env, created on first use and reused by
.ci/run's asv steps), through a configuration written for the scratch clone.

About 4-6 minutes on 2 cores (4 commit builds and runs under valgrind); slow. Without valgrind or
git it skips, except under CI=true, where it fails.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import UNDER_CI, require_fixture, require_gpt2_files
from plants import plant_encoder, plant_route_a

from bpe_impls import cli
from bpe_impls.harness.fixtures import fixtures_dir

asv_util = pytest.importorskip("asv.util", reason="asv is the bench extra's (pip install -e '.[bench]')")

REPO = Path(__file__).resolve().parent.parent
SELECTION = (
    "CountInstructions|MergeInstructions.*'route_a'|MergeHeapMemory.*'route_a'|EncodeInstructions.*'native', 'cold'"
)
PLANTED = {
    "bench_instructions.MergeInstructions.track_merge_instructions('route_a')",
    "bench_heap.MergeHeapMemory.track_merge_peak_bytes('route_a')",
    "bench_instructions.EncodeInstructions.track_encode_instructions('native', 'cold')",
}
CONTROL = "bench_instructions.CountInstructions.track_count_instructions"


def _needed(program: str) -> None:
    if shutil.which(program) is None:
        message = f"{program} is not installed (bpe regress's instruction counts need it)"
        if UNDER_CI:
            pytest.fail(message)
        pytest.skip(message)


def _git(clone: Path, *args: str) -> str:
    command = ["git", "-c", "user.email=plant@test", "-c", "user.name=plant", "-C", str(clone), *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    for program in ("git", "valgrind"):
        _needed(program)
    require_fixture("corpus.en")
    require_gpt2_files()
    if not (REPO / ".git").exists():
        pytest.skip(f"{REPO} is not a git checkout (the scratch clone is made from it)")
    top = tmp_path_factory.mktemp("regress")
    clone = top / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    base = _git(clone, "rev-parse", "HEAD")
    _git(clone, "commit", "-q", "--allow-empty", "-m", "identical: the same tree")
    identical = _git(clone, "rev-parse", "HEAD")
    plant_route_a(clone)
    plant_encoder(clone)
    _git(clone, "commit", "-q", "-am", "planted: route_a recount + kept slices, encoder hash")
    planted = _git(clone, "rev-parse", "HEAD")
    # This checkout's asv configuration, with the scratch clone as its repository: the same matrix
    # and environment folder (so the environment is built once), the results kept apart.
    conf = asv_util.load_json(str(REPO / "asv.conf.json"), js_comments=True)
    conf.update(
        repo=str(clone),
        benchmark_dir=str(clone / "benchmarks"),
        env_dir=str(REPO / ".asv" / "env"),
        results_dir=str(top / "results"),
        html_dir=str(top / "html"),
    )
    config = top / "asv.conf.json"
    config.write_text(json.dumps(conf, indent=1), encoding="utf-8")
    return {
        "config": config,
        "results": top / "results",
        "commits": (base, identical, planted),
        "top": top,
        "clone": clone,
    }


def _regress(scratch: dict, base: str, head: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict]:
    # The clone is not beside ../shared/fixtures: the benchmarks find them through the variable.
    monkeypatch.setenv("BPE_FIXTURES", str(fixtures_dir()))
    out = scratch["top"] / f"{head[:8]}.json"
    argv = ["regress", base, head, "-b", SELECTION, "--config", str(scratch["config"]), "--json", str(out), "--quiet"]
    status = cli.main(argv)
    return status, json.loads(out.read_text(encoding="utf-8"))


def _verdicts(verdict: dict) -> dict[str, str]:
    return {
        f"{c['benchmark']}({c['params']})" if c["params"] else c["benchmark"]: c["verdict"] for c in verdict["changes"]
    }


@pytest.mark.slow
def test_identical_code_is_quiet_and_every_plant_is_flagged_by_name(scratch, monkeypatch, capsys, tmp_path):
    base, identical, planted = scratch["commits"]

    status, quiet = _regress(scratch, base, identical, monkeypatch)
    assert quiet["asv_status"] == 0 and status == 0, capsys.readouterr()
    assert _verdicts(quiet) == {name: "same" for name in [*PLANTED, CONTROL]}
    for change in quiet["changes"]:  # the deterministic figures repeat: to the byte, or within 0.5%
        assert abs(change["head"] / change["base"] - 1) <= 0.005, change

    status, flagged = _regress(scratch, identical, planted, monkeypatch)
    assert flagged["asv_status"] == 1 and status == 1  # asv continuous's own verdict, and ours
    assert _verdicts(flagged) == {**{name: "worse" for name in PLANTED}, CONTROL: "same"}
    ratios = {c["benchmark"].split(".")[1] + str(c["params"]): c["head"] / c["base"] for c in flagged["changes"]}
    assert 1.08 <= ratios["EncodeInstructions'native', 'cold'"] <= 1.15, ratios  # the plant's size: about 10%
    printed = capsys.readouterr().out
    assert all(name in printed for name in PLANTED) and CONTROL not in printed  # only what moved is listed

    # bpe report over the same results: the same rows, each first worse at the planted commit.
    out = tmp_path / "page"
    # (The three commits share a second: their order is the clone's, which bpe report is told.)
    results, clone = str(scratch["results"]), str(scratch["clone"])
    assert cli.main(["report", str(out), "--asv-results", results, "--asv-repo", clone, "--no-run", "--quiet"]) == 0
    page = (out / "index.html").read_text(encoding="utf-8")
    data = json.loads(page.split('id="data">', 1)[1].split("</script>", 1)[0])
    regressed = {
        f"{line['benchmark']}({line['params']})" if line["params"] else line["benchmark"]: [
            r["after"] for r in line["regressions"]
        ]
        for line in data["asv_history"]
    }
    assert {name: after for name, after in regressed.items() if after} == {name: [planted[:8]] for name in PLANTED}
