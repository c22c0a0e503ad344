"""`bpe verify`'s isolation against hostile implementations (verify_targets/hostile/hostile.py):
every process a target starts is gone when the harness is done with it; a result that is not of
the contract's types is a BadResult naming the first bad item; a huge result is refused unread and
a deadline bounds every call; closed standard streams and broken pipes in the target are, at
worst, a crash of the target, never an error of the harness; the target can run under another
interpreter, which needs only its standard library; nothing is written to the working directory.

No sleeps: each test waits for what it checks (a reply, an exception, a process gone); the
timeouts are guards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from bpe_impls.base.errors import ConfigError
from bpe_impls.harness.verify import SearchSettings, verify_tokenizer
from bpe_impls.harness.verify.refs import (
    BadResult,
    ImplementationCrashed,
    ImplementationError,
    ImplementationHung,
    ImplementationNotLoaded,
    ImplementationRaised,
    Isolated,
)

HOSTILE = Path(__file__).parent / "verify_targets" / "hostile" / "hostile.py"
TOKENIZER = f"{HOSTILE}:get_tokenizer"
TRAINER = f"{HOSTILE}:run_train_bpe"
BYTES = {i: bytes([i]) for i in range(256)}
GUARD = 60.0  # seconds: a call that should return at once, or a hang that is not the one tested


def tokenizer() -> Isolated:
    isolated = Isolated(TOKENIZER, GUARD)
    isolated.setup("tokenizer", BYTES, [], [])
    return isolated


def processes(pids) -> list[psutil.Process]:
    found = [psutil.Process(pid) for pid in pids]
    assert all(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in found)
    return found


def gone(process: psutil.Process | int) -> bool:
    """Ended (a zombie is ended: only its parent's wait is left, which init or the harness does)."""
    try:
        if isinstance(process, int):
            process = psutil.Process(process)
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# ---- no process outlives the harness's use of it ----------------------------------------------


def test_children_a_target_forked_or_spawned_are_killed_on_close():
    with tokenizer() as isolated:
        worker = psutil.Process(isolated._process.pid)
        children = processes(isolated.call("encode", "fork"))  # 2 by os.fork, 2 by subprocess
        assert len(children) == 4 and all(worker.pid in [p.pid for p in c.parents()] for c in children)
    assert all(gone(p) for p in [worker, *children])


def test_a_daemon_that_double_forked_into_a_session_of_its_own_is_killed_on_close():
    with tokenizer() as isolated:
        worker = isolated._process.pid
        (daemon,) = processes(isolated.call("encode", "daemon"))
        # Out of reach of the worker's process group and of its tree of descendants.
        assert os.getsid(daemon.pid) != os.getsid(worker) and worker not in [p.pid for p in daemon.parents()]
    assert gone(daemon)


def test_no_process_a_target_started_survives_a_verify_run(tmp_path, monkeypatch):
    """Through the engine: each worker process the run starts leaves a child and a daemon."""
    pids = tmp_path / "pids"
    monkeypatch.setenv("HOSTILE_PIDS", str(pids))
    result = verify_tokenizer(f"{HOSTILE}:get_forking_tokenizer", SearchSettings(max_examples=5))
    assert result.status == "passed"
    started = [int(pid) for pid in pids.read_text().split()]
    assert len(started) >= 2 and all(gone(pid) for pid in started)


def test_a_target_that_forks_then_crashes_is_a_crash_at_once_and_its_children_are_killed():
    """The children hold the worker's connection open: its exit, not an end of file, says it crashed."""
    with tokenizer() as isolated:
        began = time.monotonic()
        with pytest.raises(ImplementationCrashed) as crash:
            isolated.call("encode", "fork then crash")
        assert time.monotonic() - began < GUARD / 2
        assert str(crash.value).startswith("crashed (exited with status 3): pids: ")
        assert crash.value.returncode == 3
        pids = [int(pid) for pid in crash.value.stderr_tail.split()[1:]]
        assert len(pids) == 4 and all(gone(pid) for pid in pids)
        assert isolated.call("encode", "ab") == [97, 98]  # a fresh process, set up again


def test_a_call_past_its_deadline_is_a_hang_and_kills_all_the_target_started():
    with tokenizer() as isolated:
        children = processes(isolated.call("encode", "fork"))
        began = time.monotonic()
        with pytest.raises(ImplementationHung) as hang:
            isolated.call("encode", "hang", deadline=began + 1.0)
        assert 1.0 <= time.monotonic() - began < GUARD / 2
        assert hang.value.budget and str(hang.value).startswith("no answer before the time budget ran out (after 1.")
        assert str(hang.value).endswith(" s); the process was killed")
        assert all(gone(p) for p in children)
        with pytest.raises(ImplementationHung, match=r"^not called: the time budget was already spent$"):
            isolated.call("encode", "ab", deadline=time.monotonic())
        assert isolated.call("encode", "ab", deadline=time.monotonic() + GUARD) == [97, 98]


def test_a_call_past_its_timeout_is_a_hang():
    with tokenizer() as isolated, pytest.raises(ImplementationHung) as hang:
        isolated.timeout = 1.0  # once started: a busy machine may take that long to start it
        isolated.call("encode", "hang")
    assert str(hang.value) == "no answer within 1 s (hung); the process was killed" and not hang.value.budget


# ---- results of the contract's types, or a BadResult naming the first item that is not ----------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("float", "encode returned a float at position 0: 256.9"),
        ("id strings", "encode returned a str at position 0: '256'"),
        ("bool", "encode returned a bool at position 1: True"),
        ("none", "encode returned None, not a list of ids: None"),
        ("str", "encode returned a str, not a list of ids: '97 98'"),
        ("numpy floats", "encode returned a numpy.float64 at position 0: np.float64(97.5)"),
    ],
)
def test_ids_that_are_not_ints_are_a_bad_result_naming_the_first(text, message):
    with tokenizer() as isolated:
        with pytest.raises(BadResult) as bad:
            isolated.call("encode", text)
        assert str(bad.value) == message
        assert isolated.call("encode", "ab") == [97, 98]  # the process lives on


def test_numpy_integers_are_ids_and_arrive_as_ints():
    with tokenizer() as isolated:
        ids = isolated.call("encode", "numpy ints")
    assert ids == [97, 98] and all(type(i) is int for i in ids)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("str tokens", "train returned a str as the token of vocab id 256: 'ab'"),
        ("str keys", "train returned a vocab key that is a str at position 0: '0'"),
        ("bytearray merges", "train returned a bytearray in merge 1: bytearray(b'ab')"),
        ("triple", "train returned a tuple as merge 0, not a pair of bytes: (b'a', b'b', b'c')"),
        ("dict", "train returned a dict, not a pair (vocab, merges): {'vocab': {0: b'\\x00', 1: b'\\x01', "),
        ("huge vocab", "train returned 1000000 vocab entries for vocab_size 300: refused unread"),
    ],
)
def test_a_trainer_result_of_the_wrong_types_is_a_bad_result(tmp_path, command, message):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(command, encoding="utf-8")
    with Isolated(TRAINER, GUARD) as isolated, pytest.raises(BadResult) as bad:
        isolated.call("train", str(corpus), 300, [])
    assert str(bad.value).startswith(message)


def test_a_right_trainer_result_arrives_as_plain_dict_and_list(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("ab", encoding="utf-8")
    with Isolated(TRAINER, GUARD) as isolated:
        vocab, merges = isolated.call("train", str(corpus), 300, [])
    assert vocab == {**BYTES, 256: b"ab"} and merges == [(b"a", b"b")]


# ---- huge results are refused unread; replies are read within the deadline --------------------


def test_a_huge_result_is_refused_unread():
    with tokenizer() as isolated:
        began = time.monotonic()
        with pytest.raises(BadResult, match=r"^encode returned 50000000 ids for 7 bytes of text: refused unread$"):
            isolated.call("encode", "50M ids")
        with pytest.raises(
            BadResult, match=r"^encode_iterable returned more than 1038 ids for 7 bytes of text: refused unread$"
        ):
            isolated.call("encode_iterable", ["endless"])  # a generator without end
        assert time.monotonic() - began < GUARD / 2
        assert isolated.call("encode_iterable", ["a", "b"]) == [97, 98]


def test_a_reply_announced_larger_than_any_reply_is_refused_and_a_slow_one_stops_at_the_deadline():
    with tokenizer() as isolated:
        with pytest.raises(BadResult, match=r"^sent a reply of 1099511627776 bytes, more than a reply may be"):
            isolated.call("encode", "huge header")
        began = time.monotonic()
        with pytest.raises(ImplementationHung) as hang:
            isolated.call("encode", "trickle", deadline=began + 1.0)
        assert hang.value.budget and 1.0 <= time.monotonic() - began < GUARD / 2


# ---- closed streams, broken pipes, floods of output ---------------------------------------------


@pytest.mark.parametrize("text", ["close stdin", "close every standard stream"])
def test_a_target_that_closes_its_standard_streams_goes_on_being_served(text):
    with tokenizer() as isolated:
        assert isolated.call("encode", text) == list(text.encode())
        assert isolated.call("encode", "ab") == [97, 98]
        with pytest.raises(ImplementationCrashed, match=r"^crashed \(exited with status 5\)$"):
            isolated.call("encode", "crash")


def test_a_broken_pipe_is_a_crash_of_the_target_and_never_a_sigpipe_of_the_harness():
    """Run where SIGPIPE kills (its default, as a command line may restore it): the harness's next
    request meets a connection the target stopped reading."""
    script = textwrap.dedent(
        f"""
        import signal
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        from bpe_impls.harness.verify.refs import ImplementationCrashed, Isolated
        with Isolated({TOKENIZER!r}, {GUARD}) as isolated:
            isolated.setup("tokenizer", {{i: bytes([i]) for i in range(256)}}, [], [])
            assert isolated.call("encode", "stop reading requests") == list(b"stop reading requests")
            try:
                isolated.call("encode", "ab")
            except ImplementationCrashed as exc:
                print(exc)
            assert isolated.call("encode", "ab") == [97, 98]
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=GUARD)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "crashed (stopped reading requests; the process was killed)\n"


def test_a_flood_of_output_does_not_block_the_harness_and_only_its_tail_is_kept():
    with tokenizer() as isolated:
        assert isolated.call("encode", "flood") == list(b"flood")  # 10 MiB on stdout and on stderr
        assert len(isolated._tail) <= 64 * 1024
        with pytest.raises(ImplementationCrashed) as crash:
            isolated.call("encode", "crash")
    assert str(crash.value) == "crashed (exited with status 5): the last line"


# ---- another interpreter; the working directory ------------------------------------------------


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> Path:
    """A working directory holding only the target, as adapters.py (the package is not importable
    from there: it is not the checkout)."""
    cwd = tmp_path / "project"
    cwd.mkdir()
    (cwd / "adapters.py").write_text(HOSTILE.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    return cwd


def test_nothing_is_written_to_the_working_directory(elsewhere):
    with Isolated("adapters:get_tokenizer", GUARD) as isolated:  # imported from the working directory
        isolated.setup("tokenizer", BYTES, [], [])
        assert isolated.call("encode", "ab") == [97, 98]
    assert sorted(p.name for p in elsewhere.iterdir()) == ["adapters.py"]  # no __pycache__ either


def test_another_interpreter_runs_the_target_with_its_standard_library_alone(elsewhere, tmp_path):
    venv = tmp_path / "venv"
    made = subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], capture_output=True, text=True, timeout=GUARD
    )
    if made.returncode != 0:
        pytest.skip(f"cannot create a venv here: {made.stderr.strip().splitlines()[-1:]}")
    python = str(venv / "bin" / "python")
    with Isolated("adapters:get_tokenizer", GUARD, python=python) as isolated:
        isolated.setup("tokenizer", BYTES, [], [])
        assert isolated.call("encode", "ab") == [97, 98]
        with pytest.raises(ImplementationRaised) as where:
            isolated.call("encode", "where")
        assert where.value.exception_type == "RuntimeError"
    assert f"prefix={venv} bpe_impls=False" in str(where.value)
    with Isolated(TOKENIZER, GUARD, python=python) as isolated:  # a path/file.py:function reference
        isolated.setup("tokenizer", BYTES, [], [])
        assert isolated.call("encode", "ab") == [97, 98]
    with pytest.raises(ImplementationNotLoaded) as refused:
        Isolated("builtin:tokenizer", GUARD, python=python).start()
    assert str(refused.value) == (
        f"builtin:tokenizer: cannot be loaded: raised ImportError: builtin: references need bpe_impls, "
        f"which {python} cannot import (No module named 'bpe_impls')"
    )
    assert isinstance(refused.value.cause, ImplementationRaised)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["adapters.py"]


def test_an_interpreter_that_cannot_be_run_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r": cannot run this interpreter: No such file or directory$"):
        Isolated(TOKENIZER, GUARD, python=str(tmp_path / "nothing")).start()


def test_every_failure_is_an_implementation_error():
    for kind in (ImplementationCrashed, ImplementationHung, ImplementationRaised, BadResult, ImplementationNotLoaded):
        assert issubclass(kind, ImplementationError)
