"""The top of the corpus layer: count a corpus's pre-tokens with a counting backend.

    counts = count_pretokens("shards/", ["<|endoftext|>"], num_workers=8)

Inputs are planned into units of work (corpus.planning); a backend tallies every unit and adds
the tallies up. The backends ("local": corpus.local; "dask": corpus.dask_backend) differ only in
where `tally_unit` runs, so chunking, the split pattern, special-token splitting and bad-input
errors live once, below both of them (corpus.tally).

The keyword options of counting are declared, with their defaults and meaning, by
`count_pretokens`; `count_texts` and the trainers' pipeline (`train_bpe`, `train_bpe_from_iterator`)
take the ones they use under the same names and defaults (tests/test_arguments.py holds them to
that) and pass them on.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from ..base.checks import one_line, validate_min_count
from ..base.errors import ConfigError
from ..base.patterns import GPT2, SplitPattern, resolve_pattern, split_on_special_tokens, validate_special_tokens
from .dask_backend import DaskBackend
from .local import LocalBackend
from .planning import plan_inputs
from .tally import CountingBackend, PackedCounts, drop_rare, has_compiled_counter, pretoken_counter
from .units import Unit

# name -> factory(num_workers, scheduler address). DaskBackend imports dask only when it counts.
BACKENDS: dict[str, Callable[[int | None, str | None], CountingBackend]] = {
    "local": lambda num_workers, scheduler: LocalBackend(num_workers),
    "dask": DaskBackend,
}


def count_units(
    units: Sequence[Unit],
    special_tokens: tuple[str, ...],
    *,
    min_count: int = 1,
    pattern: SplitPattern = GPT2,
    packed: bool = False,
    num_workers: int | None = None,
    progress: bool = False,
    backend: str = "local",
    scheduler: str | None = None,
) -> Counter[bytes] | PackedCounts:
    """Count units of work (already planned) with the named backend.

    `special_tokens` and `pattern` come checked and resolved (count_pretokens does it); `min_count`
    is min_pretoken_count, `packed` and the rest as in count_pretokens."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown counting backend {backend!r}; choose from {', '.join(sorted(BACKENDS))}")
    if scheduler is not None and backend != "dask":
        raise ConfigError("a scheduler address is only used with the dask backend (--backend dask)")
    counter = BACKENDS[backend](num_workers, scheduler)
    return counter.count(units, special_tokens, progress=progress, min_count=min_count, pattern=pattern, packed=packed)


def count_texts(
    texts: Iterable[str],
    special_tokens: Iterable[str] | None = None,
    *,
    pattern: str | SplitPattern | None = None,
    min_pretoken_count: int = 1,
) -> Counter[bytes]:
    """Count the pre-tokens of an iterable of documents (a generator, a `datasets` column), streamed.

    Each document is a hard boundary, as a special token is, so this equals `count_pretokens` of a
    file holding the same documents separated by a special token. Memory follows the distinct
    pre-tokens, not the number of documents.

    Args:
        texts: the documents, each a str.
        special_tokens: as in `count_pretokens`.
        pattern: as in `count_pretokens`.
        min_pretoken_count: as in `count_pretokens`.

    Returns:
        pre-token bytes -> count.

    Raises:
        ConfigError: a single str or bytes where the documents belong, or a document that is not a
            str or holds a lone surrogate (naming the document's index).
    """
    if isinstance(texts, (str, bytes, bytearray, memoryview)):
        # Iterating it would count each character as a document: every pre-token one character,
        # nothing left to merge, and no error.
        raise ConfigError(
            f"texts must be an iterable of documents, not a single {type(texts).__name__} (wrap it in a list)"
        )
    specials = validate_special_tokens(special_tokens)
    validate_min_count(min_pretoken_count)
    split = resolve_pattern(pattern)
    counter = pretoken_counter(pattern=split)
    checked_in_c = has_compiled_counter(split)  # the compiled counter rejects lone surrogates itself
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ConfigError(f"document #{index} is {type(text).__name__}, not str")
        try:
            if not checked_in_c:
                text.encode("utf-8")  # a lone surrogate has no UTF-8: say which document holds it
            for piece in split_on_special_tokens(text, specials):
                counter.add(piece)
        except (UnicodeEncodeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(one_line(f"document #{index}: {exc}")) from None
    return drop_rare(Counter(counter.to_dict()), min_pretoken_count)


def count_pretokens(
    input_path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    special_tokens: Iterable[str] | None = None,
    num_workers: int | None = None,
    *,
    packed: bool = False,
    progress: bool = False,
    backend: str = "local",
    scheduler: str | None = None,
    text_field: str = "text",
    skip_bad_records: bool = False,
    min_pretoken_count: int = 1,
    pattern: str | SplitPattern | None = None,
) -> Counter[bytes] | PackedCounts:
    """Count the pre-tokens of a corpus as a map-reduce over units of work.

    Each worker reads only its own unit and returns a Counter keyed by bytes; the partial counts
    are summed (by the parent, or by a tree of merges on the Dask workers with backend="dask"),
    never holding the corpus. The result is identical for every backend and worker count.

    Args:
        input_path: a file, a glob, a directory, or a list of them; .txt, .jsonl (each optionally
            .gz/.zst) and .parquet files (see bpe_impls.corpus.inputs).
        special_tokens: texts the corpus is split on first; no pre-token crosses one.
        num_workers: workers counting in parallel; 1 counts in-process, None uses every core.
        packed: return the counts as PackedCounts (a read-only Mapping held as one bytes, which the
            native trainer reads directly) wherever the compiled counter scans the pattern: they
            are then never Python objects, which takes a fraction of the memory.
        progress: show progress bars on stderr.
        backend: where units are counted: "local" (this machine) or "dask" (a Dask cluster).
        scheduler: the Dask scheduler address (tcp://HOST:8786) for backend="dask"; None starts a
            LocalCluster.
        text_field: the field holding the text in JSON Lines and Parquet records.
        skip_bad_records: skip bad JSON/Parquet records, reported as one SkippedRecordsWarning,
            instead of raising a CorpusError naming file and line/row.
        min_pretoken_count: N > 1 drops pre-tokens seen fewer than N times in the whole corpus:
            fewer words to hold and train on, but a different result (like HF's min_frequency).
        pattern: the split pattern: "gpt2" (None, the default), "cl100k", "o200k" or any regex.

    Returns:
        pre-token bytes -> count (a Counter, or PackedCounts with `packed`).

    Raises:
        CorpusError: a missing, empty or unreadable input, or a bad record, named.
        ConfigError: an argument that cannot be used.

    Example:
        >>> counts = count_pretokens("corpus.txt", ["<|endoftext|>"], num_workers=1)
        >>> counts[b" the"] > counts[b" of"] > 0
        True
    """
    specials = validate_special_tokens(special_tokens)
    validate_min_count(min_pretoken_count)
    split = resolve_pattern(pattern)
    units = plan_inputs(
        input_path,
        specials,
        num_workers,
        text_field=text_field,
        skip_bad_records=skip_bad_records,
        pattern=split,
    )
    return count_units(
        units,
        specials,
        backend=backend,
        num_workers=num_workers,
        scheduler=scheduler,
        min_count=min_pretoken_count,
        progress=progress,
        pattern=split,
        packed=packed,
    )
