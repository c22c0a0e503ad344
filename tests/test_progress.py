"""A library call made without a progress bar starts no thread.

tqdm starts its monitor thread even for a disabled bar (bpe_impls/base/progress.py); a caller who
asked for no bar should find their process as they left it. Each check runs in a fresh
interpreter, since any bar an earlier test showed leaves tqdm's monitor running in this one.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from bpe_impls import IMPLEMENTATIONS
from bpe_impls.base.progress import progress_bar

_CHECK = """
import sys, threading
from bpe_impls import IMPLEMENTATIONS, count_pretokens
path, impl = sys.argv[1], sys.argv[2]
counts = count_pretokens(path, ["<|endoftext|>"], num_workers=1)
IMPLEMENTATIONS[impl](counts, 300, ["<|endoftext|>"])
print(len(threading.enumerate()), *[thread.name for thread in threading.enumerate()])
"""


@pytest.mark.parametrize("impl", list(IMPLEMENTATIONS))
def test_counting_and_training_without_a_bar_leave_no_thread(impl, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("low lower lowest<|endoftext|>newer wider new\n" * 50, encoding="utf-8")
    said = subprocess.run(
        [sys.executable, "-c", _CHECK, str(corpus), impl], capture_output=True, text=True, check=True
    ).stdout.split()
    assert said == ["1", "MainThread"]


def test_a_shown_bar_still_works(capsys):
    with progress_bar(True, total=3, desc="shown", file=sys.stderr) as bar:
        bar.update(3)
    assert "shown" in capsys.readouterr().err
    with progress_bar(False, total=3, desc="hidden") as bar:
        bar.update(3)  # the disabled bar takes every call the shown one does
    assert "hidden" not in capsys.readouterr().err
