"""`bpe verify`'s diagnoses (bpe_impls.harness.verify.diagnose), in-process and fast: each broken
copy in verify_targets/ called directly as the implementation, on a counterexample of its bug, gets
the hint for that bug and no other; the emulated buggy trainers and encoders agree with the
reference where they have no bug to show.

The end-to-end runs (the command, the isolated process, the search) are test_verify_broken.py's.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from test_verify import TARGETS, load_target

from bpe_impls import Tokenizer, train_bpe
from bpe_impls.harness.verify import diagnose
from bpe_impls.harness.verify.diagnose import Failed, same_output
from bpe_impls.harness.verify.engine import FILE_TEXTS, chunked


def _write(corpus: str) -> str:
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", newline="", suffix=".txt", delete=False) as file:
        file.write(corpus)
    return file.name


def trainer(module):
    """The module's run_train_bpe as diagnose calls it: (corpus, specials, vocab_size)."""

    def run(corpus, specials, vocab_size):
        path = _write(corpus)
        try:
            vocab, merges = module.run_train_bpe(path, vocab_size, list(specials))
        except Exception as exc:
            raise Failed(f"raised {type(exc).__name__}: {exc}") from None
        finally:
            Path(path).unlink()
        return dict(vocab), list(merges)

    return run


def ours(corpus, specials, vocab_size):
    path = _write(corpus)
    try:
        vocab, merges = train_bpe(path, vocab_size, list(specials), impl="naive", num_workers=1)
    finally:
        Path(path).unlink()
    return dict(vocab), list(merges)


def train_cause(name, corpus, specials, vocab_size, strict_ids=False):
    run = trainer(load_target(TARGETS / f"{name}.py"))
    expected = ours(corpus, specials, vocab_size)
    try:
        actual = run(corpus, specials, vocab_size)
    except Failed as exc:
        actual = exc
    assert isinstance(actual, Failed) or not same_output(actual, expected, strict_ids), "no divergence here"
    found = diagnose.diagnose_train(corpus, specials, vocab_size, expected, actual, run, ours, strict_ids)
    return found and found.cause


@pytest.mark.parametrize(
    ("name", "corpus", "specials", "vocab_size", "cause"),
    [
        ("broken_chunks_raw_bytes", "aa", [], 257, "chunking"),
        # The same bug seen through a special token cut in two: still chunking, not "no pair left".
        ("broken_chunks_raw_bytes", "<|endoftext|>a", ["<|endoftext|>"], 258, "chunking"),
        ("broken_text_mode_open", "\r\n", [], 257, "text-mode"),
        ("broken_merges_after_no_pair", "aa", [], 258, "no-pair-left"),
        ("broken_no_special_tokens_crash", "aa", [], 257, "no-special-tokens"),
        ("broken_demands_endoftext", "aa", [], 257, "demands-endoftext"),
        ("broken_demands_endoftext", "ab ab", ["<s>"], 258, "demands-endoftext"),
        ("broken_merge_right_to_left", "aaa", [], 258, "greedy-right-to-left"),
        # A tie by the contract's counts, but the bug is the counting: the probes tell them apart.
        ("broken_overlapping_pairs_once", "aa aa aaaaaa", [], 258, "overlaps-once"),
        ("broken_overlapping_pairs_once", "aaab", [], 257, "overlaps-once"),
        ("broken_specials_not_split", "<|endoftext|>a", ["<|endoftext|>"], 258, "specials-not-split"),
        (
            "broken_specials_shortest_first",
            "<|endoftext|>a",
            ["<|endoftext|>", "<|end"],
            259,
            "specials-shortest-first",
        ),
        ("broken_stops_early", "aa", [], 257, "stops-short"),
        ("broken_tiebreak_smallest", "aab", [], 257, "tie-smallest"),
        ("broken_ties_by_ids", "aaaab", [], 258, "tie-ids"),
        ("broken_no_contractions", "'s", [], 257, "no-contractions"),
        ("broken_whitespace_lookahead", "  a", [], 257, "whitespace-lookahead"),
    ],
)
def test_a_trainer_bug_gets_its_hint(name, corpus, specials, vocab_size, cause):
    assert train_cause(name, corpus, specials, vocab_size) == cause


def test_a_vocab_numbered_otherwise_is_a_divergence_only_under_strict_ids():
    run = trainer(load_target(TARGETS / "renumbered_merges_first.py"))
    expected = ours("low lower", ["<|endoftext|>"], 262)
    actual = run("low lower", ["<|endoftext|>"], 262)
    assert same_output(actual, expected, strict_ids=False) and not same_output(actual, expected, strict_ids=True)
    assert train_cause("renumbered_merges_first", "low lower", ["<|endoftext|>"], 262, strict_ids=True) == "numbering"
    hint = diagnose.diagnose_train("low lower", ["<|endoftext|>"], 262, expected, actual, run, ours, True).hint
    assert "0-4: merges, 5-260: bytes, 261: special tokens" in hint


def test_the_reference_and_the_emulated_contract_agree():
    """The emulation's contract (no bug) gives the reference's merges: a variant that matches an
    implementation differs from the contract only by its bug."""
    for corpus, specials in [
        ("low lower lowest newer wider  \n\n it's 12 é中", []),
        ("a<|endoftext|>b <|end ab", ["<|endoftext|>", "<|end"]),
        ("aaaa aaa ab ba ab", []),
    ]:
        size = 256 + len(specials) + 30
        merges = diagnose.train_merges(diagnose.count_words(corpus, specials), 30)
        assert merges == ours(corpus, specials, size)[1]
        vocab, merges = ours(corpus, specials, size)
        assert diagnose.encode_ids(vocab, merges, specials, corpus) == Tokenizer(vocab, merges, specials).encode(corpus)


def test_no_hint_where_the_implementation_is_right_but_for_a_bug_no_probe_knows():
    """A trainer that drops the last merge's second half is no known bug: no hint at all, rather than a wrong one."""

    def odd(corpus, specials, size):
        vocab, merges = ours(corpus, specials, size)
        return vocab, [*merges[:-1], (merges[-1][0], b"?")] if merges else merges

    expected = ours("ab ab cd", [], 258)
    actual = odd("ab ab cd", [], 258)
    assert diagnose.diagnose_train("ab ab cd", [], 258, expected, actual, odd, ours) is None


# ---- the tokenizer ------------------------------------------------------------------------------


def tokenizer_calls(module):
    def encode(vocab, merges, specials, text):
        return module.get_tokenizer(dict(vocab), list(merges), list(specials) or None).encode(text)

    def encode_iterable(vocab, merges, specials, chunks):
        return list(module.get_tokenizer(dict(vocab), list(merges), list(specials) or None).encode_iterable(chunks))

    return encode, encode_iterable


def encode_cause(name, text, specials, vocab, merges, chunks=None):
    encode, encode_iterable = tokenizer_calls(load_target(TARGETS / f"{name}.py"))
    expected = Tokenizer(vocab, merges, specials).encode(text)
    actual = (
        encode_iterable(vocab, merges, specials, chunks)
        if chunks is not None
        else encode(vocab, merges, specials, text)
    )
    assert actual != expected, "no divergence here"
    found = diagnose.diagnose_encode(text, specials, vocab, merges, expected, actual, encode, encode_iterable, chunks)
    return found and found.cause


def small_vocab(corpus, specials=(), merges=40):
    return ours(corpus, list(specials), 256 + len(specials) + merges)


def test_a_tokenizer_bug_gets_its_hint():
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"aa", 257: b"ba"}
    assert encode_cause("broken_first_mergeable_pair", "baa", [], vocab, [(b"a", b"a"), (b"b", b"a")]) == (
        "first-mergeable-pair"
    )
    vocab, merges = small_vocab("<s><s> <s> a <s><s>", ["<s><s>", "<s>"])
    assert encode_cause("broken_specials_shortest_first", "<s><s>", ["<s><s>", "<s>"], vocab, merges) == (
        "specials-shortest-first"
    )
    vocab, merges = small_vocab("it's what's he's")
    assert encode_cause("broken_no_contractions", "it's", [], vocab, merges) == "no-contractions"


def test_encode_iterable_bugs_get_their_hints():
    vocab, merges = small_vocab("a \nb a \n a \nb")
    text = "a \nb"
    assert encode_cause("broken_iterable_per_line", text, [], vocab, merges, chunked(text, "lines")) == (
        "iterable-per-chunk"
    )
    found = None
    for text, _ in FILE_TEXTS:
        if len(text) < 9000:
            vocab, merges = small_vocab(text[:3000], merges=60)
            expected = Tokenizer(vocab, merges).encode(text)
            broken = load_target(TARGETS / "broken_iterable_buffer_8k.py").get_tokenizer(vocab, merges)
            if list(broken.encode_iterable(chunked(text, "lines"))) != expected:
                found = encode_cause("broken_iterable_buffer_8k", text, [], vocab, merges, chunked(text, "lines"))
                break
    assert found == "iterable-buffer"
    # The encoder's own bug seen through encode_iterable is the encoder's, not a cut's.
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"aa", 257: b"ba"}
    merges = [(b"a", b"a"), (b"b", b"a")]
    assert encode_cause("broken_first_mergeable_pair", "x\nbaa", [], vocab, merges, ["x\n", "baa"]) == (
        "first-mergeable-pair"
    )


def test_a_tokenizer_that_fails_without_special_tokens_is_told_none_is_allowed():
    def encode(vocab, merges, specials, text):
        if not specials:
            raise Failed("raised TypeError: 'NoneType' object is not iterable")
        return Tokenizer(vocab, merges, list(specials)).encode(text)

    vocab = {i: bytes([i]) for i in range(256)}
    found = diagnose.diagnose_encode("ab", [], vocab, [], [97, 98], Failed("raised TypeError"), encode)
    assert found.cause == "no-special-tokens" and "special_tokens=None" in found.hint


def test_decode_token_by_token_is_named():
    vocab = {i: bytes([i]) for i in range(256)}
    ids = list("é".encode())
    wrong = "".join(vocab[i].decode("utf-8", errors="replace") for i in ids)
    assert diagnose.diagnose_decode(vocab, ids, "é", wrong).cause == "decode-per-token"


def test_a_trainer_that_reads_in_blocks_is_told_so_and_not_that_it_breaks_ties():
    """A word cut at a 64 KB block's end changes some counts; at the first merge that differs the
    pair taken can tie by chance with the right one under the true counts. The hint is the block,
    found by emulating it, and a tie is claimed only where every later merge is a most frequent pair."""
    run = trainer(load_target(TARGETS / "broken_reads_in_64k_blocks.py"))
    corpus = ("the remarkable elephant wandered yesterday, it's 2024 café.\n" * 1200)[:70000]
    specials = ["<|endoftext|>"]
    size = 256 + 1 + 60
    expected, actual = ours(corpus, specials, size), run(corpus, specials, size)
    assert expected[1] != actual[1]
    found = diagnose.diagnose_train(corpus, specials, size, expected, actual, run, ours)
    assert found is not None and found.cause == "blocks" and "65,536 characters" in found.hint
    words = diagnose.count_words(corpus, specials)
    assert diagnose._tie(words, expected[1], actual[1]) is None


def test_the_probe_corpora_tell_every_two_known_bugs_apart():
    """When several emulated bugs explain a counterexample, the probe corpora decide between them:
    every two of them (and the contract) give different merges on one of the probes at least."""
    specials = ["<|endoftext|>", "<|end"]
    probes = diagnose.probe_corpora(specials)
    contract = diagnose._Variant(
        "contract", "", lambda corpus, specials, n: ours(corpus, specials, 256 + len(specials) + n)[1]
    )
    # (A bug that only a long corpus shows, a block size's, is no candidate on a short one.)
    variants = [contract, *(v for v in diagnose.VARIANTS if not v.longer_than)]
    for i, a in enumerate(variants):
        for b in variants[i + 1 :]:
            assert any(a.merges(p, specials, 10) != b.merges(p, specials, 10) for p in probes), (a.cause, b.cause)
