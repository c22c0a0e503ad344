"""`encode_dataset`: the inputs read on a pool of threads, encoded on another, written in order here.

The inputs are planned into units as training plans them (corpus.planning: byte ranges of plain
files, whole compressed files, Parquet row groups). Each unit is read on a reader thread into text
blocks of about `block_size` characters, at most READ_AHEAD blocks ahead of the calling thread and
at most `workers + 1` units at once. The calling thread takes the blocks unit by unit, in input
order, hands each to the encoding pool (the compiled encoder runs without the GIL), and writes the
results oldest first with at most 2 * workers blocks in flight, as encode_file does. So the output
does not depend on the worker count, and memory is a few blocks per worker whatever the input size.

An error in a unit (a bad record, a file that changed) travels in the stream: everything before
it is written first, so the shards completed before it are kept for a rerun.
"""

from __future__ import annotations

import errno
import fcntl
import os
import queue
import re
import shutil
import signal
import threading
from collections import deque
from collections.abc import Generator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from ...base.checks import require_int, resolve_workers
from ...base.errors import ConfigError, CorpusError, EncodeError, unreadable
from ...base.progress import progress_bar
from ...corpus.dask_backend import check_scheduler
from ...corpus.inputs import Inputs, resolve_inputs
from ...corpus.planning import plan_inputs
from ...corpus.tally import warn_skipped
from ...corpus.units import CompressedText, PackedUnit, SkipReport, TextRange, Unit
from ..formats import detect
from ..tokenizer import Tokenizer
from .manifest import (
    DEFAULT_SHARD_TOKENS,
    MANIFEST_NAME,
    InputFile,
    Manifest,
    Position,
    ShardEntry,
    TokenizerInfo,
    first_change,
    load_manifest,
    save_manifest,
)
from .shards import ShardWriter
from .verify import shard_fault

# Text handed to one encoding task: large enough that a task's overheads vanish, small enough that
# a few per worker in flight stay a few MB.
DEFAULT_BLOCK_SIZE = 1 << 21
# Documents in one block at most (many tiny records: the per-block arrays stay small).
_MAX_BLOCK_DOCS = 1 << 16
# Blocks a reader holds ready for the calling thread.
READ_AHEAD = 2
# How often a reader blocked on a full queue looks whether the run was stopped.
_POLL_SECONDS = 0.1
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
                from .on_dask import DaskRun

                DaskRun(out, manifest, tok, units, threads, block_size, progress, scheduler=scheduler).run()
            else:
                _Run(out, manifest, tok, units, threads, block_size, progress).run()
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


# --- the run --------------------------------------------------------------------------------------


@dataclass
class _Task:
    """A unit to read, and where it sits in the stream."""

    unit: Unit
    file: int
    records: bool  # each text is a document (JSON Lines, Parquet); else pieces of one (a text file)
    closes_file: bool  # the file's last unit: a text file's document ends with its last piece


@dataclass
class _Block:
    file: int
    texts: list[str]
    ends: list[bool] | None  # which texts end their document; None: all
    packed: tuple[bytes, np.ndarray] | None = None  # or the documents packed (texts then empty)


@dataclass
class _Encoded:
    ids: np.ndarray
    doc_ends: np.ndarray
    open_tail: bool


class _Stopped(Exception):
    """The run stopped while a reader waited for room (the reader just ends)."""


def unit_blocks(
    task: _Task, block_size: int, stop: threading.Event | None = None
) -> Generator[_Block, None, SkipReport]:
    """One unit's documents in blocks of about block_size (characters, or bytes where packed), in
    order; returns its SkipReport. A bad record raises after the blocks before it were yielded, so
    the shards they complete are kept (the same ones for any block size). `stop`: end early."""
    if isinstance(task.unit, PackedUnit):
        return (yield from _packed_blocks(task, task.unit, block_size, stop))
    return (yield from _text_blocks(task, block_size, stop))


def _packed_blocks(
    task: _Task, unit: PackedUnit, block_size: int, stop: threading.Event | None
) -> Generator[_Block, None, SkipReport]:
    """A unit of records read packed (no str per record)."""
    datas: list[bytes] = []
    offsets: list[np.ndarray] = []
    size = documents = 0

    def block() -> _Block:
        joined = _Block(task.file, [], None, _join_packed(datas, offsets))
        datas.clear()
        offsets.clear()
        return joined

    pieces = unit.packed()
    try:
        while True:
            if stop is not None and stop.is_set():
                raise _Stopped
            try:
                data, ends = next(pieces)
            except StopIteration as done:
                report = done.value or SkipReport()
                break
            except BaseException:
                if datas:  # (the documents before a bad record go on first)
                    yield block()
                raise
            datas.append(data)
            offsets.append(np.frombuffer(ends, dtype=np.int64))
            size += len(data)
            documents += len(offsets[-1]) - 1
            if size >= block_size or documents >= _MAX_BLOCK_DOCS:
                yield block()
                size = documents = 0
    finally:
        pieces.close()
    if datas:
        yield block()
    return report


def _text_blocks(task: _Task, block_size: int, stop: threading.Event | None) -> Generator[_Block, None, SkipReport]:
    """A unit's texts (a text file's pieces, or documents) in blocks."""
    texts: list[str] = []
    ends: list[bool] = []
    size = 0
    texts_of = task.unit.texts()
    previous: str | None = None  # a text file's last piece waits, to learn whether it is the last
    try:
        while True:
            if stop is not None and stop.is_set():
                raise _Stopped
            try:
                text = next(texts_of)
            except StopIteration as done:
                report = done.value or SkipReport()
                break
            except BaseException:
                if previous is not None:
                    texts.append(previous)
                    ends.append(False)
                if texts:
                    yield _Block(task.file, texts, None if task.records else ends)
                raise
            if not task.records:
                text, previous = previous, text  # type: ignore[assignment]
                if text is None:
                    continue
            texts.append(text)
            ends.append(task.records)
            size += len(text)
            if size >= block_size or len(texts) >= _MAX_BLOCK_DOCS:
                yield _Block(task.file, texts, None if task.records else ends)
                texts, ends, size = [], [], 0
    finally:
        texts_of.close()
    if previous is not None:
        texts.append(previous)
        ends.append(task.closes_file)
    if texts:
        yield _Block(task.file, texts, None if task.records else ends)
    return report


class _Reader:
    """Reads one unit's blocks (unit_blocks) on a pool thread, a bounded queue ahead of the caller."""

    def __init__(self, task: _Task, block_size: int, stop: threading.Event) -> None:
        self.task = task
        self.block_size = block_size
        self.stop = stop
        self.queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=READ_AHEAD)

    def run(self) -> None:
        try:
            blocks = unit_blocks(self.task, self.block_size, self.stop)
            while True:
                try:
                    block = next(blocks)
                except StopIteration as done:
                    report = done.value
                    break
                self._put(("block", block))
            self._put(("end", report))
        except _Stopped:
            pass
        except BaseException as exc:  # noqa: BLE001 -- raised in order by the calling thread
            try:
                self._put(("error", exc))
            except _Stopped:
                pass

    def _put(self, item: tuple[str, Any]) -> None:
        while True:
            if self.stop.is_set():
                raise _Stopped
            try:
                self.queue.put(item, timeout=_POLL_SECONDS)
                return
            except queue.Full:
                continue


def _join_packed(datas: list[bytes], offsets: list[np.ndarray]) -> tuple[bytes, np.ndarray]:
    """Packed pieces as one (offsets from 0)."""
    if len(datas) == 1:
        return datas[0], offsets[0]
    starts = np.cumsum([0, *(len(data) for data in datas[:-1])])
    joined = np.concatenate([offsets[0], *(part[1:] + start for part, start in zip(offsets[1:], starts[1:]))])
    return b"".join(datas), joined


def _encode_block(tokenizer: Tokenizer, dtype: np.dtype, eot: int | None, block: _Block, where: str) -> _Encoded:
    """On an encoding thread: the block's ids, with the EOT after each document's last piece."""
    try:
        if block.packed is not None:
            ids, offsets = tokenizer.encode_packed_to_numpy(
                *block.packed, num_threads=1, dtype=dtype, allowed_special=set()
            )
        else:
            ids, offsets = tokenizer.encode_batch_to_numpy(
                block.texts, num_threads=1, dtype=dtype, allowed_special=set()
            )
    except EncodeError as exc:
        raise CorpusError(f"{where}: {exc}") from None
    piece_ends = offsets[1:]
    if block.ends is None:
        doc_ends, open_tail = piece_ends, False
    else:
        mask = np.asarray(block.ends, dtype=bool)
        doc_ends, open_tail = piece_ends[mask], not block.ends[-1]
    if eot is not None and len(doc_ends):
        ids = np.insert(ids, doc_ends, np.asarray(eot, dtype=ids.dtype))
        doc_ends = doc_ends + np.arange(1, len(doc_ends) + 1)
    return _Encoded(ids, doc_ends.astype(np.int64, copy=False), open_tail)


class _SkipTally:
    """Bad records skipped, by file: a shard entry records those of the files before its resume point."""

    def __init__(self, file: int, before: SkipReport) -> None:
        self.file = file
        self.before = before  # files < self.file
        self.current = SkipReport()  # file self.file

    def add(self, file: int, report: SkipReport) -> None:
        if file > self.file:
            self.before, self.current, self.file = self.before + self.current, SkipReport(), file
        self.current = self.current + report

    def before_file(self, file: int) -> SkipReport:
        return self.before + self.current if file > self.file else self.before

    def total(self) -> SkipReport:
        return self.before + self.current


class _Run:
    def __init__(
        self,
        out: Path,
        manifest: Manifest,
        tokenizer: Tokenizer,
        units: Sequence[Unit],
        workers: int,
        block_size: int,
        progress: bool,
    ) -> None:
        self.out = out
        self.manifest = manifest
        self.tokenizer = tokenizer
        self.workers = workers
        self.block_size = block_size
        self.progress = progress
        self.start = manifest.resume
        index = {record.path: i for i, record in enumerate(manifest.inputs)}
        files = [index[getattr(unit, "path")] for unit in units]  # noqa: B009 -- every unit has one
        self.tasks = [
            _Task(
                unit,
                file,
                not isinstance(unit, (TextRange, CompressedText)),
                k + 1 == len(files) or files[k + 1] != file,
            )
            for k, (unit, file) in enumerate(zip(units, files))
            if file >= self.start.file
        ]
        self.total_bytes = sum(record.size for record in manifest.inputs)
        self.done_bytes = sum(record.size for record in manifest.inputs[: self.start.file])
        self.skips = _SkipTally(self.start.file, manifest.shards[-1].skipped if manifest.shards else SkipReport())

    def publish(self, entry: ShardEntry) -> None:
        self.manifest.shards.append(entry)
        self.manifest.skipped = entry.skipped
        save_manifest(self.out, self.manifest)

    def writer(self) -> ShardWriter:
        """The shard writer, going on from the manifest's last complete shard."""
        manifest = self.manifest
        return ShardWriter(
            self.out,
            self.tokenizer.id_dtype(),
            manifest.shard_tokens,
            len(manifest.shards),
            self.start,
            Position(len(manifest.inputs), 0, 0),
            self.publish,
            self.skips.before_file,
        )

    def progress_bar(self) -> Any:
        return progress_bar(
            self.progress, total=self.total_bytes, initial=self.done_bytes, unit="B", unit_scale=True, desc="encode"
        )

    def run(self) -> None:
        manifest, start = self.manifest, self.start
        dtype = self.tokenizer.id_dtype()
        writer = self.writer()
        stop = threading.Event()
        pending: deque[tuple[str, Any, Any]] = deque()
        in_flight = 0
        bar = self.progress_bar()

        def write_oldest() -> None:
            nonlocal in_flight
            kind, task, payload = pending.popleft()
            if kind == "block":
                in_flight -= 1
                encoded: _Encoded = payload.result()
                writer.write_block(task.file, encoded.ids, encoded.doc_ends, encoded.open_tail)
            elif kind == "end":
                self.skips.add(task.file, payload)
                bar.update(task.unit.size)
                bar.set_postfix_str(f"{len(manifest.shards)} shards", refresh=False)
            else:
                raise payload

        with (
            bar,
            ThreadPoolExecutor(self.workers + 1, thread_name_prefix="bpe-read") as reading,
            ThreadPoolExecutor(self.workers, thread_name_prefix="bpe-encode") as encoding,
        ):
            try:
                readers: deque[_Reader] = deque()
                tasks = iter(self.tasks)
                skip = start.record  # documents of the first file the last run wrote
                while True:
                    while len(readers) <= self.workers and (task := next(tasks, None)) is not None:
                        reader = _Reader(task, self.block_size, stop)
                        reading.submit(reader.run)
                        readers.append(reader)
                    if not readers:
                        break
                    kind, payload = readers[0].queue.get()
                    task = readers[0].task
                    if kind == "block":
                        block: _Block | None = payload
                        if skip:
                            block, skip = _skip_documents(payload, skip, start, manifest)
                        if block is None:
                            continue
                        future: Future[_Encoded] = encoding.submit(
                            _encode_block, self.tokenizer, dtype, manifest.eot, block, task.unit.describe()
                        )
                        pending.append(("block", task, future))
                        in_flight += 1
                        while in_flight > 2 * self.workers:
                            write_oldest()
                        continue
                    readers.popleft()
                    if kind == "end" and skip and task.closes_file:
                        raise _fewer_documents(start, manifest, skip)
                    pending.append((kind, task, payload))
                    if kind == "error":
                        break
                while pending:
                    write_oldest()
                writer.close()
            except BaseException as exc:
                stop.set()
                writer.abort(exc)
                raise
            finally:
                stop.set()
                encoding.shutdown(cancel_futures=True)
                reading.shutdown(cancel_futures=True)
        self.manifest.skipped = self.skips.total()


def _skip_documents(block: _Block, skip: int, start: Position, manifest: Manifest) -> tuple[_Block | None, int]:
    """Drop the first `skip` documents of the stream (a rerun: the last run wrote them)."""
    if block.file != start.file:
        raise _fewer_documents(start, manifest, skip)
    if block.packed is not None:
        data, offsets = block.packed
        count = len(offsets) - 1
        if count <= skip:
            return None, skip - count
        kept = offsets[skip:]
        return _Block(block.file, [], None, (data[kept[0] : kept[-1]], kept - kept[0])), 0
    ends = block.ends if block.ends is not None else [True] * len(block.texts)
    count = 0
    for i, end in enumerate(ends):
        count += end
        if count == skip:
            rest = block.texts[i + 1 :]
            if not rest:
                return None, 0
            return _Block(block.file, rest, None if block.ends is None else block.ends[i + 1 :]), 0
    return None, skip - count


def _fewer_documents(start: Position, manifest: Manifest, skip: int) -> CorpusError:
    path = manifest.inputs[start.file].path
    return CorpusError(
        f"{path}: has {start.record - skip} documents, but the manifest says {start.record} were written; "
        f"was it changed? (overwrite=True starts over)"
    )


def shard_files(out_dir: str | os.PathLike[str]) -> list[str]:
    """The names of the shard files in a directory (for tools and tests)."""
    return sorted(path.name for path in _our_files(Path(out_dir))[0])


__all__ = ["BACKENDS", "DEFAULT_BLOCK_SIZE", "DEFAULT_EOT", "encode_dataset", "resolve_eot", "shard_files"]
