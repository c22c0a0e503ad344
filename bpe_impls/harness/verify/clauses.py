"""The clauses of the contract `bpe verify` checks: each name and the promise it stands for.

Plain data, importable without the engine and Hypothesis: the pytest plugin
(bpe_impls.pytest_plugin) makes one test per clause from these at collection time, and pytest
loads that plugin in every run. REAL_TEXT names the real-text stage for `--clause`.
"""

from __future__ import annotations

TRAINER_CLAUSES: dict[str, str] = {
    "tie-break": "each merge takes the most frequent pair; ties go to the lexicographically greatest "
    "(bytes_left, bytes_right), not to ids",
    "greedy-left-to-right": "merging within a word is greedy left to right (aaaaa -> aa aa a), and an "
    "overlapping pair is counted at each position",
    "special-tokens": "the text is split on special tokens first, longest first; no pair crosses one and "
    "they never take part in merges",
    "pre-tokenization": "each piece is pre-tokenized with GPT-2's pattern (whitespace, contractions, digits, "
    "multi-byte UTF-8)",
    "stops-when-no-pair-is-left": "the vocab holds the special tokens, the 256 bytes and the merges (in this "
    "order under --strict-ids); training stops at vocab_size or when no pair is left",
    "deterministic": "the same input gives the same vocab and merges every time (in the same process and in a fresh one)",
}
TOKENIZER_CLAUSES: dict[str, str] = {
    "encode": "encode gives the reference's ids: special tokens matched longest first, each pre-token merged "
    "by the best-ranked pair (leftmost on a tie)",
    "special-tokens-longest-first": "special tokens that overlap, prefix each other or sit side by side are "
    "matched longest first",
    "decode": "decode of the ids gives the text back (when the tokenizer has decode)",
    "encode_iterable": "encode_iterable over any chunking (a file's lines, fixed-size chunks, arbitrary cuts) "
    "gives encode's ids (when the tokenizer has it)",
    "deterministic": "the same text gives the same ids every time (in the same process and in a fresh one)",
}
# The real-text stage after the generated clauses, as `--clause` names it.
REAL_TEXT = "real-text"
