"""Two clusters holding the same execution id and host names, one Prometheus: the ``cluster`` parameter.

With ``cluster_label`` set, every raw series carries the cluster's name and the rules are computed per
cluster. Cluster ``a`` runs the training scenario (train-0001 on four GPUs of h1 and h2, tenant
research); cluster ``b`` runs another train-0001 on two GPUs of its own h1, lower utilisation, for
tenant physics. An id that two clusters hold needs the parameter (409 without it); a key that sees it
in one cluster only does not; the fleet view keeps the two apart.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from urllib.parse import quote

import httpx
import pytest
from gpu_execution_pack import catalog, cli
from gpu_execution_pack.api import metrics
from gpu_execution_pack.api.app import FLEET_PATH, PATH, SUMMARY_PATH, create_app
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.query import execution
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.scenario import library, oracle
from gpu_execution_pack.scenario.model import Execution, Gpu, Host, Scenario
from gpu_execution_pack.scenario.phases import TRAINING
from gpu_execution_pack.scenario.render import Renderer
from starlette.testclient import TestClient

from harness.prometheus import Prometheus

from .test_api import ADMIN, KEYS, OTHER, RESEARCH

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("promtool_available")]

LABEL = "cluster"
ID = "train-0001"
MINUTE = 12.5  # train-0001's compute phase in both clusters
# The renderer puts each scenario's cluster on every raw series, as each cluster's Prometheus adds its
# external label.
CLUSTER_A = replace(library.training(), cluster="a")
CLUSTER_B = Scenario(
    "training, cluster b",
    "",
    (Host("h1"),),
    (Execution(ID, (Gpu("h1", 0), Gpu("h1", 1)), TRAINING, util_offsets=(-30, -40), namespace="physics"),),
    cluster="b",
)
SCENARIOS = {"a": CLUSTER_A, "b": CLUSTER_B}


def config(url: str = "http://127.0.0.1:9") -> object:
    return config_from_mapping({"cluster_label": LABEL, "api": {"prometheus_url": url}})


@pytest.fixture(scope="module")
def two_clusters(tmp_path_factory: pytest.TempPathFactory):
    """A Prometheus holding both clusters' raw series and the rules' results, ended 15 minutes ago."""
    cfg = config()
    end = int(time.time()) // 60 * 60 - 15 * 60
    start = end - max(s.window_minutes for s in SCENARIOS.values()) * 60
    series = [s for scenario in SCENARIOS.values() for s in Renderer(scenario, cfg).all_series()]
    server = Prometheus(tmp_path_factory.mktemp("clusters"))
    try:
        server.load(series, all_groups(cfg), start, end)
        yield server, start
    finally:
        server.stop()


@pytest.fixture(scope="module")
def api(two_clusters):
    server, start = two_clusters
    with TestClient(create_app(config(server.url), KEYS)) as client:
        yield client, start


def get(client: TestClient, path: str, key: str = ADMIN, **params) -> httpx.Response:
    url = path.format(execution_id=quote(ID, safe=""))
    return client.get(url, params=params, headers={"Authorization": f"Bearer {key}"})


def utilization_at(body: dict, ts: float) -> dict[str, float]:
    """GPU utilisation by UUID at ``ts``; every entry names its cluster."""
    out = {}
    for entry in body["series"]["gpuUtilizationPercent"]["entries"]:
        assert entry["labels"][LABEL] == body["cluster"]
        out[entry["labels"]["UUID"]] = next(v for t, v in entry["values"] if t == ts)
    return out


def truth(cluster: str) -> dict[str, float]:
    """The model's GPU utilisation (percent) of train-0001 in ``cluster`` at MINUTE, by UUID."""
    scenario = SCENARIOS[cluster]
    e = next(x for x in scenario.executions if x.id == ID)
    return {g.uuid: oracle.gpu_truth(scenario, e, g, MINUTE)[catalog.GPU_UTILIZATION] * 100 for g in e.gpus}


def test_an_id_two_clusters_hold_is_409_listing_them(api):
    client, _ = api
    for path in (PATH, SUMMARY_PATH):
        response = get(client, path)
        assert response.status_code == 409, response.text
        body = response.json()
        assert body["clusters"] == ["a", "b"]
        assert body["error"].startswith("cluster: ") and "a, b" in body["error"]


@pytest.mark.parametrize("cluster", ["a", "b"])
def test_the_cluster_parameter_reads_that_clusters_execution_only(api, cluster):
    client, start = api
    response = get(client, PATH, cluster=cluster)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["executionId"], body["cluster"]) == (ID, cluster)
    assert utilization_at(body, start + MINUTE * 60) == pytest.approx(truth(cluster))
    hosts = body["series"]["systemCpuUsagePercent"]["entries"]
    assert {e["labels"][LABEL] for e in hosts} == {cluster}
    assert {e["labels"]["hostname"] for e in hosts} == {h.name for h in SCENARIOS[cluster].hosts}


def test_the_streamed_answer_of_a_cluster_is_the_documents_bytes(api, monkeypatch):
    client, _ = api
    whole = get(client, PATH, cluster="b")
    monkeypatch.setattr(metrics, "STREAM_POINTS", 0)
    monkeypatch.setattr(execution, "CHUNK_POINTS", 50)
    streamed = get(client, PATH, cluster="b")
    assert streamed.status_code == 200 and "content-length" not in streamed.headers
    assert streamed.content == whole.content


def test_a_key_that_sees_the_id_in_one_cluster_needs_no_parameter(api):
    client, start = api
    for key, cluster in ((RESEARCH, "a"), (OTHER, "b")):
        response = get(client, PATH, key=key)
        assert response.status_code == 200, response.text
        assert utilization_at(response.json(), start + MINUTE * 60) == pytest.approx(truth(cluster))
        summary = get(client, SUMMARY_PATH, key=key)
        assert summary.status_code == 200, summary.text
        assert summary.json()["cluster"] == cluster
    # Tenant scoping holds within the cluster: research's key does not see cluster b's execution.
    assert get(client, PATH, key=RESEARCH, cluster="b").status_code == 404


def test_a_cluster_without_the_execution_is_404_and_a_bad_value_400(api):
    client, _ = api
    for path in (PATH, SUMMARY_PATH):
        missing = get(client, path, cluster="c")
        assert missing.status_code == 404 and missing.json() == {"error": f"execution {ID!r} not found"}
        empty = get(client, path, cluster="")
        assert empty.status_code == 400 and empty.json()["error"].startswith("cluster: empty")


def test_the_summary_reports_the_clusters_own_execution(api):
    client, _ = api
    a, b = (get(client, SUMMARY_PATH, cluster=c).json() for c in ("a", "b"))
    assert (a["cluster"], a["gpus"]["count"], b["cluster"], b["gpus"]["count"]) == ("a", 4, "b", 2)
    assert {h["hostname"] for h in a["hosts"]} == {"h1", "h2"} and [h["hostname"] for h in b["hosts"]] == ["h1"]
    # Cluster b's GPUs ran 30 and 40 points lower through the compute phase.
    assert b["utilization"]["gpuMeanPercent"] < a["utilization"]["gpuMeanPercent"] - 10


def test_the_fleet_view_keeps_each_clusters_execution_apart(api):
    client, _ = api
    response = client.get(FLEET_PATH, params={"since": "1d"}, headers={"Authorization": f"Bearer {ADMIN}"})
    assert response.status_code == 200, response.text
    rows = {(r["cluster"], r["executionId"]): r for r in response.json()["top"]}
    assert set(rows) == {("a", "train-0001"), ("a", "train-0002"), ("b", "train-0001")}
    assert (rows["a", ID]["gpus"], rows["b", ID]["gpus"]) == (4, 2)
    only_b = client.get(
        FLEET_PATH, params={"since": "1d", "cluster": "b"}, headers={"Authorization": f"Bearer {ADMIN}"}
    )
    assert [(r["cluster"], r["executionId"]) for r in only_b.json()["top"]] == [("b", ID)]
    assert only_b.json()["top"][0] == rows["b", ID]


def test_the_cli_takes_cluster(two_clusters, tmp_path, capsys):
    server, _ = two_clusters
    path = tmp_path / "config.yml"
    path.write_text(json.dumps({"cluster_label": LABEL}))
    common = ["--config", str(path), "--prometheus", server.url]
    assert cli.main(["query", ID, *common]) == 2
    assert "cluster: " in capsys.readouterr().err
    assert cli.main(["report", ID, "--json", "--cluster", "b", *common]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["cluster"], report["gpus"]["count"]) == ("b", 2)
    assert cli.main(["report", "--since", "1d", *common]) == 0
    assert "cluster" in capsys.readouterr().out.splitlines()[2]


def test_the_page_charts_the_clusters_own_execution(two_clusters, tmp_path):
    server, _ = two_clusters
    path = tmp_path / "config.yml"
    path.write_text(json.dumps({"cluster_label": LABEL}))
    common = ["--config", str(path), "--prometheus", server.url]
    lines = {}
    for cluster in ("a", "b"):
        page = tmp_path / f"{cluster}.html"
        assert cli.main(["report", ID, "--cluster", cluster, "--html", str(page), *common]) == 0
        data = json.loads(page.read_text().split('id="page-data">', 1)[1].split("</script>", 1)[0])
        lines[cluster] = {c["title"]: [line["label"] for line in c["lines"]] for c in data["charts"]}
    # Cluster a's four GPUs on h1 and h2, cluster b's two on its own h1: each page draws its own.
    assert lines["a"]["GPU utilisation"] == ["h1 GPU 0", "h1 GPU 1", "h2 GPU 0", "h2 GPU 1"]
    assert lines["b"]["GPU utilisation"] == ["h1 GPU 0", "h1 GPU 1"] and lines["b"]["Host CPU"] == ["h1"]


def test_the_figures_of_the_fleet_are_keyed_by_cluster(two_clusters):
    from gpu_execution_pack.query.prometheus import PrometheusClient
    from gpu_execution_pack.report import figures

    server, _ = two_clusters
    cfg = config(server.url)

    async def run() -> dict:
        client = PrometheusClient(server.url, 30)
        try:
            return await figures.collect(cfg, client, figures.Scope(cfg, None, None), 86400, time.time())
        finally:
            await client.close()

    found = asyncio.run(run())
    assert set(found) == {("a", "train-0001"), ("a", "train-0002"), ("b", "train-0001")}
    assert [len(found["a", ID].gpus), len(found["b", ID].gpus)] == [4, 2]
    assert found["b", ID].cluster == "b" and [h.hostname for h in found["b", ID].hosts] == ["h1"]
