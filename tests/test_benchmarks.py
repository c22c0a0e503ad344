"""benchmarks/ imports in an environment like asv's: only bpe_impls and its runtime dependencies.

asv imports every module in benchmarks/ to discover the suites, in its own virtualenv, where the
peers, pytest and memray may be missing; one failing import fails the whole run. Each module is
imported in a fresh interpreter that refuses every module of an installed distribution outside
bpe_impls's runtime dependencies (the test extras installed here stay unseen).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import fixture_text, require_gpt2_files

from bpe_impls import Tokenizer
from bpe_impls.harness import peers

EOT = "<|endoftext|>"

REPO = Path(__file__).resolve().parent.parent
MODULES = sorted(path.stem for path in (REPO / "benchmarks").glob("*.py") if path.stem != "__init__")


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _runtime_closure() -> set[str]:
    """bpe_impls and every distribution its runtime requirements pull in (no extras)."""
    seen: set[str] = set()
    todo = ["bpe-impls"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [_name(req) for req in requires if "extra ==" not in req]
    return seen


def _blocked_modules() -> list[str]:
    allowed = _runtime_closure()
    return sorted(
        module
        for module, dists in importlib.metadata.packages_distributions().items()
        if module.isidentifier() and not any(_name(dist) in allowed for dist in dists)
    )


_IMPORT = """
import importlib, sys
from importlib.abc import MetaPathFinder

class Refuse(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (not in asv's environment)", name=name)
        return None

BLOCKED = set(sys.argv[2:])
sys.meta_path.insert(0, Refuse())
importlib.import_module("benchmarks." + sys.argv[1])
"""


@functools.cache
def _common() -> Any:
    """benchmarks/_common.py of this checkout, as asv imports it (the checkout's root on sys.path)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return importlib.import_module("benchmarks._common")


# Every module the benchmarks may import that asv's environment may lack: the test tools and each peer.
OPTIONAL = [
    "pytest",
    "memray",
    *sorted(
        {peers.PEER_ENCODERS[name].module for name in _common().PEER_ENCODERS}
        | {peers.TRAIN_PEERS[name].module for name in _common().PEER_TRAINERS}
    ),
]


@pytest.mark.parametrize("module", OPTIONAL)
def test_blocked_modules_include_the_optional_ones(module: str) -> None:
    """The check below is only as good as its list: each optional module installed here is on it."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed here: nothing to check against")
    assert module in _blocked_modules()


def test_blocked_modules_leave_the_runtime_dependencies() -> None:
    blocked = _blocked_modules()
    assert "numpy" not in blocked and "regex" not in blocked


@pytest.mark.parametrize("peer", _common().PEER_ENCODERS)
def test_asv_encode_peers_give_our_ids_on_gpt2s_vocab(peer: str) -> None:
    """What asv times for each encode peer (one text, and a batch) is our encoding, built offline
    from GPT-2's vocab; a peer that cannot take the vocab skips the benchmark, with the reason."""
    common = _common()
    vocab, merges = _gpt2_parts()
    text = fixture_text("address.txt") + EOT + fixture_text("german.txt") + EOT + fixture_text("corpus.en")[:20_000]
    ours = Tokenizer(vocab, merges, [EOT])
    try:
        encode = common.peer_encode(peer, vocab, merges, [EOT])
    except NotImplementedError as skipped:  # asv's skip
        assert peer == "quicktok" and "no built-in vocab" in str(skipped), skipped
        return
    adapter = peers.PEER_ENCODERS[peer]
    assert [int(i) for i in adapter.to_list(encode(text))] == ours.encode(text)
    lines = text.splitlines(keepends=True)
    try:
        encode_batch = common.peer_encode_batch(peer, vocab, merges, 2, [EOT])
    except NotImplementedError as skipped:
        pytest.skip(str(skipped))
    assert [int(i) for i in adapter.batch_to_list(encode_batch(lines))] == [
        i for ids in ours.encode_batch(lines) for i in ids
    ]


def _gpt2_parts() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    from bpe_impls.encoding.formats.gpt2 import load_tokenizer_files

    return load_tokenizer_files(*require_gpt2_files())


@pytest.mark.parametrize("module", MODULES)
def test_benchmark_module_imports_without_optional_packages(module: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT, module, *_blocked_modules()],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr.strip().splitlines()[-1:]


@pytest.mark.parametrize("name", ["corpus.en", "tinystories_sample.txt", "kjv.txt"])
def test_without_the_shared_fixtures_a_timed_suite_skips(tmp_path, monkeypatch, name):
    """A timed suite never silently runs on a bundled sample (another corpus): it skips, saying
    where it looked."""
    monkeypatch.setenv("BPE_FIXTURES", str(tmp_path))  # an empty folder
    with pytest.raises(
        NotImplementedError, match=rf"fixture {re.escape(name)} not found in {re.escape(str(tmp_path))}"
    ):
        _common().corpus_path(name)


def test_without_the_shared_fixtures_a_quick_run_takes_the_sample_and_says_so(tmp_path, monkeypatch):
    common = _common()
    monkeypatch.setenv("BPE_FIXTURES", str(tmp_path))  # an empty folder
    assert common.quick_text("kjv.txt") == (
        REPO / "fixtures" / "kjv_sample.txt",
        "kjv_sample.txt (bundled sample of kjv.txt)",
    )


def _benchmark(name: str) -> Any:
    """benchmarks/NAME.py of this checkout, imported as asv and the scorecard import it."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return importlib.import_module("benchmarks." + name)


def test_stream_halves_deal_every_chunk_to_one_half():
    """The steady cell's warm-up and measured texts: documents of one corpus, none in both, none
    lost, each cut at a line end, in the text's order, about as large as each other."""
    streams = _benchmark("encode_streams")
    lines = [f"line {k} " * (1 + k % 50) + "\n" for k in range(3000)]  # each line unique
    warm, measured = streams.halves("".join(lines))
    warm_lines, measured_lines = warm.splitlines(keepends=True), measured.splitlines(keepends=True)
    assert sorted(warm_lines + measured_lines) == sorted(lines)
    order = {line: k for k, line in enumerate(lines)}
    for half in (warm_lines, measured_lines):
        assert [order[line] for line in half] == sorted(order[line] for line in half)
    assert warm_lines[0] == lines[0] and measured_lines[0] != lines[len(warm_lines)]  # dealt, not split in two
    assert abs(len(warm) - len(measured)) < 2 * streams.CHUNK


def test_stream_scripts_name_the_script_of_most_letters():
    streams = _benchmark("encode_streams")
    assert streams.script_of("人人生而自由，在尊严和权利上一律平等。 OK") == "CJK"
    assert streams.script_of("Все люди рождаются свободными, ok") == "CYRILLIC"
    assert streams.script_of("सभी मनुष्यों को गौरव") == "DEVANAGARI"
    assert streams.script_of("All human beings, 1948") == "LATIN"
    assert streams.script_of("Όλοι οι άνθρωποι") is None  # Greek: not one of the table's scripts
    assert streams.script_of("1948 -- 2026") is None


@pytest.mark.parametrize("split", ["100-300", "1000-2000"])
def test_batch_documents_of_a_size_range_cover_the_text(split: str):
    batch_lists = _benchmark("batch_lists")
    text = fixture_text("corpus.en")
    low, high = map(int, split.split("-"))
    docs = batch_lists.documents(text + "<|endoftext|>" + text, split)
    assert "".join(docs) == (text + "\n" + text)
    assert all(low <= len(doc) <= high for doc in docs[:-1]) and len(docs[-1]) <= high
    assert docs == batch_lists.documents(text + "<|endoftext|>" + text, split)  # seeded
