"""The real text bundled in fixtures/: documented, found without the shared fixtures, cut from the
shared files and never a copy of one.

fixtures/SOURCES.md lists every file with its size and hash (a file added without a line there
fails here); `real_text` falls back to the bundled samples when the shared fixtures are absent and
says so; every sample is what tools/cut_fixture_samples.py cuts from the shared files (whole
lines, sentences or documents of them), and no file in fixtures/ is byte-identical to a shared one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
from pathlib import Path

import pytest
from conftest import require_fixture, require_shared_fixtures

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


def test_without_the_shared_fixtures_real_text_is_the_bundled_sample(tmp_path, monkeypatch):
    monkeypatch.setenv("BPE_FIXTURES", str(tmp_path))  # an empty folder
    assert bundled_dir() == FOLDER  # a checkout: its fixtures/
    for name, bundled in BUNDLED.items():
        assert fixture_path(name) is None  # the shared locator never returns a bundled file
        text = real_text(name)
        assert text is not None and text.bundled and text.path == FOLDER / bundled
        assert text.sample and bundled != name  # a report never passes a sample off as the file
    assert real_text("kjv.txt").describe() == "kjv_sample.txt (bundled sample of kjv.txt)"
    assert real_text("corpus.en").describe() == "corpus_en_sample.txt (bundled sample of corpus.en)"
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


def _sha256s(folder: Path) -> dict[str, str]:
    return {hashlib.sha256(path.read_bytes()).hexdigest(): path.name for path in folder.iterdir() if path.is_file()}


def test_no_bundled_file_is_a_copy_of_a_shared_file():
    # The shared fixtures stay outside the repository: fixtures/ holds samples cut from them only.
    shared = _sha256s(require_shared_fixtures())
    copies = {name: shared[digest] for digest, name in _sha256s(FOLDER).items() if digest in shared}
    assert copies == {}, "files in fixtures/ byte-identical to shared fixtures (bundled name: shared name)"


def _cutter():
    spec = importlib.util.spec_from_file_location("cut_fixture_samples", REPO / "tools" / "cut_fixture_samples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CUTTER = _cutter()
# In fixtures/ but not cut from a shared file: the licenses of repositories the shared files came from.
NOT_CUT = {"SOURCES.md", "cs336.LICENSE", "subword-nmt.LICENSE"}


def test_the_cutter_writes_every_sample_the_locator_names():
    assert {path.name for path in FOLDER.iterdir()} - NOT_CUT == set(CUTTER.SAMPLES)
    assert {sample: source for source, sample in BUNDLED.items()}.items() <= {
        name: source for name, (source, _) in CUTTER.SAMPLES.items()
    }.items()


@pytest.mark.parametrize("name", sorted(CUTTER.SAMPLES))
def test_a_bundled_file_is_what_the_cutter_writes_from_the_shared_files(name):
    source = require_fixture(CUTTER.SAMPLES[name][0])
    assert (FOLDER / name).read_bytes() == CUTTER.make(name, source.parent).encode("utf-8")


def _units(text: str) -> list[str]:
    """Documents where the file has <|endoftext|>, else lines (with their ends)."""
    return text.split(CUTTER.EOT) if CUTTER.EOT in text else text.splitlines(keepends=True)


@pytest.mark.parametrize("source", ["corpus.en", "tinystories_sample.txt", "address.txt", "kjv.txt", "udhr.txt"])
def test_a_sample_is_whole_lines_or_documents_of_the_shared_file(source):
    shared = CUTTER.read(require_fixture(source))
    sample = CUTTER.read(FOLDER / BUNDLED[source])
    units = set(_units(shared))
    assert all(unit in units for unit in _units(sample))
    assert len(sample) < len(shared)


def test_the_german_sample_is_its_first_sentences():
    shared = CUTTER.read(require_fixture("german.txt"))
    sample = CUTTER.read(FOLDER / BUNDLED["german.txt"])
    assert shared.startswith(sample.removesuffix("\n") + " ") and sample.endswith(".\n")
