"""`sparkwatch quarantine`: events the collector's history could not store (see
:mod:`sparkwatch.collector.quarantine`): list them, write them again once the cause is fixed, or
drop them."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from sparkwatch.cli.errors import CliError
from sparkwatch.settings.cli import COLLECTOR_HISTORY_URL, COLLECTOR_SPOOL_DIR
from sparkwatch.settings.options import add_option
from sparkwatch.summary import one_line


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "quarantine",
        help="list, replay or drop events the collector's history could not store",
        description="Events the collector's history writer could not store are kept in "
        "quarantine.jsonl beside its spool, with the database's reason.",
    )
    actions = parser.add_subparsers(dest="quarantine_action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="one line per quarantined event")
    listing.set_defaults(func=run_list)
    replay = actions.add_parser("replay", help="write quarantined events to the history; "
                                "those written leave the quarantine")
    add_option(replay, COLLECTOR_HISTORY_URL, required=True)
    replay.set_defaults(func=run_replay)
    drop = actions.add_parser("drop", help="remove quarantined events for good")
    drop.set_defaults(func=run_drop)
    for action, ids_help in ((replay, "only these ids (default: all)"),
                             (drop, "the ids to remove")):
        action.add_argument("ids", nargs="*" if action is replay else "+", metavar="ID",
                            help=ids_help)
    for action in (listing, replay, drop):
        add_option(action, COLLECTOR_SPOOL_DIR, required=True, type=Path)


def _quarantine(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The quarantine of an existing spool directory: these commands read or rewrite one, and
    never make one (an empty quarantine at a mistyped path would read as "nothing held")."""
    try:
        from sparkwatch.collector.quarantine import Quarantine
    except ImportError as exc:
        raise CliError(f"{exc}: install the collector with pip install 'sparkwatch[collector]'") \
            from None
    spool = Path(args.spool_dir)
    if not spool.exists():
        raise CliError(f"--spool-dir {spool}: the spool directory does not exist")
    if not spool.is_dir():
        raise CliError(f"--spool-dir {spool}: not a directory")
    return Quarantine(spool)


@contextmanager
def _file_errors(args: argparse.Namespace, doing: str) -> Iterator[None]:
    """What the file system refuses (the quarantine file a directory, a spool not writable) as
    one line naming the option and the path."""
    try:
        yield
    except OSError as exc:
        raise CliError(f"--spool-dir {args.spool_dir}: cannot {doing} "
                       f"{exc.filename or 'the quarantine'}: {exc.strerror or exc}") from None


def run_list(args: argparse.Namespace) -> int:
    quarantine = _quarantine(args)
    with _file_errors(args, "read"):
        entries = quarantine.entries()
    for e in entries:
        when = datetime.fromtimestamp(e.at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = e.event if isinstance(e.event, dict) else {}
        raw_payload = event.get("payload")
        payload = raw_payload if isinstance(raw_payload, dict) else {}
        app = (event.get("app") or {}).get("name", "?") if isinstance(event.get("app"), dict) \
            else "?"
        print(f"{e.id}  {when}  {event.get('kind', '?')}  app={app}  "
              f"query={payload.get('id', '?')}  {e.reason}")
    print(f"{len(entries)} quarantined event{'s' if len(entries) != 1 else ''}")
    return 0


def run_replay(args: argparse.Namespace) -> int:
    from sparkwatch.collector.history_process import decode_records
    from sparkwatch.history.errors import HistoryError
    from sparkwatch.history.writer import HistoryWriter

    quarantine = _quarantine(args)
    with _file_errors(args, "read"):
        chosen = [e for e in quarantine.entries() if not args.ids or e.id in args.ids]
    written: set[str] = set()
    writer = HistoryWriter(args.history_url)
    try:
        for entry in chosen:
            events = decode_records([[entry.event]])
            if not events:
                print(f"{entry.id}: still unreadable, kept")
                continue
            try:
                writer.write(events, [entry.tenant] * len(events))
            except HistoryError as exc:
                raise CliError(str(exc)) from None
            except Exception as exc:  # noqa: BLE001 - the database still refuses this one
                print(f"{entry.id}: still refused, kept: {one_line(exc)}")
                continue
            written.add(entry.id)
    finally:
        writer.close()
    with _file_errors(args, "rewrite"):
        quarantine.remove(written)
    print(f"replayed {len(written)} of {len(chosen)}")
    return 0 if len(written) == len(chosen) else 1


def run_drop(args: argparse.Namespace) -> int:
    quarantine = _quarantine(args)
    with _file_errors(args, "rewrite"):
        removed = quarantine.remove(set(args.ids))
    print(f"dropped {removed}")
    return 0
