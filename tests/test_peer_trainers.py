"""The peers' trainers as references (`peer:NAME`, harness/verify/peer_encoders.py): measured by
harness/subjects.py as anyone's trainer is (bpe compare's rows), in CS336's shape.

The (vocab, merges) a peer's result is turned into is checked against the library itself: our
Tokenizer built from them splits text into the same tokens as the library's own trained tokenizer
does (HF tokenizers, rustbpe), or is the library's own result (gigatoken returns CS336's shape).
Each peer that is not installed skips.
"""

from __future__ import annotations

import pytest
from conftest import fixture_text

from bpe_impls import Tokenizer
from bpe_impls.base.errors import ConfigError
from bpe_impls.base.patterns import GPT2
from bpe_impls.harness import peers, subjects
from bpe_impls.harness.verify.peer_encoders import Untimed, peer_reference

EOT = "<|endoftext|>"
VOCAB = 400


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("peers") / "stories.txt"
    path.write_text(fixture_text("tinystories_sample.txt")[:40_000], encoding="utf-8")
    return path


def _installed(name: str) -> peers.PeerTrainer:
    peer = peers.TRAIN_PEERS[name]
    if not peers.installed(peer.module):
        pytest.skip(f"{name} is not installed ({peer.module})")
    return peer


def _library_tokens(name: str, result, text: str) -> list[bytes]:
    """The tokens the library's own trained tokenizer splits `text` into."""
    if name == "huggingface":  # its offsets count characters: the text here is ASCII, so bytes too
        assert text.isascii()
        return [text[start:end].encode() for start, end in result.encode(text).offsets]
    if name == "rustbpe":
        by_rank = {rank: token for token, rank in result.get_mergeable_ranks()}
        return [by_rank[rank] for rank in result.encode(text)]
    raise AssertionError(name)


@pytest.mark.parametrize("name", ["huggingface", "rustbpe"])
def test_a_peers_vocab_and_merges_split_text_as_the_library_does(name, corpus):
    peer = _installed(name)
    result = peer.train(str(corpus), VOCAB, [EOT], None, GPT2)
    vocab, merges = peer.vocab_and_merges(result, [EOT])
    assert len(merges) == peer.merges(result, [EOT]) and len(vocab) == 256 + 1 + len(merges)
    assert EOT.encode() in vocab.values()
    text = "Once upon a time, a little girl named Lily found a shiny red ball in the park."
    ours = Tokenizer(vocab, merges, [EOT])
    assert [ours.decode_bytes([i]) for i in ours.encode(text)] == _library_tokens(name, result, text)


@pytest.mark.parametrize("name", list(peers.TRAIN_PEERS))
def test_a_peer_trains_as_a_reference_in_an_isolated_worker(name, corpus):
    peer = _installed(name)
    outcome = subjects.train(f"peer:{name}", str(corpus), VOCAB, [EOT], num_workers=1, pattern="gpt2")
    assert outcome.ok, outcome.error
    direct = peer.vocab_and_merges(peer.train(str(corpus), VOCAB, [EOT], 1, GPT2), [EOT])
    vocab, merges = outcome.value
    assert (vocab, merges) == (dict(direct[0]), [tuple(m) for m in direct[1]])  # the library is deterministic
    assert outcome.seconds is not None and outcome.seconds > 0 and outcome.peak_mb > 10  # a worker's whole RSS


@pytest.mark.parametrize("name", ["gigatoken", "huggingface"])
def test_a_peer_that_is_both_trains_given_a_path_and_builds_a_tokenizer_given_a_vocab(name, corpus):
    _installed(name)
    reference = peer_reference(name)
    trained = reference(str(corpus), VOCAB, [EOT])
    assert isinstance(trained, Untimed)
    vocab, merges = trained.untimed_result()
    tokenizer = reference(vocab, merges, [EOT])
    text = corpus.read_text(encoding="utf-8")[:2000]
    assert tokenizer.encode(text).untimed_result() == Tokenizer(vocab, merges, [EOT]).encode(text)


def test_an_unknown_peer_is_a_one_line_error():
    with pytest.raises(ConfigError, match=r"unknown peer 'nosuchpeer'; encoders: tiktoken, .*; trainers: huggingface"):
        peer_reference("nosuchpeer")
    outcome = subjects.train("peer:nosuchpeer", "unused.txt", VOCAB, [EOT])
    assert not outcome.ok and "unknown peer 'nosuchpeer'" in outcome.error and "\n" not in outcome.error
