"""`sparkwatch dashboards build [--check]`: write the Grafana dashboards (and docs/dashboards.md).

Shared with `sparkwatch rules`: the build arguments (thresholds config, output root) and the
write-or-check step. The dashboards package is imported inside the commands (it needs the
``dashboards`` extra, and every ``sparkwatch`` invocation builds this parser).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sparkwatch.cli.errors import CliError

EXTRA_HINT = "install the dashboards extra: pip install 'sparkwatch[dashboards]'"


def register(sub: argparse._SubParsersAction) -> None:
    register_build(
        sub,
        "dashboards",
        help="build the Grafana dashboards",
        description="Generate the Grafana dashboards (JSON) from the metric catalogue and the "
        "thresholds config.",
        build_help="write dashboards/generated/grafana/*.json and docs/dashboards.md",
        build_description="Write the dashboards (and, in a source checkout, docs/dashboards.md). "
        "--check writes nothing and exits 1 when the committed files differ.",
        run=run_build,
    )


def register_build(
    sub: argparse._SubParsersAction,
    name: str,
    *,
    help: str,
    description: str,
    build_help: str,
    build_description: str,
    run: Callable[[argparse.Namespace], int],
) -> None:
    """`sparkwatch NAME build [--check]`: a command whose one action writes generated files."""
    parser = sub.add_parser(name, help=help, description=description)
    actions = parser.add_subparsers(dest=f"{name}_action", required=True, metavar="ACTION")
    build = actions.add_parser("build", help=build_help, description=build_description)
    add_build_arguments(build)
    build.set_defaults(func=run)


def add_build_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if the committed files differ from the build (CI)",
    )
    parser.add_argument(
        "--config",
        action="append",
        type=_path,
        default=[],
        metavar="FILE",
        help="YAML overrides of dashboards/config.yaml (repeatable)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        dest="sets",
        help="one override, e.g. alerts.watermark_lag.for=30m",
    )
    parser.add_argument(
        "--output",
        type=_path,
        metavar="DIR",
        help="root of the generated files (default: the dashboards package)",
    )


def _path(text: str) -> Path:
    """A path given on the command line; '' is refused: Path('') is '.', and an --output ""
    (an unset variable in a script) wrote the generated tree into the current directory."""
    if not text:
        raise argparse.ArgumentTypeError("empty path")
    return Path(text)


def load_config(args: argparse.Namespace) -> Any:
    try:
        from sparkwatch.dashboards.config import ConfigError, parse_set, read_yaml
        from sparkwatch.dashboards.config import load_config as load
    except ImportError as exc:
        raise CliError(f"{exc}: {EXTRA_HINT}") from None
    try:
        # Each source read alone first: a YAML or encoding error out of load() cannot say which
        # --config file or --set value it came from.
        for path in args.config:
            with _unreadable(f"--config {path}"):
                read_yaml(path)
        for assignment in args.sets:
            with _unreadable(f"--set {assignment!r}"):
                parse_set(assignment)
        return load(files=args.config, sets=args.sets)
    except (ConfigError, OSError) as exc:
        raise CliError(str(exc)) from None


@contextmanager
def _unreadable(source: str) -> Iterator[None]:
    """A config source that cannot be read or parsed as YAML as a one-line error naming
    ``source`` (its ConfigErrors already name it, and go on as they are)."""
    import yaml

    try:
        yield
    except OSError as exc:
        raise CliError(f"{source}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise CliError(
            f"{source}: not UTF-8 text ({exc.reason} at byte offset {exc.start})"
        ) from None
    except yaml.MarkedYAMLError as exc:
        problem = exc.problem or exc.context
        raise CliError(f"{source}: not valid YAML{_at(exc.problem_mark)}: {problem}") from None
    except yaml.YAMLError as exc:
        # The reader's errors (a control character in the text) carry no mark.
        raise CliError(f"{source}: not valid YAML: {' '.join(str(exc).split())}") from None


def _at(mark: Any) -> str:
    """`` at line L, column C`` (1-based, as editors count) of a YAML error's mark, if any."""
    return "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"


def write_or_check(
    args: argparse.Namespace, files: Mapping[str, str], root: Path, command: str
) -> int:
    from sparkwatch.dashboards.files import stale, write

    if args.check:
        with _output_errors(args, root, "read"):
            outdated = stale(files, root)
        for path in outdated:
            print(f"stale: {(root / path).resolve()}", file=sys.stderr)
        if outdated:
            print(f"regenerate with `{command}`", file=sys.stderr)
            return 1
        print(f"{len(files)} files up to date")
        return 0
    with _output_errors(args, root, "write"):
        touched = write(files, root)
    for path in touched:
        print(f"wrote {(root / path).resolve()}")
    print(f"{len(files)} files, {len(touched)} changed")
    return 0


@contextmanager
def _output_errors(args: argparse.Namespace, root: Path, doing: str) -> Iterator[None]:
    """A file that cannot be read or written under the output root as a one-line error naming
    --output (or the default root) and the file."""
    where = f"--output {root}" if args.output is not None else f"default output {root}"
    if root.exists() and not root.is_dir():
        raise CliError(f"{where}: not a directory")
    try:
        yield
    except OSError as exc:
        failed = f" {exc.filename}" if exc.filename is not None else ""
        raise CliError(f"{where}: cannot {doing}{failed}: {exc.strerror or exc}") from None


def run_build(args: argparse.Namespace) -> int:
    config = load_config(args)
    try:
        from sparkwatch.dashboards.build import dashboard_files, in_source_checkout
    except ImportError as exc:
        raise CliError(f"{exc}: {EXTRA_HINT}") from None
    from sparkwatch.dashboards.files import PACKAGE_DIR

    root = args.output or PACKAGE_DIR
    # docs/dashboards.md sits beside the package only in a source checkout.
    files = dashboard_files(config, with_docs=args.output is None and in_source_checkout())
    return write_or_check(args, files, root, "sparkwatch dashboards build")
