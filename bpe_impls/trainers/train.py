"""The whole training pipeline: count a corpus's (or an iterable's) pre-tokens, then run a registered trainer."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from ..base.checks import validate_min_count
from ..base.errors import CorpusError
from ..base.patterns import resolve_pattern, validate_special_tokens
from ..corpus import count_pretokens, count_texts
from ..corpus.count import count_options, takes_count_options
from ..corpus.tally import PackedCounts
from .common import Merges, Vocab, merge_budget
from .registry import get_trainer, takes_packed


@takes_count_options()
def train_bpe(
    input_path: str | os.PathLike | Sequence[str | os.PathLike],
    vocab_size: int,
    special_tokens: Iterable[str] | None = None,
    *,
    impl: str | None = None,
    **options: Any,
) -> tuple[Vocab, Merges]:
    """Train a byte-level BPE tokenizer on a corpus: a file, a glob, a directory or a list of them.

    Returns (vocab, merges): vocab maps id -> token bytes (special tokens first, then the 256
    bytes, then one token per merge); merges are (left, right) byte pairs in creation order.
    `impl` names a trainer in IMPLEMENTATIONS (default: the fastest); every trainer, every
    `num_workers`, both backends ("local", or "dask" on `scheduler` or a LocalCluster) and any
    sharding of the same documents give the identical result (min_pretoken_count above 1 changes
    it). The counting options are `count_pretokens`' (listed below).
    """
    chosen = count_options(train_bpe, options)
    specials = validate_special_tokens(special_tokens)
    merge_budget(vocab_size, specials)  # reject a bad size before the (long) counting pass
    validate_min_count(chosen.min_pretoken_count)
    split = resolve_pattern(chosen.pattern)
    trainer = get_trainer(impl)
    word_counts = count_pretokens(
        input_path, specials, **replace(chosen, pattern=split).keywords(), packed=takes_packed(impl)
    )
    if not word_counts:
        raise CorpusError(_nothing_to_train_on(input_path, chosen.min_pretoken_count))
    if isinstance(word_counts, PackedCounts):
        # Nothing else holds them: the native trainer frees them once it has laid out the words.
        word_counts.disposable = True
    return trainer(word_counts, vocab_size, specials, progress=chosen.progress)


@takes_count_options("pattern", "min_pretoken_count", "progress")
def train_bpe_from_iterator(
    texts: Iterable[str],
    vocab_size: int,
    special_tokens: Iterable[str] | None = None,
    *,
    impl: str | None = None,
    **options: Any,
) -> tuple[Vocab, Merges]:
    """Train on an iterable of documents (a generator, a `datasets` column) instead of files.

    The documents are streamed: memory follows the distinct pre-tokens, not the corpus. Each
    document is a hard boundary, so the result equals `train_bpe` on a file of the same documents
    separated by a special token. A single str where the documents belong is a ConfigError. The
    other arguments are `train_bpe`'s.
    """
    chosen = count_options(train_bpe_from_iterator, options)
    specials = validate_special_tokens(special_tokens)
    merge_budget(vocab_size, specials)
    trainer = get_trainer(impl)
    word_counts = count_texts(texts, specials, pattern=chosen.pattern, min_pretoken_count=chosen.min_pretoken_count)
    if not word_counts:
        raise CorpusError(_nothing_to_train_on(["the documents given"], chosen.min_pretoken_count))
    return trainer(word_counts, vocab_size, specials, progress=chosen.progress)


def _nothing_to_train_on(input_path: object, min_pretoken_count: int) -> str:
    named = [str(p) for p in input_path] if isinstance(input_path, (list, tuple)) else [os.fspath(input_path)]
    where = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
    if min_pretoken_count > 1:
        return f"{where}: no pre-token occurs {min_pretoken_count} times or more; nothing to train on"
    return f"{where}: no text to train on (empty, or nothing but special tokens)"
