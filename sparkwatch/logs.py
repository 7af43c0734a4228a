"""The one log format of sparkwatch's processes (the CLI, the collector and its writer child)."""

from __future__ import annotations

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
