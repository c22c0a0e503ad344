"""The top of the corpus layer: count a corpus's pre-tokens with a counting backend.

    counts = count_pretokens("shards/", ["<|endoftext|>"], num_workers=8)

Inputs are planned into units of work (corpus.planning); a backend tallies every unit and adds
the tallies up. The backends ("local": corpus.local; "dask": corpus.dask_backend) differ only in
where `tally_unit` runs, so chunking, the split pattern, special-token splitting and bad-input
errors live once, below both of them (corpus.tally).

The keyword options of counting (`CountOptions`) are declared once, here, and taken by
`count_pretokens`, `count_texts` and the trainers' pipeline (`train_bpe`,
`train_bpe_from_iterator`) through `takes_count_options`.
"""

from __future__ import annotations

import inspect
import os
import textwrap
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from ..base.checks import one_line, validate_min_count
from ..base.errors import ConfigError
from ..base.patterns import GPT2, SplitPattern, resolve_pattern, split_on_special_tokens, validate_special_tokens
from .dask_backend import DaskBackend
from .local import LocalBackend
from .planning import plan_inputs
from .tally import CountingBackend, PackedCounts, drop_rare, has_compiled_counter, pretoken_counter
from .units import Unit


def _option(default: Any, doc: str) -> Any:
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True, kw_only=True)
class CountOptions:
    """How a corpus is read and counted: the keyword options every counting entry point takes
    (each one the subset it uses; see `takes_count_options`)."""

    num_workers: int | None = _option(
        None, "workers counting in parallel; 1 counts in-process, None uses every core.")
    progress: bool = _option(False, "show progress bars on stderr.")
    backend: str = _option(
        "local", 'where units are counted: "local" (this machine) or "dask" (a Dask cluster).')
    scheduler: str | None = _option(
        None, 'the Dask scheduler address (tcp://HOST:8786) for backend="dask"; None starts a LocalCluster.')
    text_field: str = _option("text", "the field holding the text in JSON Lines and Parquet records.")
    skip_bad_records: bool = _option(
        False, "skip bad JSON/Parquet records, reported as one SkippedRecordsWarning, instead of raising a "
        "CorpusError naming file and line/row.")
    min_pretoken_count: int = _option(
        1, "N > 1 drops pre-tokens seen fewer than N times in the whole corpus: fewer words to hold and "
        "train on, but a different result (like HuggingFace's min_frequency).")
    pattern: str | SplitPattern | None = _option(
        None, 'the split pattern: "gpt2" (None, the default), "cl100k", "o200k" or any regex (see '
        "bpe_impls.base.patterns).")


    def keywords(self) -> dict[str, Any]:
        """The options as keyword arguments, to pass on to another counting entry point."""
        return {option.name: getattr(self, option.name) for option in fields(self)}


_F = TypeVar("_F", bound=Callable[..., Any])


def takes_count_options(*names: str) -> Callable[[_F], _F]:
    """Mark `func(..., **options)` as taking the CountOptions named (all of them by default).

    Its signature, as help() and inspect show it, then lists each of them as a keyword option with
    its type and default in place of **options, and its docstring ends with their meaning, so they
    are declared once (CountOptions) and documented wherever they are taken. An option already in
    func's own parameters (count_pretokens' positional num_workers) keeps its place there. The body
    reads them with `count_options`.
    """
    known = {option.name: option for option in fields(CountOptions)}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise TypeError(f"not a counting option: {', '.join(unknown)}")
    chosen = [known[name] for name in names] if names else list(known.values())

    def mark(func: _F) -> _F:
        signature = inspect.signature(func)
        own = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        taken = {p.name for p in own}
        added = [
            inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, default=option.default,
                              annotation=option.type)
            for option in chosen if option.name not in taken
        ]
        func.__signature__ = signature.replace(parameters=own + added)  # type: ignore[attr-defined]
        func.count_option_names = frozenset(option.name for option in chosen)  # type: ignore[attr-defined]
        lines = [
            textwrap.fill(f"{option.name}: {option.metadata['doc']}", 100, initial_indent="    ",
                          subsequent_indent="        ")
            for option in chosen
        ]
        func.__doc__ = (
            f"{inspect.cleandoc(func.__doc__ or '')}\n\n"
            f"Counting options (declared in bpe_impls.corpus.count.CountOptions):\n" + "\n".join(lines)
        )
        return func

    return mark


def count_options(func: Callable[..., Any], options: Mapping[str, Any], **own: Any) -> CountOptions:
    """The CountOptions `func` (marked by `takes_count_options`) was called with, defaults for the
    rest; `own` adds the ones func declares itself. One it does not take is a TypeError, as Python
    raises for any unexpected keyword."""
    for name in options:
        if name not in func.count_option_names:  # type: ignore[attr-defined]
            raise TypeError(f"{func.__name__}() got an unexpected keyword argument {name!r}")
    return CountOptions(**own, **options)


# name -> factory(num_workers, scheduler address). DaskBackend imports dask only when it counts.
BACKENDS: dict[str, Callable[[int | None, str | None], CountingBackend]] = {
    "local": lambda num_workers, scheduler: LocalBackend(num_workers),
    "dask": DaskBackend,
}


@takes_count_options("num_workers", "progress", "backend", "scheduler")
def count_units(
    units: Sequence[Unit],
    special_tokens: tuple[str, ...],
    *,
    min_count: int = 1,
    pattern: SplitPattern = GPT2,
    packed: bool = False,
    **options: Any,
) -> Counter[bytes] | PackedCounts:
    """Count units of work (already planned) with the named backend.

    `special_tokens` and `pattern` come checked and resolved (count_pretokens does it); `min_count`
    is min_pretoken_count, `packed` as in count_pretokens."""
    chosen = count_options(count_units, options)
    if chosen.backend not in BACKENDS:
        raise ConfigError(
            f"unknown counting backend {chosen.backend!r}; choose from {', '.join(sorted(BACKENDS))}"
        )
    if chosen.scheduler is not None and chosen.backend != "dask":
        raise ConfigError("a scheduler address is only used with the dask backend (--backend dask)")
    counter = BACKENDS[chosen.backend](chosen.num_workers, chosen.scheduler)
    return counter.count(
        units, special_tokens, progress=chosen.progress, min_count=min_count, pattern=pattern, packed=packed
    )


@takes_count_options("pattern", "min_pretoken_count")
def count_texts(texts: Iterable[str], special_tokens: Iterable[str] | None = None, **options: Any) -> Counter[bytes]:
    """Count the pre-tokens of an iterable of documents (a generator, a `datasets` column), streamed.

    Each document is a hard boundary, as a special token is, so this equals `count_pretokens` of a
    file holding the same documents separated by a special token. Memory follows the distinct
    pre-tokens, not the number of documents. A single str or bytes where the documents belong, or
    a document that is not a str or holds a lone surrogate, is a ConfigError (naming the document's
    index).
    """
    chosen = count_options(count_texts, options)
    if isinstance(texts, (str, bytes, bytearray, memoryview)):
        # Iterating it would count each character as a document: every pre-token one character,
        # nothing left to merge, and no error.
        raise ConfigError(
            f"texts must be an iterable of documents, not a single {type(texts).__name__} (wrap it in a list)"
        )
    specials = validate_special_tokens(special_tokens)
    validate_min_count(chosen.min_pretoken_count)
    split = resolve_pattern(chosen.pattern)
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
    return drop_rare(Counter(counter.to_dict()), chosen.min_pretoken_count)


@takes_count_options()
def count_pretokens(
    input_path: str | os.PathLike | Sequence[str | os.PathLike],
    special_tokens: Iterable[str] | None = None,
    num_workers: int | None = None,
    *,
    packed: bool = False,
    **options: Any,
) -> Counter[bytes] | PackedCounts:
    """Count the pre-tokens of a corpus as a map-reduce over units of work.

    `input_path`: a file, a glob, a directory, or a list of them; .txt, .jsonl (each optionally
    .gz/.zst) and .parquet files (see bpe_impls.corpus.inputs). Each worker reads only its own unit
    and returns a Counter keyed by bytes; the partial counts are summed (by the parent, or by a
    tree of merges on the Dask workers with backend="dask"), never holding the corpus. The result
    is identical for every backend and worker count. `packed=True` returns the counts as
    PackedCounts (a read-only Mapping held as one bytes, which the native trainer reads directly)
    wherever the compiled counter scans the pattern: they are then never Python objects, which
    takes a fraction of the memory.
    """
    chosen = count_options(count_pretokens, options, num_workers=num_workers)
    specials = validate_special_tokens(special_tokens)
    validate_min_count(chosen.min_pretoken_count)
    split = resolve_pattern(chosen.pattern)
    units = plan_inputs(
        input_path, specials, chosen.num_workers, text_field=chosen.text_field,
        skip_bad_records=chosen.skip_bad_records, pattern=split,
    )
    return count_units(
        units, specials, backend=chosen.backend, num_workers=chosen.num_workers, scheduler=chosen.scheduler,
        min_count=chosen.min_pretoken_count, progress=chosen.progress, pattern=split, packed=packed,
    )
