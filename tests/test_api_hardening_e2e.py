"""Issue 37 against a real Prometheus: its parser reads back every printed literal, odd labels answer 404 (not
502), an id two tenants hold is a 409 for the all-tenants key, and excess load is answered at once with 429."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.api.app import FLEET_PATH, PATH, SUMMARY_PATH, create_app
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.promql import call, match, render, selector
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.prometheus import Prometheus
from harness.upstreams import served

from .conftest import EXECUTION
from .test_api_defects import SHARED_ID, hosts_of, two_tenants  # noqa: F401 (a fixture)
from .test_api_hardening import AUTH, KEYS, LINE_BREAKS, RESEARCH, characters_to_escape

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("promtool_available")]
ROUND_TRIP_LABEL = "v"


@pytest.fixture(scope="module")
def parser(tmp_path_factory: pytest.TempPathFactory):
    """A real Prometheus, empty: its query API parses (and evaluates) what the printer prints."""
    server = Prometheus(tmp_path_factory.mktemp("parser"))
    try:
        server.start()
        yield server
    finally:
        server.stop()


def read_back(server: Prometheus, value: str) -> str | None:
    """``value`` through our printer and Prometheus' parser: ``label_join`` of two absent labels is its separator,
    verbatim; a selector with ``value`` in a matcher (matching nothing) must parse too."""
    joined = call("label_join", call("vector", 1), ROUND_TRIP_LABEL, value, "a", "b")
    query = render(joined.unless(selector("no_such_metric", match("cluster", value))))
    [result] = server.query(query, time.time())
    return result["metric"].get(ROUND_TRIP_LABEL)


def test_every_control_and_line_break_reads_back_from_prometheus(parser):
    for ch in characters_to_escape():
        value = f"c1{ch}"
        assert read_back(parser, value) == value, f"U+{ord(ch):04X}"
    every = "".join(characters_to_escape())
    assert read_back(parser, every) == every


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(min_size=1, max_size=40))
def test_any_label_value_reads_back_from_prometheus(parser, value):
    assert read_back(parser, value) == value


@pytest.mark.parametrize(
    "cluster",
    ["c1\r", "c1\u2028", "c1\v", "c1\x85", "c1\ufffd", "c1" + LINE_BREAKS, "\\\"}'", "c1\x00"],
    ids=["cr", "u2028", "vt", "nel", "fffd", "all-breaks", "quotes", "nul"],
)
@pytest.mark.parametrize("route", [PATH, SUMMARY_PATH])
def test_a_cluster_value_with_odd_characters_is_looked_for_not_a_502(prometheus, route, cluster):
    server = prometheus[0]
    cfg = config_from_mapping({"cluster_label": "cluster", "api": {"prometheus_url": server.url}})
    from starlette.testclient import TestClient

    with TestClient(create_app(cfg, KEYS)) as client:
        response = client.get(route.format(execution_id=EXECUTION), params={"cluster": cluster}, headers=AUTH)
    assert response.status_code == 404, response.text  # no such cluster holds it: Prometheus parsed the query


@pytest.mark.parametrize("suffix", ["\r", "\u2028", "\ufffd", "\x1c"])
def test_an_id_with_odd_characters_under_a_permissive_pattern_is_a_404_not_a_502(prometheus, suffix):
    server = prometheus[0]
    cfg = config_from_mapping({"api": {"prometheus_url": server.url, "execution_id_pattern": ".+"}})
    from starlette.testclient import TestClient

    with TestClient(create_app(cfg, KEYS)) as client:
        response = client.get(PATH.format(execution_id=quote(EXECUTION + suffix, safe="")), headers=AUTH)
    assert response.status_code == 404, response.text


# --- 7. One id, two tenants, the all-tenants key ------------------------------------------------------


@pytest.mark.single_version  # our server's 409, on the ids Prometheus lists
def test_the_all_tenants_key_gets_a_409_naming_both_tenants_of_an_id(two_tenants):  # noqa: F811
    cfg = config_from_mapping({"api": {"prometheus_url": two_tenants.url}})
    from starlette.testclient import TestClient

    with TestClient(create_app(cfg, KEYS)) as client:
        for route in (PATH, SUMMARY_PATH):
            response = client.get(route.format(execution_id=SHARED_ID), headers=AUTH)
            assert response.status_code == 409, response.text
            body = response.json()
            assert body["tenants"] == ["physics", "research"]
            assert body["error"].startswith("tenant: ") and "physics" in body["error"]
        picked = {
            tenant: client.get(PATH.format(execution_id=SHARED_ID), params={"tenant": tenant}, headers=AUTH)
            for tenant in ("research", "physics")
        }
        own = client.get(
            PATH.format(execution_id=SHARED_ID),
            params={"tenant": "research"},
            headers={"Authorization": f"Bearer {RESEARCH}"},
        )
    for response in (*picked.values(), own):
        assert response.status_code == 200, response.text
    for series in catalog.API_SERIES:
        assert hosts_of(picked["research"].json(), series.api_name) == {"ha"}
        assert hosts_of(picked["physics"].json(), series.api_name) == {"hb"}
        assert hosts_of(own.json(), series.api_name) == {"ha"}


@pytest.mark.single_version  # our fleet view's rows, on the series Prometheus holds
def test_the_all_tenants_fleet_view_has_a_row_per_tenant_of_an_id_two_tenants_hold(two_tenants):  # noqa: F811
    """The fleet view keyed a row by cluster and id: over every tenant, research's one-GPU execution and physics'
    two-GPU one of the same id were one row of three GPUs on two hosts. Each is its own row now, with its tenant;
    a tenant's own view holds its execution alone."""
    cfg = config_from_mapping({"api": {"prometheus_url": two_tenants.url}})
    from starlette.testclient import TestClient

    with TestClient(create_app(cfg, KEYS)) as client:
        everyone = client.get(FLEET_PATH, params={"since": "1d"}, headers=AUTH)
        own = client.get(FLEET_PATH, params={"since": "1d"}, headers={"Authorization": f"Bearer {RESEARCH}"})
    assert everyone.status_code == 200 and own.status_code == 200, (everyone.text, own.text)
    rows = {r["tenant"]: r for r in everyone.json()["top"] if r["executionId"] == SHARED_ID}
    assert sorted(rows) == ["physics", "research"], everyone.json()["top"]
    assert (rows["research"]["gpus"], rows["physics"]["gpus"]) == (1, 2)
    # research's GPU-hours are a third of the two rows', as its GPUs are (the same phases on each GPU).
    research, physics = rows["research"]["gpuHoursBilled"], rows["physics"]["gpuHoursBilled"]
    assert research > 0 and abs(physics - 2 * research) <= 0.01 * physics, (research, physics)
    assert everyone.json()["executions"] == 2
    [mine] = own.json()["top"]
    assert (mine["executionId"], mine["tenant"], mine["gpus"]) == (SHARED_ID, "research", 1)
    assert mine["gpuHoursBilled"] == research


# --- 5. Load shedding ---------------------------------------------------------------------------------


@pytest.mark.single_version  # our server's load shedding
def test_past_the_points_in_flight_requests_are_answered_at_once_with_429_json(prometheus, tmp_path: Path):
    server = prometheus[0]
    # Room for one request at a time: each holds 2,000 points on arrival, then its window's (165 x 12 at 15 s).
    cfg = config_from_mapping(
        {"api": {"prometheus_url": server.url, "max_points_in_flight": 4000, "retry_after_seconds": 1}}
    )

    async def burst(url: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            path = PATH.format(execution_id=EXECUTION)
            return await asyncio.gather(*(http.get(path, params={"step": "1s"}, headers=AUTH) for _ in range(24)))

    began = time.monotonic()
    with served(create_app(cfg, KEYS)) as url:
        answers = asyncio.run(burst(url))
        after = httpx.get(f"{url}{PATH.format(execution_id=EXECUTION)}", headers=AUTH, timeout=60)
    elapsed = time.monotonic() - began
    statuses = sorted(r.status_code for r in answers)
    assert set(statuses) == {200, 429}, statuses
    for response in answers:
        assert response.headers["content-type"] == "application/json"
        response.json()
        if response.status_code == 429:
            assert response.headers["retry-after"] == "1"
            assert "api.max_points_in_flight" in response.json()["error"]
    assert after.status_code == 200, after.text  # every request gave its points back
    assert elapsed < 20, elapsed


@pytest.mark.single_version  # the CLI's option reaching the endpoint's own tenant scoping
def test_the_cli_names_the_tenant_of_an_id_two_tenants_hold(two_tenants, tmp_path: Path):  # noqa: F811
    """`query` and `report` said "accepted: a tenant parameter naming one of them" and had no such option."""
    config = tmp_path / "pack.yml"
    config.write_text(f"api: {{prometheus_url: {two_tenants.url}}}\n")
    cli = [sys.executable, "-m", "gpu_execution_pack"]
    both = subprocess.run([*cli, "query", SHARED_ID, "-c", str(config)], capture_output=True, text=True, timeout=120)
    assert both.returncode == 2 and "held by 2 tenants" in both.stderr, both.stderr
    answers = {
        tenant: subprocess.run(
            [*cli, "query", SHARED_ID, "-c", str(config), "--tenant", tenant],
            capture_output=True,
            text=True,
            timeout=120,
        )
        for tenant in ("research", "physics")
    }
    for tenant, hosts in (("research", {"ha"}), ("physics", {"hb"})):
        assert answers[tenant].returncode == 0, answers[tenant].stderr
        assert hosts_of(json.loads(answers[tenant].stdout), catalog.API_SERIES[0].api_name) == hosts
    report = subprocess.run(
        [*cli, "report", SHARED_ID, "-c", str(config), "--tenant", "physics", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["gpus"]["count"] == 2  # physics' two GPUs on hb
