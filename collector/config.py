"""The collector's settings: declared in :mod:`sparkwatch.settings.collector` with every other
setting; here what only the collector needs on top, the tenant a token scope without one means."""

from __future__ import annotations

from sparkwatch.model.tenant import DEFAULT_TENANT
from sparkwatch.settings.collector import (
    ANY_APP,
    BY_NAME,
    DEFAULT_PORT,
    ENV_PREFIX,
    MAX_TENANT_CHARS,
    SETTINGS,
    TENANT_SEPARATOR,
    CollectorSettings,
    check,
    check_roles_are_apart,
    env_tokens,
    inflight_bound,
    load_collector_settings,
    parse_tenant_tokens,
    parse_tokens,
    parse_tokens_merged,
    read_tokens_file,
    render_settings_table,
    scope_parts,
    spool_share,
)
from sparkwatch.settings.spec import Setting, SettingsError

__all__ = [
    "ANY_APP", "BY_NAME", "DEFAULT_PORT", "DEFAULT_TENANT", "ENV_PREFIX", "MAX_TENANT_CHARS",
    "SETTINGS", "TENANT_SEPARATOR", "CollectorSettings", "Setting", "SettingsError", "check",
    "check_roles_are_apart", "env_tokens", "inflight_bound", "load_collector_settings",
    "parse_tenant_tokens", "parse_tokens", "parse_tokens_merged", "read_tokens_file",
    "render_settings_table", "split_scope", "spool_share",
]


def split_scope(scope: str) -> tuple[str, str]:
    """(tenant, app) of a token's scope: ``TENANT/APP``, or ``APP`` in tenant ``default``."""
    tenant, app = scope_parts(scope)
    return (DEFAULT_TENANT if tenant is None else tenant, app)
