"""Implementations under test: anyone's trainer or tokenizer, measured one way.

A subject is a reference as `bpe verify` takes them (`module:function`, `path/file.py:function`,
`builtin:NAME`, `peer:NAME`, an entry point's name) used as one of two things:

- a trainer in CS336's shape: `run_train_bpe(input_path, vocab_size, special_tokens)` returning
  `(vocab, merges)`;
- a tokenizer factory: `get_tokenizer(vocab, merges, special_tokens)` returning an object with
  `encode(text) -> ids`, and perhaps `encode_iterable(file)` and `encode_batch(texts)`.

`bpe compare`, `bpe scaling` and the CS336 checks measure every subject, this project's own
included, through the functions below, each in a fresh isolated worker (verify/refs.py `Isolated`,
the process `bpe verify` runs a reference in). A crash, a hang, an exception or a result of the
wrong type is an `Outcome` whose `error` says which in one line, never the end of a run.

What each figure is:
- `train`: the seconds of the trainer's call, timed inside the worker (not its start-up nor the
  harness's checks of the result), and the peak resident memory of the worker's whole process tree
  (its pools included): the larger of the tree's summed RSS sampled every 10 ms and the worker's
  own high-water mark. Absolute, as a user's `time -v` would show it: it includes the interpreter.
- `encode`: the best seconds of `encode(text)` over up to `repeats` runs (fewer once `budget`
  seconds are spent), each by a freshly built tokenizer, so every run starts with a cold cache as
  a first encode of a corpus does. The ids come back as (count, sha256), compared with ours.
- `encode_iterable`: the seconds of consuming `encode_iterable` over a file opened as text (UTF-8,
  newline="": the lines are the file's bytes, as `encode` of its text sees them), and the
  high-water mark of the worker's resident memory above where it was when the tokenizer was built:
  what the encoder held while it streamed (the ids are hashed as they come, 4,096 at a time).
- `encode_batch`: the best seconds of `encode_batch(texts)` on `cores` threads (RAYON_NUM_THREADS
  for Rust pools), where the object has the method.
- `profile`: where memory is held (memray's capture of the trainer's call, or of `encode_iterable`
  over a file when the tokenizer has it, else `encode` of the file's text), for `--memray`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psutil

from .measure import tree_rss
from .verify.protocol import ids_digest
from .verify.refs import (
    ImplementationError,
    ImplementationHung,
    ImplementationNotLoaded,
    ImplementationRaised,
    Isolated,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "Outcome",
    "encode",
    "encode_batch",
    "encode_iterable",
    "ids_digest",
    "profile",
    "same_tokens",
    "train",
]

DEFAULT_TIMEOUT = 600.0  # seconds one call may take before the worker is killed (--call-timeout)
_SAMPLE_EVERY = 0.01  # seconds between samples of the process tree's memory


@dataclass
class Outcome:
    """One measurement of one subject: its figures, or the one line that says why there are none."""

    ref: str
    seconds: float | None = None
    peak_bytes: int | None = None
    value: Any = None  # train: (vocab, merges); encodes: (count, sha256) of the ids
    error: str | None = None
    runs: int = 0
    applicable: bool = True  # False: the tokenizer has no such method (an optional one), not a failure
    hung: bool = False  # the call was killed at its timeout (error says after how long)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def peak_mb(self) -> float | None:
        return None if self.peak_bytes is None else self.peak_bytes / 2**20


class _TreePeak:
    """The highest summed RSS of a process and its descendants while the block runs."""

    def __init__(self, pid: int | None) -> None:
        self.peak = 0
        self._root = psutil.Process(pid) if pid is not None else None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        assert self._root is not None
        while not self._stop.wait(_SAMPLE_EVERY):
            self.peak = max(self.peak, tree_rss(self._root)[0])

    def __enter__(self) -> _TreePeak:
        if self._root is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def _own(ref: str) -> bool:
    """Whether `ref` is one of this project's own references (builtin: and peer:)."""
    return ref.startswith(("builtin:", "peer:"))


def _builtin_options(ref: str, **options: Any) -> dict[str, Any]:
    """The options this project's own references take (builtin: and peer:); a user's get none."""
    return {name: value for name, value in options.items() if value is not None} if _own(ref) else {}


def _reason(exc: ImplementationRaised) -> str:
    """The ConfigError's own message, without the worker's "raised ConfigError: " and frame."""
    message = str(exc).removeprefix("raised ").removeprefix("ConfigError: ")
    return message.rsplit(" (at ", 1)[0]


def _fail(ref: str, exc: ImplementationError) -> Outcome:
    return Outcome(ref, error=str(exc), hung=isinstance(exc, ImplementationHung))


def _measure(worker: Isolated, request: tuple, digest: bool = False) -> dict[str, Any]:
    return worker.call("measure", request, digest)


def train(
    ref: str,
    corpus: str,
    vocab_size: int,
    special_tokens: Sequence[str],
    *,
    num_workers: int | None = None,
    pattern: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    python: str | None = None,
) -> Outcome:
    """Train `ref` on `corpus` in a fresh worker: value (vocab, merges), seconds, peak tree RSS.
    `num_workers` and `pattern` (a split pattern's name) reach this project's own trainers and the
    peers' (`builtin:`, `peer:`) only: a user's trainer is called in CS336's shape."""
    options = _builtin_options(ref, num_workers=num_workers, pattern=pattern)
    with Isolated(ref, timeout, python=python) as worker:
        try:
            worker.start()
            with _TreePeak(worker.pid) as tree:
                reply = _measure(worker, ("train", corpus, vocab_size, list(special_tokens), options))
        except ImplementationError as exc:
            return _fail(ref, exc)
    peak = max(tree.peak, reply["peak_bytes"] + reply["baseline_bytes"] if reply["peak_bytes"] is not None else 0)
    return Outcome(ref, reply["seconds"], peak or None, reply["value"], runs=1)


def _tokenizer_worker(
    ref: str,
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[bytes, bytes]],
    special_tokens: Sequence[str],
    cores: int,
    options: Mapping[str, Any],
    timeout: float,
    python: str | None,
) -> tuple[Isolated, tuple, list[str]]:
    """A started worker with its threads set, the request that builds the tokenizer, and the
    optional methods the tokenizer has. `options` reach this project's own references only."""
    worker = Isolated(ref, timeout, python=python)
    worker.start()
    worker.call("cores", cores)
    build = ("tokenizer", dict(vocab), list(merges), list(special_tokens), _builtin_options(ref, **options))
    return worker, build, worker.call(*build)


def _best_of(
    ref: str,
    worker: Isolated,
    build: tuple,
    request: tuple,
    repeats: int,
    budget: float,
) -> Outcome:
    """The fastest of up to `repeats` measured runs of `request`, each by a fresh tokenizer."""
    best: dict[str, Any] | None = None
    spent, runs = 0.0, 0
    for run in range(repeats):
        if run:
            worker.call(*build)
        reply = _measure(worker, request, digest=True)
        runs += 1
        spent += reply["seconds"]
        if best is None or reply["seconds"] < best["seconds"]:
            best = reply
        elif reply["value"] != best["value"]:
            return Outcome(ref, error=f"gave other ids on run {run + 1} than before (count, sha256 {reply['value']})")
        if spent > budget:
            break
    assert best is not None
    return Outcome(ref, best["seconds"], best["peak_bytes"], best["value"], runs=runs)


def _on_tokenizer(
    ref: str,
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[bytes, bytes]],
    special_tokens: Sequence[str],
    method: str,
    run: Callable[[Isolated, tuple], Outcome],
    *,
    cores: int = 1,
    pattern: str | None,
    cache_size: int | None = None,
    timeout: float,
    python: str | None,
) -> Outcome:
    """`run(worker, build)` on the tokenizer `ref` builds in a fresh worker; an Outcome with the
    reason when it fails, or (not a failure) when the tokenizer has no optional `method`, or is
    one of this project's references that cannot be built here (a peer that refuses the vocab or
    the pattern, say: a ConfigError in the worker)."""
    options = {"pattern": pattern, "cache_size": cache_size}
    try:
        worker, build, methods = _tokenizer_worker(ref, vocab, merges, special_tokens, cores, options, timeout, python)
    except ImplementationNotLoaded as exc:
        if _own(ref) and isinstance(exc.cause, ImplementationRaised) and exc.cause.exception_type == "ConfigError":
            return Outcome(ref, error=f"left out: {_reason(exc.cause)}", applicable=False)
        return _fail(ref, exc)
    except ImplementationRaised as exc:
        if _own(ref) and exc.exception_type == "ConfigError":
            return Outcome(ref, error=f"left out: {_reason(exc)}", applicable=False)
        return _fail(ref, exc)
    except ImplementationError as exc:
        return _fail(ref, exc)
    with worker:
        if method != "encode" and method not in methods:
            return Outcome(ref, error=f"has no {method} method", applicable=False)
        try:
            return run(worker, build)
        except ImplementationError as exc:
            return _fail(ref, exc)


def encode(
    ref: str,
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[bytes, bytes]],
    special_tokens: Sequence[str],
    text: str,
    *,
    repeats: int = 5,
    budget: float = 5.0,
    pattern: str | None = None,
    cache_size: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    python: str | None = None,
) -> Outcome:
    """`encode(text)` of the tokenizer `ref` builds, on one core: best seconds, (count, sha256).
    `cache_size` (its pre-token cache's entries) reaches this project's own tokenizer only."""

    def run(worker: Isolated, build: tuple) -> Outcome:
        return _best_of(ref, worker, build, ("encode", text), repeats, budget)

    return _on_tokenizer(
        ref,
        vocab,
        merges,
        special_tokens,
        "encode",
        run,
        pattern=pattern,
        cache_size=cache_size,
        timeout=timeout,
        python=python,
    )


def encode_iterable(
    ref: str,
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[bytes, bytes]],
    special_tokens: Sequence[str],
    path: str,
    *,
    pattern: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    python: str | None = None,
) -> Outcome:
    """`encode_iterable` over the file at `path`, on one core, once: seconds, peak memory above the
    built tokenizer's, (count, sha256); an error where the tokenizer has no such method."""

    def run(worker: Isolated, build: tuple) -> Outcome:
        reply = _measure(worker, ("encode_iterable_file", path), digest=True)
        return Outcome(ref, reply["seconds"], reply["peak_bytes"], reply["value"], runs=1)

    return _on_tokenizer(
        ref, vocab, merges, special_tokens, "encode_iterable", run, pattern=pattern, timeout=timeout, python=python
    )


def encode_batch(
    ref: str,
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[bytes, bytes]],
    special_tokens: Sequence[str],
    texts: Sequence[str],
    *,
    cores: int,
    repeats: int = 5,
    budget: float = 5.0,
    pattern: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    python: str | None = None,
) -> Outcome:
    """`encode_batch(texts)` with `cores` threads: best seconds, (count, sha256) of the ids of
    every text in order; an error where the tokenizer has no such method."""

    def run(worker: Isolated, build: tuple) -> Outcome:
        return _best_of(ref, worker, build, ("encode_batch", list(texts)), repeats, budget)

    return _on_tokenizer(
        ref,
        vocab,
        merges,
        special_tokens,
        "encode_batch",
        run,
        cores=cores,
        pattern=pattern,
        timeout=timeout,
        python=python,
    )


def same_tokens(
    result: tuple[dict[int, bytes], list[tuple[bytes, bytes]]],
    reference: tuple[dict[int, bytes], list[tuple[bytes, bytes]]],
) -> bool:
    """Whether a trainer's (vocab, merges) equals the reference's up to the numbering of its ids:
    the same merges in order and the same set of tokens (CS336's own comparison)."""
    return result[1] == reference[1] and sorted(result[0].values()) == sorted(reference[0].values())


def profile(
    ref: str,
    capture: str,
    *,
    trainer: tuple[str, int, Sequence[str]] | None = None,
    tokenizer: tuple[Mapping[int, bytes], Sequence[tuple[bytes, bytes]], Sequence[str], str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    python: str | None = None,
) -> Outcome:
    """A memray capture written to `capture` of one call in `ref`'s worker: training on
    `trainer` = (corpus, vocab_size, special_tokens), or encoding with `tokenizer` = (vocab, merges,
    special_tokens, text file): encode_iterable over the file where the tokenizer has it, else
    encode of its text. Python's allocators are traced object by object (as
    benchmarks/memray_profile.py does), so the peak is the objects', not pymalloc's arenas'."""
    with Isolated(ref, timeout, python=python) as worker:
        try:
            worker.start()
            if trainer is not None:
                corpus, vocab_size, special_tokens = trainer
                request: tuple = ("train", corpus, vocab_size, list(special_tokens))
            else:
                assert tokenizer is not None
                vocab, merges, special_tokens, path = tokenizer
                methods = worker.call("tokenizer", dict(vocab), list(merges), list(special_tokens))
                if "encode_iterable" in methods:
                    request = ("encode_iterable_file", path)
                else:
                    with open(path, encoding="utf-8", newline="") as file:
                        request = ("encode", file.read())
            worker.call("memray", capture, request)
        except ImplementationError as exc:
            return _fail(ref, exc)
    return Outcome(ref, value=capture, runs=1)
