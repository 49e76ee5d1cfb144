"""``doctor``'s shared-GPUs check against a real Prometheus: nodes whose device plugin advertises more
nvidia.com/gpu than dcgm-exporter reports GPUs share them (time-slicing or MPS replicas), and where none of
their GPU series carries ``vgpu`` the exporter runs without KUBERNETES_VIRTUAL_GPUS, whose pod mapping labels
each GPU with one pod (dcgm-exporter's ``toDeviceToPod``): the other holders go unbilled, and doctor says so.

kube-state-metrics' capacity series is written as it publishes it (``kube_node_status_capacity{node, resource,
unit}``, the resource name sanitised), beside the scenario library's GPUs: a time-sliced pair (h21, one pod's
series per holder and no replica label), a virtual-GPU pair (h24, with ``vgpu``), a training job's hosts (h1, h2),
whose capacity is their GPU count, and the upstream Helm chart's node helm1.cluster.internal, whose dcgm-exporter
names its host by its own pod (no NODE_NAME: ``hostname="dcgm-exporter-wwwjh"``), sharing its GPUs without ``vgpu``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.demo.prometheus import placed_openmetrics
from gpu_execution_pack.scenario import library
from gpu_execution_pack.scenario.model import STEP_SECONDS
from gpu_execution_pack.scenario.render import RenderedSeries, Renderer

from harness.prometheus import Prometheus, free_port

from .test_doctor import doctor

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("promtool_available")]

TIME_SLICED, VIRTUAL = "a time-sliced pair", "a virtual-GPU pair with per-process values"
REPLICAS = 4  # the device plugin's time-slicing replicas per GPU on h21 and h24
HELM = "helm1"  # the upstream Helm chart's install: its node is helm1.cluster.internal
KUBE_STATE_TARGET = (("instance", "10.0.9.1:8080"), ("job", "kube-state-metrics"))


def capacity(node: str, gpus: int, steps: int) -> RenderedSeries:
    labels = (("node", node), ("resource", catalog.NVIDIA_GPU_RESOURCE), ("unit", "integer"), *KUBE_STATE_TARGET)
    return RenderedSeries(catalog.NODE_CAPACITY_METRIC, tuple(sorted(labels)), tuple(float(gpus) for _ in range(steps)))


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory):
    scenarios = [library.time_sliced(), library.virtual_gpus(), library.training_in("4.8"), library.real_install(HELM)]
    assert [s.name for s in scenarios[:2]] == [TIME_SLICED, VIRTUAL]
    cfg = config_from_mapping({"vendors": ["nvidia"]})
    end = int(time.time()) - 60
    placed = []  # each scenario's series, and kube-state-metrics' capacity of its hosts, up to a minute ago
    for scenario in scenarios:
        series = Renderer(scenario, cfg).all_series()
        for host in scenario.hosts:
            gpus = sum(g.host == host.name for g in scenario.all_gpus())
            shares = scenario.name in (TIME_SLICED, VIRTUAL) or host.name == HELM
            node = host.kube_node or host.name  # kube-state-metrics names the Kubernetes node
            series.append(capacity(node, gpus * REPLICAS if shares else gpus, scenario.steps + 1))
        placed.append((series, end - scenario.steps * STEP_SECONDS))
    server = Prometheus(tmp_path_factory.mktemp("shared-gpus"), port=free_port())
    server.load_openmetrics(placed_openmetrics(placed), [], min(start for _, start in placed), end)
    try:
        yield server
    finally:
        server.stop()


def shared_check(server: Prometheus, cfg: dict, tmp_path: Path) -> dict:
    run = doctor(server, cfg, tmp_path, "--json")
    assert run.stdout, run.stderr
    [item] = [c for c in json.loads(run.stdout)["checks"] if c["check"] == "shared GPUs"]
    return item


def test_shared_gpus_without_the_replica_label_are_named_with_the_fix(shared, tmp_path: Path):
    item = shared_check(shared, {"vendors": ["nvidia"]}, tmp_path)
    assert item["status"] == "warn", item
    # Three nodes share (h21, h24 and helm1's, advertising 4 per GPU); h21's and helm1's series never carry vgpu.
    # helm1's GPUs are placed on their node through their exporter pod's (kube_pod_info): its host label names
    # no node, and that node was not compared (the check passed it by).
    assert item["found"].startswith("3 nodes share their GPUs"), item
    assert "on 2 (h21, helm1.cluster.internal)" in item["found"] and "h24" not in item["found"], item
    assert "KUBERNETES_VIRTUAL_GPUS=true" in item["fix"] and "attribution.mode: kubernetes" in item["fix"], item


def test_with_a_mapping_metric_every_holder_is_named_and_it_passes(shared, tmp_path: Path):
    item = shared_check(shared, {"vendors": ["nvidia"], "attribution": {"mode": "mapping"}}, tmp_path)
    assert item["status"] == "pass", item
    assert "3 nodes share" in item["found"] and "a mapping metric" in item["found"], item
