"""References to implementations, and the isolated process each one runs in.

A reference names a callable in one of these forms:

- `module:function` or `path/to/file.py:function` (a CS336 `adapters.py`, say): the user's code;
- `builtin:NAME`: one of this project's trainers by registry or module name (`builtin:native`,
  `builtin:linked_list`), in the CS336 shape; `builtin:tokenizer` or `builtin:tokenizer:ENCODER`:
  this project's Tokenizer as a `get_tokenizer` factory, with one of its encoders;
  `builtin:tokenizer-numpy[:ENCODER]`: the same through its numpy methods (`encode_to_numpy`,
  `encode_batch_to_numpy`), timed as they return their arrays;
- `peer:NAME`: another library's encoder over a given vocab (`peer:tiktoken`, `peer:huggingface`, ...)
  or its trainer in the CS336 shape (`peer:huggingface`, `peer:rustbpe`, `peer:gigatoken`); see
  peer_encoders.py;
- a bare `NAME`: an implementation an installed package registered under the entry-point group
  `bpe_impls.implementations`.

`Isolated` runs the reference in a fresh process (worker.py): it is imported there, never here.
"""

from __future__ import annotations

import math
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from ...base.errors import ConfigError
from ...encoding import Tokenizer
from ...trainers import canonical_name, train_bpe
from .peer_encoders import Untimed, peer_reference
from .protocol import (
    ENTRY_POINT_GROUP,
    HEADER,
    MAX_REPLY,
    SEND_FLAGS,
    WORKER_TOKEN,
    ReferenceNotFound,
    load_user_reference,
    loads_plain,
    pack,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "BadResult",
    "ImplementationCrashed",
    "ImplementationError",
    "ImplementationHung",
    "ImplementationNotLoaded",
    "ImplementationRaised",
    "Isolated",
    "load_reference",
]


class ImplementationError(Exception):
    """The implementation could not be loaded, crashed, hung, raised or returned what is not of the
    contract's types: one line saying which. Each case is a subclass below; all are this class."""


class ImplementationNotLoaded(ImplementationError):
    """`start` could not load the reference: `cause` is the error that loading ended in.

    Message: "REF: cannot be loaded: <the cause's message>"."""

    def __init__(self, message: str, cause: ImplementationError | None = None) -> None:
        super().__init__(message)
        self.cause = cause


class ImplementationCrashed(ImplementationError):
    """The process died, or cut its connection to the harness, before it replied.

    Message: "crashed (exited with status 3)", "crashed (killed by signal 11): <last stderr line>",
    "crashed (closed its connection to the harness; the process was killed)". `returncode` is the
    process's (negative: the signal), None when it was alive and the harness killed it;
    `stderr_tail` is the last line it wrote to stderr or stdout ("" if none)."""

    def __init__(self, message: str, returncode: int | None = None, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class ImplementationHung(ImplementationError):
    """No reply in time: the process (and everything it started) was killed.

    Message: "no answer within 30 s (hung); the process was killed" when the call's own timeout
    passed, "no answer before the time budget ran out (after 2.5 s); the process was killed" when
    the `deadline` passed first (`budget` True), "not called: the time budget was already spent"
    when the deadline had passed before the call (nothing was sent; the process lives on).
    `seconds` is how long the call waited."""

    def __init__(self, message: str, seconds: float = 0.0, budget: bool = False) -> None:
        super().__init__(message)
        self.seconds = seconds
        self.budget = budget


class ImplementationRaised(ImplementationError):
    """The implementation raised: "raised ValueError: max() arg is an empty sequence (at bpe.py:12)".
    `exception_type` is the exception's class name ("ValueError"). The process lives on."""

    def __init__(self, message: str, exception_type: str = "") -> None:
        super().__init__(message)
        self.exception_type = exception_type


class BadResult(ImplementationError):
    """The result is not of the contract's types, or is far larger than a right answer can be; the
    worker refuses it before it is sent (a huge result is never read whole). The process lives on.

    Message: what returned what, and where: "encode returned a float at position 0: 256.9",
    "encode returned a str at position 0: '256'", "encode returned a bool at position 2: True",
    "encode returned None, not a list of ids: None", "encode returned 50000000 ids for 12 bytes of
    text: refused unread", "encode_iterable returned more than 1048 ids for 12 bytes of text:
    refused unread", "decode returned a bytes, not a str: b'ab'", "train returned a vocab key that
    is a str at position 0: '0'", "train returned a str as the token of vocab id 256: 'th'",
    "train returned a bytearray in merge 3: bytearray(b'a')"."""


def _builtin_trainer(name: str) -> Callable[..., Any]:
    impl = canonical_name(name)

    def run_train_bpe(
        input_path: str,
        vocab_size: int,
        special_tokens: list[str],
        num_workers: int | None = 1,
        pattern: str | None = None,
        **kwargs: Any,
    ) -> Any:
        return train_bpe(
            input_path, vocab_size, special_tokens, impl=impl, num_workers=num_workers, pattern=pattern, progress=False
        )

    return run_train_bpe


class _NumpyTokenizer:
    """This project's Tokenizer through its numpy methods (`builtin:tokenizer-numpy`): encode is
    `encode_to_numpy`, encode_batch is `encode_batch_to_numpy`, each timed as it returns its array,
    the array turned into a list after (peer_encoders.Untimed), as a peer's numpy result is."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer

    def encode(self, text: str) -> Untimed:
        return Untimed(self._tokenizer.encode_to_numpy(text), _as_list)

    def encode_batch(self, texts: list[str]) -> Untimed:
        # One list of every text's ids: what the worker measures (a digest of them all, in order).
        return Untimed(self._tokenizer.encode_batch_to_numpy(texts)[0], lambda ids: [_as_list(ids)])

    def decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids)


def _as_list(ids: Any) -> list[int]:
    return ids.tolist()


def _builtin_tokenizer(encoder: str | None, numpy: bool = False) -> Callable[..., Any]:
    def get_tokenizer(
        vocab: dict[int, bytes],
        merges: list,
        special_tokens: list[str] | None = None,
        pattern: str | None = None,
        cache_size: int | None = None,
    ) -> Tokenizer | _NumpyTokenizer:
        options = {} if cache_size is None else {"cache_size": cache_size}
        tokenizer = Tokenizer(vocab, merges, special_tokens, encoder=encoder, pattern=pattern, **options)
        return _NumpyTokenizer(tokenizer) if numpy else tokenizer

    return get_tokenizer


def load_reference(ref: str) -> tuple[str, Callable[..., Any]]:
    """(the reference as given, the callable it names), importing whatever it needs."""
    kind, _, rest = ref.partition(":")
    if kind == "builtin":
        name, _, encoder = rest.partition(":")
        if name in ("tokenizer", "tokenizer-numpy"):
            return ref, _builtin_tokenizer(encoder or None, numpy=name == "tokenizer-numpy")
        return ref, _builtin_trainer(name)
    if kind == "peer":
        return ref, peer_reference(rest)
    try:
        return ref, load_user_reference(ref)
    except ReferenceNotFound as exc:
        raise ConfigError(str(exc)) from None


WORKER = Path(__file__).with_name("worker.py")
# Where `import bpe_impls` finds this package: the worker (run by path) appends it to its sys.path
# for builtin: and peer: references, under the harness's own interpreter only.
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
_STDERR_TAIL = 64 * 1024  # bytes of the process's output kept (the last line names a crash)
_EXIT_GRACE = 1.0  # seconds for a process whose connection closed to be seen exiting
_KILL_GRACE = 5.0  # seconds for killed processes to be gone, at most
_CLOCK_SKEW = 60.0  # seconds a process's recorded start time may precede time.time() at its start


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class Isolated:
    """A reference running in a process of its own; `call` sends it one request.

    The process is the leader of a session of its own; its stdin is /dev/null, its stdout and
    stderr a pipe the harness drains while it waits (keeping the last 64 KiB), and requests and
    replies go over a private socket, so an implementation that closes its standard streams, prints
    without end or forks cannot cut, block or outlive the harness. `close` (and a crash or a hang)
    kills the process, its process group, every descendant it still has, and every process started
    from it since, found by a token in their environment (a daemon that double-forked into a
    session of its own, say); only a process that started with an environment of its own escapes.

    A crash (ImplementationCrashed) or a hang (ImplementationHung: no reply within `timeout`
    seconds, or by `deadline`) ends that process; the next call starts a fresh one. An exception
    the implementation raises (ImplementationRaised) or a result that is not of the contract's
    types (BadResult) leaves it running. All are ImplementationError.

    `python`: the interpreter to run the implementation under (default: the harness's own). The
    worker needs only its standard library (3.8 or later), so any venv will do, for a
    `module:function` or `path/file.py:function` reference; `builtin:` and `peer:` references
    need bpe_impls there, and are refused with one line where it cannot be imported.
    """

    def __init__(self, ref: str, timeout: float = 30.0, *, python: str | None = None) -> None:
        self.ref = ref
        self.timeout = timeout
        self.python = python
        self._process: subprocess.Popen[bytes] | None = None
        self._channel: socket.socket | None = None
        self._output: int | None = None  # the read end of the process's stdout and stderr
        self._pidfd: int | None = None  # readable once the process has exited (Linux 5.3+)
        self._tail = bytearray()
        self._token = ""
        self._started = 0.0  # time.time() the process started (processes created since may be its own)
        self._setup: tuple[Any, ...] | None = None  # a request each new process is sent first (see setup)

    # ---- the process ---------------------------------------------------------------------------

    def start(self, *, deadline: float | None = None) -> None:
        """Start the process and load the reference: ImplementationNotLoaded if it cannot be loaded
        (its `cause` is the ImplementationError loading ended in); ConfigError if the interpreter
        cannot be run at all."""
        self.close()
        own = self.python is None or os.path.abspath(self.python) == os.path.abspath(sys.executable)
        python = self.python or sys.executable
        parent, child = socket.socketpair()
        output, output_end = os.pipe()
        self._token = secrets.token_hex(16)
        environment = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
        environment[WORKER_TOKEN] = self._token
        command = [python, str(WORKER), str(child.fileno()), *([PACKAGE_ROOT] if own else [])]
        self._started = time.time()
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=output_end,
                stderr=output_end,
                pass_fds=(child.fileno(),),
                env=environment,
                start_new_session=True,
            )
        except OSError as exc:
            parent.close()
            os.close(output)
            raise ConfigError(f"{python}: cannot run this interpreter: {exc.strerror or exc}") from None
        finally:
            child.close()
            os.close(output_end)
        self._process, self._channel, self._output = process, parent, output
        parent.setblocking(False)
        os.set_blocking(output, False)
        try:
            self._pidfd = os.pidfd_open(process.pid)
        except (AttributeError, OSError):  # not Linux 5.3+: the wait polls instead
            self._pidfd = None
        try:
            self._exchange(("load", self.ref), deadline)
        except ImplementationError as exc:
            self.close()
            raise ImplementationNotLoaded(f"{self.ref}: cannot be loaded: {exc}", exc) from None

    @property
    def pid(self) -> int | None:
        """The process's id while it runs (None before `start` and after `close`)."""
        return None if self._process is None else self._process.pid

    def setup(self, *request: Any, deadline: float | None = None) -> Any:
        """Send `request` now and again first thing to every process started after a crash (the
        tokenizer an encoder's calls need)."""
        self._setup = None
        result = self.call(*request, deadline=deadline)
        self._setup = request
        return result

    def call(self, *request: Any, deadline: float | None = None) -> Any:
        """Send one request and return the reply's value; ImplementationError (one of its
        subclasses) if there is none. `deadline` (a time.monotonic() value) bounds the call,
        starting a fresh process included, besides `timeout`: the engine's remaining time budget."""
        if deadline is not None and time.monotonic() >= deadline:
            raise ImplementationHung("not called: the time budget was already spent", 0.0, budget=True)
        if self._process is None or self._process.poll() is not None:
            self.start(deadline=deadline)
            if self._setup is not None:
                self._exchange(self._setup, deadline)
        return self._exchange(request, deadline)

    def close(self) -> None:
        """End the process and every process it left (see the class's description)."""
        if self._process is not None:
            self._end(self._process)
            self._process = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        for fd in (self._output, self._pidfd):
            if fd is not None:
                os.close(fd)
        self._output = self._pidfd = None
        self._tail.clear()

    def __enter__(self) -> Isolated:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _end(self, process: subprocess.Popen[bytes]) -> None:
        strays: dict[int, psutil.Process] = {}
        if process.poll() is None:
            try:  # its descendants, found while it is alive (orphans lose the link)
                strays = {p.pid: p for p in psutil.Process(process.pid).children(recursive=True)}
            except psutil.Error:
                pass
        # The group's members are waited for below, not only signalled: a SIGKILL takes effect
        # when the process is next scheduled, a moment later on a loaded machine.
        strays.update((p.pid, p) for p in self._marked(group=process.pid))
        try:  # the whole process group at once (the worker leads it: its pid is the group's id)
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            pass
        if process.poll() is None:
            process.kill()
        process.wait()
        give_up = time.monotonic() + _KILL_GRACE
        while time.monotonic() < give_up:
            strays.update((p.pid, p) for p in self._marked())
            alive = [p for p in strays.values() if _running(p)]
            if not alive:
                return
            for stray in alive:
                try:
                    stray.kill()
                except psutil.Error:
                    pass
            while any(_running(p) for p in alive) and time.monotonic() < give_up:
                time.sleep(0.01)  # SIGKILL takes effect in a moment; no event to wait on for others' children

    def _marked(self, group: int | None = None) -> list[psutil.Process]:
        """Processes started since the worker that carry its token in their environment, or are
        in process group `group`. (A process's start time comes from the boot time and clock
        ticks, which can disagree with time.time() by seconds: the margin is generous.)"""
        found = []
        for candidate in psutil.process_iter(["create_time"]):
            created = candidate.info["create_time"]
            if candidate.pid == os.getpid() or created is None or created < self._started - _CLOCK_SKEW:
                continue
            try:
                # (not the leader itself: Popen waits for it, and once waited for its pid is free)
                if group is not None and candidate.pid != group and os.getpgid(candidate.pid) == group:
                    found.append(candidate)
                elif candidate.environ().get(WORKER_TOKEN) == self._token:
                    found.append(candidate)
            except (psutil.Error, OSError):
                continue
        return found

    # ---- one exchange --------------------------------------------------------------------------

    def _exchange(self, request: tuple[Any, ...], deadline: float | None) -> Any:
        began = time.monotonic()
        limit, budget = began + self.timeout, False
        if deadline is not None and deadline < limit:
            limit, budget = deadline, True
        self._send(pack(request), limit, began, budget)
        reply = self._receive(limit, began, budget)
        if not isinstance(reply, tuple) or not reply or reply[0] not in ("ok", "raised", "bad"):
            self.close()
            raise ImplementationCrashed("crashed (wrote something other than a reply to the harness's connection)")
        if reply[0] == "raised":
            raise ImplementationRaised(f"raised {reply[2]}", reply[1])
        if reply[0] == "bad":
            raise BadResult(reply[1])
        return reply[1]

    def _wait(self, limit: float, began: float, budget: bool, writing: bool = False) -> bool:
        """Until the connection is ready to be read (or written) or the process has exited (False);
        draining its output meanwhile. ImplementationHung when `limit` passes first. (poll, not
        select: a harness with a thousand files open has descriptors select cannot watch.)"""
        assert self._process is not None and self._channel is not None
        while True:
            left = limit - time.monotonic()
            if left <= 0:
                raise self._hung(began, budget)
            poller = select.poll()
            poller.register(self._channel, select.POLLOUT if writing else select.POLLIN)
            for fd in (self._output, self._pidfd):
                if fd is not None:
                    poller.register(fd, select.POLLIN)
            # Without a pidfd (not Linux 5.3+) the process's exit is polled for, every 50 ms.
            wait = left if self._pidfd is not None else min(left, 0.05)
            ready = dict(poller.poll(math.ceil(wait * 1000)))
            if self._output is not None and self._output in ready:
                self._drain_output()
            if ready.get(self._channel.fileno()):
                return True
            if self._pidfd in ready if self._pidfd is not None else self._process.poll() is not None:
                return False

    def _drain_output(self) -> None:
        """Read what the process wrote to stdout and stderr, keeping the tail."""
        assert self._output is not None
        while True:
            try:
                chunk = os.read(self._output, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:  # every writer closed it: watched no more
                os.close(self._output)
                self._output = None
                return
            self._tail += chunk
            del self._tail[:-_STDERR_TAIL]

    def _send(self, data: bytes, limit: float, began: float, budget: bool) -> None:
        assert self._channel is not None
        view = memoryview(data)
        while view:
            if not self._wait(limit, began, budget, writing=True):
                raise self._crashed()
            try:
                view = view[self._channel.send(view, SEND_FLAGS) :]
            except BlockingIOError:
                continue
            except OSError:  # EPIPE, ECONNRESET: the process no longer reads its requests
                raise self._crashed("stopped reading requests") from None

    def _receive(self, limit: float, began: float, budget: bool) -> Any:
        assert self._channel is not None
        received = bytearray()
        while True:
            exited = not self._wait(limit, began, budget)
            while True:  # one read; after an exit, all it wrote before it
                try:
                    chunk = self._channel.recv(1 << 20)
                except BlockingIOError:
                    break
                except OSError:
                    chunk = b""
                if not chunk:
                    raise self._crashed("closed its connection to the harness")
                received += chunk
                if len(received) >= HEADER.size:
                    (size,) = HEADER.unpack_from(received)
                    if size > MAX_REPLY:
                        self.close()
                        raise BadResult(
                            f"sent a reply of {size} bytes, more than a reply may be; the process was killed"
                        )
                    if len(received) >= HEADER.size + size:
                        return self._decode(received, size)
                if not exited:
                    break
            if exited:
                raise self._crashed()

    def _decode(self, received: bytearray, size: int) -> Any:
        if len(received) > HEADER.size + size:
            self.close()
            raise ImplementationCrashed(
                "crashed (wrote to the harness's connection out of turn); the process was killed"
            )
        try:
            return loads_plain(bytes(received[HEADER.size :]))
        except Exception as exc:
            self.close()
            raise ImplementationCrashed(
                f"crashed (sent a reply that cannot be read: {exc}); the process was killed"
            ) from None

    def _hung(self, began: float, budget: bool) -> ImplementationHung:
        waited = time.monotonic() - began
        self.close()
        if budget:
            return ImplementationHung(
                f"no answer before the time budget ran out (after {waited:.1f} s); the process was killed", waited, True
            )
        return ImplementationHung(f"no answer within {self.timeout:g} s (hung); the process was killed", waited)

    def _crashed(self, cut: str | None = None) -> ImplementationCrashed:
        """The process died, or `cut` its connection (then it is given a moment to be seen exiting)."""
        process = self._process
        assert process is not None
        try:
            code: int | None = process.wait(_EXIT_GRACE if cut else None)
        except subprocess.TimeoutExpired:
            code = None
        if self._output is not None:
            self._drain_output()
        lines = [line for line in self._tail.decode("utf-8", "replace").splitlines() if line.strip()]
        tail = lines[-1][:300] if lines else ""
        self.close()
        if code is None:
            how = f"{cut}; the process was killed"
        else:
            how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        return ImplementationCrashed(f"crashed ({how})" + (f": {tail}" if tail else ""), code, tail)
