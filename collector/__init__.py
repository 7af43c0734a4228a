"""The sparkwatch collector: receives pushed listener events from many apps (``sparkwatch.collector``)."""
