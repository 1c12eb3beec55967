"""Benchmarks (`make bench`): run each with ``python -m bench.NAME``."""
