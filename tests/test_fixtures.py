"""The real text bundled in fixtures/: documented, found without the shared fixtures, and the same
text as the shared files it stands for.

fixtures/SOURCES.md lists every file with its size and hash (a file added without a line there
fails here); `real_text` falls back to the bundled files when the shared fixtures are absent and
says so; the CS336 copies are the shared files byte for byte, and the samples are what
tools/cut_fixture_samples.py cuts from the shared kjv.txt and udhr.txt.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
from pathlib import Path

import pytest
from conftest import UNDER_CI, require_fixture

from bpe_impls.harness import fixtures
from bpe_impls.harness.fixtures import BUNDLED, bundled_dir, fixture_path, real_text

REPO = Path(__file__).resolve().parent.parent
FOLDER = REPO / "fixtures"
ROW = re.compile(r"^\| *([^|]+?) *\| *(\d+) *\| *([0-9a-f]{16}) *\|", re.MULTILINE)


def _listed() -> dict[str, tuple[int, str]]:
    """SOURCES.md's table: file -> (bytes, first 16 hex digits of its sha256)."""
    text = (FOLDER / "SOURCES.md").read_text(encoding="utf-8")
    return {name: (int(size), digest) for name, size, digest in ROW.findall(text)}


def test_sources_md_lists_every_file_with_its_size_and_hash():
    listed = _listed()
    present = {path.name for path in FOLDER.iterdir() if path.name != "SOURCES.md"}
    assert sorted(present - set(listed)) == [], "files in fixtures/ that SOURCES.md does not list"
    assert sorted(set(listed) - present) == [], "files SOURCES.md lists that fixtures/ does not have"
    for name, (size, digest) in listed.items():
        data = (FOLDER / name).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()[:16]) == (size, digest), name
    assert set(BUNDLED.values()) <= present


def test_the_bundled_text_stays_small():
    assert sum(path.stat().st_size for path in FOLDER.iterdir()) < 650_000


def test_without_the_shared_fixtures_real_text_is_the_bundled_file(tmp_path, monkeypatch):
    monkeypatch.setenv("BPE_FIXTURES", str(tmp_path))  # an empty folder
    assert bundled_dir() == FOLDER  # a checkout: its fixtures/
    for name, bundled in BUNDLED.items():
        assert fixture_path(name) is None  # the shared locator never returns a bundled file
        text = real_text(name)
        assert text is not None and text.bundled and text.path == FOLDER / bundled
        assert text.sample == (bundled != name)
    assert real_text("kjv.txt").describe() == "kjv_sample.txt (bundled sample of kjv.txt)"
    assert real_text("corpus.en").describe() == "corpus.en (bundled copy)"
    assert real_text("kjv.txt", bundled=False) is None
    assert real_text("no_such.txt") is None
    monkeypatch.setattr(fixtures, "bundled_dir", lambda: None)
    assert real_text("corpus.en") is None
    assert "the bundled samples (bpe_impls._fixtures, fixtures/) are not installed" in fixtures.missing_text(
        "corpus.en"
    )


def test_the_shared_file_comes_first(tmp_path, monkeypatch):
    (tmp_path / "kjv.txt").write_text("In the beginning\n", encoding="utf-8")
    monkeypatch.setenv("BPE_FIXTURES", str(tmp_path))
    text = real_text("kjv.txt")
    assert text.path == tmp_path / "kjv.txt" and not text.bundled and text.describe() == "kjv.txt (shared fixture)"


@pytest.mark.parametrize("name", [name for name, bundled in BUNDLED.items() if bundled == name])
def test_a_bundled_copy_is_the_shared_fixture_byte_for_byte(name):
    shared = fixture_path(name)
    if shared is None:  # as for any missing shared fixture: a skip here, a failure under CI
        message = f"shared fixture {name!r} not found (set BPE_FIXTURES)"
        pytest.fail(message) if UNDER_CI else pytest.skip(message)
    assert (FOLDER / name).read_bytes() == shared.read_bytes()


def _cutter():
    spec = importlib.util.spec_from_file_location("cut_fixture_samples", REPO / "tools" / "cut_fixture_samples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["kjv", "udhr"])
def test_a_sample_is_whole_documents_of_the_shared_file(name):
    shared = require_fixture(f"{name}.txt").read_text(encoding="utf-8")
    cutter = _cutter()
    sample = (FOLDER / f"{name}_sample.txt").read_text(encoding="utf-8")
    assert sample == (cutter.kjv_sample if name == "kjv" else cutter.udhr_sample)(shared)
    documents = set(shared.split(cutter.EOT))
    assert all(document in documents for document in sample.split(cutter.EOT))
