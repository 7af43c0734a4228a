"""`python -m bench scrape`: see docs/benchmarks.md."""
