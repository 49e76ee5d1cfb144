"""Regression tests for defects found by attacking the metrics endpoint, against a real Prometheus."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.api.app import SUMMARY_PATH, create_app
from gpu_execution_pack.api.responses import MAX_HEADER_BYTES
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.promql import parse_duration_seconds
from gpu_execution_pack.query.params import iso
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.scenario.model import Execution, Gpu, Host, Scenario
from gpu_execution_pack.scenario.render import Renderer

from harness.prometheus import Prometheus, openmetrics
from harness.upstreams import Proxy, Rewrite, Seen, Trickle, served

from .conftest import EXECUTION
from .test_api import ADMIN, KEYS, RESEARCH, client_for, get
from .test_serve import metrics_path

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("promtool_available")]
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


def iso_seconds(text: str) -> float:
    """Unix seconds of the API's ISO 8601 UTC times (``...Z``)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def hosts_of(body: dict, name: str) -> set[str]:
    return {e["labels"]["hostname"] for e in body["series"][name]["entries"]}


def test_a_tenants_key_sees_only_its_own_hosts_series_under_a_shared_execution_id(two_tenants):
    with client_for(two_tenants.url) as client:
        scoped = get(client, SHARED_ID, RESEARCH)
        everyone = get(client, SHARED_ID, ADMIN)  # two tenants' executions: not merged, a 409 (test_api_hardening_e2e)
    assert scoped.status_code == 200, scoped.text
    assert everyone.status_code == 409, everyone.text
    for series in catalog.API_SERIES:
        assert hosts_of(scoped.json(), series.api_name) == {"ha"}, series.api_name


@pytest.mark.single_version  # our choice of alerts over the ALERTS series, alike on either version
def test_an_alert_without_a_tenant_is_not_shown_to_a_tenant_whose_execution_id_another_tenant_holds(tmp_path: Path):
    """Execution-wide and host alerts carry no tenant label. Where two tenants hold one execution id, such an alert
    is no more one tenant's than the other's: a scoped key's report left it in (another tenant's underused GPUs).
    Where the id is the tenant's alone, it is still shown."""
    research = Execution(SHARED_ID, (Gpu("ha", 0),), ("compute",), namespace="research")
    physics = Execution(SHARED_ID, (Gpu("hb", 0),), ("compute",), namespace="physics")
    solo = Execution("solo-0001", (Gpu("hc", 0),), ("compute",), namespace="research")
    scenario = Scenario("two tenants, one id", "", (Host("ha"), Host("hb"), Host("hc")), (research, physics, solo))
    end = int(time.time()) // 60 * 60 - 15 * 60
    start = end - scenario.window_minutes * 60
    text = openmetrics(Renderer(scenario, Config()).all_series(), start).removesuffix("# EOF\n")
    alert = '{{alertname="GpuExecutionGpuUnderutilized",alertstate="firing",severity="info",execution_id="{}"}}'
    for eid in (SHARED_ID, "solo-0001"):  # as the rules fire it: no namespace
        text += "".join(f"ALERTS{alert.format(eid)} 1 {start + 60 * k}\n" for k in range(20, 30))
    server = Prometheus(tmp_path)
    try:
        server.load_openmetrics(text + "# EOF\n", all_groups(Config()), start, end)
        with client_for(server.url) as client:
            headers = {"Authorization": f"Bearer {RESEARCH}"}
            shared = client.get(SUMMARY_PATH.format(execution_id=SHARED_ID), headers=headers)
            alone = client.get(SUMMARY_PATH.format(execution_id="solo-0001"), headers=headers)
    finally:
        server.stop()
    assert shared.status_code == 200 and alone.status_code == 200, (shared.text, alone.text)
    assert [a["alertname"] for a in shared.json()["alerts"]] == [], shared.json()["alerts"]
    assert [a["alertname"] for a in alone.json()["alerts"]] == ["GpuExecutionGpuUnderutilized"], alone.json()


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


@pytest.mark.single_version  # our parameter checks, before any query
@pytest.mark.parametrize(
    ("execution_id", "params", "message"),
    [
        (SHARED_ID + "\n", {}, "execution_id: not accepted"),  # the pattern's $ matched before a final newline
        ("x" * 300, {}, "execution_id: 300 characters; accepted: at most 256"),  # the pattern alone would pass it
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


# --- Times and steps at the edges: 400 naming the parameter, never 500, 502 or an empty 200 ----------------


@pytest.fixture(scope="module")
def training(prometheus):
    """A client on the training scenario's Prometheus: train-0001 ran for 40 minutes, ended 15 minutes ago."""
    server, start, end, _ = prometheus
    with client_for(server.url) as client:
        yield client, start, end


FIVE_THOUSAND_DIGITS = "9" * 5000 + "y"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        # An offset moves these out of the years 1 to 9999 in UTC (Python cannot hold year 0 or 10000).
        ({"start": "0001-01-01T00:30:00+01:00"}, "start: '0001-01-01T00:30:00+01:00' is outside the years 1 to 9999"),
        ({"end": "9999-12-31T23:30:00-01:00"}, "end: '9999-12-31T23:30:00-01:00' is outside the years 1 to 9999"),
        ({"step": "10000y"}, "step: '10000y' is longer than 1y; accepted: 1s to 1y"),
        ({"step": "99999999999999999999y"}, "step: '99999999999999999999y' is longer than 1y"),
        ({"step": FIVE_THOUSAND_DIGITS}, f"step: {FIVE_THOUSAND_DIGITS[:40]!r}... (5001 characters) is longer than"),
        # Prometheus overflows on a step of 10000y (int64 nanoseconds): refused before it is asked.
        (
            {"step": "10000y", "start": "0001-01-01T00:00:00Z", "end": "9999-12-31T00:00:00Z"},
            "step: '10000y' is longer than 1y",
        ),
        ({"start": "2000-01-01T00:00:00Z"}, "start: 2000-01-01T00:00:00Z is too early: "),  # not `step:`
        ({"end": "2000-01-01T00:00:00Z"}, "end: 2000-01-01T00:00:00Z is before the execution's first sample ("),
    ],
)
def test_times_and_steps_out_of_range_are_400_naming_the_parameter(training, params, message):
    client, _, _ = training
    response = get(client, EXECUTION, **params)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"].startswith(message), response.json()
    assert len(response.text) < 600  # a 5,000-digit value is not echoed back


def test_a_step_longer_than_the_execution_is_400_naming_step_and_its_length(training):
    """It used to answer 200 with start after end and no entries (the grid's first point past the end)."""
    client, _, _ = training
    body = get(client, EXECUTION, step="15s").json()
    # The 15 s grid lies within the execution, less than a step from either end of it.
    length = int(iso_seconds(body["end"]) - iso_seconds(body["start"]))
    response = get(client, EXECUTION, step="1h")
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error.startswith("step: '1h' is longer than the execution's length ("), error
    assert length <= parse_duration_seconds(error.split("accepted: at most ")[1]) < length + 30, error


def test_a_step_longer_than_start_to_end_is_400_and_start_equal_to_end_is_one_point(training):
    client, start, _ = training
    around = {"start": iso(start + 600), "end": iso(start + 1200)}
    longer = get(client, EXECUTION, step="11m", **around)
    assert longer.status_code == 400
    assert longer.json()["error"] == (
        "step: '11m' is longer than the window from start to end (10m); accepted: at most 10m"
    )
    assert get(client, EXECUTION, step="10m", **around).status_code == 200  # two points: start and end
    one = get(client, EXECUTION, step="1h", start=iso(start + 600), end=iso(start + 600))
    assert one.status_code == 200, one.text
    [entry, *_] = one.json()["series"]["gpuUtilizationPercent"]["entries"]
    assert [t for t, _ in entry["values"]] == [start + 600]


def test_a_start_after_the_executions_end_says_so_naming_start_and_the_end(training):
    client, _, end = training
    last = iso_seconds(get(client, EXECUTION).json()["end"])  # the last grid point: the end within a step
    response = get(client, EXECUTION, start=iso(end + 3600))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    prefix = f"start: {iso(end + 3600)} is after the execution's end ("
    assert error.startswith(prefix) and error.endswith("); accepted: a start at or before it"), error
    execution_end = iso_seconds(error[len(prefix) :].split(")")[0])
    assert last <= execution_end < last + 15


# --- Upstream faults: whatever Prometheus answers, the endpoint answers JSON ---------------------------------


def succeed_with(body: object) -> Rewrite:
    """Every answer replaced by ``body``, status 200."""
    return lambda seen, status, real: (200, json.dumps(body).encode())


def corrupt_series_values(seen: Seen, status: int, body: bytes) -> tuple[int, bytes]:
    """Prometheus' own answers, except the series' range queries, whose sample values are no longer numbers."""
    doc = json.loads(body)
    if seen.path.endswith("/query_range") and "count_over_time" not in seen.params["query"][0]:
        for item in doc["data"]["result"]:
            item["values"] = [[t, "not a number"] for t, _ in item["values"]]
    return status, json.dumps(doc).encode()


@pytest.mark.single_version  # a proxy's bodies, not Prometheus'
@pytest.mark.parametrize(
    "rewrite",
    [
        succeed_with({"status": "success"}),  # no data
        succeed_with([]),  # a JSON list
        succeed_with(["status", "success"]),
        succeed_with(None),
        succeed_with({"status": "success", "data": {"resultType": "matrix"}}),  # data without result
        succeed_with({"status": "success", "data": {"resultType": "matrix", "result": {}}}),
        succeed_with({"status": "success", "data": {"resultType": "matrix", "result": [{"values": [[1, "1"]]}]}}),
        succeed_with({"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": 7}]}}),
        succeed_with(
            {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [1]}]}}
        ),
        succeed_with(
            {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [[1, "x"]]}]}}
        ),
        succeed_with({"status": "success", "data": {"resultType": "scalar", "result": [1, "1"]}}),
        succeed_with({"status": "pending"}),
        corrupt_series_values,  # the span resolves on the real data; the series come back as text
    ],
    ids=lambda rewrite: getattr(rewrite, "__name__", "body"),
)
def test_an_unexpected_prometheus_body_is_a_json_502(prometheus, rewrite):
    server, _, _, _ = prometheus
    with Proxy(server.url, rewrite) as upstream, client_for(upstream.url) as client:
        response = get(client, EXECUTION)
    assert response.status_code == 502, response.text
    assert response.headers["content-type"] == "application/json"
    assert "unexpected body" in response.json()["error"], response.json()


@pytest.mark.single_version  # a trickling upstream, no Prometheus
def test_timeout_seconds_is_a_deadline_for_the_whole_request_and_cancels_the_upstream_query():
    """A trickling upstream never lets a read time out; it used to hold a 2 s-timeout request for 21 s."""
    with Trickle() as upstream, client_for(upstream.url, timeout_seconds=1) as client:
        began = time.monotonic()
        response = get(client, EXECUTION)
        answered = time.monotonic()
        time.sleep(1)  # the trickle notices a closed connection at its next byte, 0.1 s on
        closed = list(upstream.closed)
    assert response.status_code == 504, response.text
    assert response.headers["content-type"] == "application/json"
    assert "did not answer in time (deadline 1 s: api.timeout_seconds)" in response.json()["error"]
    assert answered - began < 3, answered - began  # the deadline and some slack on a busy machine, not 30 s
    assert upstream.accepted == len(closed) == 1 and closed[0] < answered + 1  # the query did not go on


@pytest.mark.single_version  # a trickling upstream, no Prometheus
def test_the_upstream_query_is_cancelled_when_the_client_goes_away():
    with Trickle() as upstream:
        app = create_app(config_from_mapping({"api": {"prometheus_url": upstream.url, "timeout_seconds": 30}}), KEYS)
        with served(app) as url:
            with pytest.raises(httpx.ReadTimeout):  # the client gives up after 1 s and closes its connection
                httpx.get(url + metrics_path(EXECUTION), headers={"Authorization": f"Bearer {ADMIN}"}, timeout=1)
            left = time.monotonic()
            while not upstream.closed and time.monotonic() < left + 5:
                time.sleep(0.05)
            closed = list(upstream.closed)
    assert upstream.accepted == 1
    assert len(closed) == 1 and closed[0] - left < 3, "the upstream query ran on after the client left"


@pytest.mark.single_version  # our server's header limit, before any query
def test_a_one_megabyte_token_is_a_json_431_over_real_http(prometheus):
    """uvicorn reset the connection; now the app answers, for headers past MAX_HEADER_BYTES."""
    server, _, _, _ = prometheus
    app = create_app(config_from_mapping({"api": {"prometheus_url": server.url}}), KEYS)
    with served(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        huge = http.get(metrics_path(EXECUTION), headers={"Authorization": "Bearer " + "k" * 1_000_000})
        assert huge.status_code == 431, huge.text
        assert huge.headers["content-type"] == "application/json"
        assert huge.json()["error"].startswith("request headers: 1000")
        assert f"accepted: at most {MAX_HEADER_BYTES} bytes" in huge.json()["error"]
        for path in ("/healthz", "/nope"):  # every route, before auth or routing
            assert http.get(path, headers={"X-Padding": "p" * (MAX_HEADER_BYTES + 1)}).status_code == 431
        # Just under the limit is served, with a fresh connection as the 431 closed its own.
        padding = "p" * (MAX_HEADER_BYTES - 1024)
        ok = http.get(
            metrics_path(EXECUTION),
            params={"step": "5m"},
            headers={"Authorization": f"Bearer {ADMIN}", "X-Padding": padding},
        )
        assert ok.status_code == 200, ok.text
