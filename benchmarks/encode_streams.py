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
the same vocab (encode_one_core.encoders). Each cell is the best of --repeat runs in process CPU
time, pinned to one core; each encoder runs in a child process of its own, so that "held", the
resident memory it keeps after the cold and second passes (its outputs freed, malloc_trim'd) over
what it held built, is its own (the text and its UTF-8 are in both baselines). The ids of both are compared on
every cell. Each text's distinct pre-tokens (by the vocab's pattern) are counted beside it, with our
cache's bound. --scripts: the documents of udhr.txt grouped by the script most of their letters are
in (CJK, Thai, Myanmar, Devanagari, Arabic, Cyrillic, Latin), each group encoded cold: where a cache
miss costs most. Not a unit test: figures on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import collections
import os
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


def run_modes(name: str, vocab: str, path: str, repeat: int) -> dict[str, Any]:
    """In a child: one encoder's best seconds per mode, its ids' digest per mode, what it held."""
    from bpe_impls.harness import peers

    peers.use_one_core()
    with open(path, encoding="utf-8") as file:
        text = file.read()
    warm_half, measured_half = halves(text)
    for part in (text, warm_half, measured_half):
        _prime_utf8(part)
    best = dict.fromkeys(MODES, float("inf"))
    digests: dict[str, str] = {}
    held = 0
    with tempfile.TemporaryDirectory() as folder:
        make, encode = _encoder(name, vocab, folder)
        make()  # (the library's first build: its tables' memory is not the stream's)

        def timed(encoder: Any, mode: str, data: str) -> None:
            start = time.process_time()
            ids = encode(encoder, data)
            best[mode] = min(best[mode], time.process_time() - start)
            digests[mode] = _digest(ids)

        for round_ in range(repeat):
            encoder = make()
            baseline = _resident()
            timed(encoder, "cold", text)
            timed(encoder, "second", text)
            if round_ == 0:
                held = _resident() - baseline
            del encoder
            encoder = make()
            encode(encoder, warm_half)
            timed(encoder, "steady", measured_half)
            del encoder
    sizes = {"cold": text, "second": text, "steady": measured_half}
    mb = {mode: len(sizes[mode].encode("utf-8")) / 1e6 for mode in MODES}
    return {"seconds": best, "digests": digests, "held": held, "mb": mb}


def run_scripts(name: str, vocab: str, path: str, repeat: int) -> dict[str, Any]:
    """In a child: one encoder's best cold seconds on each script's documents, and their digests."""
    from bpe_impls.harness import peers

    peers.use_one_core()
    groups = by_script(path)
    for text in groups.values():
        _prime_utf8(text)
    best = dict.fromkeys(groups, float("inf"))
    digests = {}
    with tempfile.TemporaryDirectory() as folder:
        make, encode = _encoder(name, vocab, folder)
        for _ in range(repeat):
            for script, text in groups.items():
                encoder = make()
                start = time.process_time()
                ids = encode(encoder, text)
                best[script] = min(best[script], time.process_time() - start)
                digests[script] = _digest(ids)
                del encoder, ids
    sizes = {script: len(text.encode("utf-8")) for script, text in groups.items()}
    return {"seconds": best, "digests": digests, "bytes": sizes}


def distinct_pretokens(path: str, vocab: str) -> int:
    """The text's distinct pre-tokens by the vocab's split pattern, split on <|endoftext|> first
    (as the encoder splits it), counted by the project's own counter."""
    from bpe_impls import count_pretokens

    return len(count_pretokens(path, [EOT], 1, pattern="gpt2" if vocab == "gpt2" else vocab.split("_")[0]))


def _children(job: Any, *args: Any) -> dict[str, dict[str, Any]]:
    """job(name, *args) for each of NAMES, each in a fresh spawned process."""
    context = get_context("spawn")
    results = {}
    for name in NAMES:
        with ProcessPoolExecutor(1, mp_context=context) as pool:
            results[name] = pool.submit(job, name, *args).result()
    return results


def measure(paths: list[str], vocab: str = "gpt2", repeat: int = 3) -> list[dict[str, Any]]:
    """Per text: its MB and distinct pre-tokens, and each encoder's run_modes."""
    figures = []
    for path in paths:
        runs = _children(run_modes, vocab, path, repeat)
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
    return _children(run_scripts, vocab, path, repeat)


def ratios(figure: dict[str, Any]) -> dict[str, float]:
    """Per mode, ours against gigatoken (their seconds over ours: above 1, ours is faster)."""
    ours, giga = (figure["runs"][name] for name in NAMES)
    return {mode: giga["seconds"][mode] / ours["seconds"][mode] for mode in MODES}


def modes_rows(figure: dict[str, Any]) -> list[list[str]]:
    """One text's rows: mode, ours MB/s, gigatoken's, the ratio, same ids."""
    ours, giga = (figure["runs"][name] for name in NAMES)
    rows = []
    for mode, ratio in ratios(figure).items():
        mb = ours["mb"][mode]
        mine, theirs = ours["seconds"][mode], giga["seconds"][mode]
        same = ours["digests"][mode] == giga["digests"][mode]
        rows.append([mode, f"{mb / mine:.1f}", f"{mb / theirs:.1f}", f"{ratio:.2f}x", "yes" if same else "NO"])
    rows.append(["held", f"{ours['held'] / 2**20:.0f} MB", f"{giga['held'] / 2**20:.0f} MB", "", ""])
    return rows


def scripts_rows(results: dict[str, dict[str, Any]]) -> list[list[str]]:
    ours, giga = (results[name] for name in NAMES)
    rows = []
    for script, size in ours["bytes"].items():
        mb = size / 1e6
        mine, theirs = ours["seconds"][script], giga["seconds"][script]
        same = ours["digests"][script] == giga["digests"][script]
        rows.append(
            [
                script,
                f"{mb:.2f}",
                f"{mb / mine:.1f}",
                f"{mb / theirs:.1f}",
                f"{theirs / mine:.2f}x",
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
