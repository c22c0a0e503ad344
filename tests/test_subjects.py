"""Implementations under test (bpe_impls.harness.subjects): anyone's trainer and tokenizer measured
in an isolated worker, this project's own through the same path.

The figures are checked for what they must be (the same tokens as naive, the same ids as ours, a
pool's memory counted, a streaming encoder holding less than one that reads the whole file), and a
target that raises, hangs or returns the wrong types is an Outcome with the reason.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import fixture_text, require_text

from bpe_impls.harness import subjects
from bpe_impls.harness.generators.tinystories import write_corpus
from bpe_impls.harness.verify import worker
from bpe_impls.harness.verify.peer_encoders import available as peer_available
from bpe_impls.trainers import train_bpe

TARGETS = Path(__file__).parent / "verify_targets"
REFERENCE = TARGETS / "reference.py"
HOSTILE = TARGETS / "hostile" / "hostile.py"
SPECIALS = ["<|endoftext|>"]


@pytest.fixture(scope="module")
def corpus_en() -> str:
    return str(require_text("corpus.en"))


@pytest.fixture(scope="module")
def trained(corpus_en: str) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    return train_bpe(corpus_en, 400, SPECIALS, impl="naive", num_workers=1, progress=False)


def test_a_users_trainer_and_ours_are_measured_the_same_way(corpus_en, trained):
    ours = subjects.train("builtin:native", corpus_en, 400, SPECIALS)
    theirs = subjects.train(f"{REFERENCE}:run_train_bpe", corpus_en, 400, SPECIALS)
    for outcome in (ours, theirs):
        assert outcome.ok, outcome.error
        assert outcome.seconds > 0 and outcome.peak_bytes > 1 << 20
        assert subjects.same_tokens(outcome.value, trained)
    assert ours.value == trained  # the very ids too: ours is naive's layout


def test_a_trainers_pool_counts_toward_its_peak(tmp_path, corpus_en):
    # The child holds 200 MB for a second: the tree's RSS is sampled every 10 ms meanwhile.
    pooled = tmp_path / "pooled.py"
    pooled.write_text(
        textwrap.dedent(
            f"""
            import multiprocessing, sys, time
            sys.path.insert(0, {str(TARGETS)!r})
            from reference import run_train_bpe as reference

            def hold():
                block = bytearray(200 << 20)
                block[::4096] = b"x" * len(block[::4096])
                time.sleep(1.0)

            def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
                child = multiprocessing.get_context("fork").Process(target=hold)
                child.start()
                child.join()
                return reference(input_path, vocab_size, special_tokens)
            """
        )
    )
    outcome = subjects.train(f"{pooled}:run_train_bpe", corpus_en, 300, SPECIALS)
    assert outcome.ok, outcome.error
    assert outcome.peak_bytes > 200 << 20


def test_encoders_give_a_digest_of_their_ids_equal_to_ours(trained):
    text = fixture_text("tinystories_sample.txt")
    vocab, merges = trained
    ours = subjects.encode("builtin:tokenizer", vocab, merges, SPECIALS, text, repeats=2)
    theirs = subjects.encode(f"{REFERENCE}:get_tokenizer", vocab, merges, SPECIALS, text, repeats=2)
    assert ours.ok and theirs.ok, (ours.error, theirs.error)
    expected = subjects.ids_digest(train_tokenizer_ids(vocab, merges, text))
    assert ours.value == theirs.value == expected
    assert ours.runs == theirs.runs == 2


def train_tokenizer_ids(vocab, merges, text: str) -> list[int]:
    from bpe_impls import Tokenizer

    return Tokenizer(vocab, merges, SPECIALS, encoder="heap").encode(text)


def test_encode_iterable_memory_tells_a_streaming_encoder_from_one_that_reads_everything(tmp_path, trained):
    path = tmp_path / "stories.txt"
    write_corpus(path, 4 << 20, seed=1)
    greedy = tmp_path / "greedy.py"
    greedy.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(TARGETS)!r})
            from reference import get_tokenizer as reference

            class ReadsEverything:
                def __init__(self, inner):
                    self.inner = inner

                def encode(self, text):
                    return self.inner.encode(text)

                def encode_iterable(self, lines):
                    return iter(self.inner.encode("".join(lines)))

            def get_tokenizer(vocab, merges, special_tokens=None):
                return ReadsEverything(reference(vocab, merges, special_tokens))
            """
        )
    )
    vocab, merges = trained
    streaming = subjects.encode_iterable("builtin:tokenizer", vocab, merges, SPECIALS, str(path))
    everything = subjects.encode_iterable(f"{greedy}:get_tokenizer", vocab, merges, SPECIALS, str(path))
    assert streaming.ok and everything.ok, (streaming.error, everything.error)
    assert streaming.value == everything.value
    assert everything.peak_bytes > 4 << 20  # at least the text, held whole
    assert streaming.peak_bytes < everything.peak_bytes / 4


def test_a_target_that_fails_is_an_outcome_with_the_reason(tmp_path, trained):
    command = tmp_path / "str_tokens.txt"
    command.write_text("str tokens", encoding="utf-8")
    bad = subjects.train(f"{HOSTILE}:run_train_bpe", str(command), 300, [])
    assert not bad.ok and "a str as the token of vocab id 256" in bad.error
    hung = subjects.encode(f"{HOSTILE}:get_tokenizer", *trained, [], "hang", timeout=2.0)
    assert not hung.ok and "no answer within 2 s" in hung.error and hung.hung and not bad.hung
    missing = subjects.encode_batch(f"{REFERENCE}:get_tokenizer", *trained, SPECIALS, ["a b"], cores=1)
    assert missing.error == "has no encode_batch method" and not missing.applicable
    unloadable = subjects.train(f"{tmp_path}/nothing.py:run_train_bpe", str(command), 300, [])
    assert not unloadable.ok and "no such file" in unloadable.error


def test_our_numpy_methods_and_the_peers_give_ids_equal_to_our_lists(trained):
    # builtin:tokenizer-numpy names encode_to_numpy / encode_batch_to_numpy; a peer's own result
    # (numpy, a flat array, Encoding objects) is turned into ids after its call.
    vocab, merges = trained
    text = fixture_text("corpus.en")[:20_000]
    lines = text.splitlines(keepends=True)
    ours = subjects.encode("builtin:tokenizer", vocab, merges, SPECIALS, text)
    ours_batch = subjects.encode_batch("builtin:tokenizer", vocab, merges, SPECIALS, lines, cores=2)
    assert ours.ok and ours_batch.ok and ours.value == ours_batch.value  # lines joined are the text
    references = ["builtin:tokenizer-numpy"]
    references += [f"peer:{name}" for name in ("tiktoken", "gigatoken", "huggingface") if peer_available(name)]
    for ref in references:
        for outcome in (
            subjects.encode(ref, vocab, merges, SPECIALS, text, repeats=1),
            subjects.encode_batch(ref, vocab, merges, SPECIALS, lines, cores=1, repeats=1),
        ):
            assert outcome.ok, f"{ref}: {outcome.error}"
            assert outcome.value == ours.value, ref


def test_a_peer_that_cannot_take_the_vocab_is_left_out_with_its_reason(trained):
    if not peer_available("bpe-openai"):
        pytest.skip("bpe-openai (the peer that refuses every given vocab) is not installed")
    outcome = subjects.encode("peer:bpe-openai", *trained, SPECIALS, "hello")
    assert not outcome.applicable and outcome.error.startswith("left out: bpe-openai builds only")
    assert "ConfigError" not in outcome.error and "\n" not in outcome.error


class _Counted:
    """A result whose conversion records whether the worker's clock had stopped when it ran."""

    def __init__(self, server: worker._Server) -> None:
        self.server = server
        self.clock_stopped_first: bool | None = None

    def untimed_result(self) -> list[int]:
        self.clock_stopped_first = self.server.seconds is not None
        return [1, 2, 3]


@pytest.mark.parametrize("own", [True, False])
def test_only_our_own_references_convert_their_results_after_the_clock(own):
    # The worker times a library's own call and converts after it (peer_encoders.Untimed); a user's
    # code gets no such favour: an object that is not ids is refused as it is.
    server = worker._Server(None)
    server.own = own
    result = _Counted(server)

    class Tokenizer:
        def encode(self, text: str) -> _Counted:
            return result

    server.tokenizer = Tokenizer()
    if own:
        reply = server.measure(("encode", "abc"), digest=False)
        assert reply["value"] == [1, 2, 3] and result.clock_stopped_first is True
    else:
        with pytest.raises(worker.BadResult, match="not a list of ids"):
            server.measure(("encode", "abc"), digest=False)
        assert result.clock_stopped_first is None
