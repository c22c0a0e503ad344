r"""Bug: the split pattern lacks the `\s+(?!\S)` alternative, so a run of spaces before a word keeps
its last space instead of giving it to the word."""

import reference
from reference import *  # noqa: F403

reference.GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+"""
