"""Benchmarks: asv suites (bench_*.py), a pytest-benchmark side-by-side table
(test_bench_side_by_side.py) and a memray profiler (memray_profile.py).

asv imports every module in this package to discover benchmarks (in its own environment, where
pytest and memray are not installed), so every module here must be import-safe: no work at
import time and no hard import of pytest or memray at module level.
"""
