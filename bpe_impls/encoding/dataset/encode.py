"""`encode_dataset`: the entry point. It checks the arguments, holds the output directory (a lock,
the manifest to go on from, leftovers of a killed run removed, SIGTERM as Ctrl-C), and hands the
units to a backend: run.py's threads here, or on_dask.py's Dask tasks; both feed the same
ShardWriter in input order, so the shards do not depend on the backend.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from ...base.checks import require_int, resolve_workers
from ...base.errors import ConfigError, CorpusError, unreadable
from ...corpus.dask_backend import check_scheduler
from ...corpus.inputs import Inputs, resolve_inputs
from ...corpus.planning import plan_inputs
from ...corpus.tally import warn_skipped
from ...corpus.units import SkipReport
from ..formats import detect
from ..tokenizer import Tokenizer
from .manifest import (
    DEFAULT_SHARD_TOKENS,
    MANIFEST_NAME,
    InputFile,
    Manifest,
    ShardEntry,
    TokenizerInfo,
    first_change,
    load_manifest,
    save_manifest,
)
from .on_dask import DaskRun
from .run import Run
from .verify import shard_fault

# Text handed to one encoding task: large enough that a task's overheads vanish, small enough that
# a few per worker in flight stay a few MB.
DEFAULT_BLOCK_SIZE = 1 << 21
DEFAULT_EOT = "<|endoftext|>"
BACKENDS = ("local", "dask")
LOCK_NAME = ".bpe-encode.lock"
# Our own files in an output directory, the only ones a run ever removes.
_SHARD_FILE = re.compile(r"shard-(\d{6,})\.(bin|idx)")
# (and the parts folder of a Dask run, on_dask.PARTS_PREFIX)
_TEMP_FILE = re.compile(r"\.(shard-\d{6,}\.(bin|idx)|manifest\.json)\..+\.tmp|\.bpe-parts-[0-9a-f]+")


def encode_dataset(
    inputs: Inputs,
    tokenizer: Tokenizer | str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    text_field: str = "text",
    eot: str | int | None = "auto",
    shard_tokens: int = DEFAULT_SHARD_TOKENS,
    workers: int | None = None,
    skip_bad_records: bool = False,
    overwrite: bool = False,
    progress: bool = False,
    block_size: int = DEFAULT_BLOCK_SIZE,
    backend: str = "local",
    scheduler: str | None = None,
) -> Manifest:
    """Encode a data set into shards of token ids for a training loop (numpy.memmap); resumable.

    Documents: one per JSON Lines record or Parquet row (the string field `text_field`), and one
    per plain text file, the whole file (compressed or not): split your text into JSON Lines
    records to get several. Each is encoded as tiktoken's `encode_ordinary` does (special-token
    strings in the text are plain text: the data cannot forge a separator) and followed by the
    EOT id. Documents come in input order: the files as `bpe train` resolves them (sorted), the
    records in file order.

    The package docstring describes the files written (shards, .idx, manifest.json). Rerunning
    the same call after an interruption keeps the complete shards (checked by sha256) and goes on
    from the end of the last one, with the same bytes as an uninterrupted run.

    Args:
        inputs: files, globs or directories, as `bpe train` takes them.
        tokenizer: a Tokenizer, or the path of one saved in any format `Tokenizer.load` reads.
        out_dir: the output directory (created if needed; its other files are left alone).
        text_field: the JSON Lines / Parquet field holding the text.
        eot: the id written after each document: "auto" (the tokenizer's <|endoftext|> if it has
            that special token, else none), a special token of the tokenizer, an id, or None /
            "none" for no separator.
        shard_tokens: the most ids in a shard. Documents are not split across shards unless one
            alone is longer than this.
        workers: threads encoding (and as many reading); None: every core available.
        skip_bad_records: skip records that are not valid (counted in the manifest, and warned
            about as SkippedRecordsWarning) rather than fail.
        overwrite: start over, removing the shards and manifest already in `out_dir`.
        progress: a progress bar on stderr.
        block_size: characters of text per encoding task (the output does not depend on it).
        backend: "local" (threads here) or "dask" (one task per unit on a Dask cluster, the
            shards written here; the same bytes). Dask's workers must see `out_dir` and the inputs
            at the same paths.
        scheduler: with backend="dask", the scheduler's address; None starts a LocalCluster of
            `workers` processes.

    Returns:
        The manifest, as saved in out_dir/manifest.json.

    Raises:
        ConfigError: a bad argument, or `out_dir` holds shards of another run than this one (the
            tokenizer, an option or an input changed: named, in one line); overwrite=True starts over.
        CorpusError: an input that cannot be read, or a bad record (naming the file and the line
            or row); the shards completed before it are kept.
    """
    tok, info = _tokenizer(tokenizer)
    shard_tokens = require_int(shard_tokens, "shard_tokens", minimum=1)
    block_size = require_int(block_size, "block_size", minimum=1)
    threads = resolve_workers(workers) if workers is None else require_int(workers, "workers", minimum=1)
    if backend not in BACKENDS:
        raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if scheduler is not None and backend != "dask":
        raise ConfigError("a scheduler needs backend='dask'")
    scheduler = check_scheduler(scheduler)
    if not isinstance(text_field, str) or not text_field:
        raise ConfigError(f"text_field must be a non-empty string, got {text_field!r}")
    eot_id, eot_token = resolve_eot(tok, eot)
    dtype = tok.id_dtype()
    paths = resolve_inputs(inputs)
    records = []
    for path in paths:
        try:
            records.append(InputFile.of(path))
        except OSError as exc:
            raise unreadable(path, exc) from None
    wanted = Manifest(info, dtype.name, eot_id, eot_token, text_field, shard_tokens, records)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"{out}: exists and is not a directory") from None
    with _locked(out), _sigterm_as_interrupt():
        manifest = _prepare(out, wanted, overwrite)
        if not manifest.complete:
            units = plan_inputs(
                [os.fspath(p) for p in paths],
                (),  # cuts at the pattern's prose cuts only: special tokens are plain text here
                threads,
                text_field=text_field,
                skip_bad_records=skip_bad_records,
                pattern=tok.pattern,
            )
            if backend == "dask":
                DaskRun(out, manifest, tok, units, threads, block_size, progress, scheduler=scheduler).run()
            else:
                Run(out, manifest, tok, units, threads, block_size, progress).run()
            for record in manifest.inputs:  # the shards must be of the files as they were recorded
                how = record.change()
                if how is not None:
                    raise CorpusError(f"{record.path}: changed while it was encoded ({how}); encode it again")
            manifest.complete = True
            save_manifest(out, manifest)
    warn_skipped(manifest.skipped, stacklevel=2)
    return manifest


def resolve_eot(tokenizer: Tokenizer, eot: str | int | None) -> tuple[int | None, str | None]:
    """(id, special token or None) of the separator written after each document; None for none."""
    specials = tokenizer.special_token_ids
    if eot == "auto":
        return (specials[DEFAULT_EOT], DEFAULT_EOT) if DEFAULT_EOT in specials else (None, None)
    if eot is None or eot == "none":
        return None, None
    if isinstance(eot, str):
        if eot in specials:
            return specials[eot], eot
        known = ", ".join(repr(s) for s in specials) or "none"
        raise ConfigError(
            f"eot {eot!r} is not a special token of this tokenizer (its special tokens: {known}); "
            f"give one of them, an id, or none"
        )
    if isinstance(eot, bool) or not isinstance(eot, int):
        raise ConfigError(f"eot must be a special token, an id or None, got {eot!r}")
    if eot not in tokenizer.vocab:
        raise ConfigError(f"eot id {eot} is not in this tokenizer's vocab (ids 0-{tokenizer.n_vocab - 1})")
    named = [text for text, token_id in specials.items() if token_id == eot]
    return eot, (named[0] if named else None)


def _tokenizer(given: Tokenizer | str | os.PathLike[str]) -> tuple[Tokenizer, TokenizerInfo]:
    if isinstance(given, Tokenizer):
        return given, TokenizerInfo.of(given)
    if not isinstance(given, (str, os.PathLike)):
        raise ConfigError(f"tokenizer must be a Tokenizer or the path of a saved one, not {type(given).__name__}")
    tokenizer = Tokenizer.load(given)
    try:
        format_name: str | None = detect(given)[0]
    except Exception:  # noqa: BLE001 -- it loaded, so this is only the label
        format_name = None
    return tokenizer, TokenizerInfo.of(tokenizer, os.path.abspath(given), format_name)


# --- the output directory -----------------------------------------------------------------------


@contextmanager
def _locked(out: Path) -> Iterator[None]:
    """Hold an exclusive lock on `out` for the run: two runs into one directory would interleave."""
    try:
        fd = os.open(out / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(out)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ConfigError(f"{out}: another encode is writing this directory") from None
            raise
        yield
    finally:
        os.close(fd)  # (releases the lock)


def _our_files(out: Path) -> tuple[list[Path], list[Path]]:
    """(shard files, temp files of ours) in `out`."""
    shards, temps = [], []
    for entry in os.scandir(out):
        if _SHARD_FILE.fullmatch(entry.name):
            shards.append(Path(entry.path))
        elif _TEMP_FILE.fullmatch(entry.name):
            temps.append(Path(entry.path))
    return shards, temps


def _prepare(out: Path, wanted: Manifest, overwrite: bool) -> Manifest:
    """The manifest to go on from: the directory's own if it is of this run (its complete shards
    checked and kept), else a new one. Leftovers of a killed run (temp files, shards the manifest
    does not list) are removed."""
    shards, temps = _our_files(out)
    for temp in temps:  # (we hold the lock: no other run is writing them)
        if temp.is_dir():
            shutil.rmtree(temp, ignore_errors=True)
        else:
            temp.unlink(missing_ok=True)
    manifest_path = out / MANIFEST_NAME
    if overwrite:
        for path in shards:
            path.unlink(missing_ok=True)
        manifest_path.unlink(missing_ok=True)
        shards = []
    if not manifest_path.exists():
        if shards:
            raise ConfigError(
                f"{out}: holds shard files but no {MANIFEST_NAME}; pass overwrite=True (bpe encode --overwrite) to replace them"
            )
        save_manifest(out, wanted)
        return wanted
    old = load_manifest(out)
    change = first_change(old, wanted)
    if change is not None:
        raise ConfigError(
            f"{out}: {change} since its shards were written; pass overwrite=True (bpe encode --overwrite) to start over"
        )
    kept: list[ShardEntry] = []
    for entry in old.shards:
        if entry.index != len(kept) or shard_fault(out, entry, old.dtype) is not None:
            break  # this one and those after it are written again
        kept.append(entry)
    listed = {name for entry in kept for name in (entry.bin, entry.idx)}
    for path in shards:
        if path.name not in listed:
            path.unlink(missing_ok=True)
    wanted.shards = kept
    wanted.kept = len(kept)
    wanted.complete = old.complete and len(kept) == len(old.shards)
    wanted.skipped = old.skipped if wanted.complete else (kept[-1].skipped if kept else SkipReport())
    if not (wanted.complete and old == wanted):
        save_manifest(out, wanted)
    return wanted


# --- signals ------------------------------------------------------------------------------------


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt so the same cleanup runs."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated(signum)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """On the main thread, with SIGTERM at its default: SIGTERM cleans up as Ctrl-C does, and then
    ends the process as SIGTERM would have. (The `bpe` command handles SIGTERM itself.)"""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        raise
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def shard_files(out_dir: str | os.PathLike[str]) -> list[str]:
    """The names of the shard files in a directory (for tools and tests)."""
    return sorted(path.name for path in _our_files(Path(out_dir))[0])


__all__ = ["BACKENDS", "DEFAULT_BLOCK_SIZE", "DEFAULT_EOT", "encode_dataset", "resolve_eot", "shard_files"]
