"""`python -m bench ingest`: see docs/benchmarks.md."""
