"""Not a bug under CS336's contract: the special tokens get their ids after the 256 bytes and the
merges, not first; the tokens and merges are the reference's. `bpe verify` passes it (noting the
numbering) and `bpe verify --strict-ids`, which checks this project's layout, does not."""

import reference
from reference import *  # noqa: F403

_train = reference.run_train_bpe


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    vocab, merges = _train(input_path, vocab_size, special_tokens, **kwargs)
    ordered = [token for _, token in sorted(vocab.items())]
    specials = [t.encode("utf-8") for t in special_tokens]
    rest = list(ordered[len(specials) :])
    return {i: t for i, t in enumerate(rest + specials)}, merges
