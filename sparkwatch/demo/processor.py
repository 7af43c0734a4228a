"""The demo's ``transformWithStateInPandas`` processor (PySpark 4.0+ only, hence its own module:
importing it pulls in ``pyspark.sql.streaming.stateful_processor``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)


class CountPerUser(StatefulProcessor):
    """Counts rows per key in one ValueState and emits the running count."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._seen = handle.getValueState("seen", "seen long")

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        current = self._seen.get() if self._seen.exists() else None
        seen = int(current[0]) if current else 0
        for pdf in rows:
            seen += len(pdf)
        self._seen.update((seen,))
        yield pd.DataFrame({"user": [key[0]], "seen": [seen]})

    def close(self) -> None:
        pass
