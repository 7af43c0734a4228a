"""The settings of the commands themselves (``doctor``, ``top``, ``history``, ``db``, ``demo``,
``quarantine``): each is an option whose default is its environment variable (see
:mod:`sparkwatch.settings.options`), read once when the command starts.

Where a command reads what the listener or the collector writes, it takes their declaration (one
environment variable, parsed one way)."""

from __future__ import annotations

from dataclasses import replace

from sparkwatch.settings import collector, listener
from sparkwatch.settings.parsers import secret
from sparkwatch.settings.spec import Setting

TOKEN = Setting(
    "token", secret, "bearer token for --collector (and top's --metrics)", env="SPARKWATCH_TOKEN",
    flag="--token", secret=True)
"""A read token of a collector (or of an exporter behind a proxy), for ``doctor`` and ``top``."""

HISTORY_URL = replace(
    listener.BY_NAME["history_url"], flag="--url",
    help=f"SQLAlchemy URL of the history (default: {listener.DEFAULT_HISTORY_URL})")
"""The history the listener writes: ``db``, ``doctor``, ``history``, ``top``."""

DEMO_HISTORY_URL = replace(
    HISTORY_URL, flag="--history-url",
    help=f"SQLAlchemy URL of the history, or 'off' (default: {listener.DEFAULT_HISTORY_URL})")

COLLECTOR_SPOOL_DIR = replace(
    collector.BY_NAME["spool_dir"], help="the collector's spool directory")
"""``quarantine``: the quarantine file lives beside the collector's spool."""

COLLECTOR_HISTORY_URL = replace(
    collector.BY_NAME["history_url"], help="the collector's history URL")
"""``quarantine replay`` writes where the collector writes."""
