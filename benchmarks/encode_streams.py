"""The encoder on streams: ours against gigatoken, one thread, on real and generated text, in the
three states a long-running encoder meets, with the memory each holds, and cold by script:

    bpe gen-corpus /tmp/intl64.txt --size 64MB --style intl          # 1.3 M distinct pre-tokens
    python benchmarks/encode_streams.py ../shared/fixtures/udhr.txt ../shared/fixtures/kjv.txt \
        /tmp/intl64.txt [--vocab gpt2|cl100k_base|o200k_base] [--repeat 3] [--scripts UDHR]

- cold: a fresh encoder encodes the text once;
- second: the same encoder encodes it again (a cache that cycles misses on every pre-token);
- steady: a fresh encoder is warmed on half of the text's documents (4 KB chunks cut at line ends,
  every other one) and encodes the other half (documents of the same corpus it has not seen).

Our row is Tokenizer.encode_to_numpy, gigatoken's its encode (numpy too), both built offline from
the same vocab (encode_one_core.encoders). Each encoder runs --repeat rounds, timed in process CPU
time, pinned to one core, in a child process of its own (so that "held", the resident memory it
keeps after the cold and second passes, its outputs freed and malloc_trim'd, over what it held
built, is its own; the text and its UTF-8 are in both baselines; held is measured in the first
round only, so that no later cold pass follows a trim). The two children take turns round by
round: MB/s is each one's median, and the ratio the median (and range) of the rounds' ratios, each
between two runs next to each other in time (this host's speed drifts by a quarter over minutes).
The ids of both are compared on every round. Each text's distinct pre-tokens (by the vocab's
pattern) are counted beside it, with our cache's bound. --scripts: the documents of udhr.txt grouped
by the script most of their letters are in (CJK, Thai, Myanmar, Devanagari, Arabic, Cyrillic,
Latin), each group encoded cold: where a cache miss costs most. Not a unit test: figures on a shared
machine are noisy.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time
import unicodedata
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

try:
    from ._common import _status_kb
except ImportError:  # run as a script, benchmarks/ on sys.path
    from _common import _status_kb  # type: ignore[no-redef]

MODES = ("cold", "second", "steady")
CHUNK = 4096
EOT = "<|endoftext|>"
SCRIPTS = ("CJK", "THAI", "MYANMAR", "DEVANAGARI", "ARABIC", "CYRILLIC", "LATIN")
NAMES = ("encode_to_numpy", "gigatoken")


def _resident() -> int:
    """This process's resident bytes, after glibc has given back the free memory it keeps (freed
    outputs would otherwise count as what an encoder holds)."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # (not glibc)
        pass
    return _status_kb("VmRSS") * 1024


def halves(text: str) -> tuple[str, str]:
    """The text's 4 KB chunks (cut after a line end where there is one) dealt alternately into two
    texts: documents of one corpus, none in both."""
    chunks, start = [], 0
    while start < len(text):
        end = text.find("\n", start + CHUNK)
        end = len(text) if end < 0 else end + 1
        chunks.append(text[start:end])
        start = end
    return "".join(chunks[0::2]), "".join(chunks[1::2])


def script_of(document: str) -> str | None:
    """The script most of the document's letters are in (the first word of their Unicode names),
    or None for one of SCRIPTS' others."""
    counts = collections.Counter(unicodedata.name(ch, "?").split()[0] for ch in document if ch.isalpha())
    if not counts:
        return None
    found = counts.most_common(1)[0][0]
    return found if found in SCRIPTS else None


def by_script(path: str) -> dict[str, str]:
    """udhr.txt's documents (cut at <|endoftext|>) joined per script, in SCRIPTS' order."""
    with open(path, encoding="utf-8") as file:
        groups: dict[str, list[str]] = collections.defaultdict(list)
        for document in file.read().split(EOT):
            script = script_of(document)
            if script:
                groups[script].append(document)
    return {script: "\n".join(groups[script]) for script in SCRIPTS if script in groups}


def _prime_utf8(text: str) -> None:
    """Make the str's UTF-8 (CPython keeps it with the str once asked) before a baseline: our
    encoder reads it, and it is the text's memory, not the encoder's."""
    import ctypes

    as_utf8 = ctypes.pythonapi.PyUnicode_AsUTF8AndSize
    as_utf8.restype = ctypes.c_void_p
    as_utf8.argtypes = [ctypes.py_object, ctypes.c_void_p]
    as_utf8(text, None)


def _encoder(name: str, vocab: str, folder: str) -> tuple[Any, Any]:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import encode_one_core

    found, left_out = encode_one_core.encoders(vocab, folder)
    if name not in found:
        raise SystemExit(f"{name} is not available: {'; '.join(left_out)}")
    return found[name]


def _digest(ids: Any) -> str:
    import hashlib

    import numpy as np

    return hashlib.sha256(np.asarray(ids, dtype=np.uint32).tobytes()).hexdigest()


# A child's loaded text and encoder factory, kept between its rounds: {(job, name, vocab, path): ...}.
_LOADED: dict[tuple[str, str, str, str], Any] = {}


def _loaded(job: str, name: str, vocab: str, path: str, texts: Any) -> Any:
    """In a child: (make, encode, texts(path)) for its first round, then the same for every other
    (the factory's temporary folder kept with it)."""
    key = (job, name, vocab, path)
    if key not in _LOADED:
        from bpe_impls.harness import peers

        peers.use_one_core()
        folder = tempfile.TemporaryDirectory()
        make, encode = _encoder(name, vocab, folder.name)
        make()  # (the library's first build: its tables' memory is not the stream's)
        _LOADED[key] = (make, encode, texts(path), folder)
    return _LOADED[key][:3]


def _mode_texts(path: str) -> dict[str, Any]:
    """The text, its two halves, and each mode's MB (worked out once, not every round)."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    warm_half, measured_half = halves(text)
    for part in (text, warm_half, measured_half):
        _prime_utf8(part)
    sizes = {"cold": text, "second": text, "steady": measured_half}
    mb = {mode: len(sizes[mode].encode("utf-8")) / 1e6 for mode in MODES}
    return {"text": text, "warm": warm_half, "measured": measured_half, "mb": mb}


def run_modes(name: str, vocab: str, path: str, round_: int) -> dict[str, Any]:
    """In a child: one round of one encoder: its seconds per mode, its ids' digest per mode, and in
    round 0 what it held (measured in the first round only, so that the later rounds' cold passes
    follow no trim: giving the free memory back makes the next pass fault it in again, which a
    process that does not trim does not pay)."""
    make, encode, texts = _loaded("modes", name, vocab, path, _mode_texts)
    seconds: dict[str, float] = {}
    digests: dict[str, str] = {}

    def timed(encoder: Any, mode: str, data: str) -> None:
        start = time.process_time()
        ids = encode(encoder, data)
        seconds[mode] = time.process_time() - start
        digests[mode] = _digest(ids)

    encoder = make()
    baseline = _resident() if round_ == 0 else 0
    timed(encoder, "cold", texts["text"])
    timed(encoder, "second", texts["text"])
    held = _resident() - baseline if round_ == 0 else None
    del encoder
    encoder = make()
    encode(encoder, texts["warm"])
    timed(encoder, "steady", texts["measured"])
    del encoder
    return {"seconds": seconds, "digests": digests, "held": held, "mb": texts["mb"]}


def _script_texts(path: str) -> tuple[dict[str, str], dict[str, int]]:
    """Each script's documents, and their UTF-8 sizes (worked out once, not every round)."""
    groups = by_script(path)
    for text in groups.values():
        _prime_utf8(text)
    return groups, {script: len(text.encode("utf-8")) for script, text in groups.items()}


def run_scripts(name: str, vocab: str, path: str, round_: int) -> dict[str, Any]:
    """In a child: one round of one encoder: its cold seconds on each script's documents (a fresh
    encoder each), their digests and sizes."""
    make, encode, (groups, sizes) = _loaded("scripts", name, vocab, path, _script_texts)
    seconds, digests = {}, {}
    for script, text in groups.items():
        encoder = make()
        start = time.process_time()
        ids = encode(encoder, text)
        seconds[script] = time.process_time() - start
        digests[script] = _digest(ids)
        del encoder, ids
    return {"seconds": seconds, "digests": digests, "bytes": sizes}


def distinct_pretokens(path: str, vocab: str) -> int:
    """The text's distinct pre-tokens by the vocab's split pattern, split on <|endoftext|> first
    (as the encoder splits it), counted by the project's own counter."""
    from bpe_impls import count_pretokens

    return len(count_pretokens(path, [EOT], 1, pattern="gpt2" if vocab == "gpt2" else vocab.split("_")[0]))


def _paired(job: Any, repeat: int, *args: Any) -> dict[str, dict[str, Any]]:
    """job(name, *args, round_) for each of NAMES in a spawned child of its own, kept for all the
    rounds, the two taking turns round by round (ours then theirs, then theirs then ours, ...): each
    round of one runs next in time to the same round of the other, so that a ratio is taken between
    runs a few seconds apart (this host's speed drifts by a quarter over minutes). Per name: each
    result key's values per round, as {key: {item: [per round]}} for the seconds, else as the first
    round gave them (digests are compared on every round: a round whose ids differ is kept as "NO")."""
    context = get_context("spawn")
    pools = {name: ProcessPoolExecutor(1, mp_context=context) for name in NAMES}
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in NAMES}
    try:
        for round_ in range(repeat):
            for name in NAMES if round_ % 2 == 0 else NAMES[::-1]:
                rounds[name].append(pools[name].submit(job, name, *args, round_).result())
    finally:
        for pool in pools.values():
            pool.shutdown()
    results = {}
    for name, runs in rounds.items():
        first = dict(runs[0])
        first["seconds"] = {item: [run["seconds"][item] for run in runs] for item in first["seconds"]}
        first["digests"] = {
            item: digest if all(run["digests"][item] == digest for run in runs) else "NO"
            for item, digest in first["digests"].items()
        }
        results[name] = first
    return results


def measure(paths: list[str], vocab: str = "gpt2", repeat: int = 3) -> list[dict[str, Any]]:
    """Per text: its MB and distinct pre-tokens, and each encoder's run_modes, rounds paired."""
    figures = []
    for path in paths:
        runs = _paired(run_modes, repeat, vocab, path)
        figures.append(
            {
                "text": os.path.basename(path),
                "mb": os.path.getsize(path) / 1e6,
                "distinct": distinct_pretokens(path, vocab),
                "runs": runs,
            }
        )
    return figures


def measure_scripts(path: str, vocab: str = "gpt2", repeat: int = 3) -> dict[str, dict[str, Any]]:
    return _paired(run_scripts, repeat, vocab, path)


def _paired_ratios(ours: list[float], theirs: list[float]) -> list[float]:
    """Their seconds over ours, round by round (above 1, ours is faster), sorted."""
    return sorted(t / o for o, t in zip(ours, theirs))


def _ratio_cell(ratios: list[float]) -> str:
    """The median of the paired ratios, and their range."""
    return f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})"


def ratios(figure: dict[str, Any]) -> dict[str, float]:
    """Per mode, ours against gigatoken: the median over the rounds of their seconds over ours (above
    1, ours is faster)."""
    ours, giga = (figure["runs"][name] for name in NAMES)
    return {mode: statistics.median(_paired_ratios(ours["seconds"][mode], giga["seconds"][mode])) for mode in MODES}


def modes_rows(figure: dict[str, Any]) -> list[list[str]]:
    """One text's rows: mode, ours MB/s and gigatoken's (medians of the rounds), the paired ratio
    (median, range), same ids."""
    ours, giga = (figure["runs"][name] for name in NAMES)
    rows = []
    for mode in MODES:
        mb = ours["mb"][mode]
        mine, theirs = ours["seconds"][mode], giga["seconds"][mode]
        same = ours["digests"][mode] == giga["digests"][mode] != "NO"
        rows.append(
            [
                mode,
                f"{mb / statistics.median(mine):.1f}",
                f"{mb / statistics.median(theirs):.1f}",
                _ratio_cell(_paired_ratios(mine, theirs)),
                "yes" if same else "NO",
            ]
        )
    rows.append(["held", f"{ours['held'] / 2**20:.0f} MB", f"{giga['held'] / 2**20:.0f} MB", "", ""])
    return rows


def scripts_rows(results: dict[str, dict[str, Any]]) -> list[list[str]]:
    ours, giga = (results[name] for name in NAMES)
    rows = []
    for script, size in ours["bytes"].items():
        mb = size / 1e6
        mine, theirs = ours["seconds"][script], giga["seconds"][script]
        same = ours["digests"][script] == giga["digests"][script] != "NO"
        rows.append(
            [
                script,
                f"{mb:.2f}",
                f"{mb / statistics.median(mine):.1f}",
                f"{mb / statistics.median(theirs):.1f}",
                _ratio_cell(_paired_ratios(mine, theirs)),
                "yes" if same else "NO",
            ]
        )
    return rows


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(row[k])) for row in [header, *rows]) for k in range(len(header))]
    return "\n".join("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)) for row in [header, *rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("texts", nargs="*")
    parser.add_argument("--vocab", default="gpt2", choices=("gpt2", "cl100k_base", "o200k_base"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scripts", metavar="UDHR", help="udhr.txt: cold by script")
    args = parser.parse_args()
    from bpe_impls.encoding.tokenizer import DEFAULT_CACHE_SIZE

    for figure in measure(args.texts, args.vocab, args.repeat):
        print(
            f"\n{figure['text']} ({figure['mb']:.1f} MB, {figure['distinct']:,} distinct pre-tokens; "
            f"our cache's bound {DEFAULT_CACHE_SIZE:,} pre-tokens)"
        )
        print(table(["", "ours MB/s", "gigatoken MB/s", "ours/gigatoken", "same ids"], modes_rows(figure)))
    if args.scripts:
        print(f"\n{os.path.basename(args.scripts)} by script, cold (a fresh encoder per script)")
        print(
            table(
                ["script", "MB", "ours MB/s", "gigatoken MB/s", "ours/gigatoken", "same ids"],
                scripts_rows(measure_scripts(args.scripts, args.vocab, args.repeat)),
            )
        )


if __name__ == "__main__":
    main()
