"""`bpe report OUT --trainer REF --tokenizer REF`: one page about the implementations named.

Run as a user runs it (--quick) on a broken trainer (verify_targets' broken_stops_early) and the
right reference tokenizer: the page says which diverged and where, sets their rows (highlighted)
beside ours with the right verdicts, shows where their memory is held, renders every figure in a
real browser, and carries the same data as JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_report import assert_renders

from bpe_impls import cli

TARGETS = Path(__file__).parent / "verify_targets"
TRAINER = f"{TARGETS / 'broken_stops_early.py'}:run_train_bpe"
TOKENIZER = f"{TARGETS / 'reference.py'}:get_tokenizer"


@pytest.fixture(scope="module")
def card(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("card")
    args = ["report", str(out / "page"), "--quick", "--quiet", "--trainer", TRAINER, "--tokenizer", TOKENIZER]
    assert cli.main([*args, "--json", str(out / "card.json")]) == 0
    data = json.loads((out / "card.json").read_text(encoding="utf-8"))
    assert data == json.loads((out / "page" / "card.json").read_text(encoding="utf-8"))
    return out / "page" / "index.html", data


def test_the_card_holds_each_verdict_and_their_rows_beside_ours(card):
    page, data = card
    trainer, tokenizer = data["verdicts"]
    assert trainer["status"] == "diverged" and tokenizer["status"] == "passed"
    stops = [d for d in trainer["divergences"] if "stops-when-no-pair-is-left" in d["clauses"]]
    assert stops and "short of vocab_size" in stops[0]["diagnosis"]
    rows = {(row["table"], row["name"]): row for row in data["compare"]["rows"]}
    assert rows[("train", TRAINER)]["user"] and rows[("train", TRAINER)]["identical"] is False
    assert rows[("encode trained vocab", TOKENIZER)]["identical"] is True
    assert rows[("encode trained vocab", f"{TOKENIZER} encode_iterable")]["peak_mb"] is not None
    assert data["compare"]["corpus"].startswith("the first ") and "corpus.en" in data["compare"]["corpus"]
    source = page.read_text(encoding="utf-8")
    assert source.count('<tr class="mine">') == 3  # their train row, encode row, encode_iterable row
    assert "stops-when-no-pair-is-left" in source and "smoke run" in source
    memory = {profile["name"] for profile in data["compare"]["memory"]}
    assert f"{TRAINER} (train)" in memory and f"{TOKENIZER} (encode)" in memory


def test_the_card_renders_offline_in_a_browser(card):
    assert_renders(card[0], least_figures=2)  # compare's bars, scaling's curves


def test_options_that_do_not_apply_are_refused_in_one_line(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "a"), "--trainer", TRAINER, "--no-run"]) == 1
    assert "--no-run does not apply" in capsys.readouterr().err
    assert cli.main(["report", str(tmp_path / "b"), "--json", str(tmp_path / "x.json"), "--no-run"]) == 1
    assert "--json goes with a report card" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_the_card_shows_how_their_cost_grows(card):
    page, data = card
    curves = {curve["name"] for curve in data["scaling"]["curves"]}
    assert TRAINER in curves and TOKENIZER in curves  # beside native's, measured as theirs are
    told = [fit for fit in data["scaling"]["fits"] if fit["sentence"]]
    assert told and all(fit["name"] in (TRAINER, TOKENIZER) for fit in told)
    assert told[0]["sentence"] in page.read_text(encoding="utf-8").replace("&#x27;", "'")
