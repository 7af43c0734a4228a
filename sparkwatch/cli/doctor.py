"""`sparkwatch doctor`: diagnose recorded queries, with evidence and a concrete fix.

Exit status 1 when a finding at or above ``--fail-on`` exists (to gate a CI job or a deploy),
0 otherwise, 2 on usage or database errors.
"""

from __future__ import annotations

import argparse
from typing import Any

from sparkwatch.cli.db import add_url_argument, command_url, user_errors
from sparkwatch.cli.history import query_text
from sparkwatch.cli.numbers import MAX_ROWS, int_between
from sparkwatch.cli.output import print_answer
from sparkwatch.cli.remote import checked_url, command_token, refuse_unused_token
from sparkwatch.cli.state import checkpoint_location
from sparkwatch.settings.cli import TOKEN
from sparkwatch.settings.options import add_option

SEVERITIES = ("info", "warning", "error", "never")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "doctor",
        help="diagnose recorded queries (state growth, watermarks, joins, state store costs)",
        description="Diagnose each query's latest run from its recorded progress and plan.",
    )
    parser.add_argument("query", nargs="?", type=query_text, metavar="QUERY",
                        help="one query: id, name or unique id prefix (default: all)")
    add_url_argument(parser)
    parser.add_argument("--collector", metavar="URL",
                        help="read from a sparkwatch collector's API instead of a database")
    add_option(parser, TOKEN)
    parser.add_argument("--fail-on", choices=SEVERITIES, default="warning",
                        help="exit 1 when a finding at or above this severity exists "
                        "(default: warning; never: always exit 0)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--batches", type=int_between(1, MAX_ROWS), default=200, metavar="N",
                        help="newest batches of each query's latest run to examine (default 200)")
    parser.add_argument("--inspect-state", action="append", default=[], metavar="CHECKPOINT",
                        type=checkpoint_location,
                        help="also read this checkpoint's state (Spark 4.0+): partition skew, hot "
                        "keys, rows behind the watermark, growth in the change feed; repeatable. "
                        "Alone (no QUERY, --url or --collector) it checks only the checkpoints")
    parser.set_defaults(func=run_doctor)


def _records(args: argparse.Namespace) -> list[Any]:
    if args.collector is not None:  # "" too: refused below, not read as "no collector"
        from sparkwatch.doctor.collector_source import load_from_collector

        collector = checked_url(args.collector, "--collector")
        token = command_token(args)
        with user_errors():
            return load_from_collector(collector, token, args.query, args.batches)
    from sparkwatch.doctor.history_source import load_records

    url = command_url(args)
    with user_errors():
        return load_records(url, args.query, args.batches)


def _history_wanted(args: argparse.Namespace) -> bool:
    # --url: or SPARKWATCH_HISTORY_URL
    explicit = args.query or args.url or args.collector is not None
    return not args.inspect_state or bool(explicit)


def _inspected(args: argparse.Namespace) -> list[Any]:
    if not args.inspect_state:
        return []
    from sparkwatch.cli.state import spark_for_state
    from sparkwatch.doctor.contents import inspect_checkpoint

    with spark_for_state() as spark:
        return [inspect_checkpoint(spark, checkpoint) for checkpoint in args.inspect_state]


def run_doctor(args: argparse.Namespace) -> int:
    from sparkwatch.doctor.checks_contents import check_contents
    from sparkwatch.doctor.diagnose import diagnose
    from sparkwatch.doctor.model import Severity
    from sparkwatch.doctor.render import to_json, to_text

    if args.collector is None:
        refuse_unused_token(args, "--collector")
    records = _records(args) if _history_wanted(args) else []
    inspected = _inspected(args)
    findings = diagnose(records) + [f for i in inspected for f in check_contents(i)]
    threshold = None if args.fail_on == "never" else Severity.parse(args.fail_on)
    failed = threshold is not None and any(f.severity >= threshold for f in findings)
    if args.format == "json":
        answer = to_json(records, findings, args.fail_on, failed, inspected)
    elif not records and not inspected:
        answer = "nothing recorded yet: no query has a batch in the history"
    else:
        answer = to_text(records, findings, inspected)
    # The status is the gate (CI, a deploy): `doctor | head -1` must not turn it into a 0.
    print_answer(answer)
    return 1 if failed else 0
