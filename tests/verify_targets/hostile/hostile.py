"""A hostile implementation for tests/test_verify_isolation.py: one tokenizer and one trainer whose
behaviour the input picks. Standard library only (numpy where asked), so it runs under any
interpreter.

The tokenizer's `encode(text)`: text "ab" and anything else unlisted gives the byte ids; the
commands below do what they say and, where they start processes, return those processes' pids as
the "ids" (or, before crashing, print them on the last line of stderr as "pids: 1 2 3").
The trainer reads its corpus file, whose content is the command.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time

FOREVER = 3600


def _sleep_forever() -> None:
    while True:
        time.sleep(FOREVER)


def _forked(n: int) -> list[int]:
    """n children by os.fork and n by subprocess, each sleeping for ever."""
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            try:
                _sleep_forever()
            finally:
                os._exit(0)
        pids.append(pid)
    for _ in range(n):
        child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({FOREVER})"])
        pids.append(child.pid)
    return pids


def _daemon() -> int:
    """A daemon, the classic way: fork, setsid, fork again, the middle process exits. The
    grandchild is in a session (and process group) of its own, and its parent is gone."""
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            os.setsid()
            grandchild = os.fork()
            if grandchild == 0:
                for fd in (read_end, write_end, 0, 1, 2):
                    os.close(fd)
                _sleep_forever()
            os.write(write_end, str(grandchild).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        pid = int(pipe.read())
    os.waitpid(middle, 0)
    return pid


def _channel() -> int:
    """The worker's connection to the harness (its first argument): a hostile target may find it."""
    return int(sys.argv[1])


class Hostile:
    def encode(self, text: str):
        if text == "float":
            return [256.9, 1]
        if text == "id strings":
            return ["256", "1"]
        if text == "bool":
            return [1, True]
        if text == "none":
            return None
        if text == "str":
            return "97 98"
        if text == "numpy ints":
            import numpy

            return numpy.array([97, 98], dtype=numpy.int64)
        if text == "numpy floats":
            import numpy

            return numpy.array([97.5, 98.0])
        if text == "50M ids":
            return [0] * 50_000_000
        if text == "fork":
            return _forked(2)
        if text == "daemon":
            return [_daemon()]
        if text == "fork then crash":
            print("pids:", *_forked(2), file=sys.stderr, flush=True)
            os._exit(3)
        if text == "hang":
            _sleep_forever()
        if text == "huge header":  # a reply announced larger than any reply may be, then silence
            os.write(_channel(), struct.pack("<Q", 1 << 40))
            _sleep_forever()
        if text == "trickle":  # a reply announced, a little of it sent, then silence
            os.write(_channel(), struct.pack("<Q", 1000) + b"\x80")
            _sleep_forever()
        if text == "close stdin":
            sys.stdin.close()
            os.close(0)
        if text == "close every standard stream":
            for stream in (sys.stdin, sys.stdout, sys.stderr):
                stream.close()
            for fd in (0, 1, 2):
                os.close(fd)
        if text == "stop reading requests":
            # The connection's reading side shut: the harness's next request is EPIPE (SIGPIPE if
            # it were not suppressed). A thread that never ends keeps the process alive after that.
            socket.socket(fileno=os.dup(_channel())).shutdown(socket.SHUT_RD)
            threading.Thread(target=_sleep_forever).start()
        if text == "flood":
            line = "x" * 1023 + "\n"
            for _ in range(10 * 1024):  # 10 MiB to each
                sys.stdout.write(line)
                sys.stderr.write(line)
            sys.stdout.flush()
            print("the last line", file=sys.stderr, flush=True)
        if text == "crash":
            os._exit(5)
        if text == "where":
            raise RuntimeError(f"prefix={sys.prefix} bpe_impls={'bpe_impls' in sys.modules}")
        return list(text.encode("utf-8"))

    def encode_iterable(self, chunks):
        for chunk in chunks:
            if chunk == "endless":
                while True:
                    yield 0
            yield from self.encode(chunk)


def get_tokenizer(vocab, merges, special_tokens=None):
    return Hostile()


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    with open(input_path, encoding="utf-8") as file:
        command = file.read()
    vocab = {i: bytes([i]) for i in range(256)}
    merges = [(b"a", b"b")]
    if command == "str tokens":
        vocab[256] = "ab"
    elif command == "str keys":
        vocab = {str(i): token for i, token in vocab.items()}
    elif command == "bytearray merges":
        merges = [(b"a", b"b"), (bytearray(b"ab"), b"c")]
    elif command == "triple":
        merges = [(b"a", b"b", b"c")]
    elif command == "dict":
        return {"vocab": vocab, "merges": merges}
    elif command == "huge vocab":
        vocab = {i: b"x" for i in range(1_000_000)}
    else:
        vocab[256] = b"ab"
    return vocab, merges


class _Forking:
    """The reference tokenizer (right answers), which leaves a child and a daemon behind on its
    first encode, their pids appended to the file $HOSTILE_PIDS."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.forked = False

    def encode(self, text: str) -> list[int]:
        if not self.forked:
            self.forked = True
            pids = [*_forked(1), _daemon()]
            with open(os.environ["HOSTILE_PIDS"], "a", encoding="utf-8") as file:
                file.write("".join(f"{pid}\n" for pid in pids))
        return self.tokenizer.encode(text)


def get_forking_tokenizer(vocab, merges, special_tokens=None):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from reference import get_tokenizer as reference

    return _Forking(reference(vocab, merges, special_tokens))
