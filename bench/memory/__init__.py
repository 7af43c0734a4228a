"""`python -m bench memory`: see docs/benchmarks.md."""
