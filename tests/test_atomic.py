"""Atomic output files: the mode a plain write would give, and errors that name the user's path."""

from __future__ import annotations

import errno
import os
import stat

import pytest

from bpe_impls.base import atomic
from bpe_impls.base.atomic import atomic_write, atomic_write_many
from bpe_impls import cli


@pytest.fixture
def umask():
    def set_to(mask: int) -> None:
        os.umask(mask)

    old = os.umask(0o022)
    yield set_to
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002], ids=oct)
def test_files_get_the_mode_a_plain_open_gives(tmp_path, umask, mask):
    umask(mask)
    plain = tmp_path / "plain"
    plain.write_bytes(b"x")
    ours = tmp_path / "ours"
    with atomic_write(ours) as out:
        out.write(b"x")
    first, second = tmp_path / "a", tmp_path / "b"
    with atomic_write_many([first, second], "w", encoding="utf-8") as handles:
        for handle in handles:
            handle.write("x")
    expected = stat.S_IMODE(plain.stat().st_mode)
    assert expected == 0o666 & ~mask
    assert {stat.S_IMODE(p.stat().st_mode) for p in (ours, first, second)} == {expected}


def test_a_missing_directory_is_named_by_the_users_path_not_the_temp_file(tmp_path):
    target = tmp_path / "no" / "such" / "ids.npy"
    with pytest.raises(FileNotFoundError) as info:
        with atomic_write(target) as out:
            out.write(b"x")
    assert info.value.filename == str(target)
    assert ".tmp" not in str(info.value)


def test_a_full_disk_names_the_file(tmp_path, monkeypatch):
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")  # as a failing fsync says it: no name

    monkeypatch.setattr(atomic.os, "fsync", full)
    target = tmp_path / "vocab.json"
    with pytest.raises(OSError) as info:
        with atomic_write(target) as out:
            out.write(b"{}")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []


def test_cli_encode_and_decode_create_missing_output_directories(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello world, hello there\n" * 50, encoding="utf-8")
    tok = tmp_path / "tok"
    assert cli.main(["train", str(corpus), "--vocab-size", "270", "--out", str(tok), "--quiet"]) == 0
    ids = tmp_path / "deep" / "er" / "ids.npy"
    assert cli.main(["encode", "--tokenizer", str(tok), str(corpus), "--out", str(ids), "--quiet"]) == 0
    back = tmp_path / "other" / "dir" / "back.txt"
    assert cli.main(["decode", "--tokenizer", str(tok), str(ids), "--out", str(back), "--quiet"]) == 0
    assert back.read_text(encoding="utf-8") == corpus.read_text(encoding="utf-8")


def test_cli_names_the_users_path_when_it_cannot_write(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello world\n" * 50, encoding="utf-8")
    tok = tmp_path / "tok"
    assert cli.main(["train", str(corpus), "--vocab-size", "260", "--out", str(tok), "--quiet"]) == 0
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    target = blocker / "ids.npy"  # a path through a regular file: cannot be created
    assert cli.main(["encode", "--tokenizer", str(tok), str(corpus), "--out", str(target), "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(blocker) in err and ".tmp" not in err, err
