"""bpe report: one self-contained HTML page, checked in a real headless browser (Debian's chromium).

The browser loads the page from a file with every network feature off; the page's own script
marks <body data-figures="shown/total" data-errors="n"> once loaded, which --dump-dom prints.
Under CI=true a missing chromium fails the test; elsewhere it skips. CI's smoke run (.ci/run)
writes a quick report and points BPE_REPORT_HTML at it, and that page is checked the same way.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the report's figures need matplotlib: pip install -e '.[plot]'")

from bpe_impls import cli
from bpe_impls.harness import compare, report, scaling  # noqa: E402
from bpe_impls.trainers import IMPLEMENTATIONS  # noqa: E402

EOT = "<|endoftext|>"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=10000",
]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(
                "chromium is not installed, and CI must check the report in a browser "
                "(apt-get install -y chromium; .ci/run does this)"
            )
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return found


def load_in_browser(page: Path) -> tuple[str, str]:
    """(DOM after load, browser log) of the page, in a fresh profile."""
    with tempfile.TemporaryDirectory(prefix="bpe-chromium-") as profile:
        result = subprocess.run(
            [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout, result.stderr


def assert_renders(page: Path, least_figures: int = 2) -> None:
    source = page.read_text(encoding="utf-8")
    figures = len(re.findall(r"<figure>", source))
    assert figures >= least_figures
    # Self-contained: nothing is fetched (SVG's xmlns names are identifiers, not fetches).
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", source)
    assert "@import" not in source
    dom, log = load_in_browser(page)
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert f'data-figures="{figures}/{figures}"' in body, body
    assert 'data-errors="0"' in body, body
    # Console messages (CONSOLE) and blocked fetches (the page's Content-Security-Policy) are errors.
    problems = [line for line in log.splitlines() if "CONSOLE" in line or "Refused to" in line]
    assert problems == []


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> tuple[Path, Path]:
    """A compare JSON and a scaling JSON from small real runs."""
    where = tmp_path_factory.mktemp("inputs")
    corpus = where / "corpus.txt"
    corpus.write_text(("once upon a time there was a cat. " * 30 + EOT) * 20, encoding="utf-8")
    compare_json, scaling_json = where / "compare.json", where / "scaling.json"
    compare.write_json(compare.run_compare(corpus, 300, [EOT], impls=["naive", "route_b"]), compare_json)
    tiny = dataclasses.replace(
        scaling.QUICK,
        generated_mb=(0.02, 0.04, 0.08),
        text_mb=(0.01, 0.02),
        cache_sizes=(0, 64),
        cache_text_mb=0.01,
        encode_vocab=300,
    )
    scaling.write_json(scaling.run_scaling(tiny, real=[], studies=("corpus", "encode")), scaling_json)
    return compare_json, scaling_json


def test_report_holds_the_tables_figures_machine_and_commit(inputs, tmp_path, capsys):
    compare_json, scaling_json = inputs
    assert (
        cli.main(
            [
                "report",
                str(tmp_path / "out"),
                "--compare-json",
                str(compare_json),
                "--scaling-json",
                str(scaling_json),
                "--quiet",
            ]
        )
        == 0
    )
    page = tmp_path / "out" / "index.html"
    assert capsys.readouterr().out.strip() == f"wrote {page}"
    source = page.read_text(encoding="utf-8")
    loaded = scaling.load_json(scaling_json)
    # one compare figure + one per scaling study
    assert source.count("<figure>") == 1 + len({c.study for c in loaded.curves})
    for row in report.load_compare_json(compare_json).rows:
        assert f'<td class="text">{row.name}</td>' in source
    for fit in loaded.fits:
        if fit.slope is not None and fit.quantity == scaling.TIME:
            assert f"{fit.slope:.2f}" in source
    machine = scaling.load_json(scaling_json).machine
    assert machine["cpu"] in source and "commit" in source and ("+dirty" in source or len(machine["commit"]) >= 7)


def test_report_stats_table_names_the_trainers_with_statistics(inputs, tmp_path):
    compare_json, scaling_json = inputs
    verdict = tmp_path / "verdict.json"  # given, so that the report does not run bpe verify itself
    verdict.write_text(
        json.dumps(
            {
                "status": "passed",
                "checked": {
                    "implementations": {"trainer": "builtin:native"},
                    "clauses": ["ties"],
                    "generated_cases": 1,
                    "real_corpora": [],
                },
            }
        ),
        encoding="utf-8",
    )
    page = report.write_report(
        tmp_path / "out", compare_json=compare_json, scaling_json=scaling_json, verify_json=[verdict]
    )
    source = page.read_text(encoding="utf-8")
    without = ", ".join(name for name in IMPLEMENTATIONS if not scaling.has_stats(name))
    assert (
        f"<h3>Per-merge statistics of route_a, route_b, bucket (untimed instrumented runs; none for {without})</h3>"
    ) in source
    for counter in ("words_touched", "index_entries", "heap_pushes", "stale_discarded", "stale_words", "bucket_moves"):
        assert f'<td class="text">{counter}</td>' in source


def test_a_quick_report_says_it_is_a_smoke_run_and_greys_thin_fits(inputs, tmp_path):
    compare_json, scaling_json = inputs  # three generated sizes a factor 4 apart: every fit is thin
    verdict = tmp_path / "verdict.json"  # given, so that the report does not run bpe verify itself
    verdict.write_text(
        json.dumps(
            {
                "status": "passed",
                "checked": {
                    "implementations": {"trainer": "builtin:native"},
                    "clauses": ["ties"],
                    "generated_cases": 1,
                    "real_corpora": [],
                },
            }
        ),
        encoding="utf-8",
    )
    given = {"compare_json": compare_json, "scaling_json": scaling_json, "verify_json": [verdict]}
    plain = report.write_report(tmp_path / "plain", **given)
    smoke = report.write_report(tmp_path / "smoke", **given, quick=True)
    plain_page, smoke_page = plain.read_text(encoding="utf-8"), smoke.read_text(encoding="utf-8")
    assert "Smoke run" not in plain_page and "(smoke run)</h1>" in smoke_page and 'id="smoke"' in smoke_page
    assert json.loads(re.search(r'id="data">(.*?)</script>', smoke_page, re.S).group(1))["smoke"] is True
    thin = re.findall(r'<td class="weak">\(([-0-9.]+)', smoke_page)
    fits = [f for f in scaling.load_json(scaling_json).fits if f.slope is not None]
    assert fits and all(f.too_few for f in fits) and len(thin) == len(fits)


def test_report_renders_in_a_headless_browser_with_every_figure(inputs, tmp_path):
    compare_json, scaling_json = inputs
    page = report.write_report(tmp_path, compare_json=compare_json, scaling_json=scaling_json)
    assert_renders(page)


def test_the_check_fails_on_a_page_with_a_broken_figure(inputs, tmp_path):
    # The browser check must be able to fail: an empty figure and a script error.
    compare_json, scaling_json = inputs
    page = report.write_report(tmp_path, compare_json=compare_json, scaling_json=scaling_json)
    broken = page.read_text(encoding="utf-8").replace("<figure>", '<figure><svg width="0" height="0"></svg>', 1)
    page.write_text(broken.replace("</body>", "<script>undefinedFunction();</script></body>"), encoding="utf-8")
    dom, _ = load_in_browser(page)
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-errors="1"' in body
    total = broken.count("<figure>")
    assert f'data-figures="{total}/{total + 1}"' in body


def test_the_ci_smoke_report_renders():
    path = os.environ.get("BPE_REPORT_HTML")
    if not path:
        pytest.skip("BPE_REPORT_HTML is not set (.ci/run sets it after its quick `bpe report`)")
    assert_renders(Path(path))


def test_missing_input_json_is_a_one_line_error(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "out"), "--compare-json", str(tmp_path / "none.json")]) == 1
    assert capsys.readouterr().err.strip() == f"bpe: error: {tmp_path / 'none.json'}: no such file"
    assert not (tmp_path / "out").exists()
