"""`bpe verify` and its pytest plugin: this project's own trainers and encoders pass through the
same API anyone's do; a crash, a hang, an exception or an import error in the implementation is
reported, never fatal to the harness; the JSON verdict holds what it promises and replays without
the harness; a divergence is caught and shrunk.

Each implementation runs in its own process, driven by the real command or the real API.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import load_gpt2

from bpe_impls import IMPLEMENTATIONS, cli, train_bpe
from bpe_impls.encoding.encoders import ENCODERS
from bpe_impls.harness import fixtures
from bpe_impls.harness.verify import (
    TOKENIZER_CLAUSES,
    TRAINER_CLAUSES,
    SearchSettings,
    boundary,
    verify_tokenizer,
    verify_trainer,
)

TARGETS = Path(__file__).parent / "verify_targets"
REFERENCE = TARGETS / "reference.py"


def verify(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bpe_impls", "verify", "--quiet", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=cwd,
    )


@pytest.mark.parametrize("name", list(IMPLEMENTATIONS))
def test_every_builtin_trainer_passes_through_the_same_api(name):
    result = verify_trainer(f"builtin:{name}", SearchSettings(max_examples=25), fixtures=name != "naive")
    assert result.status == "passed", result.divergence and result.divergence.describe()
    assert [c.name for c in result.clauses][:6] == [
        "tie-break",
        "greedy-left-to-right",
        "special-tokens",
        "pre-tokenization",
        "stops-when-no-pair-is-left",
        "deterministic",
    ]
    assert all(c.cases > 0 and c.status == "passed" for c in result.clauses)


@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_every_builtin_encoder_passes_through_the_same_api(encoder):
    result = verify_tokenizer(f"builtin:tokenizer:{encoder}", SearchSettings(max_examples=25))
    assert result.status == "passed", result.divergence and result.divergence.describe()
    assert {c.name for c in result.clauses} == {
        "encode",
        "special-tokens-longest-first",
        "decode",
        "encode_iterable",
        "deterministic",
    }


def test_a_plain_reference_passes_and_the_json_says_what_was_checked(tmp_path):
    """...and nothing is written to the working directory (Hypothesis's .hypothesis/ goes under
    the cache dir)."""
    out = tmp_path / "verdict.json"
    work = tmp_path / "work"
    work.mkdir()
    done = verify(
        "--trainer",
        f"{REFERENCE}:run_train_bpe",
        "--tokenizer",
        f"{REFERENCE}:get_tokenizer",
        "--max-examples",
        "40",
        "--json",
        str(out),
        cwd=work,
        env={**os.environ, "BPE_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(work.iterdir()) == [] and (tmp_path / "cache" / "hypothesis").is_dir()
    assert done.stdout.splitlines()[-1].startswith("passed: no divergence in ")
    verdict = json.loads(out.read_text())
    assert verdict["status"] == "passed" and verdict["counterexample"] is None
    assert verdict["divergences"] == [] and verdict["notes"] == []
    assert [(c["target"], c["clause"], c["status"]) for c in verdict["clauses"]] == [
        *(("trainer", name, "passed") for name in TRAINER_CLAUSES),
        ("trainer", "real text: tinystories_sample.txt", "passed"),
        *(("tokenizer", name, "passed") for name in TOKENIZER_CLAUSES),
    ]
    checked = verdict["checked"]
    assert checked["implementations"] == {
        "trainer": f"{REFERENCE}:run_train_bpe",
        "tokenizer": f"{REFERENCE}:get_tokenizer",
    }
    assert checked["generated_cases"] + checked["real_text_cases"] == sum(c["cases"] for c in checked["clauses"])
    assert checked["generated_cases"] > 300 and checked["real_text_cases"] == 1
    assert all(c["passed"] for c in checked["clauses"])


def _target(tmp_path: Path, body: str) -> str:
    path = tmp_path / "adapters.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_an_implementation_that_cannot_be_imported_or_called_is_exit_2_in_one_line(tmp_path):
    cases = {
        "nosuch_module_xyz:run": "cannot be loaded: raised ModuleNotFoundError",
        f"{REFERENCE}:no_such_function": "cannot be loaded: raised AttributeError",
        _target(tmp_path, "def run_train_bpe(path):\n    return {}, []\n")
        + ":run_train_bpe": "cannot be called: raised TypeError",
        _target(tmp_path, "import os\ndef run_train_bpe(*args):\n    os._exit(3)\n")
        + ":run_train_bpe": "cannot be called: crashed (exited with status 3)",
    }
    for ref, message in cases.items():
        done = verify("--trainer", ref)
        assert done.returncode == 2, (ref, done.stdout, done.stderr)
        assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert verify().returncode == 2  # nothing to verify
    assert verify("--encoder", "tiktoken").returncode == 2  # --encoder without --vocab


def test_a_hang_is_killed_and_reported(tmp_path):
    ref = _target(tmp_path, "import time\ndef run_train_bpe(*args):\n    time.sleep(3600)\n") + ":run_train_bpe"
    done = verify("--trainer", ref, "--call-timeout", "2")
    assert done.returncode == 2
    assert "cannot be called: no answer within 2 s (hung); the process was killed" in done.stderr


def test_a_crash_on_some_inputs_is_a_divergence_shrunk_to_a_minimal_input(tmp_path):
    ref = (
        _target(
            tmp_path,
            f"""
        import os, sys
        sys.path.insert(0, {str(TARGETS)!r})
        from reference import run_train_bpe as plain

        def run_train_bpe(path, vocab_size, special_tokens, **kwargs):
            if "é" in open(path, encoding="utf-8").read():
                os._exit(7)  # a segfault would do the same
            return plain(path, vocab_size, special_tokens)
    """,
        )
        + ":run_train_bpe"
    )
    out = tmp_path / "v.json"
    done = verify("--trainer", ref, "--json", str(out), "--fail-fast")
    assert done.returncode == 1, done.stderr
    example = json.loads(out.read_text())["counterexample"]
    # The first clause's smallest corpus with an é: its words have two letters at least.
    assert "é" in example["corpus"] and len(example["corpus"]) <= 2 and example["vocab_size"] == 257
    assert example["actual_error"] == "crashed (exited with status 7)"
    assert "the implementation crashed (exited with status 7)" in done.stdout


def test_a_divergence_replays_without_the_harness(tmp_path):
    broken = TARGETS / "broken_tiebreak_smallest.py"
    out = tmp_path / "v.json"
    done = verify("--trainer", f"{broken}:run_train_bpe", "--json", str(out), "--fail-fast")
    assert done.returncode == 1
    verdict = json.loads(out.read_text())
    example = verdict["counterexample"]
    assert verdict["status"] == "diverged" and example["kind"] == "train"
    assert set(example) >= {"corpus", "vocab_size", "special_tokens", "first_difference"}
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(example["corpus"], encoding="utf-8", newline="")
    args = (str(corpus), example["vocab_size"], example["special_tokens"])
    expected = [[a.hex(), b.hex()] for a, b in train_bpe(*args, impl="naive")[1]]
    assert expected == example["expected_merges_hex"]
    assert load_target(broken).run_train_bpe(*args)[1] != train_bpe(*args, impl="naive")[1]


def test_an_encoder_counterexample_carries_its_vocab_and_merges(tmp_path):
    """An encoder divergence holds vocab_hex and merges_hex, so it replays from the file alone."""
    broken = TARGETS / "broken_first_mergeable_pair.py"
    out = tmp_path / "v.json"
    assert verify("--tokenizer", f"{broken}:get_tokenizer", "--json", str(out), "--fail-fast").returncode == 1
    example = json.loads(out.read_text())["counterexample"]
    assert example["kind"] == "encode" and len(example["text"].encode()) <= 64
    vocab = {int(i): bytes.fromhex(token) for i, token in example["vocab_hex"].items()}
    merges = [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in example["merges_hex"]]
    reference = load_target(REFERENCE).get_tokenizer(vocab, merges, example["special_tokens"])
    assert reference.encode(example["text"]) == example["expected_ids"]
    assert (
        load_target(broken).get_tokenizer(vocab, merges, example["special_tokens"]).encode(example["text"])
        == example["actual_ids"]
        != example["expected_ids"]
    )


def test_an_encoder_over_a_saved_vocab_and_a_peer_by_name(tmp_path):
    load_gpt2().save(tmp_path / "gpt2")
    done = verify("--encoder", "builtin:tokenizer:hybrid", "--vocab", str(tmp_path / "gpt2"), "--max-examples", "50")
    assert done.returncode == 0, done.stdout + done.stderr
    # the boundary cases every run tries first, then the 50 generated ones
    cases = len(boundary.encode_cases("encode")) + 50
    assert re.search(rf"^encoder +encode +{cases} +passed$", done.stdout, re.M), done.stdout
    pytest.importorskip("tiktoken")
    done = verify("--encoder", "tiktoken", "--vocab", str(tmp_path / "gpt2"), "--max-examples", "50")
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_implementation_registered_by_entry_point(tmp_path):
    """An installed package registers implementations under `bpe_impls.implementations`."""
    dist = tmp_path / "site" / "myimpl-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myimpl\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[bpe_impls.implementations]\nmy-trainer = reference:run_train_bpe\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'site'}:{TARGETS}"}
    done = verify("--trainer", "my-trainer", "--max-examples", "20", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert verify("--trainer", "not-registered", env=env).returncode == 2


def plugin_run(tmp_path: Path, *options: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`pytest --pyargs bpe_impls.pytest_plugin` from a folder outside the repository."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            "bpe_impls.pytest_plugin",
            "-p",
            "no:cacheprovider",
            "--bpe-max-examples",
            "30",
            *options,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
        env=env,
    )


def test_the_pytest_plugin_runs_one_test_per_clause_and_fails_with_the_counterexample(tmp_path):
    """The module installed as a pytest plugin is collected as the tests; `-p` names it where
    autoloading is off."""

    def pytest_run(*options: str, env: dict | None = None) -> subprocess.CompletedProcess:
        return plugin_run(tmp_path, *options, env=env)

    good = pytest_run("--bpe-trainer", f"{REFERENCE}:run_train_bpe", "--bpe-tokenizer", f"{REFERENCE}:get_tokenizer")
    assert good.returncode == 0, good.stdout[-3000:]
    assert " 12 passed, 1 skipped" in good.stdout  # 6 trainer clauses + real text, 5 tokenizer; no encoder
    broken = f"{TARGETS / 'broken_merge_right_to_left.py'}:run_train_bpe"
    bad = pytest_run("-p", "bpe_impls.pytest_plugin", "--bpe-trainer", broken)
    assert bad.returncode == 1
    assert "DIVERGED in clause 'greedy-left-to-right'" in bad.stdout and "corpus (3 bytes): 'aaa'" in bad.stdout
    assert "reproduces always (5 of 5 replays)" in bad.stdout and "hint: merging within a word goes right to left" in (
        bad.stdout
    )
    # Without plugin autoloading (no entry point is loaded), -p alone brings the options and the tests.
    alone = pytest_run(
        "-p",
        "bpe_impls.pytest_plugin",
        "--bpe-trainer",
        broken,
        "-k",
        "greedy",
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert alone.returncode == 1, alone.stdout[-3000:] + alone.stderr[-3000:]
    assert "DIVERGED in clause 'greedy-left-to-right'" in alone.stdout and "1 failed" in alone.stdout


def test_without_the_shared_fixtures_the_real_text_is_the_bundled_sample(tmp_path):
    """A fresh clone or an installed package has no ../shared/fixtures: the real-text stage runs on
    the sample bundled with the package, and says so."""
    empty = tmp_path / "no-fixtures"
    empty.mkdir()
    out = tmp_path / "verdict.json"
    done = verify(
        "--trainer",
        f"{REFERENCE}:run_train_bpe",
        "--max-examples",
        "10",
        "--json",
        str(out),
        env={**os.environ, "BPE_FIXTURES": str(empty)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    checked = json.loads(out.read_text())["checked"]
    assert checked["real_text_cases"] > 0 and checked["real_text_skipped"] == []
    described = "three_tinystories_stories.txt (bundled sample of tinystories_sample.txt) at vocab 500"
    assert checked["real_corpora"] == [described]
    assert f"real corpora: {described}" in done.stdout


def test_with_no_real_text_at_all_the_output_says_it_was_skipped(monkeypatch, capsys, tmp_path):
    """Neither the shared fixtures nor the bundled samples (a package built without them)."""
    monkeypatch.setenv("BPE_FIXTURES", str(tmp_path))
    monkeypatch.setattr(fixtures, "bundled_dir", lambda: None)
    out = tmp_path / "verdict.json"
    assert (
        cli.main(
            ["verify", "--trainer", f"{REFERENCE}:run_train_bpe", "--max-examples", "5", "--quiet", "--json", str(out)]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert (
        f"real text: skipped: tinystories_sample.txt is not in the shared fixtures ({tmp_path}; env BPE_FIXTURES)"
        ", and the bundled samples (bpe_impls._fixtures, fixtures/) are not installed"
    ) in printed
    checked = json.loads(out.read_text())["checked"]
    assert checked["real_text_cases"] == 0 and checked["real_text_skipped"][0].startswith("real text: skipped: ")


def load_target(path: Path):
    """A target module, with a fresh `reference` beneath it (the broken copies patch that module).
    Its folder is on sys.path only while it loads: worker processes started later by other tests
    inherit sys.path."""
    sys.modules.pop("reference", None)
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(f"target_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def test_the_same_seed_finds_the_same_counterexample_and_a_time_budget_stops_the_search(tmp_path):
    broken = f"{TARGETS / 'broken_ties_by_ids.py'}:run_train_bpe"
    verdicts = []
    for run in range(2):
        out = tmp_path / f"{run}.json"
        assert verify("--trainer", broken, "--seed", "7", "--clause", "tie-break", "--json", str(out)).returncode == 1
        verdicts.append(json.loads(out.read_text())["counterexample"])
    assert verdicts[0] == verdicts[1]
    # With no time left nothing is checked, and the table and the JSON say so.
    out = tmp_path / "budget.json"
    done = verify("--trainer", f"{REFERENCE}:run_train_bpe", "--time-budget", "0", "--json", str(out))
    verdict = json.loads(out.read_text())
    assert done.returncode == 0 and verdict["checked"]["generated_cases"] == 0
    assert {(c["status"], c.get("reason")) for c in verdict["clauses"]} == {("skipped", "the time budget was spent")}
    assert "skipped: the time budget was spent" in done.stdout


def test_the_pytest_plugin_takes_the_contract_the_required_specials_and_a_time_budget(tmp_path):
    renumbered = f"{TARGETS / 'renumbered_merges_first.py'}:run_train_bpe"
    strict = plugin_run(
        tmp_path, "--bpe-trainer", renumbered, "--bpe-strict-ids", "-k", "test_trainer and special-tokens"
    )
    assert strict.returncode == 1 and "1 failed" in strict.stdout, strict.stdout[-3000:]
    assert "(same tokens and merges, numbered differently)" in strict.stdout and "hint: same tokens and merges" in (
        strict.stdout
    )
    allowed = plugin_run(tmp_path, "--bpe-trainer", renumbered, "-k", "test_trainer and special-tokens")
    assert (
        allowed.returncode == 0 and "1 passed" in allowed.stdout and "numbered differently: allowed" in (allowed.stdout)
    )
    demands = f"{TARGETS / 'broken_demands_endoftext.py'}:run_train_bpe"
    required = plugin_run(
        tmp_path, "--bpe-trainer", demands, "--bpe-require-special", "<|endoftext|>", "-k", "test_trainer and tie"
    )
    assert required.returncode == 0 and "1 passed" in required.stdout, required.stdout[-3000:]
    spent = plugin_run(tmp_path, "--bpe-trainer", f"{REFERENCE}:run_train_bpe", "--bpe-time-budget", "0", "-rs")
    assert spent.returncode == 0 and " 0 passed" not in spent.stdout and "passed" not in spent.stdout.splitlines()[-1]
    assert "the time budget was spent" in spent.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--json", "."], "--json .: is a directory"),
        (["--max-examples", "0"], "--max-examples must be at least 1, not 0"),
        (["--time-budget", "nan"], "--time-budget must be a finite number of seconds >= 0, not nan"),
        (["--time-budget", "inf"], "--time-budget must be a finite number of seconds >= 0, not inf"),
        (["--time-budget", "-1"], "--time-budget must be a finite number of seconds >= 0, not -1.0"),
        (["--replays", "0"], "--replays must be at least 1, not 0"),
        (["--clause", "no-such-clause"], "no clause named 'no-such-clause'"),
        (["--clause", "encode"], "no target given has a clause named 'encode'"),
        (["--require-special", ""], "--require-special cannot be empty"),
        (["--python", "no-such-python-3.99"], "--python no-such-python-3.99: no such executable"),
        (["--corpus", "missing.txt"], "missing.txt: the corpus is not a readable file"),
        (["--corpus", "latin1.txt"], "latin1.txt: not UTF-8 at byte offset 3"),
        (["--corpus", "empty.txt"], "empty.txt: the corpus is empty"),
    ],
)
def test_a_usage_error_is_exit_2_in_one_line_before_anything_runs(args, message, capsys, tmp_path, monkeypatch):
    if "--corpus" in args and args[-1] != "missing.txt":
        (tmp_path.parent / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
        (tmp_path.parent / "empty.txt").write_text(" \n")
        args = [*args[:-1], str(tmp_path.parent / args[-1])]
    monkeypatch.chdir(tmp_path)
    assert cli.main(["verify", "--quiet", "--trainer", f"{REFERENCE}:run_train_bpe", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and message in captured.err, captured.err
    assert list(tmp_path.iterdir()) == []


def test_your_own_corpus_is_the_real_text_and_another_interpreter_runs_the_target(tmp_path):
    """--corpus replaces the fixtures in the real-text stage (the table and the JSON name it);
    --python runs the target under that interpreter (here a symlink to this one: another path,
    so the worker gets no access to bpe_impls; the reference needs only `regex`)."""
    corpus = tmp_path / "mine.txt"
    corpus.write_text("the cat sat on the mat\r\n" * 50, newline="")
    python = tmp_path / "python"
    python.symlink_to(sys.executable)
    out = tmp_path / "v.json"
    refs = ["--trainer", f"{TARGETS / 'broken_text_mode_open.py'}:run_train_bpe", "--max-examples", "5"]
    done = verify(*refs, "--clause", "real-text", "--corpus", str(corpus), "--python", str(python), "--json", str(out))
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"^trainer +real text: mine.txt +1 +DIVERGED", done.stdout, re.M), done.stdout
    verdict = json.loads(out.read_text())
    assert verdict["checked"]["real_corpora"] == [f"{corpus} (your corpus) at vocab 500"]
    assert verdict["divergences"][0]["cause"] == "text-mode", verdict["divergences"][0]
    done = verify("--trainer", f"{REFERENCE}:run_train_bpe", "--clause", "real-text", "--corpus", str(corpus))
    assert done.returncode == 0 and "real text: mine.txt" in done.stdout, done.stdout + done.stderr


def test_every_clause_of_every_target_in_one_run_unless_fail_fast(tmp_path):
    """A bug of both the trainer and the tokenizer: one run reports both, each divergence once under
    every clause it fails, in one closing table; --fail-fast stops at the first and says so; --clause
    runs the clauses named."""
    broken = TARGETS / "broken_specials_shortest_first.py"
    refs = ["--trainer", f"{broken}:run_train_bpe", "--tokenizer", f"{broken}:get_tokenizer", "--max-examples", "20"]
    out = tmp_path / "all.json"
    done = verify(*refs, "--json", str(out))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    verdict = json.loads(out.read_text())
    assert {d["target"] for d in verdict["divergences"]} == {"trainer", "tokenizer"}
    assert verdict["counterexample"] == verdict["divergences"][0]["counterexample"]
    rows = [line for line in done.stdout.splitlines() if line.startswith(("trainer ", "tokenizer "))]
    assert len(rows) == len(verdict["clauses"]) == len(TRAINER_CLAUSES) + 1 + len(TOKENIZER_CLAUSES)
    assert done.stdout.index("target ") < done.stdout.index("[1] DIVERGED") < done.stdout.index("[2] DIVERGED")
    for divergence in verdict["divergences"]:
        assert len(divergence["clauses"]) == len(set(divergence["clauses"]))
        assert divergence["reproduces"] == {"times": 5, "of": 5}
        for clause in divergence["clauses"]:
            row = next(r for r in rows if r.split()[0] == divergence["target"] and clause in r)
            assert "DIVERGED [" in row
    first = tmp_path / "first.json"
    done = verify(*refs, "--fail-fast", "--json", str(first))
    verdict = json.loads(first.read_text())
    assert done.returncode == 1 and len(verdict["divergences"]) == 1
    statuses = [c["status"] for c in verdict["clauses"]]
    assert statuses.index("diverged") == len(statuses) - statuses[::-1].count("skipped") - 1
    assert {c.get("reason") for c in verdict["clauses"] if c["status"] == "skipped"} == {
        "--fail-fast stopped at the first divergence"
    }
    assert "skipped: --fail-fast stopped at the first divergence" in done.stdout
    chosen = tmp_path / "chosen.json"
    done = verify(*refs, "--clause", "encode", "--clause", "special-tokens", "--json", str(chosen))
    verdict = json.loads(chosen.read_text())
    assert done.returncode == 1
    assert [(c["target"], c["clause"]) for c in verdict["clauses"]] == [
        ("trainer", "special-tokens"),
        ("tokenizer", "encode"),
    ]
