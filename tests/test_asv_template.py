"""docs/asv/: the asv template a user copies into their repository to track their BPE over their
commits, run here as a user runs it (`asv run --python=same --quick`) on this project's broken
copies (tests/verify_targets/): the wrong trainer and tokenizer are tracked as 0, the right ones
as 1, and every timing and memory figure is recorded.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import fixture_text

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = REPO / "docs" / "asv"
TARGETS = Path(__file__).parent / "verify_targets"
ASV = shutil.which("asv", path=str(Path(sys.executable).parent))


@pytest.mark.skipif(ASV is None, reason="asv is the bench extra's (pip install -e '.[bench]'); .ci/run runs this after")
def test_the_template_tracks_a_broken_copy_as_wrong_and_times_it(tmp_path):
    repo = tmp_path / "my_bpe"
    shutil.copytree(TEMPLATE, repo)
    corpus = repo / "stories.txt"
    corpus.write_text(fixture_text("tinystories_sample.txt")[:6000], encoding="utf-8")
    suites = "\n".join(
        f"""
class {name}({kind}):
    reference = "{reference}"
    corpus = "stories.txt"
    vocab_size = 300
"""
        for name, kind, reference in [
            ("TrainRight", "TrainerSuite", f"{TARGETS / 'reference.py'}:run_train_bpe"),
            ("TrainBroken", "TrainerSuite", "broken/broken_stops_early.py:run_train_bpe"),  # relative: from the repo
            ("EncodeRight", "TokenizerSuite", f"{TARGETS / 'reference.py'}:get_tokenizer"),
            ("EncodeBroken", "TokenizerSuite", f"{TARGETS / 'broken_first_mergeable_pair.py'}:get_tokenizer"),
        ]
    )
    (repo / "broken").mkdir()
    shutil.copy(TARGETS / "broken_stops_early.py", repo / "broken")
    shutil.copy(TARGETS / "reference.py", repo / "broken")  # (the broken copy imports it)
    bench = repo / "benchmarks" / "bench_bpe.py"
    bench.write_text(bench.read_text().split("\n\nclass Train(")[0] + "\n" + suites, encoding="utf-8")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "mine"], cwd=repo, check=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True)
    subprocess.run([ASV, "machine", "--yes", "--machine", "ci"], cwd=repo, check=True, capture_output=True)
    run = subprocess.run(
        [ASV, "run", "--python=same", "--quick", "--machine", "ci", "--set-commit-hash", commit.stdout.strip()],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (results_file,) = [p for p in (repo / ".asv" / "results" / "ci").glob("*.json") if p.name != "machine.json"]
    results = json.loads(results_file.read_text())["results"]
    value = {name: result[0][0] if isinstance(result[0], list) else result[0] for name, result in results.items()}
    assert value["bench_bpe.TrainRight.track_same_as_bpe_impls"] == 1.0
    assert value["bench_bpe.TrainBroken.track_same_as_bpe_impls"] == 0.0
    assert value["bench_bpe.EncodeRight.track_same_as_bpe_impls"] == 1.0
    assert value["bench_bpe.EncodeBroken.track_same_as_bpe_impls"] == 0.0
    for suite in ("TrainRight", "TrainBroken"):
        assert value[f"bench_bpe.{suite}.time_train"] > 0 and value[f"bench_bpe.{suite}.peakmem_train"] > 1 << 20
    assert value["bench_bpe.EncodeRight.peakmem_encode_iterable"] > 1 << 20
