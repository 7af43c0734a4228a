"""`python -m bench pushfault`: see docs/benchmarks.md."""
