"""`encode_dataset(..., backend="dask")` / `bpe encode --out-dir DIR --backend dask`: on a real
LocalCluster of worker processes, the same shard bytes and manifest as the local backend (the
reference of test_encode_dataset: one local worker, uninterrupted), for a fresh run, a run resumed
after a local one was interrupted, a bad record (named, or skipped and counted), a worker killed
mid-unit (its unit run again), and the command line starting its own cluster.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

distributed = pytest.importorskip("distributed")

from test_encode_dataset import (
    REPO,
    SHARD_TOKENS,
    _lines,
    all_ids,
    assert_consistent,
    corpus,
    expected,
    gpt2_dir,
    gpt2_parts,
    interrupted_run,
    load_manifest,
    one_line,
    oracle,
    reference,
    small_pieces,
    snapshot,
    tok,
    write_jsonl,
)

from bpe_impls.base.errors import ConfigError, CorpusError
from bpe_impls.corpus import SkippedRecordsWarning
from bpe_impls.encoding.dataset import encode as encode_module
from bpe_impls.encoding.dataset import encode_dataset

__all__ = ["corpus", "expected", "gpt2_dir", "gpt2_parts", "oracle", "reference", "tok"]  # (fixtures, used by name)

# The killing unit below travels to the workers by value: they need not import this module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def cluster():
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address="127.0.0.1:0",
        silence_logs=logging.CRITICAL,
        scheduler_kwargs={"allowed_failures": 1},
    )
    yield cluster.scheduler_address
    try:
        cluster.close()
    except KeyError:  # dask/distributed#5407 (see test_dask.py): nothing is left running
        pass


def parts_folders(out: Path) -> list[str]:
    return [name for name in os.listdir(out) if name.startswith(".bpe-parts-")]


def test_the_dask_backend_writes_the_local_backends_bytes(corpus, tok, reference, expected, tmp_path, cluster):
    out = tmp_path / "out"
    with small_pieces(2048):  # many units: parts of text documents that go on in the next unit
        manifest = encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, backend="dask", scheduler=cluster)
    assert manifest.complete and snapshot(out) == reference
    assert parts_folders(out) == []
    assert all_ids(out).tolist() == [i for ids in expected for i in ids]  # tiktoken's, document by document


@pytest.mark.parametrize("after", [1, 5])
def test_a_local_run_interrupted_is_finished_on_dask_to_the_same_bytes(
    corpus, tok, reference, tmp_path, cluster, after
):
    out = tmp_path / "out"
    interrupted_run(corpus[0], tok, out, after)
    resumed = encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, backend="dask", scheduler=cluster)
    assert resumed.kept == after and snapshot(out) == reference


def bad_data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    good = _lines()[:600]
    write_jsonl(data / "a.jsonl", good[:300])
    lines = [f'{{"text": "{doc}"}}' for doc in good[300:]]
    lines.insert(150, '{"text": "broken')  # line 151
    (data / "b.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return data


def test_a_bad_record_is_named_and_the_shards_before_it_kept_as_locally(tok, tmp_path, cluster):
    data = bad_data(tmp_path)
    errors, kept = [], []
    for backend, out in (("local", tmp_path / "local"), ("dask", tmp_path / "dask")):
        with pytest.raises(CorpusError) as info:
            encode_dataset(
                data, tok, out, shard_tokens=1000, backend=backend, scheduler=cluster if backend == "dask" else None
            )
        errors.append(one_line(info.value))
        assert_consistent(out)
        kept.append(load_manifest(out).shards)
    assert errors[0] == errors[1] and errors[0].startswith(f"{data / 'b.jsonl'}: line 151: not valid JSON")
    assert kept[0] == kept[1] and kept[0]
    with pytest.warns(SkippedRecordsWarning, match="skipped 1 bad record"):
        encode_dataset(
            data, tok, tmp_path / "dask", shard_tokens=1000, backend="dask", scheduler=cluster, skip_bad_records=True
        )
    with pytest.warns(SkippedRecordsWarning):
        encode_dataset(data, tok, tmp_path / "local", shard_tokens=1000, skip_bad_records=True)
    assert snapshot(tmp_path / "dask") == snapshot(tmp_path / "local")


@dataclass(frozen=True)
class KillsItsWorkerOnce:
    """A unit that kills the worker process reading it the first time (a marker file says it did)."""

    inner: Any
    marker: str

    path = property(lambda self: self.inner.path)
    size = property(lambda self: self.inner.size)

    def describe(self) -> str:
        return self.inner.describe()

    def _first_time(self) -> None:
        if not os.path.exists(self.marker):
            Path(self.marker).write_text("killed")
            os.kill(os.getpid(), signal.SIGKILL)

    def texts(self):
        self._first_time()
        return (yield from self.inner.texts())

    def packed(self, piece_bytes=None):
        self._first_time()
        return (yield from self.inner.packed(piece_bytes))


def test_a_killed_worker_s_unit_runs_again_to_the_same_bytes(corpus, tok, reference, tmp_path, monkeypatch, cluster):
    real = encode_module.plan_inputs
    marker = tmp_path / "killed"

    def plan_with_a_killer(*args, **kwargs):
        units = real(*args, **kwargs)
        middle = [k for k, unit in enumerate(units) if hasattr(unit, "packed")][2]  # (a unit of records)
        units[middle] = KillsItsWorkerOnce(units[middle], str(marker))
        return units

    monkeypatch.setattr(encode_module, "plan_inputs", plan_with_a_killer)
    out = tmp_path / "out"
    encode_dataset(corpus[0], tok, out, shard_tokens=SHARD_TOKENS, backend="dask", scheduler=cluster)
    assert marker.read_text() == "killed", "a worker died running the unit"
    assert snapshot(out) == reference and parts_folders(out) == []


def test_options_of_the_backend_are_checked(tok, tmp_path):
    with pytest.raises(ConfigError, match="backend must be one of local, dask"):
        encode_dataset(tmp_path, tok, tmp_path / "out", backend="spark")
    with pytest.raises(ConfigError, match="a scheduler needs backend='dask'"):
        encode_dataset(tmp_path, tok, tmp_path / "out", scheduler="tcp://127.0.0.1:1")


def test_the_cli_starts_its_own_cluster_and_writes_the_same_bytes(corpus, gpt2_dir, reference, tmp_path):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "bpe_impls", "encode", str(corpus[0]), "--tokenizer", str(gpt2_dir)]
    command += ["--out-dir", str(out), "--shard-tokens", str(SHARD_TOKENS), "--backend", "dask", "--workers", "2", "-q"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr
    assert snapshot(out) == reference
    refused = subprocess.run(
        [*command[:-5], "--scheduler", "tcp://127.0.0.1:1", "-q"], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert refused.returncode != 0 and refused.stderr.strip().splitlines()[-1].endswith(
        "--scheduler needs --backend dask"
    )
