"""`bpe scaling`: how time and memory grow with the corpus, the vocab, the text and the cache.

Studies (each point best of up to 3 when it is fast):
  * corpus: every registered trainer's merge phase (from the same word counts, in a fresh child
    process; seconds and peak memory above the child's baseline) and end to end (`builtin:NAME`;
    seconds of the training call and peak RSS of the worker's process tree), on growing prefixes of
    the generated corpus (1 ... 32 MB) and of each real fixture (kjv.txt: 1/16 ... all of it), at a
    fixed vocab. With peers, HuggingFace tokenizers, rustbpe and gigatoken end to end too
    (`peer:NAME`: their library's own call timed).
  * vocab: the same on one corpus while the vocab grows (1k ... 32k); x is the number of merges.
  * encode text: every encoder's seconds to encode growing prefixes of the text (fresh cache).
  * encode cache: every encoder's MB/s on one text as its pre-token cache grows (0 = no cache).

Every end-to-end and encode point, ours, the peers' and anyone's (`Targets`: references as `bpe
verify` takes them), is measured one way: through subjects.py, in an isolated worker of its own
(ours as `builtin:NAME` and `builtin:tokenizer:ENCODER`, the peers as `peer:NAME`). A crash, hang
(a call over the call timeout is killed) or exception ends that curve with the reason, not the
run. The curves of the implementations under test also get a sentence saying what their slope
means (`describe`). Without the builtins, only their curves are measured, beside one of ours
(native) for scale.

Each curve's log-log slope is fitted by least squares with a 95% confidence interval (Student's t
from scipy when it is installed, else the normal approximation, which is too narrow for few
points: the table says which), and set beside the complexity the README states. The Python
trainers that `trainers.instrumented` counts (route_a, route_b, bucket) also report per-merge
statistics (words touched, heap pushes, stale entries) from a separate, untimed instrumented run.

A point predicted to take more than the budget (from the curve's previous points, or for naive
from its measured cost per byte and merge) is skipped with every larger one, and the table says so.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..base.atomic import atomic_write
from ..base.checks import resolve_workers
from ..base.progress import progress_bar
from ..corpus import count_pretokens
from ..encoding import DEFAULT_ENCODER, ENCODERS
from ..trainers import DEFAULT_IMPL, IMPLEMENTATIONS, instrumented, train_bpe
from . import peers as peer_adapters
from . import subjects
from .compare import NAIVE_SECONDS_PER_BYTE_MERGE
from .fixtures import missing_text, real_text
from .generators.tinystories import SEPARATOR, default_corpus
from .machine import describe_machine
from .measure import Measured, measure_in_child
from .verify.refs import ImplementationNotLoaded, Isolated

SPECIALS = [SEPARATOR]
ENCODE_PEERS = ("tiktoken", "huggingface")  # the peers' encoders drawn beside ours (peers.PEER_ENCODERS)
REPEAT_BELOW = 0.5  # a measurement faster than this many seconds is repeated (best of Sizes.repeats): noise
# A call of an implementation under test is killed after this many budgets (at least the minimum):
# a point predicted within the budget that runs far over it is a hang, not a wait of hours.
CALL_TIMEOUT_BUDGETS, MIN_CALL_TIMEOUT = 4.0, 30.0
STOPPED = "stopped at"  # how a curve's note on the error that ended it begins


@dataclass(frozen=True)
class Sizes:
    """What one run measures. DEFAULT takes about 5 minutes on 2 idle cores (8 on a busy machine);
    QUICK, a smoke run of the pipeline whose fits have too few points to mean anything, under a minute. The corpus studies use a small vocab (320: 63 merges) so that naive,
    whose merge phase is O(merges x corpus), still gets several sizes within the budget."""

    generated_mb: tuple[float, ...]
    real_parts: tuple[int, ...]  # real fixtures: prefixes of 1/part of the file (1 = all of it)
    real_cap_mb: float | None  # ... of at most this many MB
    corpus_vocab: int
    vocabs: tuple[int, ...]
    vocab_corpus_mb: float
    text_mb: tuple[float, ...]
    cache_sizes: tuple[int, ...]
    cache_text_mb: float
    encode_vocab: int
    budget: float  # seconds one point may take
    repeats: int  # a point under REPEAT_BELOW seconds is measured this many times (best of)
    workers: int | None  # pre-tokenizer processes when not given (None: all cores)


DEFAULT = Sizes(
    generated_mb=(0.125, 0.25, 0.5, 1, 2, 4, 8, 16, 32),
    real_parts=(16, 8, 4, 2, 1),
    real_cap_mb=None,
    corpus_vocab=320,
    vocabs=(1024, 2048, 4096, 8192, 16384, 32768),
    vocab_corpus_mb=4,
    text_mb=(0.125, 0.25, 0.5, 1, 2),
    cache_sizes=(0, 64, 1024, 16384, 262144),
    cache_text_mb=0.5,
    encode_vocab=8192,
    budget=10.0,
    repeats=3,
    workers=None,
)
QUICK = Sizes(
    generated_mb=(0.05, 0.1, 0.2),
    real_parts=(2, 1),
    real_cap_mb=0.1,
    corpus_vocab=280,
    vocabs=(280, 320, 400),
    vocab_corpus_mb=0.05,
    text_mb=(0.02, 0.04, 0.08),
    cache_sizes=(0, 64, 4096),
    cache_text_mb=0.04,
    encode_vocab=500,
    budget=3.0,
    repeats=1,
    workers=1,  # a worker pool's start-up would be most of a tiny run
)


@dataclass(frozen=True)
class Targets:
    """Implementations under test, by reference (`bpe scaling --trainer REF --tokenizer REF`)."""

    trainers: tuple[str, ...] = ()  # run_train_bpe(input_path, vocab_size, special_tokens)
    tokenizers: tuple[str, ...] = ()  # get_tokenizer(vocab, merges, special_tokens=None)
    builtins: bool = True  # False: of ours, only REFERENCE_TRAINER's and _TOKENIZER's, measured as theirs are
    call_timeout: float | None = None  # seconds before a call is killed (None: from the budget)
    python: str | None = None  # the interpreter their code runs under (None: this one)

    def timeout(self, budget: float) -> float:
        return self.call_timeout or max(MIN_CALL_TIMEOUT, CALL_TIMEOUT_BUDGETS * budget)


SMALLER = 3  # halvings added below the smallest corpus and text for implementations under test
# With trainers under test, the vocab study's corpus: one a first Python trainer merges a thousand
# times within the budget (DEFAULT's 4 MB takes one a minute for its first 767 merges, 0.125 MB two
# seconds for 63 on a busy machine); merges 31, 63, ... 2047, fewer than its distinct bytes (~6,000).
THEIR_VOCAB_CORPUS_MB, THEIR_VOCABS = 1 / 32, (288, 320, 384, 512, 768, 1280, 2304)


def sizes_for(targets: Targets, quick: bool = False) -> Sizes:
    """QUICK; DEFAULT; or, with implementations under test, DEFAULT with SMALLER halvings below
    its smallest corpora (for trainers) and texts (for tokenizers), and the vocab study on a small
    corpus (for trainers): a first Python trainer can be a hundred times slower than ours, and the
    budget would leave it too few points to fit. Ours are measured at the same sizes, beside it."""
    if quick:
        return QUICK
    steps, trainers, tokenizers = range(SMALLER, 0, -1), bool(targets.trainers), bool(targets.tokenizers)
    return replace(
        DEFAULT,
        generated_mb=tuple(DEFAULT.generated_mb[0] / 2**k for k in steps if trainers) + DEFAULT.generated_mb,
        real_parts=tuple(DEFAULT.real_parts[0] * 2**k for k in steps if trainers) + DEFAULT.real_parts,
        vocab_corpus_mb=THEIR_VOCAB_CORPUS_MB if trainers else DEFAULT.vocab_corpus_mb,
        vocabs=THEIR_VOCABS if trainers else DEFAULT.vocabs,
        text_mb=tuple(DEFAULT.text_mb[0] / 2**k for k in steps if tokenizers) + DEFAULT.text_mb,
    )


# Without the builtins, the one implementation of ours kept for scale: end to end, and encoding.
REFERENCE_TRAINER, REFERENCE_TOKENIZER = "builtin:native", f"builtin:tokenizer:{DEFAULT_ENCODER}"


def unloadable(refs: Sequence[str], python: str | None = None) -> str | None:
    """Why the first of `refs` that cannot be loaded cannot be (one line), or None: said before a
    study of minutes rather than at its first point."""
    for ref in refs:
        try:
            with Isolated(ref, MIN_CALL_TIMEOUT, python=python) as worker:
                worker.start()
        except ImplementationNotLoaded as exc:
            return str(exc)
    return None


# What the README states, per (study kind, phase, family); peers state nothing.
EXPECTED = {
    ("corpus", "merge", "naive"): "1 vs distinct bytes: O(merges x corpus)",
    ("corpus", "merge", "incremental"): "<= 1 vs distinct bytes: O(corpus + affected words x log pairs)",
    ("corpus", "train", None): "<= 1: counting O(corpus), merging sublinear",
    ("vocab", "merge", "naive"): "1: O(merges x corpus)",
    ("vocab", "merge", "incremental"): "< 1: O(corpus) once + ever fewer affected words per merge",
    ("vocab", "train", None): "< 1: counting does not grow with the vocab",
    ("encode text", "encode", None): "1: linear in the text",
}


@dataclass
class Point:
    x: float
    seconds: float | None = None
    peak_mb: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Curve:
    study: str  # "corpus: generated", "corpus: kjv.txt", "vocab: generated 16 MB", "encode text", "encode cache"
    metric: str  # "merge", "train" or "encode"
    name: str
    peer: bool
    x_label: str
    points: list[Point] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # over the budget, or stopped by an error: why
    user: bool = False  # an implementation under test, named by its reference as given

    @property
    def kind(self) -> str:
        return self.study.split(":")[0]

    @property
    def stopped(self) -> bool:
        """Whether an error ended the curve (else, where points were skipped, the budget did)."""
        return any(note.startswith(STOPPED) for note in self.skipped)


@dataclass
class Fit:
    study: str
    metric: str
    name: str
    peer: bool
    quantity: str  # what was fitted against what, e.g. "seconds vs corpus MB"
    slope: float | None
    low: float | None
    high: float | None
    points: int
    expected: str
    note: str = ""
    too_few: str = ""  # why the slope is not to be trusted (too few points, too narrow a range), or ""
    user: bool = False
    sentence: str = ""  # an implementation under test's time fit: what the slope means, in words


@dataclass
class ScalingReport:
    sizes: dict[str, Any]
    curves: list[Curve] = field(default_factory=list)
    fits: list[Fit] = field(default_factory=list)
    interval: str = ""
    machine: dict[str, Any] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)
    seconds: float = 0.0


# --- fitting ------------------------------------------------------------------------------------


def _t_quantile(df: int) -> tuple[float, str]:
    try:
        from scipy import stats
    except ImportError:
        return 1.959964, "normal approximation (scipy not installed: too narrow for few points)"
    return float(stats.t.ppf(0.975, df)), "Student's t"


def fit_slope(
    xs: Sequence[float | None], ys: Sequence[float | None]
) -> tuple[float | None, float | None, float | None, str]:
    """(slope, low, high, method) of log y = a + slope log x, with a 95% interval; needs 2 points
    for a slope and 3 for an interval (one degree of freedom); missing (None) and non-positive
    values are left out."""
    pairs = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None and x > 0 and y > 0]
    if len(pairs) < 2 or len({x for x, _ in pairs}) < 2:
        return None, None, None, ""
    log_x = np.log([x for x, _ in pairs])
    log_y = np.log([y for _, y in pairs])
    slope, intercept = np.polyfit(log_x, log_y, 1)
    n = len(pairs)
    if n < 3:
        return float(slope), None, None, ""
    residuals = log_y - (intercept + slope * log_x)
    spread = float(np.sum((log_x - log_x.mean()) ** 2))
    standard_error = math.sqrt(float(np.sum(residuals**2)) / (n - 2) / spread)
    t, method = _t_quantile(n - 2)
    return float(slope), float(slope - t * standard_error), float(slope + t * standard_error), method


def _expected(curve: Curve) -> str:
    if curve.peer or curve.user:
        return "-"
    family = "naive" if curve.name == "naive" else "incremental"
    for key in ((curve.kind, curve.metric, family), (curve.kind, curve.metric, None)):
        if key in EXPECTED:
            return EXPECTED[key]
    return "-"


TIME, DISTINCT, MEMORY = "seconds vs x", "seconds vs distinct pre-token bytes", "peak MB vs x"

# A slope from fewer points, or over a narrower range of x, is mostly noise (a smoke run's three
# points over 4x have given -1.87 for a merge phase that grows); it is shown, marked as such.
MIN_FIT_POINTS, MIN_FIT_SPAN = 4, 8.0


def _too_few(xs: Sequence[float | None], ys: Sequence[float | None]) -> str:
    used = [x for x, y in zip(xs, ys) if x and y and x > 0 and y > 0]
    if not used:
        return ""
    span = max(used) / min(used)
    if len(used) < MIN_FIT_POINTS or span < MIN_FIT_SPAN:
        return f"{len(used)} points over {span:.3g}x: too few to fit"
    return ""


def fit_curves(curves: Sequence[Curve]) -> tuple[list[Fit], str]:
    """A Fit of seconds (and, for the merge phase, peak MB) against x for every curve, plus seconds
    against distinct pre-token bytes for the corpus studies' merge phases and implementations
    under test; the time fit of an implementation under test carries its `describe` sentence."""
    fits: list[Fit] = []
    method = ""
    for curve in curves:
        if curve.kind == "encode cache":
            continue  # throughput against cache size has no stated power law
        measured = [p for p in curve.points if p.seconds is not None]
        jobs: list[tuple[str, list[float | None], list[float | None]]] = [
            (TIME, [p.x for p in measured], [p.seconds for p in measured])
        ]
        if curve.kind == "corpus" and (curve.metric == "merge" or curve.user):
            jobs.append((DISTINCT, [p.extra.get("distinct_bytes") for p in measured], [p.seconds for p in measured]))
        if curve.metric == "merge":
            jobs.append((MEMORY, [p.x for p in measured], [p.peak_mb for p in measured]))
        own: dict[str, Fit] = {}
        for quantity, xs, ys in jobs:
            slope, low, high, how = fit_slope(xs, ys)
            method = method or how
            own[quantity] = Fit(
                curve.study,
                curve.metric,
                curve.name,
                curve.peer,
                quantity,
                slope,
                low,
                high,
                sum(1 for x, y in zip(xs, ys) if x and y),
                _expected(curve),
                "; ".join(curve.skipped),
                _too_few(xs, ys) if slope is not None else "",
                curve.user,
            )
        if curve.user:
            own[TIME].sentence = describe(curve, own[TIME], own.get(DISTINCT))
        fits += own.values()
    return fits, method


# --- a slope in words ---------------------------------------------------------------------------

# An interval wider than this, or holding both 1 and 2, cannot tell one kind of growth from another.
WIDEST_TELLING = 1.5


def growth(fit: Fit) -> str | None:
    """The kind of growth a fit's slope and 95% interval point to: "sublinear" (the interval below
    1), "linear" (holding 1), "superlinear" (above 1, the slope under 1.5), "quadratic" (holding 2,
    or the slope from 1.5 to 2.5: a linear part still weighing at small sizes keeps a quadratic
    cost's slope under 2, noise can push it over), "worse" (above 2, the slope 2.5 or more); None
    when there is no interval, or one too wide to tell them apart."""
    if fit.slope is None or fit.low is None or fit.high is None or fit.too_few:
        return None
    slope, low, high = fit.slope, fit.low, fit.high
    if high - low > WIDEST_TELLING or (low <= 1 and high >= 2):
        return None
    if low <= 1 <= high:
        return "linear"
    if high < 1:
        return "sublinear"
    if slope < 1.5 and high < 2:
        return "superlinear"
    return "worse" if slope >= 2.5 and low > 2 else "quadratic"


_AXIS = {"corpus": "corpus", "vocab": "merges", "encode text": "text"}
# What each kind of growth most likely means in each study (end to end for trainers).
MEANINGS = {
    "corpus": {
        "sublinear": "sublinear: at these sizes, costs that grow more slowly than the corpus (start-up, "
        "merging over its distinct pre-tokens) outweigh reading it",
        "linear": "linear, as expected",
        "superlinear": "superlinear: each byte costs more than the last, more than reading and counting need",
        "quadratic": "likely quadratic in the number of distinct pre-tokens (each new one compared with, "
        "or placed among, all the others)",
        "worse": "worse than quadratic in the corpus",
    },
    "vocab": {
        "sublinear": "sublinear: counting the corpus, done once, outweighs the merges at these sizes, or each "
        "merge touches only the words that hold its pair (incremental pair counts)",
        "linear": "linear in the merges: each merge rescans the corpus's pre-tokens (incremental pair counts "
        "would make it sublinear)",
        "superlinear": "superlinear: each merge costs more than the one before",
        "quadratic": "likely quadratic in the merges: each merge scans all the merges or tokens made before it",
        "worse": "worse than quadratic in the merges",
    },
    "encode text": {
        "sublinear": "sublinear: at these sizes, fixed costs of a call, or a pre-token cache paying off more on "
        "longer text, outweigh the text",
        "linear": "linear in the text, as expected",
        "superlinear": "superlinear: a longer text costs more per byte",
        "quadratic": "likely quadratic in the text: e.g. the ids copied for every piece (ids = ids + new), or "
        "the text re-sliced for every pre-token",
        "worse": "worse than quadratic in the text",
    },
}
# In the corpus study the distinct pre-tokens grow more slowly than the corpus (Heaps' law), so the
# fit against them says which of the two a cost follows: time quadratic in the corpus itself grows
# faster still against them, time quadratic (or linear) in them slower against the corpus.
LINEAR_IN_THE_DISTINCT = (
    "linear in the distinct pre-tokens, which grow more slowly than the corpus: the work over them (the "
    "merges) outweighs reading the corpus at these sizes"
)
QUADRATIC_IN_THE_CORPUS = (
    "likely quadratic in the corpus itself, every pre-token and not only the distinct ones (e.g. each "
    "occurrence looked up in a list, or the text joined by repeated concatenation)"
)


def _interval(fit: Fit) -> str:
    return f"95% CI {fit.low:.2f} to {fit.high:.2f}" if fit.low is not None and fit.high is not None else "no interval"


def describe(curve: Curve, fit: Fit, distinct: Fit | None = None) -> str:
    """One sentence on how an implementation under test's time grows, from its fitted exponent
    and 95% interval (and, in a corpus study, its fit against distinct pre-token bytes); honest
    where the points are too few or the interval too wide to say."""
    axis = _AXIS.get(curve.kind, curve.x_label)
    measured = sum(1 for p in curve.points if p.seconds)
    if fit.slope is None:
        stop = f"; {curve.skipped[-1]}" if curve.skipped else ""
        return f"not fitted: {measured} point{'s' * (measured != 1)} measured{stop}"
    grows = f"grows as {axis}^{fit.slope:.2f} ({_interval(fit)})"
    if fit.too_few:
        return f"{grows} from {fit.too_few}, so nothing can be said yet about how it scales (measure more sizes)"
    kind = growth(fit)
    if kind is None:
        return f"{grows}: the interval is too wide to say how it scales (a busy machine, or too few sizes)"
    meaning = MEANINGS.get(curve.kind, MEANINGS["corpus"])[kind]
    if curve.kind == "corpus" and distinct is not None and distinct.slope is not None:
        against = growth(distinct)
        if against == "quadratic" and kind in ("superlinear", "quadratic", "worse"):
            meaning = MEANINGS["corpus"]["quadratic"]
        elif against == "worse" and kind == "quadratic":
            meaning = QUADRATIC_IN_THE_CORPUS
        elif against == "linear" and kind == "sublinear":
            meaning = LINEAR_IN_THE_DISTINCT
        else:
            return f"{grows}: {meaning}"
        grows += f", as distinct pre-token bytes^{distinct.slope:.2f} ({_interval(distinct)})"
    return f"{grows}: {meaning}"


def heaps_exponents(curves: Sequence[Curve]) -> dict[str, float | None]:
    """Per corpus study: how distinct pre-token bytes grow with the corpus (Heaps' law exponent)."""
    out: dict[str, float | None] = {}
    longest: dict[str, Curve] = {}  # the curve that reached the most sizes (naive stops early)
    for curve in curves:
        if curve.kind == "corpus" and any("distinct_bytes" in p.extra for p in curve.points):
            if len(curve.points) > len(longest.get(curve.study, Curve("", "", "", False, "")).points):
                longest[curve.study] = curve
    for study, curve in longest.items():
        out[study] = fit_slope([p.x for p in curve.points], [p.extra.get("distinct_bytes") for p in curve.points])[0]
    return out


# --- the runs (module-level functions, so they pickle into child processes) ---------------------


def _merge_run(name: str, counts, vocab_size: int) -> int:
    return len(IMPLEMENTATIONS[name](counts, vocab_size, SPECIALS)[1])


def _stats_run(name: str, counts, vocab_size: int) -> dict[str, dict[str, float]]:
    return instrumented.train_with_stats(IMPLEMENTATIONS[name], counts, vocab_size, SPECIALS)[2].summary()


def has_stats(name: str) -> bool:
    """Whether a registered trainer has per-merge statistics (`trainers.instrumented` counts them)."""
    return instrumented.has_stats(IMPLEMENTATIONS[name])


# --- the study ----------------------------------------------------------------------------------


class _Runner:
    """Runs measurements with the time budget, progress and logging."""

    def __init__(self, budget: float, repeats: int, total: int, progress: bool, log: Callable[[str], None]):
        self.budget = budget
        self.repeats = repeats
        self.bar = progress_bar(progress, total=total, unit="run", desc="scaling", leave=False)
        self.log = log
        self.started = time.perf_counter()

    def best_of(self, run: Callable[[], Measured], repeats: int | None = None) -> Measured:
        """Best of `repeats` (default: the runner's) when the first run is under REPEAT_BELOW
        seconds, else one run."""
        best = None
        for _ in range(self.repeats if repeats is None else repeats):
            measured = run()
            if best is not None:
                measured = Measured(
                    best.result, min(best.seconds, measured.seconds), min(best.peak_bytes, measured.peak_bytes)
                )
            best = measured
            if best.seconds >= REPEAT_BELOW:
                break
        assert best is not None, "repeats is at least 1"
        return best

    def predict(self, curve: Curve, x: float, first_guess: float | None) -> float | None:
        """Seconds the next point should take: the least-squares line through every point so far
        (log-log), so one point slowed by a busy machine moves it by only 1/n; its slope at least 1,
        so a flat start (fixed costs) cannot hide growth. With one point, linear from it; with none,
        `first_guess`. Cache size is not a cost axis: its points are not predicted."""
        if curve.kind == "encode cache":
            return first_guess
        done = [(p.x, seconds) for p in curve.points if (seconds := p.seconds)]
        if not done:
            return first_guess
        log_x = np.log([x for x, _ in done])
        log_y = np.log([seconds for _, seconds in done])
        slope = fit_slope([x for x, _ in done], [seconds for _, seconds in done])[0] if len(done) >= 2 else None
        slope = max(1.0, slope if slope is not None else 1.0)
        return float(np.exp(log_y.mean() + slope * (math.log(x) - log_x.mean())))

    def admit(self, curve: Curve, x: float, first_guess: float | None, label: str) -> bool:
        """Whether to measure the curve's point at x: not once a smaller point was skipped or
        stopped, nor when it is predicted over the budget (the curve then says so)."""
        self.bar.update()
        if curve.skipped:
            return False  # a smaller point was over budget, or ended in an error, already
        predicted = self.predict(curve, x, first_guess)
        if predicted is not None and predicted > self.budget:
            curve.skipped.append(f"skipped from {label or x}: predicted {predicted:.0f} s > budget {self.budget:.0f} s")
            return False
        self.log(
            f"{time.perf_counter() - self.started:5.1f} s  {curve.study}, {curve.metric}: {curve.name} at {label or x}"
        )
        return True

    @staticmethod
    def _record(curve: Curve, x: float, measured: Measured, extra: dict | None) -> Point:
        point = Point(x, measured.seconds, measured.peak_mb, dict(extra or {}))
        curve.points.append(point)
        return point

    def point(
        self,
        curve: Curve,
        x: float,
        func,
        *args,
        first_guess: float | None = None,
        extra: dict | None = None,
        label: str = "",
    ) -> Point | None:
        """A point of our merge phase: func(*args) in a fresh child (measure.measure_in_child)."""
        if not self.admit(curve, x, first_guess, label):
            return None
        return self._record(curve, x, self.best_of(partial(measure_in_child, func, *args)), extra)

    def subject_point(
        self,
        curve: Curve,
        x: float,
        call: Callable[[], subjects.Outcome],
        *,
        repeats: int | None = None,
        first_guess: float | None = None,
        extra: dict | None = None,
        label: str = "",
    ) -> Point | None:
        """A point of an implementation under test: `call` measures it in a worker of its own. An
        Outcome with an error (a crash, a hang past the call timeout, an exception) ends the curve,
        with the reason; the study goes on."""
        if not self.admit(curve, x, first_guess, label):
            return None

        def once() -> Measured:
            outcome = call()
            if outcome.error is not None:
                raise _Stopped(outcome.error)
            assert outcome.seconds is not None
            return Measured(outcome.value, outcome.seconds, outcome.peak_bytes or 0)

        try:
            measured = self.best_of(once, repeats)
        except _Stopped as stop:
            curve.skipped.append(f"{STOPPED} {label or x}: {stop}")
            self.log(f"{curve.name} stopped at {label or x}: {stop}")
            return None
        return self._record(curve, x, measured, extra)


class _Stopped(Exception):
    """An implementation under test's Outcome was an error: its curve ends here."""


def _prefix_file(path: Path, size: int, directory: Path) -> Path:
    """The first `size` bytes of a file, cut back to a line end, written into `directory`."""
    with open(path, "rb") as file:
        data = file.read(size)
    if len(data) == size and b"\n" in data:
        data = data[: data.rindex(b"\n") + 1]
    out = directory / f"{path.stem}-{len(data)}B{path.suffix}"
    out.write_bytes(data)
    return out


def _corpora(sizes: Sizes, real: Sequence[Path], directory: Path) -> list[tuple[str, list[tuple[float, Path]]]]:
    """(study name, [(corpus MB, file)]) for the generated corpus and each real fixture."""
    generated = [(mb, default_corpus(int(mb * 1e6))) for mb in sizes.generated_mb]
    studies = [("corpus: generated", generated)] if generated else []
    for path in real:
        whole = path.stat().st_size
        top = min(whole, int(sizes.real_cap_mb * 1e6)) if sizes.real_cap_mb else whole
        files = [_prefix_file(path, top // part, directory) for part in sizes.real_parts]
        studies.append((f"corpus: {path.name}", [(f.stat().st_size / 1e6, f) for f in files]))
    return studies


def _peers_installed(log: Callable[[str], None]) -> list[str]:
    names = []
    for name, peer in peer_adapters.TRAIN_PEERS.items():
        if peer_adapters.installed(peer.module):
            names.append(name)
        else:
            log(f"peer {name} left out: {peer.module} is not installed")
    return names


@dataclass
class _Subject:
    """One implementation measured through subjects.py in a study: its reference and curve."""

    ref: str
    python: str | None
    curve: Curve


def _subjects(
    targets: Targets, refs: Sequence[str], reference: str, study: str, metric: str, x_label: str
) -> list[_Subject]:
    """The curves of the implementations under test in one study, named by their references as
    given; without the builtins, first the reference's, measured the same way, for scale."""
    ours = [] if targets.builtins else [(reference, None, reference.rpartition(":")[2], False)]
    theirs = [(ref, targets.python, ref, True) for ref in refs]
    return [
        _Subject(ref, python, Curve(study, metric, name, False, x_label, user=user))
        for ref, python, name, user in ours + theirs
    ]


def _trainer_study(
    runner: _Runner,
    study: str,
    x_label: str,
    points: Sequence[tuple[float, Path, int, str]],
    peers: Sequence[str],
    workers: int | None,
    targets: Targets,
    guesses: dict[str, float | None] | None = None,
) -> list[Curve]:
    """Merge phase and end to end for every trainer (and peer), and end to end for each trainer
    under test, over (x, corpus, vocab, label) points; `guesses`: the seconds of a trainer under
    test's first point, by name, where known."""
    ours = IMPLEMENTATIONS if targets.builtins else {}
    merge = {name: Curve(study, "merge", name, False, x_label) for name in ours}
    train = {name: Curve(study, "train", name, False, x_label) for name in ours}
    train.update({name: Curve(study, "train", name, True, x_label) for name in peers})
    tested = _subjects(targets, targets.trainers, REFERENCE_TRAINER, study, "train", x_label)
    timeout = targets.timeout(runner.budget)
    count = resolve_workers(workers)  # (a reference's None would be its own default, not every core)
    for x, path, vocab_size, label in points:
        counts = count_pretokens(path, SPECIALS, workers)
        distinct = {"distinct_pretokens": len(counts), "distinct_bytes": sum(map(len, counts))}
        merges = vocab_size - 256 - len(SPECIALS)
        naive_guess = NAIVE_SECONDS_PER_BYTE_MERGE * distinct["distinct_bytes"] * merges
        for name, curve in merge.items():
            point = runner.point(
                curve,
                x,
                _merge_run,
                name,
                counts,
                vocab_size,
                extra=distinct,
                label=label,
                first_guess=naive_guess if name == "naive" else None,
            )
            if point is not None and has_stats(name):
                point.extra["stats"] = measure_in_child(_stats_run, name, counts, vocab_size).result
        del counts
        for name, curve in train.items():
            merge_point = next((p for p in merge[name].points if p.x == x), None) if name in merge else None
            if name in merge and merge_point is None:
                if not curve.skipped:
                    curve.skipped.append(f"skipped from {label}: its merge phase was over budget")
                runner.bar.update()
                continue
            ref = f"builtin:{name}" if name in merge else f"peer:{name}"
            call = partial(subjects.train, ref, str(path), vocab_size, SPECIALS, num_workers=count, timeout=timeout)
            guess = merge_point.seconds if merge_point else None
            runner.subject_point(curve, x, call, first_guess=guess, label=label)
        for subject in tested:
            call = partial(
                subjects.train,
                subject.ref,
                str(path),
                vocab_size,
                SPECIALS,
                num_workers=count,
                timeout=timeout,
                python=subject.python,
            )
            guess = (guesses or {}).get(subject.curve.name)
            runner.subject_point(subject.curve, x, call, first_guess=guess, extra=distinct, label=label)
    return [*merge.values(), *train.values(), *(subject.curve for subject in tested)]


def _studies_with_targets(studies: Sequence[str], targets: Targets, log: Callable[[str], None]) -> list[str]:
    """The studies to run: without the builtins, only those an implementation under test is in."""
    if targets.builtins:
        return list(studies)
    given = {"corpus": targets.trainers, "vocab": targets.trainers, "encode": targets.tokenizers}
    for study in studies:
        if not given[study]:
            flag = "--tokenizer" if study == "encode" else "--trainer"
            log(f"{study} study: skipped: nothing of yours to measure in it without the builtins (give {flag})")
    return [study for study in studies if given[study]]


def run_scaling(
    sizes: Sizes = DEFAULT,
    *,
    real: Sequence[Path] | None = None,
    peers: bool = False,
    workers: int | None = None,
    studies: Sequence[str] = ("corpus", "vocab", "encode"),
    targets: Targets = Targets(),
    progress: bool = False,
    log: Callable[[str], None] = lambda message: None,
) -> ScalingReport:
    """Every curve `bpe scaling` measures, fitted; `real` defaults to kjv.txt where it is found (a
    quick run, whose real corpora are capped at 0.1 MB, takes its bundled sample where it is not).
    `targets`: implementations under test, measured beside ours (or, without the builtins, beside
    native's alone)."""
    start = time.perf_counter()
    studies = _studies_with_targets(studies, targets, log)
    if real is None and "corpus" in studies:
        text = real_text("kjv.txt", bundled=sizes.real_cap_mb is not None and sizes.real_cap_mb <= 0.1)
        real = [] if text is None else [text.path]
        if text is None:
            log(f"real text: skipped: {missing_text('kjv.txt')}")
    real = real or []
    # Children fork from a server that has imported this module once, instead of each importing it.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    peer_names = _peers_installed(log) if peers else []
    report = ScalingReport(sizes=asdict(sizes), machine=describe_machine(), command=list(sys.argv))
    ours = len(IMPLEMENTATIONS) * 2 if targets.builtins else 1  # merge and end to end; or native end to end
    trainers = ours + len(peer_names) + len(targets.trainers)
    encoders = list(ENCODERS) if targets.builtins else []
    if peers:
        encoders += [name for name in ENCODE_PEERS if peer_adapters.installed(peer_adapters.PEER_ENCODERS[name].module)]
    tokenizers = len(encoders) + len(targets.tokenizers) + (not targets.builtins)
    total = 0
    if "corpus" in studies:
        total += trainers * (len(sizes.generated_mb) + len(sizes.real_parts) * len(real))
    if "vocab" in studies:
        total += trainers * len(sizes.vocabs)
    if "encode" in studies:
        total += tokenizers * len(sizes.text_mb) + len(ENCODERS) * len(sizes.cache_sizes) * targets.builtins
    runner = _Runner(sizes.budget, sizes.repeats, total, progress, log)
    workers = sizes.workers if workers is None else workers
    with tempfile.TemporaryDirectory(prefix="bpe-scaling-") as scratch, runner.bar:
        if "corpus" in studies:
            for study, files in _corpora(sizes, real, Path(scratch)):
                points = [(mb, path, sizes.corpus_vocab, f"{mb:.3g} MB") for mb, path in files]
                report.curves += _trainer_study(runner, study, "corpus MB", points, peer_names, workers, targets)
        if "vocab" in studies:
            path = default_corpus(int(sizes.vocab_corpus_mb * 1e6))
            points = [(v - 256 - len(SPECIALS), path, v, f"vocab {v}") for v in sizes.vocabs]
            study = f"vocab: generated {sizes.vocab_corpus_mb:g} MB"
            # A larger vocab costs no less: a trainer under test's curve in the corpus study, carried
            # to this corpus, predicts its first point here, so one already over the budget there is
            # skipped at once rather than killed at the call timeout.
            guesses = {
                curve.name: runner.predict(curve, sizes.vocab_corpus_mb, None)
                for curve in report.curves
                if curve.study == "corpus: generated" and curve.metric == "train"
            }
            report.curves += _trainer_study(runner, study, "merges", points, peer_names, workers, targets, guesses)
        if "encode" in studies:
            report.curves += _encoder_study(runner, sizes, encoders, workers, targets)
    report.fits, report.interval = fit_curves(report.curves)
    report.seconds = time.perf_counter() - start
    return report


def _encoder_study(
    runner: _Runner, sizes: Sizes, encoders: Sequence[str], workers: int | None, targets: Targets
) -> list[Curve]:
    """Seconds against text size for each encoder and tokenizer under test, and MB/s against cache
    size for each of ours (on a trained vocab)."""
    top = max(max(sizes.text_mb), sizes.cache_text_mb)
    corpus = default_corpus(max(int(top * 1e6), 1_000_000))
    vocab, merges = train_bpe(corpus, sizes.encode_vocab, SPECIALS, num_workers=workers, impl=DEFAULT_IMPL)
    with open(corpus, "rb") as file:
        data = file.read(int(top * 1e6))

    def text_of(mb: float) -> str:
        return data[: int(mb * 1e6)].decode("utf-8", errors="ignore")

    def throughput(point: Point | None, mb: float) -> None:
        if point is not None and point.seconds:
            point.extra["mb_per_s"] = mb / point.seconds

    def encode_point(curve: Curve, ref: str, x: float, text: str, label: str, **options: Any) -> None:
        # Best of fresh tokenizers within REPEAT_BELOW seconds, each from a cold cache, in one worker.
        call = partial(
            subjects.encode,
            ref,
            vocab,
            merges,
            SPECIALS,
            text,
            repeats=sizes.repeats,
            budget=REPEAT_BELOW,
            timeout=timeout,
            **options,
        )
        throughput(runner.subject_point(curve, x, call, repeats=1, label=label), len(text.encode("utf-8")) / 1e6)

    timeout = targets.timeout(runner.budget)
    curves = []
    for name in encoders:
        curve = Curve("encode text", "encode", name, name not in ENCODERS, "text MB")
        ref = f"builtin:tokenizer:{name}" if name in ENCODERS else f"peer:{name}"
        for mb in sizes.text_mb:
            encode_point(curve, ref, mb, text_of(mb), f"{mb:g} MB", cache_size=1 << 16 if name in ENCODERS else None)
        curves.append(curve)
    for subject in _subjects(targets, targets.tokenizers, REFERENCE_TOKENIZER, "encode text", "encode", "text MB"):
        for mb in sizes.text_mb:
            encode_point(subject.curve, subject.ref, mb, text_of(mb), f"{mb:g} MB", python=subject.python)
        curves.append(subject.curve)
    text = text_of(sizes.cache_text_mb)
    for name in ENCODERS if targets.builtins else ():
        curve = Curve("encode cache", "encode", name, False, "cache entries")
        for cache in sizes.cache_sizes:
            encode_point(curve, f"builtin:tokenizer:{name}", cache, text, f"cache {cache}", cache_size=cache)
        curves.append(curve)
    return curves


# --- output -------------------------------------------------------------------------------------


def _cell(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _exponent(fit: Fit | None) -> str:
    if fit is None or fit.slope is None:
        return "-"
    interval = f" [{_cell(fit.low)}, {_cell(fit.high)}]" if fit.low is not None else ""
    if fit.too_few:
        return f"({fit.slope:.2f}{interval}; {fit.too_few})"
    return f"{fit.slope:.2f}{interval}"


EXPONENT_HEADER = [
    "study",
    "phase",
    "implementation",
    "time exponent [95% CI]",
    "vs distinct bytes",
    "memory exponent",
    "points",
    "stated (README)",
    "skipped",
]


def exponent_rows(report: ScalingReport) -> list[list[str]]:
    """The exponent table, one row per curve: time ~ x^k, (corpus merge) time ~ distinct bytes^k,
    merge peak memory ~ x^k, the number of points, the stated complexity and what was skipped."""
    by_curve: dict[tuple, dict[str, Fit]] = {}
    for fit in report.fits:
        by_curve.setdefault((fit.study, fit.metric, fit.name, fit.peer), {})[fit.quantity] = fit
    rows = []
    for (study, metric, name, peer), fits in by_curve.items():
        time_fit = fits[TIME]
        rows.append(
            [
                study,
                metric,
                name + (" (peer)" if peer else ""),
                _exponent(time_fit),
                _exponent(fits.get(DISTINCT)),
                _exponent(fits.get(MEMORY)),
                str(time_fit.points),
                time_fit.expected,
                time_fit.note,
            ]
        )
    return rows


STATS_HEADER = ["study", "trainer", "at x", "counter", "per merge (mean)", "total", "total exponent vs x"]


def stats_rows(report: ScalingReport) -> list[list[str]]:
    """Per-merge statistics of the Python trainers at each curve's largest x, and how each
    counter's total over the run grows with x (its log-log slope)."""
    rows = []
    for curve in report.curves:
        points = [p for p in curve.points if p.extra.get("stats")]
        if not points:
            continue
        last = points[-1]
        for counter, values in last.extra["stats"].items():
            slope = fit_slope([p.x for p in points], [p.extra["stats"][counter]["total"] for p in points])[0]
            rows.append(
                [
                    curve.study,
                    curve.name,
                    f"{last.x:.3g}" if last.x < 1000 else f"{last.x:.0f}",
                    counter,
                    f"{values['mean']:.1f}",
                    f"{values['total']:.0f}",
                    _cell(slope),
                ]
            )
    return rows


def stats_note(report: ScalingReport) -> str:
    """Which trainers the statistics table covers, and which trainers measured it does not."""
    measured = dict.fromkeys(c.name for c in report.curves if c.metric == "merge")
    counted = dict.fromkeys(c.name for c in report.curves if any(p.extra.get("stats") for p in c.points))
    without = [name for name in measured if name not in counted]
    return f"{', '.join(counted)} (untimed instrumented runs{'; none for ' + ', '.join(without) if without else ''})"


def _text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]
    )


def format_scaling(report: ScalingReport) -> str:
    out = [
        f"scaling exponents k of cost ~ x^k: log-log least-squares slope, 95% interval by "
        f"{report.interval or '-'}; x is the study's axis (corpus MB, merges, text MB)",
        "",
    ]
    out.append(_text_table(EXPONENT_HEADER, exponent_rows(report)))
    if any(fit.too_few for fit in report.fits):
        out.append(
            f"(in parentheses: fewer than {MIN_FIT_POINTS} points or x over less than {MIN_FIT_SPAN:g}x, "
            "too few for the slope to mean anything; --quick runs are smoke runs)"
        )
    for study, slope in heaps_exponents(report.curves).items():
        out.append(f"{study}: distinct pre-token bytes grow as corpus MB^{_cell(slope)} (Heaps' law)")
    told = [fit for fit in report.fits if fit.sentence]
    if told:
        out += ["", "yours, in words (end to end for a trainer, encode for a tokenizer):"]
        out += [f"  {fit.name}, {fit.study}: {fit.sentence}" for fit in told]
    stats = stats_rows(report)
    if stats:
        out += ["", f"per-merge statistics of {stats_note(report)}"]
        out.append(_text_table(STATS_HEADER, stats))
    out += [
        "",
        f"{report.seconds:.0f} s on {report.machine.get('cpu')}, {report.machine.get('cores')} cores "
        "(a shared machine makes single points noisy; the fit uses all of them)",
    ]
    return "\n".join(out)


def write_json(report: ScalingReport, path: Path) -> None:
    with atomic_write(path, "w", encoding="utf-8") as out:
        json.dump(asdict(report), out, indent=1)


def load_json(path: Path) -> ScalingReport:
    """A ScalingReport back from `write_json`'s file."""
    with open(path, encoding="utf-8") as file:
        data = json.load(file)
    curves = [Curve(**{**c, "points": [Point(**p) for p in c["points"]]}) for c in data.pop("curves")]
    data.pop("fits"), data.pop("interval")
    report = ScalingReport(curves=curves, **data)
    report.fits, report.interval = fit_curves(curves)  # derived from the curves, by this version's rules
    return report
