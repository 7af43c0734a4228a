"""The benchmarks, one package per command (``python -m bench <name>``), over shared modules.

``bench/<name>/cmd.py`` holds each command; ``bench/fleet.py`` (the real progress fleet),
``bench/procs.py`` (free ports, processes), ``bench/sparkenv.py`` (a local Spark session),
``bench/workload.py``, ``bench/machine.py``, ``bench/record.py``, ``bench/tables.py`` and
``bench/timing.py`` are shared by them, by the tests and by the scripts.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The repository's root."""
