"""From corpus files to pre-token counts: inputs (which files), units of work and safe cuts,
planning (files to units), tallying (one unit's counts, the counters, packed counts), the local
and Dask counting backends, and at the top `count_pretokens` / `count_texts`."""

from .count import BACKENDS, count_pretokens, count_texts, count_units
from .tally import CountingBackend, SkippedRecordsWarning

__all__ = ["BACKENDS", "CountingBackend", "count_pretokens", "count_texts", "count_units", "SkippedRecordsWarning"]
