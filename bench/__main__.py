"""``python -m bench <benchmark> [options]``."""

from __future__ import annotations

import argparse
import sys

from bench import listener_cmd


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = parser.add_subparsers(dest="benchmark", required=True)
    listener = sub.add_parser("listener", help=listener_cmd.__doc__)
    listener_cmd.add_arguments(listener)
    ns = parser.parse_args(argv)
    return listener_cmd.main(ns, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
