"""The sparkwatch listener: runs in the Spark driver, never slows Spark.

Spark's callback thread only hands the event's JSON to a bounded queue (:mod:`.intake`); a worker
thread parses it and feeds the in-driver exporter (:mod:`.exporter`) and the history writer
(:mod:`.history_sink`). Attach with :func:`sparkwatch.attach`.
"""
