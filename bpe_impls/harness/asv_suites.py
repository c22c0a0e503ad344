"""asv benchmarks of anyone's BPE, for tracking it over the commits of their own repository.

Copy docs/asv/ (asv.conf.json and benchmarks/bench_bpe.py) into your repository, name your
implementations there, and run asv as for any project:

    from bpe_impls.harness.asv_suites import TokenizerSuite, TrainerSuite

    class Train(TrainerSuite):
        reference = "cs336_basics.bpe:run_train_bpe"      # run_train_bpe(input_path, vocab_size, special_tokens)

    class Encode(TokenizerSuite):
        reference = "cs336_basics.tokenizer:get_tokenizer"  # get_tokenizer(vocab, merges, special_tokens)

A reference is what `bpe verify` takes (`module:function`, `path/file.py:function`, an entry
point's name). Each suite has asv time and measure your code as it does any function (a process of
its own per benchmark, repeated), and tracks at every commit whether its output still equals this
project's (`track_same_as_bpe_impls`: 1 the same tokens and merges, or the same ids; 0 not), so a
commit that makes your trainer faster and wrong shows in the same history. The corpus is
corpus.en (the shared fixture when present, else the sample bundled with bpe_impls), vocab 500 and
`<|endoftext|>`, as CS336's speed test; set `corpus`, `vocab_size` and `special_tokens` on your
class to change them (`corpus`: a file, relative to your repository, or a fixture's name).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, ClassVar

from ..base.errors import ConfigError
from ..encoding import Tokenizer
from ..trainers import DEFAULT_IMPL, train_bpe
from .fixtures import missing_text, real_text
from .subjects import same_tokens
from .verify.protocol import load_user_reference

__all__ = ["TokenizerSuite", "TrainerSuite"]


def _repository(suite: Any) -> Path:
    """The repository the suite's file is in (its benchmarks/ folder's parent): relative paths are
    taken from there, since asv runs benchmarks in a directory of its own."""
    return Path(sys.modules[type(suite).__module__].__file__ or ".").resolve().parent.parent


def _corpus(suite: Any) -> str:
    """The suite's corpus: a file (relative: in the repository), else a fixture's name."""
    path = _repository(suite) / suite.corpus
    if path.is_file():
        return str(path)
    found = real_text(suite.corpus)
    if found is None:
        raise ConfigError(
            f"{suite.corpus}: neither a file in {_repository(suite)} nor a fixture: {missing_text(suite.corpus)}"
        )
    return str(found.path)


def _load(suite: Any) -> Any:
    """The callable the suite's reference names (a relative `path/file.py:function`: in the
    repository)."""
    if not suite.reference:
        raise NotImplementedError(f"{type(suite).__name__}: set `reference` to your implementation")
    module, _, function = suite.reference.rpartition(":")
    if module.endswith(".py") and not Path(module).is_absolute():
        return load_user_reference(f"{_repository(suite) / module}:{function}")
    return load_user_reference(suite.reference)


class _Suite:
    reference: ClassVar[str] = ""
    corpus: ClassVar[str] = "corpus.en"
    vocab_size: ClassVar[int] = 500
    special_tokens: ClassVar[list[str]] = ["<|endoftext|>"]
    timeout = 600.0  # asv's own limit per benchmark, in seconds (a slow trainer is still measured)


class TrainerSuite(_Suite):
    """Your trainer on one corpus: seconds, peak memory, and whether it matches ours."""

    def setup(self) -> None:
        self.train = _load(self)
        self.path = _corpus(self)

    def _run(self) -> Any:
        return self.train(self.path, self.vocab_size, list(self.special_tokens))

    def time_train(self) -> None:
        self._run()

    def peakmem_train(self) -> None:
        self._run()

    def track_same_as_bpe_impls(self) -> float:
        ours = train_bpe(self.path, self.vocab_size, list(self.special_tokens), impl=DEFAULT_IMPL, progress=False)
        vocab, merges = self._run()
        plain = ({int(i): bytes(token) for i, token in vocab.items()}, [(bytes(a), bytes(b)) for a, b in merges])
        return float(same_tokens(plain, ours))

    track_same_as_bpe_impls.unit = "1 = the same tokens and merges"  # type: ignore[attr-defined]


class TokenizerSuite(_Suite):
    """Your tokenizer over a vocab trained by ours on the corpus: encode's seconds, the peak memory
    of encode_iterable over the corpus file (where it has one), and whether its ids match ours."""

    def setup(self) -> None:
        factory = _load(self)
        self.path = _corpus(self)
        self.vocab, self.merges = train_bpe(self.path, self.vocab_size, list(self.special_tokens), progress=False)
        self.tokenizer = factory(self.vocab, self.merges, list(self.special_tokens))
        with open(self.path, encoding="utf-8", newline="") as file:
            self.text = file.read()

    def time_encode(self) -> None:
        self.tokenizer.encode(self.text)

    def peakmem_encode_iterable(self) -> None:
        if not callable(getattr(self.tokenizer, "encode_iterable", None)):
            from asv_runner.benchmarks.mark import SkipNotImplemented  # (asv's own: this runs only under asv)

            raise SkipNotImplemented("the tokenizer has no encode_iterable")  # shown as skipped, not failed
        with open(self.path, encoding="utf-8", newline="") as file:
            for _ in self.tokenizer.encode_iterable(file):
                pass

    def track_same_as_bpe_impls(self) -> float:
        ours = Tokenizer(self.vocab, self.merges, list(self.special_tokens)).encode(self.text)
        return float([int(i) for i in self.tokenizer.encode(self.text)] == ours)

    track_same_as_bpe_impls.unit = "1 = the same ids"  # type: ignore[attr-defined]
