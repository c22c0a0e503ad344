"""Hints for a divergence: what the implementation probably does wrong, in terms a student can act on.

A divergence's evidence is its counterexample and first difference; a diagnosis is a hint on top
of it, found in two ways:

- probes: the implementation run again on small variations of the counterexample, where the way
  its answer changes pins the cause down (the same text padded to a larger file, the same special
  tokens in another order, the same input with `<|endoftext|>` among the special tokens, ...);
- emulation: the implementation's output compared with what a trainer or an encoder with one known
  bug would give (ties to the smallest pair, merging right to left, GPT-2's pattern without its
  contractions, ...), computed here from the counterexample alone.

Everything here is a pure function of its arguments: the implementation and the reference come as
callables (the engine passes ones that call the isolated process), so each diagnosis is tested
with plain Python stand-ins. A probe that fails (raises `Failed`) proves nothing and is passed over.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import regex

from ...base.patterns import GPT2_CLASSIC_PATTERN

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]
TrainOutput = tuple[Vocab, Merges]
Words = dict[tuple[bytes, ...], int]

# (corpus, special tokens, vocab size) -> (vocab, merges); raises Failed.
TrainFn = Callable[[str, Sequence[str], int], TrainOutput]
# (vocab, merges, special tokens, text) -> ids; raises Failed.
EncodeFn = Callable[[Vocab, Merges, Sequence[str], str], list[int]]
# (vocab, merges, special tokens, chunks) -> ids; raises Failed.
IterableFn = Callable[[Vocab, Merges, Sequence[str], Sequence[str]], list[int]]

EOT = "<|endoftext|>"
# 200 KB of one-byte pre-tokens ("a", "1", "a", ...): not a single pair, so a corpus padded with it
# keeps its merges, while a file that large is cut far from the corpus by any split into workers.
PAD = "a1" * 100_000
# A known bug's split pattern: GPT-2's without the contractions, and without `\s+(?!\S)`.
NO_CONTRACTIONS = r""" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
NO_LOOKAHEAD = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+"""
# Buffer sizes real code cuts at.
BUFFER_SIZES = (1024, 2048, 4096, 8192, 16384, 32768, 65536)


class Failed(Exception):
    """The implementation raised, crashed or hung on a probe (its one-line message)."""


@dataclass(frozen=True)
class Diagnosis:
    cause: str  # a short name, the same for every divergence with this cause (they are grouped by it)
    hint: str  # a sentence a student can act on


# ---- the contract's comparison ---------------------------------------------------------------------


def same_output(a: TrainOutput, b: TrainOutput, strict_ids: bool) -> bool:
    """Equal outputs: the merges in order, and the vocab exactly (strict_ids) or up to its ids'
    numbering (CS336's contract: the same set of ids and the same byte strings)."""
    if a[1] != b[1]:
        return False
    if strict_ids:
        return a[0] == b[0]
    return set(a[0]) == set(b[0]) and Counter(a[0].values()) == Counter(b[0].values())


def only_the_id_set_differs(a: TrainOutput, b: TrainOutput) -> bool:
    """The same merges and tokens, under another set of ids (a vocab with a hole, say)."""
    return a[1] == b[1] and Counter(a[0].values()) == Counter(b[0].values()) and set(a[0]) != set(b[0])


def _id_list(ids: set[int]) -> str:
    shown = sorted(ids)
    return ", ".join(map(str, shown[:5])) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")


def _ids_are(ids: set[int]) -> str:
    return f"id {_id_list(ids)} is" if len(ids) == 1 else f"ids {_id_list(ids)} are"


def describe_layout(vocab: Vocab, specials: Sequence[str]) -> str:
    """The order the vocab's ids follow: 'ids 0-255: bytes, 256-300: merges, 301: special tokens'."""
    special = {token.encode("utf-8") for token in specials}
    blocks: list[tuple[int, int, str]] = []
    for token_id in sorted(vocab):
        token = vocab[token_id]
        kind = "special tokens" if token in special else "bytes" if len(token) == 1 else "merges"
        if blocks and blocks[-1][2] == kind and blocks[-1][1] == token_id - 1:
            blocks[-1] = (blocks[-1][0], token_id, kind)
        else:
            blocks.append((token_id, token_id, kind))
    return ", ".join(f"{a}-{b}: {kind}" if a != b else f"{a}: {kind}" for a, b, kind in blocks)


# ---- emulation: a trainer and an encoder with one known bug each ------------------------------------


def split_on_specials(text: str, specials: Sequence[str], order: str = "longest") -> list[str]:
    """The text between special tokens, matched longest first (the contract), shortest first, or in
    the order given (a regex alternation tries its branches left to right)."""
    if not specials:
        return [text]
    if order == "given":
        ordered = list(specials)
    else:
        ordered = sorted(specials, key=len, reverse=order == "longest")
    return regex.split("|".join(regex.escape(token) for token in ordered), text)


def count_words(
    text: str,
    specials: Sequence[str],
    pattern: str = GPT2_CLASSIC_PATTERN,
    order: str = "longest",
    split: bool = True,
    skip_blank: bool = False,
) -> Words:
    """Pre-token counts, in first-occurrence order (as a dict or Counter filled in text order);
    `skip_blank` leaves out the pieces between special tokens that are whitespace only (a bug)."""
    words: Words = {}
    for piece in split_on_specials(text, specials if split else [], order):
        if skip_blank and not piece.strip():
            continue
        for match in regex.finditer(pattern, piece):
            word = tuple(bytes([b]) for b in match.group().encode("utf-8"))
            words[word] = words.get(word, 0) + 1
    return words


def merge_word(word: tuple[bytes, ...], pair: tuple[bytes, bytes], right_to_left: bool = False) -> tuple[bytes, ...]:
    """Greedy from the left (the contract: aaaaa -> aa aa a), or from the right (a known bug)."""
    out: list[bytes] = []
    if right_to_left:
        i = len(word) - 1
        while i >= 0:
            if i >= 1 and (word[i - 1], word[i]) == pair:
                out.append(word[i - 1] + word[i])
                i -= 2
            else:
                out.append(word[i])
                i -= 1
        return tuple(reversed(out))
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def pair_counts(words: Words, overlaps_once: bool = False) -> dict[tuple[bytes, bytes], int]:
    """Pair counts in first-occurrence order; a pair overlapping itself ('aaa') counts at each
    position, or once per word (a known bug)."""
    pairs: dict[tuple[bytes, bytes], int] = {}
    for word, count in words.items():
        found: Iterable[tuple[bytes, bytes]] = zip(word, word[1:])
        if overlaps_once:
            found = dict.fromkeys(found)
        for pair in found:
            pairs[pair] = pairs.get(pair, 0) + count
    return pairs


def _ids(merges: Merges) -> dict[bytes, int]:
    # The ids most layouts give: a byte its value, a merge 256 + its index (specials aside).
    ids = {bytes([b]): b for b in range(256)}
    for index, (left, right) in enumerate(merges):
        ids.setdefault(left + right, 256 + index)
    return ids


def best_pair(pairs: dict[tuple[bytes, bytes], int], tie: str, merges: Merges) -> tuple[bytes, bytes]:
    """The most frequent pair; ties to the greatest bytes (the contract), the smallest bytes, the
    greatest ids, or the first seen (max() over a dict in insertion order)."""
    if tie == "greatest":
        return max(pairs, key=lambda pair: (pairs[pair], pair))
    if tie == "smallest":
        return min(pairs, key=lambda pair: (-pairs[pair], pair))
    if tie == "ids":
        ids = _ids(merges)
        return max(pairs, key=lambda pair: (pairs[pair], ids.get(pair[0], -1), ids.get(pair[1], -1)))
    return max(pairs, key=lambda pair: pairs[pair])  # "first"


def train_merges(
    words: Words,
    merges_wanted: int,
    tie: str = "greatest",
    right_to_left: bool = False,
    overlaps_once: bool = False,
) -> Merges:
    """The contract's training loop over pre-token counts, or the same with one known bug."""
    merges: Merges = []
    while len(merges) < merges_wanted:
        pairs = pair_counts(words, overlaps_once)
        if not pairs:
            break
        pair = best_pair(pairs, tie, merges)
        merges.append(pair)
        merged: Words = {}
        for word, count in words.items():
            new = merge_word(word, pair, right_to_left)
            merged[new] = merged.get(new, 0) + count
        words = merged
    return merges


def encode_ids(
    vocab: Vocab,
    merges: Merges,
    specials: Sequence[str],
    text: str,
    pattern: str = GPT2_CLASSIC_PATTERN,
    order: str = "longest",
    split: bool = True,
    rule: str = "rank",
) -> list[int] | None:
    """The contract's encoding, or the same with one known bug: special tokens matched in another
    order or not at all, another split pattern, or a merge rule other than the best-ranked pair
    (leftmost on a tie): "first" (the first mergeable pair of the word), "rightmost" (the
    best-ranked, rightmost on a tie). None where a token is missing from the vocab."""
    ids = {token: i for i, token in vocab.items()}
    ranks = {pair: rank for rank, pair in enumerate(merges)}
    out: list[int] = []
    used = list(specials) if split else []
    if used:
        ordered = list(used) if order == "given" else sorted(used, key=len, reverse=order == "longest")
        chunks = regex.split("(" + "|".join(regex.escape(token) for token in ordered) + ")", text)
    else:
        chunks = [text]
    for k, chunk in enumerate(chunks):
        if k % 2:
            if chunk.encode("utf-8") not in ids:
                return None
            out.append(ids[chunk.encode("utf-8")])
            continue
        for match in regex.finditer(pattern, chunk):
            parts = [bytes([b]) for b in match.group().encode("utf-8")]
            while len(parts) > 1:
                ranked = [(ranks[pair], i) for i, pair in enumerate(zip(parts, parts[1:])) if pair in ranks]
                if not ranked:
                    break
                if rule == "first":
                    i = ranked[0][1]
                elif rule == "rightmost":
                    best = min(rank for rank, _ in ranked)
                    i = max(i for rank, i in ranked if rank == best)
                else:
                    i = min(ranked)[1]
                parts[i : i + 2] = [parts[i] + parts[i + 1]]
            for part in parts:
                if part not in ids:
                    return None
                out.append(ids[part])
    return out


# ---- the trainer ---------------------------------------------------------------------------------


def _try(call: Callable[[], TrainOutput]) -> TrainOutput | None:
    try:
        return call()
    except Failed:
        return None


def _with_special(specials: Sequence[str], token: str, vocab_size: int) -> tuple[list[str], int] | None:
    """The special tokens with `token` among them (the vocab one larger), where adding it changes
    nothing else: it overlaps none of them."""
    if token in specials:
        return list(specials), vocab_size
    if any(token in s or s in token for s in specials):
        return None
    return [*specials, token], vocab_size + 1


def _crash(
    corpus: str, specials: Sequence[str], vocab_size: int, expected: TrainOutput, run: TrainFn
) -> Diagnosis | None:
    """A trainer that raised, crashed or hung: on what it depends."""
    merges_made = len(expected[1])
    if len(expected[0]) < vocab_size:
        # The reference ran out of pairs before vocab_size: does the trainer pass when asked for no more?
        size = len(expected[0])
        if _try(lambda: run(corpus, specials, size)) is not None:
            return Diagnosis(
                "no-pair-left",
                f"fails only once no pair is left: it runs with vocab_size {size}, where the reference stops "
                f"after {merges_made} merge(s), not with {vocab_size}: stop merging when no pair remains "
                "(max() of an empty pair count raises; a loop waiting for vocab_size never ends)",
            )
    if EOT not in specials:
        added = _with_special(specials, EOT, vocab_size)
        if added is not None and _try(lambda: run(corpus, added[0], added[1])) is not None:
            if not specials and _try(lambda: run(corpus, ["<s>"], vocab_size + 1)) is not None:
                return Diagnosis(
                    "no-special-tokens",
                    "fails when special_tokens is empty and runs with one: [] is a valid argument "
                    "(the text is then split on nothing); guard what assumes at least one "
                    "(max() over the special tokens, a pattern joined from none)",
                )
            return Diagnosis(
                "demands-endoftext",
                f"fails unless {EOT!r} is among the special tokens: if your implementation requires it, "
                f"run with --require-special '{EOT}' (every case then has it)",
            )
    return None


def _padded_probes(
    corpus: str, specials: Sequence[str], vocab_size: int, run: TrainFn, reference: TrainFn, strict_ids: bool
) -> Diagnosis | None:
    """The corpus at the start and at the end of a 200 KB file whose rest holds no pair: a trainer
    whose counts are right on both but wrong on the corpus alone depends on the file's size."""
    added = _with_special(specials, EOT, vocab_size)
    if added is None or (EOT not in specials and EOT in corpus):
        return None
    used, size = added

    def agrees(text: str) -> bool:
        want = _try(lambda: reference(text, used, size))
        got = _try(lambda: run(text, used, size))
        return want is not None and got is not None and same_output(want, got, strict_ids)

    first, last = agrees(corpus + EOT + PAD), agrees(PAD + EOT + corpus)
    if first and last:
        return Diagnosis(
            "chunking",
            "your trainer gets this corpus right once the file is padded to 200 KB (text with no pair, after "
            "a special token), with the corpus first or last, but not alone: its counts depend on the "
            "file's size, as when the file's bytes are split between workers at raw offsets, cutting words "
            "(and UTF-8 characters) in two; cut chunks only at a special token (CS336's find_chunk_boundaries)",
        )
    if first:
        return Diagnosis(
            "end-of-file",
            "your trainer gets this corpus right when more text follows it in the file, not at the file's "
            "end: the end of the file is read or counted wrong (its last pre-token or line dropped or cut?)",
        )
    if last:
        return Diagnosis(
            "start-of-file",
            "your trainer gets this corpus right when text precedes it in the file, not at the file's start: "
            "the start of the file is read or counted wrong",
        )
    return None


def _merged(words: Words, pair: tuple[bytes, bytes]) -> Words:
    merged: Words = {}
    for word, count in words.items():
        new = merge_word(word, pair)
        merged[new] = merged.get(new, 0) + count
    return merged


def _counts_as_the_contract(words: Words, merges: Merges, start: int) -> bool:
    """Each of `merges` from `start` on is a most frequent pair of `words` once the merges before it
    are made: the implementation counts pairs as the contract does, whatever it does on a tie. (A
    trainer whose counts are wrong, say from a word cut in two, can tie by chance at one merge.)"""
    state = words
    for index, pair in enumerate(merges):
        if index >= start:
            pairs = pair_counts(state)
            if not pairs or pairs.get(pair) != max(pairs.values()):
                return False
        state = _merged(state, pair)
    return True


def _tie(words: Words, expected: Merges, actual: Merges, more: Callable[[], Merges] | None = None) -> Diagnosis | None:
    """A tie broken otherwise, where the implementation counts every pair as the contract does: its
    merges from the first difference on are each a most frequent pair. `more` gives more of its
    merges to check that on (asked for only once the first difference is a tie)."""
    index = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), None)
    if index is None:
        return None
    state = words
    for pair in expected[:index]:
        state = _merged(state, pair)
    pairs = pair_counts(state)
    want, got = expected[index], actual[index]
    if got not in pairs or pairs[got] != pairs.get(want):
        return None
    longer = more() if more is not None else []
    # (the same merges first, or it is not deterministic enough to tell)
    checked = longer if longer[: len(actual)] == actual else actual
    if not _counts_as_the_contract(words, checked, index):
        return None
    tied = [pair for pair, count in pairs.items() if count == pairs[want]]
    for rule, hint in _TIE_RULES.items():
        if best_pair({pair: pairs[pair] for pair in tied}, rule, expected[:index]) == got:
            return Diagnosis(
                f"tie-{rule}", f"merge {index}, a tie between {len(tied)} pairs at count {pairs[want]}: {hint}"
            )
    return Diagnosis(
        "tie-other",
        f"merge {index}, a tie between {len(tied)} pairs at count {pairs[want]}: the contract takes the "
        f"lexicographically greatest (bytes_left, bytes_right), {want!r}; yours took {got!r}",
    )


@dataclass(frozen=True)
class _Variant:
    """A trainer with one known bug: its merges on any corpus, and the hint it stands for."""

    cause: str
    hint: str
    merges: Callable[[str, Sequence[str], int], Merges]  # (corpus, specials, merges wanted)
    longer_than: int = 0  # characters a corpus needs before the bug can show (a block's size)


_TIE_RULES = {
    "smallest": "ties go to the smallest pair, not the lexicographically greatest (bytes_left, bytes_right)",
    "ids": "ties go to the greatest pair of token ids, not of token bytes (the orders differ once merged "
    "tokens, with ids above 255, meet single bytes)",
    "first": "ties go to the pair seen first (max() over a dict keeps the first maximum), not to the "
    "lexicographically greatest (bytes_left, bytes_right)",
}


def _tie_rule(rule: str) -> Callable[[str, Sequence[str], int], Merges]:
    return lambda corpus, specials, n: train_merges(count_words(corpus, specials), n, tie=rule)


# Block sizes code reads a file in (f.read(n)); a 64 KB block is the classic one.
BLOCK_SIZES = (4096, 8192, 65536, 1 << 20)


def _count_blocks(text: str, specials: Sequence[str], size: int) -> Words:
    """Pre-token counts of a text read in blocks of `size` characters, each pre-tokenized alone."""
    words: Words = {}
    for start in range(0, len(text), size):
        for word, count in count_words(text[start : start + size], specials).items():
            words[word] = words.get(word, 0) + count
    return words


def _blocks(size: int) -> Callable[[str, Sequence[str], int], Merges]:
    return lambda corpus, specials, n: train_merges(_count_blocks(corpus, specials, size), n)


VARIANTS: list[_Variant] = [
    _Variant(
        "greedy-right-to-left",
        "merging within a word goes right to left: 'aaa' with the merge (a, a) must become 'aa a' "
        "(greedy from the left), not 'a aa'",
        lambda corpus, specials, n: train_merges(count_words(corpus, specials), n, right_to_left=True),
    ),
    _Variant(
        "overlaps-once",
        "a pair that overlaps itself is counted once per word: 'aaa' holds (a, a) twice, at each position",
        lambda corpus, specials, n: train_merges(count_words(corpus, specials), n, overlaps_once=True),
    ),
    _Variant(
        "specials-not-split",
        "the text is not split on the special tokens before pre-tokenizing: pairs cross them and their "
        "bytes are merged like any text",
        lambda corpus, specials, n: train_merges(count_words(corpus, specials, split=False), n),
    ),
    _Variant(
        "specials-shortest-first",
        "special tokens that overlap are matched shortest first: sort them longest first before "
        "building the split pattern",
        lambda corpus, specials, n: train_merges(count_words(corpus, specials, order="shortest"), n),
    ),
    _Variant(
        "no-contractions",
        "pre-tokenization leaves out GPT-2's contractions ('s 't 're 've 'm 'll 'd, each its own "
        "pre-token): use GPT-2's pattern as it is",
        lambda corpus, specials, n: train_merges(count_words(corpus, specials, NO_CONTRACTIONS), n),
    ),
    _Variant(
        "whitespace-lookahead",
        r"pre-tokenization lacks GPT-2's `\s+(?!\S)`: in a run of spaces before a word, the last space "
        "goes with the word (' a'), the rest stay one pre-token",
        lambda corpus, specials, n: train_merges(count_words(corpus, specials, NO_LOOKAHEAD), n),
    ),
    _Variant(
        "blank-pieces-skipped",
        "text between special tokens that is only whitespace is skipped (`if chunk.strip():`): its "
        "whitespace is pre-tokens like any other, to count",
        lambda corpus, specials, n: train_merges(count_words(corpus, specials, skip_blank=True), n),
    ),
    *(_Variant(f"tie-{rule}", hint, _tie_rule(rule)) for rule, hint in _TIE_RULES.items()),
    *(
        _Variant(
            "blocks",
            f"the file is read in blocks of {size:,} characters, each pre-tokenized on its own: a word "
            "across a block's end is counted as two pieces; cut blocks only at a special token (CS336's "
            "find_chunk_boundaries), or carry the unfinished pre-token over to the next block",
            _blocks(size),
            longer_than=size,
        )
        for size in BLOCK_SIZES
    ),
]

# Corpora on which the variants' merges part (ties with and without merged tokens, runs of one
# letter, contractions, runs of spaces): when several variants explain a counterexample, the
# implementation's merges on these tell them apart.
PROBE_CORPORA = (
    "az za az za by",
    "aab aab baa baa b",
    "aaaa aaa ab ab ab",
    "it's a cat's hat's",
    "a   b  c    d",
)


def probe_corpora(specials: Sequence[str]) -> list[str]:
    """PROBE_CORPORA, then each special token alone between words and between runs of spaces: the
    variants that handle them otherwise part there."""
    return [
        *PROBE_CORPORA,
        *(f"ab{token}ab {token}ab" for token in specials),
        *(f"ab{t}  {t}  {t}ab" for t in specials),
    ]


def _emulated(
    corpus: str, specials: Sequence[str], expected: Merges, actual: Merges, merges_wanted: int, run: TrainFn
) -> Diagnosis | None:
    """The known bug whose trainer gives exactly the implementation's merges here and, when several
    do, on the probe corpora too. The one named is checked on every probe corpus: where its merges
    differ from the implementation's on some (another library's rule of its own, which only looks
    like a known bug here), the hint says it is the nearest known rule, not the cause."""
    variants = [v for v in VARIANTS if len(corpus) > v.longer_than]
    found = [v for v in variants if v.merges(corpus, specials, merges_wanted) == actual != expected]
    if not found:
        return None
    theirs_on: list[tuple[str, Merges]] = []
    for probe in probe_corpora(specials):
        try:
            theirs_on.append((probe, run(probe, specials, 256 + len(specials) + 10)[1]))
        except Failed:
            continue
        probe, theirs = theirs_on[-1]
        found = [v for v in found if v.merges(probe, specials, 10) == theirs] or found
    chosen = found[0]
    differ = sum(chosen.merges(probe, specials, 10) != theirs for probe, theirs in theirs_on)
    if not differ:
        return Diagnosis(chosen.cause, chosen.hint)
    return Diagnosis(
        f"{chosen.cause}-nearest",
        f"nearest known rule: {chosen.hint}; but on {differ} of {len(theirs_on)} small probe corpora its merges "
        "differ from yours, so your trainer follows a rule of its own (the first difference above is exact)",
    )


def diagnose_train(
    corpus: str,
    specials: Sequence[str],
    vocab_size: int,
    expected: TrainOutput,
    actual: TrainOutput | Failed,
    run: TrainFn,
    reference: TrainFn,
    strict_ids: bool = False,
) -> Diagnosis | None:
    """A hint for a trainer's divergence on (corpus, specials, vocab_size): `expected` is the
    reference's output there, `actual` the implementation's (or how it failed); `run` and
    `reference` train on other inputs."""
    if isinstance(actual, Failed):
        found = _crash(corpus, specials, vocab_size, expected, run)
        if found is None and len(corpus) <= 4096:
            found = _padded_probes(corpus, specials, vocab_size, run, reference, strict_ids)
        return found
    if same_output(actual, expected, strict_ids=False):
        return Diagnosis(
            "numbering",
            "same tokens and merges, numbered differently: this project's layout (checked by --strict-ids) is "
            f"the special tokens, then the 256 bytes, then the merges in order; yours: {describe_layout(actual[0], specials)}",
        )
    if only_the_id_set_differs(actual, expected):
        unused, beyond = set(expected[0]) - set(actual[0]), set(actual[0]) - set(expected[0])
        early = " (training stopped below vocab_size here: no pair was left)" if len(expected[0]) < vocab_size else ""
        return Diagnosis(
            "id-set",
            f"the same tokens and merges, but {_ids_are(unused)} unused and {_id_list(beyond)} used "
            f"instead: CS336's test compares the set of ids, 0 to {len(expected[0]) - 1} for this vocab{early}; "
            "number the tokens from 0 without holes (the special tokens from len(vocab) when they are added, "
            "not from vocab_size - their number)",
        )
    if len(corpus) <= 4096:
        found = _padded_probes(corpus, specials, vocab_size, run, reference, strict_ids)
        if found is not None:
            return found
    if "\r" in corpus:
        translated = corpus.replace("\r\n", "\n").replace("\r", "\n")
        want = _try(lambda: reference(translated, specials, vocab_size))
        if want is not None and same_output(want, actual, strict_ids):
            return Diagnosis(
                "text-mode",
                r"\r\n read as \n (and \r as \n): the file is opened in text mode, which translates newlines; "
                "open it with newline='' (or read bytes and decode)",
            )
    if len([s for s in specials if s in corpus]) >= 2 and any(a != b and a in b for a in specials for b in specials):
        longest_first = sorted(specials, key=len, reverse=True)
        if list(specials) != longest_first:
            got = _try(lambda: run(corpus, longest_first, vocab_size))
            if got is not None and same_output(got, expected, strict_ids):
                return Diagnosis(
                    "specials-order-given",
                    "special tokens that overlap are matched in the order they are given (a regex alternation "
                    "tries its branches left to right): sort them longest first",
                )
    expected_merges, actual_merges = expected[1], actual[1]
    merges_wanted = vocab_size - (len(expected[0]) - len(expected_merges))
    found = _emulated(corpus, specials, expected_merges, actual_merges, merges_wanted, run)
    if found is not None:
        return found
    if len(actual_merges) > len(expected_merges) and actual_merges[: len(expected_merges)] == expected_merges:
        if len(expected[0]) < vocab_size:
            after = f"after merge {len(expected_merges) - 1}" if expected_merges else "in this corpus"
            return Diagnosis(
                "no-pair-left",
                f"merging continued after no pair was left: {after} no pair occurs, yet merge "
                f"{len(expected_merges)} is {actual_merges[len(expected_merges)]!r}; stop when no pair is left, "
                "even below vocab_size (a pair whose count fell to 0 is not a pair)",
            )
        return Diagnosis(
            "too-many-merges",
            f"{len(actual_merges)} merges where vocab_size {vocab_size} leaves room for {len(expected_merges)}: "
            "the vocab's size counts the special tokens and the 256 bytes too",
        )
    if len(actual_merges) < len(expected_merges) and expected_merges[: len(actual_merges)] == actual_merges:
        short = len(expected_merges) - len(actual_merges)
        longer = _try(lambda: run(corpus, specials, vocab_size + short))
        if longer is not None and longer[1] == expected_merges:
            return Diagnosis(
                "stops-short",
                f"training stops {short} merge(s) short of vocab_size: it makes them with vocab_size "
                f"{vocab_size + short}; the vocab of size {vocab_size} holds {len(specials)} special token(s), "
                "256 bytes and the merges",
            )

    def more() -> Merges:
        """More of its merges, to check its counts past the first difference (a tie by chance is
        not a bug of ties): one more training run, only where the first difference is a tie."""
        longer = _try(lambda: run(corpus, specials, vocab_size + 32))
        return [] if longer is None else longer[1]

    return _tie(count_words(corpus, specials), expected_merges, actual_merges, more)


def diagnose_nondeterminism(times: int, of: int, outputs: int) -> Diagnosis:
    """Runs that disagree with each other: the input alone does not decide the output."""
    return Diagnosis(
        "nondeterministic",
        f"the same input gave {outputs} different outputs (the divergence came back in {times} of {of} "
        "replays): something that varies between runs decides, such as ties broken by object ids (id(), "
        "a heap of objects compared by identity) or by the order of a set or of a dict filled from one "
        "(string hashes change between processes)",
    )


# ---- the tokenizer -------------------------------------------------------------------------------


def _first_difference_at(text: str, vocab: Vocab, expected: list[int], actual: list[int]) -> int:
    """The character offset in `text` where the two id lists first part."""
    index = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), min(len(expected), len(actual)))
    prefix = b"".join(vocab.get(i, b"") for i in expected[:index])
    return len(prefix.decode("utf-8", errors="ignore"))


def _buffer_cut(text: str, size: int, encode: Callable[[str], list[int] | None]) -> list[int] | None:
    """encode_iterable that keeps a buffer and, once it holds more than `size` characters, encodes
    up to the last newline within the first `size` of them."""
    out: list[int] = []
    while len(text) > size:
        cut = text.rfind("\n", 0, size)
        if cut < 0:
            break
        part = encode(text[: cut + 1])
        if part is None:
            return None
        out += part
        text = text[cut + 1 :]
    rest = encode(text)
    return None if rest is None else out + rest


def _iterable(
    text: str,
    chunks: Sequence[str],
    specials: Sequence[str],
    vocab: Vocab,
    merges: Merges,
    expected: list[int],
    actual: list[int],
    encode_iterable: IterableFn | None,
) -> Diagnosis | None:
    def plain(part: str) -> list[int] | None:
        return encode_ids(vocab, merges, specials, part)

    per_chunk = [plain(chunk) for chunk in chunks]
    if all(ids is not None for ids in per_chunk) and [i for ids in per_chunk for i in ids or []] == actual:
        lines = list(io.StringIO(text, newline=""))
        what = "line of a file" if list(chunks) == lines else "chunk it is given"
        return Diagnosis(
            "iterable-per-chunk",
            f"encode_iterable encodes each {what} on its own: a pre-token (or a special token) that continues "
            "past a chunk's end is split (' \\n' + 'b' is not how ' \\nb' splits); keep the text after the "
            "chunk's last pre-token boundary and encode it with the next chunk",
        )
    for size in BUFFER_SIZES:
        if len(text) > size and _buffer_cut(text, size, plain) == actual:
            return Diagnosis(
                "iterable-buffer",
                f"encode_iterable cuts its buffer after the last newline within its first {size:,} characters "
                "and encodes the parts on their own: a pre-token that spans the cut (a run of newlines or "
                "spaces) is split; cut only where a pre-token ends for certain, or carry the last pre-token over",
            )
    if encode_iterable is not None:
        try:
            whole = encode_iterable(vocab, merges, specials, [text])
        except Failed:
            return None
        if whole != expected:
            at = _first_difference_at(text, vocab, expected, actual)
            return Diagnosis(
                "iterable-internal-cut",
                f"encode_iterable differs from encode even given the whole text as one chunk, first at "
                f"character {at:,}: it cuts the text itself (a buffer of fixed size?) and a pre-token spans the cut",
            )
    return None


def diagnose_encode(
    text: str,
    specials: Sequence[str],
    vocab: Vocab,
    merges: Merges,
    expected: list[int],
    actual: list[int] | Failed,
    encode: EncodeFn | None = None,
    encode_iterable: IterableFn | None = None,
    chunks: Sequence[str] | None = None,
) -> Diagnosis | None:
    """A hint for a tokenizer's divergence on `text` (or on `chunks`, given to encode_iterable) over
    (vocab, merges, specials): `expected` is the reference's ids, `actual` the implementation's."""
    if isinstance(actual, Failed):
        if not specials and encode is not None:
            token = EOT.encode("utf-8")
            extended = dict(vocab)
            if token not in extended.values():
                extended[max(extended, default=-1) + 1] = token
            try:
                encode(extended, merges, [EOT], text)
            except Failed:
                return None
            return Diagnosis(
                "no-special-tokens",
                "fails when there are no special tokens and runs with one: get_tokenizer is called with "
                "special_tokens=None then (as CS336's tests do); treat None as []",
            )
        return None
    if chunks is not None:
        if encode is not None:
            try:
                own = encode(vocab, merges, specials, text)
            except Failed:
                own = None
            if own == actual:
                # encode_iterable agrees with the implementation's encode: encode is what diverges.
                return diagnose_encode(text, specials, vocab, merges, expected, actual, encode)
        return _iterable(text, chunks, specials, vocab, merges, expected, actual, encode_iterable)
    overlapping = any(a != b and a in b for a in specials for b in specials)
    if overlapping and len([s for s in specials if s in text]) >= 1:
        longest_first = sorted(specials, key=len, reverse=True)
        if encode is not None and list(specials) != longest_first:
            try:
                if encode(vocab, merges, longest_first, text) == expected:
                    return Diagnosis(
                        "specials-order-given",
                        "special tokens that overlap are matched in the order they are given (a regex "
                        "alternation tries its branches left to right): sort them longest first",
                    )
            except Failed:
                pass
        if encode_ids(vocab, merges, specials, text, order="shortest") == actual:
            return Diagnosis(
                "specials-shortest-first",
                "special tokens that overlap are matched shortest first: sort them longest first before "
                "building the split pattern",
            )

    def variant(**options: Any) -> Callable[[], list[int] | None]:
        return lambda: encode_ids(vocab, merges, specials, text, **options)

    variants = [
        (
            "specials-not-split",
            "special tokens are not matched: encode each as its one id before pre-tokenizing the rest",
            variant(split=False),
        ),
        (
            "first-mergeable-pair",
            "each pre-token merges its first (leftmost) mergeable pair; the contract merges the best-ranked "
            "pair (the earliest merge learned), leftmost on a tie",
            variant(rule="first"),
        ),
        (
            "rightmost-on-tie",
            "among equal-ranked pairs the rightmost is merged: 'aaa' with (a, a) must become 'aa a'",
            variant(rule="rightmost"),
        ),
        (
            "no-contractions",
            "pre-tokenization leaves out GPT-2's contractions ('s 't 're 've 'm 'll 'd): use GPT-2's pattern as it is",
            variant(pattern=NO_CONTRACTIONS),
        ),
        (
            "whitespace-lookahead",
            r"pre-tokenization lacks GPT-2's `\s+(?!\S)`: in a run of spaces before a word, the last space goes "
            "with the word",
            variant(pattern=NO_LOOKAHEAD),
        ),
    ]
    for cause, hint, ids in variants:
        if ids() == actual:
            return Diagnosis(cause, hint)
    return None


def diagnose_decode(vocab: Vocab, ids: list[int], expected: str, actual: str) -> Diagnosis | None:
    if actual == "".join(vocab[i].decode("utf-8", errors="replace") for i in ids if i in vocab) != expected:
        return Diagnosis(
            "decode-per-token",
            "decode decodes each token on its own: a character whose UTF-8 bytes are split between tokens "
            "becomes U+FFFD; join the tokens' bytes first, then decode once",
        )
    return None
