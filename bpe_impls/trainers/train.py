"""The whole training pipeline: count a corpus's (or an iterable's) pre-tokens, then run a registered trainer."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from ..base.checks import validate_min_count
from ..base.errors import CorpusError
from ..base.patterns import SplitPattern, resolve_pattern, validate_special_tokens
from ..corpus import count_pretokens, count_texts
from ..corpus.tally import PackedCounts
from .common import Merges, Vocab, merge_budget
from .registry import get_trainer, takes_packed


def train_bpe(
    input_path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    vocab_size: int,
    special_tokens: Iterable[str] | None = None,
    *,
    impl: str | None = None,
    num_workers: int | None = None,
    progress: bool = False,
    backend: str = "local",
    scheduler: str | None = None,
    text_field: str = "text",
    skip_bad_records: bool = False,
    min_pretoken_count: int = 1,
    pattern: str | SplitPattern | None = None,
) -> tuple[Vocab, Merges]:
    """Train a byte-level BPE tokenizer on a corpus: a file, a glob, a directory or a list of them.

    Every trainer, every `num_workers`, both backends and any sharding of the same documents give
    the identical result (a `min_pretoken_count` above 1 changes it).

    Args:
        input_path: the corpus, as `count_pretokens` takes it.
        vocab_size: the vocab's size: special tokens + 256 bytes + merges. Training stops there,
            or earlier when no pair is left.
        special_tokens: texts the corpus is split on first; they take no part in merges.
        impl: a trainer in IMPLEMENTATIONS (None: the fastest).
        num_workers, progress, backend, scheduler, text_field, skip_bad_records,
        min_pretoken_count, pattern: how the corpus is counted, as in `count_pretokens`.

    Returns:
        (vocab, merges): vocab maps id -> token bytes (special tokens first, then the 256 bytes,
        then one token per merge); merges are (left, right) byte pairs in creation order.

    Raises:
        CorpusError: a missing, empty or unreadable corpus, or one with nothing to train on.
        ConfigError: an argument that cannot be used (a vocab_size below 256 + specials, ...).

    Example:
        >>> vocab, merges = train_bpe("corpus.txt", 300, ["<|endoftext|>"])
        >>> len(vocab), len(merges), vocab[0], merges[0]
        (300, 43, b'<|endoftext|>', (b' ', b't'))
    """
    specials = validate_special_tokens(special_tokens)
    merge_budget(vocab_size, specials)  # reject a bad size before the (long) counting pass
    validate_min_count(min_pretoken_count)
    split = resolve_pattern(pattern)
    trainer = get_trainer(impl)
    word_counts = count_pretokens(
        input_path,
        specials,
        num_workers,
        packed=takes_packed(impl),
        progress=progress,
        backend=backend,
        scheduler=scheduler,
        text_field=text_field,
        skip_bad_records=skip_bad_records,
        min_pretoken_count=min_pretoken_count,
        pattern=split,
    )
    if not word_counts:
        raise CorpusError(_nothing_to_train_on(input_path, min_pretoken_count))
    if isinstance(word_counts, PackedCounts):
        # Nothing else holds them: the native trainer frees them once it has laid out the words.
        word_counts.disposable = True
    return trainer(word_counts, vocab_size, specials, progress=progress)


def train_bpe_from_iterator(
    texts: Iterable[str],
    vocab_size: int,
    special_tokens: Iterable[str] | None = None,
    *,
    impl: str | None = None,
    progress: bool = False,
    min_pretoken_count: int = 1,
    pattern: str | SplitPattern | None = None,
) -> tuple[Vocab, Merges]:
    """Train on an iterable of documents (a generator, a `datasets` column) instead of files.

    The documents are streamed: memory follows the distinct pre-tokens, not the corpus. Each
    document is a hard boundary, so the result equals `train_bpe` on a file of the same documents
    separated by a special token.

    Args:
        texts: the documents, each a str (a single str where they belong is a ConfigError).
        vocab_size, special_tokens, impl, progress, min_pretoken_count, pattern: as in `train_bpe`.

    Returns:
        (vocab, merges), as `train_bpe` gives them.

    Example:
        >>> vocab, merges = train_bpe_from_iterator(["low lower", "lowest low"], 259)
        >>> merges  # "lo" and "ow" both occur 4 times: the tie goes to the greater pair of bytes
        [(b'o', b'w'), (b'l', b'ow'), (b'low', b'e')]
    """
    specials = validate_special_tokens(special_tokens)
    merge_budget(vocab_size, specials)
    trainer = get_trainer(impl)
    word_counts = count_texts(texts, specials, pattern=pattern, min_pretoken_count=min_pretoken_count)
    if not word_counts:
        raise CorpusError(_nothing_to_train_on(["the documents given"], min_pretoken_count))
    return trainer(word_counts, vocab_size, specials, progress=progress)


def _nothing_to_train_on(
    input_path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], min_pretoken_count: int
) -> str:
    # (one path, or a sequence of them, as corpus.inputs tells them apart)
    named = [os.fspath(input_path)] if isinstance(input_path, (str, os.PathLike)) else [str(p) for p in input_path]
    where = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
    if min_pretoken_count > 1:
        return f"{where}: no pre-token occurs {min_pretoken_count} times or more; nothing to train on"
    return f"{where}: no text to train on (empty, or nothing but special tokens)"
