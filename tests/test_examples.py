"""Every example a reader is shown runs and prints what it says: the docstrings' `>>>` examples of the
public API (doctest) and the README's Python blocks.

The docstrings' examples share what the Tokenizer's class docstring builds (`tok`, a tokenizer of
the 256 bytes and three merges) and a scratch folder `tmp`; the README's blocks run in a folder
holding the files they name.
"""

from __future__ import annotations

import doctest
import importlib
import re
import shutil
from pathlib import Path

import pytest
from conftest import require_fixture

from bpe_impls import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
# The modules of the public API whose docstrings hold examples.
MODULES = [
    "bpe_impls",
    "bpe_impls.encoding.tokenizer",
    "bpe_impls.trainers.train",
    "bpe_impls.trainers.registry",
    "bpe_impls.corpus.count",
    "bpe_impls.harness.verify.engine",
]


def example_tokenizer() -> Tokenizer:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"he", 257: b"ll", 258: b"hell"}
    return Tokenizer(vocab, [(b"h", b"e"), (b"l", b"l"), (b"he", b"ll")], ["<|endoftext|>"])


def docstring_examples() -> list[doctest.DocTest]:
    found = []
    for name in MODULES:
        module = importlib.import_module(name)
        found += [test for test in doctest.DocTestFinder().find(module, name) if test.examples]
    return found


EXAMPLES = docstring_examples()


def test_the_public_api_has_examples():
    names = {test.name for test in EXAMPLES}
    for method in ("load", "save", "encode", "encode_iterable", "encode_batch", "decode"):
        assert f"bpe_impls.encoding.tokenizer.Tokenizer.{method}" in names
    for function in (
        "trainers.train.train_bpe",
        "corpus.count.count_pretokens",
        "trainers.registry.get_trainer",
        "harness.verify.engine.verify_trainer",
        "harness.verify.engine.verify_tokenizer",
    ):
        assert f"bpe_impls.{function}" in names


@pytest.mark.parametrize("test", EXAMPLES, ids=lambda test: test.name)
def test_a_docstring_example_runs_as_shown(test, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BPE_CACHE_DIR", str(tmp_path / "cache"))
    shutil.copy(require_fixture("corpus.en"), tmp_path / "corpus.txt")
    test.globs.update(tok=example_tokenizer(), tmp=tmp_path, Tokenizer=Tokenizer)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=lambda text: None)
    result = runner.summarize(verbose=False)
    if result.failed:
        report = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        lines: list[str] = []
        report.run(test, out=lines.append)
        pytest.fail("".join(lines), pytrace=False)


def readme_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


@pytest.mark.parametrize("index", range(len(readme_blocks())))
def test_a_readme_python_block_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BPE_CACHE_DIR", str(tmp_path / "cache"))
    shutil.copy(require_fixture("corpus.en"), tmp_path / "corpus.txt")
    code = readme_blocks()[index]
    exec(compile(code, f"README.md python block {index}", "exec"), {"__name__": "readme"})  # noqa: S102
