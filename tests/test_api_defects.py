"""Regression tests for defects found by attacking the metrics endpoint, against a real Prometheus."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from gpu_execution_pack.config import Config
from gpu_execution_pack.rules import catalog
from gpu_execution_pack.scenario.model import Execution, Gpu, Host, Scenario

from .prometheus_harness import Prometheus
from .test_api import ADMIN, RESEARCH, client_for, get

pytestmark = pytest.mark.usefixtures("promtool_available")
SHARED_ID = "shared-0001"


@pytest.fixture(scope="module")
def two_tenants(tmp_path_factory: pytest.TempPathFactory):
    """One execution id used by two tenants at once: research on host ha, physics on host hb."""
    research = Execution(SHARED_ID, (Gpu("ha", 0),), ("compute",), namespace="research")
    physics = Execution(SHARED_ID, (Gpu("hb", 0), Gpu("hb", 1)), ("compute",), namespace="physics")
    scenario = Scenario("two tenants, one id", "", (Host("ha"), Host("hb")), (research, physics))
    server = Prometheus(tmp_path_factory.mktemp("tenants"))
    try:
        end = int(time.time()) // 60 * 60 - 15 * 60
        server.load_scenario(scenario, Config(), end)
        yield server
    finally:
        server.stop()


def hosts_of(body: dict, name: str) -> set[str]:
    return {e["labels"]["hostname"] for e in body["series"][name]["entries"]}


def test_a_tenants_key_sees_only_its_own_hosts_series_under_a_shared_execution_id(two_tenants):
    with client_for(two_tenants.url) as client:
        scoped = get(client, SHARED_ID, RESEARCH)
        everyone = get(client, SHARED_ID, ADMIN)
    assert scoped.status_code == everyone.status_code == 200, scoped.text
    for series in catalog.API_SERIES:
        assert hosts_of(scoped.json(), series.api_name) == {"ha"}, series.api_name
        assert hosts_of(everyone.json(), series.api_name) == {"ha", "hb"}, series.api_name


def test_a_nan_sample_is_null_in_the_answer_not_a_500(tmp_path: Path):
    """Prometheus can hold NaN (a 0/0 upstream); the JSON carries it as null and the rest as numbers."""
    start = int(time.time()) // 60 * 60 - 3600
    labels = 'execution_id="nan-0001",namespace="research",hostname="h1",gpu="0",UUID="GPU-n",modelName="X"'
    values = ["0.5"] * 20
    values[7] = "NaN"
    lines = [f"{catalog.GPU_UTILIZATION.name}{{{labels}}} {v} {start + 15 * k}" for k, v in enumerate(values)]
    server = Prometheus(tmp_path)
    try:
        server.load_openmetrics("\n".join(lines) + "\n# EOF\n", [], start, start + 300)
        with client_for(server.url) as client:
            response = get(client, "nan-0001")
    finally:
        server.stop()
    assert response.status_code == 200, response.text
    [entry] = response.json()["series"][catalog.GPU_UTILIZATION.api_name]["entries"]
    got = [v for _, v in entry["values"]]
    assert got[7] is None and got[:7] == [50.0] * 7 and got[8:] == [50.0] * 12


@pytest.mark.parametrize(
    ("execution_id", "params", "message"),
    [
        (SHARED_ID + "\n", {}, "execution_id: not accepted"),  # the pattern's $ matched before a final newline
        (SHARED_ID, {"start": ""}, "start: '' is not an ISO 8601 time"),
        (SHARED_ID, {"start": "٢٠٢٦-١٢-٠٢T10:00:00Z"}, "start: "),  # Arabic-Indic digits
        (SHARED_ID, {"step": "1d1d"}, "step: '1d1d' is not a Prometheus duration"),
        (SHARED_ID, {"step": "5s1m"}, "step: '5s1m' is not a Prometheus duration"),
    ],
)
def test_ids_and_parameters_python_would_stretch_to_accept_are_400(two_tenants, execution_id, params, message):
    with client_for(two_tenants.url) as client:
        response = get(client, execution_id, ADMIN, **params)
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith(message)
