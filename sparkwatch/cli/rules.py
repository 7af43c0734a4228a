"""`sparkwatch rules build [--check]`: write the Prometheus rule files and their promtool tests.

Plain rule YAML (``rule_files`` of Prometheus, or the ``spec`` of a PrometheusRule): recording
rules for the dashboards and alerts from the thresholds config. Needs no Grafana SDK.
"""

from __future__ import annotations

import argparse

from sparkwatch.cli.dashboards import load_config, register_build, write_or_check


def register(sub: argparse._SubParsersAction) -> None:
    register_build(
        sub,
        "rules",
        help="build the Prometheus alert and recording rules",
        description="Generate the Prometheus rules from the metric catalogue and the thresholds "
        "config (dashboards/config.yaml).",
        build_help="write dashboards/generated/prometheus/*.yaml and dashboards/tests/*.test.yaml",
        build_description="Write the rule files and their promtool unit tests. --check writes "
        "nothing and exits 1 when the committed files differ.",
        run=run_build,
    )


def run_build(args: argparse.Namespace) -> int:
    config = load_config(args)
    from sparkwatch.dashboards.files import PACKAGE_DIR, rule_files

    root = args.output or PACKAGE_DIR
    return write_or_check(args, rule_files(config), root, "sparkwatch rules build")
