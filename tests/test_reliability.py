"""Failure and interruption: dead and failing workers, Ctrl-C, atomic outputs, malformed tokenizer input.

The CLI tests send real signals to a real `python -m bpe_impls train` subprocess and watch its
whole process tree with psutil: the CLI, the forkserver and resource tracker it starts, and the
counting workers (children of the forkserver, so grandchildren of the CLI).
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe_impls import Tokenizer, cli, count_pretokens
from bpe_impls.base import atomic
from bpe_impls.base.errors import BpeError, CorpusError, WorkerError
from bpe_impls.corpus import local
from bpe_impls.corpus.count import count_units
from bpe_impls.corpus.planning import plan_inputs, plan_units
from bpe_impls.corpus.units import TextRange
from bpe_impls.harness.generators.tinystories import write_corpus

EOT = "<|endoftext|>"
# Large enough that counting takes seconds on 2 cores (so a signal lands in it), small enough to
# generate in about a second.
CORPUS_BYTES = 30_000_000
START_TIMEOUT = 60.0  # seconds until the workers exist, generous for a loaded machine
STOP_LIMIT = 2.0  # seconds within which Ctrl-C must end the run
# Runs that must count in worker processes: those are what the pure-Python path (no compiled
# core) uses; with the core, counting runs on threads, which have no process to kill.
PROCESSES = {"BPE_IMPLS_PURE": "1"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("reliability") / "corpus.txt", CORPUS_BYTES, seed=0)


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("reliability_small") / "small.txt", 2_000_000, seed=1)


# --- a CLI run and its process tree -----------------------------------------------------------


class TreeRun:
    """`python -m bpe_impls ARGS` in a subprocess, remembering every process its tree ever had."""

    def __init__(self, *args: str, env: dict[str, str] | None = None):
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "bpe_impls", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=None if env is None else {**os.environ, **env},
        )
        self.root = psutil.Process(self.popen.pid)
        self.seen: dict[int, float] = {self.popen.pid: self.root.create_time()}

    def tree(self) -> list[psutil.Process]:
        try:
            procs = self.root.children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        for proc in procs:
            try:
                self.seen.setdefault(proc.pid, proc.create_time())
            except psutil.NoSuchProcess:
                pass
        return procs

    def workers(self) -> list[psutil.Process]:
        """Counting workers: the children of the forkserver (the CLI's child running forkserver.main)."""
        procs = self.tree()
        servers = {p.pid for p in procs if _is_forkserver(p) and p.ppid() == self.popen.pid}
        return [p for p in procs if _ppid(p) in servers]

    def wait_for(self, condition: Callable[[], object], timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            if self.popen.poll() is not None:
                out, err = self.popen.communicate()
                pytest.fail(f"run ended (exit {self.popen.returncode}) before {what}: {err or out}")
            time.sleep(0.01)
        pytest.fail(f"timed out waiting for {what}")

    def finish(self, timeout: float) -> tuple[int, str, str]:
        out, err = self.popen.communicate(timeout=timeout)
        return self.popen.returncode, out, err

    def survivors(self, grace: float = 5.0) -> list[int]:
        """Processes of the tree still running after `grace` seconds (zombies count as gone)."""
        deadline = time.monotonic() + grace
        while True:
            alive = [pid for pid, created in self.seen.items() if _running(pid, created)]
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.05)

    def kill_all(self) -> None:
        """Cleanup after a failed test: kill what is left of this run's own tree, by pid."""
        for pid, created in self.seen.items():
            if _running(pid, created):
                try:
                    psutil.Process(pid).kill()
                except psutil.NoSuchProcess:
                    pass
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.communicate()


def _is_forkserver(proc: psutil.Process) -> bool:
    try:
        return "multiprocessing.forkserver" in " ".join(proc.cmdline())
    except psutil.Error:
        return False


def _ppid(proc: psutil.Process) -> int | None:
    try:
        return proc.ppid()
    except psutil.Error:
        return None


def _running(pid: int, created: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def runs() -> Iterator[Callable[..., TreeRun]]:
    started: list[TreeRun] = []

    def start(*args: str, env: dict[str, str] | None = None) -> TreeRun:
        run = TreeRun(*args, env=env)
        started.append(run)
        return run

    yield start
    for run in started:
        run.kill_all()


def train_args(corpus: Path, out: Path, vocab_size: int = 1000, impl: str = "bucket") -> list[str]:
    return [
        "train",
        str(corpus),
        "--vocab-size",
        str(vocab_size),
        "--special-token",
        EOT,
        "--impl",
        impl,
        "--workers",
        "2",
        "--out",
        str(out),
        "--quiet",
    ]


# A run a Ctrl-C test interrupts must still be running when the signal arrives, however loaded
# the machine: the naive trainer's merge phase on CORPUS_BYTES at this vocab takes hours, so
# the run cannot finish first, whatever the delays. (Each naive merge is a Python loop that
# Ctrl-C stops at once.)
ENDLESS = {"vocab_size": 20_000, "impl": "naive"}


def one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpe: error: "), stderr
    return lines[0]


def assert_no_output(out: Path) -> None:
    """Neither a tokenizer file nor a temp file: the directory is absent or empty."""
    assert not out.exists() or sorted(p.name for p in out.iterdir()) == []


# --- a worker that dies -------------------------------------------------------------------------


def test_sigkilled_worker_fails_the_run_naming_its_unit(corpus, tmp_path, runs):
    out = tmp_path / "tok"
    run = runs(*train_args(corpus, out), env=PROCESSES)
    workers = run.wait_for(run.workers, START_TIMEOUT, "counting workers")
    victim = workers[0]
    victim.kill()  # SIGKILL: no handler runs, as with the OOM killer
    code, stdout, stderr = run.finish(timeout=30)
    assert code == 1 and "trained" not in stdout
    line = one_error_line(stderr)
    match = re.fullmatch(
        rf"bpe: error: counting worker \(pid (\d+)\) was killed by SIGKILL while counting "
        rf"{re.escape(str(corpus))} bytes (\d+)-(\d+)",
        line,
    )
    assert match, line
    # The pid is the one killed, and the range one unit of the plan the CLI made (it is
    # deterministic): one named unit, not a list of candidates.
    assert int(match.group(1)) == victim.pid
    assert TextRange(str(corpus), int(match.group(2)), int(match.group(3))) in plan_units(corpus, (EOT,), 2)
    assert_no_output(out)
    assert run.survivors() == []


@dataclass(frozen=True)
class DyingRange(TextRange):
    """A unit whose worker kills itself with SIGKILL when it starts reading it (in a real worker)."""

    die: bool = False

    def utf8_pieces(self) -> Iterator[tuple[int, bytes]]:
        if self.die:
            os.kill(os.getpid(), signal.SIGKILL)
        yield from super().utf8_pieces()


@pytest.mark.parametrize("victim", [0, 3, 6])
def test_dead_worker_error_names_exactly_the_unit_it_held(small_corpus, victim, monkeypatch):
    monkeypatch.setattr(local, "POOL", "processes")  # a thread cannot die alone
    # 2 workers, 8 units, two units handed to each worker at a time: whichever unit's worker
    # dies -- its first, a prefetched one, a late one -- the error names that unit and no other.
    planned = plan_units(small_corpus, (EOT,), 2)
    units = [DyingRange(u.path, u.start, u.end, die=i == victim) for i, u in enumerate(planned)]
    assert len(units) == 8
    with pytest.raises(WorkerError) as info:
        count_units(units, (EOT,), num_workers=2)
    named = re.escape(units[victim].describe())
    expected = rf"counting worker \(pid \d+\) was killed by SIGKILL while counting {named}"
    assert re.fullmatch(expected, str(info.value)), str(info.value)


# --- a worker that raises -----------------------------------------------------------------------


@dataclass(frozen=True)
class FailingRange(TextRange):
    """A unit whose reading raises an unexpected (non-BpeError) exception inside the worker."""

    def utf8_pieces(self) -> Iterator[tuple[int, bytes]]:
        raise RuntimeError("disk controller\non fire")


@pytest.mark.parametrize("pool", ["threads", "processes"])
def test_unexpected_worker_exception_is_one_line_naming_the_unit(small_corpus, pool, monkeypatch):
    monkeypatch.setattr(local, "POOL", pool)
    units = plan_units(small_corpus, (EOT,), 2)
    bad = FailingRange(units[5].path, units[5].start, units[5].end)
    units[5] = bad
    with pytest.raises(WorkerError) as info:
        count_units(units, (EOT,), num_workers=2)
    assert str(info.value) == f"counting {bad.describe()} failed: RuntimeError: disk controller on fire"


def test_corpus_truncated_while_counting_names_the_unit(corpus, tmp_path, runs):
    # A real condition, not a hook: the file shrinks after the units were planned. Without the
    # check, the short read would be counted silently and the tokenizer trained on part of it.
    copy = tmp_path / "shrinking.txt"
    shutil.copyfile(corpus, copy)
    out = tmp_path / "tok"
    run = runs(*train_args(copy, out), env=PROCESSES)
    run.wait_for(run.workers, START_TIMEOUT, "counting workers")
    new_size = CORPUS_BYTES // 3
    os.truncate(copy, new_size)
    code, stdout, stderr = run.finish(timeout=60)
    assert code == 1 and "trained" not in stdout
    line = one_error_line(stderr)
    # A unit opened after the change is named with the new size; one being read across the new
    # end, with the bytes it got up to there.
    prefix = rf"bpe: error: {re.escape(str(copy))} bytes (\d+)-(\d+): file changed while counting "
    resized = re.fullmatch(rf"{prefix}\(now {new_size} bytes, was {CORPUS_BYTES}\)", line)
    short = re.fullmatch(rf"{prefix}\(read (\d+) of (\d+) bytes\)", line)
    assert resized or short, line
    if short:
        start, end, got, wanted = map(int, short.groups())
        assert end > new_size and wanted == end - start and got == max(0, new_size - start)
    assert_no_output(out)
    assert run.survivors() == []


@pytest.mark.parametrize("pool", ["threads", "processes"])
@pytest.mark.parametrize("suffix", [".txt", ".jsonl", ".txt.gz", ".jsonl.gz"])
def test_a_corpus_replaced_after_planning_is_an_error_naming_the_unit(tmp_path, monkeypatch, pool, suffix):
    # Another file of the same size renamed over the corpus (log rotation, a sync tool) after
    # the units were planned: without a check, the workers would count the new file's text at
    # the old file's cuts.
    monkeypatch.setattr(local, "POOL", pool)
    path = tmp_path / f"c{suffix}"
    line = "Once upon a time. " if ".txt" in suffix else '{"text": "Once upon a time."}\n'

    def write(target: Path, text: str) -> None:
        data = text.encode()
        target.write_bytes(gzip.compress(data, mtime=0) if suffix.endswith(".gz") else data)

    write(path, line * 20_000)
    units = plan_inputs([path], (EOT,), 2)
    assert len(units) > 1 or suffix.endswith(".gz")  # (a compressed file is one unit)
    other = tmp_path / "other"
    write(other, line.replace("time", "tile") * 20_000)
    assert other.stat().st_size == path.stat().st_size
    os.replace(other, path)
    with pytest.raises(CorpusError) as info:
        count_units(units, (EOT,), num_workers=2)
    assert re.fullmatch(
        rf"{re.escape(str(path))}( bytes \d+-\d+)?: file changed while counting "
        r"\(replaced by another file\)",
        str(info.value),
    ), str(info.value)


def test_in_process_counting_also_detects_a_shrunk_file(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("Once upon a time. " * 1000)
    unit = TextRange(str(path), 0, path.stat().st_size)
    os.truncate(path, 100)
    with pytest.raises(CorpusError, match=r"bytes 0-18000: file changed while counting \(read 100 of 18000 bytes\)"):
        count_units([unit], (), num_workers=1)


def test_one_worker_starts_no_process(tmp_path, monkeypatch):
    def no_pool(*args, **kwargs):
        raise AssertionError("num_workers=1 must not start processes")

    monkeypatch.setattr(local, "_Pool", no_pool)
    monkeypatch.setattr(local, "POOL", "processes")
    path = tmp_path / "c.txt"
    path.write_text("one. two. three." * 100)
    assert count_pretokens(path, [], num_workers=1)[b" two"] == 100
    with pytest.raises(AssertionError, match="must not start"):
        count_pretokens(path, [], num_workers=2)  # the patch is really on the path a pool takes


# --- Ctrl-C ---------------------------------------------------------------------------------------


def _interrupt(run: TreeRun) -> tuple[int, str, str, float]:
    assert run.popen.poll() is None, "the run ended before it could be interrupted"
    sent = time.monotonic()
    run.popen.send_signal(signal.SIGINT)  # to the CLI process only, as `kill -INT` does
    code, stdout, stderr = run.finish(timeout=30)
    return code, stdout, stderr, time.monotonic() - sent


def test_ctrl_c_while_counting(corpus, tmp_path, runs):
    out = tmp_path / "tok"
    run = runs(*train_args(corpus, out, **ENDLESS), env=PROCESSES)
    run.wait_for(run.workers, START_TIMEOUT, "counting workers")
    # Whether the signal lands while the workers count or just after, the run is still going.
    code, stdout, stderr, seconds = _interrupt(run)
    assert code == 130 and stderr.strip() == "bpe: interrupted" and stdout == ""
    assert seconds < STOP_LIMIT
    assert_no_output(out)
    assert run.survivors() == []  # workers, forkserver and resource tracker included


def test_ctrl_c_while_merging(corpus, tmp_path, runs):
    out = tmp_path / "tok"
    run = runs(*train_args(corpus, out, **ENDLESS), env=PROCESSES)
    workers = run.wait_for(run.workers, START_TIMEOUT, "counting workers")
    started = [(w.pid, w.create_time()) for w in workers]
    # Workers exit only when the pool stops, after the last unit: then the merges run.
    run.wait_for(lambda: not any(_running(*w) for w in started), 120, "counting to finish")
    code, stdout, stderr, seconds = _interrupt(run)
    assert code == 130 and stderr.strip() == "bpe: interrupted" and stdout == ""
    assert seconds < STOP_LIMIT
    assert_no_output(out)
    assert run.survivors() == []


@pytest.mark.parametrize("delay", [0.0, 0.15, 1.0])
def test_ctrl_c_with_counting_threads(corpus, tmp_path, runs, delay):
    """With the compiled core, counting runs on threads of the CLI process itself: Ctrl-C during
    counting (right after start-up) or merging still ends the run at once and cleanly."""
    if local.POOL != "threads":
        pytest.skip("counting threads need the compiled core (bpe_impls._native), not built here")
    out = tmp_path / "tok"
    # One BLAS thread: numpy (imported at start-up) would otherwise start a pool of its own, and
    # its threads would pass for counting threads below, so Ctrl-C could land during the imports.
    run = runs(*train_args(corpus, out, **ENDLESS), env={"OPENBLAS_NUM_THREADS": "1"})
    # Wait until the counting threads exist (or counting is already over), then the chosen delay.
    run.wait_for(
        lambda: run.root.num_threads() > 1 or sum(run.root.cpu_times()[:2]) > 1.5, START_TIMEOUT, "counting to start"
    )
    time.sleep(delay)
    code, stdout, stderr, seconds = _interrupt(run)
    assert code == 130 and stderr.strip() == "bpe: interrupted" and stdout == ""
    assert seconds < STOP_LIMIT
    assert_no_output(out)
    assert run.survivors() == []


# --- SIGTERM and SIGHUP: the same cleanup as Ctrl-C --------------------------------------------


def _terminate(run: TreeRun, signum: int) -> tuple[int, str, str]:
    assert run.popen.poll() is None, "the run ended before the signal"
    run.popen.send_signal(signum)  # to the CLI process only, as `kill` or a service manager does
    return run.finish(timeout=30)


def test_sigterm_while_counting_stops_the_workers_and_writes_nothing(corpus, tmp_path, runs):
    out = tmp_path / "tok"
    run = runs(*train_args(corpus, out, **ENDLESS), env=PROCESSES)
    run.wait_for(run.workers, START_TIMEOUT, "counting workers")
    code, stdout, stderr = _terminate(run, signal.SIGTERM)
    assert (code, stderr.strip(), stdout) == (128 + signal.SIGTERM, "bpe: terminated by SIGTERM", "")
    assert_no_output(out)
    assert run.survivors() == []  # workers, forkserver and resource tracker included


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_during_encode_removes_the_temp_file(saved_tokenizer, small_corpus, tmp_path, runs, signum):
    tok = _write_tokenizer(saved_tokenizer, tmp_path / "tok")
    # The input is a FIFO the test writes to and keeps open, so the run cannot end before the signal.
    source = tmp_path / "in.fifo"
    os.mkfifo(source)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    run = runs(
        "encode",
        "--tokenizer",
        str(tok),
        str(source),
        "--out",
        str(out_dir / "ids.bin"),
        "--threads",
        "1",
        "--block-size",
        "65536",
        "--quiet",
    )
    text = small_corpus.read_bytes()

    def open_writer() -> list[int]:  # once the run has opened the FIFO for reading (else ENXIO)
        try:
            return [os.open(source, os.O_WRONLY | os.O_NONBLOCK)]
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return []
            raise

    (fd,) = run.wait_for(open_writer, START_TIMEOUT, "the run to open its input")
    os.set_blocking(fd, True)
    writer = os.fdopen(fd, "wb")

    def feed() -> None:
        try:
            writer.write(text)
            writer.flush()
        except BrokenPipeError:  # the run ended
            pass

    feeding = threading.Thread(target=feed, daemon=True)
    feeding.start()
    try:
        # The event: ids reached the temp file, so the signal lands in the middle of the output.
        run.wait_for(lambda: [p for p in out_dir.iterdir() if p.stat().st_size > 0], START_TIMEOUT, "ids written")
        code, stdout, stderr = _terminate(run, signum)
    finally:
        try:
            writer.close()
        except BrokenPipeError:
            pass
        feeding.join()
    name = signal.Signals(signum).name
    assert (code, stderr.strip(), stdout) == (128 + signum, f"bpe: terminated by {name}", "")
    assert list(out_dir.iterdir()) == []
    assert run.survivors() == []


def test_ctrl_c_while_writing_keeps_the_old_tokenizer_whole(small_corpus, tmp_path, monkeypatch, capsys):
    out = tmp_path / "tok"
    args = [
        "train",
        str(small_corpus),
        "--vocab-size",
        "300",
        "--special-token",
        EOT,
        "--impl",
        "bucket",
        "--workers",
        "1",
        "--out",
        str(out),
        "--quiet",
    ]
    assert cli.main(args) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["merges.txt", "special_tokens.json", "split_pattern.json", "vocab.json"]

    real_fsync = os.fsync
    calls = []

    def interrupted_fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:  # the second of the four temp files: one is complete, none renamed
            raise KeyboardInterrupt
        real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", interrupted_fsync)
    args[args.index("300")] = "320"  # a different tokenizer, so a partial write would show
    assert cli.main(args) == 130
    assert len(calls) == 2
    assert "bpe: interrupted" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temp file, no new file


# --- malformed input to the Tokenizer (what test_tokenizer and test_formats do not cover) -------

SAMPLE = f"Once upon a time, Tom's cat ran  fast!\n{EOT}Ünïcödé 🙂 日本語\t\r\n  12345 end"


@pytest.fixture(scope="module")
def saved_tokenizer(tmp_path_factory: pytest.TempPathFactory, small_corpus: Path) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("tok")
    assert (
        cli.main(
            [
                "train",
                str(small_corpus),
                "--vocab-size",
                "400",
                "--special-token",
                EOT,
                "--impl",
                "bucket",
                "--workers",
                "1",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    return {p.name: p.read_bytes() for p in out.iterdir()}


def _write_tokenizer(files: dict[str, bytes], folder: Path) -> Path:
    """The saved tokenizer's files written into a new `folder`."""
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


def _mutate(data: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    for position, delete, insert in edits:
        at = position % (len(data) + 1)
        data = data[:at] + insert + data[at + delete :]
    return data


edits = st.lists(
    st.tuples(
        st.integers(0, 10**6),
        st.integers(0, 8),
        st.binary(max_size=6)
        | st.sampled_from(
            [b'"', b",", b"}", b"{", b" ", b"\n", b"\xc4\xa0", b"0", b"-1", b"99999", b"true", b"\\u0000", b"\xff"]
        ),
    ),
    min_size=1,
    max_size=4,
)


def _assert_loads_consistently_or_fails_in_one_line(folder: Path) -> None:
    """Edited tokenizer files either load into a self-consistent tokenizer or fail with one line."""
    try:
        tok = Tokenizer.load(folder)
    except BpeError as exc:
        assert "\n" not in str(exc) and str(exc)
        return
    finally:
        shutil.rmtree(folder)
    # Whatever loads is self-consistent: byte-level BPE round-trips every text, streamed or not.
    assert tok.decode(tok.encode(SAMPLE)) == SAMPLE
    assert tok.decode(list(tok.encode_iterable([SAMPLE[:7], SAMPLE[7:]]))) == SAMPLE


@settings(max_examples=examples(150), deadline=None)
@given(name=st.sampled_from(["vocab.json", "merges.txt", "special_tokens.json"]), changes=edits)
def test_fuzzed_tokenizer_files_load_or_fail_with_one_line(saved_tokenizer, tmp_path_factory, name, changes):
    folder = tmp_path_factory.mktemp("fuzz", numbered=True)
    for file_name, data in saved_tokenizer.items():
        (folder / file_name).write_bytes(_mutate(data, changes) if file_name == name else data)
    _assert_loads_consistently_or_fails_in_one_line(folder)


structural_edits = st.lists(
    st.tuples(
        st.sampled_from(["drop_token", "set_id", "swap_ids", "drop_merge", "swap_merges", "repeat_merge", "rename"]),
        st.integers(0, 10**6),
        st.integers(0, 10**6),
        st.integers(-2, 600),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=examples(150), deadline=None)
@given(changes=structural_edits)
def test_structurally_edited_tokenizer_files_load_or_fail_with_one_line(saved_tokenizer, tmp_path_factory, changes):
    # Edits that keep both files well-formed, so the checks behind the parser are reached:
    # ids reused or missing, merges out of order, repeated, or naming unknown tokens.
    vocab = json.loads(saved_tokenizer["vocab.json"])
    merges = saved_tokenizer["merges.txt"].decode().splitlines()[1:]
    for kind, i, j, value in changes:
        tokens = list(vocab)
        a, b = tokens[i % len(tokens)], tokens[j % len(tokens)]
        if kind == "drop_token":
            del vocab[a]
        elif kind == "set_id":
            vocab[a] = value
        elif kind == "swap_ids":
            vocab[a], vocab[b] = vocab[b], vocab[a]
        elif kind == "rename":
            vocab[a + b] = vocab.pop(a)
        elif merges and kind == "drop_merge":
            del merges[i % len(merges)]
        elif merges and kind == "swap_merges":
            x, y = i % len(merges), j % len(merges)
            merges[x], merges[y] = merges[y], merges[x]
        elif merges and kind == "repeat_merge":
            merges.insert(j % len(merges), merges[i % len(merges)])
    folder = tmp_path_factory.mktemp("edited", numbered=True)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (folder / "merges.txt").write_text("\n".join(["#version: 0.2", *merges]) + "\n", encoding="utf-8")
    (folder / "special_tokens.json").write_bytes(saved_tokenizer["special_tokens.json"])
    _assert_loads_consistently_or_fails_in_one_line(folder)


def test_vocab_json_without_every_byte_is_a_one_line_error(saved_tokenizer, tmp_path):
    vocab = json.loads(saved_tokenizer["vocab.json"])
    del vocab["Ā"]  # byte 0x00 in GPT-2's table
    (tmp_path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (tmp_path / "merges.txt").write_bytes(saved_tokenizer["merges.txt"])
    with pytest.raises(BpeError, match=r"^vocab has no token for byte 0x00 \(1 bytes missing\)$"):
        Tokenizer.load(tmp_path)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"\x93NUMPY garbage", "not a readable .npy file"),
        (b"", "not a readable .npy file"),
        # A text file: numpy itself would talk about pickled object arrays.
        (b"hello world, not ids\n", "not a readable .npy file: it does not start with the NumPy header"),
        (np.zeros((2, 3), dtype=np.uint16), "expected a 1-D integer array, got shape (2, 3)"),
        (np.array([1.5, 2.0]), "expected a 1-D integer array, got shape (2,) float64"),
        (np.array([5, -1, 7], dtype=np.int64), "unknown token id -1 at position 1"),
    ],
)
def test_decode_of_a_malformed_npy_is_one_line_and_writes_nothing(saved_tokenizer, tmp_path, capsys, content, needle):
    tok_dir = _write_tokenizer(saved_tokenizer, tmp_path / "tok")
    ids = tmp_path / "ids.npy"
    if isinstance(content, bytes):
        ids.write_bytes(content)
    else:
        np.save(ids, content)
    text = tmp_path / "out.txt"
    assert cli.main(["decode", "--tokenizer", str(tok_dir), str(ids), "--out", str(text), "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("bpe: error: ") and needle in err, err
    assert not text.exists() and not list(tmp_path.glob(".out.txt*"))


# --- a script without `if __name__ == "__main__":` ------------------------------------------------


@pytest.mark.parametrize(("options", "env"), [("num_workers=2", PROCESSES), ("num_workers=2, backend='dask'", {})])
def test_an_unguarded_script_gets_one_line_saying_what_to_add(tmp_path, small_corpus, options, env):
    # Worker processes re-run a script's top level; the call must say so before starting any.
    call = f"train_bpe({str(small_corpus)!r}, 300, [{EOT!r}], {options})"
    unguarded = tmp_path / "unguarded.py"
    unguarded.write_text(f"from bpe_impls import train_bpe\nprint(len({call}[1]))\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(unguarded)], capture_output=True, text=True, timeout=120, env={**os.environ, **env}
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"bpe_impls.base.errors.ConfigError: {unguarded} line 2: ") and (
        'put the call under `if __name__ == "__main__":`' in last
    ), done.stderr
    assert "bootstrapping" not in done.stderr and done.stderr.count("Traceback") == 1
    guarded = tmp_path / "guarded.py"
    guarded.write_text(
        f"from bpe_impls import train_bpe\nif __name__ == '__main__':\n    print(len({call}[1]))\n", encoding="utf-8"
    )
    done = subprocess.run(
        [sys.executable, str(guarded)], capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )
    assert done.returncode == 0 and done.stdout.strip() == str(300 - 256 - 1), done.stderr  # vocab - bytes - special


@pytest.mark.parametrize("kind", ["txt", "jsonl"])
def test_a_huge_worker_count_plans_no_more_ranges_than_bytes(tmp_path, kind):
    path = tmp_path / f"c.{kind}"
    path.write_text("hello world. " * 100 if kind == "txt" else '{"text": "hello world."}\n' * 100)
    expected = count_pretokens(path, [], num_workers=1)
    assert count_pretokens(path, [], num_workers=2**62) == expected  # (planning 2**64 ranges never ended)
