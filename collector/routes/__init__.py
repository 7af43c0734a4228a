"""The collector's HTTP routes, one router per concern: ingest, operations, history reads."""
