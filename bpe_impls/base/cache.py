"""The package's cache folder: what is expensive to compute and pure, kept between runs.

Every file in it is named by everything its content depends on, so it is never stale, and may
be deleted at any time (`rm -r ~/.cache/bpe_impls`): it is then computed again.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """$BPE_CACHE_DIR, else $XDG_CACHE_HOME/bpe_impls, else ~/.cache/bpe_impls."""
    if os.environ.get("BPE_CACHE_DIR"):
        return Path(os.environ["BPE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bpe_impls"
