"""The package's version, in a module of its own: every room may import it without importing
the package's entry points (``sparkwatch.attach`` lives in the listener)."""

__version__ = "0.1.0"
