"""The ``cluster`` parameter without Prometheus: its checks, the OpenAPI document, the queries' cluster matcher."""

from __future__ import annotations

import pytest
from gpu_execution_pack import promql
from gpu_execution_pack.api.app import FLEET_PATH, PATH, SUMMARY_PATH, create_app
from gpu_execution_pack.api.openapi import openapi_document
from gpu_execution_pack.config import ClusterScope, cluster_scope, config_from_mapping
from gpu_execution_pack.promql import aggregate, selector
from gpu_execution_pack.query.params import MAX_CLUSTER_LENGTH, RequestError, parse_cluster, parse_params
from gpu_execution_pack.report import figures, text
from starlette.testclient import TestClient

ADMIN = "admin-key-0123456789"
CLOSED = "http://127.0.0.1:9"  # nothing listens: a request that reached Prometheus would be a 502


def config(cluster_label: str):
    return config_from_mapping({"cluster_label": cluster_label, "api": {"prometheus_url": CLOSED}})


def refusal(value: str | None, label: str) -> str:
    with pytest.raises(RequestError) as caught:
        parse_cluster(value, ClusterScope(label))
    assert caught.value.status == 400
    return str(caught.value)


def test_a_cluster_is_any_nonempty_value_of_bounded_length():
    clusters = ClusterScope("cluster")
    assert parse_cluster(None, clusters) is None
    assert parse_cluster(None, ClusterScope("")) is None
    assert parse_cluster('eu-west "1" {}', clusters) == 'eu-west "1" {}'  # a label value may hold anything
    assert parse_cluster("x" * MAX_CLUSTER_LENGTH, clusters) == "x" * MAX_CLUSTER_LENGTH
    assert refusal("", "cluster").startswith("cluster: empty; accepted: a cluster's name")
    too_long = refusal("x" * (MAX_CLUSTER_LENGTH + 1), "cluster")
    assert too_long.startswith("cluster: ") and f"1 to {MAX_CLUSTER_LENGTH} characters" in too_long
    assert len(too_long) < 200  # the value is not echoed back whole


def test_a_cluster_without_a_cluster_label_is_refused_saying_so():
    message = refusal("a", "")
    assert message.startswith("cluster: the pack has no cluster label configured")
    assert parse_params(None, None, None).cluster is None
    assert parse_params(None, None, None, None, "a", ClusterScope("cluster")).cluster == "a"


@pytest.mark.parametrize("path", [PATH, SUMMARY_PATH, FLEET_PATH])
def test_the_routes_answer_a_bad_cluster_400_before_asking_prometheus(path):
    headers = {"Authorization": f"Bearer {ADMIN}"}
    url = path.format(execution_id="train-0001")
    with TestClient(create_app(config(""), {ADMIN: "*"})) as client:
        response = client.get(url, params={"cluster": "a"}, headers=headers)
        assert response.status_code == 400
        assert response.json()["error"].startswith("cluster: the pack has no cluster label configured")
    with TestClient(create_app(config("cluster"), {ADMIN: "*"})) as client:
        empty = client.get(url, params={"cluster": ""}, headers=headers)
        assert empty.status_code == 400 and empty.json()["error"].startswith("cluster: empty")
        twice = client.get(f"{url}?cluster=a&cluster=b", headers=headers)
        assert twice.status_code == 400 and twice.json() == {"error": "cluster: given 2 times; accepted: once"}


def parameter_names(document: dict, path: str) -> list[str]:
    return [p["name"] for p in document["paths"][path]["get"].get("parameters", [])]


def test_the_openapi_document_lists_cluster_and_its_409_only_with_a_cluster_label():
    plain, clustered = openapi_document(config("")), openapi_document(config("cluster"))
    assert plain == openapi_document()
    for path in (PATH, SUMMARY_PATH, FLEET_PATH):
        assert "cluster" not in parameter_names(plain, path)
        assert "cluster" in parameter_names(clustered, path)
    for path in (PATH, SUMMARY_PATH):
        # Every execution route answers 409 for an id two tenants hold; only with a cluster label for two clusters.
        assert "cluster" not in plain["paths"][path]["get"]["responses"]["409"]["description"]
        conflict = clustered["paths"][path]["get"]["responses"]["409"]
        assert "cluster" in conflict["description"]
        assert conflict["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Ambiguous"}
    assert "409" not in clustered["paths"][FLEET_PATH]["get"]["responses"]  # there the parameter only filters
    schemas = clustered["components"]["schemas"]
    assert {"clusters", "tenants"} <= set(schemas["Ambiguous"]["properties"])
    assert "cluster" in schemas["Metrics"]["required"] and "cluster" in schemas["Summary"]["required"]
    assert "cluster" not in plain["components"]["schemas"]["Metrics"]["properties"]


def test_an_executions_figures_carry_its_clusters_matcher_and_the_fleets_group_by_cluster():
    cfg = config("cluster")
    w = figures.Window("1h")
    one = figures.Scope(cfg, "train-0001", None, cluster="b")
    for query in [*figures.gpu_queries(cfg, one, w).values(), *figures.timed_queries(one, w).values()]:
        assert 'cluster="b"' in one.query(query)
    fleet = figures.Scope(cfg, None, None)
    grouped = fleet.query(figures.execution_queries(fleet, w)["reporting_at_end"])
    assert grouped.startswith("group by (cluster, execution_id)")
    plain = figures.Scope(config(""), None, None)
    assert plain.query(figures.execution_queries(plain, w)["reporting_at_end"]).startswith("group by (execution_id)")


def fleet_document(rows: list[dict]) -> dict:
    return {"since": "1d", "executions": len(rows), "gpuHoursBilled": 1.0, "gpuHoursWasted": 0.5, "top": rows}


def test_the_fleet_table_has_a_cluster_column_only_where_rows_name_one():
    row = {
        "executionId": "train-0001",
        "gpus": 2,
        "gpuHoursBilled": 1.0,
        "gpuHoursWasted": 0.5,
        "efficiencyPercent": 50.0,
        "verdicts": [],
    }
    plain = text.render_fleet(fleet_document([row])).splitlines()
    assert plain[2].startswith("execution ") and plain[3].startswith("train-0001 ")
    clustered = text.render_fleet(fleet_document([{**row, "cluster": "b"}])).splitlines()
    assert clustered[2].startswith("cluster ") and clustered[3].split()[:2] == ["b", "train-0001"]


def test_the_cluster_scope_adds_nothing_without_a_cluster_label():
    one = cluster_scope(config_from_mapping({}))
    assert not one.enabled and one.partition == () and one.matchers("eu-1") == () and one.labels("eu-1") == {}
    assert one.named("eu-1") == "" and one.of({"cluster": "eu-1"}) == ""
    expr = aggregate("sum", ["execution_id"], selector("x"))
    assert one.partitioned(expr) == expr


def test_the_cluster_scope_names_one_cluster_by_the_configured_label():
    dc = cluster_scope(config_from_mapping({"cluster_label": "dc"}))
    assert dc.enabled and dc.partition == ("dc",)
    assert promql.render(selector("x", *dc.matchers("eu-1"))) == 'x{dc="eu-1"}'
    assert dc.matchers(None) == ()  # no value: every cluster
    assert dc.labels("eu-1") == {"dc": "eu-1"} and dc.of({"dc": "eu-1", "cluster": "other"}) == "eu-1"
    assert promql.render(dc.partitioned(aggregate("sum", ["execution_id"], selector("x")))) == (
        "sum by (dc, execution_id) (x)"
    )
    assert dc.named("eu-1") == " in cluster eu-1"
    assert dc.phrase("The cluster") == "The cluster (dc label)"
