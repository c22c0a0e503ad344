"""Peers from PyPI, set up the one way every comparison uses (`bpe compare`, asv, pytest-benchmark).

Trainers read the corpus themselves and train to the same vocab size as ours, on the same text
and split pattern: HuggingFace tokenizers' BpeTrainer with its ByteLevel pre-tokenizer (GPT-2's
regex, or a Split by the pattern first), the 256-byte initial alphabet and our special tokens;
rustbpe, which knows no special tokens, on the documents between them (so it never counts one as
text). Their merges differ from ours
by design (their own tie-breaks), so only time and memory are compared for training.

Encoders are built from one of our (vocab, merges) pairs, offline, keeping our special tokens' ids,
so their ids can be compared with ours; quicktok, which loads only its built-in vocabs, is used
where its built-in one equals ours (OpenAI's cl100k_base and o200k_base). None of the peers is
required by the package: each is imported only when used, and `installed` says which are there.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..base.patterns import GPT2, SplitPattern, special_token_regex
from ..encoding.formats.gpt2 import token_to_str
from ..encoding.formats.tiktoken_file import ranks_text

Vocab = Mapping[int, bytes]
Merges = Sequence[tuple[bytes, bytes]]


class VocabRefused(ValueError):
    """A peer cannot be built with the given vocab (quicktok: not one of its built-in vocabs)."""


def installed(module: str) -> bool:
    """Whether a peer's module can be imported (without importing it)."""
    return importlib.util.find_spec(module) is not None


def iter_documents(path: str, special_tokens: Sequence[str], block: int = 1 << 20) -> Iterator[str]:
    """The text between special tokens, streamed (for peers that take an iterator of strings)."""
    pattern = special_token_regex(tuple(special_tokens))
    carry = ""
    with open(path, encoding="utf-8", newline="") as file:
        while chunk := file.read(block):
            pieces = pattern.split(carry + chunk) if pattern else [carry + chunk]
            carry = pieces.pop()  # may end in part of a special token: completed by the next block
            yield from (piece for piece in pieces if piece)
    if carry:
        yield carry


def _hf_pre_tokenizer(pattern: SplitPattern) -> Any:
    """GPT-2's: ByteLevel with its built-in regex; any other: Split by the pattern, then ByteLevel."""
    from tokenizers import Regex, pre_tokenizers

    if pattern is GPT2:
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern.regex), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def train_huggingface(
    path: str, vocab_size: int, special_tokens: Sequence[str], workers: int | None = None, pattern: SplitPattern = GPT2
) -> int:
    """Train HF tokenizers' BPE on the file; returns the number of merges it made."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = _hf_pre_tokenizer(pattern)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train([str(path)], trainer)
    return tokenizer.get_vocab_size() - 256 - len(special_tokens)


def train_rustbpe(
    path: str, vocab_size: int, special_tokens: Sequence[str], workers: int | None = None, pattern: SplitPattern = GPT2
) -> int:
    """Train rustbpe on the documents between special tokens; returns the number of merges it made.

    Its vocab_size counts the 256 bytes and the merges only, so it is given ours less the specials.
    """
    import rustbpe

    tokenizer = rustbpe.Tokenizer()
    tokenizer.train_from_iterator(
        iter_documents(str(path), special_tokens), vocab_size - len(special_tokens), pattern=pattern.regex
    )
    return tokenizer.vocab_size - 256


def train_gigatoken(
    path: str, vocab_size: int, special_tokens: Sequence[str], workers: int | None = None, pattern: SplitPattern = GPT2
) -> int:
    """Train gigatoken's BPE on the file; returns the number of merges it made.

    It reads the file itself (its own threads), splits documents at the first special token and
    pre-tokenizes with GPT-2's pattern, its only one: other patterns are refused.
    """
    import gigatoken

    if pattern is not GPT2:
        raise ValueError(f"gigatoken trains with GPT-2's split pattern only, not {pattern.name!r}")
    source = gigatoken.TextFileSource([str(path)], separator=special_tokens[0] if special_tokens else None)
    with quiet_stdio():  # it prints its progress from Rust, into our reports' stdout
        _, merges = gigatoken.train_bpe(source, vocab_size, list(special_tokens))
    return len(merges)


@contextmanager
def quiet_stdio() -> Iterator[None]:
    """stdout and stderr sent to /dev/null at the file-descriptor level (also silences native code)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 1)
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)


def special_ids(vocab: Vocab, special_tokens: Sequence[str]) -> dict[str, int]:
    """Each special token's id in `vocab` (trained vocabs put them first, GPT-2's last)."""
    ids = {token: i for i, token in vocab.items()}
    return {special: ids[special.encode("utf-8")] for special in special_tokens if special.encode("utf-8") in ids}


def tiktoken_encoding(
    vocab: Vocab, special_tokens: Sequence[str], name: str = "bpe_impls_peer", pattern: SplitPattern = GPT2
) -> Any:
    """A tiktoken Encoding of our vocab, ranks = ids, special tokens keeping their ids.

    tiktoken merges by the rank of the concatenated bytes, which gives our ids whenever every
    token is what its own merges produce (true of GPT-2's vocab: tests/test_oracle_tiktoken.py).
    """
    import tiktoken

    specials = special_ids(vocab, special_tokens)
    return tiktoken.Encoding(
        name=name,
        pat_str=pattern.regex,
        mergeable_ranks={token: i for i, token in vocab.items() if i not in specials.values()},
        special_tokens=specials,
    )


def huggingface_tokenizer(
    vocab: Vocab, merges: Merges, special_tokens: Sequence[str], pattern: SplitPattern = GPT2
) -> Any:
    """An HF tokenizers Tokenizer of our vocab and merges, pre-tokenizing as we do."""
    from tokenizers import Tokenizer, models

    specials = special_ids(vocab, special_tokens)
    hf_vocab = {token_to_str(token): i for i, token in vocab.items() if i not in specials.values()}
    # The special tokens keep our ids: HF would otherwise give them len(vocab), an id in use.
    hf_vocab.update(specials)
    hf_merges = [(token_to_str(a), token_to_str(b)) for a, b in merges]
    tokenizer = Tokenizer(models.BPE(vocab=hf_vocab, merges=hf_merges))
    tokenizer.pre_tokenizer = _hf_pre_tokenizer(pattern)
    tokenizer.add_special_tokens(list(special_tokens))
    return tokenizer


# gigatoken's names for the split patterns it knows besides GPT-2's: it matches a tokenizer.json's
# Split regex against its own strings, which are not ours (tiktoken's) for these.
GIGATOKEN_PRETOKENIZERS = {"cl100k": "gpt4", "o200k": "o200k"}


def gigatoken_tokenizer(
    vocab: Vocab, merges: Merges, special_tokens: Sequence[str], pattern: SplitPattern = GPT2
) -> Any:
    """gigatoken's Tokenizer of our vocab and merges: built from the HF tokenizer above for GPT-2's
    pattern, from our rank file (rank_file) with its own pretokenizer of that name for cl100k's and
    o200k's. Its `encode(text)` gives numpy uint32 ids, special tokens encoded as specials;
    `encode_batch` and `encode_batch_list` use its rayon pool when given parallel=True (it runs
    serially by default in a worker process, such as `bpe compare`'s children)."""
    import gigatoken

    if pattern.name in GIGATOKEN_PRETOKENIZERS:
        with rank_file(vocab, special_tokens) as (path, specials):
            return gigatoken.Tokenizer.from_tiktoken(str(path), GIGATOKEN_PRETOKENIZERS[pattern.name], specials)
    return gigatoken.Tokenizer(huggingface_tokenizer(vocab, merges, special_tokens, pattern))


@contextmanager
def rank_file(vocab: Vocab, special_tokens: Sequence[str]) -> Iterator[tuple[Path, dict[str, int]]]:
    """(a .tiktoken file of our ordinary tokens, ranks = ids, in a temporary directory; the special
    tokens' ids), for peers that load rank files. Ranks = ids gives our ids under the condition
    tiktoken_encoding states."""
    specials = special_ids(vocab, special_tokens)
    ordinary = {token: i for i, token in vocab.items() if i not in specials.values()}
    with tempfile.TemporaryDirectory(prefix="bpe_impls_peer_") as folder:
        path = Path(folder) / "ours.tiktoken"
        path.write_text(ranks_text(ordinary), encoding="ascii")
        yield path, specials


def from_tokenizer_json(
    load: Callable[[str], Any],
    vocab: Vocab,
    merges: Merges,
    special_tokens: Sequence[str],
    pattern: SplitPattern = GPT2,
) -> Any:
    """load(path) of the HF tokenizer above saved as tokenizer.json in a temporary directory (for
    peers that read only files; nothing is downloaded)."""
    with tempfile.TemporaryDirectory(prefix="bpe_impls_peer_") as folder:
        path = Path(folder) / "tokenizer.json"
        huggingface_tokenizer(vocab, merges, special_tokens, pattern).save(str(path))
        return load(str(path))


def tokie_tokenizer(vocab: Vocab, merges: Merges, special_tokens: Sequence[str], pattern: SplitPattern = GPT2) -> Any:
    """tokie's Tokenizer of our vocab and merges, from our tokenizer.json (from_tokenizer_json)."""
    import tokie

    return from_tokenizer_json(tokie.Tokenizer.from_json, vocab, merges, special_tokens, pattern)


def fastokens_tokenizer(
    vocab: Vocab, merges: Merges, special_tokens: Sequence[str], pattern: SplitPattern = GPT2
) -> Any:
    """fastokens' Tokenizer of our vocab, built offline: our rank file (rank_file) loaded with our
    pattern and special tokens' ids; where it refuses that (ranks must start at 0, so not a vocab
    with its special tokens first, as ours are trained), our tokenizer.json (from_tokenizer_json),
    which it reads for GPT-2's pattern but not for cl100k's and o200k's ("unsupported model type");
    VocabRefused when both are refused. `encode(text).ids` is a list, special tokens encoded as
    specials; `encode_batch_flat(texts)` gives (uint32 ids, uint64 offsets) as bytes, on its rayon
    pool (RAYON_NUM_THREADS)."""
    import fastokens

    try:
        with rank_file(vocab, special_tokens) as (path, specials):
            return fastokens.Tokenizer.from_tiktoken(str(path), pattern=pattern.regex, special_tokens=specials)
    except ValueError as ranks_refused:
        try:
            return from_tokenizer_json(fastokens.Tokenizer.from_file, vocab, merges, special_tokens, pattern)
        except ValueError as json_refused:
            raise VocabRefused(
                f"fastokens refuses this vocab as a rank file ({ranks_refused}) and as a "
                f"tokenizer.json ({json_refused})"
            ) from None


# quicktok's built-in encodings by our pattern's name: it compiles each split pattern by hand and
# refuses any other (GPT-2's included).
QUICKTOK_BUILT_IN = {"cl100k": "cl100k_base", "o200k": "o200k_base"}


class QuicktokEncoder:
    """quicktok over one of its built-in vocabs, with tiktoken's `encode(text, allowed_special=
    "all")` ids: the text is split at our special tokens and each piece goes to its
    `encode_ordinary`, the specials' ids between them. Its own special-token path gives the same ids
    but is superlinear (about 3x the time per doubling of a text with special tokens), so whole
    texts go through encode_ordinary, as the issue's measurement did."""

    def __init__(self, native: Any, special_tokens: Mapping[str, int]) -> None:
        self.native = native
        self._specials = dict(special_tokens)
        self._splitter = special_token_regex(tuple(special_tokens))

    def fresh(self) -> QuicktokEncoder:
        """A new encoder over a newly loaded copy of the same built-in vocab (already checked)."""
        return QuicktokEncoder(type(self.native)(self.native.name, ""), self._specials)

    def encode(self, text: str) -> list[int]:
        if self._splitter is None:
            return self.native.encode_ordinary(text)
        ids: list[int] = []
        end = 0
        for match in self._splitter.finditer(text):
            ids += self.native.encode_ordinary(text[end : match.start()])
            ids.append(self._specials[match.group()])
            end = match.end()
        ids += self.native.encode_ordinary(text[end:])
        return ids

    def encode_batch(self, texts: list[str], threads: int) -> tuple[Any, Any]:
        """(uint32 ids, int64 offsets) of every text, special tokens as specials, on `threads` threads."""
        return self.native.encode_batch(texts, threads, True)


def quicktok_tokenizer(
    vocab: Vocab, merges: Merges, special_tokens: Sequence[str], pattern: SplitPattern = GPT2
) -> QuicktokEncoder:
    """quicktok (package quicktok-v1) knows only its built-in vocabs (OpenAI's real cl100k_base and
    o200k_base here), not ours: the built-in one for our pattern, used only if its tokens and ranks
    equal our vocab and its special tokens include ours with the same ids; VocabRefused otherwise
    (GPT-2's vocab, a trained one)."""
    import quicktok

    if pattern.name not in QUICKTOK_BUILT_IN:
        raise VocabRefused(
            f"quicktok has no built-in vocab with the {pattern.name!r} split pattern "
            f"(only {', '.join(QUICKTOK_BUILT_IN.values())})"
        )
    name = QUICKTOK_BUILT_IN[pattern.name]
    native = quicktok.Tokenizer(name, "")  # its get_encoding would hand out one shared object
    specials = special_ids(vocab, special_tokens)
    ordinary = {token: i for i, token in vocab.items() if i not in specials.values()}

    def same(token: bytes | str, i: int) -> bool:
        try:
            return native.encode_single_token(token) == i
        except KeyError:
            return False

    if len(native.token_byte_values()) != len(ordinary) or not all(same(token, i) for token, i in ordinary.items()):
        raise VocabRefused(f"quicktok's built-in {name} is not this vocab (it loads no other)")
    if not all(same(special, i) for special, i in specials.items()):
        raise VocabRefused(f"quicktok's built-in {name} gives other ids to our special tokens")
    return QuicktokEncoder(native, specials)


def use_one_core() -> None:
    """Pin this process, and every thread it starts, to one core: how each single-thread row runs,
    for ours and every peer alike. Rust thread pools (rayon: gigatoken, HF tokenizers; tokie's)
    size themselves from the affinity mask, and RAYON_NUM_THREADS / TOKENIZERS_PARALLELISM say
    the same to those that read them; call it before a peer first encodes."""
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


# Peer trainers by name: (module to import, train(path, vocab_size, special_tokens, workers) -> merges).
TRAIN_PEERS: dict[str, tuple[str, Callable[..., int]]] = {
    "huggingface": ("tokenizers", train_huggingface),
    "rustbpe": ("rustbpe", train_rustbpe),
    "gigatoken": ("gigatoken", train_gigatoken),
}
# Peer trainers that pre-tokenize with GPT-2's pattern whatever they are told.
GPT2_PATTERN_ONLY = {"gigatoken"}


def can_train(name: str, pattern: SplitPattern) -> bool:
    """Whether peer trainer `name` can train with split `pattern` (so its result is comparable)."""
    return name not in GPT2_PATTERN_ONLY or pattern is GPT2
