"""Benchmarks: run with ``nox -s bench`` (never part of the test suite); see README.md."""
