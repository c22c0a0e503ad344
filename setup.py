"""Compiled cores (optional): the project installs and works without a C compiler.

pyproject.toml holds the metadata; this file lists the C extensions and the packages (the
real-text samples in the top-level fixtures/ install as the data-only package bpe_impls._fixtures,
which pyproject's package discovery cannot name). `optional=True` turns a
failed build into a warning, and the pure-Python trainers and encoders are then what runs (see
bpe_impls/base/compiled.py for how the package picks).
"""

import os

from setuptools import Extension, find_packages, setup

# The C sources live in csrc/: the core (plain C, no Python.h) in csrc/ itself, its CPython glue in
# csrc/py/ (csrc/py/native_module.c lists the files). MANIFEST.in ships them in the sdist; a header
# edit rebuilds both extensions.
_HEADERS = [
    "csrc/bpe_util.h",
    "csrc/scanner.h",
    "csrc/scan_kind.h",
    "csrc/scan_blocks.h",
    "csrc/counter.h",
    "csrc/packed.h",
    "csrc/encoder_internal.h",
    "csrc/trainer_internal.h",
    "csrc/u64_heap.h",
    "csrc/ranks.h",
    "csrc/vocab_files.h",
    "csrc/json_scan.h",
    "csrc/py/common.h",
    "csrc/py/encoder_py.h",
    "csrc/py/packed_py.h",
]
_FLAGS = ["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]
# An optimisation level in CFLAGS wins (the sanitizer build, .ci/sanitize, asks for -O1): these
# flags come after CFLAGS on the compiler's command line, so a -O3 here would override it.
if any(flag.startswith("-O") for flag in os.environ.get("CFLAGS", "").split()):
    _FLAGS.remove("-O3")
# The trainer is several C files, one per component, whose merge loop calls small functions of the
# others on every occurrence: link-time optimisation inlines them as one file would (callgrind, kjv,
# 5000 merges: 7.5% more instructions without it, 2% with). The encoder keeps its per-pre-token
# functions static inline in encoder_internal.h instead (the same instructions as one file), where
# LTO's other choices cost 1.7%.
_TRAINER_FLAGS = [*_FLAGS, "-flto"]
_TRAINER_LINK_FLAGS = [flag for flag in _TRAINER_FLAGS if flag.startswith(("-O", "-flto"))]

setup(
    # The library's packages, and fixtures/ (SOURCES.md, the samples and their licenses) installed
    # as bpe_impls/_fixtures; bpe_impls/harness/fixtures.py looks there, then in the checkout's
    # fixtures/ (a source tree or an editable install).
    packages=[*find_packages(include=["bpe_impls", "bpe_impls.*"]), "bpe_impls._fixtures"],
    package_dir={"bpe_impls._fixtures": "fixtures"},
    package_data={"bpe_impls._fixtures": ["*"]},
    ext_modules=[
        Extension(
            "bpe_impls._native",
            [
                # the core
                "csrc/scanner.c",
                "csrc/utf8.c",
                "csrc/specials.c",
                "csrc/bytes_map.c",
                "csrc/counter.c",
                "csrc/encoder_tables.c",
                "csrc/encoder_cache.c",
                "csrc/encoder_bpe.c",
                "csrc/encoder_loop.c",
                "csrc/batch_runs.c",
                "csrc/rank_file.c",
                "csrc/vocab_files.c",
                "csrc/jsonl.c",
                # its glue
                "csrc/py/native_module.c",
                "csrc/py/common.c",
                "csrc/py/counter_type.c",
                "csrc/py/encoder_type.c",
                "csrc/py/encoder_many.c",
                "csrc/py/tables_module.c",
                "csrc/py/jsonl_module.c",
            ],
            include_dirs=["csrc"],
            depends=_HEADERS,
            extra_compile_args=_FLAGS,
            optional=True,
        ),
        Extension(
            "bpe_impls._native_train",
            [
                "csrc/trainer.c",
                "csrc/trainer_words.c",
                "csrc/trainer_pairs.c",
                "csrc/trainer_heap.c",
                "csrc/trainer_merge.c",
                "csrc/trainer_load.c",
                "csrc/py/trainer_module.c",
            ],
            include_dirs=["csrc"],
            depends=_HEADERS,
            extra_compile_args=_TRAINER_FLAGS,
            extra_link_args=_TRAINER_LINK_FLAGS,
            optional=True,
        ),
    ],
)
