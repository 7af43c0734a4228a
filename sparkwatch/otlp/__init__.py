"""OTLP export of the metric catalogue through the OpenTelemetry SDK (the ``otlp`` extra).

``config`` is standard library only; ``convert`` and ``export`` import the SDK, so the listener and
the collector import them only once OTLP export is switched on (docs/otlp.md).
"""
