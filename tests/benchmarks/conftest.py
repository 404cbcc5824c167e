"""Benchmarks print measured ratios; run them with ``pytest -m bench -s tests/benchmarks``."""
