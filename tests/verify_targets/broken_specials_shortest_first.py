"""Bug: overlapping special tokens are matched shortest first (in training and in encoding)."""

import reference
import regex
from reference import *  # noqa: F403


def _split_on_specials(text, special_tokens):
    if not special_tokens:
        return [text]
    return regex.split("|".join(regex.escape(t) for t in sorted(special_tokens, key=len)), text)


class Tokenizer(reference.Tokenizer):
    def encode(self, text):
        original, self.special_tokens = self.special_tokens, sorted(self.special_tokens, key=len)
        # sorted(..., reverse=True) in the parent then sees the shortest last; patch its order instead
        ids = _encode_shortest_first(self, text)
        self.special_tokens = original
        return ids


def _encode_shortest_first(tok, text):
    ids = []
    chunks = (
        regex.split("(" + "|".join(regex.escape(t) for t in sorted(tok.special_tokens, key=len)) + ")", text)
        if tok.special_tokens
        else [text]
    )
    for k, chunk in enumerate(chunks):
        if k % 2:
            ids.append(tok.ids[chunk.encode("utf-8")])
        else:
            for match in regex.finditer(reference.GPT2_PATTERN, chunk):
                ids += tok.bpe(match.group().encode("utf-8"))
    return ids


reference.split_on_specials = _split_on_specials


def get_tokenizer(vocab, merges, special_tokens=None):
    return Tokenizer(dict(vocab), list(merges), special_tokens)
