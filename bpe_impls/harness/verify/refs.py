"""References to implementations, and the isolated process each one runs in.

A reference names a callable in one of these forms:

- `module:function` or `path/to/file.py:function` (a CS336 `adapters.py`, say): the user's code;
- `builtin:NAME`: one of this project's trainers by registry or module name (`builtin:native`,
  `builtin:linked_list`), in the CS336 shape; `builtin:tokenizer` or `builtin:tokenizer:ENCODER`:
  this project's Tokenizer as a `get_tokenizer` factory, with one of its encoders;
- `peer:NAME`: another library's encoder over a given vocab (`peer:tiktoken`, `peer:huggingface`, ...;
  see peer_encoders.py);
- a bare `NAME`: an implementation an installed package registered under the entry-point group
  `bpe_impls.implementations`.

`Isolated` runs the reference in a fresh process (worker.py): it is imported there, never here.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...base.errors import ConfigError
from ...encoding import Tokenizer
from ...trainers import canonical_name, train_bpe
from .peer_encoders import peer_encoder
from .protocol import read_message, write_message

ENTRY_POINT_GROUP = "bpe_impls.implementations"


class ImplementationError(Exception):
    """The implementation could not be imported, crashed, hung or raised: one line saying which."""


def _builtin_trainer(name: str) -> Callable[..., Any]:
    impl = canonical_name(name)

    def run_train_bpe(input_path: str, vocab_size: int, special_tokens: list[str], **kwargs: Any) -> Any:
        return train_bpe(input_path, vocab_size, special_tokens, impl=impl, num_workers=1, progress=False)

    return run_train_bpe


def _builtin_tokenizer(encoder: str | None) -> Callable[..., Any]:
    def get_tokenizer(vocab: dict[int, bytes], merges: list, special_tokens: list[str] | None = None) -> Tokenizer:
        return Tokenizer(vocab, merges, special_tokens, encoder=encoder)

    return get_tokenizer


def _from_file(path: Path, attribute: str) -> Any:
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    # The file's folder first on sys.path, as `python file.py` would have it: an adapters.py
    # imports its neighbours.
    sys.path.insert(0, str(path.resolve().parent))
    spec = importlib.util.spec_from_file_location(f"bpe_verify_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, attribute)


def load_reference(ref: str) -> tuple[str, Callable[..., Any]]:
    """(the reference as given, the callable it names), importing whatever it needs."""
    kind, _, rest = ref.partition(":")
    if kind == "builtin":
        name, _, encoder = rest.partition(":")
        if name == "tokenizer":
            return ref, _builtin_tokenizer(encoder or None)
        return ref, _builtin_trainer(name)
    if kind == "peer":
        return ref, peer_encoder(rest)
    if not rest:
        found = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == ref]
        if not found:
            raise ConfigError(
                f"{ref!r} is neither module:function, path/file.py:function, builtin:NAME, peer:NAME "
                f"nor an implementation registered under the entry-point group {ENTRY_POINT_GROUP!r}"
            )
        return ref, found[0].load()
    module, _, attribute = ref.rpartition(":")
    if module.endswith(".py") or os.sep in module:
        return ref, _from_file(Path(module), attribute)
    return ref, getattr(importlib.import_module(module), attribute)


class Isolated:
    """A reference running in a process of its own; `call` sends it one request.

    A crash or a hang (no reply within `timeout` seconds) ends that process and raises
    ImplementationError; the next call starts a fresh one. An exception the implementation raises
    comes back as ImplementationError too, with its one-line message.
    """

    def __init__(self, ref: str, timeout: float = 30.0) -> None:
        self.ref = ref
        self.timeout = timeout
        self._process: subprocess.Popen | None = None
        self._stderr: Any = None
        self._setup: tuple | None = None  # a request each new process is sent first (see setup)

    def start(self) -> None:
        """Start the process and import the reference: ImplementationError if it cannot be imported."""
        self._stderr = tempfile.TemporaryFile()
        environment = dict(os.environ, PYTHONUNBUFFERED="1")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bpe_impls.harness.verify.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=environment,
        )
        try:
            self._exchange(("load", self.ref))
        except ImplementationError as exc:
            self.close()
            raise ImplementationError(f"{self.ref}: cannot be loaded: {exc}") from None

    def setup(self, *request: Any) -> Any:
        """Send `request` now and again first thing to every process started after a crash (the
        tokenizer an encoder's calls need)."""
        self._setup = None
        result = self.call(*request)
        self._setup = request
        return result

    def call(self, *request: Any) -> Any:
        if self._process is None or self._process.poll() is not None:
            self.start()
            if self._setup is not None:
                self._exchange(self._setup)
        return self._exchange(request)

    def _exchange(self, request: tuple) -> Any:
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        try:
            write_message(process.stdin, request)
        except BrokenPipeError:
            raise self._died() from None
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise ImplementationError(f"no answer within {self.timeout:g} s (hung); the process was killed")
            ready, _, _ = select.select([process.stdout], [], [], min(left, 1.0))
            if ready:
                break
        try:
            status, value = read_message(process.stdout)
        except EOFError:
            raise self._died() from None
        if status == "error":
            raise ImplementationError(f"raised {value}")
        return value

    def _died(self) -> ImplementationError:
        assert self._process is not None
        code = self._process.wait()
        self._stderr.seek(0)
        tail = [line for line in self._stderr.read().decode("utf-8", "replace").splitlines() if line.strip()][-1:]
        self.close()
        how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        return ImplementationError(f"crashed ({how})" + (f": {tail[0][:300]}" if tail else ""))

    def close(self) -> None:
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()
            for stream in (self._process.stdin, self._process.stdout):
                if stream is not None:
                    stream.close()
            self._process = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> Isolated:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
