"""Beyond one Prometheus: a path prefix, a tenant header (Mimir, Cortex) and Thanos' partial_response.

The prefix runs against a real Prometheus started with ``--web.route-prefix``; the header and the
parameter are recorded by a proxy in front of the real Prometheus, which answers every query
with them (Prometheus ignores ``partial_response``, as Mimir does).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from gpu_execution_pack import catalog

from harness.prometheus import Prometheus
from harness.upstreams import Proxy

from .conftest import EXECUTION
from .test_api import ADMIN, RESEARCH, client_for, get

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("promtool_available")]


def test_a_path_in_prometheus_url_reaches_a_prometheus_under_a_route_prefix(tmp_path: Path):
    start = int(time.time()) // 60 * 60 - 3600
    labels = 'execution_id="prefix-0001",namespace="research",hostname="h1",gpu="0",UUID="GPU-p",modelName="X"'
    lines = [f"{catalog.GPU_UTILIZATION.name}{{{labels}}} 0.5 {start + 15 * k}" for k in range(20)]
    server = Prometheus(tmp_path, route_prefix="/prom")
    try:
        server.load_openmetrics("\n".join(lines) + "\n# EOF\n", [], start, start + 300)
        assert server.url.endswith("/prom")
        with client_for(server.url) as client:
            response = get(client, "prefix-0001", RESEARCH)
            ready = client.get("/readyz")
        with client_for(server.url.removesuffix("/prom")) as client:  # the same server without its prefix
            unprefixed = get(client, "prefix-0001", RESEARCH)
    finally:
        server.stop()
    assert response.status_code == 200, response.text
    [entry] = response.json()["series"][catalog.GPU_UTILIZATION.api_name]["entries"]
    assert [v for _, v in entry["values"]] == [50.0] * 20
    assert ready.status_code == 200, ready.text
    assert unprefixed.status_code == 502, unprefixed.text  # Prometheus has no API at the root


def answered_queries(upstream: Proxy) -> list:
    return [seen for seen in upstream.seen if seen.path.startswith("/api/v1/")]


@pytest.mark.single_version  # what our client sends, seen by a proxy
def test_by_default_no_tenant_header_and_partial_response_false(prometheus):
    server, _, _, _ = prometheus
    with Proxy(server.url) as upstream, client_for(upstream.url) as client:
        response = get(client, EXECUTION, RESEARCH, step="5m")
    assert response.status_code == 200, response.text  # Prometheus ignores partial_response
    queries = answered_queries(upstream)
    assert len(queries) == 5  # the span's 3, then the GPU series and the host series, one query each
    for seen in queries:
        assert seen.params["partial_response"] == ["false"], seen
        assert "x-scope-orgid" not in seen.headers, seen


@pytest.mark.single_version  # what our client sends, seen by a proxy
@pytest.mark.parametrize(
    ("api", "header", "value", "partial"),
    [
        ({"tenant_id": "gpu-fleet"}, "x-scope-orgid", "gpu-fleet", "false"),
        ({"tenant_id": "eu|us"}, "x-scope-orgid", "eu|us", "false"),  # Mimir's tenant federation
        ({"tenant_header": "X-Tenant", "tenant_id": "gpu-fleet"}, "x-tenant", "gpu-fleet", "false"),
        ({"partial_response": True}, None, None, "true"),
    ],
)
def test_every_query_carries_the_configured_tenant_header_and_partial_response(prometheus, api, header, value, partial):
    server, _, _, _ = prometheus
    with Proxy(server.url) as upstream, client_for(upstream.url, **api) as client:
        response = get(client, EXECUTION, RESEARCH, step="5m")
        ready = client.get("/readyz")  # the probe asks as the endpoint does
    assert response.status_code == ready.status_code == 200, response.text
    queries = answered_queries(upstream)
    assert len(queries) == 6  # the span (3), the GPU and the host series (one each), the probe
    for seen in queries:
        assert seen.params["partial_response"] == [partial], seen
        if header is not None:
            assert seen.headers[header] == value, seen
        assert "x-scope-orgid" not in seen.headers or header == "x-scope-orgid", seen


@pytest.mark.single_version  # our client's cache
def test_a_finished_executions_span_is_read_once_then_reused(prometheus):
    """The span of a finished execution does not change: a second request asks only for the series."""
    server, _, _, _ = prometheus
    with Proxy(server.url) as upstream, client_for(upstream.url) as client:
        first = get(client, EXECUTION, RESEARCH, step="5m")
        second = get(client, EXECUTION, RESEARCH, step="5m")
        other_tenant = get(client, EXECUTION, ADMIN, step="5m")  # another key, its own span
    assert first.status_code == second.status_code == other_tenant.status_code == 200
    assert first.json() == second.json()
    assert len(answered_queries(upstream)) == 5 + 2 + 5
