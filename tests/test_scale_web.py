"""benchmarks/scale_web.py end to end at tiny sizes: the table's rows, the skip and kill guards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bpe_impls.harness.peers import TRAIN_PEERS, installed

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "scale_web.py"
PEERS = [name for name, peer in TRAIN_PEERS.items() if installed(peer.module)]

pytestmark = pytest.mark.slow


def run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict, str]:
    out_json, out_md = tmp_path / "scale.json", tmp_path / "scale.md"
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--workdir",
            str(tmp_path / "work"),
            "--vocab-size",
            "400",
            "--json",
            str(out_json),
            "--markdown",
            str(out_md),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done, json.loads(out_json.read_text()), out_md.read_text()


def test_every_trainer_runs_at_each_size_then_a_tiny_memory_budget_skips_the_larger_size(tmp_path):
    # 60 MiB of "available" memory: every trainer's interpreter alone needs ~40-90 MB, so the
    # 2 MB runs (no prediction yet) go ahead, and the prediction for 8 MB (3x the distinct
    # pre-tokens) is over the budget for all of them.
    done, report, markdown = run(tmp_path, "--sizes", "2MB,8MB", "--peers", ",".join(PEERS), "--available", "60MiB")
    rows = report["rows"]
    trainers = ["bpe_impls", *PEERS]
    assert [(row["size_bytes"], row["trainer"]) for row in rows] == [(2_000_000, t) for t in trainers] + [
        (8_000_000, t) for t in trainers
    ]
    small, big = rows[: len(trainers)], rows[len(trainers) :]
    assert small[0]["distinct"] == small[-1]["distinct"] > 30_000
    assert big[0]["distinct"] > 2 * small[0]["distinct"]
    for row in small:
        assert row["status"] == "ok" and row["seconds"] > 0 and row["peak_bytes"] > 10 * 2**20
        assert row["bytes_per_distinct"] == pytest.approx(row["peak_bytes"] / row["distinct"])
    for before, row in zip(small, big):
        assert row["status"] == "skipped" and row["seconds"] is None
        predicted = before["peak_bytes"] / before["distinct"] * row["distinct"]
        assert f"predicted peak {predicted / 2**20:.0f} MB" in row["note"] and "available 60 MB" in row["note"]
    assert markdown.count("\n| 8 |") == len(trainers) and "skipped: predicted peak" in markdown
    table = done.stdout[done.stdout.index("corpus MB") :]
    assert table.count("skipped") == len(trainers)
    assert not list((tmp_path / "work").glob("web-*.txt")), "generated corpora are deleted without --keep"


def test_a_run_over_the_ceiling_is_killed_and_the_next_size_skipped(tmp_path):
    # A 30 MiB ceiling is below what `bpe train` needs just to start (numpy + the package).
    _, report, _ = run(tmp_path, "--sizes", "1MB,2MB", "--peers", "", "--ceiling", "30MiB", "--interval", "0.01")
    first, second = report["rows"]
    assert first["status"] == "killed" and first["note"].startswith("killed at ")
    assert first["peak_bytes"] > 30 * 2**20
    assert second["status"] == "skipped" and second["note"] == "killed at a smaller size"
    assert not (tmp_path / "work" / "tok_bpe_impls_1000000").exists()  # no partial tokenizer
