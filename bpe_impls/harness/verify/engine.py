"""The search: for each clause of the contract, Hypothesis looks for an input on which the
implementation and this project's reference disagree, and shrinks the first one it finds.

A clause is a strategy aimed at one promise of the contract plus the comparison every clause
shares: a trainer's whole (vocab, merges) against the `naive` trainer's (the executable spec), a
tokenizer's ids against this project's Tokenizer over the same vocab. Hypothesis shrinks the
failing input (the corpus or text to a few bytes, the vocab size towards 256 + the special
tokens); then the vocab size is lowered further while the divergence stays. After the generated
cases comes real text, shrunk line by line if it diverges: the shared fixtures where present, else
the samples bundled with the package (harness.fixtures.real_text); a run that has no real text
says so ("real text: skipped: <why>"), it is never silently empty.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException

from ...base.errors import BpeError
from ...corpus import count_pretokens
from ...encoding import Tokenizer
from ...trainers import DEFAULT_IMPL, train_bpe
from ..fixtures import missing_text, real_text
from . import strategies as strat
from .clauses import TOKENIZER_CLAUSES, TRAINER_CLAUSES
from .refs import ImplementationError, Isolated

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]


# ---- what a divergence is --------------------------------------------------------------------


@dataclass
class Divergence:
    """One input on which the implementation and the reference disagree."""

    clause: str
    kind: str  # "train" | "encode"
    inputs: dict[str, Any]  # train: corpus, vocab_size, special_tokens; encode: text, special_tokens
    expected: Any
    actual: Any  # the implementation's output, or the ImplementationError it ended in
    detail: str  # the first difference, in words
    vocab: Vocab | None = None  # encode: the vocab and merges it was found with
    merges: Merges | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"kind": self.kind, "clause": self.clause, **self.inputs, "first_difference": self.detail}
        if isinstance(self.actual, ImplementationError):
            out["actual_error"] = str(self.actual)
        if self.kind == "encode":
            assert self.vocab is not None and self.merges is not None
            out["expected_ids"] = self.expected
            out["actual_ids"] = None if isinstance(self.actual, Exception) else self.actual
            out["vocab_hex"] = {str(i): token.hex() for i, token in sorted(self.vocab.items())}
            out["merges_hex"] = [[a.hex(), b.hex()] for a, b in self.merges]
        else:
            out["expected_merges_hex"] = [[a.hex(), b.hex()] for a, b in self.expected[1]]
            if not isinstance(self.actual, Exception):
                out["actual_merges_hex"] = [[a.hex(), b.hex()] for a, b in self.actual[1]]
        return out

    def describe(self) -> str:
        lines = [f"DIVERGED in clause {self.clause!r}"]
        for key, value in self.inputs.items():
            size = f" ({len(value.encode('utf-8'))} bytes)" if isinstance(value, str) else ""
            lines.append(f"  {key}{size}: {value!r}")
        lines.append(f"  first difference: {self.detail}")
        if self.kind == "encode":
            lines.append(f"  expected ids: {self.expected}")
            lines.append(f"  actual ids:   {self.actual}")
        return "\n".join(lines)


@dataclass
class ClauseResult:
    name: str
    promise: str
    cases: int = 0
    divergence: Divergence | None = None
    real_text: bool = False  # cases from the fixtures, not generated


@dataclass
class Verification:
    """What `verify` checked and what it found."""

    implementations: dict[str, str] = field(default_factory=dict)  # role -> reference
    clauses: list[ClauseResult] = field(default_factory=list)
    corpora: list[str] = field(default_factory=list)  # the real texts checked, and whose they are
    real_text_skipped: list[str] = field(default_factory=list)  # "real text: skipped: <why>"

    @property
    def divergence(self) -> Divergence | None:
        return next((c.divergence for c in self.clauses if c.divergence is not None), None)

    @property
    def status(self) -> str:
        return "diverged" if self.divergence else "passed"

    def to_json(self) -> dict[str, Any]:
        divergence = self.divergence
        return {
            "status": self.status,
            "checked": {
                "implementations": self.implementations,
                "generated_cases": sum(c.cases for c in self.clauses if not c.real_text),
                "real_text_cases": sum(c.cases for c in self.clauses if c.real_text),
                "clauses": [
                    {"name": c.name, "promise": c.promise, "cases": c.cases, "passed": c.divergence is None}
                    for c in self.clauses
                ],
                "real_corpora": self.corpora,
                "real_text_skipped": self.real_text_skipped,
            },
            "counterexample": divergence.to_json() if divergence else None,
        }


def verification_summary(result: Verification) -> list[dict[str, Any]]:
    """One row per clause (for `bpe report`): name, cases, verdict and the counterexample's inputs."""
    return [
        {
            "clause": c.name,
            "cases": c.cases,
            "passed": c.divergence is None,
            "counterexample": None if c.divergence is None else c.divergence.inputs,
        }
        for c in result.clauses
    ]


# ---- the first difference ----------------------------------------------------------------------


def _pair_counts(word_counts: Mapping[bytes, int], merges: Merges) -> Counter[tuple[bytes, bytes]]:
    """The pair counts after applying `merges` to the words (greedy left to right, as the contract)."""
    words = {tuple(bytes([b]) for b in word): count for word, count in word_counts.items()}
    for left, right in merges:
        merged = left + right
        new_words: dict[tuple[bytes, ...], int] = {}
        for word, count in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == left and word[i + 1] == right:
                    out.append(merged)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + count
        words = new_words
    pairs: Counter[tuple[bytes, bytes]] = Counter()
    for word, count in words.items():
        for pair in zip(word, word[1:]):
            pairs[pair] += count
    return pairs


def train_difference(path: str, specials: Sequence[str], expected: tuple[Vocab, Merges], actual: Any) -> str:
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
    for token_id in sorted(set(want_vocab) | set(vocab)):
        if want_vocab.get(token_id) != vocab.get(token_id):
            return f"vocab id {token_id}: expected {want_vocab.get(token_id)!r}, got {vocab.get(token_id)!r}"
    return "none"  # (not reached: the outputs differ)


def encode_difference(vocab: Vocab, expected: list[int], actual: Any) -> str:
    if isinstance(actual, ImplementationError):
        return f"the implementation {actual}"
    for position, (want, got) in enumerate(zip(expected, actual)):
        if want != got:
            return (
                f"token {position}: expected id {want} ({vocab.get(want)!r}), "
                f"got id {got} ({vocab.get(got, 'not in the vocab')!r})"
            )
    return f"expected {len(expected)} ids, got {len(actual)}"


# ---- the checks ------------------------------------------------------------------------------


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


def reference_train(path: str, vocab_size: int, specials: Sequence[str], impl: str = "naive") -> tuple[Vocab, Merges]:
    try:
        return train_bpe(path, vocab_size, list(specials), impl=impl, num_workers=1, progress=False)
    except BpeError as exc:
        raise Rejected(str(exc)) from None


def check_train(
    trainer: Isolated, clause: str, corpus: str, specials: Sequence[str], vocab_size: int, reference: str = "naive"
) -> Divergence | None:
    with corpus_file(corpus) as path:
        expected = reference_train(path, vocab_size, specials, reference)
        try:
            actual: Any = trainer.call("train", path, vocab_size, list(specials))
        except ImplementationError as exc:
            actual = exc
        if not isinstance(actual, Exception) and (actual[0] == expected[0] and actual[1] == expected[1]):
            return None
        detail = train_difference(path, specials, expected, actual)
    inputs = {"corpus": corpus, "vocab_size": vocab_size, "special_tokens": list(specials)}
    return Divergence(clause, "train", inputs, expected, actual, detail)


@dataclass
class EncodeCase:
    text: str
    specials: list[str]
    vocab: Vocab
    merges: Merges
    chunks: list[str] | None = None  # encode_iterable's pieces of the text


def check_encode(tokenizer: Isolated, clause: str, case: EncodeCase, method: str = "encode") -> Divergence | None:
    reference = Tokenizer(case.vocab, case.merges, case.specials)
    expected = reference.encode(case.text)
    actual: Any
    try:
        extras = tokenizer.call("tokenizer", case.vocab, case.merges, case.specials)
        if method != "encode" and method not in extras:
            return None  # an optional method the implementation does not have
        if method == "decode":
            decoded = tokenizer.call("decode", expected)
            if decoded == case.text:
                return None
            detail = f"decode of the expected ids gave {decoded!r}, not the text"
            return Divergence(
                clause,
                "encode",
                {"text": case.text, "special_tokens": case.specials},
                expected,
                expected,
                detail,
                case.vocab,
                case.merges,
            )
        if method == "encode_iterable":
            actual = tokenizer.call("encode_iterable", case.chunks)
        else:
            actual = tokenizer.call("encode", case.text)
    except ImplementationError as exc:
        actual = exc
    if actual == expected:
        return None
    inputs: dict[str, Any] = {"text": case.text, "special_tokens": case.specials}
    if method == "encode_iterable":
        inputs["chunks"] = case.chunks
    return Divergence(
        clause,
        "encode",
        inputs,
        expected,
        actual,
        encode_difference(case.vocab, expected, actual),
        case.vocab,
        case.merges,
    )


# ---- the clauses -------------------------------------------------------------------------------


@st.composite
def _train_case(draw: st.DrawFn, kind: str) -> tuple[str, list[str], int]:
    specials: list[str]
    if kind == "tie-break":
        corpus, specials = draw(strat.tie_corpus()), []
    elif kind == "greedy-left-to-right":
        corpus, specials = draw(strat.run_corpus()), []
    elif kind == "special-tokens":
        corpus, specials = draw(strat.specials_corpus())
    else:
        specials = draw(strat.special_tokens())
        corpus = draw(strat.mixed_text(specials))
    most = 400 if kind == "stops-when-no-pair-is-left" else 40
    return corpus, specials, draw(strat.vocab_size(specials, most))


@st.composite
def _encode_case(draw: st.DrawFn, kind: str) -> EncodeCase:
    specials = (
        draw(strat.special_tokens(max_size=4))
        if kind != "special-tokens-longest-first"
        else draw(strat.special_tokens(max_size=4).filter(bool))
    )
    corpus = draw(strat.mixed_text(specials, max_pieces=30))
    size = draw(strat.vocab_size(specials, 60))
    with corpus_file(corpus) as path:
        try:
            vocab, merges = reference_train(path, size, specials, DEFAULT_IMPL)
        except Rejected:
            vocab = {i: bytes([i]) for i in range(256)}
            vocab.update({256 + k: s.encode() for k, s in enumerate(specials)})
            merges = []
    if kind == "special-tokens-longest-first":
        text = "".join(draw(st.lists(st.sampled_from([*specials, "a", " ", "<", "|"]), max_size=12)))
    else:
        text = draw(strat.mixed_text(specials))
    chunks = None
    if kind == "encode_iterable":
        cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=4)))
        chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    return EncodeCase(text, specials, vocab, merges, chunks)


@dataclass
class SearchSettings:
    max_examples: int = 100
    seed: int | None = 0
    time_budget: float | None = None  # seconds for the whole run
    progress: Callable[[str], None] | None = None


def _search(
    strategy: st.SearchStrategy,
    check: Callable[[Any], Divergence | None],
    options: SearchSettings,
    deadline: float | None,
) -> tuple[int, Divergence | None]:
    """Run the property; (cases checked, the last divergence Hypothesis saw: its shrunk one)."""
    found: list[Divergence] = []
    cases = [0]

    @settings(
        max_examples=options.max_examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(strategy)
    def prop(example: Any) -> None:
        if deadline is not None and time.monotonic() > deadline and not found:
            return
        try:
            divergence = check(example)
        except Rejected:
            return
        cases[0] += 1
        if divergence is not None:
            found.append(divergence)
            raise AssertionError(divergence.detail)

    if options.seed is not None:
        prop = hypothesis_seed(options.seed)(prop)
    try:
        prop()
    except (AssertionError, HypothesisException):
        pass
    return cases[0], (found[-1] if found else None)


def _smaller_vocab(divergence: Divergence, check: Callable[[int], Divergence | None]) -> Divergence:
    """Lower the vocab size while the divergence stays: the floor (256 + the special tokens + 1) if
    it still diverges, else the smallest of the sizes halfway down that does, then one at a time."""
    floor = 257 + len(divergence.inputs["special_tokens"])
    size = divergence.inputs["vocab_size"]
    step = size - floor
    while step > 0:
        smaller = check(size - step)
        if smaller is not None:
            divergence, size = smaller, size - step
            step = min(step, size - floor)
        else:
            step //= 2
    return divergence


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


_SMOKE_CORPUS = "ab ab\n"


def _smoke(implementation: Isolated, *requests: tuple[Any, ...]) -> None:
    """The simplest call of its kind: an implementation that fails it cannot be called at all (a
    wrong signature, a crash on any input) and is reported as such, not searched."""
    try:
        if requests[0][0] == "train":
            with corpus_file(requests[0][1]) as path:
                implementation.call("train", path, *requests[0][2:])
        else:
            for request in requests:
                implementation.call(*request)
    except ImplementationError as exc:
        raise ImplementationError(f"{implementation.ref}: cannot be called: {exc}") from None


def verify_trainer(
    ref: str,
    options: SearchSettings,
    call_timeout: float = 30.0,
    clauses: Sequence[str] | None = None,
    fixtures: bool = True,
) -> Verification:
    """Check a trainer against the contract, clause by clause; stop at the first divergence.

    Args:
        ref: the trainer, `run_train_bpe(input_path, vocab_size, special_tokens)`: a
            `module:function`, `path/file.py:function`, `builtin:NAME`, `peer:NAME` or an entry
            point's name; it runs in a process of its own.
        options: how long to search (examples per clause, seed, time budget).
        call_timeout: seconds a call may take before it counts as a hang.
        clauses: the clauses to check (default: every one of TRAINER_CLAUSES).
        fixtures: after the generated cases, train on real text too.

    Returns:
        What was checked, and the first divergence, shrunk, if one was found.

    Raises:
        ImplementationError: `ref` cannot be imported or called at all.

    Example:
        >>> result = verify_trainer("builtin:route_b", SearchSettings(max_examples=5), fixtures=False)
        >>> result.status, [clause.name for clause in result.clauses][:2]
        ('passed', ['tie-break', 'greedy-left-to-right'])
    """
    result = Verification(implementations={"trainer": ref})
    deadline = None if options.time_budget is None else time.monotonic() + options.time_budget
    with Isolated(ref, call_timeout) as trainer:
        trainer.start()  # an implementation that cannot be imported fails here, before the search
        _smoke(trainer, ("train", _SMOKE_CORPUS, 257, []))
        for name in TRAINER_CLAUSES if clauses is None else clauses:
            if options.progress:
                options.progress(f"trainer: {name}")
            clause = ClauseResult(name, TRAINER_CLAUSES[name])
            result.clauses.append(clause)

            def check(case: tuple[str, list[str], int], name: str = name) -> Divergence | None:
                return check_train(trainer, name, *case)

            clause.cases, clause.divergence = _search(_train_case(name), check, options, deadline)
            if clause.divergence is not None:
                corpus, specials = clause.divergence.inputs["corpus"], clause.divergence.inputs["special_tokens"]
                clause.divergence = _smaller_vocab(
                    clause.divergence, lambda size: _quiet(check_train, trainer, name, corpus, specials, size)
                )
                return result
        if fixtures:
            _trainer_fixtures(trainer, result)
    return result


def _quiet(check: Callable[..., Divergence | None], *args: Any) -> Divergence | None:
    try:
        return check(*args)
    except Rejected:
        return None


def _skipped(result: Verification, why: str) -> None:
    result.real_text_skipped.append(f"real text: skipped: {why}")


def _trainer_fixtures(trainer: Isolated, result: Verification) -> None:
    specials = ["<|endoftext|>"]
    for name, vocab_size in (("tinystories_sample.txt", 500),):
        text = real_text(name)
        if text is None:
            _skipped(result, missing_text(name))
            continue
        corpus = text.path.read_text(encoding="utf-8")
        result.corpora.append(f"{text.describe()} at vocab {vocab_size}")
        clause = ClauseResult(f"real text: {name}", "the whole contract on real text", real_text=True)
        result.clauses.append(clause)
        clause.cases = 1

        def diverges(text: str, size: int = vocab_size) -> Divergence | None:
            return _quiet(check_train, trainer, clause.name, text, specials, size, DEFAULT_IMPL)

        found = diverges(corpus)
        if found is not None:
            # The vocab first (each try trains on the whole text once), then the text at that size.
            found = _smaller_vocab(found, lambda size: diverges(corpus, size))
            size = found.inputs["vocab_size"]
            clause.divergence = _shrink_text(corpus, lambda text: diverges(text, size)) or found
            return


def verify_tokenizer(
    ref: str, options: SearchSettings, call_timeout: float = 30.0, clauses: Sequence[str] | None = None
) -> Verification:
    """Check a tokenizer against the contract, clause by clause; stop at the first divergence.

    Args:
        ref: the factory, `get_tokenizer(vocab, merges, special_tokens=None)`, referred to as in
            `verify_trainer`; `decode` and `encode_iterable` are checked where its object has them.
        options: how long to search.
        call_timeout: seconds a call may take before it counts as a hang.
        clauses: the clauses to check (default: every one of TOKENIZER_CLAUSES).

    Returns:
        What was checked, and the first divergence, shrunk, if one was found.

    Example:
        >>> verify_tokenizer("builtin:tokenizer", SearchSettings(max_examples=5)).status
        'passed'
    """
    result = Verification(implementations={"tokenizer": ref})
    deadline = None if options.time_budget is None else time.monotonic() + options.time_budget
    with Isolated(ref, call_timeout) as tokenizer:
        tokenizer.start()
        _smoke(tokenizer, ("tokenizer", {i: bytes([i]) for i in range(256)}, [], []), ("encode", "ab"))
        for name in TOKENIZER_CLAUSES if clauses is None else clauses:
            if options.progress:
                options.progress(f"tokenizer: {name}")
            clause = ClauseResult(name, TOKENIZER_CLAUSES[name])
            result.clauses.append(clause)
            method = name if name in ("decode", "encode_iterable") else "encode"

            def check(case: EncodeCase, name: str = name, method: str = method) -> Divergence | None:
                return check_encode(tokenizer, name, case, method)

            clause.cases, clause.divergence = _search(_encode_case(name), check, options, deadline)
            if clause.divergence is not None:
                return result
    return result


def verify_encoder(ref: str, vocab_path: str, options: SearchSettings, call_timeout: float = 30.0) -> Verification:
    """Check an encoder over a saved tokenizer's vocab: its ids must be the Tokenizer's.

    Args:
        ref: `peer:NAME` (or a peer's name), or a factory taking (vocab, merges, special_tokens).
        vocab_path: a tokenizer saved in any format `Tokenizer.load` reads.
        options: how long to search.
        call_timeout: seconds a call may take before it counts as a hang.

    Returns:
        What was checked, and the first divergence, shrunk, if one was found.
    """
    reference = Tokenizer.load(vocab_path)
    vocab, merges, specials = dict(reference.vocab), reference.merges, list(reference.special_tokens)
    result = Verification(implementations={"encoder": ref, "vocab": str(vocab_path)})
    deadline = None if options.time_budget is None else time.monotonic() + options.time_budget
    texts = st.one_of(
        strat.mixed_text(specials, max_pieces=30), st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
    )
    with Isolated(ref, call_timeout) as encoder:
        encoder.start()
        try:  # built once (a large vocab takes a while), and again after a crash
            encoder.setup("tokenizer", vocab, merges, specials)
            encoder.call("encode", "a")
        except ImplementationError as exc:
            raise ImplementationError(f"{ref}: cannot be called: {exc}") from None
        if options.progress:
            options.progress("encoder: encode")
        clause = ClauseResult("encode", TOKENIZER_CLAUSES["encode"])
        result.clauses.append(clause)

        def check(text: str) -> Divergence | None:
            expected = reference.encode(text)
            try:
                actual: Any = encoder.call("encode", text)
            except ImplementationError as exc:
                actual = exc
            if actual == expected:
                return None
            return Divergence(
                "encode",
                "encode",
                {"text": text, "special_tokens": specials},
                expected,
                actual,
                encode_difference(vocab, expected, actual),
                vocab,
                merges,
            )

        clause.cases, clause.divergence = _search(texts, check, options, deadline)
        if clause.divergence is None:
            _encoder_fixtures(check, result)
    return result


def _encoder_fixtures(check: Callable[[str], Divergence | None], result: Verification) -> None:
    for name in ("tinystories_sample.txt", "german.txt", "kjv.txt"):
        text = real_text(name)
        if text is None:
            _skipped(result, missing_text(name))
            continue
        lines = text.path.read_text(encoding="utf-8").splitlines(keepends=True)[:2000]
        result.corpora.append(f"{text.describe()} (first {len(lines)} lines)")
        clause = ClauseResult(f"real text: {name}", "encode gives the reference's ids on real text", real_text=True)
        result.clauses.append(clause)
        for line in lines:
            clause.cases += 1
            found = check(line)
            if found is not None:
                clause.divergence = _shrink_text(line, check) or found
                return
