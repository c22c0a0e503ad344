"""The C core without Python: csrc/tests/ compiled with the machine's C compiler against the core's
files alone (csrc/*.c, no Python.h on the include path) and run; its expectations are the Python
path's (tools/c_core_expectations.py writes them, and is checked here to still write the same).

Skips where there is no C compiler, but fails under CI=true, which has one (as the compiled core's
tests do). With a compiler that has them, the program is built with AddressSanitizer and
UndefinedBehaviorSanitizer, as .ci/sanitize builds it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import UNDER_CI

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
FLAGS = ["-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined"]
# No C file grows past this: a file that does is split by what it holds.
MAX_LINES = 1000


def core_files() -> list[Path]:
    return sorted(CSRC.glob("*.c")) + sorted(CSRC.glob("*.h"))


def compiler() -> list[str]:
    """The C compiler: $CC, else cc, gcc or clang; skips without one (fails under CI)."""
    chosen = os.environ.get("CC")
    if chosen:
        return shlex.split(chosen)
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return [path]
    message = "no C compiler (cc, gcc or clang) to build the C core's test program"
    if UNDER_CI:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def sanitizers_work(cc: list[str], where: Path) -> bool:
    """Whether cc builds and runs a program with the sanitizers."""
    source = where / "probe.c"
    source.write_text("int main(void) { return 0; }\n")
    built = subprocess.run([*cc, *SANITIZE, str(source), "-o", str(where / "probe")], capture_output=True)
    return built.returncode == 0 and subprocess.run([str(where / "probe")], capture_output=True).returncode == 0


def test_expectations_are_the_python_paths():
    """csrc/tests/expected.h is what tools/c_core_expectations.py writes today."""
    spec = importlib.util.spec_from_file_location("c_core_expectations", ROOT / "tools" / "c_core_expectations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = (CSRC / "tests" / "expected.h").read_text()
    assert module.main() == committed, "regenerate: python tools/c_core_expectations.py > csrc/tests/expected.h"


def test_core_includes_no_python():
    """The core's files include C's headers and the core's own, never Python.h or the glue's."""
    own = {path.name for path in core_files()}
    for path in core_files():
        for line in path.read_text().splitlines():
            match = re.match(r'\s*#\s*include\s*([<"])([^>"]+)[>"]', line)
            if match is None:
                continue
            bracket, name = match.groups()
            assert "Python" not in name and not name.startswith("py/"), f"{path.name}: {line.strip()}"
            if bracket == '"':
                assert name in own, f"{path.name} includes {name}, which is not a core file"


def test_no_c_file_is_over_a_thousand_lines():
    for path in sorted(CSRC.rglob("*.[ch]")):
        lines = len(path.read_text().splitlines())
        assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines"


def test_the_core_passes_its_c_tests(tmp_path):
    """Build csrc/tests/ with the core's .c files only (the include path has csrc/ and nothing of
    Python's), run it, and read its closing line."""
    cc = compiler()
    sanitize = SANITIZE if sanitizers_work(cc, tmp_path) else []
    sources = sorted((CSRC / "tests").glob("*.c")) + sorted(CSRC.glob("*.c"))

    def compile_one(source: Path) -> subprocess.CompletedProcess:
        obj = tmp_path / f"{source.parent.name}_{source.stem}.o"
        return subprocess.run(
            [*cc, *FLAGS, *sanitize, f"-I{CSRC}", "-c", str(source), "-o", str(obj)], capture_output=True, text=True
        )

    # (one file at a time per core: the scanners' files take most of the time)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for source, built in zip(sources, pool.map(compile_one, sources)):
            assert built.returncode == 0 and "warning:" not in built.stderr, f"{source.name}:\n{built.stderr}"
    program = tmp_path / "test_core"
    linked = subprocess.run(
        [*cc, *sanitize, *sorted(map(str, tmp_path.glob("*.o"))), "-lpthread", "-o", str(program)],
        capture_output=True,
        text=True,
    )
    assert linked.returncode == 0, linked.stderr
    # (leaks are checked too: the program frees what it makes)
    env = {
        **os.environ,
        "ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
    }
    env.pop("LD_PRELOAD", None)
    ran = subprocess.run([str(program)], capture_output=True, text=True, timeout=300, env=env)
    closing = re.search(r"^test_core: (\d+) passed, (\d+) failed$", ran.stdout, re.MULTILINE)
    assert ran.returncode == 0 and closing is not None, ran.stdout + ran.stderr
    assert int(closing.group(1)) > 1000 and closing.group(2) == "0", ran.stdout
