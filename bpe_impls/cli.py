"""The `bpe` command: train, encode, decode, export between formats, compare trainers, generate corpora.

Errors on bad input print one line (`bpe: error: ...`) and exit 1; Ctrl-C exits 130, SIGTERM and
SIGHUP 128 + the signal's number, after the same cleanup. Outputs are
written atomically, so a failed or interrupted command leaves no partial file. Progress bars go to
stderr, and only when it is a terminal and --quiet is not given.
"""

from __future__ import annotations

import argparse
import codecs
import dataclasses
import json
import os
import resource
import shutil
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from .base.atomic import atomic_write
from .base.errors import BpeError, ConfigError, CorpusError, EncodeError
from .base.patterns import PRESETS, validate_special_tokens
from .base.progress import progress_bar
from .corpus import SkippedRecordsWarning
from .encoding import Tokenizer
from .encoding.dataset import DEFAULT_BLOCK_SIZE as DATASET_BLOCK_SIZE
from .encoding.dataset import (
    DEFAULT_EOT,
    DEFAULT_SHARD_TOKENS,
    encode_dataset,
    inspect_dataset,
    load_manifest,
    read_document,
    tokenizer_digest,
)
from .encoding.encode_file import DEFAULT_BLOCK_SIZE, OUTPUT_FORMATS, encode_file
from .encoding.formats import FORMATS
from .harness.generators import tinystories, web
from .harness.generators.common import write_jsonl, write_pieces
from .harness.generators.tinystories import default_corpus, parse_size
from .harness.verify import PEER_NAMES, REAL_TEXT, TOKENIZER_CLAUSES, TRAINER_CLAUSES
from .trainers import DEFAULT_IMPL, IMPLEMENTATIONS, canonical_name, train_bpe, trainer_names
from .trainers.common import merge_budget

# The harness's heavier parts (compare, scaling, plots, report, the verify engine and Hypothesis)
# are imported by the commands that use them, so `bpe --help` and `bpe train` start quickly.

IDS_PER_WRITE = 1 << 20


def _progress_enabled(args: argparse.Namespace) -> bool:
    return not args.quiet and sys.stderr.isatty()


def _peak_rss_mb() -> float:
    """Peak resident memory of this process in MB (pool workers are measured by `bpe compare`)."""
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bars")


def _add_training_options(parser: argparse.ArgumentParser, vocab_default: int | None) -> None:
    parser.add_argument(
        "--vocab-size",
        type=int,
        required=vocab_default is None,
        default=vocab_default,
        help="final vocabulary size, including the 256 bytes and the special tokens",
    )
    parser.add_argument(
        # One value per flag: with nargs="+" a token before the corpus would swallow the corpus path.
        "--special-token",
        dest="special_tokens",
        action="append",
        default=[],
        metavar="S",
        help="a special token, e.g. '<|endoftext|>'; repeat the flag for several",
    )
    parser.add_argument("--workers", type=int, default=None, help="pre-tokenizer processes (default: all cores)")
    parser.add_argument(
        "--pattern",
        default="gpt2",
        metavar="NAME|REGEX",
        help=f"split pattern: a preset ({', '.join(PRESETS)}) or any regex (default: gpt2)",
    )


_TOKENIZER_HELP = (
    "a saved tokenizer in any format: a directory with vocab.json (gpt2), a tokenizer.json or a directory "
    "holding one (hf), a .tiktoken file or a directory holding one (tiktoken)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bpe", description="Byte-level BPE trainers, side by side.")
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", help="train a tokenizer and save it (--format gpt2, hf or tiktoken)")
    train.add_argument(
        "corpus",
        nargs="+",
        help="corpus files, globs or directories: .txt, .jsonl (each optionally .gz or .zst), .parquet",
    )
    _add_training_options(train, vocab_default=None)
    train.add_argument("--impl", choices=trainer_names(), default=DEFAULT_IMPL, help="trainer")
    train.add_argument(
        "--out", type=Path, required=True, help="output directory (hf: or a .json file; tiktoken: or a .tiktoken file)"
    )
    train.add_argument(
        "--format",
        choices=list(FORMATS),
        default="gpt2",
        help="how to save: gpt2 (vocab.json + merges.txt), hf (tokenizer.json), "
        "tiktoken (.tiktoken ranks + .tiktoken.json); default gpt2",
    )
    train.add_argument(
        "--backend",
        choices=["local", "dask"],
        default="local",
        help="where pre-tokens are counted: this machine's processes, or Dask tasks",
    )
    train.add_argument(
        "--scheduler",
        default=None,
        metavar="tcp://HOST:PORT",
        help="Dask scheduler to count on (default with --backend dask: a LocalCluster of "
        "--workers processes, started and shut down by this command)",
    )
    train.add_argument("--text-field", default="text", help="JSON Lines / Parquet field holding the text")
    train.add_argument(
        "--skip-bad-records",
        action="store_true",
        help="skip bad JSON/Parquet records (counted and reported) instead of failing",
    )
    train.add_argument(
        "--min-pretoken-count",
        type=int,
        default=1,
        metavar="N",
        help="drop pre-tokens seen fewer than N times in the whole corpus before merging "
        "(less memory; changes the result; default 1 = exact)",
    )
    _add_common(train)

    encode = commands.add_parser(
        "encode",
        help="encode a text file to token ids (.npy / .bin), or a data set to token shards (--out-dir)",
        description="Two forms. `bpe encode FILE --out ids.npy`: a UTF-8 text file (special tokens as "
        "specials) on every core, streaming, into a .npy array or a raw .bin of ids; identical for any "
        "--threads. `bpe encode INPUT... --out-dir DIR`: a data set (files, globs or directories: .txt, "
        ".jsonl, each optionally .gz or .zst, .parquet) into shards DIR/shard-NNNNNN.bin of at most "
        "--shard-tokens ids, each with a .idx of uint64 document offsets, and DIR/manifest.json; one "
        "document per JSON Lines record or Parquet row, and per text file; each encoded as "
        "encode_ordinary (special-token strings are plain text) and followed by the EOT id; "
        "identical for any --workers, and resumable: run the same command again after an "
        "interruption. The ids are uint16 when the vocab fits in 65536 ids, else uint32; .bin is "
        "little-endian, headerless (numpy.memmap(path, dtype=np.uint16) reads it, as nanoGPT and "
        "CS336 do).",
    )
    encode.add_argument("--tokenizer", type=Path, required=True, help=_TOKENIZER_HELP)
    encode.add_argument(
        "input", type=Path, nargs="+", metavar="INPUT", help="UTF-8 text file (--out), or data set inputs (--out-dir)"
    )
    encode.add_argument(
        "--out",
        type=Path,
        default=None,
        help="one file to ids: the output file (written to a temp file and renamed; a symlink's target is "
        "replaced; a FIFO or character device is written to directly, not atomically: use --format bin)",
    )
    encode.add_argument(
        "--format",
        choices=OUTPUT_FORMATS,
        default=None,
        help="with --out: npy, a 1-D .npy array; bin, the raw ids, little-endian uint16 (uint32 if the "
        "vocab has more than 65536 ids), no header (default: bin if --out ends in .bin, else npy)",
    )
    encode.add_argument("--threads", type=int, default=None, help="with --out: encoding threads (default: all cores)")
    encode.add_argument(
        "--block-size",
        type=int,
        default=None,
        metavar="BYTES",
        help=f"with --out: bytes read at a time, memory is a few blocks per thread (default {DEFAULT_BLOCK_SIZE}); "
        f"with --out-dir: characters of text per encoding task (default {DATASET_BLOCK_SIZE})",
    )
    encode.add_argument(
        "--out-dir", type=Path, default=None, metavar="DIR", help="a data set to token shards: the output directory"
    )
    encode.add_argument(
        "--text-field",
        default=None,
        metavar="F",
        help="with --out-dir: the JSON Lines / Parquet field holding the text",
    )
    encode.add_argument(
        "--eot",
        default=None,
        metavar="TOKEN|ID|none",
        help="with --out-dir: the id after each document: a special token of the tokenizer, an id, or none "
        f"(default: {DEFAULT_EOT} if the tokenizer has it, else none)",
    )
    encode.add_argument(
        "--shard-tokens",
        type=int,
        default=None,
        metavar="N",
        help=f"with --out-dir: the most ids in a shard (default {DEFAULT_SHARD_TOKENS}); a document is "
        "split across shards only when it alone is longer",
    )
    encode.add_argument(
        "--workers", type=int, default=None, metavar="K", help="with --out-dir: encoding threads (default: all cores)"
    )
    encode.add_argument(
        "--skip-bad-records",
        action="store_true",
        default=None,
        help="with --out-dir: skip bad JSON/Parquet records (counted in the manifest and reported) instead of failing",
    )
    encode.add_argument(
        "--overwrite",
        action="store_true",
        default=None,
        help="with --out-dir: start over, removing the shards and manifest already there",
    )
    encode.add_argument(
        "--backend",
        choices=["local", "dask"],
        default=None,
        help="with --out-dir: where the units are encoded: this machine's threads (local, the default), or "
        "Dask tasks writing into DIR (the same bytes; every worker must see DIR and the inputs at the same paths)",
    )
    encode.add_argument(
        "--scheduler",
        default=None,
        metavar="tcp://HOST:PORT",
        help="with --backend dask: the scheduler (default: a LocalCluster of --workers processes, started and "
        "shut down by this command)",
    )
    _add_common(encode)

    decode = commands.add_parser(
        "decode",
        help="decode token ids (a .npy array or a raw .bin from `bpe encode`) to text",
        description="Decode the ids `bpe encode` wrote back to UTF-8 text. A .npy file carries its dtype; "
        "a .bin file has no header, so its ids are read as bpe encode wrote them: little-endian, "
        "uint16 when the tokenizer's vocab fits in 65536 ids, else uint32 (--dtype overrides).",
    )
    decode.add_argument("--tokenizer", type=Path, required=True, help=_TOKENIZER_HELP)
    decode.add_argument(
        "input",
        type=Path,
        help=".npy or .bin file of token ids, or (with --doc) a directory bpe encode --out-dir wrote",
    )
    decode.add_argument(
        "--doc",
        type=int,
        default=None,
        metavar="N",
        help="decode document N (from 0, in input order) of the token-shard directory INPUT, without its EOT",
    )
    decode.add_argument(
        "--format",
        choices=OUTPUT_FORMATS,
        default=None,
        help="npy or bin (default: bin if the input ends in .bin, else npy, as bpe encode chooses)",
    )
    decode.add_argument(
        "--dtype",
        choices=("uint16", "uint32"),
        default=None,
        help="a .bin file's id type (default: the one bpe encode uses for this tokenizer)",
    )
    decode.add_argument("--out", type=Path, default=None, help="output text file (default: stdout)")
    _add_common(decode)

    inspect = commands.add_parser(
        "inspect",
        help="a token-shard directory's totals (bpe encode --out-dir), every shard's sha256 checked",
        description="Print the totals of a directory `bpe encode --out-dir` wrote (shards, documents, tokens, "
        "dtype, EOT id, complete or not) after checking every shard's .bin and .idx against the "
        "manifest's sizes and sha256; a shard that differs is one line naming it, and exit status 1.",
    )
    inspect.add_argument("dir", type=Path, help="the directory bpe encode --out-dir wrote")
    inspect.add_argument("--json", action="store_true", help="print the totals as one JSON object")

    export = commands.add_parser("export", help="save a tokenizer in another format (gpt2, hf, tiktoken)")
    export.add_argument("--tokenizer", type=Path, required=True, help=_TOKENIZER_HELP)
    export.add_argument("--format", choices=list(FORMATS), required=True, help="the format to write")
    export.add_argument(
        "--out", type=Path, required=True, help="output directory (hf: or a .json file; tiktoken: or a .tiktoken file)"
    )
    _add_common(export)

    compare = commands.add_parser("compare", help="run every trainer on one corpus; time, memory, identical?")
    compare.add_argument(
        "corpus",
        type=Path,
        nargs="?",
        default=None,
        help="UTF-8 text file (default: the embedded, generated TinyStories-style corpus)",
    )
    _add_training_options(compare, vocab_default=1000)
    compare.add_argument(
        "--impl",
        dest="impls",
        action="extend",
        nargs="+",
        choices=trainer_names(),
        default=None,
        help="trainers to run (default: all registered)",
    )
    compare.add_argument(
        "--peers",
        action="store_true",
        help="also HuggingFace tokenizers, rustbpe and tiktoken (pip install -e '.[peers]')",
    )
    _add_subject_options(compare)
    compare.add_argument(
        "--memray",
        type=Path,
        default=None,
        metavar="DIR",
        help="also profile each --trainer and --tokenizer (and ours) with memray: captures written to DIR, "
        "and where each one's peak is held printed (needs memray in the interpreter that runs them)",
    )
    compare.add_argument(
        "--cs336",
        action="store_true",
        help="also run CS336's own resource checks, as its tests define them, on each --trainer and --tokenizer "
        "(ours without them): corpus.en speed (also scaled to this machine), encode_iterable memory, TinyStories 10k",
    )
    compare.add_argument("--json", type=Path, default=None, help="write the results as JSON here")
    compare.add_argument("--plot", type=Path, default=None, help="draw bars of the results to this PNG")
    _add_common(compare)

    scale = commands.add_parser(
        "scaling",
        help="how time and memory grow with corpus, vocab, text and cache; fitted exponents",
        description="Measure every trainer (merge phase and end to end) while the corpus grows (generated "
        "1-32 MB, and prefixes of real fixtures such as kjv.txt) and while the vocab grows (1k-32k), "
        "and every encoder against text and cache size; fit each curve's log-log slope with a 95%% "
        "interval. Default sizes take about 5 minutes on 2 idle cores (8 on a busy machine); --quick "
        "well under a minute. --trainer and --tokenizer add anyone's implementations (as bpe verify takes "
        "them), each measured in a process of its own, with a sentence on what its slope means.",
    )
    scale.add_argument("--quick", action="store_true", help="tiny sizes (CI smoke run: seconds)")
    scale.add_argument(
        "--peers",
        action="store_true",
        help="also HuggingFace tokenizers, rustbpe, gigatoken (train) and tiktoken, HF (encode)",
    )
    scale.add_argument(
        "--real",
        type=Path,
        action="append",
        default=None,
        metavar="FILE",
        help="a real text file to take prefixes of; repeat for several (default: kjv.txt from "
        "the shared fixtures, where found)",
    )
    scale.add_argument(
        "--study",
        dest="studies",
        action="append",
        choices=["corpus", "vocab", "encode"],
        default=None,
        help="measure only this study; repeat for several (default: all)",
    )
    scale.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="skip a point predicted to take longer (default: 10, quick: 3)",
    )
    scale.add_argument("--workers", type=int, default=None, help="pre-tokenizer processes (default: all cores)")
    _add_subject_options(
        scale,
        timeout_default=None,
        timeout_help="a call of your code that takes longer is killed, ending its curve "
        "(default: 4 x --budget, at least 30)",
    )
    scale.add_argument("--json", type=Path, default=None, help="write the curves and fits as JSON here")
    scale.add_argument("--plot", type=Path, default=None, metavar="DIR", help="draw each study as PNG and SVG here")
    _add_common(scale)

    report = commands.add_parser(
        "report",
        help="one self-contained HTML page: compare, scaling, machine, commit; with --trainer/--tokenizer, "
        "a report card of those implementations",
    )
    report.add_argument("out", type=Path, help="output directory (index.html, plus the JSON it was made from)")
    _add_subject_options(report, builtins_option=False)
    report.add_argument(
        "--json", type=Path, default=None, help="a report card's data as JSON here too (it is always in OUT/card.json)"
    )
    report.add_argument(
        "--verify-json",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a `bpe verify --json` verdict to show (repeatable; default: verify the default "
        "trainer and the Tokenizer, and with --peers every installed peer on GPT-2's vocab)",
    )
    report.add_argument("--compare-json", type=Path, default=None, help="a `bpe compare --json` file (default: run it)")
    report.add_argument("--scaling-json", type=Path, default=None, help="a `bpe scaling --json` file (default: run it)")
    report.add_argument(
        "--asv-results",
        type=Path,
        default=None,
        metavar="DIR",
        help="asv's results folder (.asv/results): each benchmark's history over commits, with "
        "asv's regressions, drawn offline (needs the bench extra)",
    )
    report.add_argument(
        "--asv-repo",
        type=Path,
        default=None,
        metavar="DIR",
        help="the git repository whose commits the asv results are of, for their order where two share a "
        "date (default: the one the results folder is in)",
    )
    report.add_argument(
        "--memray",
        type=Path,
        default=None,
        metavar="DIR",
        help="a folder of memray captures (benchmarks/memray_profile.py's --out-dir): each one's "
        "heap peak and the call sites holding it (needs the bench extra)",
    )
    report.add_argument(
        "--no-run",
        action="store_true",
        help="measure nothing: show only the JSON, asv results and memray captures given",
    )
    report.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run (about a minute on 2 idle cores): tiny sizes that check the pipeline; "
        "the page says its figures are not measurements and greys fits with too few points",
    )
    report.add_argument("--peers", action="store_true", help="when running them: with the peers")
    _add_common(report)

    verify = commands.add_parser(
        "verify",
        help="check anyone's BPE trainer, tokenizer or encoder against the contract; shrink any divergence",
        description="Checks every clause of every target given, whatever diverged before, and ends with a table "
        "(target, clause, cases, verdict) and each divergence's shrunk counterexample, how often it reproduced "
        "and a hint. A trainer's vocab is compared as CS336 does, up to the numbering of its ids "
        "(--strict-ids: this project's layout too). Exit status: 0 no divergence found, 1 a divergence found "
        "(a crash or a hang on some input is one), 2 a usage error or an implementation that cannot be "
        "imported or fails every call tried.",
    )
    verify.add_argument(
        "--trainer",
        metavar="REF",
        help="run_train_bpe(input_path, vocab_size, special_tokens): module:function, "
        "path/to/file.py:function, builtin:NAME or a registered name",
    )
    verify.add_argument(
        "--tokenizer",
        metavar="REF",
        help="get_tokenizer(vocab, merges, special_tokens=None) -> object with encode(str) "
        "(decode and encode_iterable checked when present)",
    )
    verify.add_argument(
        "--encoder",
        metavar="NAME|REF",
        help=f"an encoder over --vocab: a peer ({', '.join(PEER_NAMES)}) or a factory REF",
    )
    verify.add_argument(
        "--vocab",
        type=Path,
        metavar="PATH",
        help="the saved tokenizer --encoder runs over (any format bpe encode --tokenizer reads)",
    )
    verify.add_argument(
        "--max-examples", type=int, default=200, metavar="N", help="generated cases per clause (default 200)"
    )
    verify.add_argument("--seed", type=int, default=0, help="the search's seed (default 0: the same cases every run)")
    verify.add_argument(
        "--time-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop generating new cases after this long (a divergence found is still shrunk)",
    )
    verify.add_argument(
        "--call-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="one call to the implementation that takes longer is a hang (default 60)",
    )
    verify.add_argument(
        "--clause",
        action="append",
        default=None,
        metavar="NAME",
        help="check only this clause (repeatable): "
        f"{', '.join(dict.fromkeys([*TRAINER_CLAUSES, *TOKENIZER_CLAUSES, REAL_TEXT]))}",
    )
    verify.add_argument("--fail-fast", action="store_true", help="stop at the first divergence")
    verify.add_argument(
        "--strict-ids",
        action="store_true",
        help="hold the trainer's vocab to this project's layout (special tokens, the 256 bytes, the merges in "
        "order), not only to its tokens and merges",
    )
    verify.add_argument(
        "--require-special",
        action="append",
        default=[],
        metavar="TOKEN",
        help="put TOKEN among the special tokens of every case (repeatable), for implementations that demand "
        "one, such as '<|endoftext|>'",
    )
    verify.add_argument(
        "--replays",
        type=int,
        default=5,
        metavar="N",
        help="fresh runs of each counterexample before it is reported (default 5)",
    )
    verify.add_argument(
        "--python",
        default=None,
        metavar="PATH",
        help="run the implementation under this interpreter (your project's venv, with its own packages); "
        "it needs only the standard library, not bpe_impls",
    )
    verify.add_argument(
        "--corpus",
        type=Path,
        default=None,
        metavar="FILE",
        help="real text of your own (UTF-8) for the real-text stage, in place of the fixtures and bundled samples",
    )
    verify.add_argument("--json", type=Path, default=None, metavar="FILE", help="write the verdict as JSON")
    verify.add_argument("--quiet", action="store_true", help="no progress on stderr")

    regress = commands.add_parser(
        "regress",
        help="the deterministic benchmarks (instruction counts, peak heap) at two commits through asv; "
        "what moved, and exit 1 if anything got worse",
        description="Runs `asv continuous` over BASE and HEAD for the benchmarks -b selects (by default "
        "the instruction counts and peak heap bytes, which repeat to 0.02% and to the byte whatever the "
        "host is doing), then judges each HEAD against BASE by the rule `bpe report --asv-results` uses. "
        "About 2.5-3 minutes a commit for the whole default set on 2 busy cores, building it included (more "
        "under a heavier load). "
        "Run it in a clone with asv.conf.json; needs the bench extra and valgrind.",
    )
    regress.add_argument("base", help="the commit to compare against (a hash, branch, tag, HEAD~1, ...)")
    regress.add_argument("head", help="the commit judged")
    regress.add_argument(
        "-b",
        "--bench",
        default=None,
        metavar="REGEX",
        help="asv's -b: a regular expression searched in NAME(PARAMS) (default: 'Instructions|HeapMemory')",
    )
    regress.add_argument(
        "--factor",
        type=float,
        default=None,
        help="a change beyond this ratio is reported (default 1.05: the counts repeat to 0.02%%)",
    )
    regress.add_argument(
        "--config", type=Path, default=Path("asv.conf.json"), help="asv's configuration (default: ./asv.conf.json)"
    )
    regress.add_argument(
        "--no-run", action="store_true", help="judge asv's saved results of BASE and HEAD; run nothing"
    )
    regress.add_argument("--all", action="store_true", help="list every benchmark, not only those that moved")
    regress.add_argument("--json", type=Path, default=None, metavar="FILE", help="write the verdict as JSON")
    _add_common(regress)

    generate = commands.add_parser(
        "gen-corpus", help="write a seeded corpus of any size (TinyStories, web or intl style)"
    )
    generate.add_argument("out", type=Path, help="output text file")
    generate.add_argument("--size", required=True, help="e.g. 5MB, 200MB, 2GB, 1GiB (of text)")
    generate.add_argument(
        "--jsonl",
        action="store_true",
        help='JSON Lines: one {"text": ...} record per document (a data set for bpe encode --out-dir)',
    )
    generate.add_argument("--seed", type=int, default=0)
    generate.add_argument(
        "--style",
        choices=("tinystories", *web.STYLES),
        default="tinystories",
        help="tinystories: children's stories, ~40k distinct pre-tokens; web: English web text with an "
        "ever-growing tail (identifiers, numbers, URLs, typos, other scripts; ~3 M distinct at 250 MB); "
        "intl: mostly CJK, Cyrillic, Greek, accented Latin",
    )
    _add_common(generate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = {
        "train": cmd_train,
        "encode": cmd_encode,
        "decode": cmd_decode,
        "inspect": cmd_inspect,
        "export": cmd_export,
        "compare": cmd_compare,
        "gen-corpus": cmd_gen_corpus,
        "scaling": cmd_scaling,
        "report": cmd_report,
        "verify": cmd_verify,
        "regress": cmd_regress,
    }[args.command]
    previous: dict[int, _Handler] = {}
    try:
        _stop_on_termination(previous)
        return handler(args)
    except BpeError as exc:
        print(f"bpe: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # output directory not writable, disk full, ...
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"bpe: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM / SIGHUP (Terminated)
        if isinstance(exc, Terminated):
            print(f"bpe: terminated by {exc.name}", file=sys.stderr)
            return 128 + exc.signum
        print("bpe: interrupted", file=sys.stderr)
        return 130
    finally:
        _restore_handlers(previous)


# A signal's handler, as signal.signal takes and gives it back.
_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C raises KeyboardInterrupt, so that the same cleanup
    runs (temp files removed, workers stopped) instead of the process dying on the spot."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


def _stop_on_termination(previous: dict[int, _Handler]) -> None:
    """Make SIGTERM and SIGHUP raise Terminated, recording in `previous` the handlers they had.
    A signal already handled or ignored (nohup) is left alone, as is every signal off the main
    thread (where Python cannot set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) == signal.SIG_DFL:
            previous[signum] = signal.signal(signum, _raise_terminated)


def _restore_handlers(previous: dict[int, _Handler]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def _replay_warnings(caught: list[warnings.WarningMessage]) -> None:
    """The warnings a run caught, shown after it: skipped records as one `bpe: warning:` line each."""
    for warning in caught:
        if issubclass(warning.category, SkippedRecordsWarning):
            print(f"bpe: warning: {warning.message}", file=sys.stderr)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)


def cmd_train(args: argparse.Namespace) -> int:
    if args.scheduler is not None and args.backend != "dask":
        raise ConfigError("--scheduler needs --backend dask")
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SkippedRecordsWarning)
        vocab, merges = train_bpe(
            args.corpus,
            args.vocab_size,
            args.special_tokens,
            impl=args.impl,
            num_workers=args.workers,
            progress=_progress_enabled(args),
            backend=args.backend,
            scheduler=args.scheduler,
            text_field=args.text_field,
            skip_bad_records=args.skip_bad_records,
            min_pretoken_count=args.min_pretoken_count,
            pattern=args.pattern,
        )
    _replay_warnings(caught)
    seconds = time.perf_counter() - start
    written = Tokenizer(vocab, merges, args.special_tokens, pattern=args.pattern).save(args.out, args.format)
    print(
        f"trained {len(merges)} merges (vocab {len(vocab)}) with {args.impl} in {seconds:.2f} s; "
        f"peak RSS of the main process {_peak_rss_mb():.0f} MB (interpreter and libraries included, "
        f"unlike memray's heap peak); wrote {_listing(written)}"
    )
    return 0


def _listing(paths: Sequence[Path]) -> str:
    """`dir/a, b, c` for files in one directory."""
    return f"{paths[0]}" + "".join(f", {path.name}" for path in paths[1:])


def cmd_export(args: argparse.Namespace) -> int:
    tokenizer = Tokenizer.load(args.tokenizer)
    written = tokenizer.save(args.out, args.format)
    print(
        f"wrote {_listing(written)} ({args.format} format, vocab {len(tokenizer.vocab)}, "
        f"pattern {tokenizer.pattern.name})"
    )
    return 0


# The options of each form of `bpe encode` (the other form's are refused, naming them).
_DATASET_OPTIONS = (
    "text_field",
    "eot",
    "shard_tokens",
    "workers",
    "skip_bad_records",
    "overwrite",
    "backend",
    "scheduler",
)
_FILE_OPTIONS = ("format", "threads")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def cmd_encode(args: argparse.Namespace) -> int:
    if args.out_dir is not None:
        return _encode_dataset(args)
    if args.out is None:
        raise ConfigError(
            "bpe encode needs --out FILE (one text file to ids) or --out-dir DIR (a data set to token shards)"
        )
    given = [_flag(name) for name in _DATASET_OPTIONS if getattr(args, name) is not None]
    if given:
        raise ConfigError(f"{given[0]} goes with --out-dir DIR (a data set to token shards), not --out FILE")
    if len(args.input) != 1:
        raise ConfigError(
            f"--out FILE takes one text file, got {len(args.input)} inputs; --out-dir DIR takes a data set"
        )
    source = args.input[0]
    tokenizer = Tokenizer.load(args.tokenizer)
    size = source.stat().st_size if source.is_file() else None
    start = time.perf_counter()
    _make_parent(args.out)
    output_format = args.format or ("bin" if args.out.suffix == ".bin" else "npy")
    # `--out /dev/stdout` (a pipe) carries the ids: the summary must not join them there.
    summary_to = sys.stderr if _is_stdout(args.out) else sys.stdout
    with progress_bar(_progress_enabled(args), total=size, unit="B", unit_scale=True, desc="encode") as bar:
        encoded = encode_file(
            tokenizer,
            source,
            args.out,
            output_format,
            threads=args.threads,
            block_size=DEFAULT_BLOCK_SIZE if args.block_size is None else args.block_size,
            on_progress=bar.update,
        )
    seconds = time.perf_counter() - start
    mb = encoded.bytes_read / 1e6
    print(
        f"encoded {mb:.1f} MB into {encoded.tokens} tokens ({encoded.dtype.name}) in {seconds:.2f} s "
        f"({mb / max(seconds, 1e-9):.2f} MB/s); wrote {args.out}",
        file=summary_to,
    )
    if not args.quiet:
        dtype = encoded.dtype.name
        how = (
            f"little-endian, no header: numpy.memmap(path, dtype=numpy.{dtype}, mode='r')"
            if output_format == "bin"
            else "a .npy array: numpy.load(path, mmap_mode='r')"
        )
        print(f"bpe: ids are {dtype}, {how}", file=sys.stderr)
    return 0


def _eot_option(text: str | None) -> str | int | None:
    """--eot as encode_dataset takes it: "auto" when not given, an id when all digits."""
    if text is None:
        return "auto"
    if text == "none":
        return None
    return int(text) if text.isdecimal() else text


def _encode_dataset(args: argparse.Namespace) -> int:
    """`bpe encode INPUT... --out-dir DIR`: a data set to token shards (encoding.dataset)."""
    if args.out is not None:
        raise ConfigError(
            "give --out FILE (one text file to ids) or --out-dir DIR (a data set to token shards), not both"
        )
    if args.scheduler is not None and args.backend != "dask":
        raise ConfigError("--scheduler needs --backend dask")
    given = [_flag(name) for name in _FILE_OPTIONS if getattr(args, name) is not None]
    if given:
        raise ConfigError(
            f"{given[0]} goes with --out FILE (one text file to ids); with --out-dir the shards are raw .bin "
            "and --workers sets the threads"
        )
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SkippedRecordsWarning)
        manifest = encode_dataset(
            args.input,
            args.tokenizer,
            args.out_dir,
            text_field="text" if args.text_field is None else args.text_field,
            eot=_eot_option(args.eot),
            shard_tokens=DEFAULT_SHARD_TOKENS if args.shard_tokens is None else args.shard_tokens,
            workers=args.workers,
            skip_bad_records=bool(args.skip_bad_records),
            overwrite=bool(args.overwrite),
            progress=_progress_enabled(args),
            block_size=DATASET_BLOCK_SIZE if args.block_size is None else args.block_size,
            backend=args.backend or "local",
            scheduler=args.scheduler,
        )
    _replay_warnings(caught)
    seconds = time.perf_counter() - start
    mb = sum(record.size for record in manifest.inputs) / 1e6
    kept = f"; kept {manifest.kept} complete shards of an earlier run" if manifest.kept else ""
    print(
        f"encoded {len(manifest.inputs)} files ({mb:.1f} MB) into {manifest.documents} documents, "
        f"{manifest.tokens} tokens ({manifest.dtype}) in {len(manifest.shards)} shards in {seconds:.2f} s"
        f"{kept}; wrote {args.out_dir / 'manifest.json'}"
    )
    if not args.quiet:
        print(
            f"bpe: shards are {manifest.dtype}, little-endian, no header: numpy.memmap(shard, "
            f"dtype=numpy.{manifest.dtype}, mode='r'); each .idx holds the uint64 offsets of its documents",
            file=sys.stderr,
        )
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    summary = inspect_dataset(args.dir)
    if args.json:
        print(json.dumps(dataclasses.asdict(summary)))
    else:
        print("\n".join(summary.lines()))
    return 0


def _is_stdout(path: Path) -> bool:
    """Whether `path` names the file this process's standard output is."""
    try:
        out, ours = os.stat(path), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no such file yet, or stdout is no real file
        return False
    return (out.st_dev, out.st_ino) == (ours.st_dev, ours.st_ino)


def _make_parent(path: Path) -> None:
    """Create an output file's directory, as `bpe train` creates its output directory."""
    path.parent.mkdir(parents=True, exist_ok=True)


def _require_npy(path: Path) -> None:
    """A .npy file starts with its magic string; anything else is not one (numpy's own error for,
    say, a text file is about pickled object arrays)."""
    try:
        with open(path, "rb") as file:
            magic = file.read(len(np.lib.format.MAGIC_PREFIX))
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if magic != np.lib.format.MAGIC_PREFIX:
        raise CorpusError(f"{path}: not a readable .npy file: it does not start with the NumPy header")


def _load_bin(path: Path, dtype: np.dtype) -> np.ndarray:
    """A headerless little-endian file of ids, as `bpe encode --format bin` writes it."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if size % dtype.itemsize:
        raise CorpusError(
            f"{path}: {size} bytes is not a whole number of {dtype.name} ids "
            f"({dtype.itemsize} bytes each); check --dtype"
        )
    if size == 0:  # numpy.memmap refuses an empty file
        return np.empty(0, dtype)
    return np.memmap(path, dtype=dtype.newbyteorder("<"), mode="r")


def cmd_decode(args: argparse.Namespace) -> int:
    if args.doc is not None:
        return _decode_document(args)
    tokenizer = Tokenizer.load(args.tokenizer)
    if (args.format or ("bin" if args.input.suffix == ".bin" else "npy")) == "npy":
        _require_npy(args.input)
        if args.dtype is not None:
            raise ConfigError("--dtype is for .bin input; a .npy file carries its own dtype")
        try:
            ids = np.load(args.input, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:  # EOFError: an empty file
            raise CorpusError(f"{args.input}: not a readable .npy file ({exc or 'empty file'})") from None
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise CorpusError(f"{args.input}: expected a 1-D integer array, got shape {ids.shape} {ids.dtype}")
    else:
        ids = _load_bin(args.input, tokenizer.id_dtype(args.dtype))
    decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def pieces() -> Iterator[str]:
        for first in range(0, len(ids), IDS_PER_WRITE):
            batch = ids[first : first + IDS_PER_WRITE].tolist()
            try:
                data = tokenizer.decode_bytes(batch)
            except EncodeError:
                bad = next(i for i, token in enumerate(batch) if token not in tokenizer.vocab)
                raise EncodeError(f"{args.input}: unknown token id {batch[bad]} at position {first + bad}") from None
            yield decoder.decode(data)
        yield decoder.decode(b"", final=True)

    if args.out is not None:
        _make_parent(args.out)
    if args.out is None:
        for piece in pieces():
            sys.stdout.write(piece)
        sys.stdout.flush()
    else:
        with atomic_write(args.out, "w", encoding="utf-8") as out:
            for piece in pieces():
                out.write(piece)
    return 0


def _decode_document(args: argparse.Namespace) -> int:
    """`bpe decode DIR --doc N`: one document of a token-shard directory, as text."""
    given = [flag for flag, value in (("--format", args.format), ("--dtype", args.dtype)) if value is not None]
    if given:
        raise ConfigError(f"{given[0]} is for a .npy or .bin file; a token-shard directory's manifest gives its dtype")
    manifest = load_manifest(args.input)
    tokenizer = Tokenizer.load(args.tokenizer)
    digest = tokenizer_digest(tokenizer)
    if digest != manifest.tokenizer.sha256:
        raise ConfigError(
            f"{args.tokenizer}: not the tokenizer {args.input} was encoded with "
            f"(sha256 {digest[:12]}..., the manifest's {manifest.tokenizer.sha256[:12]}...)"
        )
    text = tokenizer.decode(read_document(args.input, args.doc))
    if args.out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        _make_parent(args.out)
        with atomic_write(args.out, "w", encoding="utf-8") as out:
            out.write(text)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from .harness import peers as peer_adapters
    from .harness.compare import PEER_MODULES, format_report, run_compare, write_json
    from .harness.plots import plot_compare

    specials = list(validate_special_tokens(args.special_tokens))
    if args.corpus is None:
        args.corpus = default_corpus()
        specials = specials or ["<|endoftext|>"]
    elif not args.corpus.is_file():
        raise CorpusError(f"{args.corpus}: no such file")
    merge_budget(args.vocab_size, specials)
    _subject_usage(args)
    if args.plot and not peer_adapters.installed("matplotlib"):  # say so before a run of minutes
        raise ConfigError("--plot needs matplotlib: pip install 'bpe_impls[plot]'")
    if args.peers:
        missing = [module for module in PEER_MODULES if not peer_adapters.installed(module)]
        if missing:
            print(
                f"bpe: note: peers not installed, left out: {', '.join(missing)} (pip install 'bpe_impls[peers]')",
                file=sys.stderr,
            )

    def log(message: str) -> None:
        if not args.quiet:
            print(f"  {message} ...", file=sys.stderr, flush=True)

    impls = [canonical_name(name) for name in args.impls] if args.impls else list(IMPLEMENTATIONS)
    report = run_compare(
        args.corpus,
        args.vocab_size,
        specials,
        impls=impls,
        workers=args.workers,
        peers=args.peers,
        progress=_progress_enabled(args),
        log=log,
        pattern=args.pattern,
        leave_out_slow_naive=args.impls is None,
        trainers=args.trainers,
        tokenizers=args.tokenizers,
        builtins=args.builtins,
        timeout=args.call_timeout,
        python=args.python,
        memray_dir=args.memray,
    )
    print(format_report(report))
    checked = []
    if args.cs336:
        from .harness.cs336 import format_cs336, run_cs336_for

        checked = run_cs336_for(
            args.trainers or ([] if args.tokenizers else ["builtin:native"]),
            args.tokenizers or ([] if args.trainers else ["builtin:tokenizer"]),
            timeout=args.call_timeout,
            python=args.python,
            log=log,
        )
        for checks in checked:
            print("\n" + format_cs336(checks))
    if args.json:
        write_json(
            report, args.json, {"cs336": [dataclasses.asdict(checks) for checks in checked]} if args.cs336 else None
        )
    if args.plot:
        plot_compare(report, args.plot)
    identical = all(row.identical for row in report.rows if row.table == "merge")
    return 0 if identical else 1  # (the implementations under test: their rows say how they did)


def _add_subject_options(
    parser: argparse.ArgumentParser,
    builtins_option: bool = True,
    timeout_default: float | None = 600.0,
    timeout_help: str = "one call to an implementation under test that takes longer is a hang: its row says so "
    "(default 600)",
) -> None:
    """Anyone's implementations, as `bpe verify` takes them, measured beside ours (compare, scaling,
    report)."""
    parser.add_argument(
        "--trainer",
        dest="trainers",
        action="append",
        default=[],
        metavar="REF",
        help="a trainer to measure beside ours (repeatable): run_train_bpe(input_path, vocab_size, special_tokens) "
        "as module:function, path/to/file.py:function, builtin:NAME or a registered name",
    )
    parser.add_argument(
        "--tokenizer",
        dest="tokenizers",
        action="append",
        default=[],
        metavar="REF",
        help="a tokenizer to measure beside ours (repeatable): get_tokenizer(vocab, merges, special_tokens) "
        "-> object with encode (encode_iterable and encode_batch measured when present)",
    )
    if builtins_option:
        parser.add_argument(
            "--no-builtins",
            dest="builtins",
            action="store_false",
            help="measure only the --trainer and --tokenizer given, beside one row of ours for scale",
        )
    parser.add_argument("--call-timeout", type=float, default=timeout_default, metavar="SECONDS", help=timeout_help)
    parser.add_argument(
        "--python",
        default=None,
        metavar="PATH",
        help="run the implementations under test under this interpreter (your project's venv)",
    )


def _subject_usage(args: argparse.Namespace) -> None:
    """ConfigError naming what is wrong with the options _add_subject_options adds."""
    if not getattr(args, "builtins", True) and not (args.trainers or args.tokenizers):
        raise ConfigError("--no-builtins needs a --trainer or a --tokenizer to measure")
    if args.call_timeout is not None and not (np.isfinite(args.call_timeout) and args.call_timeout > 0):
        raise ConfigError(f"--call-timeout must be a finite number of seconds > 0, not {args.call_timeout}")
    if args.python is not None and shutil.which(args.python) is None:
        raise ConfigError(f"--python {args.python}: no such executable")


def _require_matplotlib(flag: str) -> None:
    from .harness import peers as peer_adapters

    if not peer_adapters.installed("matplotlib"):  # say so before a run of minutes
        raise ConfigError(f"{flag} needs matplotlib: pip install 'bpe_impls[plot]'")


def _logger(args: argparse.Namespace):
    def log(message: str) -> None:
        if not args.quiet:
            print(f"  {message} ...", file=sys.stderr, flush=True)

    return log


def cmd_scaling(args: argparse.Namespace) -> int:
    from .harness import scaling
    from .harness.plots import plot_scaling

    if args.plot:
        _require_matplotlib("--plot")
    for path in args.real or []:
        if not path.is_file():
            raise CorpusError(f"{path}: no such file")
    targets = scaling.Targets(
        tuple(dict.fromkeys(args.trainers)),
        tuple(dict.fromkeys(args.tokenizers)),
        builtins=args.builtins,
        call_timeout=args.call_timeout,
        python=args.python,
    )
    sizes = scaling.sizes_for(targets, args.quick)
    if args.budget is not None:
        if not args.budget > 0:
            raise ConfigError(f"--budget must be a positive number of seconds, got {args.budget}")
        sizes = dataclasses.replace(sizes, budget=args.budget)
    _subject_usage(args)
    # A typo in a reference is said now, not at its first point after minutes of ours.
    unloadable = scaling.unloadable([*targets.trainers, *targets.tokenizers], args.python)
    if unloadable is not None:
        raise ConfigError(unloadable)
    report = scaling.run_scaling(
        sizes,
        real=args.real,
        peers=args.peers,
        workers=args.workers,
        studies=args.studies or ("corpus", "vocab", "encode"),
        targets=targets,
        progress=_progress_enabled(args),
        log=_logger(args),
    )
    print(scaling.format_scaling(report))
    if args.json:
        scaling.write_json(report, args.json)
    if args.plot:
        written = plot_scaling(report, args.plot)
        print(f"wrote {len(written)} figures to {args.plot}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .harness.report import write_report

    _require_matplotlib("bpe report")
    _subject_usage(args)
    if args.trainers or args.tokenizers:
        from .harness.card import write_card

        given = [
            flag
            for flag, value in (
                ("--compare-json", args.compare_json),
                ("--scaling-json", args.scaling_json),
                ("--verify-json", args.verify_json),
                ("--asv-results", args.asv_results),
                ("--asv-repo", args.asv_repo),
                ("--memray", args.memray),
                ("--no-run", args.no_run),
            )
            if value
        ]
        if given:
            raise ConfigError(
                f"a report card (--trainer, --tokenizer) measures what it shows: {given[0]} does not apply"
            )
        page = write_card(
            args.out,
            args.trainers,
            args.tokenizers,
            json_path=args.json,
            quick=args.quick,
            peers=args.peers,
            timeout=args.call_timeout,
            python=args.python,
            log=_logger(args),
        )
        print(f"wrote {page}")
        return 0
    if args.json is not None:
        raise ConfigError("--json goes with a report card (--trainer, --tokenizer); the report's data is in OUT/*.json")
    for path in (args.compare_json, args.scaling_json, *args.verify_json):
        if path is not None and not path.is_file():
            raise CorpusError(f"{path}: no such file")
    for folder in (args.asv_results, args.asv_repo, args.memray):
        if folder is not None and not folder.is_dir():
            raise CorpusError(f"{folder}: no such folder")
    page = write_report(
        args.out,
        compare_json=args.compare_json,
        scaling_json=args.scaling_json,
        verify_json=args.verify_json,
        asv_results=args.asv_results,
        asv_repo=args.asv_repo,
        memray_dir=args.memray,
        run=not args.no_run,
        quick=args.quick,
        peers=args.peers,
        progress=_progress_enabled(args),
        log=_logger(args),
    )
    print(f"wrote {page}")
    return 0


def _verify_usage(args: argparse.Namespace) -> str | None:
    """What is wrong with `bpe verify`'s arguments, in one line, or None."""
    if not (args.trainer or args.tokenizer or args.encoder):
        return "give --trainer, --tokenizer or --encoder"
    if bool(args.encoder) != bool(args.vocab):
        return "--encoder and --vocab go together"
    if args.max_examples < 1:
        return f"--max-examples must be at least 1, not {args.max_examples}"
    if args.replays < 1:
        return f"--replays must be at least 1, not {args.replays}"
    for flag, value in (("--time-budget", args.time_budget), ("--call-timeout", args.call_timeout)):
        if value is not None and not (np.isfinite(value) and value >= 0):
            return f"{flag} must be a finite number of seconds >= 0, not {value}"
    if args.call_timeout <= 0:
        return "--call-timeout must be more than 0 seconds"
    if any(not token for token in args.require_special):
        return "--require-special cannot be empty"
    known = {*TRAINER_CLAUSES, *TOKENIZER_CLAUSES, REAL_TEXT}
    for name in args.clause or []:
        if name not in known:
            return f"no clause named {name!r}; the clauses: {', '.join(sorted(known))}"
    if args.python is not None:
        found = shutil.which(args.python)
        if found is None:
            return f"--python {args.python}: no such executable"
    if args.json is not None:
        if args.json.is_dir():
            return f"--json {args.json}: is a directory"
        if not args.json.parent.is_dir():
            return f"--json {args.json}: no such directory {args.json.parent}"
    return None


def cmd_verify(args: argparse.Namespace) -> int:
    """0: no divergence; 1: one found; 2: usage, or an implementation that cannot be loaded or called."""
    from .harness.verify import (
        ImplementationError,
        SearchSettings,
        Verification,
        merge_verifications,
        verdict_table,
        verify_encoder,
        verify_tokenizer,
        verify_trainer,
    )

    problem = _verify_usage(args)
    if problem is not None:
        print(f"bpe verify: error: {problem}", file=sys.stderr)
        return 2
    progress = _progress_enabled(args)
    try:
        options = SearchSettings(
            max_examples=args.max_examples,
            seed=args.seed,
            time_budget=args.time_budget,
            progress=(lambda what: print(f"  checking {what} ...", file=sys.stderr, flush=True)) if progress else None,
            strict_ids=args.strict_ids,
            replays=args.replays,
            fail_fast=args.fail_fast,
            require_special=tuple(args.require_special),
            python=args.python,
            corpus=args.corpus,
        )
    except ConfigError as exc:  # (the corpus: missing, empty or not UTF-8)
        print(f"bpe verify: error: {exc}", file=sys.stderr)
        return 2
    encoder = (
        args.encoder
        if args.encoder is None or ":" in args.encoder or args.encoder not in PEER_NAMES
        else f"peer:{args.encoder}"
    )
    chosen = args.clause

    def wanted(names: Iterable[str]) -> list[str] | None:
        return None if chosen is None else [name for name in names if name in chosen]

    fixtures = chosen is None or REAL_TEXT in chosen
    runs: list[tuple[str, str | None, list[str] | None, Callable[[SearchSettings], Verification]]] = [
        (
            "--trainer",
            args.trainer,
            wanted(TRAINER_CLAUSES),
            lambda o: verify_trainer(
                args.trainer, o, args.call_timeout, clauses=wanted(TRAINER_CLAUSES), fixtures=fixtures
            ),
        ),
        (
            "--tokenizer",
            args.tokenizer,
            wanted(TOKENIZER_CLAUSES),
            lambda o: verify_tokenizer(args.tokenizer, o, args.call_timeout, clauses=wanted(TOKENIZER_CLAUSES)),
        ),
        (
            "--encoder",
            encoder,
            wanted(["encode"]),
            lambda o: verify_encoder(
                encoder, args.vocab, o, args.call_timeout, clauses=wanted(["encode"]), fixtures=fixtures
            ),
        ),
    ]
    # A target with none of the chosen clauses (nor the real text) is not run at all.
    runs = [run for run in runs if run[1] and (run[2] is None or run[2] or (fixtures and run[0] != "--tokenizer"))]
    if not runs:
        print(f"bpe verify: error: no target given has a clause named {', '.join(map(repr, chosen))}", file=sys.stderr)
        return 2
    started = time.monotonic()
    results: list[Verification] = []
    errors: list[str] = []
    for _, _, _, run in runs:
        left = None if args.time_budget is None else max(0.0, args.time_budget - (time.monotonic() - started))
        try:
            # The budget is the whole run's: each target gets what the ones before it left.
            results.append(run(dataclasses.replace(options, time_budget=left)))
        except (ImplementationError, BpeError) as exc:
            errors.append(str(exc))
            continue
        if args.fail_fast and results[-1].divergence is not None:
            break
    merged = merge_verifications(results)
    if merged.clauses:
        for note in merged.notes:
            print(f"note: {note}")
        if merged.corpora:
            print(f"real corpora: {', '.join(merged.corpora)}")
        for skipped in merged.real_text_skipped:
            print(skipped)
        print()
        print(verdict_table(merged))
        print()
        cases = sum(c.cases for c in merged.clauses)
        findings = merged.divergences
        skipped_count = sum(c.status == "skipped" for c in merged.clauses)
        skipped_note = f" ({skipped_count} skipped)" if skipped_count else ""
        if findings:
            failed = sum(c.divergence is not None for c in merged.clauses)
            print(
                f"DIVERGED: {len(findings)} divergence{'s' if len(findings) > 1 else ''} in {failed} of "
                f"{len(merged.clauses)} clauses{skipped_note}, {cases} cases"
            )
        else:
            print(f"passed: no divergence in {cases} cases, {len(merged.clauses)} clauses{skipped_note}")
    if args.json is not None and merged.clauses:
        with atomic_write(args.json, "w", encoding="utf-8") as file:
            json.dump(merged.to_json(), file, indent=1, ensure_ascii=False)
    for error in errors:
        print(f"bpe verify: error: {error}", file=sys.stderr)
    if errors:
        return 2
    return 1 if merged.divergence else 0


def cmd_regress(args: argparse.Namespace) -> int:
    from .harness import regress

    verdict = regress.regress(
        args.base,
        args.head,
        bench=regress.DEFAULT_BENCH if args.bench is None else args.bench,
        factor=regress.DEFAULT_FACTOR if args.factor is None else args.factor,
        config=args.config,
        run=not args.no_run,
        quiet=args.quiet,
        log=_logger(args),
    )
    print(regress.format_verdict(verdict, show_all=args.all))
    if args.json is not None:
        with atomic_write(args.json, "w", encoding="utf-8") as out:
            json.dump(dataclasses.asdict(verdict), out, indent=1)
    return 1 if verdict.worse else 0


def cmd_gen_corpus(args: argparse.Namespace) -> int:
    size = parse_size(args.size)
    start = time.perf_counter()
    progress = _progress_enabled(args)
    if args.style == "tinystories":
        pieces = tinystories.generate_bytes(size, seed=args.seed)
        style = ""
    else:
        pieces = web.generate_bytes(size, seed=args.seed, style=args.style)
        style = f", style {args.style}"
    if args.jsonl:
        write_jsonl(args.out, size, pieces, progress=progress)
        style += ", JSON Lines"
    else:
        write_pieces(args.out, size, pieces, progress=progress)
    seconds = time.perf_counter() - start
    print(f"wrote {size / 1e6:.1f} MB to {args.out} in {seconds:.1f} s (seed {args.seed}{style})")
    return 0
