"""`bpe compare --trainer REF --tokenizer REF`: anyone's implementations in the same tables as ours.

A user's right trainer is marked as having our tokens and merges and a wrong one (verify_targets'
broken_stops_early) is not; a right tokenizer has our ids and a wrong one does not; one that
raises or hangs is a row with the reason, and the run goes on.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from conftest import fixture_text

from bpe_impls import cli
from bpe_impls.harness.compare import format_report, run_compare

TARGETS = Path(__file__).parent / "verify_targets"
REFERENCE = TARGETS / "reference.py"
EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    # A slice of real stories, small enough for the pure-Python reference to train on in seconds.
    path = tmp_path_factory.mktemp("compare") / "stories.txt"
    text = fixture_text("tinystories_sample.txt")
    path.write_text(text[:12_000], encoding="utf-8")
    return path


def test_a_users_rows_sit_beside_ours_with_their_verdicts(tmp_path, corpus):
    raises = tmp_path / "raises.py"
    raises.write_text(
        textwrap.dedent(
            """
            def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
                raise ValueError("no pairs left")
            """
        )
    )
    report = run_compare(
        corpus,
        300,
        [EOT],
        impls=[],
        trainers=[
            f"{REFERENCE}:run_train_bpe",
            f"{TARGETS / 'broken_stops_early.py'}:run_train_bpe",
            f"{raises}:run_train_bpe",
        ],
        tokenizers=[f"{REFERENCE}:get_tokenizer", f"{TARGETS / 'broken_first_mergeable_pair.py'}:get_tokenizer"],
        builtins=False,
        timeout=120,
    )
    rows = {(row.table, row.name): row for row in report.rows}
    train = {name: row for (table, name), row in rows.items() if table == "train"}
    assert [row.user for row in train.values()] == [False, True, True, True]
    ours, right, early, failed = train.values()
    assert ours.identical and right.identical and early.identical is False
    assert failed.seconds is None and "raised ValueError: no pairs left" in failed.error
    assert right.seconds > 0 and right.peak_mb > 1

    encode = {name: row for (table, name), row in rows.items() if table == "encode trained vocab"}
    assert encode[f"{REFERENCE}:get_tokenizer"].identical
    assert encode[f"{TARGETS / 'broken_first_mergeable_pair.py'}:get_tokenizer"].identical is False
    streamed = encode[f"{REFERENCE}:get_tokenizer encode_iterable"]
    assert streamed.identical and streamed.peak_mb is not None
    assert encode["bpe_impls encode_iterable"].identical
    # The reference has no encode_batch: said once, not a failed row.
    assert any("has no encode_batch method" in line for line in report.left_out)
    assert not any(row.name.endswith("encode_batch") for row in report.rows if row.user)

    printed = format_report(report)
    assert f"> {REFERENCE}:run_train_bpe" in printed
    assert "raised ValueError: no pairs left" in printed
    assert "merge phase" not in printed  # --no-builtins: one row of ours for scale, no more


def test_the_command_takes_references_and_writes_them_to_json(tmp_path, corpus, capsys):
    out = tmp_path / "compare.json"
    args = ["compare", str(corpus), "--vocab-size", "300", "--special-token", EOT, "--quiet", "--no-builtins"]
    assert cli.main([*args, "--trainer", f"{REFERENCE}:run_train_bpe", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["trainers"] == [f"{REFERENCE}:run_train_bpe"]
    user = [row for row in data["rows"] if row["user"]]
    assert [row["table"] for row in user] == ["train"] and user[0]["identical"] is True
    capsys.readouterr()
    assert cli.main(args) == 1
    assert "--no-builtins needs a --trainer or a --tokenizer" in capsys.readouterr().err


def test_memray_shows_where_a_users_trainer_holds_its_peak(tmp_path, corpus):
    pytest.importorskip("memray", reason="memray is the test extra's (pytest-memray)")
    report = run_compare(
        corpus,
        300,
        [EOT],
        impls=[],
        trainers=[f"{REFERENCE}:run_train_bpe"],
        tokenizers=[f"{REFERENCE}:get_tokenizer"],
        builtins=False,
        memray_dir=tmp_path / "memray",
    )
    profiles = {profile.name: profile for profile in report.memory}
    assert set(profiles) == {
        "builtin:native (train)",
        f"{REFERENCE}:run_train_bpe (train)",
        "builtin:tokenizer (encode)",
        f"{REFERENCE}:get_tokenizer (encode)",
    }
    theirs = profiles[f"{REFERENCE}:run_train_bpe (train)"]
    assert theirs.peak_bytes > 0 and theirs.top_sites
    # Their own lines, not the worker's: the sites name reference.py.
    assert all("reference.py:" in site.where for site in theirs.top_sites)
    assert len(list((tmp_path / "memray").glob("*.bin"))) == 4
    assert f"{REFERENCE}:run_train_bpe (train): peak" in format_report(report)


def test_cs336_checks_go_with_the_tables_and_the_json(tmp_path, corpus, capsys):
    out = tmp_path / "compare.json"
    args = ["compare", str(corpus), "--vocab-size", "300", "--special-token", EOT, "--quiet", "--no-builtins"]
    assert cli.main([*args, "--tokenizer", "builtin:tokenizer", "--cs336", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "test_encode_iterable_memory_usage" in printed and "CS336 checks as stanford-cs336" in printed
    (checked,) = json.loads(out.read_text())["cs336"]
    statuses = {check["name"]: check["status"] for check in checked["checks"]}
    assert statuses["test_encode_iterable_memory_usage"] in ("pass", "fail")
    assert statuses["test_train_bpe_speed"] == statuses["train_bpe_tinystories"] == "skipped"  # no trainer given
