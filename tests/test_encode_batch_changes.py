"""encode_batch on a list another thread changes: the error says the list changed, never an
internal message about runs and ranges."""

from __future__ import annotations

import pytest
from conftest import load_gpt2

from bpe_impls.base import compiled
from bpe_impls.encoding import batches as module

ENCODERS = ["native", "scan"] if compiled.AVAILABLE else ["scan"]


@pytest.mark.parametrize("encoder", ENCODERS)
def test_a_list_grown_while_its_runs_are_planned_and_cut_back_is_named_as_changed(monkeypatch, encoder):
    # What another thread can do between encode_batch reading the list's length and encoding it:
    # grow it while the runs are planned, then cut it back. The runs then reach past its end.
    tok = load_gpt2(["<|endoftext|>"], encoder=encoder)
    batch = [f"text number {k}. " * 20 for k in range(6)]
    real = module.BATCH_RUNS

    def planning_on_a_changing_list(items, *args):
        items.extend(["more text. " * 20] * 47)
        bounds = real(items, *args)
        del items[6:]
        return bounds

    monkeypatch.setattr(module, "BATCH_RUNS", planning_on_a_changing_list)
    with pytest.raises(RuntimeError) as info:
        tok.encode_batch(batch, num_threads=2)
    assert str(info.value) == (
        "the batch changed size while it was encoded (53 items, now 6): another thread modified the list"
    )
