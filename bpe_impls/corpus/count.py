"""The top of the corpus layer: count a corpus's pre-tokens with a counting backend.

    counts = count_pretokens("shards/", ["<|endoftext|>"], num_workers=8)

Inputs are planned into units of work (corpus.planning); a backend tallies every unit and adds
the tallies up. The backends ("local": corpus.local; "dask": corpus.dask_backend) differ only in
where `tally_unit` runs, so chunking, the split pattern, special-token splitting and bad-input
errors live once, below both of them.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from ..base.checks import one_line, validate_min_count
from ..base.errors import ConfigError
from ..base.patterns import GPT2, SplitPattern, resolve_pattern, split_on_special_tokens, validate_special_tokens
from .dask_backend import DaskBackend
from .local import LocalBackend
from .planning import plan_inputs
from .tally import PackedCounts, Tally, drop_rare, has_compiled_counter, pretoken_counter
from .units import Unit


class CountingBackend(Protocol):
    """Runs `tally_unit` over units of work and returns the sum of their Tallies.

    `count` returns just the counts and reports skipped records as a SkippedRecordsWarning.
    `min_count` > 1 drops pre-tokens rarer than that from the *global* count. `packed=True` lets
    the backend return PackedCounts (it does wherever the compiled counter scans the pattern).
    """

    def tally(
        self, units: Sequence[Unit], special_tokens: tuple[str, ...], *, progress: bool = False,
        min_count: int = 1, pattern: SplitPattern = GPT2, packed: bool = False,
    ) -> Tally: ...

    def count(
        self, units: Sequence[Unit], special_tokens: tuple[str, ...], *, progress: bool = False,
        min_count: int = 1, pattern: SplitPattern = GPT2, packed: bool = False,
    ) -> Counter[bytes] | PackedCounts: ...


# name -> factory(num_workers, scheduler address). DaskBackend imports dask only when it counts.
BACKENDS: dict[str, Callable[[int | None, str | None], CountingBackend]] = {
    "local": lambda num_workers, scheduler: LocalBackend(num_workers),
    "dask": DaskBackend,
}


def count_units(
    units: Sequence[Unit],
    special_tokens: tuple[str, ...],
    *,
    backend: str = "local",
    num_workers: int | None = None,
    scheduler: str | None = None,
    min_count: int = 1,
    progress: bool = False,
    pattern: SplitPattern = GPT2,
    packed: bool = False,
) -> Counter[bytes] | PackedCounts:
    """Count the units with the named backend; `scheduler` (a Dask address) is for backend="dask"."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown counting backend {backend!r}; choose from {', '.join(sorted(BACKENDS))}")
    if scheduler is not None and backend != "dask":
        raise ConfigError("a scheduler address is only used with the dask backend (--backend dask)")
    counter = BACKENDS[backend](num_workers, scheduler)
    return counter.count(
        units, special_tokens, progress=progress, min_count=min_count, pattern=pattern, packed=packed
    )


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
    pre-tokens, not the number of documents. A document that is not a str, or holds a lone
    surrogate, is a ConfigError naming its index.
    """
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
    input_path: str | os.PathLike | Sequence[str | os.PathLike],
    special_tokens: Iterable[str] | None = None,
    num_workers: int | None = None,
    *,
    progress: bool = False,
    backend: str = "local",
    scheduler: str | None = None,
    text_field: str = "text",
    skip_bad_records: bool = False,
    min_pretoken_count: int = 1,
    pattern: str | SplitPattern | None = None,
    packed: bool = False,
) -> Counter[bytes] | PackedCounts:
    """Count the pre-tokens of a corpus as a map-reduce over units of work.

    `input_path`: a file, a glob, a directory, or a list of them; .txt, .jsonl (each optionally
    .gz/.zst) and .parquet files (see bpe_impls.corpus.inputs). Each worker reads only its own unit and
    returns a Counter keyed by bytes; the partial counts are summed (by the parent, or by a tree of
    merges on the Dask workers with backend="dask"), never holding the corpus. `num_workers=1`
    runs in-process; None uses every core. The result is identical for every backend and worker
    count. Bad JSON/Parquet records raise a CorpusError naming file and line/row, or with
    `skip_bad_records` are skipped and reported as a SkippedRecordsWarning. `min_pretoken_count`
    N > 1 drops pre-tokens seen fewer than N times in the whole corpus: smaller word counts to hold
    and train on, but a different result (like HuggingFace's min_frequency). `pattern` is the split
    pattern: "gpt2" (the default), "cl100k", "o200k", or any regex (see bpe_impls.base.patterns).
    `packed=True` returns the counts as PackedCounts (a read-only Mapping held as one bytes, which
    the native trainer reads directly) wherever the compiled counter scans the pattern: they are
    then never Python objects, which takes a fraction of the memory.
    """
    specials = validate_special_tokens(special_tokens)
    validate_min_count(min_pretoken_count)
    split = resolve_pattern(pattern)
    units = plan_inputs(
        input_path, specials, num_workers, text_field=text_field, skip_bad_records=skip_bad_records, pattern=split
    )
    return count_units(
        units, specials, backend=backend, num_workers=num_workers, scheduler=scheduler,
        min_count=min_pretoken_count, progress=progress, pattern=split, packed=packed,
    )
