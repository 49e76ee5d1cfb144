"""The metrics endpoint and ``query``, against a real Prometheus holding backfilled scenario data."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.api.app import PATH, create_app
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.query import execution
from gpu_execution_pack.query.params import Window, iso
from gpu_execution_pack.scenario import library, oracle
from starlette.testclient import TestClient

from harness.prometheus import Prometheus

from .conftest import EXECUTION, REPO
from .test_catalog import CONTRACT, CONTRACT_UNITS

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("promtool_available")]

ADMIN = "admin-key-0123456789"
RESEARCH = "research-key-0123456789"
OTHER = "other-tenant-key-012345"
KEYS = {ADMIN: "*", RESEARCH: "research", OTHER: "physics"}
PROMETHEUS_MAX_POINTS = 11_000  # a range query of more points per series is refused


def client_for(url: str, **api) -> TestClient:
    cfg = config_from_mapping({"api": {"prometheus_url": url, **api}})
    return TestClient(create_app(cfg, KEYS))


def get(client: TestClient, execution_id: str, key: str | None = ADMIN, **params) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return client.get(PATH.format(execution_id=quote(execution_id, safe="")), params=params, headers=headers)


@pytest.fixture(scope="module")
def api(prometheus):
    server, start, end, _ = prometheus
    with client_for(server.url) as client:
        yield client, start, end


def value_at(entry: dict, ts: float) -> float:
    return next(v for t, v in entry["values"] if t == ts)


# --- The contract -------------------------------------------------------------------------


def test_values_and_units_match_the_scenario(api):
    client, start, _ = api
    response = get(client, EXECUTION)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body["series"]) == {s.api_name for s in catalog.API_SERIES}  # the contract: test_catalog.py
    scenario = library.training_in("4.8")
    e1 = scenario.executions[0]
    minute = 12.5  # compute phase of train-0001, and of train-0002 beside it on h1
    ts = start + minute * 60
    for gpu in e1.gpus:
        truth = oracle.gpu_truth(scenario, e1, gpu, minute)

        def entry(name: str, gpu=gpu) -> dict:
            [e] = [x for x in body["series"][name]["entries"] if x["labels"]["UUID"] == gpu.uuid]
            assert e["labels"]["execution_id"] == EXECUTION and e["labels"]["namespace"] == "research"
            return e

        # The API's units: percent 0-100, MHz, W, degrees C, bytes/s.
        assert value_at(entry("gpuUtilizationPercent"), ts) == truth[catalog.GPU_UTILIZATION] * 100
        assert value_at(entry("gpuMemoryUtilizationPercent"), ts) == 75
        assert value_at(entry("gpuTemperatureCelsius"), ts) == truth[catalog.GPU_TEMPERATURE]
        assert value_at(entry("gpuPowerWatt"), ts) == 650.25
        assert value_at(entry("gpuPowerLimitWatt"), ts) == 700
        assert value_at(entry("gpuClockSmMhz"), ts) == 1980
        assert value_at(entry("gpuClockMemMhz"), ts) == 2619
        assert value_at(entry("gpuPcieThroughputRxBytesPerSec"), ts) == 400_000_000
        assert value_at(entry("gpuPcieThroughputTxBytesPerSec"), ts) == 200_000_000
    assert {name: s["unit"] for name, s in body["series"].items()} == CONTRACT_UNITS
    hosts = {e["labels"]["hostname"]: e for e in body["series"]["systemCpuUsagePercent"]["entries"]}
    assert set(hosts) == {"h1", "h2"}
    for name, host in (("h1", scenario.hosts[0]), ("h2", scenario.hosts[1])):
        truth = oracle.host_truth(scenario, host, minute)
        assert value_at(hosts[name], ts) == truth[catalog.NODE_CPU_UTILIZATION] * 100
        ram = {e["labels"]["hostname"]: e for e in body["series"]["systemRamUsedBytes"]["entries"]}
        assert value_at(ram[name], ts) == truth[catalog.NODE_RAM_USED]
        total = {e["labels"]["hostname"]: e for e in body["series"]["systemRamTotalBytes"]["entries"]}
        assert value_at(total[name], ts) == 256 * 1024**3


def test_times_are_written_to_the_second_or_to_prometheus_millisecond():
    assert iso(1764777600) == "2025-12-03T16:00:00Z"
    assert iso(1764777600.25) == "2025-12-03T16:00:00.250Z"
    assert iso(1764777600.123456) == "2025-12-03T16:00:00.123Z"  # no microseconds Prometheus never has


def test_defaults_resolve_to_the_executions_span(api):
    client, start, end = api
    body = get(client, EXECUTION).json()
    values = body["series"]["gpuUtilizationPercent"]["entries"][0]["values"]
    first = values[0][0]
    # The first step-grid point after the execution's first recorded sample. Backfilled, each level of
    # rules the presence series depends on (the host maps, then the per-GPU rule) may start a step late.
    assert body["start"] == iso(first) and start < first <= start + 60 and body["step"] == "15s"
    assert [t for t, _ in values] == [first + k * 15 for k in range(len(values))]
    # Backfilled series carry no stale markers: they read for Prometheus' 5-minute lookback after the end.
    last = datetime.fromisoformat(body["end"].replace("Z", "+00:00")).timestamp()
    assert start + 40 * 60 - 15 <= last <= end + 5 * 60 and values[-1][0] == last


def test_start_end_and_step_select_the_window(api):
    client, start, _ = api
    body = get(client, EXECUTION, start=iso(start + 600), end=iso(start + 1200), step="1m").json()
    values = body["series"]["gpuClockSmMhz"]["entries"][0]["values"]
    assert [t for t, _ in values] == [start + 600 + 60 * k for k in range(11)]
    offset = get(client, EXECUTION, start=iso(start + 600).replace("Z", "+00:00"), end=iso(start + 660)).json()
    assert offset["start"] == iso(start + 600)


def test_chunks_are_stitched_without_gaps_or_duplicates(api, monkeypatch):
    client, _, _ = api
    whole = get(client, EXECUTION).json()
    monkeypatch.setattr(execution, "CHUNK_POINTS", 7)  # 165 points: 24 chunks
    chunked = get(client, EXECUTION).json()
    assert chunked == whole


def test_a_30_day_range_splits_into_chunks_prometheus_accepts():
    window = Window(0, 30 * 86400, 15)
    assert window.points == 172_801
    chunks = window.chunks(execution.CHUNK_POINTS)
    assert all((b - a) / 15 + 1 <= PROMETHEUS_MAX_POINTS for a, b in chunks)
    grid = [t for a, b in chunks for t in range(int(a), int(b) + 1, 15)]
    assert grid == list(range(0, 30 * 86400 + 1, 15))


@pytest.fixture(scope="module")
def long_execution(tmp_path_factory: pytest.TempPathFactory):
    """A 30-day execution's presence and utilisation series at 15 s, backfilled into its own Prometheus."""
    end = int(time.time()) // 60 * 60 - 3600
    start = end - 30 * 86400
    labels = 'execution_id="long-0030",namespace="research",hostname="h9",gpu="0",UUID="GPU-h9-0000",modelName="X"'
    lines = [
        f"{catalog.GPU_UTILIZATION.name}{{{labels}}} {0.25 + (k % 4) / 8} {start + 15 * k}"
        for k in range(30 * 86400 // 15 + 1)
    ]
    server = Prometheus(tmp_path_factory.mktemp("long"))
    (server.workdir / "long.om").write_text("\n".join(lines) + "\n# EOF\n")
    from gpu_execution_pack import promtool

    # One block for the month: promtool reads the file once per block, 360 times at its default of 2h (a minute).
    openmetrics = ["tsdb", "create-blocks-from", "openmetrics", "--quiet", "--max-block-duration=744h"]
    promtool.run([*openmetrics, str(server.workdir / "long.om"), str(server.data)])
    server.start()
    try:
        yield server, start, end
    finally:
        server.stop()


# The chunking is ours: Prometheus 2 and 3 answer each chunk's query_range alike (points from start to end at the
# step, both included, under the same 11,000-point cap; only range selectors became left-open in 3).
@pytest.mark.single_version
def test_a_30_day_execution_at_15s_comes_back_whole(long_execution):
    server, start, end = long_execution
    with client_for(server.url) as client:
        response = get(client, "long-0030", start=iso(start), end=iso(end), step="15s")
    assert response.status_code == 200, response.text
    [entry] = response.json()["series"]["gpuUtilizationPercent"]["entries"]
    times = [t for t, _ in entry["values"]]
    assert times == [start + 15 * k for k in range(30 * 86400 // 15 + 1)]  # no gap, no duplicate
    assert [v for _, v in entry["values"][:4]] == [25, 37.5, 50, 62.5]


# --- Safety -------------------------------------------------------------------------------


def test_missing_or_wrong_key_is_401(api):
    client, _, _ = api
    assert get(client, EXECUTION, key=None).status_code == 401
    assert get(client, EXECUTION, key="not-a-key-0123456789").status_code == 401
    assert get(client, EXECUTION, key=ADMIN[:-1]).status_code == 401


def test_keys_see_only_their_tenants_executions(api):
    client, _, _ = api
    assert get(client, EXECUTION, key=RESEARCH).status_code == 200
    other = get(client, EXECUTION, key=OTHER)
    unknown = get(client, "no-such-execution", key=OTHER)
    assert other.status_code == unknown.status_code == 404
    assert other.json() == {"error": f"execution {EXECUTION!r} not found"}
    assert unknown.json() == {"error": "execution 'no-such-execution' not found"}


# Ids that try to change the query's meaning; the summary endpoint is tried with them too.
INJECTION_IDS = [
    'train-0001"} or vector(1) or {x="',
    "train-0001\\",
    "train-0001}",
    "train-0001 or up",
    "train-0001\nor",
    "train-.*",
    "train-000[1-2]",
    "x" * 300,
    "",
]
# Ids a permissive api.execution_id_pattern lets through: escaping alone keeps the query's meaning.
ESCAPED_IDS = [
    'train-0001"} or vector(1) or {x="',
    "train-0001\\",
    'train-0001\\"',
    "train-.*",
    "train-0001\nx",
    "train-0001}",
]


@pytest.mark.parametrize("execution_id", INJECTION_IDS)
def test_injection_attempts_are_refused_by_the_pattern(api, execution_id):
    client, _, _ = api
    response = get(client, execution_id)
    assert response.status_code in (400, 404)
    assert "series" not in response.text


@pytest.mark.parametrize("execution_id", ESCAPED_IDS)
def test_escaping_keeps_the_query_meaning_even_with_a_permissive_pattern(prometheus, execution_id):
    server, _, _, _ = prometheus
    with client_for(server.url, execution_id_pattern="(?s)^.{1,200}$") as client:
        response = get(client, execution_id)
    assert response.status_code == 404, response.text  # never another execution's data


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"start": "yesterday"}, "start: 'yesterday' is not an ISO 8601 time"),
        ({"end": "2026-13-40"}, "end: '2026-13-40' is not an ISO 8601 time"),
        ({"start": "2026-12-02T10:00:00Z", "end": "2026-12-02T09:00:00Z"}, "end: before start"),
        ({"step": "0s"}, "step: '0s' is under 1s"),
        ({"step": "500ms"}, "step: '500ms' is under 1s"),
        ({"step": "fast"}, "step: 'fast' is not a Prometheus duration"),
        (
            {"start": "2026-01-01T00:00:00Z", "end": "2026-12-01T00:00:00Z", "step": "15s"},
            "start: 2026-01-01T00:00:00Z is too early: 1923841 points per series",
        ),
    ],
)
def test_bad_parameters_are_400_naming_the_parameter(api, params, message):
    client, _, _ = api
    response = get(client, EXECUTION, **params)
    assert response.status_code == 400
    assert response.json()["error"].startswith(message), response.json()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_prometheus_down_is_502_and_the_server_keeps_serving():
    with client_for(f"http://127.0.0.1:{closed_port()}") as client:
        for _ in range(2):
            response = get(client, EXECUTION)
            assert response.status_code == 502
            assert "unreachable" in response.json()["error"] and "Traceback" not in response.text


def test_prometheus_too_slow_is_504():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held = []
    threading.Thread(target=lambda: held.append(listener.accept()), daemon=True).start()  # accepts, never answers
    try:
        with client_for(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout_seconds=0.5) as client:
            response = get(client, EXECUTION)
        assert response.status_code == 504 and "did not answer in time" in response.json()["error"]
    finally:
        listener.close()


def test_the_openapi_document_is_served_and_lists_the_contract(api):
    client, _, _ = api
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    series = doc["components"]["schemas"]["Metrics"]["properties"]["series"]
    assert set(CONTRACT) <= set(series["properties"])  # the default answer's series; test_api_series.py: the rest
    [param] = [p for p in doc["paths"][PATH]["get"]["parameters"] if p["name"] == "series"]
    assert set(param["schema"]["default"]) == set(CONTRACT)
    assert set(doc["paths"][PATH]["get"]["responses"]) == {
        *("200", "400", "401", "404", "409", "429", "431", "502", "503", "504")
    }


# --- The command and concurrent clients ------------------------------------------------------


def test_the_query_command_prints_what_the_endpoint_answers(api, prometheus):
    client, _, _ = api
    server, _, _, _ = prometheus
    proc = subprocess.run(
        [sys.executable, "-m", "gpu_execution_pack", "query", EXECUTION, "--prometheus", server.url],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == get(client, EXECUTION).json()


@pytest.mark.single_version  # our server under concurrency
def test_a_thousand_concurrent_requests_all_succeed(prometheus):
    server, _, _, _ = prometheus
    cfg = config_from_mapping({"api": {"prometheus_url": server.url}})

    async def run() -> list[int]:
        transport = httpx.ASGITransport(app=create_app(cfg, KEYS))
        app = transport.app
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://api") as client,
        ):
            limit = asyncio.Semaphore(32)

            async def one(i: int) -> int:
                async with limit:
                    r = await client.get(
                        PATH.format(execution_id=EXECUTION if i % 2 else "train-0002"),
                        params={"step": "5m"},
                        headers={"Authorization": f"Bearer {RESEARCH}"},
                    )
                    return r.status_code

            return await asyncio.gather(*(one(i) for i in range(1000)))

    statuses = asyncio.run(run())
    assert statuses.count(200) == 1000


def test_without_the_api_extra_the_commands_say_how_to_install_it(tmp_path: Path):
    code = (
        "import sys; sys.modules['starlette'] = None; from gpu_execution_pack import cli; "
        "sys.exit(cli.main(['query', 'x', '--prometheus', 'http://127.0.0.1:1']))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 2 and "pip install '.[api]'" in proc.stderr
