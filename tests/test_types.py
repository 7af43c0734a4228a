"""The product type-checks: mypy over the listener, the collector and the shared package, with
the settings in pyproject.toml ``[tool.mypy]``, so that the type hints stay true."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT, UNMEASURED

PRODUCT = ["sparkwatch", "listener", "collector"]


@UNMEASURED  # mypy reads the product and runs none of it
def test_mypy_finds_no_error_in_the_product() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", *PRODUCT],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
