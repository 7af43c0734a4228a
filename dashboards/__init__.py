"""Grafana dashboards and Prometheus rules, generated from the metric catalogue.

Installed as ``sparkwatch.dashboards``. ``config.yaml`` holds the thresholds; ``sparkwatch rules
build`` and ``sparkwatch dashboards build`` write ``generated/`` and ``tests/``.
"""
