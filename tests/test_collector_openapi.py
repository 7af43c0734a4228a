"""Schemathesis against the OpenAPI the collector publishes, on a real server process and
PostgreSQL: every operation, every default check (server errors, status codes and response
schemas as documented, auth enforced, invalid input refused), with bounded examples."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from tests.test_collector_support import Collector, database_collector, run_events, samples

pytestmark = pytest.mark.postgres

# The collector refuses one token in two roles: each operation is sent the token of its role.
INGEST_TOKEN = "schemathesis-ingest-token"
READ_TOKEN = "schemathesis-read-token"


@pytest.fixture(scope="module")
def collector(pg_admin_url: str, tmp_path_factory: Any) -> Iterator[Collector]:
    with database_collector(pg_admin_url, tmp_path_factory.mktemp("openapi") / "spool", env={
        "SPARKWATCH_COLLECTOR_TOKENS": f"*={INGEST_TOKEN}",
        "SPARKWATCH_COLLECTOR_READ_TOKEN": READ_TOKEN,
    }) as c:
        # Some history, so that reads of a known query find rows.
        assert c.post(run_events(), token=INGEST_TOKEN).json()["accepted"] > 0
        yield c


@pytest.fixture(scope="module")
def api_schema(collector: Collector) -> Any:
    return schemathesis.openapi.from_url(collector.url + "/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


class _Bearer:
    """Sends one role's token (an auth provider: schemathesis's auth checks then also send the
    operation without it, and with a wrong one, and expect a refusal)."""

    token = ""

    def get(self, case: Any, context: Any) -> str:
        return self.token

    def set(self, case: Any, data: str, context: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@schema.auth.auth().apply_to(method="POST")  # ingest: the only operations that write
class IngestBearer(_Bearer):
    token = INGEST_TOKEN


@schema.auth.auth().skip_for(method="POST")
class ReadBearer(_Bearer):
    token = READ_TOKEN


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_conforms_to_the_published_openapi(case: Any) -> None:
    case.call_and_validate()


def test_the_run_above_exercised_ingest_with_good_and_bad_requests(collector: Collector) -> None:
    """Guards the run above against testing nothing (runs after it: pytest keeps file order)."""
    codes = {labels["code"]: value for labels, value in samples(
        collector.metrics(READ_TOKEN), "sparkwatch_collector_ingest_requests_total")}
    assert codes.get("200", 0) > 1, codes
    assert any(code.startswith("4") for code in codes), codes
