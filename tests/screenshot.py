"""``make screenshot``: docs/report.png, the report page of the report suite's training job in headless Chromium.

The report suite (one execution per verdict, ``report_oracle``) is backfilled into a real Prometheus
on a loopback port (stopped at the end) with the ALERTS its oracle says fire, as tests/test_report.py
does; the page is written by the CLI as a user would (``report ID --html``), and the picture taken.

    python -m tests.screenshot [docs/report.png]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.scenario.model import STEP_SECONDS
from gpu_execution_pack.scenario.render import RenderedSeries, Renderer

from harness import browser
from harness.prometheus import Prometheus
from tests import report_oracle

REPO = Path(__file__).resolve().parent.parent
EXECUTION = "train-0001"  # 4 GPUs on two hosts: a heavy phase, memory near the OOM threshold, throttling
# The backfill evaluates every rule every step: the config says so, so samples count as a step each.
CONFIG = {"rule_interval": f"{STEP_SECONDS}s", "derived_rule_interval": f"{STEP_SECONDS}s"}


def main(picture: Path) -> None:
    cfg = config_from_mapping(CONFIG)
    # Ended 15 minutes ago: backfilled series read on for the 5-minute lookback, and the run must have ended.
    end = int(time.time()) // 60 * 60 - 15 * 60
    scenario = report_oracle.report_suite()
    start = end - scenario.window_minutes * 60
    series = Renderer(scenario, cfg).all_series()
    for labels, firing in report_oracle.alert_series(scenario, cfg):
        series.append(
            RenderedSeries("ALERTS", tuple(sorted(labels.items())), tuple(1.0 if f else None for f in firing))
        )
    with tempfile.TemporaryDirectory(prefix="screenshot-") as work:
        server = Prometheus(Path(work) / "prometheus")
        try:
            server.load(series, all_groups(cfg), start, end)
            config = Path(work) / "pack.yml"
            config.write_text(json.dumps({**CONFIG, "api": {"prometheus_url": server.url}}))
            page = Path(work) / "report.html"
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "gpu_execution_pack",
                    "report",
                    "-c",
                    str(config),
                    EXECUTION,
                    "--html",
                    str(page),
                ],
                check=True,
                cwd=REPO,
            )
            drawn = browser.open_page(page)
            assert drawn.errors == 0 and drawn.drawn == drawn.charts > 0, f"the page did not draw: {drawn.error_text}"
            browser.screenshot(page, picture)
        finally:
            server.stop()
    print(f"wrote {picture}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "docs" / "report.png"))
