"""The one log format of sparkwatch's processes (the CLI, the collector and its writer child)."""

from __future__ import annotations

import logging

from sparkwatch.terminal import printable

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class OneLineFormatter(logging.Formatter):
    """Each record's line with its controls escaped: a message may quote what a client sent (a
    refused token, a database's reason for refusing a value), and a newline in it would forge a
    log line, an ESC act on the terminal a log is read in. A traceback, ours, keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        return printable(super().formatMessage(record))


def format_root_handlers(fmt: str = LOG_FORMAT) -> None:
    """Every handler of the root logger (set up by ``logging.basicConfig``) writes ``fmt``,
    one line per record."""
    for handler in logging.getLogger().handlers:
        handler.setFormatter(OneLineFormatter(fmt))
