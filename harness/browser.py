"""Headless Chromium (Debian's ``chromium``) opening a report page: its DOM once the page's scripts ran, or a
screenshot. Each run gets a fresh profile and no network services (no updates, sync or QUIC probes).

The report page writes what it did into its DOM (``report/templates/base.html.j2``): ``#page-status``
counts its charts, those drawn and the errors it heard (``window.onerror``, ``console.error``, a fetch
its Content-Security-Policy blocked), and each chart holds the lines and points it drew.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    # Lets the page's timers and animation frames run before the DOM is read or the picture taken.
    "--virtual-time-budget=10000",
)
TIMEOUT_SECONDS = 90


def chromium() -> str:
    """The browser's path; an AssertionError with the install hint where there is none (CI must have it)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "chromium is not installed: run 'sudo apt-get install chromium' (make chromium)"
    return path


def run(page: Path, *action: str, window: str = "1200,1600") -> str:
    """Chromium's stdout after ``action`` on ``page``, with a profile of its own, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        done = subprocess.run(
            [
                chromium(),
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={window}",
                *action,
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )
    assert done.returncode == 0, f"chromium failed ({done.returncode}): {done.stderr[-2000:]}"
    return done.stdout


@dataclass(frozen=True)
class Chart:
    """One chart as the page drew it."""

    title: str
    lines: int
    points: int


@dataclass(frozen=True)
class Drawn:
    """What a page reports of itself once its scripts ran."""

    charts: int  # charts it set out to draw
    drawn: int  # charts that drew
    errors: int
    error_text: str
    each: list[Chart]
    dom: str


def attribute(tag: str, name: str) -> str:
    found = re.search(rf'{name}="([^"]*)"', tag)
    assert found, f"{name} missing in {tag}"
    return found.group(1)


def open_page(page: Path) -> Drawn:
    """``page`` opened in headless Chromium: its status and its charts as it drew them."""
    dom = run(page, "--dump-dom")
    status = re.search(r'<div id="page-status"([^>]*)>([^<]*)</div>', dom)
    assert status, "the page wrote no #page-status: its scripts did not run"
    tag = status.group(1)
    each = [
        Chart(attribute(t, "data-chart"), int(attribute(t, "data-lines")), int(attribute(t, "data-points")))
        for t in re.findall(r'<div class="chart(?: wide)?"[^>]*>', dom)
    ]
    return Drawn(
        int(attribute(tag, "data-charts")),
        int(attribute(tag, "data-drawn")),
        int(attribute(tag, "data-errors")),
        status.group(2),
        each,
        dom,
    )


def screenshot(page: Path, picture: Path, window: str = "1200,1600") -> None:
    """A PNG of ``page``'s first ``window`` (width,height) pixels."""
    # Every compositor stage before the picture: without it the last tiles are sometimes not painted yet.
    run(page, "--run-all-compositor-stages-before-draw", f"--screenshot={picture.resolve()}", window=window)
    assert picture.exists(), f"chromium wrote no {picture}"
