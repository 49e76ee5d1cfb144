"""One execution id held by a tenant and by GPUs without the tenant label, against a real Prometheus.

A Slurm or bare-metal partition's series carry no namespace; a Kubernetes Job's do. Where both use one id
(a Job named after a number), they are two executions. Before, the per-execution span counted tenants
without the empty one: the report over every tenant merged the two (three GPUs on two hosts), and the
archiver's record of the unlabelled execution held both, billing the tenant's GPU-hours twice beside
the tenant's own record. The unlabelled GPUs are now the tenant "" (`tenant=`, `--tenant ''`), which
PromQL's `namespace=""` selects.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gpu_execution_pack.api.app import FLEET_PATH, SUMMARY_PATH, create_app
from gpu_execution_pack.archive import reader
from gpu_execution_pack.archive.store import Store
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.query.params import RequestError
from gpu_execution_pack.query.prometheus import PrometheusClient
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.scenario.model import Execution, Gpu, Host, Scenario
from gpu_execution_pack.scenario.render import Renderer
from starlette.testclient import TestClient

from harness.prometheus import Prometheus, openmetrics

from .test_api import ADMIN, KEYS, RESEARCH
from .test_archive import one_pass
from .test_report_html import page_data

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("promtool_available")]
SHARED_ID = "20417"  # a Slurm job id, and a Kubernetes Job's name
UNLABELLED = "slurm"  # the namespace the scenario renders for the bare-metal GPUs, then removed from their series
RESEARCH_ALERT, BARE_ALERT = "GpuExecutionGpuUnderutilized", "GpuExecutionGpuStalled"
HOST_ALERT = "GpuExecutionHostMemoryHigh"  # fired on research's host: host series carry no tenant


def without_namespace(text: str, namespace: str) -> str:
    """OpenMetrics ``text`` with the label ``namespace="<namespace>"`` taken off every series that has it."""
    text = re.sub(rf'namespace="{namespace}",?', "", text)
    return text.replace(",}", "}").replace("{}", "")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory):
    """research's Job on host ha (one GPU) and a bare-metal job of the same id on hb (two GPUs), ended 15 minutes
    ago; each with an alert as the rules fire them (research's with its namespace, the bare one's without):
    (server, end)."""
    research = Execution(SHARED_ID, (Gpu("ha", 0),), ("compute",), namespace="research")
    bare = Execution(SHARED_ID, (Gpu("hb", 0), Gpu("hb", 1)), ("compute",), namespace=UNLABELLED)
    scenario = Scenario("a tenant and bare metal, one id", "", (Host("ha"), Host("hb")), (research, bare))
    end = int(time.time()) // 60 * 60 - 15 * 60
    start = end - scenario.window_minutes * 60
    text = without_namespace(openmetrics(Renderer(scenario, Config()).all_series(), start), UNLABELLED)
    assert f'namespace="{UNLABELLED}"' not in text and 'namespace="research"' in text
    fired = {
        RESEARCH_ALERT: f'execution_id="{SHARED_ID}",namespace="research"',
        BARE_ALERT: f'execution_id="{SHARED_ID}"',
        HOST_ALERT: f'execution_id="{SHARED_ID}",hostname="ha"',
    }
    alerts = "".join(
        f'ALERTS{{alertname="{name}",alertstate="firing",severity="warning",{labels}}} 1 {start + 60 * k}\n'
        for name, labels in fired.items()
        for k in range(5, 15)
    )
    server = Prometheus(tmp_path_factory.mktemp("unlabelled"))
    try:
        server.load_openmetrics(text.removesuffix("# EOF\n") + alerts + "# EOF\n", all_groups(Config()), start, end)
        yield server, end
    finally:
        server.stop()


def summary(client: TestClient, key: str, headers: dict[str, str] | None = None, **params: str):
    return client.get(
        SUMMARY_PATH.format(execution_id=SHARED_ID),
        params=params,
        headers={"Authorization": f"Bearer {key}", **(headers or {})},
    )


def hosts(doc: dict) -> list[str]:
    return sorted(h["hostname"] for h in doc["hosts"])


@pytest.mark.single_version  # our tenant scoping of the series Prometheus holds
def test_the_unlabelled_gpus_are_an_execution_of_their_own_beside_the_tenants(mixed):
    server, _ = mixed
    cfg = config_from_mapping({"api": {"prometheus_url": server.url}})
    with TestClient(create_app(cfg, KEYS)) as client:
        everyone = summary(client, ADMIN)
        unlabelled = summary(client, ADMIN, tenant="")
        tenant = summary(client, ADMIN, tenant="research")
        own = summary(client, RESEARCH)
        widened = summary(client, RESEARCH, tenant="")  # a tenant's key names its own tenant only
        pages = {
            "research": summary(client, RESEARCH, headers={"Accept": "text/html"}),
            "": summary(client, ADMIN, tenant="", headers={"Accept": "text/html"}),
        }
        fleet = client.get(FLEET_PATH, params={"since": "1d"}, headers={"Authorization": f"Bearer {ADMIN}"})
    # Over every tenant, the id is two executions: a 409 naming both, the unlabelled one as such.
    assert everyone.status_code == 409, everyone.text
    assert everyone.json()["tenants"] == ["", "research"], everyone.json()
    assert "none (GPUs without namespace" in everyone.json()["error"], everyone.json()
    for response in (unlabelled, tenant, own):
        assert response.status_code == 200, response.text
    assert widened.status_code == 400 and "tenant" in widened.json()["error"], widened.text
    # Each holds its own GPUs, hosts and alerts only.
    assert (unlabelled.json()["gpus"]["count"], hosts(unlabelled.json())) == (2, ["hb"])
    assert (tenant.json()["gpus"]["count"], hosts(tenant.json())) == (1, ["ha"])
    assert own.json() == tenant.json()
    # A host alert is the execution's on its own GPUs' hosts: research's host ha, not the unlabelled GPUs' hb.
    assert [a["alertname"] for a in unlabelled.json()["alerts"]] == [BARE_ALERT], unlabelled.json()["alerts"]
    assert [a["alertname"] for a in tenant.json()["alerts"]] == [RESEARCH_ALERT, HOST_ALERT], tenant.json()["alerts"]
    # The page draws the alerts the document lists (it drew the other executions' without a tenant label).
    for name, listed in (("research", own), ("", unlabelled)):
        assert pages[name].status_code == 200, pages[name].text
        drawn = sorted(a["name"] for a in page_data(pages[name].text)["alerts"])
        assert drawn == sorted(a["alertname"] for a in listed.json()["alerts"]), (name, drawn)
    # The fleet view over every tenant: two rows, the unlabelled one without a tenant, GPU-hours 2 to 1.
    assert fleet.status_code == 200, fleet.text
    rows = {row["tenant"]: row for row in fleet.json()["top"]}
    assert sorted(rows, key=str) == [None, "research"] and fleet.json()["executions"] == 2, fleet.json()
    assert (rows[None]["gpus"], rows["research"]["gpus"]) == (2, 1)
    billed = rows[None]["gpuHoursBilled"], rows["research"]["gpuHoursBilled"]
    assert billed[1] > 0 and abs(billed[0] - 2 * billed[1]) <= 0.01 * billed[0], billed


@pytest.mark.single_version  # our CLI's option over the endpoint's scoping
def test_report_names_the_unlabelled_gpus_with_an_empty_tenant(mixed, tmp_path: Path):
    server, _ = mixed
    config = tmp_path / "pack.yml"
    config.write_text(f"api: {{prometheus_url: {server.url}}}\n")
    report = [sys.executable, "-m", "gpu_execution_pack", "report", SHARED_ID, "-c", str(config), "--json"]
    both = subprocess.run(report, capture_output=True, text=True, timeout=120)
    assert both.returncode != 0 and "held by 2 tenants" in both.stderr and "--tenant ''" in both.stderr, both.stderr
    bare = subprocess.run([*report, "--tenant", ""], capture_output=True, text=True, timeout=120)
    assert bare.returncode == 0, bare.stderr
    assert '"count": 2' in bare.stdout and '"hostname": "ha"' not in bare.stdout, bare.stdout


@pytest.mark.single_version  # our archiver's records, whichever Prometheus answered
def test_the_archive_keeps_each_execution_once_and_asks_which_over_every_tenant(mixed, tmp_path: Path):
    server, end = mixed
    url = str(tmp_path / "archive.sqlite")
    cfg = config_from_mapping({"archive": {"url": url, "ended_after": "5m"}})
    store = Store.open(url)
    assert store is not None
    try:
        tally = one_pass(server.url, cfg, store, time.time() - end + 3 * 3600)
        assert tally.archived == 2, tally
        kept = {r.tenant: r for r in store.find(SHARED_ID)}
        # The batched pass (the default) lists each record's own alerts, as the endpoint and a pass of one do.
        alerts = {tenant: [a["alertname"] for a in r.document["alerts"]] for tenant, r in kept.items()}
        assert alerts == {"": [BARE_ALERT], "research": [RESEARCH_ALERT, HOST_ALERT]}, alerts
        assert sorted(kept) == ["", "research"], kept
        assert (kept[""].document["gpus"]["count"], hosts(kept[""].document)) == (2, ["hb"])
        assert (kept["research"].document["gpus"]["count"], hosts(kept["research"].document)) == (1, ["ha"])
        # Over every tenant the archive, like Prometheus, does not pick one of them.
        with pytest.raises(RequestError) as refused:
            reader.archived(cfg, store, SHARED_ID, None, None)
        assert refused.value.status == 409 and "held by 2 tenants" in str(refused.value)
        assert reader.archived(cfg, store, SHARED_ID, "", None) == kept[""]
    finally:
        store.close()


TELEMETRY_ALERT = "GpuExecutionTelemetryMissing"  # fired for the unlabelled GPU beside research's on ha


@pytest.fixture(scope="module")
def clustered(tmp_path_factory: pytest.TempPathFactory):
    """Two clusters in one Prometheus (``cluster_label: cluster``), ended 15 minutes ago: in cluster a, research's Job
    on GPU 0 of ha and the unlabelled GPUs of the same id on GPU 1 of ha and on hb, the one on ha with an alert that
    it stopped reporting (without a namespace, as the rules fire it for a GPU without one); in cluster b, research's
    Job of that id on three GPUs of its own hb: (server, cfg, end)."""
    cfg = config_from_mapping({"cluster_label": "cluster"})
    a = Scenario(
        "cluster a: a tenant and bare metal, one id, one host shared",
        "",
        (Host("ha"), Host("hb")),
        (
            Execution(SHARED_ID, (Gpu("ha", 0),), ("compute",), namespace="research"),
            Execution(SHARED_ID, (Gpu("ha", 1), Gpu("hb", 0)), ("compute",), namespace=UNLABELLED),
        ),
        cluster="a",
    )
    b_gpus = tuple(Gpu("hb", i) for i in range(3))
    b = Scenario(
        "cluster b: the tenant's", "", (Host("hb"),), (Execution(SHARED_ID, b_gpus, ("compute",)),), cluster="b"
    )
    end = int(time.time()) // 60 * 60 - 15 * 60
    start = end - max(s.window_minutes for s in (a, b)) * 60
    series = [s for scenario in (a, b) for s in Renderer(scenario, cfg).all_series()]
    text = without_namespace(openmetrics(series, start), UNLABELLED)
    labels = f'cluster="a",execution_id="{SHARED_ID}",hostname="ha",gpu="1",UUID="{Gpu("ha", 1).uuid}"'
    alerts = "".join(
        f'ALERTS{{alertname="{TELEMETRY_ALERT}",alertstate="firing",severity="warning",{labels}}} 1 {start + 60 * k}\n'
        for k in range(5, 15)
    )
    server = Prometheus(tmp_path_factory.mktemp("unlabelled-clusters"))
    try:
        server.load_openmetrics(text.removesuffix("# EOF\n") + alerts + "# EOF\n", all_groups(cfg), start, end)
        yield server, cfg, end
    finally:
        server.stop()


@pytest.fixture(scope="module")
def clustered_records(clustered, tmp_path_factory: pytest.TempPathFactory):
    """One archive pass (batched, the default) over ``clustered``: its records by cluster and tenant."""
    server, cfg, end = clustered
    url = str(tmp_path_factory.mktemp("clustered-archive") / "archive.sqlite")
    cfg = dataclasses.replace(cfg, archive=dataclasses.replace(cfg.archive, url=url, ended_after="5m"))
    store = Store.open(url)
    assert store is not None
    try:
        assert one_pass(server.url, cfg, store, time.time() - end + 3 * 3600).archived == 3
        return {(r.cluster, r.tenant): r for r in store.find(SHARED_ID)}
    finally:
        store.close()


@pytest.mark.single_version  # which source answers is our choice, made alike over either version's answers
def test_unnamed_the_cluster_prometheus_finds_is_the_one_whose_record_is_read(
    clustered, clustered_records, tmp_path: Path
):
    """The unlabelled GPUs' run of the id is in cluster a only, in Prometheus; the archive holds more of that run
    (its start gone with the retention) and an earlier run of the id in cluster b. ``report ID --tenant ''`` is then
    cluster a's run, as Prometheus finds it, and its record is the one that reaches what Prometheus holds: the
    report came from Prometheus (the record's run cut short) while the same report naming ``--cluster a`` came from
    the archive, because the archive was asked over every cluster (a 409, taken as no record)."""
    server, cfg, _ = clustered
    assert sorted(clustered_records) == [("a", ""), ("a", "research"), ("b", "research")], clustered_records
    bare = clustered_records["a", ""]
    assert (bare.document["gpus"]["count"], hosts(bare.document)) == (2, ["ha", "hb"])
    store = Store.open(str(tmp_path / "moved.sqlite"))
    assert store is not None
    store.put(dataclasses.replace(bare, start=bare.start - 3600))  # its first hour, gone from Prometheus since
    store.put(dataclasses.replace(bare, cluster="b", start=bare.start - 86400, end=bare.end - 86400))

    async def source(cluster: str | None) -> tuple[str, str]:
        client = PrometheusClient(server.url, 30)
        try:
            doc = await reader.execution_summary(cfg, client, store, SHARED_ID, tenant="", cluster=cluster)
            return doc["source"], doc["cluster"]
        finally:
            await client.close()

    try:
        assert asyncio.run(source("a")) == ("archive", "a")
        assert asyncio.run(source(None)) == ("archive", "a")
    finally:
        store.close()


@pytest.mark.single_version  # our attribution of the alerts Prometheus holds
def test_a_gpu_alert_of_the_unlabelled_gpus_is_not_the_tenants_on_the_host_they_share(clustered, clustered_records):
    """A GPU alert carries its GPU's tenant label, none for a GPU without it; the report of a tenant's execution reads
    the alerts without the label too (host alerts, execution-wide ones of older rules), and kept one with a host where
    its own GPUs were on that host. The unlabelled GPU on research's host ha stopped reporting: research's report, its
    page, its fleet row and its record listed that alert and judged its telemetry incomplete."""
    server, cfg, _ = clustered
    served = dataclasses.replace(cfg, api=dataclasses.replace(cfg.api, prometheus_url=server.url))
    with TestClient(create_app(served, KEYS)) as client:
        own = summary(client, RESEARCH, cluster="a")
        bare = summary(client, ADMIN, cluster="a", tenant="")
        page = summary(client, RESEARCH, headers={"Accept": "text/html"}, cluster="a")
        fleet = client.get(FLEET_PATH, params={"since": "1d"}, headers={"Authorization": f"Bearer {ADMIN}"})
    for response in (own, bare, page, fleet):
        assert response.status_code == 200, response.text
    assert (own.json()["gpus"]["count"], hosts(own.json())) == (1, ["ha"])
    kept = {tenant: clustered_records["a", tenant].document for tenant in ("", "research")}
    for doc in (own.json(), kept["research"]):
        assert doc["alerts"] == [] and "telemetry_incomplete" not in [v["code"] for v in doc["verdicts"]], doc
    assert page_data(page.text)["alerts"] == []
    for doc in (bare.json(), kept[""]):
        assert [a["alertname"] for a in doc["alerts"]] == [TELEMETRY_ALERT], doc["alerts"]
        assert "telemetry_incomplete" in [v["code"] for v in doc["verdicts"]], doc["verdicts"]
    rows = {(row["cluster"], row["tenant"]): row["verdicts"] for row in fleet.json()["top"]}
    assert "telemetry_incomplete" in rows["a", None] and "telemetry_incomplete" not in rows["a", "research"], rows
