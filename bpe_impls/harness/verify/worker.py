"""The process an implementation under verification runs in: `python .../worker.py FD`.

The harness never imports a user's code itself: a crash (a segfault in an extension, `os._exit`),
a hang or a flood of output there must not take it down. This process imports the reference and
serves requests over the socket FD it was given (never stdin or stdout, which the implementation
may close), one pickled request and one pickled reply at a time (protocol.py). Its stdin is
/dev/null; its stdout and stderr are a pipe the harness keeps the tail of.

It is run by its path, not as a module, under the harness's interpreter or another one
(`bpe verify --python PATH`): standard library only, Python 3.8 or later, and it imports nothing of
bpe_impls except for `builtin:` and `peer:` references, which need the package.

Requests are tuples: ("load", ref) loads a reference (see refs.py) and replies with it;
("train", path, vocab_size, special_tokens); ("tokenizer", vocab, merges, special_tokens) builds
a tokenizer and replies with the names of its optional methods; ("encode", text),
("decode", ids), ("encode_iterable", chunks) call it; ("shake", seed) has the process's free memory
reordered (see shake) just before the next of those calls.

For measuring (`bpe compare`, `bpe scaling`, the CS336 checks): ("measure", request, digest) runs
one of the requests above, or ("encode_iterable_file", path) or ("encode_batch", texts), and
replies with {"value", "seconds", "peak_bytes"}: the seconds of the implementation's own call (not
the checks around it), the high-water mark of this process's resident memory above where it was
when the request arrived (None where /proc cannot say), and the value, or only (count, sha256) of
the ids when `digest` is true. ("memray", capture, request) runs the request under memray's
Tracker writing the capture file (memray must be importable by this interpreter). ("cores", n)
sets this process's threads before an implementation starts its pools: n == 1 pins it, and every
thread it starts, to one core. A reply is ("ok", value),
("raised", exception type name, one line naming the exception) or ("bad", one line): the result is
not of the contract's types (an id that is a float, a str or a bool; a token that is not bytes), or
is far larger than any right answer could be (refused before the rest of it is read).

Every result is checked here, item by item, before it is pickled: ints (numpy integers included)
become plain ints and bytes stay bytes, so what reaches the harness is exactly what was returned.
"""

from __future__ import annotations

import importlib.util
import itertools
import numbers
import os
import random
import socket
import sys
import time
import traceback
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import protocol
else:  # the worker runs by its path, perhaps where bpe_impls is not installed: its sibling by path
    _spec = importlib.util.spec_from_file_location(
        "_bpe_verify_protocol", os.path.join(os.path.dirname(os.path.abspath(__file__)), "protocol.py")
    )
    protocol = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(protocol)


class BadResult(Exception):
    """A result that is not of the contract's types, or too large to be right."""


_HERE = os.path.dirname(os.path.abspath(__file__))


def _one_line(exc: BaseException) -> str:
    # The innermost frame of the implementation's own code (not of the import machinery, nor of
    # this worker: a wrong signature has no frame of its own to show).
    where = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<")
        and f"{os.sep}importlib{os.sep}" not in f.filename
        and os.path.abspath(f.filename) not in (os.path.join(_HERE, "worker.py"), os.path.join(_HERE, "protocol.py"))
    ]
    frame = f" (at {os.path.basename(where[-1].filename)}:{where[-1].lineno})" if where else ""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:500] + frame


# ---- the checks ---------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    kind = type(value)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def _a(value: Any) -> str:
    """'a float', 'an int', 'None': what a value is, for a message."""
    if value is None:
        return "None"
    name = _type_name(value)
    return ("an " if name[0].lower() in "aeiou" else "a ") + name


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _as_id(value: Any) -> int | None:
    """The int `value` is exactly (a Python int or a numpy integer; never a bool), else None."""
    if type(value) is int:
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int) or (type(value).__module__ == "numpy" and isinstance(value, numbers.Integral)):
        return int(value)
    return None


def _sequence(what: str, value: Any, of: str) -> Iterable[Any]:
    """`value` as something to iterate over, if it is a sequence of `of` at all."""
    if isinstance(value, (str, bytes, bytearray, memoryview, Mapping, set, frozenset)) or not isinstance(
        value, Iterable
    ):
        raise BadResult(f"{what} returned {_a(value)}, not a list of {of}: {_show(value)}")
    return value


def _too_many(what: str, value: Any, limit: int, unit: str, why: str) -> None:
    """BadResult if `value` (sized) has more than `limit` items."""
    try:
        count = len(value)
    except TypeError:
        return  # an iterator: counted while it is read
    if count > limit:
        raise BadResult(f"{what} returned {count} {unit} {why}: refused unread")


def check_ids(what: str, result: Any, limit: int, why: str) -> list[int]:
    """`result` as a list of plain ints: BadResult naming the first item that is not an id, or if
    there are more than `limit` of them (`why` says why no right answer has as many)."""
    items = _sequence(what, result, "ids")
    _too_many(what, items, limit, "ids", why)
    if type(items) is list and all(type(item) is int for item in items):
        return items  # already plain ints (a C loop): the common case, checked without a copy
    ids = []
    for position, item in enumerate(itertools.islice(items, limit + 1)):
        token_id = _as_id(item)
        if token_id is None:
            raise BadResult(f"{what} returned {_a(item)} at position {position}: {_show(item)}")
        ids.append(token_id)
    if len(ids) > limit:
        raise BadResult(f"{what} returned more than {limit} ids {why}: refused unread")
    return ids


def _token(what: str, value: Any, where: str) -> bytes:
    if isinstance(value, bytes):
        return bytes(value)
    raise BadResult(f"{what} returned {_a(value)} {where}: {_show(value)}")


def check_trained(result: Any, vocab_size: int, specials: int) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The (vocab, merges) of a trainer, as plain dict[int, bytes] and list[tuple[bytes, bytes]].

    A token must be `bytes` (a subclass too), not bytearray or memoryview: the contract's type,
    hashable (CS336's own test puts the vocab's tokens in a set), and what tokenizers are given.
    A merge is a pair: a tuple or list of two tokens.
    """
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise BadResult(f"train returned {_a(result)}, not a pair (vocab, merges): {_show(result)}")
    vocab, merges = result
    limit = 2 * (vocab_size + specials) + 1024
    why = f"for vocab_size {vocab_size}"
    if not isinstance(vocab, Mapping):
        raise BadResult(f"train returned a vocab that is {_a(vocab)}, not a dict of id to bytes: {_show(vocab)}")
    _too_many("train", vocab, limit, "vocab entries", why)
    plain_vocab = {}
    for position, (key, token) in enumerate(vocab.items()):
        token_id = _as_id(key)
        if token_id is None:
            raise BadResult(f"train returned a vocab key that is {_a(key)} at position {position}: {_show(key)}")
        plain_vocab[token_id] = _token("train", token, f"as the token of vocab id {token_id}")
    items = _sequence("train", merges, "merges")
    _too_many("train", items, limit, "merges", why)
    plain_merges = []
    for position, merge in enumerate(itertools.islice(items, limit + 1)):
        if not isinstance(merge, (tuple, list)) or len(merge) != 2:
            raise BadResult(f"train returned {_a(merge)} as merge {position}, not a pair of bytes: {_show(merge)}")
        where = f"in merge {position}"
        plain_merges.append((_token("train", merge[0], where), _token("train", merge[1], where)))
    if len(plain_merges) > limit:
        raise BadResult(f"train returned more than {limit} merges {why}: refused unread")
    return plain_vocab, plain_merges


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def id_limit(size: int) -> int:
    """More ids than this for `size` bytes of text are refused unread. A right encoding has at most
    one id per byte (every token is one byte or more); the margin leaves a wrong but comparable
    answer to the harness, whose first difference says more than a count."""
    return 2 * size + 1024


# ---- the server ---------------------------------------------------------------------------------

_KEPT: list[bytes] = []  # what shake() keeps alive until the next shake
_IDS_BLOCK = 1 << 12  # ids hashed at a time while an encode_iterable is consumed: 32 KB held at most


def shake(seed: int) -> int:
    """Allocate objects of assorted small sizes and keep a random half of them: the allocator's free
    lists then hand out addresses in another order, so code that orders objects by id() (a heap of
    nodes, a set of objects) sees another order in the next call. Replies with how many are kept."""
    rng = random.Random(seed)
    made = [bytes(rng.randrange(1, 256)) for _ in range(100_000)]
    rng.shuffle(made)  # freed in this order, the blocks are handed out again in the reverse one
    _KEPT[:] = made[: len(made) // 2]
    del made[: len(made) // 2]
    made.clear()
    return len(_KEPT)


def _status_bytes(field: str) -> int | None:
    """A figure of /proc/self/status (VmRSS, VmHWM) in bytes; None where there is none."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _reset_high_water() -> int | None:
    """Reset VmHWM to the resident memory now (Linux 4.0+) and return that; None if it cannot be."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        return None
    return _status_bytes("VmRSS")


def use_cores(count: int) -> None:
    """Size the thread pools an implementation starts from here on: Rust pools (rayon: HF
    tokenizers, gigatoken, tokie) read RAYON_NUM_THREADS when they first start; with one core the
    process, and every thread it starts later, is pinned to one, so no pool can use a second."""
    os.environ["RAYON_NUM_THREADS"] = str(count)
    if count == 1:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


class _Server:
    def __init__(self, package_root: str | None) -> None:
        self.package_root = package_root
        self.target: Any = None
        self.own = False  # whether the target is one of this project's references (builtin:, peer:)
        self.tokenizer: Any = None
        self.vocab: dict[int, bytes] = {}
        self.shake_seed: int | None = None  # shake() just before the next call of the target
        self.seconds: float | None = None  # of the last call of the target (see timed)

    def timed(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        """call(...), its seconds kept. One of this project's own references (a peer's library, our
        numpy methods) returns its own result wrapped with a conversion (peer_encoders.Untimed),
        made here after the clock stops: the time is the library's own call, as its user sees it."""
        start = time.perf_counter()
        result = call(*args, **kwargs)
        self.seconds = time.perf_counter() - start
        if self.own and hasattr(result, "untimed_result"):
            result = result.untimed_result()
        return result

    def measure(self, request: tuple, digest: bool) -> dict:
        baseline = _reset_high_water()
        self.seconds = None
        value = self.handle(request)
        high_water = _status_bytes("VmHWM") if baseline is not None else None
        if digest and request[0] != "encode_iterable_file":  # (which replies with its digest)
            value = protocol.ids_digest(value)
        peak = None if baseline is None or high_water is None else max(0, high_water - baseline)
        return {"value": value, "seconds": self.seconds, "peak_bytes": peak, "baseline_bytes": baseline}

    @staticmethod
    def _id_at(item: Any, position: int) -> int:
        token_id = _as_id(item)
        if token_id is None:
            raise BadResult(f"encode_iterable returned {_a(item)} at position {position}: {_show(item)}")
        return token_id

    def encode_iterable_file(self, path: str) -> tuple[int, str]:
        """(count, sha256) of the ids of encode_iterable over the file opened as text (newline="",
        so that the ids compare with those of `encode` of its text), consumed as they come: hashed
        in blocks, never all held."""
        digest = protocol.IdsDigest()
        position = 0
        start = time.perf_counter()
        with open(path, encoding="utf-8", newline="") as file:
            ids = iter(self.tokenizer.encode_iterable(file))
            # Taken in blocks by C loops (islice, the type check): the harness's share of the time
            # stays small beside even the fastest encoder's.
            while block := list(itertools.islice(ids, _IDS_BLOCK)):
                if not all(type(item) is int for item in block):
                    block = [self._id_at(item, position + offset) for offset, item in enumerate(block)]
                digest.update(block)
                position += len(block)
        self.seconds = time.perf_counter() - start
        return digest.result()

    def load(self, ref: str) -> Any:
        self.own = protocol.needs_package(ref)  # builtin: or peer:, this project's own references
        if not self.own:
            return protocol.load_user_reference(ref)
        if self.package_root is not None and self.package_root not in sys.path:
            sys.path.append(self.package_root)  # last: the user's modules come first
        try:
            from bpe_impls.harness.verify.refs import load_reference
        except ImportError as exc:
            raise ImportError(
                f"{ref.partition(':')[0]}: references need bpe_impls, which {sys.executable} cannot import ({exc})"
            ) from None
        return load_reference(ref)[1]

    def handle(self, request: tuple) -> Any:
        verb, *args = request
        if verb == "shake":
            self.shake_seed = args[0]
            return args[0]
        if self.shake_seed is not None and verb in ("train", "encode", "encode_iterable", "decode"):
            shake(self.shake_seed)  # here, not when asked: a tokenizer built in between takes the blocks freed
            self.shake_seed = None
        if verb == "measure":
            return self.measure(args[0], args[1])
        if verb == "memray":
            import memray  # optional: only a profiling run asks, and the harness says where it is missing

            capture, inner = args
            with memray.Tracker(capture, trace_python_allocators=True):
                self.handle(inner)
            return capture
        if verb == "cores":
            use_cores(args[0])
            return args[0]
        if verb == "load":
            self.target = self.load(args[0])
            return args[0]
        if verb == "train":
            path, vocab_size, special_tokens, *options = args  # options: this project's own trainers only
            result = self.timed(self.target, path, vocab_size, list(special_tokens), **(options[0] if options else {}))
            return check_trained(result, vocab_size, len(special_tokens))
        if verb == "tokenizer":
            vocab, merges, special_tokens, *options = args  # options: this project's own tokenizer only
            self.tokenizer = self.target(vocab, merges, list(special_tokens) or None, **(options[0] if options else {}))
            self.vocab = vocab
            return [
                name
                for name in ("decode", "encode_iterable", "encode_batch")
                if callable(getattr(self.tokenizer, name, None))
            ]
        if verb == "encode":
            size = utf8_size(args[0])
            result = self.timed(self.tokenizer.encode, args[0])
            return check_ids("encode", result, id_limit(size), f"for {size} bytes of text")
        if verb == "encode_iterable":
            size = sum(utf8_size(chunk) for chunk in args[0])
            result = self.tokenizer.encode_iterable(iter(args[0]))
            return check_ids("encode_iterable", result, id_limit(size), f"for {size} bytes of text")
        if verb == "encode_iterable_file":
            return self.encode_iterable_file(args[0])
        if verb == "encode_batch":
            size = sum(utf8_size(text) for text in args[0])
            batch = self.timed(self.tokenizer.encode_batch, list(args[0]))
            documents = _sequence("encode_batch", batch, "lists of ids")
            flat = [item for ids in documents for item in _sequence("encode_batch", ids, "ids")]
            return check_ids("encode_batch", flat, id_limit(size), f"for {size} bytes of text")
        if verb == "decode":
            text = self.tokenizer.decode(list(args[0]))
            if not isinstance(text, str):
                raise BadResult(f"decode returned {_a(text)}, not a str: {_show(text)}")
            size = sum(len(self.vocab.get(i, b"")) for i in args[0])
            if len(text) > id_limit(size):
                raise BadResult(f"decode returned {len(text)} characters for ids of {size} bytes: refused unread")
            return str(text)
        raise ValueError(f"unknown request {verb!r}")


def _reply(server: _Server, request: tuple) -> bytes:
    try:
        reply: tuple = ("ok", server.handle(request))
    except BadResult as exc:
        reply = ("bad", str(exc))
    except BaseException as exc:  # the user's code may raise anything; the harness reports it
        reply = ("raised", type(exc).__name__, _one_line(exc))
    data = protocol.pack(reply)
    if len(data) > protocol.MAX_REPLY:
        data = protocol.pack(("bad", f"the result is {len(data) >> 20} MiB pickled, more than a reply may be"))
    return data


def main(argv: list[str]) -> None:
    fd = int(argv[1])
    package_root = argv[2] if len(argv) > 2 else None
    os.set_inheritable(fd, False)  # processes the implementation starts do not get the channel
    channel = socket.socket(fileno=fd)
    server = _Server(package_root)
    while True:
        try:
            request = protocol.receive(channel)
        except (EOFError, ConnectionError):
            return
        protocol.send(channel, _reply(server, request))


if __name__ == "__main__":
    # `python path/worker.py` put this folder first on sys.path: the working directory instead, as
    # `python -m` would have it (a `module:function` reference is imported from there).
    if not getattr(sys.flags, "safe_path", False):
        sys.path[0] = os.getcwd()
    main(sys.argv)
