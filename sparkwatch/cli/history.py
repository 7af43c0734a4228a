"""`sparkwatch history`: read the SQL history (queries, their runs, state over time).

The reader (SQLAlchemy) is imported inside the commands, to keep ``sparkwatch --help`` fast.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sparkwatch.cli.db import add_url_argument, command_url, user_errors
from sparkwatch.cli.errors import CliError
from sparkwatch.cli.numbers import MAX_INT32, MAX_ROWS, int_between, shown
from sparkwatch.history.render import first_line, table, to_json
from sparkwatch.history.views import QuerySummary, RunSummary, StatePoint, to_dict
from sparkwatch.plan.codec import plan_to_dict
from sparkwatch.plan.describe import delay_text, keys_text, summary
from sparkwatch.plan.model import QueryPlan, Source
from sparkwatch.terminal import printable

if TYPE_CHECKING:
    from sparkwatch.history.reader import HistoryReader

DEFAULT_LIMIT = 100
_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# Unix seconds as Prometheus' HTTP API takes them: a decimal number, fractions and exponent
# allowed; not nan or inf, nor Python's 1_000 or 0x10.
_SECONDS = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FAR_SECONDS = 10**12
"""Past any time in the years 1 to 9999, either way from 1970: refused before a number of a
billion digits (1e999999999) is made."""
_TIME_FORMS = "use e.g. 2h, 30m, 7d, 2026-11-21T09:00 or Unix seconds 1795253880"
_positive = int_between(1, MAX_ROWS)
_non_negative = int_between(0, MAX_ROWS)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "history",
        help="show recorded queries, runs and state over time",
        description="Read the SQL history written by the sparkwatch listener.",
    )
    common = argparse.ArgumentParser(add_help=False)
    add_url_argument(common)
    common.add_argument("--format", choices=("table", "json"), default="table")
    views = parser.add_subparsers(dest="history_view", required=True, metavar="VIEW")
    queries = views.add_parser(
        "queries", parents=[common],
        help="the most recently active queries with their latest run (a page: --limit/--offset)",
    )
    _add_page(queries, "rows")
    queries.set_defaults(func=run_queries)
    runs = views.add_parser(
        "runs", parents=[common],
        help="the runs of one query, latest first (a page: --limit/--offset)",
    )
    runs.add_argument("query", type=query_text, metavar="QUERY",
                      help="query id, name or unique id prefix")
    # A page, as `queries` and `state` are: a query restarted every few minutes for months has
    # tens of thousands of runs, each with an excerpt of its exception, and all were printed.
    _add_page(runs, "rows")
    runs.set_defaults(func=run_runs)
    state = views.add_parser("state", parents=[common], help="state of one query over time")
    state.add_argument("query", type=query_text, metavar="QUERY",
                       help="query id, name or unique id prefix")
    state.add_argument("--operator", type=int_between(0, MAX_INT32), metavar="N",
                       help="operator index (plan order)")
    state.add_argument("--since", type=parse_time,
                       help="e.g. 2h, 30m, 7d, an ISO-8601 time or Unix seconds (1795253880.5)")
    state.add_argument("--until", type=parse_time, help="end (exclusive), same forms as --since")
    _add_page(state, "points")
    state.set_defaults(func=run_state)
    operators = views.add_parser(
        "operators", parents=[common], help="what each state operator of a query is (its plan)"
    )
    operators.add_argument("query", type=query_text, metavar="QUERY",
                           help="query id, name or unique id prefix")
    operators.add_argument("--run", type=query_text, metavar="RUN_ID",
                           help="a run (default: the latest read)")
    operators.set_defaults(func=run_operators)


def _add_page(view: argparse.ArgumentParser, items: str) -> None:
    """--limit and --offset of a view that lists many ``items``: one definition, so that the
    views' pages keep the same bounds, default and wording."""
    view.add_argument("--limit", type=_positive, default=DEFAULT_LIMIT, metavar="N",
                      help=f"{items} to show (1 to {MAX_ROWS})")
    view.add_argument("--offset", type=_non_negative, default=0, metavar="N",
                      help=f"{items} to skip (0 to {MAX_ROWS})")


def parse_time(text: str, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> datetime:
    """``2h`` (ago), ISO-8601 or Unix seconds; a time without zone is UTC, like everything in the
    history. What ISO-8601 reads stays ISO-8601 (``20261121`` is a date, as it was before numbers
    were taken); any other number is seconds."""
    relative = _RELATIVE.match(text.strip())
    try:
        if relative:
            amount, unit = relative.groups()
            return now() - timedelta(**{_UNITS[unit]: int(amount)})
        try:
            value = datetime.fromisoformat(text.strip())
        except ValueError:
            if _SECONDS.match(text.strip()):
                return _unix_seconds(Decimal(text.strip()))
            raise
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:
        # timedelta and datetime stop at years 1 and 9999 (9999-12-31T23:59-05:00 is past
        # them once in UTC): a time out there was never recorded anyway.
        raise argparse.ArgumentTypeError(
            f"out of range: {shown(text)} (times must fall within the years 1 to 9999)"
        ) from None
    except ValueError:
        # Also what int() says of an amount of over 4300 digits.
        raise argparse.ArgumentTypeError(f"not a time: {shown(text)} ({_TIME_FORMS})") from None


def _unix_seconds(seconds: Decimal) -> datetime:
    """The time ``seconds`` after 1970 (before it, if negative), to the microsecond: exactly, as
    a float would not be near the year 9999. OverflowError past the calendar."""
    if not -_FAR_SECONDS <= seconds <= _FAR_SECONDS:  # compared, not rounded: no Overflow
        raise OverflowError(seconds)
    return _EPOCH + timedelta(microseconds=int((seconds * 1_000_000).to_integral_value()))


def query_text(text: str) -> str:
    """A query id, name or run id as given, refused if it cannot be sent to the database.

    Bytes that are not UTF-8 in argv arrive as lone surrogates, which no database driver encodes
    (UnicodeEncodeError); no id or name in the history can hold them.
    """
    if not text.strip():
        # '' is the start of every id: it was "the start of the ids of more than one query".
        raise argparse.ArgumentTypeError("empty: give an id, a name or the start of an id")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(
            "not UTF-8 text (query ids, names and run ids are UTF-8)"
        ) from None
    return text


def _read(args: argparse.Namespace, view: Callable[[HistoryReader], list[Any]]) -> list[Any]:
    from sparkwatch.history.reader import HistoryReader

    url = command_url(args)
    with user_errors(), HistoryReader(url) as reader:
        items = view(reader)
        for note in dict.fromkeys(reader.notes):
            print(f"sparkwatch history: note: {printable(note)}", file=sys.stderr)
        return items


def _emit(args: argparse.Namespace, items: Sequence[Any], as_table: Callable[[], str]) -> int:
    if args.format == "json":
        print(to_json([to_dict(item) for item in items]))
    elif not items:
        print(_nothing(args))
    else:
        print(as_table())
    limit = getattr(args, "limit", None)
    if limit is not None and len(items) == limit:
        # A full page may not be all: said where a script's parser of stdout never sees it
        # (`history runs` printed every run before it was paged; 100 rows alone read as all).
        print(f"sparkwatch history: note: {limit} rows shown, the --limit; there may be more "
              f"(--offset {args.offset + limit})", file=sys.stderr)
    return 0


def _nothing(args: argparse.Namespace) -> str:
    """Why the answer is empty: "nothing recorded yet" alone sent a user whose page or window
    was past what is recorded looking for a gap in the history."""
    given = [f"--{name}" for name in ("operator", "since", "until")
             if getattr(args, name, None) is not None]
    if getattr(args, "offset", 0):
        fewer = f"fewer match {' and '.join(given)}" if given else "fewer are recorded"
        return f"nothing past the first {args.offset} (--offset): {fewer}"
    if given:
        return f"nothing recorded matches {' and '.join(given)}"
    return "nothing recorded yet"


def run_queries(args: argparse.Namespace) -> int:
    items: list[QuerySummary] = _read(args, lambda r: r.queries(args.limit, args.offset))
    headers = ("QUERY ID", "NAME", "APP", "STATUS", "RUNS", "BATCHES", "LAST BATCH",
               "LAST PROGRESS")
    rows = [
        (q.query_id, q.name, q.app_name, q.status, q.runs, q.batches, q.last_batch_id,
         q.last_progress_at)
        for q in items
    ]
    return _emit(args, items, lambda: table(headers, rows))


def run_runs(args: argparse.Namespace) -> int:
    items: list[RunSummary] = _read(
        args, lambda reader: reader.runs(args.query, args.limit, args.offset))
    headers = ("RUN ID", "STATUS", "STARTED", "ENDED", "BATCHES", "FIRST", "LAST", "ERROR")
    rows = [
        (r.run_id, r.status, r.started_at, r.ended_at, r.batches, r.first_batch_id,
         r.last_batch_id, _error(r))
        for r in items
    ]
    return _emit(args, items, lambda: table(headers, rows))


def _error(run: RunSummary) -> str | None:
    summary = ": ".join(t for t in (run.error_class, first_line(run.exception)) if t)
    return first_line(summary, width=70) or None


def run_state(args: argparse.Namespace) -> int:
    _check_window(args.since, args.until)
    items: list[StatePoint] = _read(
        args,
        lambda reader: reader.state(
            args.query, args.operator, args.since, args.until, args.limit, args.offset
        ),
    )
    legend = _legend(args) if args.format == "table" and items else ""
    headers = ("TIME", "BATCH", "OPERATOR", "ROWS", "UPDATED", "REMOVED", "DROPPED",
               "MEMORY BYTES", "COMMIT MS")
    rows = [
        (p.timestamp, p.batch_id, f"{p.operator_index} {p.operator_name}", p.num_rows_total,
         p.num_rows_updated, p.num_rows_removed, p.num_rows_dropped_by_watermark,
         p.memory_used_bytes, p.commit_time_ms)
        for p in items
    ]
    return _emit(args, items, lambda: legend + table(headers, rows))


def _check_window(since: datetime | None, until: datetime | None) -> None:
    """Refuse a window [since, until) that holds no time: it answered "nothing recorded yet",
    which sent the user looking for a gap in the history rather than at the flags."""
    if since is not None and until is not None and since >= until:
        raise CliError(f"--since ({since:%Y-%m-%d %H:%M:%SZ}) must be before --until "
                       f"({until:%Y-%m-%d %H:%M:%SZ})")


def _legend(args: argparse.Namespace) -> str:
    """One line per operator saying what it is, from the latest plan recorded (if any)."""
    # The latest plan only: the query's every run's plan was read to show one (700 MB for a
    # query of 10,000 runs).
    plans = _read(args, lambda reader: reader.plans(args.query, limit=1))
    if not plans or plans[0].source is not Source.PLAN:
        return ""
    lines = [printable(f"operator {op.index} {op.operator}: {summary(op)}")
             for op in plans[0].operators]
    return "\n".join(lines) + "\n\n"


def run_operators(args: argparse.Namespace) -> int:
    plans = _read(args, lambda reader: _plans_of_run(reader, args.query, args.run))
    plan = plans[0] if plans else None
    if args.format == "json":
        print(to_json([plan_to_dict(plan)] if plan is not None else []))
        return 0
    if plan is None:
        print("no operator plan recorded yet (written by the listener once a run has a batch)")
        return 0
    headers = ("INDEX", "OPERATOR", "KIND", "KEYS", "MODE", "WATERMARK", "DELAY", "STORES",
               "PROVIDER", "OP ID", "CHECKPOINT")
    rows = [
        (op.index, op.operator, op.kind, keys_text(op) if op.keys else None, op.output_mode,
         op.watermark_column, delay_text(op.watermark_delay_ms) if op.watermarks else None,
         op.num_state_stores, op.state_store_provider, op.operator_id, op.checkpoint_location)
        for op in plan.operators
    ]
    source = "plan" if plan.source is Source.PLAN else f"progress only ({plan.note})"
    print(printable(f"run {plan.run_id}, batch {plan.batch_id}, from the {source}") + "\n")
    print(table(headers, rows))
    return 0


def _plans_of_run(reader: HistoryReader, query: str, run_id: str | None) -> list[QueryPlan]:
    """The query's latest plan (of ``run_id``, if given), or none. A run id that is not one of
    the query's runs is an error: it answered "no operator plan recorded yet", like a run with no
    batch. One plan is read, and one run looked up: not every run and plan of a query of
    thousands."""
    plans = reader.plans(query, run_id, limit=1)
    if plans or run_id is None:
        return plans
    if not reader.has_run(query, run_id):
        query_id = reader.resolve_query(query)
        raise CliError(f"--run: no run {shown(run_id)} of query {query_id} "
                       f"(see `sparkwatch history runs {query_id}`)")
    return plans
