"""The metrics endpoint's ``series`` parameter, and its default answer byte for byte as it was before it.

Against a real Prometheus holding a hung collective beside a tensor-core job and an FP32 job that
exports the SM fields (``api_golden.scenarios``), backfilled to end at a fixed time so that whole
answers can be compared with the goldens the endpoint's earlier code wrote (tests/api_golden.py).
The activity values are checked against the scenario model, converted to percent here.
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote

import jsonschema
import orjson
import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.api import metrics
from gpu_execution_pack.api.app import PATH, create_app
from gpu_execution_pack.api.openapi import openapi_document
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.query import execution
from gpu_execution_pack.query.params import parse_series
from gpu_execution_pack.scenario import oracle
from starlette.testclient import TestClient

from harness.prometheus import Prometheus
from harness.upstreams import Proxy

from . import api_golden
from .api_golden import ADMIN, KEYS, RESEARCH
from .conftest import major_version

SERVABLE = [s.api_name for s in catalog.SERVABLE_SERIES]
API_NAMES = [s.api_name for s in catalog.API_SERIES]  # the default answer's series, in its order
ON_REQUEST = [s.api_name for s in catalog.SERVABLE_SERIES if s.api_optional]
ACTIVITY = {  # API name -> its series (oracle.gpu_truth is keyed by series, in base units: ratios)
    s.api_name: s for s in catalog.GPU_ACTIVITY_SERIES
}
# The activity fields no release collects by default (SM activity and occupancy): fp32's scenario exports them.
SM_FIELDS = {
    s.api_name
    for s, key in oracle.ACTIVITY_TRUTHS.items()
    if not any(raw.default_collected for raw in catalog.SIGNALS[key].raws)
}
OTHER_TENANT = "physics-key-0123456789"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory):
    """The golden data in a real Prometheus; yields (server, start of the data)."""
    server = Prometheus(tmp_path_factory.mktemp("series"))
    try:
        yield server, api_golden.load(server)
    finally:
        server.stop()


def client_for(url: str) -> TestClient:
    keys = {**KEYS, OTHER_TENANT: "physics"}
    return TestClient(create_app(config_from_mapping({"api": api_golden.api_config(url)}), keys))


def fetch(url: str, execution_id: str, key: str = ADMIN, **params: str):
    with client_for(url) as client:
        return client.get(
            PATH.format(execution_id=quote(execution_id, safe="")),
            params=params,
            headers={"Authorization": f"Bearer {key}"},
        )


@pytest.fixture
def streamed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every window is streamed, in pieces as the goldens' streamed answers were."""
    monkeypatch.setattr(metrics, "STREAM_POINTS", api_golden.STREAMED["STREAM_POINTS"])
    monkeypatch.setattr(execution, "CHUNK_POINTS", api_golden.STREAMED["CHUNK_POINTS"])


# --- The default answer, byte for byte --------------------------------------------------------


def golden(name: str) -> bytes:
    major = major_version("prometheus")
    path = api_golden.golden_path(name, major)
    assert path.is_file(), f"no golden answer for Prometheus {major}: write them as tests/api_golden.py says"
    return path.read_bytes()


@pytest.mark.e2e
@pytest.mark.parametrize("request_", api_golden.REQUESTS, ids=lambda r: r.name)
@pytest.mark.parametrize("path", ["in memory", "streamed"])
def test_the_default_answer_is_byte_for_byte_the_one_before_the_series_parameter(data, request_, path, monkeypatch):
    server, _ = data
    if path == "streamed":
        monkeypatch.setattr(metrics, "STREAM_POINTS", api_golden.STREAMED["STREAM_POINTS"])
        monkeypatch.setattr(execution, "CHUNK_POINTS", api_golden.STREAMED["CHUNK_POINTS"])
    response = fetch(server.url, request_.execution_id, request_.key, **request_.params)
    assert response.status_code == 200, response.text
    assert ("content-length" not in response.headers) == (path == "streamed")  # the path asked for was taken
    assert on_golden_series(response.content, golden(request_.name)) == golden(request_.name)


def on_golden_series(answer: bytes, golden_answer: bytes) -> bytes:
    """``answer`` with only the series the golden has, where the default answer has more (a series added to
    the contract since: it has no golden), re-encoded as the endpoint encodes (orjson); else ``answer`` itself,
    compared byte for byte."""
    body, kept = json.loads(answer), json.loads(golden_answer)["series"]
    if list(body["series"]) == list(kept):
        return answer
    assert [n for n in body["series"] if n in kept] == list(kept), "a golden series left the default answer"
    assert all(n in API_NAMES for n in body["series"]), "a series outside the contract in the default answer"
    return orjson.dumps({**body, "series": {n: body["series"][n] for n in kept}})


@pytest.mark.e2e
def test_the_data_holds_the_activity_series_the_default_answer_leaves_out(data):
    """The goldens prove something only if the series left out of the default answer are in the data."""
    server, start = data
    for series in catalog.GPU_ACTIVITY_SERIES:
        found = server.query(f'count({series.name}{{execution_id="fp32-0026"}})', start + 30 * 60)
        assert found and float(found[0]["value"][1]) == 1, series.name
    body = json.loads(golden("fp32-0026"))
    assert set(body["series"]) <= set(API_NAMES) and not set(body["series"]) & set(ON_REQUEST)


# --- series= ---------------------------------------------------------------------------------


def truth_percent(series: catalog.Series, execution_id: str, labels: dict[str, str], minute: float) -> float | None:
    """The model's value of ``series`` for the GPU of ``labels`` at ``minute``, in percent; None when it
    has none there (not running, or its field not exported)."""
    for scenario in api_golden.scenarios():
        for e in scenario.executions:
            if e.id != execution_id:
                continue
            gpu = next(g for g in e.gpus if g.host == labels["hostname"] and str(g.index) == labels["gpu"])
            truth = oracle.gpu_truth(scenario, e, gpu, minute)
            return None if truth is None or series not in truth else truth[series] * 100
    raise AssertionError(f"no execution {execution_id} in the scenarios")


@pytest.mark.e2e
@pytest.mark.parametrize("execution_id", ["hung-0024", "tensor-0025", "fp32-0026"])
def test_activity_series_are_served_when_named_and_equal_the_model(data, execution_id):
    server, start = data
    names = ",".join(ON_REQUEST)
    response = fetch(server.url, execution_id, series=names, step="1m")
    assert response.status_code == 200, response.text
    body = response.json()
    assert list(body["series"]) == ON_REQUEST  # the catalog's order, nothing else
    compared = 0
    for name in ON_REQUEST:
        assert body["series"][name]["unit"] == "percent"
        entries = body["series"][name]["entries"]
        exported = execution_id == "fp32-0026" or name not in SM_FIELDS
        assert bool(entries) == exported, name  # SM activity and occupancy only where exported
        for entry in entries:
            assert entry["labels"]["execution_id"] == execution_id
            for t, value in entry["values"]:
                minute = (t - start) / 60
                now, before = (
                    truth_percent(ACTIVITY[name], execution_id, entry["labels"], m) for m in (minute, minute - 1)
                )
                if now is None or now != before:  # not running, or a phase change the recording rules step through
                    continue
                assert value == pytest.approx(now, rel=1e-9, abs=1e-9), (name, entry["labels"], minute)
                compared += 1
    assert compared > 40, compared


@pytest.mark.e2e
def test_the_hung_collective_shows_high_utilisation_and_idle_engines(data):
    """What the series are for: 98 % GPU_UTIL with the engines at 2 %, in one answer."""
    server, start = data
    body = fetch(server.url, "hung-0024", series="gpuGraphicsEngineActivePercent,gpuUtilizationPercent").json()
    assert list(body["series"]) == ["gpuUtilizationPercent", "gpuGraphicsEngineActivePercent"]
    at = start + 30 * 60  # in the hung phase (minutes 15 to 45)
    for name, low, high in (("gpuUtilizationPercent", 90, 100), ("gpuGraphicsEngineActivePercent", 0, 5)):
        for entry in body["series"][name]["entries"]:
            assert low <= dict(map(tuple, entry["values"]))[at] <= high, (name, entry["labels"])


@pytest.mark.e2e
@pytest.mark.parametrize(
    "names",
    [
        ["systemCpuUsagePercent", "gpuPowerWatt"],  # given out of order: answered in the catalog's
        ["gpuClockSmMhz"],
        ["systemRamTotalBytes", "systemRamUsedBytes"],
        list(reversed([s.api_name for s in catalog.API_SERIES])),
    ],
    ids=lambda n: ",".join(n)[:40],
)
@pytest.mark.parametrize("key", [ADMIN, RESEARCH])
def test_a_subset_is_the_default_answers_series_it_names(data, names, key):
    server, _ = data
    whole = json.loads(golden("hung-0024"))
    body = fetch(server.url, "hung-0024", key, series=",".join(names)).json()
    assert {k: body[k] for k in ("executionId", "start", "end", "step")} == {
        k: whole[k] for k in ("executionId", "start", "end", "step")
    }
    assert list(body["series"]) == [n for n in API_NAMES if n in names]  # the catalog's order
    known = [n for n in names if n in whole["series"]]  # a series added to the contract since has no golden
    assert {n: body["series"][n] for n in known} == {n: whole["series"][n] for n in known}


@pytest.mark.single_version  # two of our paths over one Prometheus
@pytest.mark.e2e
@pytest.mark.usefixtures("streamed")
def test_a_streamed_subset_has_the_bytes_of_the_one_built_in_memory(data, monkeypatch):
    server, _ = data
    names = "gpuTensorActivePercent,systemCpuUsagePercent,gpuSmActivePercent"
    streamed = fetch(server.url, "fp32-0026", series=names)
    assert streamed.status_code == 200 and "content-length" not in streamed.headers
    monkeypatch.setattr(metrics, "STREAM_POINTS", 10_000)
    in_memory = fetch(server.url, "fp32-0026", series=names)
    assert "content-length" in in_memory.headers and streamed.content == in_memory.content


def data_queries(upstream: Proxy) -> list[str]:
    """The range queries that read series (not the span's counts of the execution's samples)."""
    queries = [s.params["query"][0] for s in upstream.seen if s.path.endswith("/query_range")]
    return [q for q in queries if "count_over_time" not in q]


def named(query: str) -> set[str]:
    """The recorded series a query reads (their names have colons; labels and functions do not)."""
    return {n.replace("\\", "") for n in re.findall(r"[a-z_]+(?:\\?:[a-z_]+)+", query)}


@pytest.mark.single_version  # what our client asks, seen by a proxy
@pytest.mark.e2e
@pytest.mark.parametrize("path", ["in memory", "streamed"])
@pytest.mark.parametrize(
    "names",
    [["gpuTensorActivePercent", "gpuDramActivePercent"], ["systemCpuUsagePercent"]],
    ids=",".join,
)
def test_only_the_named_series_are_asked_of_prometheus(data, names, path, monkeypatch):
    server, _ = data
    if path == "streamed":
        monkeypatch.setattr(metrics, "STREAM_POINTS", 1)
    wanted = {s.name for s in catalog.SERVABLE_SERIES if s.api_name in names}
    with Proxy(server.url) as upstream:
        assert fetch(upstream.url, "fp32-0026", series=",".join(names)).status_code == 200
        subset = data_queries(upstream)
    with Proxy(server.url) as upstream:
        assert fetch(upstream.url, "fp32-0026").status_code == 200
        default = data_queries(upstream)
    assert subset and set().union(*map(named, subset)) == wanted
    assert set().union(*map(named, default)) == {s.name for s in catalog.API_SERIES}
    assert len(subset) < len(default)  # fewer queries, not the same ones filtered afterwards


# --- Refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("gpuFanSpeedPercent", "series: 'gpuFanSpeedPercent' is not a served series"),
        ("", "series: '' has an empty name"),
        ("gpuPowerWatt,", "series: 'gpuPowerWatt,' has an empty name"),
        ("gpuPowerWatt,,gpuClockSmMhz", "has an empty name"),
        ("gpuPowerWatt, gpuClockSmMhz", "series: ' gpuClockSmMhz' is not a served series"),
        ("gpupowerwatt", "series: 'gpupowerwatt' is not a served series"),
        ("gpuPowerWatt,gpuClockSmMhz,gpuPowerWatt", "series: 'gpuPowerWatt' is named twice"),
        (catalog.GPU_POWER.name, "is not a served series"),  # recorded names are not API names
        ("x" * 5000, "series: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'... (5000 characters) is not a served"),
    ],
)
def test_bad_series_are_400_naming_the_parameter_and_the_accepted_names(value, says):
    # No Prometheus listens there: the parameter is refused before anything is asked of it.
    response = fetch("http://127.0.0.1:9", "fp32-0026", series=value)
    assert response.status_code == 400, response.text
    message = response.json()["error"]
    assert message.startswith("series: ") and says in message, message
    accepted = message.split("accepted: ", 1)[1]
    assert all(name in accepted for name in SERVABLE), message


def test_the_series_parameter_given_twice_is_400():
    with client_for("http://127.0.0.1:9") as client:
        response = client.get(
            PATH.format(execution_id="fp32-0026") + "?series=gpuPowerWatt&series=gpuClockSmMhz",
            headers={"Authorization": f"Bearer {ADMIN}"},
        )
    assert response.status_code == 400
    assert response.json()["error"].startswith("series: given 2 times; accepted: once")


def test_a_bad_series_still_needs_a_key():
    with client_for("http://127.0.0.1:9") as client:
        response = client.get(PATH.format(execution_id="fp32-0026"), params={"series": "nope"})
    assert response.status_code == 401


@pytest.mark.e2e
def test_tenant_scoping_is_unchanged_with_series(data):
    server, _ = data
    assert fetch(server.url, "fp32-0026", OTHER_TENANT, series="gpuTensorActivePercent").status_code == 404
    research = fetch(server.url, "fp32-0026", RESEARCH, series="systemCpuUsagePercent,gpuTensorActivePercent")
    admin = fetch(server.url, "fp32-0026", ADMIN, series="systemCpuUsagePercent,gpuTensorActivePercent")
    assert research.status_code == 200 and research.content == admin.content


def test_parse_series_keeps_the_catalogs_order_and_defaults_to_the_contract():
    assert parse_series(None) == catalog.API_SERIES
    picked = parse_series("systemCpuUsagePercent,gpuSmOccupancyPercent,gpuUtilizationPercent")
    assert [s.api_name for s in picked] == ["gpuUtilizationPercent", "gpuSmOccupancyPercent", "systemCpuUsagePercent"]
    assert parse_series(",".join(reversed(SERVABLE))) == catalog.SERVABLE_SERIES


# --- The OpenAPI document --------------------------------------------------------------------


def metrics_schema_validator() -> jsonschema.protocols.Validator:
    doc = openapi_document()
    schema = {"$ref": "#/components/schemas/Metrics", "components": doc["components"]}
    return jsonschema.Draft202012Validator(schema)


def test_the_document_describes_the_series_parameter():
    [param] = [p for p in openapi_document()["paths"][PATH]["get"]["parameters"] if p["name"] == "series"]
    assert param["in"] == "query" and param["style"] == "form" and param["explode"] is False  # a,b,c
    schema = param["schema"]
    assert schema["items"]["enum"] == SERVABLE
    assert schema["default"] == [s.api_name for s in catalog.API_SERIES]
    assert schema["uniqueItems"] is True and schema["minItems"] == 1
    assert all(name in param["description"] for name in ON_REQUEST)
    series = openapi_document()["components"]["schemas"]["Metrics"]["properties"]["series"]
    assert list(series["properties"]) == SERVABLE and "required" not in series


@pytest.mark.e2e
def test_answers_with_and_without_series_are_valid_against_the_document(data):
    server, _ = data
    validator = metrics_schema_validator()
    for request_ in api_golden.REQUESTS:
        validator.validate(json.loads(golden(request_.name)))
    for names in (ON_REQUEST, ["systemRamUsedBytes"], SERVABLE):
        validator.validate(fetch(server.url, "fp32-0026", series=",".join(names)).json())
    with pytest.raises(jsonschema.ValidationError):  # the schema does hold answers to something
        validator.validate({**json.loads(golden("fp32-0026")), "series": {"gpuFanSpeedPercent": {}}})
