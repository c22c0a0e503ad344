"""Planted regressions: real extra work or memory written into a copy of the source, for the tests
that show the deterministic benchmarks catch them (test_regress_planted.py) and stay quiet
without them. Each plant edits a file of a checkout in place and fails loudly if the code it
plants into has moved (the anchor is gone), so a plant never silently plants nothing.

- route_a's merge step (bpe_impls/trainers/inverted_index.py): after each merge, the pairs of every
  word it rewrote are listed again (measured: +15% instructions on corpus.en at vocab 1000-2000),
  and a two-id slice of each is kept alive (+13% peak heap bytes).
- The compiled encoder's BPE of one pre-token (csrc/encoder_loop.c, encode_pretoken, the work of a
  cache miss): a hash over the pre-token's bytes, ENCODER_ROUNDS times, before its BPE (about +10%
  of a cold encode's instructions on corpus.en with GPT-2's vocab; a warm encode, all hits, is
  untouched).
"""

from __future__ import annotations

from pathlib import Path

ROUTE_A = "bpe_impls/trainers/inverted_index.py"
ENCODER = "csrc/encoder_loop.c"

_ROUTE_A_PLANT = """

# planted (tests/plants.py): the rewritten words' pairs listed again, and a slice of each kept
_real_apply_merge = _apply_merge
_planted_kept: list = []


def _apply_merge(best, new, words, counts, pair_counts, index):  # type: ignore[no-redef]
    rewritten = list(index[best])
    risen = _real_apply_merge(best, new, words, counts, pair_counts, index)
    for w in rewritten:
        list(zip(words[w], words[w][1:]))
        _planted_kept.append(words[w][:2])
    return risen
"""

# Rounds of the planted hash: about 10% of a cold encode of corpus.en (tests/test_regress_planted.py
# measures the count it gives).
ENCODER_ROUNDS = 4
_ENCODER_ANCHOR = "    out->len += t->merged.slots != NULL\n                    ? bpe_scan_merged("
_ENCODER_PLANT = """    {   /* planted (tests/plants.py): a hash over the pre-token's bytes, ROUNDS times */
        uint32_t planted_hash = 0;
        for (size_t round = 0; round < ROUNDS; round++) {
            for (size_t k = 0; k < len; k++) {
                planted_hash = planted_hash * 31u + key[k] + (uint32_t)round;
            }
        }
        volatile uint32_t planted_sink = planted_hash;
        (void)planted_sink;
    }
"""


def plant_route_a(checkout: Path) -> None:
    path = checkout / ROUTE_A
    source = path.read_text(encoding="utf-8")
    if (
        "\ndef _apply_merge(" not in source
        or "_apply_merge(best, new, words, counts, pair_counts, index)" not in source
    ):
        raise AssertionError(f"{path}: route_a's _apply_merge(best, new, words, counts, pair_counts, index) moved")
    path.write_text(source + _ROUTE_A_PLANT, encoding="utf-8")


def plant_encoder(checkout: Path, rounds: int = ENCODER_ROUNDS) -> None:
    path = checkout / ENCODER
    source = path.read_text(encoding="utf-8")
    if source.count(_ENCODER_ANCHOR) != 1:
        raise AssertionError(f"{path}: encode_pretoken's call of bpe_scan_merged / bpe_scan moved")
    plant = _ENCODER_PLANT.replace("ROUNDS", str(rounds))
    path.write_text(source.replace(_ENCODER_ANCHOR, plant + _ENCODER_ANCHOR), encoding="utf-8")
