"""Write csrc/tests/expected.h: what the C core's test program (csrc/tests/) must find, from the Python path.

    python tools/c_core_expectations.py > csrc/tests/expected.h

Every expectation comes from the pure-Python twins, never from the C code: the pre-tokens of a few
texts per preset (`iter_pretokens`) and the classes of their code points (`pinned_table`, the table
the module hands to the scanners); a tiny vocab trained by the naive trainer, the ids the Python
encoder gives with it, and its merges (what the C trainer must find); pre-token counts in first-seen
order; a rank file and the tables `rank_tables_py` reads from it, and faulty rank files it refuses.
tests/test_c_core.py regenerates the file this way and compares it with the committed one.
"""

from __future__ import annotations

import base64
import sys
from collections import Counter
from pathlib import Path

from bpe_impls import Tokenizer
from bpe_impls.base.char_classes import pinned_table
from bpe_impls.base.errors import TokenizerFileError
from bpe_impls.base.patterns import PRESETS, iter_pretokens, split_on_special_tokens
from bpe_impls.encoding.batches import batch_runs as _batch_runs
from bpe_impls.encoding.formats.tiktoken_file import rank_tables_py
from bpe_impls.encoding.tables import build_tables
from bpe_impls.trainers import naive

PATTERNS = ("gpt2", "cl100k", "o200k")  # in the order of the C side's PAT_* numbers

# Texts for the scanners: each preset's alternatives, ASCII long enough for whole 64-byte blocks,
# and code points of every width (Latin-1 for 1-byte strs, BMP for 2-byte, emoji for 4-byte).
SCAN_TEXTS = (
    "Hello, world! It's 2024: we'll see.",
    "  leading spaces\tand tabs\n\nnew lines  \r\n end  ",
    "numbers 1234567 and 3.14159, x=42;",
    "I'M HERE, they'RE 'll 've 'd 's it'",
    "CamelCaseWord HTMLParser McDonald's ÉCOLE naïve café",
    "e\u0301 a\u0308b cafe\u0301s \u0301x",
    "中文字符，日本語のテキスト。한국어",
    "emoji 😀🎉 and ∑ math ≤ 3",
    "Ελληνικά κείμενα ΑΒΓ",
    "A long line of plain ASCII text, well over sixty-four bytes, so that the block scanner takes "
    "whole blocks of it; and a second sentence: it's here (really) -- 12345 times!\n",
    "x\n\n\ny/z//\r\n\r\nw!!\n/",
    "\u017f's long s, Ünïcödé ÀÉÎ ñ",
    "١٢٣٤ digits ٥",
    "   \n ",
)

# The tiny vocab: trained by the naive trainer on CORPUS's GPT-2 pre-tokens.
CORPUS = (
    "the cat sat on the mat. the dog sat on the log. that's the thing: the cats and the dogs "
    "are there, then they're gone. aaaa aaaa abab abab ababab 1234 1234\n"
)
SPECIAL = "<|endoftext|>"
MERGES = 60
ENCODE_TEXTS = (
    "the cat sat on the mat.",
    "the dogs, the cats<|endoftext|>that's the thing",
    "unseen words: zebra quokka, then the catalogue!",
    "a" * 100 + " " + "ab" * 600,  # past SCAN_LIMIT (64): BPE by the heap; past 1024 bytes: not cached
    "<|endoftext|><|endoftext|>",
    "",
)

COUNT_TEXT = "the cat sat on the mat<|endoftext|> the cat sat; the mat's 12345 cats\n\n the end"

# A batch's items' sizes and the number of runs asked for (encode_batch's split).
BATCHES = (((10, 10, 10, 10, 60), 2), ((1,) * 7, 3), ((5, 100, 1, 1, 1, 50), 4), ((3,), 8), ((2, 2, 2, 2), 8))


def c_string(data: bytes) -> str:
    """A C string literal of data: printable ASCII as itself, everything else (and ", \\, ?) in
    octal, which stops after three digits (a hex escape would swallow the digits after it)."""
    out = []
    for byte in data:
        char = chr(byte)
        if 0x20 <= byte < 0x7F and char not in '"\\?':
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def c_lines(data: bytes, indent: str = "    ", width: int = 88) -> str:
    """c_string of data as literals of whole lines of data, about `width` bytes each (C joins
    adjacent literals)."""
    chunks, chunk = [], b""
    for line in data.splitlines(keepends=True):
        if chunk and len(chunk) + len(line) > width:
            chunks.append(chunk)
            chunk = b""
        chunk += line
    chunks.append(chunk)
    return f"\n{indent}".join(map(c_string, chunks))


def numbers(values: list[int], per_line: int = 12) -> str:
    rows = [", ".join(map(str, values[i : i + per_line])) for i in range(0, len(values), per_line)]
    return "\n    " + ",\n    ".join(rows) + ",\n" if rows else "0"


def ends(pieces: list[str], unit) -> list[int]:
    out, at = [], 0
    for piece in pieces:
        at += unit(piece)
        out.append(at)
    return out


def scanner_section(lines: list[str]) -> None:
    table = pinned_table()
    code_points = sorted(set(range(128)) | {ord(c) for text in SCAN_TEXTS for c in text})
    lines.append("/* Classes of the code points the texts use (pinned_table); every other is 0. */")
    lines.append("static const uint32_t class_points[][2] = {")
    pairs = [f"{{0x{cp:X}, {table[cp]}}}," for cp in code_points]
    lines.extend("    " + " ".join(pairs[i : i + 6]) for i in range(0, len(pairs), 6))
    lines.append("};")
    lines.append("")
    lines.append("static const char *const scan_texts[] = {")
    lines.extend(f"    {c_string(text.encode())}," for text in SCAN_TEXTS)
    lines.append("};")
    lines.append("")
    cases = []
    for p, name in enumerate(PATTERNS):
        for t, text in enumerate(SCAN_TEXTS):
            pieces = list(iter_pretokens(text, PRESETS[name]))
            assert "".join(pieces) == text
            byte_ends = ends(pieces, lambda piece: len(piece.encode()))
            char_ends = ends(pieces, len)
            lines.append(f"static const size_t scan_bytes_{p}_{t}[] = {{{numbers(byte_ends)}}};")
            lines.append(f"static const size_t scan_chars_{p}_{t}[] = {{{numbers(char_ends)}}};")
            cases.append(f"    {{{p}, {t}, {len(pieces)}, scan_bytes_{p}_{t}, scan_chars_{p}_{t}}},")
    lines.append("")
    lines.append("/* Each pattern's pre-tokens of each text (iter_pretokens): their ends, in bytes of")
    lines.append(" * the UTF-8 and in code points. */")
    lines.append("static const ScanCase scan_cases[] = {")
    lines.extend(cases)
    lines.append("};")
    lines.append("")


def tiny_vocab() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]], Counter]:
    word_counts = Counter(piece.encode() for piece in iter_pretokens(CORPUS, PRESETS["gpt2"]))
    vocab, merges = naive.train(word_counts, 256 + 1 + MERGES, [SPECIAL])
    return vocab, merges, word_counts


def encoder_section(lines: list[str], vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]]) -> None:
    tables = build_tables(vocab, merges, (SPECIAL,))
    by_rank = sorted(tables.ranks.items(), key=lambda item: item[1][0])
    triples = [(left, right, merged) for (left, right), (_, merged) in by_rank]
    lines.append("/* The tiny vocab's tables (build_tables): each byte's id, and the merges in rank order as")
    lines.append(" * (left id, right id, merged id), as the module's Encoder takes them. */")
    lines.append(f"static const uint32_t tiny_byte_ids[256] = {{{numbers(list(tables.byte_ids))}}};")
    lines.append("static const uint32_t tiny_triples[][3] = {")
    lines.extend(f"    {{{left}, {right}, {merged}}}," for left, right, merged in triples)
    lines.append("};")
    lines.append(f"static const char tiny_special[] = {c_string(SPECIAL.encode())};")
    lines.append(f"#define TINY_SPECIAL_ID {tables.special_token_ids[SPECIAL]}u")
    lines.append("")
    cases = []
    for p, name in enumerate(PATTERNS):
        tokenizer = Tokenizer(vocab, merges, [SPECIAL], pattern=name, encoder="hybrid")
        for t, text in enumerate(ENCODE_TEXTS):
            ids = tokenizer.encode(text)
            assert tokenizer.decode(ids) == text
            lines.append(f"static const uint32_t encode_ids_{p}_{t}[] = {{{numbers(ids)}}};")
            cases.append(f"    {{{p}, {c_string(text.encode())}, {len(ids)}, encode_ids_{p}_{t}}},")
    lines.append("")
    lines.append('/* The ids the Python encoder (encoder="hybrid") gives each text, per pattern, with the')
    lines.append(" * special token recognised. */")
    lines.append("static const EncodeCase encode_cases[] = {")
    lines.extend(cases)
    lines.append("};")
    lines.append("")


def trainer_section(lines: list[str], merges: list[tuple[bytes, bytes]], word_counts: Counter) -> None:
    lines.append("/* The tiny vocab's word counts and the merges the naive trainer made from them. */")
    lines.append("static const WordCount train_words[] = {")
    lines.extend(f"    {{{c_string(word)}, {len(word)}, {count}}}," for word, count in word_counts.items())
    lines.append("};")
    lines.append("static const MergeCase train_merges[] = {")
    lines.extend(f"    {{{c_string(left)}, {len(left)}, {c_string(right)}, {len(right)}}}," for left, right in merges)
    lines.append("};")
    lines.append("")


def counter_section(lines: list[str]) -> None:
    for p, name in enumerate(PATTERNS):
        counts: Counter[bytes] = Counter()
        for part in split_on_special_tokens(COUNT_TEXT, (SPECIAL,)):
            if part != SPECIAL:
                counts.update(piece.encode() for piece in iter_pretokens(part, PRESETS[name]))
        lines.append(f"static const WordCount count_expected_{p}[] = {{")
        lines.extend(f"    {{{c_string(word)}, {len(word)}, {count}}}," for word, count in counts.items())
        lines.append("};")
    lines.append(f"static const char count_text[] = {c_string(COUNT_TEXT.encode())};")
    lines.append("/* Each pattern's pre-token counts of count_text split on the special token, in")
    lines.append(" * first-seen order. */")
    lines.append("static const CountCase count_cases[] = {")
    lines.extend(
        f"    {{{p}, count_expected_{p}, sizeof(count_expected_{p}) / sizeof(WordCount)}},"
        for p in range(len(PATTERNS))
    )
    lines.append("};")
    lines.append("")


def batch_section(lines: list[str]) -> None:
    lines.append("/* Items' cumulative sizes, the runs asked for, and the bounds batches.batch_runs")
    lines.append(" * gives them. */")
    cases = []
    for k, (sizes, parts) in enumerate(BATCHES):
        bounds = _batch_runs([b"x" * size for size in sizes], bytes, parts, parts, 1)
        ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
        lines.append(f"static const int64_t batch_ends_{k}[] = {{{numbers(ends)}}};")
        lines.append(f"static const size_t batch_bounds_{k}[] = {{{numbers(bounds)}}};")
        cases.append(f"    {{batch_ends_{k}, {len(sizes)}, {parts}, batch_bounds_{k}, {len(bounds)}}},")
    lines.append("static const BatchCase batch_cases[] = {")
    lines.extend(cases)
    lines.append("};")
    lines.append("")


def rank_file_section(lines: list[str], vocab: dict[int, bytes]) -> None:
    ordinary = [token for _, token in sorted(vocab.items()) if token != SPECIAL.encode()]
    ranks = {token: rank for rank, token in enumerate(ordinary)}
    good = "".join(f"{base64.b64encode(token).decode()} {rank}\n" for token, rank in ranks.items()).encode()
    tables = rank_tables_py(good, Path("tiny.tiktoken"), ())
    merges = memoryview(tables.merges).cast("I").tolist()
    lines.append("/* A rank file of the tiny vocab's tokens, and what rank_tables_py reads from it. */")
    lines.append(f"static const char rank_file_good[] =\n    {c_lines(good)};")
    lines.append(f"#define RANK_FILE_TOKENS {len(ranks)}")
    lines.append(f"static const uint32_t rank_file_byte_ids[256] = {{{numbers(list(tables.byte_ids))}}};")
    lines.append("static const uint32_t rank_file_merges[][3] = {")
    lines.extend(f"    {{{merges[i]}, {merges[i + 1]}, {merges[i + 2]}}}," for i in range(0, len(merges), 3))
    lines.append("};")
    # Faults the Python reader refuses (so the C reader must not read them), each the good file
    # less `skip` bytes at its start and its end from `keep` on, then `tail`.
    text = good.decode()
    last = text.rindex("\n", 0, len(text) - 1) + 1  # the last line's start
    last_rank = len(ranks) - 1
    first_line = text.index("\n") + 1
    bad = {
        "a rank given twice": (0, last, text[last:].replace(f" {last_rank}\n", " 0\n")),
        "no space before the rank": (0, last, text[last:].replace(" ", "", 1)),
        "a byte without a token": (first_line, len(text), ""),
        "not base64": (0, last, f"@@@@ {last_rank}\n"),
        "a token no merge makes": (0, len(text), f"{base64.b64encode(b'xyz!').decode()} {last_rank + 1}\n"),
    }
    lines.append("/* Rank files the Python reader refuses: rank_file_good[skip:keep] + tail. */")
    lines.append("static const BadRankFile rank_file_bad[] = {")
    for what, (skip, keep, tail) in bad.items():
        try:
            rank_tables_py((text[skip:keep] + tail).encode(), Path("bad.tiktoken"), ())
        except TokenizerFileError:
            pass
        else:
            raise AssertionError(f"the Python reader accepts a rank file with {what}")
        lines.append(f"    {{{c_string(what.encode())}, {skip}, {keep}, {c_string(tail.encode())}}},")
    lines.append("};")
    lines.append("")


def main() -> str:
    vocab, merges, word_counts = tiny_vocab()
    lines = [
        "/* Generated by tools/c_core_expectations.py from the Python path; do not edit. */",
        "#ifndef BPE_TEST_EXPECTED_H",
        "#define BPE_TEST_EXPECTED_H",
        "",
        '#include "test_core.h"',
        "",
    ]
    scanner_section(lines)
    encoder_section(lines, vocab, merges)
    trainer_section(lines, merges, word_counts)
    counter_section(lines)
    batch_section(lines)
    rank_file_section(lines, vocab)
    lines.append("#endif /* BPE_TEST_EXPECTED_H */")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(main())
