"""benchmarks/ imports in an environment like asv's: only bpe_impls and its runtime dependencies.

asv imports every module in benchmarks/ to discover the suites, in its own virtualenv, where the
peers, pytest and memray may be missing; one failing import fails the whole run. Each module is
imported in a fresh interpreter that refuses every module of an installed distribution outside
bpe_impls's runtime dependencies (the test extras installed here stay unseen).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

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
    return sorted(module for module, dists in importlib.metadata.packages_distributions().items()
                  if module.isidentifier() and not any(_name(dist) in allowed for dist in dists))


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


def test_blocked_modules_include_the_peers() -> None:
    """The check below is only as good as its list: the peers and the test tools are on it."""
    blocked = _blocked_modules()
    present = [name for name in ("pytest", "memray", "gigatoken", "tokie", "tiktoken")
               if importlib.util.find_spec(name) is not None]
    assert present, "none of the optional modules is installed here: nothing to check against"
    assert set(present) <= set(blocked)
    assert "numpy" not in blocked and "regex" not in blocked


@pytest.mark.parametrize("module", MODULES)
def test_benchmark_module_imports_without_optional_packages(module: str) -> None:
    result = subprocess.run([sys.executable, "-c", _IMPORT, module, *_blocked_modules()], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr.strip().splitlines()[-1:]
