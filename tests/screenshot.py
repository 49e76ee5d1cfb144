"""``make screenshot``: docs/report.png, the report page of one of the demo's executions in headless Chromium.

The execution is the demo's (``gpu-execution-pack demo``): its scenario rendered, with the alerts that
fire, and placed in the day as the demo places it (``demo.fleet``), is backfilled with the demo's config into
a real Prometheus on a loopback port (stopped at the end); the page is written by the CLI as a user would
(``report ID --html``), and the picture taken.

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
from gpu_execution_pack.demo import fleet
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.scenario.model import STEP_SECONDS

from harness import browser
from harness.prometheus import Prometheus

REPO = Path(__file__).resolve().parent.parent
# The demo's training job: 4 GPUs on two hosts, a heavy phase, memory near the OOM threshold, thermal throttling
# (an alert that fires).
EXECUTION = "train-0001"
# The demo's config: every rule evaluated every step, as its backfill does.
CONFIG = {"rule_interval": f"{STEP_SECONDS}s", "derived_rule_interval": f"{STEP_SECONDS}s"}


def main(picture: Path) -> None:
    cfg = config_from_mapping(CONFIG)
    now = int(time.time()) // 60 * 60
    [(scenario, ends_before)] = [(s, e) for s, e in fleet.nvidia_history() if EXECUTION in {x.id for x in s.executions}]
    demo_data = fleet.placed(scenario, ends_before, cfg, now)
    end = demo_data.start + scenario.window_minutes * 60
    with tempfile.TemporaryDirectory(prefix="screenshot-") as work:
        server = Prometheus(Path(work) / "prometheus")
        try:
            server.load(demo_data.series, all_groups(cfg), demo_data.start, end)
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
