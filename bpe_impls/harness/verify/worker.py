"""The process an implementation under verification runs in (`python -m bpe_impls.harness.verify.worker`).

The harness never imports a user's code itself: a crash (a segfault in an extension, `os._exit`),
a hang or a flood of output there must not take it down. This process imports the reference and
serves requests over its stdin/stdout, one pickled request and one pickled reply at a time, each
prefixed with its length. The implementation's own prints go to stderr: fd 1 is pointed there
before the reference is imported, and the replies use a private copy of the original stdout.

Requests are tuples: ("load", ref) loads a reference (see refs.py) and replies with its kind;
("train", path, vocab_size, special_tokens); ("tokenizer", vocab, merges, special_tokens) builds
a tokenizer and replies with the names of its optional methods; ("encode", text),
("decode", ids), ("encode_iterable", chunks) call it. A reply is ("ok", value) or
("error", one line naming the exception).
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback
from typing import Any

from .protocol import read_message, write_message
from .refs import load_reference


def _one_line(exc: BaseException) -> str:
    # The innermost frame of the implementation's own code (not of the import machinery).
    where = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<") and f"{os.sep}importlib{os.sep}" not in f.filename
    ]
    frame = f" (at {os.path.basename(where[-1].filename)}:{where[-1].lineno})" if where else ""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:500] + frame


class _Server:
    def __init__(self) -> None:
        self.target: Any = None
        self.kind = ""
        self.tokenizer: Any = None

    def handle(self, request: tuple) -> Any:
        verb, *args = request
        if verb == "load":
            self.kind, self.target = load_reference(args[0])
            return self.kind
        if verb == "train":
            path, vocab_size, special_tokens = args
            vocab, merges = self.target(path, vocab_size, list(special_tokens))
            return {int(i): bytes(t) for i, t in vocab.items()}, [(bytes(a), bytes(b)) for a, b in merges]
        if verb == "tokenizer":
            vocab, merges, special_tokens = args
            self.tokenizer = self.target(vocab, merges, list(special_tokens) or None)
            return [name for name in ("decode", "encode_iterable") if callable(getattr(self.tokenizer, name, None))]
        if verb == "encode":
            return [int(i) for i in self.tokenizer.encode(args[0])]
        if verb == "decode":
            return self.tokenizer.decode(list(args[0]))
        if verb == "encode_iterable":
            return [int(i) for i in self.tokenizer.encode_iterable(iter(args[0]))]
        raise ValueError(f"unknown request {verb!r}")


def main() -> None:
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the implementation's prints go to stderr, never into the replies
    sys.stdout = sys.stderr
    requests = sys.stdin.buffer
    server = _Server()
    while True:
        try:
            request = read_message(requests)
        except EOFError:
            return
        try:
            reply: tuple = ("ok", server.handle(request))
        except BaseException as exc:  # the user's code may raise anything; the harness reports it
            reply = ("error", _one_line(exc))
        try:
            write_message(replies, reply)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            write_message(replies, ("error", f"the result cannot be sent back: {_one_line(exc)}"))


if __name__ == "__main__":
    main()
