"""The local backend of `encode_dataset`: the inputs read on a pool of threads, encoded on another,
written in order by the calling thread.

The inputs are planned into units as training plans them (corpus.planning: byte ranges of plain
files, whole compressed files, Parquet row groups). Each unit is read on a reader thread into
blocks of about `block_size` characters (text files) or bytes (records, packed: no str per record,
JSON Lines read by the compiled core without the GIL), at most READ_AHEAD blocks ahead of the calling thread and
at most `workers + 1` units at once. The calling thread takes the blocks unit by unit, in input
order, hands each to the encoding pool (the compiled encoder runs without the GIL), and writes the
results oldest first with at most 2 * workers blocks in flight, as encode_file does. So the output
does not depend on the worker count, and memory is a few blocks per worker whatever the input size.

An error in a unit (a bad record, a file that changed) travels in the stream: everything before
it is written first, so the shards completed before it are kept for a rerun.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Generator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...base.errors import CorpusError, EncodeError
from ...base.progress import progress_bar
from ...corpus import units
from ...corpus.units import CompressedText, PackedUnit, SkipReport, TextRange, Unit
from ..tokenizer import Tokenizer
from .manifest import Manifest, Position, ShardEntry, save_manifest
from .shards import ShardWriter

# Documents in one block at most (many tiny records: the per-block arrays stay small).
_MAX_BLOCK_DOCS = 1 << 16
# Blocks a reader holds ready for the calling thread.
READ_AHEAD = 2
# How often a reader blocked on a full queue looks whether the run was stopped.
_POLL_SECONDS = 0.1


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

    # JSON Lines read block_size at a time (at least a unit piece): about one piece a block, no join.
    pieces = unit.packed(max(block_size, units.PIECE_BYTES))
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
            if size >= block_size // 2 or documents >= _MAX_BLOCK_DOCS:
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
        if block.packed is not None:  # (whole documents: the encoder writes the EOT after each)
            ids, offsets = tokenizer.encode_packed_to_numpy(
                *block.packed, num_threads=1, dtype=dtype, allowed_special=set(), separator=eot
            )
            return _Encoded(ids, offsets[1:], False)
        ids, offsets = tokenizer.encode_batch_to_numpy(block.texts, num_threads=1, dtype=dtype, allowed_special=set())
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


class Run:
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
