"""Bug: the split pattern leaves out GPT-2's contractions ('s, 'll, ...), in training and encoding."""

import reference
from reference import *  # noqa: F403

reference.GPT2_PATTERN = r""" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
