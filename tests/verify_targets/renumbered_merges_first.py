"""Not a bug under CS336's contract: the vocab numbers the merges first (in order), then the 256 bytes,
then the special tokens; its tokens and merges are the reference's. `bpe verify` passes it (noting the
numbering) and `bpe verify --strict-ids`, which checks this project's layout, does not."""

import reference
from reference import *  # noqa: F403

_train = reference.run_train_bpe


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    _, merges = _train(input_path, vocab_size, special_tokens, **kwargs)
    ordered = (
        [a + b for a, b in merges] + [bytes([b]) for b in range(256)] + [t.encode("utf-8") for t in special_tokens]
    )
    return dict(enumerate(ordered)), merges
