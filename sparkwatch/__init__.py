"""sparkwatch: observability for Spark Structured Streaming state.

Attach to a running app with one line::

    import sparkwatch; sparkwatch.attach(spark)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkwatch.version import __version__

if TYPE_CHECKING:
    from sparkwatch.listener.attach import Attachment


def attach(spark: Any, **overrides: Any) -> Attachment:
    """Attach the sparkwatch listener to ``spark``; settings come from env vars, Spark conf and
    ``overrides`` (see :class:`sparkwatch.settings.ListenerSettings`)."""
    from sparkwatch.listener.attach import attach as _attach

    return _attach(spark, **overrides)


__all__ = ["__version__", "attach"]
