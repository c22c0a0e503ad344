"""The class table the compiled scanners use, kept in the cache folder: the same bytes as computed,
written once, never read back when it does not match its digest."""

from __future__ import annotations

import pytest

from bpe_impls.base import compiled

pytestmark = pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled core is not built")


def test_the_cached_table_is_the_computed_one_and_a_damaged_file_is_recomputed(tmp_path, monkeypatch):
    monkeypatch.setenv("BPE_CACHE_DIR", str(tmp_path))
    computed = compiled.char_classes()
    assert compiled.cached_char_classes() == computed
    (path,) = tmp_path.iterdir()
    assert path == compiled._table_path() and "regex-" in path.name and "unicode-" in path.name
    assert compiled.cached_char_classes() == computed  # read back
    damaged = bytearray(path.read_bytes())
    damaged[1000] ^= 1
    path.write_bytes(bytes(damaged))
    assert compiled.cached_char_classes() == computed
    assert path.read_bytes() != bytes(damaged)  # rewritten
    path.write_bytes(path.read_bytes()[:-1])  # truncated
    assert compiled.cached_char_classes() == computed


def test_an_unwritable_cache_folder_only_costs_time(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("BPE_CACHE_DIR", str(blocker / "cache"))
    assert compiled.cached_char_classes() == compiled.char_classes()
