"""`python -m bench ceiling`: see docs/benchmarks.md."""
