"""Bug: encode_iterable keeps a buffer and, once it holds more than 8,192 characters, encodes it up to
the last newline within the first 8,192 and keeps the rest: a run of newlines (or of spaces and
newlines) that spans that cut is split in two pre-tokens, where encode keeps it one."""

import reference
from reference import *  # noqa: F403

BUFFER = 8192


class Tokenizer(reference.Tokenizer):
    def encode_iterable(self, iterable):
        buffer = ""
        for chunk in iterable:
            buffer += chunk
            while len(buffer) > BUFFER:
                cut = buffer.rfind("\n", 0, BUFFER)
                if cut < 0:
                    break
                yield from self.encode(buffer[: cut + 1])
                buffer = buffer[cut + 1 :]
        yield from self.encode(buffer)


def get_tokenizer(vocab, merges, special_tokens=None):
    return Tokenizer(dict(vocab), list(merges), special_tokens)
