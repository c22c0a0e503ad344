"""Peers from PyPI, set up the one way every comparison uses (`bpe compare`, asv, pytest-benchmark).

Trainers read the corpus themselves and train to the same vocab size as ours, on the same text
and split pattern: HuggingFace tokenizers' BpeTrainer with its ByteLevel pre-tokenizer (GPT-2's
regex, or a Split by the pattern first), the 256-byte initial alphabet and our special tokens;
rustbpe, which knows no special tokens, on the documents between them (so it never counts one as
text). Their merges differ from ours
by design (their own tie-breaks), so only time and memory are compared for training.

Encoders are built from one of our (vocab, merges) pairs, offline, keeping our special tokens' ids,
so their ids can be compared with ours (quicktok takes only some vocabs: quicktok_tokenizer says
which). PEER_ENCODERS is the one list of them: how each is built and called, one text or a batch,
read by `bpe compare` and `bpe verify`'s `peer:NAME`; TRAIN_PEERS is the trainers'. None of the
peers is required by the package: each is imported only when used, and `installed` says which are
there.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import operator
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from ..base.patterns import GPT2, PRESETS, SplitPattern, special_token_regex
from ..encoding.formats.gpt2 import str_to_token, token_to_str
from ..encoding.formats.hf import hf_regex
from ..encoding.formats.tiktoken_file import ranks_text, recover_merges

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
    """GPT-2's: ByteLevel with its built-in regex; any other: Split by the pattern, then ByteLevel.
    A preset is given in the form our tokenizer.json writer gives it (hf_regex): Oniguruma reads
    cl100k's own string otherwise (a run of digits as one piece); a custom pattern as it is."""
    from tokenizers import Regex, pre_tokenizers

    if pattern is GPT2:
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    split = hf_regex(pattern) if PRESETS.get(pattern.name) == pattern else pattern.regex
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(split), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def train_huggingface(
    path: str, vocab_size: int, special_tokens: Sequence[str], workers: int | None = None, pattern: SplitPattern = GPT2
) -> Any:
    """Train HF tokenizers' BPE on the file; returns its Tokenizer."""
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
    return tokenizer


def _huggingface_vocab_and_merges(tokenizer: Any, special_tokens: Sequence[str]) -> tuple[Vocab, Merges]:
    """HF's byte-level vocab and merges (GPT-2's byte-to-character table) as bytes; its special
    tokens as their UTF-8."""
    specials = set(special_tokens)
    model = json.loads(tokenizer.to_str())["model"]
    vocab = {
        token_id: text.encode("utf-8") if text in specials else str_to_token(text, "HF tokenizers' vocab")
        for text, token_id in tokenizer.get_vocab(with_added_tokens=True).items()
    }
    pairs = (merge.split(" ") if isinstance(merge, str) else merge for merge in model["merges"])
    merges = [(str_to_token(a, "HF tokenizers' merges"), str_to_token(b, "HF tokenizers' merges")) for a, b in pairs]
    return dict(sorted(vocab.items())), merges


def train_rustbpe(
    path: str, vocab_size: int, special_tokens: Sequence[str], workers: int | None = None, pattern: SplitPattern = GPT2
) -> Any:
    """Train rustbpe on the documents between special tokens; returns its Tokenizer.

    Its vocab_size counts the 256 bytes and the merges only, so it is given ours less the specials.
    """
    import rustbpe

    tokenizer = rustbpe.Tokenizer()
    tokenizer.train_from_iterator(
        iter_documents(str(path), special_tokens), vocab_size - len(special_tokens), pattern=pattern.regex
    )
    return tokenizer


def _rustbpe_vocab_and_merges(tokenizer: Any, special_tokens: Sequence[str]) -> tuple[Vocab, Merges]:
    """rustbpe's mergeable ranks (tiktoken's kind) as a vocab with our special tokens first, and the
    merges those ranks amount to."""
    ranks = dict(tokenizer.get_mergeable_ranks())
    vocab = {i: special.encode("utf-8") for i, special in enumerate(special_tokens)}
    vocab.update({len(special_tokens) + rank: token for token, rank in sorted(ranks.items(), key=lambda tr: tr[1])})
    return vocab, recover_merges(ranks, "rustbpe's ranks")


def train_gigatoken(
    path: str, vocab_size: int, special_tokens: Sequence[str], workers: int | None = None, pattern: SplitPattern = GPT2
) -> Any:
    """Train gigatoken's BPE on the file; returns its (vocab, merges), already in CS336's shape.

    It reads the file itself (its own threads), splits documents at the first special token and
    pre-tokenizes with GPT-2's pattern, its only one: other patterns are refused.
    """
    import gigatoken

    if pattern is not GPT2:
        raise ValueError(f"gigatoken trains with GPT-2's split pattern only, not {pattern.name!r}")
    source = gigatoken.TextFileSource([str(path)], separator=special_tokens[0] if special_tokens else None)
    with quiet_stdio():  # it prints its progress from Rust, into our reports' stdout
        return gigatoken.train_bpe(source, vocab_size, list(special_tokens))


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


def first_taken(
    library: str, ways: Mapping[str, Callable[[], Any]], refusals: tuple[type[Exception], ...] = (ValueError,)
) -> Any:
    """The library's tokenizer built the first of `ways` (what it is given -> how to build it) that
    it takes; VocabRefused, naming each refusal, when it takes none."""
    reasons = []
    for way, build in ways.items():
        try:
            return build()
        except refusals as refused:
            first = " ".join(str(refused).split("\n\n")[0].split()).split(". ")[0]  # messages run to pages
            reasons.append(f"as {way} ({first})")
    raise VocabRefused(f"{library} refuses this vocab {' and '.join(reasons)}")


# gigatoken's names for the split patterns it knows besides GPT-2's, for rank files.
GIGATOKEN_PRETOKENIZERS = {"cl100k": "gpt4", "o200k": "o200k"}


def gigatoken_tokenizer(
    vocab: Vocab, merges: Merges, special_tokens: Sequence[str], pattern: SplitPattern = GPT2
) -> Any:
    """gigatoken's Tokenizer of our vocab and merges: for cl100k's and o200k's pattern, from our rank
    file (rank_file) with its own pretokenizer of that name, which it takes only with dense ranks
    from 0 (OpenAI's vocabs, not ours trained, special tokens first); else from the HF tokenizer
    above, whose Split regex it matches against its own strings: GPT-2's ByteLevel and our o200k
    string, not our cl100k one (measured, gigatoken 0.10); VocabRefused when both are refused. Its
    `encode(text)` gives numpy uint32 ids, special tokens encoded as specials; `encode_batch` and
    `encode_batch_list` use its rayon pool when given parallel=True (it runs serially by default in
    a worker process, such as `bpe compare`'s children)."""
    import gigatoken

    def from_ranks() -> Any:
        with rank_file(vocab, special_tokens) as (path, specials):
            return gigatoken.Tokenizer.from_tiktoken(str(path), GIGATOKEN_PRETOKENIZERS[pattern.name], specials)

    ways = {"a rank file": from_ranks} if pattern.name in GIGATOKEN_PRETOKENIZERS else {}
    ways["an HF tokenizer"] = lambda: gigatoken.Tokenizer(huggingface_tokenizer(vocab, merges, special_tokens, pattern))
    return first_taken("gigatoken", ways, (RuntimeError, ValueError))


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


def from_json_file(module: str, loader: str) -> Callable[..., Any]:
    """The builder of a library that reads only tokenizer.json files: module.loader(path) of ours
    (from_tokenizer_json), the module imported when first built."""

    def build(vocab: Vocab, merges: Merges, special_tokens: Sequence[str], pattern: SplitPattern = GPT2) -> Any:
        load = operator.attrgetter(loader)(importlib.import_module(module))
        return from_tokenizer_json(load, vocab, merges, special_tokens, pattern)

    return build


tokie_tokenizer = from_json_file("tokie", "Tokenizer.from_json")


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

    def from_ranks() -> Any:
        with rank_file(vocab, special_tokens) as (path, specials):
            return fastokens.Tokenizer.from_tiktoken(str(path), pattern=pattern.regex, special_tokens=specials)

    return first_taken(
        "fastokens",
        {
            "a rank file": from_ranks,
            "a tokenizer.json": lambda: from_tokenizer_json(
                fastokens.Tokenizer.from_file, vocab, merges, special_tokens, pattern
            ),
        },
    )


# quicktok's built-in encodings by our pattern's name: the grammars it compiles by hand that our
# presets share (GPT-2's is not one).
QUICKTOK_BUILT_IN = {"cl100k": "cl100k_base", "o200k": "o200k_base"}


class QuicktokEncoder:
    """quicktok with tiktoken's `encode(text, allowed_special="all")` ids: the text is split at our
    special tokens and each piece goes to its `encode_ordinary`, the specials' ids between them.
    Its own special-token paths give the same ids but are superlinear in the text's length
    (measured on corpus.en cut into 800-character documents, 0.14 to 4.3 MB: encode(text,
    allowed_special="all") 15 ms to 3.7 s, about 3.5x per doubling at the end, and
    encode_with_special_tokens 0.09 s to 50 s; encode_ordinary between the specials 4 to 300 ms)."""

    def __init__(self, load: Callable[[], Any], special_tokens: Mapping[str, int], native: Any = None) -> None:
        self._load = load
        self.native = load() if native is None else native
        self._specials = dict(special_tokens)
        self._splitter = special_token_regex(tuple(special_tokens))

    def fresh(self) -> QuicktokEncoder:
        """A new encoder over a newly loaded copy of the same vocab (already checked)."""
        return QuicktokEncoder(self._load, self._specials)

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
        """(uint32 ids, int64 offsets) of every text, special tokens as specials, on `threads` threads
        (texts are lines here, each with few special tokens, if any)."""
        return self.native.encode_batch(texts, threads, True)


def _quicktok_built_in(vocab: Vocab, specials: Mapping[str, int], pattern: SplitPattern) -> QuicktokEncoder:
    """quicktok's built-in vocab for our pattern, if it is ours (tokens, ranks and special tokens'
    ids); VocabRefused otherwise."""
    import quicktok

    if pattern.name not in QUICKTOK_BUILT_IN:
        raise VocabRefused(
            f"no built-in vocab has the {pattern.name!r} split pattern: only {' and '.join(QUICKTOK_BUILT_IN.values())}"
        )
    name = QUICKTOK_BUILT_IN[pattern.name]
    load = partial(quicktok.Tokenizer, name, "")  # its get_encoding would hand out one shared object
    native = load()
    ordinary = {token: i for i, token in vocab.items() if i not in specials.values()}

    def same(token: bytes | str, i: int) -> bool:
        try:
            return native.encode_single_token(token) == i
        except KeyError:
            return False

    if len(native.token_byte_values()) != len(ordinary) or not all(same(token, i) for token, i in ordinary.items()):
        raise VocabRefused(f"{name} is another vocab")
    if not all(same(special, i) for special, i in specials.items()):
        raise VocabRefused(f"{name} gives other ids to our special tokens")
    return QuicktokEncoder(load, specials, native)


def _quicktok_imported(vocab: Vocab, merges: Merges, special_tokens: Sequence[str], pattern: SplitPattern) -> Any:
    """quicktok's import_tokenizer of our tokenizer.json (it checks its ids against HF tokenizers'
    on its own test texts), into a temporary folder it is loaded from whole."""
    import quicktok

    with tempfile.TemporaryDirectory(prefix="bpe_impls_peer_") as folder, quiet_stdio():  # it prints its checks
        from_tokenizer_json(
            partial(quicktok.import_tokenizer, name="ours", data_dir=folder), vocab, merges, special_tokens, pattern
        )
        return quicktok.Tokenizer("ours", folder)


def quicktok_tokenizer(
    vocab: Vocab, merges: Merges, special_tokens: Sequence[str], pattern: SplitPattern = GPT2
) -> QuicktokEncoder:
    """quicktok (package quicktok-v1) over our vocab, special tokens keeping our ids; VocabRefused
    when it takes the vocab neither way it loads one, each taking what the other refuses (measured
    with quicktok-v1 0.4): its built-in vocab for our pattern, when that is ours (OpenAI's real
    cl100k_base and o200k_base); else import_tokenizer of our tokenizer.json, which knows a split
    pattern only by its exact string among the grammars it compiles by hand, so it takes a trained
    o200k vocab, refuses GPT-2's pattern and our cl100k string (tiktoken's current form, not the one
    it knows), and fails on the real o200k_base ("bad vocab file (rank out of range)")."""
    specials = special_ids(vocab, special_tokens)
    imported = partial(_quicktok_imported, vocab, merges, special_tokens, pattern)
    return first_taken(
        "quicktok",
        {
            "one of its built-in vocabs": lambda: _quicktok_built_in(vocab, specials, pattern),
            "a tokenizer.json": lambda: QuicktokEncoder(imported, specials),
        },
        (ValueError, RuntimeError),  # its ImportRefused is a ValueError
    )


def use_one_core() -> None:
    """Pin this process, and every thread it starts, to one core: how each single-thread row runs,
    for ours and every peer alike. Rust thread pools (rayon: gigatoken, HF tokenizers; tokie's)
    size themselves from the affinity mask, and RAYON_NUM_THREADS / TOKENIZERS_PARALLELISM say
    the same to those that read them; call it before a peer first encodes."""
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def flat(batch_ids: Iterable[Iterable[int]]) -> list[int]:
    """One list of every text's ids, in order."""
    return [token for ids in batch_ids for token in ids]


def _refuse_bpe_openai(vocab: Vocab, merges: Merges, special_tokens: Sequence[str], pattern: SplitPattern) -> Any:
    raise VocabRefused(
        "bpe-openai builds only OpenAI's named encodings, which it downloads; it cannot load a given vocab"
    )


@dataclass(frozen=True)
class EncoderAdapter:
    """How one encoder is built over our (vocab, merges) and called, so that every command sets each
    library up one way and times only its own call: `encode` and `batch` give the library's own ids
    (a list, numpy, bytes), `to_list` and `batch_to_list` turn them into one list of ints afterwards.
    Special tokens are encoded as specials. `batch` is None where a library has no batch method;
    `batch_label` names its row ("NAME encode_batch"). `verify_only`: `bpe verify` checks it, `bpe
    compare` does not measure it."""

    module: str  # what is imported (`installed`)
    build: Callable[[Vocab, Merges, Sequence[str], SplitPattern], Any]
    encode: Callable[[Any, str], Any]
    to_list: Callable[[Any], list[int]] = list
    batch: Callable[[Any, list[str], int], Any] | None = None
    batch_to_list: Callable[[Any], list[int]] = flat
    batch_label: str = "encode_batch"
    verify_only: bool = False
    package: str = ""  # what pip installs, where that is not the module's name

    @property
    def pip_name(self) -> str:
        return self.package or self.module

    def ids(self, native: Any, text: str) -> list[int]:
        """encode's ids as plain ints."""
        return [int(i) for i in self.to_list(self.encode(native, text))]


_numpy_list = operator.methodcaller("tolist")


def _encoding_ids(tokenizer: Any, text: str) -> Any:
    """encode(text).ids: HF tokenizers' Encoding, and the libraries that copy its shape."""
    return tokenizer.encode(text).ids


def _batch_flat(tokenizer: Any, texts: list[str], threads: int) -> Any:
    """The ids of encode_batch_flat(texts) (tokie's, fastokens'), on its rayon pool (RAYON_NUM_THREADS)."""
    return tokenizer.encode_batch_flat(texts)[0]


def _fastokens_flat_ids(ids: bytes) -> list[int]:
    import numpy as np

    return np.frombuffer(ids, "<u4").tolist()  # little-endian uint32 bytes


# Every peer encoder, by the name commands show; the order rows and `bpe verify --encoder` list them in.
PEER_ENCODERS: dict[str, EncoderAdapter] = {
    "tiktoken": EncoderAdapter(
        "tiktoken",
        lambda vocab, merges, specials, pattern: tiktoken_encoding(vocab, specials, pattern=pattern),
        lambda encoding, text: encoding.encode(text, allowed_special="all"),
        batch=lambda encoding, texts, threads: encoding.encode_batch(texts, num_threads=threads, allowed_special="all"),
    ),
    "huggingface": EncoderAdapter(
        "tokenizers",
        huggingface_tokenizer,
        _encoding_ids,
        batch=lambda tokenizer, texts, threads: tokenizer.encode_batch(texts),  # rayon: RAYON_NUM_THREADS
        batch_to_list=lambda encodings: flat(encoding.ids for encoding in encodings),
    ),
    "gigatoken": EncoderAdapter(
        "gigatoken",
        gigatoken_tokenizer,
        lambda tokenizer, text: tokenizer.encode(text),  # numpy uint32, as our encode_to_numpy
        _numpy_list,
        # parallel: its rayon pool; by default it runs serially in a worker process, such as compare's children.
        batch=lambda tokenizer, texts, threads: tokenizer.encode_batch(texts, parallel=threads > 1),
        batch_to_list=lambda ids: flat(ids.tolist()),
    ),
    "tokie": EncoderAdapter(
        "tokie",
        tokie_tokenizer,
        _encoding_ids,
        batch=_batch_flat,
        batch_to_list=_numpy_list,
        batch_label="encode_batch_flat",
    ),
    "kitoken": EncoderAdapter(
        "kitoken",
        from_json_file("kitoken", "Kitoken.from_tokenizers_file"),
        lambda tokenizer, text: tokenizer.encode(text, True),
        verify_only=True,
    ),
    "fastokens": EncoderAdapter(
        "fastokens",
        fastokens_tokenizer,
        _encoding_ids,
        batch=_batch_flat,
        batch_to_list=_fastokens_flat_ids,
        batch_label="encode_batch_flat",
    ),
    "splintr": EncoderAdapter(
        "splintr",
        from_json_file("splintr", "from_json"),
        lambda tokenizer, text: tokenizer.encode_with_special(text),
        verify_only=True,
        package="splintr-rs",
    ),
    "quicktok": EncoderAdapter(
        "quicktok",
        quicktok_tokenizer,
        QuicktokEncoder.encode,
        batch=lambda tokenizer, texts, threads: tokenizer.encode_batch(texts, threads)[0],
        batch_to_list=_numpy_list,
        package="quicktok-v1",
    ),
    "bpe-openai": EncoderAdapter(
        "bpe_openai",
        _refuse_bpe_openai,
        lambda tokenizer, text: tokenizer.encode(text, allowed_special="all"),
        verify_only=True,
        package="bpe-openai",
    ),
}
# The peer encoders `bpe compare` measures.
COMPARED_ENCODERS = {name: peer for name, peer in PEER_ENCODERS.items() if not peer.verify_only}


class PeerTrainer(NamedTuple):
    """How one library's trainer runs on a file: `train(path, vocab_size, special_tokens, workers,
    pattern)` is its own call, the one that is timed, and returns its own result; `merges(result,
    special_tokens)` counts the merges in it; `vocab_and_merges(result, special_tokens)` turns it into CS336's
    (vocab, merges), for a comparison of tokens (`bpe compare`, `bpe verify --trainer peer:NAME`)."""

    module: str  # what is imported (`installed`)
    train: Callable[..., Any]
    merges: Callable[[Any, Sequence[str]], int]
    vocab_and_merges: Callable[[Any, Sequence[str]], tuple[Vocab, Merges]]


# Every peer trainer, by the name commands show.
TRAIN_PEERS: dict[str, PeerTrainer] = {
    "huggingface": PeerTrainer(
        "tokenizers",
        train_huggingface,
        lambda tokenizer, specials: tokenizer.get_vocab_size() - 256 - len(specials),
        _huggingface_vocab_and_merges,
    ),
    "rustbpe": PeerTrainer(
        "rustbpe", train_rustbpe, lambda tokenizer, specials: tokenizer.vocab_size - 256, _rustbpe_vocab_and_merges
    ),
    "gigatoken": PeerTrainer(
        "gigatoken", train_gigatoken, lambda trained, specials: len(trained[1]), lambda trained, specials: trained
    ),
}


def train_peer(
    name: str,
    path: str,
    vocab_size: int,
    special_tokens: Sequence[str],
    workers: int | None = None,
    pattern: SplitPattern = GPT2,
) -> int:
    """Train peer `name` on the file; the number of merges it made."""
    peer = TRAIN_PEERS[name]
    return peer.merges(peer.train(path, vocab_size, special_tokens, workers, pattern), special_tokens)


# Peer trainers that pre-tokenize with GPT-2's pattern whatever they are told.
GPT2_PATTERN_ONLY = {"gigatoken"}


def can_train(name: str, pattern: SplitPattern) -> bool:
    """Whether peer trainer `name` can train with split `pattern` (so its result is comparable)."""
    return name not in GPT2_PATTERN_ONLY or pattern is GPT2
