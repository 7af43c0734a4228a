"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSON, JSONB


def json_type() -> sa.types.TypeEngine[Any]:
    """JSON, JSONB on PostgreSQL (indexable, smaller); Python None is SQL NULL, not JSON null."""
    return sa.JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")


def batch_json_type() -> sa.types.TypeEngine[Any]:
    """JSON stored as sent (``json`` on PostgreSQL), for the per-batch maps: written once per
    batch, read back whole, never searched by key, so PostgreSQL need not decompose them into
    ``jsonb`` on every write (half its cost per event, migration 0005)."""
    return sa.JSON(none_as_null=True).with_variant(JSON(none_as_null=True), "postgresql")


class UtcDateTime(sa.TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend.

    PostgreSQL stores ``timestamptz``; SQLite has no time zones, so values are stored as UTC and
    read back with ``tzinfo=UTC`` instead of naive.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: history times must be timezone-aware")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def from_epoch(seconds: float | None) -> datetime | None:
    """The event model's epoch seconds as an aware UTC datetime."""
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=UTC)
