"""Real headless Chromium (Debian's ``chromium``) for the console's browser tests: the DOM after
scripts ran, and screenshots, each from its own short-lived browser process."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

WINDOW = "1280,1400"


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(binary: str, args: list[str], timeout: float = 60,
         settle: bool = False) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="sw-chromium-") as profile:
        return subprocess.run(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--disable-extensions", "--hide-scrollbars",
             f"--user-data-dir={profile}", f"--window-size={WINDOW}",
             # Virtual time for timers and handlers (ours, or any injected one) to have run.
             *(["--virtual-time-budget=3000"] if settle else []), *args],
            capture_output=True, text=True, timeout=timeout, check=False)


def dump_dom(binary: str, url: str, settle: bool = False) -> str:
    """The page's DOM as serialised after loading and running its scripts (``settle``: and
    after three seconds of virtual time, for timers and event handlers)."""
    done = _run(binary, ["--dump-dom", url], settle=settle)
    assert done.returncode == 0 and "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout


def screenshot(binary: str, url: str, path: Path) -> Path:
    done = _run(binary, [f"--screenshot={path}", url])
    assert done.returncode == 0 and path.is_file(), done.stderr[-2000:]
    return path


def distinct_colours(path: Path) -> tuple[int, float]:
    """How many colours the PNG shows, and which share of its pixels is not plain white."""
    from PIL import Image

    with Image.open(path) as image:
        rgb = image.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20) or []
    total = sum(count for count, _ in colours)
    white = sum(count for count, colour in colours if colour == (255, 255, 255))
    return len(colours), (total - white) / total if total else 0.0
