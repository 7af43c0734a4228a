"""Ingest tokens re-read from the tokens file on SIGHUP, without a restart.

The environment's tokens (read once at start) stay; the file's are replaced by what the file
holds now (an entry given again, in either, is one token). A file that cannot be read or
parsed, or that gives an ingest token another role already holds (a read or scrape token), keeps
the tokens in force and says why (never the tokens themselves).
"""

from __future__ import annotations

import logging
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

from sparkwatch.collector.config import (
    SettingsError,
    check_roles_are_apart,
    parse_tokens_merged,
    read_tokens_file,
)
from sparkwatch.settings.collector import TokensFileError

log = logging.getLogger(__name__)


def reload_tokens_on_sighup(service: Any, tokens_file: Path | None, env_tokens: str) -> None:
    """On SIGHUP, the tokens in force become ``env_tokens`` (the environment's text, read at
    start) and what ``tokens_file`` holds now."""

    def reload(_signum: int, _frame: Any) -> None:
        if tokens_file is None:
            log.warning("SIGHUP: no --tokens-file to reload; tokens unchanged")
            return
        try:
            tokens = parse_tokens_merged(env_tokens, read_tokens_file(tokens_file))
            check_roles_are_apart(replace(service.settings, tokens=tokens))
        except (OSError, SettingsError, ValueError) as exc:
            service.metrics.token_reloads.labels("failed").inc()
            # The line names the file: the file's own errors say why without naming it again.
            why = exc.reason if isinstance(exc, TokensFileError) else exc
            log.error("SIGHUP: tokens unchanged, cannot use %s: %s", tokens_file, why)
            return
        service.auth.replace_tokens(tokens)
        service.metrics.token_reloads.labels("ok").inc()
        # Tokens in force: an entry given again, in the file or the environment, is one.
        log.info("SIGHUP: reloaded %d distinct ingest tokens (%s and the environment)",
                 len(tokens), tokens_file)

    signal.signal(signal.SIGHUP, reload)
