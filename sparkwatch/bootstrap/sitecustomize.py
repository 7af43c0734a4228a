"""Imported by Python at start-up when ``sparkwatch run`` put this directory on ``PYTHONPATH``.

First runs the ``sitecustomize`` this one shadows (a distribution's or a virtualenv's), then
installs the auto-attach hook. Nothing here may stop the Python it runs in: a failure is one line
on stderr.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _run_shadowed_sitecustomize() -> None:
    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _install() -> None:
    try:
        from sparkwatch.listener.autoattach import install
    except ImportError as exc:
        print(
            f"sparkwatch: not attaching, sparkwatch is not importable by {sys.executable} ({exc}); "
            "install sparkwatch in the driver's Python",
            file=sys.stderr,
        )
        return
    install()


try:
    _run_shadowed_sitecustomize()
except Exception as exc:  # noqa: BLE001 - report the other sitecustomize's failure as Python would
    print(f"sparkwatch: the shadowed sitecustomize failed: {exc!r}", file=sys.stderr)
try:
    _install()
except Exception as exc:  # noqa: BLE001 - never stop the app
    print(f"sparkwatch: cannot attach automatically: {exc!r}", file=sys.stderr)
