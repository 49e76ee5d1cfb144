"""An ended execution's last sample counts its interval in the report, as the fleet view counts it.

Live Prometheus ends a recorded series at the execution's last evaluation (a stale marker, no sample after),
so the report's span ends on that sample. Counting up to the span's end gave the last sample no time: every
report of an ended execution held each GPU one interval less than the fleet view ranked it for. The data here
are what the rules record live: the utilisation and the seconds each sample stands for, every 15 s, and nothing
after the last one (no backfill reading on).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.query.prometheus import PrometheusClient
from gpu_execution_pack.report import document

from harness.prometheus import Prometheus

pytestmark = pytest.mark.e2e

EXECUTION = "last-0001"
SAMPLES, STEP = 20, 15  # twenty evaluations 15 s apart: the GPU was held 300 s
HELD_HOURS = SAMPLES * STEP / 3600
CFG = config_from_mapping({"rule_interval": "15s", "derived_rule_interval": "15s"}, "test")


def recorded(start: int) -> str:
    labels = f'execution_id="{EXECUTION}",hostname="h1",gpu="0",UUID="GPU-last",modelName="NVIDIA H100 80GB HBM3"'
    lines = []
    for series, value in ((catalog.GPU_UTILIZATION, 0.5), (catalog.GPU_SAMPLE_SECONDS, float(STEP))):
        lines += [f"{series.name}{{{labels}}} {value} {start + STEP * k}" for k in range(SAMPLES)]
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    start = int(time.time()) // 60 * 60 - 3600  # ended 55 minutes ago
    prometheus = Prometheus(tmp_path_factory.mktemp("last-sample"))
    try:
        prometheus.load_openmetrics(recorded(start), [], start, start + SAMPLES * STEP)
        yield prometheus, start
    finally:
        prometheus.stop()


def ask(server: Prometheus, call) -> dict:
    async def run() -> dict:
        client = PrometheusClient(server.url, 30)
        try:
            return await call(client)
        finally:
            await client.close()

    return asyncio.run(run())


def test_the_report_counts_the_last_sample_as_the_fleet_view_does(server):
    prometheus, _ = server
    report = ask(prometheus, lambda c: document.execution_summary(CFG, c, EXECUTION))
    fleet = ask(prometheus, lambda c: document.fleet_summary(CFG, c, since="2h"))
    assert report["cost"]["gpuHoursBilled"] == pytest.approx(HELD_HOURS, abs=1e-4)  # 0.0833, not 0.0792
    assert fleet["gpuHoursBilled"] == pytest.approx(HELD_HOURS, abs=1e-4)
    [row] = fleet["top"]
    assert row["executionId"] == EXECUTION and row["gpuHoursBilled"] == report["cost"]["gpuHoursBilled"]
    assert report["cost"]["gpuHoursWorked"] == pytest.approx(HELD_HOURS / 2, abs=1e-4)


def test_an_end_inside_the_execution_still_cuts_the_sample_before_it_short(server):
    prometheus, start = server
    end = start + 10 * STEP + 5  # 5 s into the eleventh sample's interval
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(end))
    report = ask(prometheus, lambda c: document.execution_summary(CFG, c, EXECUTION, end=iso))
    assert report["cost"]["gpuHoursBilled"] == pytest.approx((10 * STEP + 5) / 3600, abs=1e-4)
