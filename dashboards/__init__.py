"""Grafana dashboards and Prometheus rules, generated from the metric catalogue (``sparkwatch.dashboards``)."""
