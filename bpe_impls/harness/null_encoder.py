"""A tokenizer factory whose `encode_iterable` holds nothing: what the CS336 memory check measures it
with to learn the harness's own share of an `encode_iterable` peak.

The worker that consumes `encode_iterable` (verify/worker.py) holds a block of up to 4,096 ids
while it hashes them, and its reading of the file has buffers of its own: small, but measured
rather than assumed, beside a limit of one megabyte. This encoder yields a fresh int per four characters read (as
many ids as GPT-2 gives English, each a new object as a real encoder's are) and keeps no state, so
its peak is the harness's alone.

Loaded by its path in the isolated worker (`.../null_encoder.py:get_tokenizer`), perhaps under
another interpreter: standard library only, Python 3.8 or later, nothing of bpe_impls.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

_CHARS_PER_ID = 4  # GPT-2 gives about one id per 3.5 bytes of English
_FIRST_ID = 256  # ids above the cached small ints: a new object each, as a real encoder's ids are
_ID_SPAN = 50_000


class NullEncoder:
    def encode(self, text: str) -> list[int]:
        return list(self._ids(len(text)))

    def encode_iterable(self, lines: Iterable[str]) -> Iterator[int]:
        for line in lines:
            yield from self._ids(len(line))

    @staticmethod
    def _ids(characters: int) -> Iterator[int]:
        for position in range(characters // _CHARS_PER_ID):
            yield _FIRST_ID + position % _ID_SPAN


def get_tokenizer(vocab: Any, merges: Any, special_tokens: Any = None) -> NullEncoder:
    return NullEncoder()
