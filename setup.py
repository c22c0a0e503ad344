"""Compiled cores (optional): the project installs and works without a C compiler.

pyproject.toml holds the metadata; this file only lists the C extensions. `optional=True` turns a
failed build into a warning, and the pure-Python trainers and encoders are then what runs (see
bpe_impls/native.py for how the package picks).
"""

from setuptools import Extension, setup

_FLAGS = ["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]

setup(
    ext_modules=[
        Extension("bpe_impls._native", ["bpe_impls/_native.c"], extra_compile_args=_FLAGS, optional=True),
        Extension("bpe_impls._native_train", ["bpe_impls/_native_train.c"], extra_compile_args=_FLAGS, optional=True),
    ]
)
