"""Bug: training does not split the text on the special tokens, so pairs cross them and their
bytes are merged like any other text."""

import reference
from reference import *  # noqa: F403

_count_words = reference.count_words
reference.count_words = lambda text, special_tokens: _count_words(text, [])
