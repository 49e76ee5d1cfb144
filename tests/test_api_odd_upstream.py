"""What an upstream that answers like Prometheus, with odd names, values or times, gets from the endpoint.

A query API behind a proxy, or a compatible one, may answer well-formed JSON that no Prometheus sends: a
series without the name asked for, a count of NaN, a value of 1e308 or 5e-324, a sample at 1e15 s, an
error text of megabytes. Each was a 500 with a traceback in the log (or a log line of megabytes); now it
is a 502 naming what was odd, or the report with the odd figure left out. The endpoint runs as ``serve``
runs it (its own process), in front of ``harness.upstreams.FaultServer``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.api.app import FLEET_PATH, PATH, SUMMARY_PATH

from harness.upstreams import FaultServer, Seen

from .test_api_answer_cap import AUTH, Endpoint

# What it checks does not change with the Prometheus version:
# our answers to a misbehaving upstream's odd bodies, not Prometheus'.
pytestmark = [pytest.mark.e2e, pytest.mark.single_version]

EXECUTION = "train-0001"
NOW = time.time()
CONFIG_YAML = "global:\n  evaluation_interval: 15s\n  scrape_interval: 15s\n"


class Upstream:
    """Prometheus' API as the endpoint reads it: its configuration, no rules, and every query answered with
    ``gpus`` GPUs of EXECUTION whose samples hold ``value`` at ``times`` (the last hour, by default), named
    ``name`` (None: no __name__)."""

    def __init__(self) -> None:
        self.set()

    def set(
        self, value: str = "1", times: tuple[float, ...] = (), name: str | None = None, error: str = "", gpus: int = 3
    ) -> None:
        self.value, self.name, self.error, self.gpus = value, name, error, gpus
        self.times = times or tuple(NOW - 3600 + 60 * k for k in range(60))

    def answer(self, seen: Seen) -> tuple[int, dict[str, str], bytes]:
        if seen.path == "/api/v1/status/config":
            return 200, {}, success({"yaml": CONFIG_YAML})
        if seen.path == "/api/v1/rules":
            return 200, {}, success({"groups": []})
        if self.error:
            return 422, {}, json.dumps({"status": "error", "errorType": "bad_data", "error": self.error}).encode()
        ranged = seen.path == "/api/v1/query_range"
        query = seen.params.get("query", [""])[0]
        is_range = ranged or query.rstrip().endswith("]")  # an instant query of a range selector: a matrix
        items = []
        for gpu in range(self.gpus):
            metric = {
                catalog.EXECUTION_LABEL: EXECUTION,
                "namespace": "research",
                "hostname": "h1",
                "gpu": str(gpu),
                "UUID": f"GPU-{gpu}",
                "modelName": "NVIDIA A100",
            }
            if self.name is not None:
                metric["__name__"] = self.name
            samples = [[t, self.value] for t in self.times]
            items.append({"metric": metric, **({"values": samples} if is_range else {"value": samples[-1]})})
        return 200, {}, success({"resultType": "matrix" if is_range else "vector", "result": items})


def success(data: Any) -> bytes:
    return json.dumps({"status": "success", "data": data}).encode()


@pytest.fixture(scope="module")
def odd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Upstream, Endpoint]]:
    upstream = Upstream()
    with FaultServer(upstream.answer) as server:
        served = Endpoint(tmp_path_factory.mktemp("odd"), {"prometheus_url": server.url, "timeout_seconds": 20})
        try:
            yield upstream, served
        finally:
            log = served.stop()
    assert "Traceback" not in log, log[-3000:]


def ask(served: Endpoint, path: str, **params: str) -> httpx.Response:
    response = httpx.get(f"{served.url}{path}", params=params, headers=AUTH, timeout=60)
    assert response.headers["content-type"] == "application/json", response.text[:300]
    return response


def test_a_series_without_the_name_asked_for_is_a_502_not_a_500(odd):
    upstream, served = odd
    for name, said in ((None, "a series without a __name__"), ("up", "a series named 'up'")):
        upstream.set(name=name)
        response = ask(served, PATH.format(execution_id=EXECUTION))
        assert response.status_code == 502, response.text[:300]
        assert response.json()["error"] == (
            f"Prometheus answered 200 with an unexpected body: {said}, not one of those asked for"
        )


@pytest.mark.parametrize("value", ["NaN", "+Inf", "1e19", "5e-324"])
def test_odd_values_leave_the_report_whole(odd, value: str):
    """A sample count of NaN or +Inf (int() refuses them), an XID of 1e19 (no JSON integer holds it) and a GPU
    share of 5e-324 (its inverse is an infinity): each made the summary and the fleet view a 500."""
    upstream, served = odd
    upstream.set(value=value)
    summary = ask(served, SUMMARY_PATH.format(execution_id=EXECUTION))
    assert summary.status_code == 200, summary.text[:300]
    assert summary.json()["executionId"] == EXECUTION and summary.json()["gpus"]["count"] == 3
    fleet = ask(served, FLEET_PATH, since="1d")
    assert fleet.status_code == 200, fleet.text[:300]
    assert [row["executionId"] for row in fleet.json()["top"]] == [EXECUTION]


def test_a_sample_outside_the_years_1_to_9999_is_a_502(odd):
    upstream, served = odd
    upstream.set(times=(1e15,))  # the year 31690708
    response = ask(served, SUMMARY_PATH.format(execution_id=EXECUTION))
    assert response.status_code == 502, response.text[:300]
    assert "a sample at time 1000000000000000.0, outside the years 1 to 9999" in response.json()["error"]


def test_a_megabyte_error_text_is_bounded_in_the_answer_and_the_log(odd):
    upstream, served = odd
    upstream.set(error="parse error: " + "x" * 2_000_000)
    response = ask(served, PATH.format(execution_id=EXECUTION))
    assert response.status_code == 502 and len(response.content) < 1000, response.text[:300]
    lines = [line for line in served.log().splitlines() if "parse error" in line]
    assert lines and max(map(len, lines)) < 5000, max(map(len, lines))


# --- The fleet view over the archive ---------------------------------------------------------------------------

ARCHIVED = 20  # executions in the archive, each with SAMPLES samples of series
SAMPLES = 150_000  # some 3.5 MB of JSON each (200 MB parsed): the series of a long run at a fine step


def archived(execution_id: str, series: dict[str, Any]) -> Any:
    from gpu_execution_pack.archive.store import Record

    document = {
        "executionId": execution_id,
        "gpus": {"count": 1, "models": ["NVIDIA A100"]},
        "cost": {"gpuHoursBilled": 2.0, "gpuHoursWorked": 1.0, "gpuHoursWasted": 1.0, "efficiencyPercent": 50.0},
        "power": {"energyKwh": 0.5},
        "verdicts": [],
    }
    return Record("", "research", execution_id, NOW - 86400, NOW - 3600, 15.0, "test", document, series)


def test_the_fleet_view_over_the_archive_holds_its_documents_not_every_executions_series(tmp_path: Path):
    """The fleet view read every archived execution of its window whole, series too (unused): a year of a
    large fleet's runs at once. It reads their documents alone now; the process's peak stays far under them."""
    from gpu_execution_pack.archive.store import Store

    path = tmp_path / "archive.db"
    store = Store.open(str(path))
    series = {"step": "15s", "answers": [[{"metric": {}, "values": [[NOW - k, 0.5 + k] for k in range(SAMPLES)]}]]}
    for i in range(ARCHIVED):
        store.put(archived(f"old-{i:03d}", series))
    store.close()
    upstream = Upstream()
    upstream.set(gpus=0)  # Prometheus holds nothing: every row is the archive's
    with FaultServer(upstream.answer) as server:
        served = Endpoint(tmp_path, {"prometheus_url": server.url, "timeout_seconds": 60}, archive={"url": str(path)})
        try:
            httpx.get(f"{served.url}/openapi.json", timeout=10)
            served.reset_peak()
            before = served.status("VmHWM")
            fleet = ask(served, FLEET_PATH, since="30d", top="5")
            growth = served.status("VmHWM") - before
        finally:
            log = served.stop()
    assert fleet.status_code == 200, fleet.text[:300]
    assert fleet.json()["executions"] == ARCHIVED and len(fleet.json()["top"]) == 5
    assert all(row["source"] == "archive" for row in fleet.json()["top"])
    assert growth < 100 * 2**20, growth / 2**20  # the series parsed: some 200 MB each
    assert "Traceback" not in log, log[-3000:]
