"""The scrape bench's fleet: ``bench.fleet.Fleet`` spread over several apps, as wire envelopes.

A Spark driver runs tens of queries, not thousands, so a large fleet is many apps of
``per_app`` queries each (every app with its own name and id, as separate drivers would push).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bench.fleet import Fleet


@dataclass(frozen=True, slots=True)
class AppFleet:
    """One app of the bench: a :class:`Fleet` whose envelopes carry this app's own id."""

    index: int
    fleet: Fleet

    @property
    def name(self) -> str:
        return self.fleet.app

    @property
    def app_id(self) -> str:
        # Fleet names apps but gives every one the same id; the collector keys apps by id.
        return f"app-bench-scrape-{self.index:04d}"

    def events(self, batches: int) -> Iterator[dict[str, Any]]:
        """``batches`` rounds of progress (every query advances one batch per round)."""
        for envelope in self.fleet.events(0, batches * self.fleet.queries):
            envelope["app"] = {**envelope["app"], "id": self.app_id}
            yield envelope


def spread(queries: int, per_app: int) -> list[AppFleet]:
    """``queries`` queries in apps of ``per_app`` (the last app takes the remainder)."""
    if queries < 1 or per_app < 1:
        raise ValueError("queries and queries per app must be >= 1")
    apps = []
    for index, start in enumerate(range(0, queries, per_app)):
        fleet = Fleet(queries=min(per_app, queries - start), app=f"bench-scrape-{index:04d}")
        apps.append(AppFleet(index, fleet))
    return apps


def batched(items: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
