"""What a measurement ran on: CPU, cores, memory, OS, Python, package versions and the git commit.

Recorded with every scaling run and shown in the HTML report, so numbers are never read without
the machine that made them.
"""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import psutil

# Packages whose versions change the numbers: ours, its dependencies, and the peers.
PACKAGES = ("bpe_impls", "numpy", "regex", "matplotlib", "scipy", "tokenizers", "rustbpe", "tiktoken", "gigatoken")
_CHECKOUT = Path(__file__).resolve().parents[2]


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else whatever platform reports."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def git_commit(where: Path = _CHECKOUT) -> str:
    """HEAD's hash, with "+dirty" when tracked files differ from it; "unknown" outside a checkout."""
    try:
        head = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def describe_machine() -> dict[str, object]:
    versions: dict[str, str | None] = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "packages": versions,
        "commit": git_commit(),
    }
