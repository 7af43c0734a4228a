"""The directory ``sparkwatch run`` puts first on ``PYTHONPATH``: its ``sitecustomize`` attaches
the listener to every SparkSession of an unmodified app (:mod:`sparkwatch.listener.autoattach`).

For cluster deploy mode, put :data:`PATH` (as installed in the driver's image or environment) on
the driver's ``PYTHONPATH`` yourself; see docs/run.md.
"""

from __future__ import annotations

from pathlib import Path

PATH = str(Path(__file__).resolve().parent)
