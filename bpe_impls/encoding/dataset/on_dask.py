"""`encode_dataset(..., backend="dask")`: the units encoded as Dask tasks, the shards written here.

Each unit (the same units, read by the same `unit_blocks` and encoded by the same `_encode_block`
as on the local backend) is one task, which writes its ids and its documents' ends straight into a
folder of parts inside the output directory (every worker must see it at the same path: a shared
file system), atomically, and returns only their size. This process, the driver, takes the parts in
input order and feeds them to the same ShardWriter, which alone decides where shards end; so the
shards are byte-identical to the local backend's, and a rerun after an interruption goes on from
the manifest's last complete shard whichever backend wrote it.

Faults. A worker that dies is the scheduler's business: its tasks run again on other workers (a
part is renamed into place only when complete, so a rerun task overwrites nothing but its own
temp file). A bad record ends its task's part before it, with the error in the result: the
documents before it are written, then the same one-line CorpusError as on the local backend is
raised. Ctrl-C cancels the tasks and shuts down a LocalCluster started here; the parts folder goes
either way.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...base.atomic import atomic_write
from ...base.errors import BpeError, CorpusError
from ...corpus.dask_backend import dask_client, named_failure
from ...corpus.units import SkipReport
from ..tokenizer import Tokenizer
from .run import Run, _encode_block, _fewer_documents, _Task, unit_blocks

# The folder of parts in the output directory (removed at the end, and by the next run).
PARTS_PREFIX = ".bpe-parts-"
# Ids handed to the shard writer at a time, read from a part's file (memory stays this).
_FEED_IDS = 1 << 24


@dataclass(frozen=True)
class Part:
    """What a task wrote: `name`.ids (the unit's ids, the EOTs among them) and `name`.ends (int64
    ends of its documents in those ids)."""

    name: str
    tokens: int
    documents: int
    open_tail: bool  # its last ids belong to a document that goes on in the next unit
    skipped: SkipReport
    error: str | None  # a CorpusError that ended the unit after these ids


def encode_part(task: _Task, name: str, tokenizer: Tokenizer, eot: int | None, block_size: int, folder: str) -> Part:
    """Runs on a worker: the unit's blocks encoded into its part files."""
    dtype = tokenizer.id_dtype().newbyteorder("<")
    ends: list[np.ndarray] = []
    tokens, open_tail, error, skipped = 0, False, None, SkipReport()
    with atomic_write(os.path.join(folder, name + ".ids")) as out:
        blocks = unit_blocks(task, block_size)
        try:
            while True:
                try:
                    block = next(blocks)
                except StopIteration as done:
                    skipped = done.value
                    break
                encoded = _encode_block(tokenizer, dtype, eot, block, task.unit.describe())
                out.write(np.ascontiguousarray(encoded.ids, dtype=dtype).data)
                ends.append(encoded.doc_ends + tokens)
                tokens += len(encoded.ids)
                open_tail = encoded.open_tail
        except CorpusError as exc:  # (the ids before it are the unit's part: the driver writes them first)
            error = str(exc)
        finally:
            blocks.close()
    doc_ends = np.concatenate(ends) if ends else np.empty(0, np.int64)
    with atomic_write(os.path.join(folder, name + ".ends")) as out:
        out.write(doc_ends.astype("<i8").tobytes())
    return Part(name, tokens, len(doc_ends), open_tail, skipped, error)


class DaskRun(Run):
    """Run with the units encoded on a Dask cluster (module docstring)."""

    def __init__(self, *args: Any, scheduler: str | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scheduler = scheduler

    def run(self) -> None:
        folder = self.out.resolve() / f"{PARTS_PREFIX}{os.urandom(6).hex()}"
        folder.mkdir()
        writer = self.writer()
        try:
            with (
                self.progress_bar() as bar,
                dask_client(self.workers, self.scheduler, "encoding") as (distributed, client),
            ):
                self._encode(distributed, client, writer, folder, bar)
            writer.close()
        except BaseException as exc:
            writer.abort(exc)
            raise
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self.manifest.skipped = self.skips.total()

    def _encode(self, distributed: Any, client: Any, writer: Any, folder: Path, bar: Any) -> None:
        run = folder.name[len(PARTS_PREFIX) :]
        keys = [f"bpe-encode-{run}-{k}" for k in range(len(self.tasks))]
        names = {key: task.unit.describe() for key, task in zip(keys, self.tasks)}
        # One copy of the tokenizer per worker (it pickles as its vocab and merges; built once there).
        [tokenizer] = client.scatter([self.tokenizer], broadcast=True, hash=False)
        futures = client.map(
            encode_part,
            self.tasks,
            [f"part-{k:06d}" for k in range(len(self.tasks))],
            tokenizer=tokenizer,
            eot=self.manifest.eot,
            block_size=self.block_size,
            folder=str(folder),
            key=keys,
            retries=1,
        )
        skip = self.start.record  # documents of the first file the last run wrote
        try:
            for task, future in zip(self.tasks, futures):
                try:
                    part: Part = future.result()
                except BpeError:
                    raise
                except Exception as exc:
                    raise named_failure(distributed, exc, names, "encoding", "encoding") from None
                skip = self._feed(writer, task, folder, part, skip)
                future.release()
                if part.error is not None:
                    raise CorpusError(part.error)
                self.skips.add(task.file, part.skipped)
                bar.update(task.unit.size)
                bar.set_postfix_str(f"{len(self.manifest.shards)} shards", refresh=False)
        except KeyboardInterrupt:
            client.cancel(futures, force=True)
            raise

    def _feed(self, writer: Any, task: _Task, folder: Path, part: Part, skip: int) -> int:
        """The part's ids and document ends to the writer, _FEED_IDS at a time, its first `skip`
        documents dropped (a rerun: the last run wrote them); the documents still to skip."""
        start = self.start
        ids_path, ends_path = folder / (part.name + ".ids"), folder / (part.name + ".ends")
        ends = np.fromfile(ends_path, dtype="<i8")
        ids = np.memmap(ids_path, dtype=writer.dtype.newbyteorder("<"), mode="r") if part.tokens else None
        first = 0
        if skip:
            if task.file != start.file:
                raise _fewer_documents(start, self.manifest, skip)
            dropped = min(skip, len(ends))
            first = int(ends[dropped - 1]) if dropped else part.tokens
            ends, skip = ends[dropped:], skip - dropped
            if skip and task.closes_file:
                raise _fewer_documents(start, self.manifest, skip)
        position = first
        while ids is not None and position < part.tokens:
            stop = min(position + _FEED_IDS, part.tokens)
            inside = ends[(ends > position) & (ends <= stop)]
            tail = part.open_tail if stop == part.tokens else not (len(inside) and inside[-1] == stop)
            writer.write_block(task.file, ids[position:stop], inside - position, tail)
            position = stop
        del ids
        ids_path.unlink()
        ends_path.unlink()
        return skip
