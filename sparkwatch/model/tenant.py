"""The tenant a collector keys everything by (see ``collector/tenants.py``)."""

DEFAULT_TENANT = "default"
"""The tenant of a token configured without one (``APP=TOKEN``), of every history row written
before tenants existed, and of what an embedded exporter or a driver's history writer holds."""

TENANT_LABEL = "tenant"
"""The label a collector puts on every series it exports (a driver's own /metrics has none)."""
