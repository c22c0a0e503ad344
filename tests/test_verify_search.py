"""The search `bpe verify` runs before its random one (harness/verify/boundary.py) and the
realistic inputs it feeds (harness/verify/strategies.py): the boundary cases do not depend on the
seed and find tokie's "\\t's" divergence on GPT-2's vocab every time, so does the random search
once it samples their pieces; every case is one this project's reference accepts and its own
trainers and tokenizer pass; the broken copies in verify_targets/ are each caught by the boundary
cases of their clause; encode_iterable's realistic chunkings catch the two realistic bugs of the
issue (a buffer re-split at 8 KB, a file's lines encoded one by one); the large corpora make a
trainer that cuts its file into byte ranges diverge.
"""

from __future__ import annotations

import importlib.util
import random
import time
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
from conftest import load_gpt2
from hypothesis import HealthCheck, Phase, given, seed, settings

from bpe_impls import Tokenizer, train_bpe
from bpe_impls.corpus import count_texts
from bpe_impls.encoding.encoders import ENCODERS
from bpe_impls.harness.verify import boundary, strategies
from bpe_impls.harness.verify.clauses import TOKENIZER_CLAUSES, TRAINER_CLAUSES
from bpe_impls.harness.verify.engine import corpus_file
from bpe_impls.harness.verify.refs import ImplementationError, Isolated
from bpe_impls.trainers import DEFAULT_IMPL, IMPLEMENTATIONS, get_trainer

TARGETS = Path(__file__).parent / "verify_targets"
EOT = "<|endoftext|>"


def train(corpus: str, vocab_size: int, specials: list[str], impl: str = "naive") -> tuple[dict, list]:
    with corpus_file(corpus) as path:
        return train_bpe(path, vocab_size, specials, impl=impl, num_workers=1)


@cache
def encode_vocab(specials: tuple[str, ...]) -> tuple[dict, list]:
    """The vocab the encode cases are checked with: trained on encode_vocab_corpus to the end."""
    corpus = boundary.encode_vocab_corpus(list(specials))
    return train(corpus, 256 + len(specials) + boundary.ENCODE_VOCAB_MERGES, list(specials), DEFAULT_IMPL)


def load_reference() -> ModuleType:
    """tests/verify_targets/reference.py, written from the contract alone, as a module of its own
    (the broken copies patch the module named `reference`; this one they never see)."""
    spec = importlib.util.spec_from_file_location("search_reference", TARGETS / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- the boundary cases: few, deterministic, accepted by the reference, passed by our own code -----


def test_every_clause_has_a_few_dozen_cases_at_most_and_unknown_clauses_none():
    for clause in TRAINER_CLAUSES:
        assert 5 <= len(boundary.train_cases(clause)) <= 50, clause
    for clause in TOKENIZER_CLAUSES:
        assert 5 <= len(boundary.encode_cases(clause)) <= 60, clause
    assert boundary.train_cases("no-such-clause") == [] and boundary.encode_cases("encode_iterable-x") == []
    assert boundary.train_cases("encode") == [] and boundary.encode_cases("tie-break") == []


def test_the_cases_do_not_depend_on_any_seed():
    first = (
        {c: boundary.train_cases(c) for c in TRAINER_CLAUSES},
        {c: boundary.encode_cases(c) for c in TOKENIZER_CLAUSES},
    )
    random.seed(12345)
    boundary.merges_to_exhaust.cache_clear()
    boundary._train_cases.cache_clear()
    again = (
        {c: boundary.train_cases(c) for c in TRAINER_CLAUSES},
        {c: boundary.encode_cases(c) for c in TOKENIZER_CLAUSES},
    )
    assert first == again
    # Callers get copies: changing one changes nothing the next call returns.
    boundary.train_cases("special-tokens")[0][1].append("x")
    assert boundary.train_cases("special-tokens") == first[0]["special-tokens"]


def test_the_contraction_cases_cover_each_whitespace_kind_and_the_start_of_the_text():
    texts = [text for text, _ in boundary.encode_cases("encode")]
    corpora = [corpus for corpus, _, _ in boundary.train_cases("pre-tokenization")]
    for whitespace in ("\t", " ", "\n", "\r\n", "  ", "\u3000", "\xa0", "\x0b", "\x0c"):
        for contraction in boundary.CONTRACTIONS:
            assert any(whitespace + contraction in text for text in texts), (whitespace, contraction)
            assert any(whitespace + contraction in corpus for corpus in corpora), (whitespace, contraction)
    assert any(text.startswith("'s") for text in texts) and any(c.startswith("'s") for c in corpora)
    assert any("'S" in text for text in texts)


@pytest.mark.parametrize("clause", list(TRAINER_CLAUSES))
def test_every_train_case_trains_with_the_reference_and_our_trainers_agree(clause):
    impls = [impl for impl in ("route_b", "native") if impl in IMPLEMENTATIONS]
    stopped_early = 0
    for corpus, specials, vocab_size in boundary.train_cases(clause):
        vocab, merges = train(corpus, vocab_size, specials)  # the naive trainer: the executable spec
        budget = vocab_size - 256 - len(specials)
        if clause == "stops-when-no-pair-is-left":
            stopped_early += len(merges) < budget
        else:
            assert len(merges) == budget >= 1, (corpus, specials)  # every merge asked for, and at least one
        for impl in impls:
            assert train(corpus, vocab_size, specials, impl) == (vocab, merges), (impl, corpus, specials)
    if clause == "stops-when-no-pair-is-left":
        assert stopped_early >= 5


@pytest.mark.parametrize("clause", list(TOKENIZER_CLAUSES))
def test_every_encode_case_encodes_and_our_tokenizer_agrees_with_the_plain_reference(clause):
    reference = load_reference()
    for text, specials in boundary.encode_cases(clause):
        vocab, merges = encode_vocab(tuple(specials))
        expected = reference.get_tokenizer(vocab, merges, specials).encode(text)
        for encoder in ENCODERS:
            tokenizer = Tokenizer(vocab, merges, specials, encoder=encoder)
            assert tokenizer.encode(text) == expected, (encoder, text, specials)
        assert tokenizer.decode(expected) == text
        for label, chunks in [("one piece", [text]), *strategies.iterable_chunkings(text)]:
            assert list(tokenizer.encode_iterable(chunks)) == expected, (label, text)


def test_the_encode_vocab_has_merges_for_the_boundary_pre_tokens():
    vocab, merges = encode_vocab(())
    tokens = set(vocab.values())
    for token in (b"'s", b"'ll", b"'re", b"\r\n", b"  ", b" \n", b"\n\n", b"12", b"\xc3\xa9"):
        assert token in tokens, token
    assert "ü".encode() not in tokens and "🙂".encode() not in tokens  # decode must join bytes
    assert len(merges) < boundary.ENCODE_VOCAB_MERGES  # training stopped when no pair was left
    assert encode_vocab(()) == train(boundary.encode_vocab_corpus([]), 256 + boundary.ENCODE_VOCAB_MERGES, [])


# ---- tokie's divergence on GPT-2's vocab, whatever the seed ---------------------------------------


@cache
def gpt2_and_tokie() -> tuple[Tokenizer, object]:
    pytest.importorskip("tokie")
    from bpe_impls.harness.verify.peer_encoders import peer_encoder

    reference = load_gpt2([EOT])
    return reference, peer_encoder("tokie")(dict(reference.vocab), reference.merges, [EOT])


def tokie_encode(text: str) -> list[int]:
    """tokie's ids for `text`: the adapter returns tokie's own result, converted on request."""
    _, tokie = gpt2_and_tokie()
    return tokie.encode(text).untimed_result()  # type: ignore[attr-defined]


def tokie_diverges(text: str) -> bool:
    reference, _ = gpt2_and_tokie()
    return reference.encode(text) != tokie_encode(text)


def test_tokie_diverges_on_a_contraction_after_a_tab():
    reference, _ = gpt2_and_tokie()
    assert reference.encode("\t's") == [197, 338]
    assert tokie_encode("\t's") == [197, 6, 82]


def test_the_boundary_cases_alone_find_tokies_divergence():
    found = [text for text, _ in boundary.encode_cases("encode") if tokie_diverges(text)]
    assert found and any("\t'" in text for text in found), found
    # Over the same Isolated process the engine uses, set up once with GPT-2's vocab.
    reference, _ = gpt2_and_tokie()
    with Isolated("peer:tokie") as tokie:
        tokie.setup("tokenizer", dict(reference.vocab), reference.merges, [EOT])
        isolated = [
            text for text, _ in boundary.encode_cases("encode") if tokie.call("encode", text) != reference.encode(text)
        ]
    assert isolated == found


@pytest.mark.parametrize("search_seed", range(10))
def test_the_random_search_samples_the_boundary_pieces_and_finds_it_for_each_seed(search_seed):
    gpt2_and_tokie()  # skips without tokie
    examples: list[str] = []

    @seed(search_seed)
    @settings(
        max_examples=200,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategies.mixed_text([EOT]))
    def search(text: str) -> None:
        examples.append(text)
        assert not tokie_diverges(text)

    with pytest.raises(AssertionError):
        search()
    assert len(examples) <= 200 and tokie_diverges(examples[-1])


# ---- the broken copies: each caught by the boundary cases of its clause alone -----------------------

TRAINER_BUGS = {
    "broken_merge_right_to_left": "greedy-left-to-right",
    "broken_no_contractions": "pre-tokenization",
    "broken_overlapping_pairs_once": "greedy-left-to-right",
    "broken_specials_not_split": "special-tokens",
    "broken_specials_shortest_first": "special-tokens",
    "broken_stops_early": "stops-when-no-pair-is-left",
    "broken_tiebreak_smallest": "tie-break",
    "broken_ties_by_ids": "tie-break",
    "broken_whitespace_lookahead": "pre-tokenization",
}
TOKENIZER_BUGS = {
    "broken_first_mergeable_pair": "encode",
    "broken_no_contractions": "encode",
    "broken_specials_shortest_first": "special-tokens-longest-first",
    "broken_whitespace_lookahead": "encode",
}


@pytest.mark.parametrize("name", sorted(TRAINER_BUGS))
def test_a_broken_trainer_is_caught_by_the_boundary_cases_of_its_clause(name):
    caught = []
    with Isolated(f"{TARGETS / name}.py:run_train_bpe") as trainer:
        for corpus, specials, vocab_size in boundary.train_cases(TRAINER_BUGS[name]):
            with corpus_file(corpus) as path:
                expected = train_bpe(path, vocab_size, specials, impl="naive", num_workers=1)
                actual = trainer.call("train", path, vocab_size, specials)
            if actual[1] != expected[1] or set(actual[0].values()) != set(expected[0].values()):
                caught.append(corpus)
    assert caught


@pytest.mark.parametrize("name", sorted(TOKENIZER_BUGS))
def test_a_broken_tokenizer_is_caught_by_the_boundary_cases_of_its_clause(name):
    caught = []
    with Isolated(f"{TARGETS / name}.py:get_tokenizer") as tokenizer:
        for text, specials in boundary.encode_cases(TOKENIZER_BUGS[name]):
            vocab, merges = encode_vocab(tuple(specials))
            tokenizer.call("tokenizer", vocab, merges, specials)
            if tokenizer.call("encode", text) != Tokenizer(vocab, merges, specials).encode(text):
                caught.append(text)
    assert caught


def test_the_plain_reference_passes_every_boundary_case_in_its_own_process():
    reference = TARGETS / "reference.py"
    with Isolated(f"{reference}:run_train_bpe") as trainer:
        for clause in TRAINER_CLAUSES:
            for corpus, specials, vocab_size in boundary.train_cases(clause):
                with corpus_file(corpus) as path:
                    assert trainer.call("train", path, vocab_size, specials) == train(corpus, vocab_size, specials)
    with Isolated(f"{reference}:get_tokenizer") as tokenizer:
        for clause in TOKENIZER_CLAUSES:
            for text, specials in boundary.encode_cases(clause):
                vocab, merges = encode_vocab(tuple(specials))
                tokenizer.call("tokenizer", vocab, merges, specials)
                assert tokenizer.call("encode", text) == Tokenizer(vocab, merges, specials).encode(text), text


# ---- realistic inputs: a file's lines and fixed-size reads, long texts, large corpora -----------------


def test_iterable_chunkings_are_labelled_join_back_and_cut_as_files_are_read(tmp_path):
    text = "one\ntwo  \r\n\nthree\rfour" + "x" * 70_000
    chunkings = strategies.iterable_chunkings(text)
    assert [label for label, _ in chunkings] == ["file lines", "chunks of 4096", "chunks of 8192", "chunks of 65536"]
    assert all(label in strategies.REALISTIC_CHUNKINGS for label, _ in chunkings)
    assert all("".join(chunks) == text for _, chunks in chunkings)
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8", newline="")
    with open(path, encoding="utf-8", newline="") as file:
        assert dict(chunkings)["file lines"] == list(file)
    with open(path, encoding="utf-8", newline="") as file:
        assert dict(chunkings)["chunks of 4096"] == list(iter(lambda: file.read(4096), ""))
    unix = "a \nb\n\nc"
    path.write_text(unix, encoding="utf-8")
    with open(path, encoding="utf-8") as file:  # text whose lines end in \n: what open(path) gives
        assert strategies.iterable_chunkings(unix) == [("file lines", list(file))]
    assert strategies.iterable_chunkings("one line") == []  # one piece is encode itself


@pytest.mark.parametrize("specials", [[], [EOT]])
def test_long_texts_cross_every_chunk_size_and_are_deterministic(specials):
    start = time.perf_counter()
    texts = strategies.long_texts(specials)
    assert time.perf_counter() - start < 5
    assert len(texts) == 3 and all(10_000 <= len(text) <= 300_000 for text in texts)
    assert max(len(text) for text in texts) > max(strategies.CHUNK_SIZES)
    assert strategies.long_texts(list(specials)) == texts
    labels = {label for text in texts for label, _ in strategies.iterable_chunkings(text)}
    assert labels == set(strategies.REALISTIC_CHUNKINGS)
    if specials:  # a special token cut in two by a fixed-size read
        cut = [chunks for text in texts for _, chunks in strategies.iterable_chunkings(text)]
        assert any(chunk_cuts(chunks, EOT) for chunks in cut)


def chunk_cuts(chunks: list[str], special: str) -> bool:
    """Whether some boundary between the chunks falls inside an occurrence of `special`."""
    return any(
        special not in a and special not in b and special in a[-len(special) :] + b[: len(special)]
        for a, b in zip(chunks, chunks[1:])
    )


class PerLine(Tokenizer):
    """Encodes each chunk it is fed on its own: each line of a file, as the issue's bug does."""

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:  # type: ignore[override]
        for chunk in iterable:
            yield from self.encode(chunk)


class ResplitAt8K(Tokenizer):
    """Buffers its chunks and, once 8,192 characters are buffered, encodes up to the last newline
    within them and keeps the rest: the issue's bug, wrong where a line's end is not a pre-token's."""

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:  # type: ignore[override]
        buffer = ""
        for chunk in iterable:
            buffer += chunk
            while len(buffer) >= 8192:
                cut = buffer.rfind("\n", 0, 8192) + 1
                if cut == 0:
                    break
                yield from self.encode(buffer[:cut])
                buffer = buffer[cut:]
        yield from self.encode(buffer)


@pytest.mark.parametrize("specials", [[], [EOT]])
def test_the_realistic_chunkings_catch_a_buffer_resplit_at_8k_and_lines_encoded_one_by_one(specials):
    vocab, merges = encode_vocab(tuple(specials))
    correct = Tokenizer(vocab, merges, specials)
    caught: dict[str, set[str]] = {"PerLine": set(), "ResplitAt8K": set()}
    for text in strategies.long_texts(specials):
        expected = correct.encode(text)
        for label, chunks in strategies.iterable_chunkings(text):
            assert list(correct.encode_iterable(chunks)) == expected, label  # no false alarm
            for bug in (PerLine, ResplitAt8K):
                if list(bug(vocab, merges, specials).encode_iterable(chunks)) != expected:
                    caught[bug.__name__].add(label)
    for bug in caught:  # by a file's own lines and by fixed-size reads, no arbitrary cut needed
        assert {"file lines", "chunks of 8192"} <= caught[bug], caught
    # The short boundary texts show the per-line bug with their own lines too.
    for text, text_specials in boundary.encode_cases("encode_iterable"):
        if text_specials == specials and text == "a \nb":
            lines = dict(strategies.iterable_chunkings(text))["file lines"]
            assert list(PerLine(vocab, merges, specials).encode_iterable(lines)) != correct.encode(text)


def test_the_chunkings_strategy_draws_the_realistic_ones_first():
    text = "a \nb\n" * 3000
    realistic = strategies.iterable_chunkings(text)
    drawn = []

    @settings(max_examples=30, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategies.chunkings(text))
    def draw(chunking: tuple[str, list[str]]) -> None:
        assert "".join(chunking[1]) == text
        drawn.append(chunking[0])

    draw()
    assert set(drawn) >= {"arbitrary cuts"} and set(drawn) & {label for label, _ in realistic}


@pytest.mark.parametrize("specials", [[], [EOT]])
def test_large_corpora_hold_a_document_over_64_kb_and_a_file_of_megabytes(specials):
    corpora = strategies.large_corpora(specials)
    assert strategies.large_corpora(list(specials)) == corpora
    sizes = [len(corpus.encode("utf-8")) for corpus in corpora]
    assert sizes[0] < 1_000_000 and 3_000_000 < sizes[1] < 5_000_000
    for corpus in corpora:
        documents = corpus.split(specials[0]) if specials else [corpus]
        assert max(map(len, documents)) > 65536
    if specials:
        assert len(corpora[1].split(specials[0])) > 300


def split_at(corpus: str, places: list[int]) -> list[str]:
    """The corpus cut at byte offsets, each piece decoded on its own (bytes of a character cut in
    two dropped), as a trainer that hands byte ranges to its workers does."""
    data = corpus.encode("utf-8")
    bounds = [0, *places, len(data)]
    return [data[a:b].decode("utf-8", "ignore") for a, b in zip(bounds, bounds[1:])]


@pytest.mark.parametrize("specials", [[], [EOT]])
def test_a_trainer_that_cuts_its_file_into_byte_ranges_diverges_on_the_large_corpora(specials):
    trainer = get_trainer(DEFAULT_IMPL)
    size = strategies.LARGE_VOCAB_SIZE
    for corpus in strategies.large_corpora(specials):
        expected = trainer(count_texts([corpus], specials), size, specials)
        assert len(expected[1]) < size - 256 - len(specials)  # it ran out of pairs first
        length = len(corpus.encode("utf-8"))
        cuts = {f"{n} workers": [length * i // n for i in range(1, n)] for n in (2, 3, 4, 8, 12, 16)}
        cuts["blocks of 64 KiB"] = list(range(65536, length, 65536))
        for how, places in cuts.items():
            assert trainer(count_texts(split_at(corpus, places), specials), size, specials) != expected, how
        # ...and so does one that counts each line on its own (a line ending in spaces).
        lines = corpus.splitlines(keepends=True)
        assert trainer(count_texts(lines, specials), size, specials) != expected


def test_the_large_corpora_train_alike_with_naive_and_native():
    if "native" not in IMPLEMENTATIONS:
        pytest.skip("the native trainer was not built")
    for corpus in strategies.large_corpora([EOT]):
        size = strategies.LARGE_VOCAB_SIZE
        assert train(corpus, size, [EOT], "native") == train(corpus, size, [EOT], "naive")


def test_boundary_train_cases_reach_an_isolated_builtin_trainer_unchanged():
    """The cases travel through a worker as they are (corpus files written byte for byte)."""
    with Isolated("builtin:native" if "native" in IMPLEMENTATIONS else "builtin:route_b") as trainer:
        for clause in ("pre-tokenization", "stops-when-no-pair-is-left"):
            for corpus, specials, vocab_size in boundary.train_cases(clause):
                with corpus_file(corpus) as path:
                    try:
                        actual = trainer.call("train", path, vocab_size, specials)
                    except ImplementationError as exc:  # pragma: no cover - a failure says which
                        pytest.fail(f"{corpus!r}: {exc}")
                assert actual == train(corpus, vocab_size, specials), corpus
