"""`python -m bench state`: see docs/benchmarks.md."""
