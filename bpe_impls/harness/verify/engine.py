"""The search: for each clause of the contract, Hypothesis looks for an input on which the
implementation and this project's reference disagree, and shrinks the first one it finds.

A run checks every clause of every target it is given (the trainer's, then the tokenizer's or
the encoder's), whatever diverged before, unless told to stop at the first divergence. Each
clause first tries its explicit boundary cases (boundary.train_cases, boundary.encode_cases),
then Hypothesis's generated ones. A clause is a strategy aimed at one promise of the contract
plus the comparison every clause shares: a trainer's (vocab, merges) against the `naive`
trainer's (the executable spec), a tokenizer's ids against this project's Tokenizer over the same
vocab. The trainer's vocab is compared as CS336 specifies, up to its ids' numbering (the same ids,
the same byte strings; the merges in order); SearchSettings.strict_ids adds this project's layout.

What a divergence becomes before it is reported:

1. shrunk: by Hypothesis (the corpus or text to a few bytes, the vocab size towards 256 + the
   special tokens), then the vocab size lowered further while it still diverges (explicit and
   real-text cases: delta debugging by lines and characters instead);
2. replayed: run again several times, in fresh processes (other string hashes) and in a used one
   whose free memory was reordered (other object addresses); the verdict says how often it
   came back, and a divergence whose outputs vary between runs is marked nondeterministic (a
   crash or a hang that never comes back is not counted: a busy machine makes those);
3. diagnosed: diagnose.py probes the implementation with variations of the counterexample for
   a hint a student can act on;
4. grouped: divergences of one target with the same counterexample, the same first difference or
   the same diagnosed cause are one finding, listed under every clause they fail.

After the generated cases comes real text, shrunk line by line if it diverges: the shared fixtures
where present, else the samples bundled with the package (harness.fixtures.real_text); a run that
has no real text says so ("real text: skipped: <why>"), it is never silently empty.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import configuration as hypothesis_configuration
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException, HypothesisWarning

from ...base.cache import cache_dir, cache_enabled
from ...base.errors import BpeError, ConfigError
from ...corpus import count_pretokens
from ...encoding import Tokenizer
from ...trainers import DEFAULT_IMPL, train_bpe
from ..fixtures import RealText, missing_text, real_text
from . import boundary, diagnose
from . import strategies as strat
from .clauses import TOKENIZER_CLAUSES, TRAINER_CLAUSES
from .diagnose import Diagnosis, Failed, same_output
from .refs import ImplementationError, Isolated

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]

RENUMBERED_NOTE = "same tokens and merges, numbered differently: allowed; --strict-ids checks the layout"
# Causes too vague to say two divergences are one bug.
_UNGROUPED_CAUSES = frozenset({"tie-other"})
# Chunk sizes real encode_iterable callers and buffers use.
CHUNK_SIZES = (4096, 8192, 65536)
# Cases of the clause "deterministic": each starts a process (a few tenths of a second).
DETERMINISTIC_EXAMPLES = 12
# Runs of a counterexample that replayed the same every time, in one process whose memory is
# reordered before each: a tie decided by id() goes the same way in all of them once in 2**9 or so.
SHAKEN_RUNS = 6
# Seconds Hypothesis may spend shrinking a clause's divergence.
SHRINK_SECONDS = 30.0


# ---- what a divergence is --------------------------------------------------------------------


@dataclass
class Divergence:
    """One input on which the implementation and the reference disagree (or, for the clause
    "deterministic", on which two runs of the implementation disagree)."""

    clause: str
    kind: str  # "train" | "encode"
    inputs: dict[str, Any]  # train: corpus, vocab_size, special_tokens; encode: text, special_tokens
    expected: Any
    actual: Any  # the implementation's output, or the ImplementationError it ended in
    detail: str  # the first difference, in words
    vocab: Vocab | None = None  # encode: the vocab and merges it was found with
    merges: Merges | None = None
    target: str = "trainer"  # "trainer" | "tokenizer" | "encoder"
    clauses: list[str] = field(default_factory=list)  # every clause it fails (grouped), this one first
    diagnosis: Diagnosis | None = None
    reproduces: tuple[int, int] | None = None  # (times it diverged again, replays), once replayed
    nondeterministic: str | None = None  # how its runs varied, when they did
    decoded: str | None = None  # decode: what decode gave back
    # Runs the check that found it again (for the replays); not part of the verdict.
    recheck: Callable[[], Divergence | None] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.clauses:
            self.clauses = [self.clause]

    @property
    def summary(self) -> str:
        return f"{self.target}: {', '.join(self.clauses)}: {self.detail}"

    @property
    def verdict(self) -> str:
        """How it replayed: "reproduces always (5 of 5 replays)", or "... k of n times (nondeterministic: ...)"."""
        if self.reproduces is None:
            return "not replayed"
        times, of = self.reproduces
        if times == of and self.nondeterministic is None:
            return f"reproduces always ({times} of {of} replays)"
        if times == of:
            return f"reproduces always ({times} of {of} replays; nondeterministic: {self.nondeterministic})"
        return f"reproduces {times} of {of} times (nondeterministic: {self.nondeterministic})"

    def to_json(self) -> dict[str, Any]:
        out = {"kind": self.kind, "clause": self.clause, **self.inputs, "first_difference": self.detail}
        if isinstance(self.actual, ImplementationError):
            out["actual_error"] = str(self.actual)
        if self.kind == "encode":
            assert self.vocab is not None and self.merges is not None
            out["expected_ids"] = self.expected
            out["actual_ids"] = None if isinstance(self.actual, Exception) else self.actual
            if self.decoded is not None:
                out["actual_text"] = self.decoded
            out["vocab_hex"] = {str(i): token.hex() for i, token in sorted(self.vocab.items())}
            out["merges_hex"] = [[a.hex(), b.hex()] for a, b in self.merges]
        else:
            out["expected_merges_hex"] = [[a.hex(), b.hex()] for a, b in self.expected[1]]
            if not isinstance(self.actual, Exception):
                out["actual_merges_hex"] = [[a.hex(), b.hex()] for a, b in self.actual[1]]
        return out

    def finding(self) -> dict[str, Any]:
        """This divergence as an entry of the verdict's "divergences"."""
        out: dict[str, Any] = {
            "target": self.target,
            "clause": self.clause,
            "clauses": self.clauses,
            "summary": self.summary,
        }
        if self.diagnosis is not None:
            out["diagnosis"] = self.diagnosis.hint
            out["cause"] = self.diagnosis.cause
        if self.reproduces is not None:
            out["reproduces"] = {"times": self.reproduces[0], "of": self.reproduces[1]}
        if self.nondeterministic is not None:
            out["nondeterministic"] = self.nondeterministic
        out["counterexample"] = self.to_json()
        return out

    def describe(self) -> str:
        names = ", ".join(repr(name) for name in self.clauses)
        lines = [f"DIVERGED in clause{'s' if len(self.clauses) > 1 else ''} {names} ({self.target}); {self.verdict}"]
        for key, value in self.inputs.items():
            lines.append(f"  {key}{_size(key, value)}: {_shown(value)}")
        lines.append(f"  first difference: {self.detail}")
        if self.kind == "encode" and self.decoded is None:
            expected, actual, text = self.expected, self.actual, self.inputs["text"]
            if len(text) > LONG and self.vocab is not None and isinstance(actual, list):
                # A long text's difference shown where it is: its surroundings, and the ids about it.
                index, at = _first_difference(self.vocab, expected, actual)
                start = max(0, index - 8)
                lines.append(f"  around character {at:,}: {text[max(0, at - 60) : at]!r} | {text[at : at + 60]!r}")
                lines.append(f"  expected ids {start}..: {expected[start : index + 8]}")
                lines.append(f"  actual ids {start}..:   {actual[start : index + 8]}")
            else:
                lines.append(f"  expected ids: {_shown(expected)}")
                lines.append(f"  actual ids:   {_shown(actual)}")
        if self.diagnosis is not None:
            lines.append(f"  hint: {self.diagnosis.hint}")
        return "\n".join(lines)


# Texts longer than this are shown about their first difference.
LONG = 400


def _first_difference(vocab: Vocab, expected: list[int], actual: list[int]) -> tuple[int, int]:
    """(the index of the first id that differs, the character of the text it starts at)."""
    index = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), min(len(expected), len(actual)))
    return index, len(b"".join(vocab.get(i, b"") for i in expected[:index]).decode("utf-8", errors="replace"))


def _size(key: str, value: Any) -> str:
    if key in ("corpus", "text"):
        return f" ({len(value.encode('utf-8'))} bytes)"
    if key == "chunks" and len(value) > 8:
        return f" ({len(value)} chunks)"
    return ""


def _shown(value: Any, most: int = LONG) -> str:
    """repr, cut in the middle past `most` characters (a long text's counterexample; the JSON has it whole)."""
    text = repr(value)
    if len(text) <= most:
        return text
    return f"{text[: most // 2]} ... ({len(text) - most:,} characters more) ... {text[-most // 2 :]}"


@dataclass
class ClauseResult:
    name: str
    promise: str
    cases: int = 0
    divergence: Divergence | None = None
    real_text: bool = False  # cases from the fixtures, not generated
    target: str = "trainer"
    skipped: str | None = None  # why no verdict: the time budget, --fail-fast, a method the tokenizer lacks

    @property
    def status(self) -> str:
        return "diverged" if self.divergence is not None else "skipped" if self.skipped is not None else "passed"


@dataclass
class Verification:
    """What `verify` checked and what it found."""

    implementations: dict[str, str] = field(default_factory=dict)  # role -> reference
    clauses: list[ClauseResult] = field(default_factory=list)
    corpora: list[str] = field(default_factory=list)  # the real texts checked, and whose they are
    real_text_skipped: list[str] = field(default_factory=list)  # "real text: skipped: <why>"
    notes: list[str] = field(default_factory=list)

    @property
    def divergences(self) -> list[Divergence]:
        """Each finding once (a divergence failing several clauses is one), in the order found."""
        found: list[Divergence] = []
        for clause in self.clauses:
            if clause.divergence is not None and all(clause.divergence is not d for d in found):
                found.append(clause.divergence)
        return found

    @property
    def divergence(self) -> Divergence | None:
        return next((c.divergence for c in self.clauses if c.divergence is not None), None)

    @property
    def status(self) -> str:
        return "diverged" if self.divergence else "passed"

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def to_json(self) -> dict[str, Any]:
        divergence = self.divergence
        return {
            "status": self.status,
            "clauses": [
                {"target": c.target, "clause": c.name, "status": c.status, "cases": c.cases}
                | ({"reason": c.skipped} if c.skipped is not None else {})
                for c in self.clauses
            ],
            "divergences": [d.finding() for d in self.divergences],
            "notes": self.notes,
            # For readers of the verdicts written before the fields above (bpe report reads these).
            "checked": {
                "implementations": self.implementations,
                "generated_cases": sum(c.cases for c in self.clauses if not c.real_text),
                "real_text_cases": sum(c.cases for c in self.clauses if c.real_text),
                "clauses": [
                    {
                        "name": c.name,
                        "target": c.target,
                        "promise": c.promise,
                        "cases": c.cases,
                        "passed": c.divergence is None,
                        "status": c.status,
                    }
                    for c in self.clauses
                ],
                "real_corpora": self.corpora,
                "real_text_skipped": self.real_text_skipped,
            },
            "counterexample": divergence.to_json() if divergence else None,
        }


def merge_verifications(results: Sequence[Verification]) -> Verification:
    """One verdict for several targets' (the command's targets, checked one after the other)."""
    return Verification(
        implementations={k: v for r in results for k, v in r.implementations.items()},
        clauses=[c for r in results for c in r.clauses],
        corpora=[c for r in results for c in r.corpora],
        real_text_skipped=[c for r in results for c in r.real_text_skipped],
        notes=[n for r in results for n in r.notes],
    )


def verification_summary(result: Verification) -> list[dict[str, Any]]:
    """One row per clause (for `bpe report`): name, cases, verdict and the counterexample's inputs."""
    return [
        {
            "target": c.target,
            "clause": c.name,
            "cases": c.cases,
            "status": c.status,
            "passed": c.divergence is None,
            "counterexample": None if c.divergence is None else c.divergence.inputs,
            "diagnosis": None
            if c.divergence is None or c.divergence.diagnosis is None
            else c.divergence.diagnosis.hint,
        }
        for c in result.clauses
    ]


def verdict_table(result: Verification) -> str:
    """The run's closing table (target, clause, cases, verdict), each divergence's counterexample
    below it, numbered as the table refers to them."""
    findings = result.divergences
    rows = [("target", "clause", "cases", "verdict")]
    for c in result.clauses:
        if c.divergence is not None:
            verdict = f"DIVERGED [{next(i for i, d in enumerate(findings, 1) if d is c.divergence)}]"
        elif c.skipped is not None:
            verdict = f"skipped: {c.skipped}"
        else:
            verdict = "passed"
        rows.append((c.target, c.name, str(c.cases), verdict))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [f"{a:<{widths[0]}}  {b:<{widths[1]}}  {n:>{widths[2]}}  {v}".rstrip() for a, b, n, v in rows]
    lines.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * 7)
    for index, divergence in enumerate(findings, 1):
        lines.append("")
        lines.append(f"[{index}] {divergence.describe()}")
    return "\n".join(lines)


# ---- the first difference ----------------------------------------------------------------------


def _pair_counts(word_counts: Mapping[bytes, int], merges: Merges) -> Counter[tuple[bytes, bytes]]:
    """The pair counts after applying `merges` to the words (greedy left to right, as the contract)."""
    words = {tuple(bytes([b]) for b in word): count for word, count in word_counts.items()}
    for pair in merges:
        new_words: dict[tuple[bytes, ...], int] = {}
        for word, count in words.items():
            merged = diagnose.merge_word(word, pair)
            new_words[merged] = new_words.get(merged, 0) + count
        words = new_words
    pairs: Counter[tuple[bytes, bytes]] = Counter()
    for word, count in words.items():
        for pair in zip(word, word[1:]):
            pairs[pair] += count
    return pairs


def train_difference(
    path: str, specials: Sequence[str], expected: tuple[Vocab, Merges], actual: Any, strict_ids: bool = False
) -> str:
    if isinstance(actual, ImplementationError):
        return f"the implementation {actual}"
    vocab, merges = actual
    want_vocab, want_merges = expected
    for index, (want, got) in enumerate(zip(want_merges, merges)):
        if want != got:
            pairs = _pair_counts(count_pretokens(path, list(specials), num_workers=1), want_merges[:index])
            return f"merge {index}: expected {want!r} (count {pairs[want]}), got {got!r} (count {pairs[got]})"
    if len(want_merges) != len(merges):
        return f"expected {len(want_merges)} merges, got {len(merges)}"
    if strict_ids or same_output(expected, actual, strict_ids=False):
        for token_id in sorted(set(want_vocab) | set(vocab)):
            if want_vocab.get(token_id) != vocab.get(token_id):
                same = (
                    " (same tokens and merges, numbered differently)"
                    if not strict_ids or same_output(expected, actual, strict_ids=False)
                    else ""
                )
                return f"vocab id {token_id}: expected {want_vocab.get(token_id)!r}, got {vocab.get(token_id)!r}{same}"
    missing = Counter(want_vocab.values()) - Counter(vocab.values())
    extra = Counter(vocab.values()) - Counter(want_vocab.values())
    if missing:
        return f"the vocab lacks {min(missing)!r}" + (f" and holds {min(extra)!r} instead" if extra else "")
    if extra:
        return f"the vocab holds {min(extra)!r}, which is no special token, byte or merge of the reference's"
    ids, want_ids = sorted(vocab), sorted(want_vocab)
    return (
        f"the vocab's ids are {_ranges(ids)}, expected {_ranges(want_ids)} (the same tokens and merges; "
        "CS336 checks the set of ids too, and allows any assignment of the tokens to those ids)"
    )


def _ranges(ids: Sequence[int]) -> str:
    parts: list[list[int]] = []
    for i in ids:
        if parts and parts[-1][1] == i - 1:
            parts[-1][1] = i
        else:
            parts.append([i, i])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in parts[:6]) + (", ..." if len(parts) > 6 else "")


def encode_difference(vocab: Vocab, expected: list[int], actual: Any) -> str:
    if isinstance(actual, ImplementationError):
        return f"the implementation {actual}"
    index, at = _first_difference(vocab, expected, actual)
    where = f" (character {at:,})" if at > LONG else ""
    if index < min(len(expected), len(actual)):
        want, got = expected[index], actual[index]
        return (
            f"token {index}{where}: expected id {want} ({vocab.get(want)!r}), "
            f"got id {got} ({vocab.get(got, 'not in the vocab')!r})"
        )
    return f"expected {len(expected)} ids, got {len(actual)}"


# ---- the checks ------------------------------------------------------------------------------


def _read_exactly(path: Path) -> str:
    """A text file's text with its newlines as they are (read_text would turn "\r\n" into "\n")."""
    with open(path, encoding="utf-8", newline="") as file:
        return file.read()


@contextmanager
def corpus_file(corpus: str) -> Iterator[str]:
    fd, path = tempfile.mkstemp(prefix="bpe_verify_", suffix=".txt")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as file:
            file.write(corpus)
        yield path
    finally:
        os.unlink(path)


class Rejected(Exception):
    """The reference itself refuses the input (nothing to train on): not a case to check."""


class BudgetSpent(Exception):
    """The time budget ran out during a call: the call was cut, which says nothing about the implementation."""


def reference_train(path: str, vocab_size: int, specials: Sequence[str], impl: str = "naive") -> tuple[Vocab, Merges]:
    try:
        vocab, merges = train_bpe(path, vocab_size, list(specials), impl=impl, num_workers=1, progress=False)
    except BpeError as exc:
        raise Rejected(str(exc)) from None
    return dict(vocab), list(merges)


@dataclass
class EncodeCase:
    text: str
    specials: list[str]
    vocab: Vocab
    merges: Merges
    chunks: list[str] | None = None  # encode_iterable's pieces of the text
    chunking: str | None = None  # how `chunks` was cut: "lines", a size, or "cuts" (arbitrary)

    def __repr__(self) -> str:  # (Hypothesis shows a failing case; the vocab is no use there)
        return f"EncodeCase(text={_shown(self.text, 200)}, specials={self.specials!r}, chunking={self.chunking!r})"


def chunked(text: str, chunking: str) -> list[str]:
    """The text as encode_iterable is given it: a file's lines (iterating an open file), or
    fixed-size pieces (reading a file `size` characters at a time)."""
    if chunking == "lines":
        return list(io.StringIO(text, newline=""))
    size = int(chunking)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _signature(output: Any) -> str:
    """An output as something to compare runs by (an error by its message)."""
    return f"error: {output}" if isinstance(output, Exception) else repr(output)


def _is_hang(exc: BaseException) -> bool:
    return isinstance(exc, ImplementationError) and "(hung)" in str(exc)


@dataclass
class SearchSettings:
    """How a run searches, and which contract it holds an implementation to.

    Attributes:
        max_examples: generated cases per clause (the explicit boundary cases come on top).
        seed: the search's seed (None: a random one).
        time_budget: seconds for the whole run, calls included: the search stops when it is spent,
            and a call still running then is cut (its clause says so; it is not a hang).
        progress: called with "trainer: tie-break" and the like as each clause starts.
        strict_ids: hold a trainer's vocab to this project's layout (special tokens, the 256 bytes,
            the merges in order), not only to its tokens and merges (CS336's contract).
        replays: fresh runs of each counterexample before it is reported.
        fail_fast: stop at the first divergence (the clauses after it are skipped).
        require_special: special tokens every case includes, for implementations that demand them.
        python: the interpreter the implementation runs under (a student's own venv), default this one.
        corpus: a text file of the user's for the real-text stage, in place of the shared fixtures
            and the samples bundled with the package.
    """

    max_examples: int = 100
    seed: int | None = 0
    time_budget: float | None = None
    progress: Callable[[str], None] | None = None
    strict_ids: bool = False
    replays: int = 5
    fail_fast: bool = False
    require_special: Sequence[str] = ()
    python: str | None = None
    corpus: Path | None = None

    def __post_init__(self) -> None:
        if self.max_examples < 1:
            raise ConfigError(f"max_examples must be at least 1, not {self.max_examples}")
        if self.time_budget is not None and not (math.isfinite(self.time_budget) and self.time_budget >= 0):
            raise ConfigError(f"the time budget must be a finite number of seconds >= 0, not {self.time_budget}")
        if self.replays < 1:
            raise ConfigError(f"replays must be at least 1, not {self.replays}")
        for token in self.require_special:
            if not token:
                raise ConfigError("a required special token cannot be empty")
        if self.corpus is not None:
            if not Path(self.corpus).is_file():
                raise ConfigError(f"{self.corpus}: the corpus is not a readable file")
            data = Path(self.corpus).read_bytes()
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(f"{self.corpus}: not UTF-8 at byte offset {exc.start}") from None
            if not data.strip():
                raise ConfigError(f"{self.corpus}: the corpus is empty")

    def real_texts(self, names: Sequence[str]) -> list[tuple[str, RealText | None]]:
        """(name, text) for the real-text stage: the user's corpus, else each named fixture (None:
        absent, and missing_text says why)."""
        if self.corpus is not None:
            path = Path(self.corpus)
            return [(path.name, RealText(path.name, path, bundled=False, own=True))]
        return [(name, real_text(name)) for name in names]


@contextmanager
def _hypothesis_storage() -> Iterator[None]:
    """Point Hypothesis's files (its cache of constants found in local code, its Unicode tables) at
    the cache dir, or a temporary folder with the cache off: by default it writes .hypothesis/ in
    the working directory, which is the user's. HYPOTHESIS_STORAGE_DIRECTORY, if set, wins."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        yield
        return
    # The module's current setting (None: not decided yet), restored after, for a host process
    # (pytest with the plugin) that uses Hypothesis for its own tests too.
    previous = vars(hypothesis_configuration).get("__hypothesis_home_directory")
    with tempfile.TemporaryDirectory(prefix="bpe_verify_hypothesis_") as scratch:
        hypothesis_configuration.set_hypothesis_home_dir(
            cache_dir() / "hypothesis" if cache_enabled() else Path(scratch)
        )
        try:
            yield
        finally:
            hypothesis_configuration.set_hypothesis_home_dir(previous)


class _Run:
    """One target's run: its process, the settings, the clock, and what it found so far."""

    def __init__(
        self, target: str, implementation: Isolated, options: SearchSettings, result: Verification, call_timeout: float
    ) -> None:
        self.target = target
        self.impl = implementation
        self.options = options
        self.result = result
        self.call_timeout = call_timeout
        self.deadline = None if options.time_budget is None else time.monotonic() + options.time_budget
        # Replays and probes of a divergence found just before the deadline get this much longer.
        self.grace = None if options.time_budget is None else max(5.0, options.time_budget / 10)
        self.in_grace = False
        self.stopped = False  # --fail-fast after a divergence

    def spent(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def left(self) -> float | None:
        if self.deadline is None:
            return None
        grace = (self.grace or 0.0) if self.in_grace else 0.0
        return self.deadline + grace - time.monotonic()

    def call(self, *request: Any) -> Any:
        """A call to the implementation, cut when the time budget runs out (BudgetSpent)."""
        left = self.left()
        limited = left is not None and left < self.call_timeout
        if left is not None and left <= 0:
            raise BudgetSpent
        self.impl.timeout = max(left, 0.1) if limited and left is not None else self.call_timeout
        try:
            return self.impl.call(*request)
        except ImplementationError as exc:
            if limited and _is_hang(exc):
                raise BudgetSpent from None
            raise
        finally:
            self.impl.timeout = self.call_timeout

    def found(self, cause: str) -> bool:
        """This target has a finding diagnosed with `cause` already."""
        return any(
            d.target == self.target and d.diagnosis is not None and d.diagnosis.cause == cause
            for d in self.result.divergences
        )

    def fresh(self) -> None:
        """The next call runs in a new process (new string hashes, new object addresses)."""
        self.impl.close()

    def shake(self, seed: int) -> None:
        """The next call runs in this process with its free memory reordered (worker.shake): objects
        it allocates get addresses in another order than in the call before."""
        try:
            self.call("shake", seed)
        except (ImplementationError, BudgetSpent):
            pass  # (the call that follows meets the same trouble, and reports it)

    # -- the search --

    def search(
        self,
        strategy: st.SearchStrategy[Any],
        check: Callable[[Any], Divergence | None],
        max_examples: int,
    ) -> tuple[int, Divergence | None]:
        """Run the property; (cases checked, the last divergence Hypothesis saw: its shrunk one)."""
        found: list[Divergence] = []
        cases = [0]
        first_found = [0.0]
        known: list[Divergence] = []
        # Shrinking a nondeterministic failure, or one whose every call is slow, goes on and on:
        # after this long the divergence found so far is the one reported.
        shrinking = SHRINK_SECONDS if max_examples > DETERMINISTIC_EXAMPLES else SHRINK_SECONDS / 2

        @settings(
            max_examples=max_examples,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            print_blob=False,
            report_multiple_bugs=False,
        )
        @given(strategy)
        def prop(example: Any) -> None:
            # Past the deadline every case passes: the search ends, and so does shrinking (the
            # divergence found so far is the one reported).
            if self.spent() or (found and time.monotonic() - first_found[0] > shrinking) or known:
                return
            try:
                divergence = check(example)
            except (Rejected, BudgetSpent):
                return
            cases[0] += 1
            if divergence is not None:
                if not found:
                    first_found[0] = time.monotonic()
                    # A finding this target already has (the same first difference): no need to shrink it.
                    known.extend(d for d in self.result.divergences if self.same(d, divergence))
                found.append(divergence)
                raise AssertionError(divergence.detail)

        if self.options.seed is not None:
            prop = hypothesis_seed(self.options.seed)(prop)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", HypothesisWarning)  # (a large text's repr, say)
                prop()
        # (A search of a nondeterministic implementation ends with Hypothesis unable to replay its
        # failure, Flaky: the divergence it saw still stands, and the replays tell how often it comes.)
        except (AssertionError, HypothesisException):
            pass
        return cases[0], (found[-1] if found else None)

    def explicit(
        self, cases: Sequence[Any], check: Callable[[Any], Divergence | None]
    ) -> tuple[int, Divergence | None]:
        """Check each explicit case in turn; (cases checked, the first divergence)."""
        checked = 0
        for case in cases:
            if self.spent():
                break
            try:
                divergence = check(case)
            except (Rejected, BudgetSpent):
                continue
            checked += 1
            if divergence is not None:
                return checked, divergence
        return checked, None

    def quiet(self, check: Callable[..., Divergence | None], *args: Any) -> Divergence | None:
        try:
            return check(*args)
        except (Rejected, BudgetSpent):
            return None

    # -- after a divergence --

    def settle(
        self, clause: ClauseResult, divergence: Divergence, diagnose_it: Callable[[Divergence], Diagnosis | None]
    ) -> None:
        """Replay, diagnose and group a clause's divergence, then record it (or, a crash or a hang
        that never came back, note it)."""
        if self.options.fail_fast:
            self.stopped = True
        # The counterexample or the first difference of a finding already replayed: one more clause it fails.
        earlier = self.group(divergence, by_cause=False)
        if earlier is not divergence:
            clause.divergence = earlier
            return
        self.in_grace = True
        try:
            if not self.replay(divergence):
                self.result.note(
                    f"{self.target}: {clause.name}: {divergence.detail} once, on {_shown(divergence.inputs, 200)}, "
                    f"and in none of {divergence.reproduces[1] if divergence.reproduces else 0} replays: not counted "
                    "(a busy machine can make a call crash or time out)"
                )
                return
            if clause.name == "deterministic" and divergence.diagnosis is None:
                # Its runs disagree with each other by definition, however often that replays.
                times, of = divergence.reproduces or (1, 1)
                divergence.nondeterministic = divergence.nondeterministic or "runs on one input differ"
                divergence.diagnosis = diagnose.diagnose_nondeterminism(times, of, 2)
            elif divergence.nondeterministic is None:
                try:
                    divergence.diagnosis = diagnose_it(divergence)
                except BudgetSpent:
                    divergence.diagnosis = None
        finally:
            self.in_grace = False
        clause.divergence = self.group(divergence)

    def replay(self, divergence: Divergence) -> bool:
        """Run the divergence's check again, `replays` times; False if a crash or a hang never came
        back (not a finding)."""
        if divergence.recheck is None:
            divergence.reproduces = None
            return True
        # A hang costs a whole call timeout each time: two replays of one are enough.
        times = min(self.options.replays, 2) if _is_hang(divergence.actual) else self.options.replays
        outputs = {_signature(divergence.actual)}
        hits = runs = 0
        for replay in range(times):
            # In a fresh process (other string hashes; the same history of allocations, so often the
            # same object addresses) first and fourth, else in the one the previous replay ran in, its
            # free memory reordered (objects' ids in another order).
            if replay % 3 == 0:
                self.fresh()
            else:
                self.shake(replay)
            try:
                again = divergence.recheck()
            except (BudgetSpent, Rejected):
                break
            runs += 1
            if again is not None:
                hits += 1
                outputs.add(_signature(again.actual))
            else:
                outputs.add(_signature(divergence.expected))
        # The same output every time: a few more runs in this process, each after its memory is
        # reordered, cheap (no new process) and enough to show an order by id() (a tie between two
        # objects goes the same way three times running one time in eight).
        # (Counted in the verdict only if they show a difference: "5 of 5 replays" stays the replays.)
        shaken_hits = shaken_runs = 0
        for probe in range(SHAKEN_RUNS if runs and len(outputs) == 1 and not _is_hang(divergence.actual) else 0):
            self.shake(100 + probe)
            try:
                again = divergence.recheck()
            except (BudgetSpent, Rejected):
                break
            shaken_runs += 1
            shaken_hits += again is not None
            outputs.add(_signature(again.actual if again is not None else divergence.expected))
            if len(outputs) > 1:
                hits, runs = hits + shaken_hits, runs + shaken_runs
                break
        self.fresh()
        divergence.reproduces = (hits, runs)
        if runs == 0:
            return True  # no time to replay: reported as found, "0 of 0"
        if hits == 0 and isinstance(divergence.actual, ImplementationError):
            return False
        if hits < runs or len(outputs) > 1:
            divergence.nondeterministic = (
                f"{len(outputs)} different outputs in {runs + 1} runs"
                if hits
                else f"seen in the search, in none of {runs} replays"
            )
            divergence.diagnosis = diagnose.diagnose_nondeterminism(hits, runs, len(outputs))
        return True

    @staticmethod
    def same(earlier: Divergence, divergence: Divergence) -> bool:
        return earlier.target == divergence.target and (
            earlier.detail == divergence.detail
            or json.dumps(earlier.inputs, sort_keys=True, default=str)
            == json.dumps(divergence.inputs, sort_keys=True, default=str)
        )

    def group(self, divergence: Divergence, by_cause: bool = True) -> Divergence:
        """The finding this divergence belongs to: an earlier one of this target with the same
        counterexample, first difference or (by_cause) diagnosed cause (it then lists this clause
        too), or itself."""
        cause = divergence.diagnosis.cause if by_cause and divergence.diagnosis is not None else None
        for earlier in self.result.divergences:
            if earlier.target != divergence.target:
                continue
            same_cause = (
                cause is not None
                and cause not in _UNGROUPED_CAUSES
                and earlier.diagnosis is not None
                and earlier.diagnosis.cause == cause
            )
            if same_cause or self.same(earlier, divergence):
                if divergence.clause not in earlier.clauses:
                    earlier.clauses.append(divergence.clause)
                return earlier
        return divergence

    def left_for_shrinking(self) -> float:
        left = self.left()
        return 60.0 if left is None else max(0.0, min(60.0, left))

    def nothing_found(self, clause: ClauseResult) -> None:
        """A clause's search ended without a divergence: skipped if the budget left it no case."""
        if clause.cases == 0 and self.spent():
            clause.skipped = "the time budget was spent"

    def begin(self, clause: ClauseResult) -> bool:
        """Whether the clause runs; if not, why it is skipped."""
        if self.stopped:
            clause.skipped = "--fail-fast stopped at the first divergence"
        elif self.spent():
            clause.skipped = "the time budget was spent"
        elif self.options.progress:
            self.options.progress(f"{self.target}: {clause.name}")
        self.result.clauses.append(clause)
        return clause.skipped is None


# ---- the trainer -------------------------------------------------------------------------------

TrainCase = tuple[str, list[str], int]


@st.composite
def _train_case(draw: st.DrawFn, kind: str) -> TrainCase:
    specials: list[str]
    if kind == "tie-break":
        corpus, specials = draw(strat.tie_corpus()), []
    elif kind == "greedy-left-to-right":
        corpus, specials = draw(strat.run_corpus()), []
    elif kind == "special-tokens":
        corpus, specials = draw(strat.specials_corpus())
    elif kind == "deterministic" and draw(st.booleans()):
        corpus, specials = draw(strat.tie_corpus()), []
    else:
        specials = draw(strat.special_tokens())
        corpus = draw(strat.mixed_text(specials))
    most = 400 if kind == "stops-when-no-pair-is-left" else 40
    return corpus, specials, draw(strat.vocab_size(specials, most))


class _Trainer(_Run):
    def required(self, case: TrainCase) -> TrainCase:
        """The case with the required special tokens among its own (the vocab that much larger)."""
        corpus, specials, size = case
        added = [token for token in self.options.require_special if token not in specials]
        return corpus, [*specials, *added], size + len(added)

    def train(self, corpus: str, specials: Sequence[str], size: int) -> tuple[Vocab, Merges]:
        with corpus_file(corpus) as path:
            vocab, merges = self.call("train", path, size, list(specials))
        return vocab, merges

    def check(self, clause: str, case: TrainCase, reference: str = "naive") -> Divergence | None:
        corpus, specials, size = self.required(case)
        strict = self.options.strict_ids
        with corpus_file(corpus) as path:
            expected = reference_train(path, size, specials, reference)
            try:
                actual: Any = self.call("train", path, size, list(specials))
            except ImplementationError as exc:
                actual = exc
            if not isinstance(actual, Exception):
                if actual[0] == expected[0] and actual[1] == expected[1]:
                    return None
                if not strict and same_output(actual, expected, strict_ids=False):
                    self.result.note(f"{self.target}: {RENUMBERED_NOTE}")
                    return None
                if not strict and diagnose.only_the_id_set_differs(actual, expected) and self.found("id-set"):
                    return None  # (reported once: the clauses after it look past it, for other bugs)
            detail = train_difference(path, specials, expected, actual, strict)
        inputs = {"corpus": corpus, "vocab_size": size, "special_tokens": list(specials)}
        return Divergence(
            clause,
            "train",
            inputs,
            expected,
            actual,
            detail,
            target=self.target,
            recheck=lambda: self.check(clause, (corpus, list(specials), size), reference),
        )

    def check_twice(self, clause: str, case: TrainCase) -> Divergence | None:
        """Runs on one input in the process that made the calls before, in a fresh one, and again
        in that one: the same output each time, ids and all."""
        corpus, specials, size = self.required(case)
        with corpus_file(corpus) as path:
            reference_train(path, size, specials)  # (Rejected: not a case)
            try:
                first = self.call("train", path, size, list(specials))
            except ImplementationError:
                return None  # a failure is the other clauses' to report
            second: Any = None
            for run in ("a fresh process", "the same process again"):
                if run == "a fresh process":
                    self.fresh()
                else:
                    self.shake(size)
                try:
                    second = self.call("train", path, size, list(specials))
                except ImplementationError as exc:
                    second = exc
                if isinstance(second, Exception) or (first[0], first[1]) != (second[0], second[1]):
                    break
            else:
                return None
            detail = f"a run in {run} differs from the first: " + train_difference(
                path, specials, first, second, strict_ids=True
            ).replace("expected", "first run").replace("got", "this run")
        inputs = {"corpus": corpus, "vocab_size": size, "special_tokens": list(specials)}
        return Divergence(
            clause,
            "train",
            inputs,
            first,
            second,
            detail,
            target=self.target,
            recheck=lambda: self.check_twice(clause, (corpus, list(specials), size)),
        )

    def smaller_vocab(self, divergence: Divergence, check: Callable[[int], Divergence | None]) -> Divergence:
        """Lower the vocab size while the divergence stays: the floor (256 + the special tokens + 1) if
        it still diverges, else the smallest of the sizes halfway down that does, then one at a time."""
        floor = 257 + len(divergence.inputs["special_tokens"])
        size = divergence.inputs["vocab_size"]
        step = size - floor
        while step > 0 and not self.spent():
            smaller = check(size - step)
            if smaller is not None:
                divergence, size = smaller, size - step
                step = min(step, size - floor)
            else:
                step //= 2
        return divergence

    def diagnose(self, divergence: Divergence, reference: str = "naive") -> Diagnosis | None:
        inputs = divergence.inputs
        strict = self.options.strict_ids

        def run(corpus: str, specials: Sequence[str], size: int) -> tuple[Vocab, Merges]:
            try:
                return self.train(corpus, specials, size)
            except ImplementationError as exc:
                raise Failed(str(exc)) from None

        def ours(corpus: str, specials: Sequence[str], size: int) -> tuple[Vocab, Merges]:
            with corpus_file(corpus) as path:
                try:
                    # The fast trainer for the probes' 200 KB files (the naive one recounts them per merge).
                    return reference_train(path, size, specials, DEFAULT_IMPL if len(corpus) > 10_000 else reference)
                except Rejected as exc:
                    raise Failed(str(exc)) from None

        actual = divergence.actual
        if divergence.clause == "deterministic":
            return None
        result = diagnose.diagnose_train(
            inputs["corpus"],
            inputs["special_tokens"],
            inputs["vocab_size"],
            divergence.expected,
            Failed(str(actual)) if isinstance(actual, ImplementationError) else actual,
            run,
            ours,
            strict,
        )
        self.fresh()  # the probes' state (a 200 KB file's) is no later call's business
        return result

    def clause(self, name: str) -> None:
        clause = ClauseResult(name, TRAINER_CLAUSES[name], target=self.target)
        if not self.begin(clause):
            return
        twice = name == "deterministic"

        def check(case: TrainCase) -> Divergence | None:
            return self.check_twice(name, case) if twice else self.check(name, case)

        clause.cases, found = self.explicit(boundary.train_cases(name), check)
        if found is not None:
            corpus, specials, size = found.inputs["corpus"], found.inputs["special_tokens"], found.inputs["vocab_size"]
            shrunk = _shrink_text(
                corpus, lambda text: self.quiet(check, (text, specials, size)), self.left_for_shrinking()
            )
            found = shrunk or found
        else:
            examples = min(self.options.max_examples, DETERMINISTIC_EXAMPLES) if twice else self.options.max_examples
            searched, found = self.search(_train_case(name), check, examples)
            clause.cases += searched
        if found is None and name == "pre-tokenization":
            found = self.large_files(clause)
            if found is not None:
                self.settle(clause, found, lambda d: self.diagnose(d, DEFAULT_IMPL))
                return
        if found is None:
            self.nothing_found(clause)
            return
        if not twice:
            corpus, specials = found.inputs["corpus"], found.inputs["special_tokens"]
            found = self.smaller_vocab(found, lambda size: self.quiet(self.check, name, (corpus, specials, size)))
        self.settle(clause, found, self.diagnose)

    def large_files(self, clause: ClauseResult) -> Divergence | None:
        """Files of 200 KB and 4 MB whose documents run past 64 KB (strategies.large_corpora), where
        a trainer that reads or splits its input in chunks cuts a word; checked against the fast
        trainer (the naive one takes minutes there), the vocab lowered, then the text shrunk."""
        specials = ["<|endoftext|>"]

        def diverges(text: str, size: int = strat.LARGE_VOCAB_SIZE) -> Divergence | None:
            return self.quiet(self.check, clause.name, (text, specials, size), DEFAULT_IMPL)

        for corpus in strat.large_corpora(specials):
            if self.spent():
                break
            found = diverges(corpus)
            clause.cases += 1
            if found is not None:
                found = self.smaller_vocab(found, lambda size: diverges(corpus, size))
                size = found.inputs["vocab_size"]
                # (a shorter while: each try trains on a large file; the text is shown cut anyway)
                return (
                    _shrink_text(corpus, lambda text: diverges(text, size), min(20.0, self.left_for_shrinking()))
                    or found
                )
        return None

    def real_text(self) -> None:
        specials = ["<|endoftext|>"]
        vocab_size = 500
        for name, text in self.options.real_texts(["tinystories_sample.txt"]):
            if text is None:
                why = missing_text(name)
                self.result.real_text_skipped.append(f"real text: skipped: {why}")
                self.result.clauses.append(
                    ClauseResult(
                        f"real text: {name}",
                        "the whole contract on real text",
                        real_text=True,
                        target=self.target,
                        skipped=why,
                    )
                )
                continue
            clause = ClauseResult(
                f"real text: {name}", "the whole contract on real text", real_text=True, target=self.target
            )
            if not self.begin(clause):
                continue
            corpus = _read_exactly(text.path)
            self.result.corpora.append(f"{text.describe()} at vocab {vocab_size}")

            def diverges(text: str, size: int = vocab_size) -> Divergence | None:
                return self.quiet(self.check, clause.name, (text, specials, size), DEFAULT_IMPL)

            try:
                found = self.check(clause.name, (corpus, specials, vocab_size), DEFAULT_IMPL)
            except BudgetSpent:
                clause.skipped = "the time budget ran out during the call"
                continue
            clause.cases = 1
            if found is None:
                continue
            # The vocab first (each try trains on the whole text once), then the text at that size.
            found = self.smaller_vocab(found, lambda size: diverges(corpus, size))
            size = found.inputs["vocab_size"]
            found = _shrink_text(corpus, lambda text: diverges(text, size), self.left_for_shrinking()) or found
            self.settle(clause, found, lambda d: self.diagnose(d, DEFAULT_IMPL))


def _shrink_text(text: str, diverges: Callable[[str], Divergence | None], seconds: float = 60.0) -> Divergence | None:
    """Delta debugging, by lines and then by characters: a shorter text that still diverges (the
    best found within `seconds`, a bound for texts whose every call is slow)."""
    best = diverges(text)
    if best is None:
        return None
    deadline = time.monotonic() + seconds
    for unit in ("lines", "chars"):
        parts = text.splitlines(keepends=True) if unit == "lines" else list(text)
        chunk = len(parts) // 2
        while chunk >= 1 and time.monotonic() < deadline:
            start = 0
            while start < len(parts) and time.monotonic() < deadline:
                candidate = parts[:start] + parts[start + chunk :]
                found = diverges("".join(candidate)) if candidate else None
                if found is not None:
                    parts, best = candidate, found
                else:
                    start += chunk
            chunk //= 2
        text = "".join(parts)
    return best


_SMOKE_TRAIN: list[TrainCase] = [
    ("ab ab\n", [], 257),
    ("low lower<|endoftext|>newest newer\n", ["<|endoftext|>"], 262),
]


def _smoke(run: _Run, attempts: Sequence[Callable[[], Any]]) -> None:
    """The simplest calls of their kind, until one succeeds: an implementation that fails every one
    cannot be called at all (a wrong signature, a crash on any input) and is reported as such, not
    searched. One that fails only some (without special tokens, say) is searched: those are divergences."""
    errors: list[ImplementationError] = []
    for attempt in attempts:
        try:
            attempt()
            return
        except ImplementationError as exc:
            errors.append(exc)
        except BudgetSpent:
            return
    raise ImplementationError(f"{run.impl.ref}: cannot be called: {errors[0]}")


def verify_trainer(
    ref: str,
    options: SearchSettings,
    call_timeout: float = 30.0,
    clauses: Sequence[str] | None = None,
    fixtures: bool = True,
) -> Verification:
    """Check a trainer against the contract, every clause, whatever diverged before.

    Args:
        ref: the trainer, `run_train_bpe(input_path, vocab_size, special_tokens)`: a
            `module:function`, `path/file.py:function`, `builtin:NAME`, `peer:NAME` or an entry
            point's name; it runs in a process of its own.
        options: how long to search (examples per clause, seed, time budget), which contract
            (strict_ids), replays, fail_fast, required special tokens.
        call_timeout: seconds a call may take before it counts as a hang.
        clauses: the clauses to check (default: every one of TRAINER_CLAUSES).
        fixtures: after the generated cases, train on real text too.

    Returns:
        What was checked, and every divergence found, shrunk, replayed and diagnosed.

    Raises:
        ImplementationError: `ref` cannot be imported, or fails every call tried.

    Example:
        >>> result = verify_trainer("builtin:route_b", SearchSettings(max_examples=5), fixtures=False)
        >>> result.status, [clause.name for clause in result.clauses][:2]
        ('passed', ['tie-break', 'greedy-left-to-right'])
    """
    result = Verification(implementations={"trainer": ref})
    with _hypothesis_storage(), Isolated(ref, call_timeout, python=options.python) as implementation:
        run = _Trainer("trainer", implementation, options, result, call_timeout)
        implementation.start()  # an implementation that cannot be imported fails here, before the search

        def attempt(case: TrainCase) -> Callable[[], Any]:
            return lambda: run.train(*run.required(case))

        _smoke(run, [attempt(case) for case in _SMOKE_TRAIN])
        for name in TRAINER_CLAUSES:
            if clauses is None or name in clauses:
                run.clause(name)
        if fixtures:
            run.real_text()
    return result


# ---- the tokenizer -----------------------------------------------------------------------------


def _trained_vocab(corpus: str, specials: list[str], size: int) -> tuple[Vocab, Merges]:
    with corpus_file(corpus) as path:
        try:
            return reference_train(path, size, specials, DEFAULT_IMPL)
        except Rejected:
            vocab = {i: bytes([i]) for i in range(256)}
            vocab.update({256 + k: s.encode() for k, s in enumerate(specials)})
            return vocab, []


# Lines of the kinds real files hold: prose, indented lines (code, verse), blank lines, a line
# ending in spaces, a contraction.
_FILE_LINES = (
    "Once upon a time, there was a little fox.\n",
    '    It said: "I\'ll go to the river."\n',
    "\n",
    "def walk(steps):  \n",
    "        return steps + 1\n",
    "\n\n",
)


def file_like(length: int, rotation: int = 0) -> str:
    """`length` characters of a file made of _FILE_LINES, in order from the `rotation`-th."""
    block = "".join(_FILE_LINES[rotation:] + _FILE_LINES[:rotation])
    return (block * (length // len(block) + 1))[:length]


# encode_iterable's own explicit cases: files that cross each size real code reads or buffers at,
# with each kind of line at the crossing (a buffer cut there splits a run of newlines or spaces).
FILE_TEXTS: list[tuple[str, str]] = [
    (file_like(size + 300, rotation), str(size)) for size in CHUNK_SIZES[:2] for rotation in range(len(_FILE_LINES))
] + [(file_like(CHUNK_SIZES[2] + 300), str(CHUNK_SIZES[2]))]


@st.composite
def _long_text(draw: st.DrawFn, specials: list[str]) -> str:
    """A text that crosses a chunk size real code uses (4,096, 8,192, 65,536 characters): lines
    of a real file's kinds up to a few characters before it, generated pieces at the crossing."""
    size = draw(st.sampled_from(CHUNK_SIZES))
    before = size - draw(st.integers(0, 40))
    block = "".join(draw(st.permutations(_FILE_LINES)))
    lines = block * (size // len(block) + 2)
    # The file goes on after the crossing, so that a buffer of that size is always cut there.
    return lines[:before] + draw(strat.mixed_text(specials, max_pieces=16)) + lines[before : before + 200]


@st.composite
def _encode_case(draw: st.DrawFn, kind: str, required: Sequence[str]) -> EncodeCase:
    specials = (
        draw(strat.special_tokens(max_size=4))
        if kind != "special-tokens-longest-first"
        else draw(strat.special_tokens(max_size=4).filter(bool))
    )
    specials += [token for token in required if token not in specials]
    corpus = draw(strat.mixed_text(specials, max_pieces=30))
    chunking = None
    if kind == "special-tokens-longest-first":
        text = "".join(draw(st.lists(st.sampled_from([*specials, "a", " ", "<", "|"]), max_size=12)))
    elif kind == "encode_iterable":
        chunking = draw(st.sampled_from(["lines", "lines", *map(str, CHUNK_SIZES), "cuts"]))
        long = chunking != "cuts" and draw(st.booleans())
        text = draw(_long_text(specials)) if long else draw(strat.mixed_text(specials))
        corpus += text[-400:]  # the vocab knows the text's pieces (merges of its newlines and spaces)
    elif kind == "deterministic":
        # Runs of one letter (each pair at several places) and ties: where an order that varies
        # between runs (object ids, string hashes) decides.
        text = draw(st.one_of(strat.run_corpus(), strat.tie_corpus(), strat.mixed_text(specials)))
        corpus += text
    else:
        text = draw(strat.mixed_text(specials))
    vocab, merges = _trained_vocab(corpus, specials, draw(strat.vocab_size(specials, 60)))
    chunks = None
    if chunking == "cuts":
        cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=4)))
        chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    elif chunking is not None:
        chunks = chunked(text, chunking)
    return EncodeCase(text, specials, vocab, merges, chunks, chunking)


class _Tokenizer(_Run):
    methods: list[str] | None = None  # the optional methods the tokenizer has (from the smoke call)

    def build(self, case: EncodeCase) -> list[str]:
        extras: list[str] = self.call("tokenizer", case.vocab, case.merges, case.specials)
        self.methods = extras
        return extras

    def check(self, clause: str, case: EncodeCase, method: str = "encode") -> Divergence | None:
        reference = Tokenizer(case.vocab, case.merges, case.specials)
        expected = reference.encode(case.text)
        actual: Any
        decoded: str | None = None
        try:
            extras = self.build(case)
            if method != "encode" and method not in extras:
                return None  # an optional method the implementation does not have
            if method == "decode":
                answer = self.call("decode", expected)
                if answer == case.text:
                    return None
                decoded = answer if isinstance(answer, str) else repr(answer)
            elif method == "encode_iterable":
                actual = self.call("encode_iterable", case.chunks)
            else:
                actual = self.call("encode", case.text)
        except ImplementationError as exc:
            actual = exc
        if decoded is not None:
            actual, detail = expected, f"decode of the expected ids gave {decoded!r}, not the text"
        elif actual == expected:
            return None
        else:
            detail = encode_difference(case.vocab, expected, actual)
        inputs: dict[str, Any] = {"text": case.text, "special_tokens": case.specials}
        if method == "encode_iterable":
            inputs["chunks"] = case.chunks
            if case.chunking is not None:
                inputs["chunking"] = case.chunking
        return Divergence(
            clause,
            "encode",
            inputs,
            expected,
            actual,
            detail,
            case.vocab,
            case.merges,
            target=self.target,
            decoded=decoded,
            recheck=lambda: self.check(clause, case, method),
        )

    def check_twice(self, clause: str, case: EncodeCase) -> Divergence | None:
        """encode on one input in the process that made the calls before, in a fresh one, and again
        in that one: the same ids each time."""
        try:
            self.build(case)
            first = self.call("encode", case.text)
        except ImplementationError:
            return None
        second: Any = None
        for run in ("a fresh process", "the same process again"):
            try:
                if run == "a fresh process":
                    self.fresh()
                    self.build(case)
                else:
                    self.shake(len(case.text))
                second = self.call("encode", case.text)
            except ImplementationError as exc:
                second = exc
            if second != first:
                break
        else:
            return None
        detail = f"a run in {run} differs from the first: " + encode_difference(case.vocab, first, second).replace(
            "expected", "first run"
        ).replace("got", "this run")
        return Divergence(
            clause,
            "encode",
            {"text": case.text, "special_tokens": case.specials},
            first,
            second,
            detail,
            case.vocab,
            case.merges,
            target=self.target,
            recheck=lambda: self.check_twice(clause, case),
        )

    def diagnose(self, divergence: Divergence) -> Diagnosis | None:
        assert divergence.vocab is not None and divergence.merges is not None
        if divergence.clause == "deterministic":
            return None
        if divergence.decoded is not None:
            return diagnose.diagnose_decode(
                divergence.vocab, divergence.expected, divergence.inputs["text"], divergence.decoded
            )

        def encode(vocab: Vocab, merges: Merges, specials: Sequence[str], text: str) -> list[int]:
            try:
                self.call("tokenizer", vocab, merges, list(specials))
                ids: list[int] = self.call("encode", text)
            except ImplementationError as exc:
                raise Failed(str(exc)) from None
            return ids

        def encode_iterable(vocab: Vocab, merges: Merges, specials: Sequence[str], chunks: Sequence[str]) -> list[int]:
            try:
                self.call("tokenizer", vocab, merges, list(specials))
                ids: list[int] = self.call("encode_iterable", list(chunks))
            except ImplementationError as exc:
                raise Failed(str(exc)) from None
            return ids

        actual = divergence.actual
        return diagnose.diagnose_encode(
            divergence.inputs["text"],
            divergence.inputs["special_tokens"],
            divergence.vocab,
            divergence.merges,
            divergence.expected,
            Failed(str(actual)) if isinstance(actual, ImplementationError) else actual,
            encode,
            encode_iterable,
            divergence.inputs.get("chunks"),
        )

    def explicit_cases(self, name: str) -> list[EncodeCase]:
        """The boundary module's (text, special tokens) for this clause, each over a vocab trained
        on its text; encode_iterable's given as a file's lines and in fixed-size chunks."""
        cases = []
        if name == "encode_iterable":
            required = list(self.options.require_special)
            for text, size in FILE_TEXTS:
                vocab, merges = _trained_vocab(text[:3000], required, 256 + len(required) + 60)
                for chunking in ("lines", size):
                    cases.append(EncodeCase(text, required, vocab, merges, chunked(text, chunking), chunking))
        for text, specials in boundary.encode_cases(name):
            specials = [*specials, *(t for t in self.options.require_special if t not in specials)]
            vocab, merges = _trained_vocab(text[-20_000:], specials, 256 + len(specials) + 60)
            if name == "encode_iterable":
                for chunking in ("lines", *map(str, CHUNK_SIZES)):
                    cases.append(EncodeCase(text, specials, vocab, merges, chunked(text, chunking), chunking))
            else:
                cases.append(EncodeCase(text, specials, vocab, merges))
        return cases

    def clause(self, name: str) -> None:
        clause = ClauseResult(name, TOKENIZER_CLAUSES[name], target=self.target)
        if name in ("decode", "encode_iterable") and self.methods is not None and name not in self.methods:
            clause.skipped = f"the tokenizer has no {name}"
            self.result.clauses.append(clause)
            return
        if not self.begin(clause):
            return
        method = name if name in ("decode", "encode_iterable") else "encode"
        twice = name == "deterministic"

        def check(case: EncodeCase) -> Divergence | None:
            return self.check_twice(name, case) if twice else self.check(name, case, method)

        clause.cases, found = self.explicit(self.explicit_cases(name), check)
        if found is not None and len(found.inputs["text"]) > LONG:
            found = self.shorter_end(found, check)
        elif found is not None:
            case = _case_of(found)

            def shorter(text: str) -> Divergence | None:
                chunks = chunked(text, case.chunking) if case.chunking is not None else None
                return self.quiet(check, dataclasses.replace(case, text=text, chunks=chunks))

            found = _shrink_text(case.text, shorter, self.left_for_shrinking()) or found
        else:
            examples = min(self.options.max_examples, DETERMINISTIC_EXAMPLES) if twice else self.options.max_examples
            searched, found = self.search(_encode_case(name, self.options.require_special), check, examples)
            clause.cases += searched
            if found is not None and len(found.inputs["text"]) > LONG:
                found = self.shorter_end(found, check)
        if found is None:
            self.nothing_found(clause)
            return
        self.settle(clause, found, self.diagnose)

    def shorter_end(self, divergence: Divergence, check: Callable[[EncodeCase], Divergence | None]) -> Divergence:
        """A long text cut after its first difference: the shortest prefix that still diverges, by
        bisection (a long text's divergence can need its length, a buffer's size, before it: only
        its end is cut)."""
        case = _case_of(divergence)
        if case.chunking == "cuts" or divergence.vocab is None or not isinstance(divergence.actual, list):
            return divergence

        def at_text(text: str) -> Divergence | None:
            chunks = chunked(text, case.chunking) if case.chunking is not None else None
            return self.quiet(check, dataclasses.replace(case, text=text, chunks=chunks))

        def at(length: int) -> Divergence | None:
            return at_text(case.text[:length])

        _, start = _first_difference(divergence.vocab, divergence.expected, divergence.actual)
        low, high = start, len(case.text)  # diverges at `high`; at `low`, not known
        best = divergence
        while low < high and not self.spent():
            middle = (low + high) // 2
            found = at(middle)
            if found is not None:
                best, high = found, middle
            else:
                low = middle + 1
        if high <= 2000:
            # Short enough now for delta debugging, which a divergence that needs no length survives.
            text = case.text[:high]
            best = _shrink_text(text, lambda text: at_text(text), min(10.0, self.left_for_shrinking())) or best
        return best


def _case_of(divergence: Divergence) -> EncodeCase:
    assert divergence.vocab is not None and divergence.merges is not None
    return EncodeCase(
        divergence.inputs["text"],
        divergence.inputs["special_tokens"],
        divergence.vocab,
        divergence.merges,
        divergence.inputs.get("chunks"),
        divergence.inputs.get("chunking"),
    )


def _tokenizer_smoke(run: _Tokenizer) -> None:
    required = list(run.options.require_special)
    attempts = []
    for specials, text in (([], "ab"), (["<|endoftext|>"], "ab<|endoftext|>")):
        specials = [*specials, *(t for t in required if t not in specials)]
        vocab = {i: bytes([i]) for i in range(256)} | {256 + k: s.encode() for k, s in enumerate(specials)}
        case = EncodeCase(text, specials, vocab, [])

        def attempt(case: EncodeCase = case) -> None:
            run.build(case)
            run.call("encode", case.text)

        attempts.append(attempt)
    _smoke(run, attempts)


def verify_tokenizer(
    ref: str, options: SearchSettings, call_timeout: float = 30.0, clauses: Sequence[str] | None = None
) -> Verification:
    """Check a tokenizer against the contract, every clause, whatever diverged before.

    Args:
        ref: the factory, `get_tokenizer(vocab, merges, special_tokens=None)`, referred to as in
            `verify_trainer`; `decode` and `encode_iterable` are checked where its object has them.
        options: how long to search, replays, fail_fast, required special tokens.
        call_timeout: seconds a call may take before it counts as a hang.
        clauses: the clauses to check (default: every one of TOKENIZER_CLAUSES).

    Returns:
        What was checked, and every divergence found, shrunk, replayed and diagnosed.

    Example:
        >>> verify_tokenizer("builtin:tokenizer", SearchSettings(max_examples=5)).status
        'passed'
    """
    result = Verification(implementations={"tokenizer": ref})
    with _hypothesis_storage(), Isolated(ref, call_timeout, python=options.python) as implementation:
        run = _Tokenizer("tokenizer", implementation, options, result, call_timeout)
        implementation.start()
        _tokenizer_smoke(run)
        for name in TOKENIZER_CLAUSES:
            if clauses is None or name in clauses:
                run.clause(name)
    return result


# ---- an encoder over a saved vocab -----------------------------------------------------------------


class _Encoder(_Run):
    def __init__(self, *args: Any, reference: Tokenizer) -> None:
        super().__init__(*args)
        self.reference = reference
        self.vocab = dict(reference.vocab)
        self.merges = list(reference.merges)
        self.specials = list(reference.special_tokens)

    def check(self, text: str, clause: str = "encode") -> Divergence | None:
        expected = self.reference.encode(text)
        try:
            actual: Any = self.call("encode", text)
        except ImplementationError as exc:
            actual = exc
        if actual == expected:
            return None
        return Divergence(
            clause,
            "encode",
            {"text": text, "special_tokens": self.specials},
            expected,
            actual,
            encode_difference(self.vocab, expected, actual),
            self.vocab,
            self.merges,
            target=self.target,
            recheck=lambda: self.check(text, clause),
        )

    def diagnose(self, divergence: Divergence) -> Diagnosis | None:
        actual = divergence.actual
        return diagnose.diagnose_encode(
            divergence.inputs["text"],
            self.specials,
            self.vocab,
            self.merges,
            divergence.expected,
            Failed(str(actual)) if isinstance(actual, ImplementationError) else actual,
        )

    def encode_clause(self) -> None:
        clause = ClauseResult("encode", TOKENIZER_CLAUSES["encode"], target=self.target)
        if not self.begin(clause):
            return
        texts = st.one_of(
            strat.mixed_text(self.specials, max_pieces=30),
            st.text(st.characters(exclude_categories=["Cs"]), max_size=40),
        )
        clause.cases, found = self.explicit([text for text, _ in boundary.encode_cases("encode")], self.check)
        if found is not None:
            found = _shrink_text(found.inputs["text"], lambda text: self.quiet(self.check, text)) or found
        else:
            searched, found = self.search(texts, self.check, self.options.max_examples)
            clause.cases += searched
        if found is None:
            self.nothing_found(clause)
            return
        self.settle(clause, found, self.diagnose)

    def real_text(self) -> None:
        for name, text in self.options.real_texts(["tinystories_sample.txt", "german.txt", "kjv.txt"]):
            title = f"real text: {name}"
            if text is None:
                why = missing_text(name)
                self.result.real_text_skipped.append(f"real text: skipped: {why}")
                self.result.clauses.append(
                    ClauseResult(
                        title,
                        "encode gives the reference's ids on real text",
                        real_text=True,
                        target=self.target,
                        skipped=why,
                    )
                )
                continue
            clause = ClauseResult(
                title, "encode gives the reference's ids on real text", real_text=True, target=self.target
            )
            if not self.begin(clause):
                continue
            lines = _read_exactly(text.path).splitlines(keepends=True)[:2000]
            self.result.corpora.append(f"{text.describe()} (first {len(lines)} lines)")
            for line in lines:
                if self.spent():
                    break
                clause.cases += 1
                found = self.quiet(self.check, line, title)
                if found is not None:
                    found = _shrink_text(line, lambda t: self.quiet(self.check, t, title)) or found
                    self.settle(clause, found, self.diagnose)
                    break


def verify_encoder(
    ref: str,
    vocab_path: str | os.PathLike[str],
    options: SearchSettings,
    call_timeout: float = 30.0,
    clauses: Sequence[str] | None = None,
    fixtures: bool = True,
) -> Verification:
    """Check an encoder over a saved tokenizer's vocab: its ids must be the Tokenizer's.

    Args:
        ref: `peer:NAME` (or a peer's name), or a factory taking (vocab, merges, special_tokens).
        vocab_path: a tokenizer saved in any format `Tokenizer.load` reads.
        options: how long to search.
        call_timeout: seconds a call may take before it counts as a hang.
        clauses: ["encode"] or [] (default: the one clause, "encode").
        fixtures: after the generated cases, encode real text too.

    Returns:
        What was checked, and every divergence found, shrunk, replayed and diagnosed.
    """
    reference = Tokenizer.load(vocab_path)
    result = Verification(implementations={"encoder": ref, "vocab": str(vocab_path)})
    with _hypothesis_storage(), Isolated(ref, call_timeout, python=options.python) as implementation:
        run = _Encoder("encoder", implementation, options, result, call_timeout, reference=reference)
        implementation.start()
        try:  # built once (a large vocab takes a while), and again after a crash
            implementation.setup("tokenizer", run.vocab, run.merges, run.specials)
            implementation.call("encode", "a")
        except ImplementationError as exc:
            raise ImplementationError(f"{ref}: cannot be called: {exc}") from None
        if clauses is None or "encode" in clauses:
            run.encode_clause()
        if fixtures:
            run.real_text()
    return result
