"""The class table of the installed `regex` module (which the pure-Python path compares with Unicode
16.0's), kept in the cache folder: the same bytes as computed, written once, never read back when it
does not match its digest. The same for the code points a custom pattern's translation patches
(custom_regex.divergent)."""

from __future__ import annotations

import pytest

from bpe_impls.base import char_classes, custom_regex
from bpe_impls.base.cache import read_entry


def test_the_cached_table_is_the_computed_one_and_a_damaged_file_is_recomputed(tmp_path, monkeypatch):
    monkeypatch.setenv("BPE_CACHE_DIR", str(tmp_path))
    computed = char_classes.regex_table()
    assert char_classes.cached_regex_table() == computed
    (path,) = tmp_path.iterdir()
    assert path.name == char_classes.regex_table_name() and "regex-" in path.name and "unicode-" in path.name
    assert char_classes.cached_regex_table() == computed  # read back
    damaged = bytearray(path.read_bytes())
    damaged[1000] ^= 1
    path.write_bytes(bytes(damaged))
    assert char_classes.cached_regex_table() == computed
    assert path.read_bytes() != bytes(damaged)  # rewritten
    path.write_bytes(path.read_bytes()[:-1])  # truncated
    assert char_classes.cached_regex_table() == computed


def test_an_unwritable_cache_folder_only_costs_time(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("BPE_CACHE_DIR", str(blocker / "cache"))
    assert char_classes.cached_regex_table() == char_classes.regex_table()


@pytest.fixture
def fresh_divergent():
    custom_regex.divergent.cache_clear()
    yield
    custom_regex.divergent.cache_clear()


def test_the_cached_divergent_set_is_the_computed_one_and_a_damaged_file_is_recomputed(
    tmp_path, monkeypatch, fresh_divergent
):
    monkeypatch.setenv("BPE_CACHE_DIR", str(tmp_path))
    computed = custom_regex.divergent_code_points()
    assert custom_regex.divergent().points == computed
    (path,) = tmp_path.iterdir()
    assert path.name == custom_regex.divergent_name() and "regex-" in path.name
    custom_regex.divergent.cache_clear()
    assert custom_regex.divergent().points == computed  # read back
    path.write_bytes(path.read_bytes()[:-1])  # cut: fails its digest
    custom_regex.divergent.cache_clear()
    assert custom_regex.divergent().points == computed
    assert read_entry(path.name) is not None  # rewritten whole


def test_the_divergent_set_holds_the_presets_differences_and_no_ascii(fresh_divergent):
    points = custom_regex.divergent().points
    assert set(char_classes.regex_differences()[0]) <= set(points)
    assert not any(c < 0x80 for c in points)
