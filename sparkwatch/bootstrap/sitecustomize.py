"""Imported by Python at start-up when ``sparkwatch run`` put this directory on ``PYTHONPATH``.

First runs the ``sitecustomize`` this one shadows (a distribution's or a virtualenv's), then
installs the auto-attach hook, and its SIGTERM handler: here, on the main thread as Python starts,
because the app may build its session on another thread, where no handler can be set (see
:mod:`sparkwatch.listener.autoattach`). Nothing here may stop the Python it runs in: a failure is
one line on stderr.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
# The directories whose sitecustomize has run or is running in this interpreter, shared by every
# copy of this file: another sparkwatch's bootstrap on the path (a nested `sparkwatch run` of
# another install), or this one by another name (a symlink), runs the one it shadows in turn,
# which found this one again: a recursion to Python's limit, five lines of RecursionError in
# every Python process of the app, and the user's own sitecustomize run at the bottom of it.
_RAN: set[str] = sys.__dict__.setdefault("_sparkwatch_sitecustomize_dirs", set())
_RAN.add(_HERE)


def _run_shadowed_sitecustomize() -> None:
    others = [p for p in sys.path if os.path.realpath(p or os.curdir) not in _RAN]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    if spec.origin:  # before it runs: it may be another bootstrap, which must not find it again
        _RAN.add(os.path.realpath(os.path.dirname(spec.origin)))
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
