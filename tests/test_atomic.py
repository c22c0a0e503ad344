"""Atomic output files: the mode a plain write would give, and errors that name the user's path."""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

import pytest

from bpe_impls import cli
from bpe_impls.base import atomic
from bpe_impls.base.atomic import atomic_write, atomic_write_many


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


# --- what --out names: a FIFO, a symbolic link, a device, a directory ------------------------------


@pytest.fixture(scope="module")
def small_tok(tmp_path_factory) -> tuple[Path, Path]:
    """(a tokenizer directory, a corpus file) for `bpe encode` runs."""
    folder = tmp_path_factory.mktemp("small_tok")
    corpus = folder / "corpus.txt"
    corpus.write_text("hello world, hello there\n" * 2000, encoding="utf-8")
    tok = folder / "tok"
    assert cli.main(["train", str(corpus), "--vocab-size", "270", "--out", str(tok), "--quiet"]) == 0
    return tok, corpus


def _encode(small_tok, out: Path, *extra: str) -> int:
    tok, corpus = small_tok
    return cli.main(["encode", "--tokenizer", str(tok), str(corpus), "--out", str(out), "--quiet", *extra])


def _regular_output(small_tok, tmp_path: Path, *extra: str) -> bytes:
    """What `bpe encode` writes to a regular file: what any other kind of output must get too."""
    out = tmp_path / "regular.out"
    assert _encode(small_tok, out, *extra) == 0
    return out.read_bytes()


def test_out_a_fifo_is_written_through_to_its_reader(small_tok, tmp_path):
    expected = _regular_output(small_tok, tmp_path, "--format", "bin")
    fifo = tmp_path / "ids.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    # A daemon: if the FIFO were never opened for writing, the reader's open() would block for good.
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert _encode(small_tok, fifo, "--format", "bin") == 0
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still a FIFO, not replaced by a regular file
    reader.join()
    assert got == [expected] and len(expected) > 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ids.fifo", "regular.out"]  # no temp file


def test_npy_to_a_fifo_is_a_one_line_error(small_tok, tmp_path, capsys):
    fifo = tmp_path / "ids.npy"
    os.mkfifo(fifo)
    reader = threading.Thread(target=fifo.read_bytes, daemon=True)
    reader.start()
    assert _encode(small_tok, fifo) == 1
    reader.join()
    err = capsys.readouterr().err.strip()
    assert err == f"bpe: error: {fifo}: npy output needs a file it can seek in (a pipe or a terminal); use --format bin"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_out_a_symlink_replaces_the_file_it_points_to_and_stays_a_link(small_tok, tmp_path):
    expected = _regular_output(small_tok, tmp_path)
    real = tmp_path / "data" / "ids.npy"
    real.parent.mkdir()
    real.write_bytes(b"old ids")
    link = tmp_path / "ids.npy"
    link.symlink_to(Path("data") / "ids.npy")  # relative, as links often are
    assert _encode(small_tok, link) == 0
    assert link.is_symlink() and os.readlink(link) == os.path.join("data", "ids.npy")
    assert real.read_bytes() == expected
    assert sorted(p.name for p in real.parent.iterdir()) == ["ids.npy"]  # no temp file beside the target


def test_out_a_dangling_symlink_creates_its_target(small_tok, tmp_path):
    expected = _regular_output(small_tok, tmp_path)
    link = tmp_path / "ids.npy"
    link.symlink_to(tmp_path / "made.npy")
    assert _encode(small_tok, link) == 0
    assert link.is_symlink() and (tmp_path / "made.npy").read_bytes() == expected


@pytest.fixture
def char_device(tmp_path) -> Path:
    """A character device to write to: a twin of /dev/null made here when we may (root), so that
    a wrong run replaces only the twin; else /dev/null itself (which a non-root run cannot replace)."""
    twin = tmp_path / "null"
    try:
        os.mknod(twin, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        return Path("/dev/null")
    return twin


@pytest.mark.parametrize("output_format", ["bin", "npy"])
def test_out_a_character_device_is_written_to_not_replaced(small_tok, tmp_path, char_device, output_format):
    before = os.stat(char_device)
    assert _encode(small_tok, char_device, "--format", output_format) == 0
    after = os.stat(char_device)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    assert not [p for p in char_device.parent.iterdir() if p.name.startswith(f".{char_device.name}.")]


def test_out_a_directory_names_it_and_writes_nothing(small_tok, tmp_path, capsys):
    out = tmp_path / "ids.npy"
    out.mkdir()
    assert _encode(small_tok, out) == 1
    assert capsys.readouterr().err.strip() == f"bpe: error: {out}: Is a directory"
    assert list(tmp_path.iterdir()) == [out] and list(out.iterdir()) == []


# --- several files: all or nothing ----------------------------------------------------------------


def test_a_directory_among_several_targets_is_named_and_nothing_changes(tmp_path):
    first, second = tmp_path / "vocab.json", tmp_path / "merges.txt"
    first.write_text("old vocab")
    second.mkdir()
    with pytest.raises(IsADirectoryError) as info:
        with atomic_write_many([first, second], "w", encoding="utf-8") as handles:
            for handle in handles:
                handle.write("new")
    assert info.value.filename == str(second)
    assert first.read_text() == "old vocab"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["merges.txt", "vocab.json"]


@pytest.mark.parametrize("failing", [1, 2])
def test_a_failed_rename_puts_back_the_files_already_renamed(tmp_path, monkeypatch, failing):
    # Three targets: one existing (must get its old content back, same inode), one absent (must not
    # appear), one existing; the rename of target `failing` fails.
    targets = [tmp_path / "a.json", tmp_path / "b.txt", tmp_path / "c.json"]
    targets[0].write_text("old a")
    targets[2].write_text("old c")
    inode = targets[0].stat().st_ino
    real_replace = os.replace
    renames: list[str] = []

    def replace(src, dst):
        if str(src).endswith(".tmp"):  # a new file into place (not a rollback)
            renames.append(str(dst))
            if len(renames) == failing + 1:
                raise OSError(errno.EIO, "Input/output error", str(src), str(dst))
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(OSError) as info:
        with atomic_write_many(targets, "w", encoding="utf-8") as handles:
            for handle in handles:
                handle.write("new")
    assert info.value.errno == errno.EIO and info.value.filename == str(targets[failing])
    assert targets[0].read_text() == "old a" and targets[0].stat().st_ino == inode
    assert not targets[1].exists() and targets[2].read_text() == "old c"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "c.json"]  # no temp file, no backup


def test_cli_export_to_a_directory_with_a_directory_in_the_way_changes_nothing(small_tok, tmp_path, capsys):
    tok, _ = small_tok
    out = tmp_path / "out"
    out.mkdir()
    (out / "vocab.json").write_text("{}")  # an older save's file: must stay as it is
    (out / "merges.txt").mkdir()
    assert cli.main(["export", "--tokenizer", str(tok), "--format", "gpt2", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"bpe: error: cannot write {out / 'merges.txt'}: Is a directory"
    assert (out / "vocab.json").read_text() == "{}"
    assert sorted(p.name for p in out.iterdir()) == ["merges.txt", "vocab.json"]
