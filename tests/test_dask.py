"""The Dask backend against a real LocalCluster with worker processes (not the synchronous scheduler).

One cluster of three single-threaded worker processes serves the module (starting one takes
seconds); the tests shrink it to two and one worker for the worker-count matrix, and kill its
worker processes for the fault tests. Its scheduler allows one worker death per task, so a single
kill must be survived and a unit that kills every worker running it must fail, naming the unit.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import cloudpickle
import psutil
import pytest

distributed = pytest.importorskip("distributed")

from test_sources import EOT, FORMATS, SPECIALS, oracle, story_docs, write_docs

from bpe_impls import cli
from bpe_impls.base.errors import ConfigError, CorpusError, WorkerError
from bpe_impls.corpus import dask_backend
from bpe_impls.corpus.dask_backend import DaskBackend, _merge_task
from bpe_impls.corpus.local import LocalBackend
from bpe_impls.corpus.planning import plan_inputs, plan_units
from bpe_impls.corpus.tally import SkippedRecordsWarning, Tally, drop_rare
from bpe_impls.corpus.units import TextRange
from bpe_impls.harness.generators.tinystories import write_corpus
from bpe_impls.trainers.registry import get_trainer

# Classes defined here (slow and self-killing units) travel to the workers by value: the worker
# processes need not be able to import this test module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

WORKERS = 3
WORKER_WAIT = 60.0  # seconds for a killed worker's nanny to bring up a new one on a loaded machine


@pytest.fixture(scope="module")
def cluster():
    cluster = distributed.LocalCluster(
        n_workers=WORKERS,
        threads_per_worker=1,
        processes=True,
        dashboard_address="127.0.0.1:0",
        silence_logs=logging.CRITICAL,
        scheduler_kwargs={"allowed_failures": 1},
    )
    yield cluster
    try:
        cluster.close()
    except KeyError:
        # dask/distributed#5407: SpecCluster's worker-status watcher can fail on a worker the
        # scheduler already removed (after a scale-down), and close() re-raises that at its very
        # end, after the scheduler and the workers are closed. Nothing is left running.
        pass


@pytest.fixture(scope="module")
def control(cluster):
    """A client of our own, to look at and resize the cluster while the backend's client counts."""
    client = distributed.Client(cluster, set_as_default=False)
    yield client
    client.close()


def resize(cluster, control, n: int) -> None:
    if len(control.nthreads()) != n:
        cluster.scale(n)
    control.wait_for_workers(n, timeout=WORKER_WAIT)
    deadline = time.monotonic() + WORKER_WAIT
    while len(control.nthreads()) != n:  # scaling down retires workers asynchronously
        assert time.monotonic() < deadline, f"cluster did not reach {n} workers"
        time.sleep(0.05)


@pytest.fixture
def full(cluster, control):
    resize(cluster, control, WORKERS)
    return cluster


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return story_docs(150_000, seed=11)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, docs) -> dict[str, Path]:
    """The same documents in every format, and a mixed directory of all of them."""
    root = tmp_path_factory.mktemp("dask_inputs")
    made = {fmt: write_docs(root / f"all.{fmt}", docs) for fmt in FORMATS}
    mixed = root / "mixed"
    (mixed / "sub").mkdir(parents=True)
    for i, fmt in enumerate(FORMATS):
        write_docs((mixed / "sub" if i % 2 else mixed) / f"part{i}.{fmt}", docs[i :: len(FORMATS)])
    made["mixed"] = mixed
    return made


# --- the reduction ---------------------------------------------------------------------------------


def test_many_units_reduce_in_a_tree_to_one_result(full, docs, tmp_path):
    """More units than one merge takes: several levels of merges, progress on, min_count at the root."""
    path = write_docs(tmp_path / "c.txt", docs)
    units = plan_units(path, SPECIALS, 30)  # ~120 units, fan-in 4: three merge levels
    assert len(units) > 64
    backend = DaskBackend(scheduler=full.scheduler_address, fan_in=4)
    assert backend.count(units, SPECIALS, progress=True) == oracle(docs)
    assert backend.count(units, SPECIALS, min_count=3) == drop_rare(oracle(docs), 3)
    assert backend.count([], SPECIALS) == Counter()


def test_packed_counts_travel_and_merge_in_c_with_min_count_at_the_root(full, docs, tmp_path):
    """With the compiled counter the workers ship PackedCounts and the driver receives one; the
    sums and min_count are those of the Counters, and train_bpe on the cluster gives local's result."""
    from bpe_impls import train_bpe
    from bpe_impls.base.patterns import GPT2
    from bpe_impls.corpus.tally import PackedCounts, has_compiled_counter

    path = write_docs(tmp_path / "c.txt", docs)
    units = plan_units(path, SPECIALS, 30)
    backend = DaskBackend(scheduler=full.scheduler_address, fan_in=4)
    for min_count in (1, 3):
        packed = backend.count(units, SPECIALS, min_count=min_count, packed=True)
        assert isinstance(packed, PackedCounts) == has_compiled_counter(GPT2)
        assert dict(packed) == dict(drop_rare(oracle(docs), min_count))
        plain = backend.count(units, SPECIALS, min_count=min_count)
        assert isinstance(plain, Counter) and plain == drop_rare(oracle(docs), min_count)
    for min_count in (1, 2):
        assert train_bpe(
            path, 350, list(SPECIALS), backend="dask", scheduler=full.scheduler_address, min_pretoken_count=min_count
        ) == train_bpe(path, 350, list(SPECIALS), impl="route_b", num_workers=1, min_pretoken_count=min_count)


def test_counts_are_exact_python_ints(full, control):
    big = [Tally(Counter({b"a": 2**40, b"b": 1})), Tally(Counter({b"a": 2**63 + 1})), Tally(Counter({b"a": 2**31}))]
    result = control.submit(_merge_task, *big, pure=False).result()
    assert result.counts == Counter({b"a": 2**40 + 2**63 + 1 + 2**31, b"b": 1})
    assert type(result.counts[b"a"]) is int
    assert big[0].counts[b"a"] == 2**40  # inputs are never modified (a recomputed merge must see them whole)


# --- bad records ----------------------------------------------------------------------------------


def test_bad_records_fail_or_are_reported_through_the_cluster(full, docs, tmp_path):
    lines = [json.dumps({"text": d}) for d in docs]
    lines[5] = '{"text": ["not", "a", "string"]}'
    lines[9] = "{truncated"
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    backend = DaskBackend(scheduler=full.scheduler_address)
    with pytest.raises(CorpusError, match=rf"^{path}: line 6: field 'text' is an array, not a string$"):
        backend.count(plan_inputs(path, SPECIALS, 3), SPECIALS)
    units = plan_inputs(path, SPECIALS, 3, skip_bad_records=True)
    good = oracle([d for i, d in enumerate(docs) if i not in (5, 9)])
    tally = backend.tally(units, SPECIALS)
    assert tally.counts == good and tally.skipped.count == 2
    assert [m for *_, m in tally.skipped.examples] == [
        f"{path}: line 6: field 'text' is an array, not a string",
        f"{path}: line 10: not valid JSON (Expecting property name enclosed in double quotes at column 2)",
    ]
    with pytest.warns(SkippedRecordsWarning, match=r"^skipped 2 bad records: .*line 6.*line 10"):
        assert backend.count(units, SPECIALS) == good


# --- faults ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlowRange(TextRange):
    """A byte range that takes a while to read, so a worker can be killed while it counts."""

    delay: float = 0.2

    def utf8_pieces(self):
        time.sleep(self.delay)
        yield from super().utf8_pieces()


@dataclass(frozen=True)
class KillerRange(TextRange):
    """A range that kills whichever worker process counts it: a task no retry can finish."""

    def utf8_pieces(self):
        os.kill(os.getpid(), signal.SIGKILL)
        yield 0, b""


def _worker_pids(control) -> dict[str, int]:
    return control.run(os.getpid)


def test_a_worker_killed_mid_count_changes_nothing(full, control, docs, tmp_path):
    path = write_docs(tmp_path / "c.txt", docs)
    units = [SlowRange(u.path, u.start, u.end) for u in plan_units(path, SPECIALS, 4)]  # 16 units, ~1.5 s
    result: dict[str, object] = {}

    def run() -> None:
        try:
            result["counts"] = DaskBackend(scheduler=full.scheduler_address).count(units, SPECIALS)
        except BaseException as exc:  # reported by the assertions below
            result["error"] = exc

    pids = _worker_pids(control)
    thread = threading.Thread(target=run)
    thread.start()
    # Kill a worker that is counting a unit and already holds a finished one, so both a running
    # task and a lost result must be recomputed elsewhere.
    deadline = time.monotonic() + 30
    victim = None
    while victim is None and time.monotonic() < deadline and thread.is_alive():
        processing, held = control.processing(), control.has_what()
        for address, keys in processing.items():
            if any("bpe-count" in k for k in keys) and any("bpe-count" in k for k in held.get(address, ())):
                victim = address
                break
        else:
            time.sleep(0.02)
    assert victim is not None, "no worker was caught counting"
    os.kill(pids[victim], signal.SIGKILL)
    killed_while_running = thread.is_alive()
    thread.join(60)
    assert killed_while_running and not thread.is_alive()
    assert "error" not in result, result.get("error")
    assert result["counts"] == oracle(docs)
    assert victim not in control.nthreads()  # it really died (its nanny starts a new one)


def test_a_unit_that_kills_every_worker_fails_naming_it(full, control, tmp_path):
    path = tmp_path / "poison.txt"
    path.write_text("a few words")
    unit = KillerRange(str(path), 0, path.stat().st_size)
    with pytest.raises(WorkerError) as info:
        DaskBackend(scheduler=full.scheduler_address).count([unit], SPECIALS)
    message = str(info.value)
    assert message.startswith(f"counting {unit.describe()}: 2 Dask workers died") and "\n" not in message


def test_an_unreachable_scheduler_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr(dask_backend, "CONNECT_TIMEOUT", "1s")
    with pytest.raises(WorkerError, match=r"^cannot connect to the Dask scheduler at tcp://127\.0\.0\.1:9: ") as info:
        DaskBackend(scheduler="tcp://127.0.0.1:9").count([TextRange("x", 0, 0)], SPECIALS)
    assert "\n" not in str(info.value)


def test_dask_missing_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)  # what `import distributed` sees when not installed
    path = write_docs(tmp_path / "a.txt", ["x"])
    with pytest.raises(ConfigError, match=r"^dask is not installed: pip install 'bpe_impls\[dask\]'$"):
        DaskBackend(2).count(plan_inputs(path, SPECIALS, 1), SPECIALS)
    # And the package, the backend module and the local path import and work without it.
    code = (
        "import sys; sys.modules['dask'] = sys.modules['distributed'] = None\n"
        "import bpe_impls, bpe_impls.corpus.dask_backend, bpe_impls.corpus.planning\n"
        "from bpe_impls.corpus.local import LocalBackend\n"
        f"print(sum(LocalBackend(1).count(bpe_impls.corpus.planning.plan_inputs({str(path)!r}, None, 1), ()).values()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "1", out.stderr


# --- a LocalCluster of its own, and Ctrl-C --------------------------------------------------------


def _descendants() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pids: set[int], timeout: float) -> set[int]:
    deadline = time.monotonic() + timeout
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        alive = {pid for pid in alive if _running(pid)}
        time.sleep(0.05)
    return alive


def test_own_local_cluster_is_started_and_shut_down(full, docs, tmp_path):
    path = write_docs(tmp_path / "c.txt", docs)
    before = _descendants()
    assert DaskBackend(num_workers=2).count(plan_inputs(path, SPECIALS, 2), SPECIALS) == oracle(docs)
    assert not _wait_gone(_descendants() - before, 10), "worker processes outlived the count"


# --- the command ---------------------------------------------------------------------------------


def test_cli_on_a_cluster_writes_the_local_tokenizer(full, inputs, tmp_path, capsys):
    common = [str(inputs["mixed"]), "--vocab-size", "400", "--special-token", EOT, "--quiet"]
    assert cli.main(["train", *common, "--out", str(tmp_path / "local"), "--workers", "2"]) == 0
    assert (
        cli.main(
            [
                "train",
                *common,
                "--out",
                str(tmp_path / "dask"),
                "--backend",
                "dask",
                "--scheduler",
                full.scheduler_address,
            ]
        )
        == 0
    )
    for name in ("vocab.json", "merges.txt"):
        assert (tmp_path / "dask" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()


def test_cli_ctrl_c_shuts_down_its_cluster_and_writes_nothing(tmp_path):
    corpus = write_corpus(tmp_path / "big.txt", 40_000_000, seed=2)
    out = tmp_path / "tok"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bpe_impls",
            "train",
            str(corpus),
            "--vocab-size",
            "300",
            "--special-token",
            EOT,
            "--backend",
            "dask",
            "--workers",
            "2",
            "--out",
            str(out),
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "BPE_IMPLS_PURE": "1"},  # pure-Python counting takes seconds: Ctrl-C lands in it
    )
    try:
        root = psutil.Process(proc.pid)
        deadline = time.monotonic() + 90
        busy: list[psutil.Process] = []
        while not busy:  # wait until the cluster's workers are counting
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the workers never started counting"
            # A worker process spends ~1 s of CPU starting; beyond 2 s it is counting.
            workers = [p for p in root.children(recursive=True) if "spawn_main" in " ".join(_cmd(p))]
            busy = [p for p in workers if _cpu_seconds(p) > 2]
            time.sleep(0.1)
        tree = {p.pid for p in root.children(recursive=True)}
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole process group
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and err.strip().splitlines()[-1] == "bpe: interrupted", err
    assert "Traceback" not in err, err
    assert not out.exists()
    assert not _wait_gone(tree, 10), "cluster processes outlived Ctrl-C"


def _cpu_seconds(proc: psutil.Process) -> float:
    try:
        times = proc.cpu_times()
        return times.user + times.system
    except psutil.NoSuchProcess:
        return 0.0


def _cmd(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return []


# --- identical counts (last: it shrinks the cluster) --------------------------------------------


@pytest.mark.parametrize("workers", [3, 2, 1])  # shrinking: retiring a worker is quick, starting one is not
def test_dask_counts_equal_local_for_every_input(cluster, control, inputs, docs, workers):
    resize(cluster, control, workers)
    backend = DaskBackend(scheduler=cluster.scheduler_address)
    expected = oracle(docs)
    for name, path in inputs.items():
        units = plan_inputs(path, SPECIALS, workers)
        local = LocalBackend(1).count(units, SPECIALS)
        assert local == expected, name
        assert backend.count(units, SPECIALS) == local, name
    # Same counts, so the same vocab and merges; checked once end to end on the mixed directory.
    if workers == 1:
        units = plan_inputs(inputs["mixed"], SPECIALS, 1)
        train = get_trainer(None)
        assert train(backend.count(units, SPECIALS), 400, list(SPECIALS)) == train(expected, 400, list(SPECIALS))
