"""``python -m bench <benchmark> [options]`` — one command for every benchmark in ``bench/``."""

from __future__ import annotations

import argparse
import importlib
import sys

# benchmark name -> module with ``add_arguments(parser)`` and ``main(ns, argv) -> int``; the
# module's docstring is its help line. Imported lazily: each pulls in its own stack.
COMMANDS = {
    "listener": "bench.listener.cmd",
    "ingest": "bench.ingest.cmd",
    "scrape": "bench.scrape.cmd",
    "history": "bench.history.cmd",
    "ceiling": "bench.ceiling.cmd",
    "memory": "bench.memory.cmd",
    "pushfault": "bench.pushfault.cmd",
    "state": "bench.state.cmd",
    "console": "bench.console.cmd",
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = parser.add_subparsers(dest="benchmark", required=True)
    modules = {}
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        modules[name] = module
        module.add_arguments(sub.add_parser(name, help=module.__doc__))
    ns = parser.parse_args(argv)
    return int(modules[ns.benchmark].main(ns, argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
