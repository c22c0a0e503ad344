"""From corpus files to pre-token counts: inputs (which files), units of work and safe cuts,
planning (files to units), tallying (one unit's counts, the counters, packed counts), the local
and Dask counting backends, and at the top `count_pretokens` / `count_texts` with the counting
options they share (`CountOptions`)."""

from .count import BACKENDS, CountOptions, count_pretokens, count_texts, count_units
from .tally import CountingBackend, SkippedRecordsWarning

__all__ = [
    "BACKENDS", "CountOptions", "CountingBackend", "count_pretokens", "count_texts", "count_units",
    "SkippedRecordsWarning",
]
