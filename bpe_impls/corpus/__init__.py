"""From corpus files to pre-token counts: inputs, units of work, safe cuts, planning, tallying,
and the local and Dask counting backends, with `count_pretokens` at the top."""

from .count import BACKENDS, CountingBackend, count_pretokens, count_texts, count_units
from .tally import SkippedRecordsWarning

__all__ = ["BACKENDS", "CountingBackend", "count_pretokens", "count_texts", "count_units", "SkippedRecordsWarning"]
