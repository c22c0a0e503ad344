"""What the asv suites and the pytest-benchmark table share: where the fixtures are, which trainers,
encoders and peers exist, which combinations are too slow to run, and the peers' adapters.

Import-safe at every commit of the project (asv discovers benchmarks once, then runs the same
parameter grid against older commits): anything a commit may lack is imported under a guard, and
the benchmarks raise NotImplementedError (asv's "skip") for what is missing.
"""

from __future__ import annotations

import ast
import gc
import importlib.util
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

# asv installs the package non-editable into its own environment, where bpe_impls.harness.fixtures's default
# (../shared/fixtures beside the *installed* package) points nowhere. The fixtures sit beside this
# checkout, so point the one locator there unless the user already chose a directory.
REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("BPE_FIXTURES", str(REPO.parent / "shared" / "fixtures"))

SPECIAL_TOKENS = ["<|endoftext|>"]
# Shared fixtures (3.8 KB, 133 KB, 4.2 MB of real text) and corpora generated on first use by this
# commit's bpe_impls.harness.generators (TinyStories-style; "web" has ~25x the distinct words, which
# is what a trainer's memory grows with), cached in bpe_impls' cache directory.
CORPORA = ["tinystories_sample.txt", "corpus.en", "kjv.txt", "web-16MB"]  # the merge phase (bench_train.Merge)
VOCAB_SIZES = [10000, 32000]
# Trainers written in Python: a merge phase of 0.1-1 s on kjv.txt, minutes for naive (see
# _TOO_SLOW). Any other trainer (the compiled one, a new one) runs everywhere.
PURE_PYTHON_TRAINERS = {"naive", "route_a", "route_b", "bucket"}
PURE_PYTHON_ENCODERS = {"scan", "heap", "hybrid"}


class Timed:
    """Sampling shared by the time_ suites, so that asv's test for a change holds on a shared host.

    asv calls a change significant when the medians differ by over 10% (`--factor`) and a
    Mann-Whitney U test over the two commits' samples gives p < 0.002. That test assumes
    independent samples. On a shared host they are not, within a round: the same merge takes 1.0x
    to 2.3x its best CPU time from one stretch of 5-50 s to the next (another tenant on the
    core's sibling, each core on its own; docs/performance.md), so the 3-10 samples of one
    round share one stretch, and 4 rounds of 7 samples looked like 28 independent samples when
    they were 4: identical commits were flagged 4 to 12 times per run. So:

    - One sample per round, 8 rounds, each in a fresh process: 8 samples per commit that are as
      independent as asv can make them (asv interleaves the rounds across the commits it compares,
      A B B A ..., each round running every suite, so a commit's samples are about a minute apart
      and the two commits see the same host). With 8 and 8, the test's two-sided p goes as low as
      0.0002, and a false alarm has the test's own probability, 0.2% per row.
    - CPU time of the benchmark process (all its threads), not wall time: time spent waiting for
      the core while other processes run does not count. Everything timed runs in-process (one
      counting worker, one encoding thread), so CPU time is the work done.
    - Each combination takes tens of milliseconds or more (most 0.1 s to 1 s).
    - No warm-up: setup runs before the sample (a fresh tokenizer, an empty cache).

    A planted 1.2x slowdown of the compiled merge was flagged this way (Merge on web-16MB 1.18x,
    MergeGrowth at 16 MB 1.21x); bench_instructions adds a count of the merge's instructions,
    which the noise does not touch.
    """

    timer = time.process_time
    number = 1
    repeat = 1
    rounds = 8
    warmup_time = 0.0
    timeout = 300


_GENERATED = re.compile(r"(tinystories|web|intl)-(\d+)MB")


def _generated_path(style: str, size: int) -> Path:
    """This commit's generated corpus of `style` (tinystories, or web's styles: web, intl) and
    `size` bytes, written once and cached."""
    try:
        from bpe_impls.harness.generators import tinystories
    except ImportError:
        skip("the corpus generators (bpe_impls.harness.generators) are not in this commit")
    if style == "tinystories":
        return tinystories.default_corpus(size)
    try:
        from bpe_impls.harness.generators import web
    except ImportError:
        skip("the web-style generator is not in this commit")
    if style not in getattr(web, "STYLES", ("web",)):
        skip(f"the {style} style is not in this commit's web generator")
    directory = tinystories.cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{style}-v{web.GENERATOR_VERSION}-seed0-{size}B.txt"
    if not (path.is_file() and path.stat().st_size == size):
        web.write_corpus(path, size, 0, style)  # atomic: concurrent writers are harmless
    return path


try:
    from bpe_impls import IMPLEMENTATIONS, count_pretokens
except ImportError:  # not installed at all: discovery still works, every benchmark skips
    IMPLEMENTATIONS, count_pretokens = {}, None

try:
    from bpe_impls.encoding.encoders import ENCODERS
except ImportError:
    try:  # commits before the layered package
        from bpe_impls.tokenizer import ENCODERS
    except ImportError:  # commits before the Tokenizer
        ENCODERS = {}


def _registry_keys(relative_path: str, name: str, unless: str = "") -> list[str]:
    """The string keys of the dict literal assigned to `name` in this checkout's source file, plus
    keys added at module level by `name["key"] = ...` (also inside an `if`, for optional ones such
    as the compiled "native" entries); with `unless`, not the entries of the literal whose value is
    a call given `unless=True` (the peers' `verify_only=True`).

    asv discovers the suite once, then re-imports this module in every commit's environment and
    picks a parameter combination by its index in the grid, so the grid must be the same at every
    commit: it comes from the working tree beside this file (where a new trainer is registered),
    not from the installed package, which differs per commit. Parsed, not imported: importing
    the working tree would shadow the installed commit.
    """
    try:
        tree = ast.parse((REPO / relative_path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return []
    keys: list[str] = []
    statements = list(tree.body)
    while statements:
        node = statements.pop(0)
        if isinstance(node, ast.If):
            statements[:0] = node.body + node.orelse
            continue
        if isinstance(node, ast.AnnAssign):
            target = node.target
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        else:
            continue
        if isinstance(target, ast.Name) and target.id == name and isinstance(node.value, ast.Dict):
            keys += [
                key.value
                for key, value in zip(node.value.keys, node.value.values)
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and not _given(value, unless)
            ]
        elif (
            isinstance(target, ast.Subscript)
            and isinstance(target.value, ast.Name)
            and target.value.id == name
            and isinstance(target.slice, ast.Constant)
            and isinstance(target.slice.value, str)
        ):
            keys.append(target.slice.value)
    return list(dict.fromkeys(keys))


def _given(value: ast.expr, keyword: str) -> bool:
    """Whether `value` is a call with `keyword=True` among its arguments."""
    return isinstance(value, ast.Call) and any(
        k.arg == keyword and isinstance(k.value, ast.Constant) and k.value.value is True for k in value.keywords
    )


# Every trainer and encoder in the working tree (so a new one is benchmarked without edits); a
# commit that lacks one skips it. The installed names are the fallback when the source is not
# beside this file. Never empty: asv rejects an empty parameter list.
TRAINERS: list[str] = (
    _registry_keys("bpe_impls/trainers/registry.py", "IMPLEMENTATIONS") or list(IMPLEMENTATIONS) or ["naive"]
)
ENCODER_NAMES: list[str] = _registry_keys("bpe_impls/encoding/encoders.py", "ENCODERS") or list(ENCODERS) or ["hybrid"]
# The peers, from the one table of them (bpe_impls/harness/peers.py: TRAIN_PEERS, and the
# PEER_ENCODERS `bpe compare` measures, not the verify_only ones), read from the working tree's source
# as the trainers and encoders are, so the grid is the same at every commit; a peer that is not
# importable, or has no adapter at a commit, is skipped.
PEER_TRAINERS: list[str] = _registry_keys("bpe_impls/harness/peers.py", "TRAIN_PEERS")
PEER_ENCODERS: list[str] = _registry_keys("bpe_impls/harness/peers.py", "PEER_ENCODERS", unless="verify_only")


def skip(reason: str) -> NoReturn:
    """asv's way to skip one parameter combination: NotImplementedError raised in setup."""
    raise NotImplementedError(reason)


def corpus_path(name: str) -> Path:
    """A generated corpus ("tinystories-4MB", "web-16MB"), or a shared fixture's path via
    bpe_impls.harness.fixtures (the one locator); skips if it is absent. A timed suite measures only
    the whole shared file: a bundled sample (corpus_en_sample.txt, kjv_sample.txt, ...) is another
    corpus, and its times would not compare with the shared file's."""
    generated = _GENERATED.fullmatch(name)
    if generated:
        return _generated_path(generated[1], int(generated[2]) * 1_000_000)
    try:
        from bpe_impls.harness.fixtures import fixture_path, fixtures_dir
    except ImportError:  # commits before bpe_impls.harness.fixtures: same rule, env var only
        folder = Path(os.environ["BPE_FIXTURES"])
        path = folder / name if (folder / name).is_file() else None
    else:
        folder, path = fixtures_dir(), fixture_path(name)
    if path is None:
        skip(f"fixture {name} not found in {folder} (set BPE_FIXTURES to the folder that has it)")
    return path


def _bundled(name: str) -> Any:
    """bpe_impls.harness.fixtures.real_text(name) (a RealText, or None); None at commits before it."""
    try:
        from bpe_impls.harness.fixtures import real_text
    except ImportError:
        return None
    return real_text(name)


def quick_text(name: str) -> tuple[Path, str]:
    """For a quick run: the shared fixture `name`, or where it is absent the sample bundled with the
    package (kjv_sample.txt for kjv.txt); (its path, what it is, for the output: "kjv.txt (shared
    fixture)" or "kjv_sample.txt (bundled sample of kjv.txt)"). Skips if neither is there."""
    found = _bundled(name)
    if found is None:
        return corpus_path(name), name
    return found.path, found.describe()


def word_counts(name: str) -> Counter[bytes]:
    """Pre-token counts of a shared fixture, counted in-process (one worker)."""
    if count_pretokens is None:
        skip("bpe_impls is not importable")
    return count_pretokens(corpus_path(name), SPECIAL_TOKENS, 1)


# Seconds for the naive trainer's merge phase, measured on the shared 2-core machine:
#   corpus.en: 8.5 at vocab 1000, 25 at 2000, 84 at 10000;  kjv.txt: 44 at 1000 (10000: many minutes).
# asv runs a benchmark at least twice (warm-up + sample) after its setup, so anything over ~30 s
# would exceed a minute per combination: naive is skipped on kjv.txt and at 10000 on corpus.en.
# Every other trainer does kjv.txt at 10000 in under 1 s.
_TOO_SLOW = {("naive", "kjv.txt", 1000), ("naive", "kjv.txt", 10000), ("naive", "corpus.en", 10000)}


def too_slow(impl: str, corpus: str, vocab_size: int) -> bool:
    return (impl, corpus, vocab_size) in _TOO_SLOW


def peak_memory_or_skip() -> None:
    """Skip where the kernel cannot reset the peak-RSS mark (anything but Linux)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError as exc:
        skip(f"peak memory above a baseline needs Linux's /proc/self/clear_refs ({exc.strerror})")


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_mb_above_baseline(run: Callable[[], Any]) -> float:
    """MB of resident memory `run()` adds at its peak over what the process holds before it.

    asv's peakmem_ is the whole process's peak, about 50 MB of interpreter and modules before any
    work; this is the work's own share, so a change in it is not diluted. The kernel's peak mark is
    reset (clear_refs 5) right before `run`. Rounded to 0.1 MB: allocator noise is below that.
    """
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")
    before = _status_kb("VmRSS")
    run()
    return round((_status_kb("VmHWM") - before) / 1024, 1)


def fast_trainer() -> str | None:
    """The default trainer unless that is naive, else any other (all give identical merges)."""
    try:
        from bpe_impls import DEFAULT_IMPL as default
    except ImportError:
        default = None
    if default in IMPLEMENTATIONS and default != "naive":
        return default
    return next((name for name in IMPLEMENTATIONS if name != "naive"), None)


def trainer_or_skip(impl: str) -> Any:
    """The registered trainer, or skip (a commit from before it existed)."""
    if impl not in IMPLEMENTATIONS:
        skip(f"trainer {impl!r} is not in IMPLEMENTATIONS at this commit")
    return IMPLEMENTATIONS[impl]


def tokenizer_class_or_skip() -> Any:
    """bpe_impls.Tokenizer, or skip at commits where it was still a placeholder."""
    from bpe_impls import Tokenizer

    if not hasattr(Tokenizer, "encode_iterable"):
        skip("Tokenizer is a placeholder at this commit")
    return Tokenizer


# --- peers -------------------------------------------------------------------------------------

try:  # the one set of peer adapters, shared with `bpe compare` (absent at older commits: peers skip)
    from bpe_impls.harness import peers as _peers
except ImportError:
    _peers = None


# The thread count this process first sized the peers' rayon pools for (peer_encode_batch).
_rayon_threads: int | None = None


def _peers_or_skip() -> Any:
    if _peers is None:
        skip("the peer adapters (bpe_impls.harness.peers) are not in this commit")
    return _peers


def _adapter_or_skip(table: str, name: str) -> Any:
    """The peer's entry in this commit's peers.TRAIN_PEERS or PEER_ENCODERS; skips where it has
    none, or where its library is not installed."""
    entry = getattr(_peers_or_skip(), table, {}).get(name)
    if entry is None:
        skip(f"no {table} entry for {name} in this commit's peers")
    module = entry[0] if isinstance(entry, tuple) else entry.module
    if importlib.util.find_spec(module) is None:
        skip(f"peer {name} is not installed ({module})")
    return entry


def peer_or_skip(name: str) -> None:
    """Skip where peer trainer `name` has no adapter at this commit or is not installed."""
    _adapter_or_skip("TRAIN_PEERS", name)


def train_peer(name: str, path: Path, vocab_size: int) -> None:
    """Train a peer end to end (reading the file itself) to the same vocab size, as `bpe compare` does."""
    entry = _adapter_or_skip("TRAIN_PEERS", name)
    if hasattr(_peers, "train_peer"):
        _peers.train_peer(name, str(path), vocab_size, SPECIAL_TOKENS)
    else:  # commits whose TRAIN_PEERS entries were (module, train)
        entry[1](str(path), vocab_size, SPECIAL_TOKENS)


def tiktoken_encoding(vocab: dict[int, bytes], special_tokens: list[str] = SPECIAL_TOKENS) -> Any:
    """A tiktoken Encoding of our vocab (built offline, no download), as `bpe compare` builds it."""
    return _peers_or_skip().tiktoken_encoding(vocab, special_tokens, "bpe_impls_bench")


def _peer_built(
    name: str, vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], special_tokens: list[str]
) -> tuple[Any, Any]:
    """(the adapter, the peer's own tokenizer over our vocab and merges, GPT-2's pattern), as `bpe
    compare` builds it; skips where the peer cannot take this vocab (quicktok loads only its
    built-in ones)."""
    adapter = _adapter_or_skip("PEER_ENCODERS", name)
    from bpe_impls.base.patterns import GPT2  # (here, with the peers: this module imports at any commit)

    try:
        return adapter, adapter.build(vocab, merges, special_tokens, GPT2)
    except _peers.VocabRefused as refused:
        skip(f"{name}: {refused}")


def peer_encode(
    name: str, vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], special_tokens: list[str] = SPECIAL_TOKENS
) -> Callable[[str], Any]:
    """A peer's encode of one text (special tokens as specials), built offline from our vocab and
    merges as `bpe compare` builds it: its own ids (a list, numpy); skips when the peer or its
    adapter is missing."""
    adapter, tokenizer = _peer_built(name, vocab, merges, special_tokens)
    return lambda text: adapter.encode(tokenizer, text)


def peer_encode_batch(
    name: str,
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    threads: int,
    special_tokens: list[str] = SPECIAL_TOKENS,
) -> Callable[[list[str]], Any]:
    """A peer's batch method (its adapter's `batch`) on `threads` threads, as `bpe compare` calls it:
    the libraries whose pool is rayon's size it from RAYON_NUM_THREADS when they first start it,
    set here before that (each asv benchmark runs in a fresh process). A process that already asked
    for another count (pytest-benchmark's rows, one process) skips, since a started pool keeps its
    size; so does a peer with no batch method."""
    global _rayon_threads
    if _rayon_threads not in (None, threads):
        skip(
            f"this process's rayon pools were sized for {_rayon_threads} thread(s): {threads} needs a process of its own"
        )
    _rayon_threads = threads
    os.environ["RAYON_NUM_THREADS"] = str(threads)
    adapter, tokenizer = _peer_built(name, vocab, merges, special_tokens)
    if adapter.batch is None:
        skip(f"{name} has no batch method")
    return lambda texts: adapter.batch(tokenizer, texts, threads)
