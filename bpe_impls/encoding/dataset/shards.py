"""Writing shards: where each document's ids go, and how a shard file comes to exist.

The rule (the same for every worker count, block size and resumed run, because it depends only on
the stream of documents and their lengths, never on how the stream was cut into blocks):

  * a document goes whole into the current shard if it fits in what is left of it;
  * if it does not fit and the shard already holds ids, the shard is closed (shorter than
    shard_tokens) and the document starts the next one;
  * a document longer than shard_tokens (it starts a shard, by the rule above) fills that shard
    and as many after it as it needs, each exactly shard_tokens long; the next document starts
    right after its end.

So documents are split across shards only when a single one is longer than a shard. A document
whose length is not known yet (a text file, encoded in pieces) is written as it comes; if it
turns out not to fit, its ids so far are copied from the end of the shard's temp file into the
next shard's, and the shard is cut back to where the document started (memory stays a block).

A shard is written to a temp file beside its final name and renamed into place complete, after
its .idx (base.atomic: fsync before the rename); the caller's `publish` then enters it in the
manifest. An error or an interrupt removes the temp files of the shard being written.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from ...base.atomic import atomic_write
from ...base.errors import CorpusError
from ...corpus.units import SkipReport
from .manifest import Position, ShardEntry, shard_name, sync_directory

# Bytes copied at a time when a document moves to the next shard, and hashed at a time.
_COPY_BYTES = 8 << 20
# Bytes of a shard after which the kernel is asked to start writing them to disk: the fsync that
# completes a shard then waits for the last few MB only, not the whole shard (a 90 MB shard's took
# 37 ms here, after the last document was encoded). Linux starts the writeback of dirty pages,
# without waiting for it, when told POSIX_FADV_DONTNEED (and drops the pages only once clean).
_WRITEBACK_BYTES = 16 << 20
_START_WRITEBACK = getattr(os, "POSIX_FADV_DONTNEED", None) if sys.platform == "linux" else None
IDX_DTYPE = np.dtype("<u8")


def write_ids(file: IO[bytes], data: np.ndarray) -> None:
    """Append little-endian ids to a shard's temp file (one place, so tests can interrupt it)."""
    file.write(data.data)


class OpenShard:
    """One shard being written: a temp file beside its final name, its sha256 kept as it grows."""

    def __init__(self, out_dir: Path, index: int, dtype: np.dtype, first: Position) -> None:
        self.out_dir = out_dir
        self.index = index
        self.dtype = dtype.newbyteorder("<")  # (a no-op on little-endian machines)
        self.first = first
        self.last = first
        self.tokens = 0
        self._unflushed = 0  # bytes written since the kernel was last asked to write back
        self._starts: list[np.ndarray] = []
        self._hash = hashlib.sha256()
        self._target = atomic_write(out_dir / shard_name(index, ".bin"))
        self._file: IO[bytes] = self._target.__enter__()

    @property
    def documents(self) -> int:
        return sum(len(part) for part in self._starts)

    def write(self, ids: np.ndarray) -> None:
        if not len(ids):
            return
        data = np.ascontiguousarray(ids.astype(self.dtype, copy=False))
        write_ids(self._file, data)
        self._hash.update(data.data)
        self.tokens += len(ids)
        self._unflushed += data.nbytes
        if self._unflushed >= _WRITEBACK_BYTES and _START_WRITEBACK is not None:
            self._file.flush()
            end = self.tokens * self.dtype.itemsize
            try:
                os.posix_fadvise(self._file.fileno(), end - self._unflushed, self._unflushed, _START_WRITEBACK)
            except OSError:
                pass  # (a hint a file system may refuse: the fsync that completes the shard writes it all)
            self._unflushed = 0

    def add_starts(self, starts: np.ndarray | int) -> None:
        """Record where documents start in this shard (offsets in ids, increasing)."""
        self._starts.append(np.atleast_1d(np.asarray(starts, dtype=IDX_DTYPE)))

    def move_tail(self, start: int, to: OpenShard) -> None:
        """Move ids [start, end) of this shard to the (empty) shard `to`, and cut this one back
        to `start` ids, rehashing what stays: in pieces of _COPY_BYTES, read back from the file."""
        self._file.flush()
        fd, size = self._file.fileno(), self.dtype.itemsize
        for offset in range(start * size, self.tokens * size, _COPY_BYTES):
            data = os.pread(fd, min(_COPY_BYTES, self.tokens * size - offset), offset)
            to.write(np.frombuffer(data, dtype=self.dtype))
        os.ftruncate(fd, start * size)
        self._file.seek(start * size)
        self.tokens = start
        self._unflushed = 0  # (what was not asked for, the fsync writes)
        self._hash = hashlib.sha256()
        for offset in range(0, start * size, _COPY_BYTES):
            self._hash.update(os.pread(fd, min(_COPY_BYTES, start * size - offset), offset))

    def commit(self, resume: Position, skipped: SkipReport) -> ShardEntry:
        """Write the .idx, rename both files into place, and describe the shard."""
        starts = np.concatenate(self._starts) if self._starts else np.empty(0, IDX_DTYPE)
        idx = starts.tobytes()
        bin_name, idx_name = shard_name(self.index, ".bin"), shard_name(self.index, ".idx")
        with atomic_write(self.out_dir / idx_name) as out:
            out.write(idx)
        self._target.__exit__(None, None, None)  # flush, fsync, rename the .bin
        sync_directory(self.out_dir)
        return ShardEntry(
            self.index,
            bin_name,
            idx_name,
            self.tokens,
            len(starts),
            self._hash.hexdigest(),
            hashlib.sha256(idx).hexdigest(),
            self.first,
            self.last,
            resume,
            skipped,
        )

    def abort(self, exc: BaseException) -> None:
        """Remove the temp file (the error or interrupt `exc` goes on being raised by the caller)."""
        self._target.__exit__(type(exc), exc, exc.__traceback__)


class ShardWriter:
    """Places the stream of documents into shards by the module docstring's rule.

    Fed blocks in stream order (`write_block`), each the ids of consecutive pieces of documents
    from one input file: `doc_ends` are the offsets where documents end (the EOT included), and
    ids after the last one belong to a document that goes on in the next block (`open_tail`).
    """

    def __init__(
        self,
        out_dir: Path,
        dtype: np.dtype,
        shard_tokens: int,
        next_index: int,
        start: Position,
        end: Position,
        publish: Callable[[ShardEntry], None],
        skipped_before: Callable[[int], SkipReport],
    ) -> None:
        self.out_dir = out_dir
        self.dtype = dtype
        self.shard_tokens = shard_tokens
        self.next_index = next_index
        self.end = end  # the resume position after the last shard
        self.publish = publish
        self.skipped_before = skipped_before
        self.shard: OpenShard | None = None
        self.file, self.next_record = start.file, start.record
        self.drop = start.token  # ids of the first document the last run already wrote
        self._resumed_at = start.token
        self.doc = (start.file, start.record)  # the document being written
        self.doc_open = False  # its end not reached yet
        self.doc_written = 0  # its ids written so far, in all shards
        self.pending: int | None = None  # where the open document starts in this shard (None: before it)
        self._last_before_pending = Position(0, 0)

    # --- the stream ------------------------------------------------------------------------

    def write_block(self, file: int, ids: np.ndarray, doc_ends: np.ndarray, open_tail: bool) -> None:
        if file != self.file:
            if self.doc_open or self.drop:
                raise AssertionError("a document cannot go on into another file")
            self.file, self.next_record = file, 0
        pos = 0
        count = len(doc_ends)
        if self.drop:  # resuming inside a document longer than a shard: its first ids are written
            end = int(doc_ends[0]) if count else len(ids)
            if count and self.drop >= end:
                raise CorpusError(
                    f"input {file} document {self.next_record} is shorter than the manifest says "
                    f"({self._resumed_at} of its ids written); was the input changed?"
                )
            pos = min(self.drop, end)
            self.drop -= pos
            if self.drop:
                return
            self.doc = (self.file, self.next_record)
            self.next_record += 1
            self.doc_open, self.pending, self.doc_written = True, None, self._resumed_at
        i = 0
        if self.doc_open:  # the block starts with the rest of the open document
            if not count:
                self._extend(ids[pos:], complete=False)
                return
            self._extend(ids[pos : doc_ends[0]], complete=True)
            pos, i = int(doc_ends[0]), 1
        while i < count:
            room = self.shard_tokens - (self.shard.tokens if self.shard is not None else 0)
            # The documents i.. that fit whole in the room: written in one piece.
            fit = int(np.searchsorted(doc_ends[i:], pos + room, side="right"))
            if fit:
                ends = doc_ends[i : i + fit]
                self._append_whole(ids[pos : ends[-1]], ends, pos)
                pos, i = int(ends[-1]), i + fit
            else:
                self._start(ids[pos : doc_ends[i]], complete=True)
                pos, i = int(doc_ends[i]), i + 1
        if open_tail:
            self._start(ids[pos:], complete=False)

    def close(self) -> None:
        """The stream ended: write the last shard."""
        if self.doc_open or self.drop:
            raise AssertionError("the stream ended inside a document")
        if self.shard is not None:
            self._finish(self.end)

    def abort(self, exc: BaseException) -> None:
        if self.shard is not None:
            shard, self.shard = self.shard, None
            shard.abort(exc)

    # --- placing -------------------------------------------------------------------------------

    def _open(self, first: Position) -> OpenShard:
        if self.shard is None:
            self.shard = OpenShard(self.out_dir, self.next_index, self.dtype, first)
            self.next_index += 1
        return self.shard

    def _append_whole(self, part: np.ndarray, ends: np.ndarray, pos: int) -> None:
        """Complete documents that fit in the current shard: ids `part`, ending at `ends` (block offsets from `pos`)."""
        record = self.next_record
        shard = self._open(Position(self.file, record))
        base = shard.tokens
        starts = np.empty(len(ends), dtype=np.int64)
        starts[0] = pos
        starts[1:] = ends[:-1]
        shard.write(part)
        shard.add_starts(starts - pos + base)
        last = record + len(ends) - 1
        shard.last = Position(self.file, last, int(ends[-1] - starts[-1]))
        self.next_record = last + 1
        self.doc, self.doc_open, self.doc_written = (self.file, last), False, int(ends[-1] - starts[-1])

    def _start(self, part: np.ndarray, complete: bool) -> None:
        """A new document whose ids (so far) are `part`."""
        room = self.shard_tokens - (self.shard.tokens if self.shard is not None else 0)
        if self.shard is not None and self.shard.tokens and len(part) > room:
            self._finish(Position(self.file, self.next_record))
        self.doc = (self.file, self.next_record)
        self.next_record += 1
        self.doc_written = 0
        shard = self._open(Position(*self.doc))
        self.pending = shard.tokens
        self._last_before_pending = shard.last
        self._extend(part, complete)

    def _extend(self, part: np.ndarray, complete: bool) -> None:
        """More ids of the current document (started: `pending` says where, if in this shard)."""
        while True:
            shard = self._open(Position(*self.doc, self.doc_written))
            room = self.shard_tokens - shard.tokens
            if len(part) <= room:
                shard.write(part)
                self.doc_written += len(part)
                shard.last = Position(*self.doc, self.doc_written)
                if complete and self.pending is not None:
                    shard.add_starts(self.pending)
                    self.pending = None
                self.doc_open = not complete
                return
            if self.pending:  # it started after other ids in this shard: it moves to the next one
                self._move_open_document()
                continue
            # It starts this shard, or goes on from the one before: longer than a shard, split.
            shard.write(part[:room])
            part = part[room:]
            self.doc_written += room
            shard.last = Position(*self.doc, self.doc_written)
            if self.pending is not None:
                shard.add_starts(self.pending)
                self.pending = None
            self.doc_open = True
            self._finish(Position(*self.doc, self.doc_written))

    def _move_open_document(self) -> None:
        old = self.shard
        assert old is not None and self.pending is not None
        new = OpenShard(self.out_dir, self.next_index, self.dtype, Position(*self.doc))
        try:
            old.move_tail(self.pending, new)
            new.last = Position(*self.doc, self.doc_written)
            old.last = self._last_before_pending
            self.shard = old
            self._finish(Position(*self.doc))
        except BaseException as exc:
            new.abort(exc)
            raise
        self.shard = new
        self.next_index += 1
        self.pending = 0

    def _finish(self, resume: Position) -> None:
        """Close the current shard: rename it into place, then enter it in the manifest."""
        shard = self.shard
        assert shard is not None
        self.shard = None
        try:
            entry = shard.commit(resume, self.skipped_before(resume.file))
        except BaseException as exc:
            shard.abort(exc)
            raise
        self.publish(entry)


def read_ids(path: Path, dtype: np.dtype, start: int, stop: int) -> np.ndarray:
    """Ids [start, stop) of a shard file, in native byte order."""
    little = dtype.newbyteorder("<")
    count = stop - start
    if count <= 0:
        return np.empty(0, dtype)
    with open(path, "rb") as file:
        file.seek(start * little.itemsize)
        ids = np.fromfile(file, dtype=little, count=count)
    if len(ids) != count:
        raise CorpusError(f"{path}: ends after {start + len(ids)} ids; the manifest says it holds at least {stop}")
    return ids.astype(dtype, copy=False)


def read_idx(path: Path) -> np.ndarray[Any, np.dtype[np.uint64]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) % IDX_DTYPE.itemsize:
        raise CorpusError(f"{path}: {len(data)} bytes is not a whole number of uint64 offsets")
    return np.frombuffer(data, dtype=IDX_DTYPE).astype(np.uint64)
