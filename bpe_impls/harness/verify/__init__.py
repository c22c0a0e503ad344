"""`bpe verify`: anyone's BPE trainer, tokenizer or encoder checked against this project's
contract, with every divergence shrunk to a minimal counterexample.

    from bpe_impls.harness.verify import SearchSettings, verify_trainer
    result = verify_trainer("adapters.py:run_train_bpe", SearchSettings(max_examples=200))
    print(result.status, result.divergence and result.divergence.describe())

The implementation runs in a process of its own (refs.Isolated); Hypothesis searches each clause
of the contract (clauses.TRAINER_CLAUSES, clauses.TOKENIZER_CLAUSES) for an input on which it and the
reference disagree, after the clause's explicit boundary cases (boundary.py), and shrinks it; each
divergence is replayed, and diagnosed by probing the implementation (diagnose.py). This
project's own trainers and encoders are references too (`builtin:NAME`, `builtin:tokenizer`),
checked by the same code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...base.lazy import lazy_names

# Each name's module is imported on first use (PEP 562): PEER_NAMES (the `bpe` command's help) and
# the clauses (the pytest plugin, loaded in every pytest run) do not import the engine and Hypothesis.
_LAZY = {
    **dict.fromkeys(
        (
            "ClauseResult",
            "Divergence",
            "SearchSettings",
            "Verification",
            "merge_verifications",
            "verdict_table",
            "verification_summary",
            "verify_encoder",
            "verify_tokenizer",
            "verify_trainer",
        ),
        ".engine",
    ),
    **dict.fromkeys(("REAL_TEXT", "TOKENIZER_CLAUSES", "TRAINER_CLAUSES"), ".clauses"),
    "PEER_NAMES": ".peer_encoders",
    **dict.fromkeys(
        (
            "ENTRY_POINT_GROUP",
            "BadResult",
            "ImplementationCrashed",
            "ImplementationHung",
            "ImplementationNotLoaded",
            "ImplementationRaised",
            "BadResult",
            "ImplementationCrashed",
            "ImplementationError",
            "ImplementationHung",
            "ImplementationNotLoaded",
            "ImplementationRaised",
            "Isolated",
        ),
        ".refs",
    ),
}

if TYPE_CHECKING:
    from .clauses import REAL_TEXT, TOKENIZER_CLAUSES, TRAINER_CLAUSES
    from .engine import (
        ClauseResult,
        Divergence,
        SearchSettings,
        Verification,
        merge_verifications,
        verdict_table,
        verification_summary,
        verify_encoder,
        verify_tokenizer,
        verify_trainer,
    )
    from .peer_encoders import PEER_NAMES
    from .refs import (
        ENTRY_POINT_GROUP,
        BadResult,
        ImplementationCrashed,
        ImplementationError,
        ImplementationHung,
        ImplementationNotLoaded,
        ImplementationRaised,
        Isolated,
    )


__getattr__, __dir__ = lazy_names(__name__, _LAZY)


__all__ = [
    "REAL_TEXT",
    "TOKENIZER_CLAUSES",
    "TRAINER_CLAUSES",
    "ClauseResult",
    "Divergence",
    "SearchSettings",
    "Verification",
    "merge_verifications",
    "verdict_table",
    "verification_summary",
    "verify_encoder",
    "verify_tokenizer",
    "verify_trainer",
    "PEER_NAMES",
    "ENTRY_POINT_GROUP",
    "BadResult",
    "ImplementationCrashed",
    "ImplementationError",
    "ImplementationHung",
    "ImplementationNotLoaded",
    "ImplementationRaised",
    "Isolated",
]
