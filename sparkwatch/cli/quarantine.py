"""`sparkwatch quarantine`: events the collector's history could not store (see
:mod:`sparkwatch.collector.quarantine`): list them, write them again once the cause is fixed, or
drop them."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from sparkwatch.cli.db import durable_history_url, quiet_alembic, user_errors
from sparkwatch.cli.errors import CliError
from sparkwatch.settings.cli import COLLECTOR_HISTORY_URL, COLLECTOR_SPOOL_DIR
from sparkwatch.settings.options import FromEnv, add_option, origin
from sparkwatch.settings.spec import SettingsError
from sparkwatch.summary import one_line
from sparkwatch.terminal import clip, printable

if TYPE_CHECKING:  # imported when used: the collector is an extra
    from sparkwatch.collector.quarantine import Entry, Quarantine, Replaying
    from sparkwatch.history.writer import HistoryWriter


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
        add_option(action, COLLECTOR_SPOOL_DIR, required=True, type=spool_path)


# type(Path()): the concrete class of this system (PosixPath); Path itself cannot be subclassed
# before Python 3.12.
class _PathFromEnv(type(Path())):  # type: ignore[misc]
    """A spool directory taken from its environment variable (named in errors)."""

    env: str


def spool_path(text: str) -> Path:
    """--spool-dir's path (argparse converts the environment's value with it too). '' is
    refused: Path('') is '.', the quarantine of whatever directory the command ran in."""
    env = text.env if isinstance(text, FromEnv) else None
    if not text:
        raise argparse.ArgumentTypeError(
            f"{env or 'the path'} is empty: give the collector's spool directory")
    if env is None:
        return Path(text)
    path = _PathFromEnv(text)
    path.env = env
    return path


def _quarantine(args: argparse.Namespace) -> Quarantine:
    """The quarantine of an existing spool directory: these commands read or rewrite one, and
    never make one (an empty quarantine at a mistyped path would read as "nothing held")."""
    try:
        from sparkwatch.collector.quarantine import Quarantine
    except ImportError as exc:
        raise CliError(f"{exc}: install the collector with pip install 'sparkwatch[collector]'") \
            from None
    spool = args.spool_dir
    if not spool.exists():
        raise CliError(f"{_spool(args)}: the spool directory does not exist")
    if not spool.is_dir():
        raise CliError(f"{_spool(args)}: not a directory")
    return Quarantine(spool)


def _spool(args: argparse.Namespace) -> str:
    """The spool directory as errors name it, with where it came from."""
    spool = args.spool_dir
    return f"{spool.env}={spool}" if isinstance(spool, _PathFromEnv) else f"--spool-dir {spool}"


def _history_url(args: argparse.Namespace) -> str:
    """The history to replay to, parsed as the collector parses it ('off' is no history) and
    checked before anything is read; errors name the flag or the variable, never a password."""
    raw = args.history_url
    named = origin(raw, str(COLLECTOR_HISTORY_URL.flag))
    if not isinstance(raw, FromEnv) and not raw.strip():
        raise CliError(f"{named} is empty: give a database URL")
    try:
        url = COLLECTOR_HISTORY_URL.parsed(raw, named)
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    if url is None:
        raise CliError(f"{named}={raw!r}: the history is off: give --history-url")
    try:
        str(url).encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 in argv or the environment
        raise CliError(f"{named} is not UTF-8 text") from None
    return durable_history_url(str(url), named)


SHOWN_IDS = 10
"""Unknown ids named in an error, at most: the others are counted (5000 mistyped ids are not a
39 KB line)."""

REPLAY_BATCH = 100
"""Entries a replay writes under one hold of the quarantine's lock, in one transaction (one
each when the history refuses one of them): a drop, another replay or the collector's own
appends wait for at most these writes, and the read and the removal in place of these entries
(no more of the file; once in a while a rewrite of it, see
:data:`~sparkwatch.collector.quarantine.COMPACT_SHARE`)."""


def _refuse_unknown(unknown: list[str]) -> None:
    if not unknown:
        return
    shown = ", ".join(map(repr, unknown[:SHOWN_IDS]))
    more = f" and {len(unknown) - SHOWN_IDS} more" if len(unknown) > SHOWN_IDS else ""
    raise CliError(f"not in the quarantine: {shown}{more} (see `sparkwatch quarantine list`)")


def _check_history(url: str, named: str) -> None:
    """Refuse a history with no sparkwatch schema (a mistyped path, an empty database): the
    replay would create one there and empty the quarantine into it. A SQLite file that does not
    exist is not created. A database that cannot be asked (down, not a database) is left to the
    writes, which say so once and keep every entry."""
    import sqlalchemy as sa

    from sparkwatch.history.engine import create_engine, describe_url, parse_url, sqlite_file
    from sparkwatch.history.revision import holds_history

    refusal = (f"{named}: {describe_url(url)} holds no sparkwatch history: if it really is the "
               f"history, run `sparkwatch db upgrade` against it first")
    path = sqlite_file(parse_url(url))
    if path is not None and not Path(path).exists():
        raise CliError(refusal)
    with user_errors():  # a driver not installed, a URL query the driver refuses
        engine = create_engine(url, must_exist=True)
        try:
            with engine.connect() as conn:
                found = holds_history(conn)
        except sa.exc.DBAPIError:
            return
        finally:
            engine.dispose()
    if not found:
        raise CliError(refusal)


@contextmanager
def _file_errors(args: argparse.Namespace, doing: str) -> Iterator[None]:
    """What the file system refuses (the quarantine file a directory, a spool not writable) as
    one line naming the option and the path."""
    try:
        yield
    except OSError as exc:
        raise CliError(f"{_spool(args)}: cannot {doing} "
                       f"{exc.filename or 'the quarantine'}: {exc.strerror or exc}") from None


def run_list(args: argparse.Namespace) -> int:
    quarantine = _quarantine(args)
    with _file_errors(args, "read"):
        entries, unreadable = quarantine.scan()
    _say_unreadable(quarantine, unreadable, "not listed, and never replayed")
    for e in entries:
        when = "?" if e.at is None else \
            datetime.fromtimestamp(e.at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = e.event if isinstance(e.event, dict) else {}
        raw_payload = event.get("payload")
        payload = raw_payload if isinstance(raw_payload, dict) else {}
        app = (event.get("app") or {}).get("name", "?") if isinstance(event.get("app"), dict) \
            else "?"
        # Every field but the time is what a client sent or what the database said of it.
        print(printable(f"{e.id}  {when}  {event.get('kind', '?')}  app={clip(str(app), 100)}  "
                        f"query={clip(str(payload.get('id', '?')), 100)}  {e.reason}"))
    print(f"{len(entries)} quarantined event{'s' if len(entries) != 1 else ''}")
    return 0


def _say_unreadable(quarantine: Quarantine, unreadable: int, so: str) -> None:
    """Lines of the file that are not entries (torn by a crash, edited): passed over, not
    hidden; a rewrite keeps them. Those that name a key twice are named (the first
    SHOWN_IDS, the others counted), for whoever edits the file: nothing else tells them from a
    torn line."""
    if not unreadable:
        return
    lines = "1 line" if unreadable == 1 else f"{unreadable} lines"
    print(printable(f"sparkwatch quarantine: {lines} of {quarantine.path} could not be read "
                    f"(torn or corrupt): {so}"), file=sys.stderr)
    twice: list[tuple[int, str]] = []
    with contextlib.suppress(OSError):  # read again only to say more: gone meanwhile, unsaid
        twice = quarantine.twice()
    for n, key in twice[:SHOWN_IDS]:
        print(printable(f"sparkwatch quarantine: line {n} of {quarantine.path} names "
                        f"{json.dumps(key)} twice: which one it means cannot be told"),
              file=sys.stderr)
    if len(twice) > SHOWN_IDS:
        more = len(twice) - SHOWN_IDS
        lines = "1 more line" if more == 1 else f"{more} more lines"
        print(printable(f"sparkwatch quarantine: and {lines} of {quarantine.path} name"
                        f"{'s' if more == 1 else ''} a key twice"), file=sys.stderr)


def run_replay(args: argparse.Namespace) -> int:
    quiet_alembic(args)  # before the imports below: Alembic logs its plugins at INFO
    from sparkwatch.history.writer import HistoryWriter

    quarantine = _quarantine(args)
    url = _history_url(args)
    with _file_errors(args, "read"):
        replay = quarantine.replaying()
    with replay:
        held = set(replay.ids)
        _refuse_unknown([i for i in dict.fromkeys(args.ids) if i not in held])
        _say_unreadable(quarantine, replay.unreadable, "not replayed, kept in the file")
        _check_history(url, origin(args.history_url, str(COLLECTOR_HISTORY_URL.flag)))
        wanted = set(args.ids)
        chosen = [i for i in replay.ids if not wanted or i in wanted]
        return _replay(args, replay, chosen, HistoryWriter(url))


def _replay(args: argparse.Namespace, replay: Replaying, chosen: list[str],
            writer: HistoryWriter) -> int:
    """Write the entries of ``chosen`` (ids) to the history, REPLAY_BATCH at a time; those
    written leave the quarantine."""
    written = gone = 0
    fault: str | None = None
    try:
        for start in range(0, len(chosen), REPLAY_BATCH):
            batch = chosen[start:start + REPLAY_BATCH]
            # Under the lock, each entry is written only if it is still held, and leaves the
            # quarantine before the lock is let go: a drop that said "dropped" is never written
            # after all, and a second replay skips what this one wrote.
            with _file_errors(args, "rewrite"), replay.held(batch) as held:
                done: list[str] = []
                try:
                    fault = _replay_batch(writer, held, done)
                finally:
                    replay.remove_locked(done)
                    written += len(done)
            gone += len(batch) - len(held)
            if fault is not None:
                break
        # Not after Ctrl-C or an error: what was removed in place is left for the next rewrite
        # (of a replay, a drop, or of the collector's append once the quarantine is full).
        with _file_errors(args, "rewrite"):
            replay.finish()
        _say_not_compacted(args, replay.compact_error)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (cli/signals.py): say what was done, then stop
        print(f"stopped: replayed {written} of {len(chosen)}, the rest kept", flush=True)
        raise
    finally:
        _say_not_removed(args, replay)  # however the replay ends: they were written
        writer.close()
    if fault is not None:
        raise CliError(printable(f"the history refuses every write ({fault}): replayed "
                                 f"{written} of {len(chosen)}, the rest kept"))
    left = f" ({gone} left the quarantine meanwhile: dropped or replayed by another command)" \
        if gone else ""
    print(f"replayed {written} of {len(chosen)}{left}")
    return 0 if written + gone == len(chosen) else 1


def _say_not_compacted(args: argparse.Namespace, error: OSError | None) -> None:
    """A rewrite of the replay's that failed, said in one line: not a failure of the replay
    (its exit code stays as it is), whose removals in place are durable already."""
    if error is not None:
        print(printable(f"sparkwatch quarantine: warning: {_spool(args)}: cannot rewrite "
                        f"{error.filename or 'the quarantine'}: {error.strerror or error}: the "
                        "entries replayed are removed in place; the next replay or drop leaves "
                        "them out of the file"), file=sys.stderr)


def _say_not_removed(args: argparse.Namespace, replay: Replaying) -> None:
    """Entries written that stay in the quarantine (the file could be neither written in place
    nor rewritten), said in one line: not a failure of the replay, since the history holds them
    and keeps each once when the next replay writes them again."""
    if replay.remove_error is None:
        return
    refused, failed = replay.remove_error
    # A rename names its target second: that is the file it could not replace.
    print(printable(
        f"sparkwatch quarantine: warning: {_spool(args)}: cannot remove the entries replayed "
        f"from {refused.filename or 'the quarantine'}: {refused.strerror or refused}, nor "
        f"rewrite {failed.filename2 or failed.filename or 'it'}: {failed.strerror or failed}: "
        f"the entries replayed ({len(replay.unremoved)}) stay in the quarantine: the next "
        "replay writes them again (the history keeps each once) and removes them"),
        file=sys.stderr)


_Readable: TypeAlias = list[tuple["Entry", list[Any]]]
"""Entries of a batch the history can read, each with its events (as the collector decodes
them)."""


def _replay_batch(writer: HistoryWriter, batch: list[Entry], written: list[str]) -> str | None:
    """Write the entries of ``batch``, appending the id of each written to ``written``; the
    database's fault when it refuses any write (the rest of the batch is not tried). One
    transaction for the batch; when the history refuses it for a reason of its data (an entry
    it still refuses), each entry in one of its own, to keep only those it refuses."""
    readable = _readable(batch)
    if len(readable) > 1:
        settled, fault = _write_together(writer, readable, written)
        if settled:
            return fault
    return _write_each(writer, readable, written)


def _readable(batch: list[Entry]) -> _Readable:
    from sparkwatch.collector.history_process import decode_records

    readable = []
    for entry in batch:
        events = decode_records([[entry.event]])
        if events:
            readable.append((entry, events))
        else:
            # The id is the file's (any text): shown escaped, as list shows it.
            print(printable(f"{entry.id}: still unreadable, kept"))
    return readable


def _attempt(writer: HistoryWriter, events: list[Any], tenants: list[str]
             ) -> list[int] | Exception:
    """The history's write of ``events``: the indexes it left out (another tenant's), or what
    it refused the write with. A refusal of the history itself (no schema) is the command's."""
    from sparkwatch.history.errors import HistoryError

    try:
        return writer.write(events, tenants)
    except HistoryError as exc:
        raise CliError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - the caller tells a fault from a refused entry
        return exc


def _write_together(writer: HistoryWriter, readable: _Readable, written: list[str]
                    ) -> tuple[bool, str | None]:
    """``readable`` in one transaction: whether that settled the batch, and the database's
    fault if it refuses any write. Not settled when it refuses one of the entries."""
    from sparkwatch.history.errors import is_database_fault
    from sparkwatch.history.tenancy import FOREIGN

    owners = [n for n, (_, events) in enumerate(readable) for _ in events]
    outcome = _attempt(writer, [e for _, events in readable for e in events],
                       [readable[n][0].tenant for n in owners])
    if isinstance(outcome, Exception):
        return (True, one_line(outcome)) if is_database_fault(outcome) else (False, None)
    foreign = {owners[i] for i in outcome}
    # In one step, before anything is said: a Ctrl-C amid the prints left committed entries
    # unremoved, to be written again by the next replay.
    written.extend(entry.id for n, (entry, _) in enumerate(readable) if n not in foreign)
    for n in sorted(foreign):  # its run or query is another tenant's: written nowhere
        print(printable(f"{readable[n][0].id}: still refused, kept: {FOREIGN}"))
    return True, None


def _write_each(writer: HistoryWriter, readable: _Readable, written: list[str]) -> str | None:
    """Each of ``readable`` in a transaction of its own; the database's fault if it refuses
    any write (said once, not once an entry: what was written before it leaves the quarantine
    still)."""
    from sparkwatch.history.errors import is_database_fault
    from sparkwatch.history.tenancy import FOREIGN

    for entry, events in readable:
        outcome = _attempt(writer, events, [entry.tenant] * len(events))
        if isinstance(outcome, Exception) and is_database_fault(outcome):
            return one_line(outcome)  # another file, down, read-only
        if isinstance(outcome, Exception):  # the database still refuses this one
            print(printable(f"{entry.id}: still refused, kept: {one_line(outcome)}"))
        elif outcome:  # its run or query is another tenant's: written nowhere, so kept
            print(printable(f"{entry.id}: still refused, kept: {FOREIGN}"))
        else:
            written.append(entry.id)
    return None


def run_drop(args: argparse.Namespace) -> int:
    quarantine = _quarantine(args)
    # Under the lock: an id a replay wrote meanwhile is no longer held, and is named as unknown
    # rather than counted dropped.
    with _file_errors(args, "rewrite"), quarantine.locked() as held:
        removed = quarantine.remove_locked(set(args.ids))
    print(f"dropped {len(removed)}")
    # After the rewrite, which says first why it cannot be done (an unwritable spool): the ids
    # that are there are dropped as asked, and the others named.
    _refuse_unknown([i for i in dict.fromkeys(args.ids) if i not in held])
    return 0
