"""`python -m bench history`: see docs/benchmarks.md."""
