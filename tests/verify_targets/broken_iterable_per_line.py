"""Bug: encode_iterable encodes each chunk it is given (a file's lines) on its own, so a pre-token
that continues past a line's end is split otherwise than encode splits it ("a \\n" + "b" is not how
"a \\nb" splits: the space goes with the newline in one, alone in the other)."""

import reference
from reference import *  # noqa: F403


class Tokenizer(reference.Tokenizer):
    def encode_iterable(self, iterable):
        for line in iterable:
            yield from self.encode(line)


def get_tokenizer(vocab, merges, special_tokens=None):
    return Tokenizer(dict(vocab), list(merges), special_tokens)
