"""`sparkwatch db` (placeholder until implemented)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("db", help="db")
    parser.set_defaults(func=lambda args: 0)
