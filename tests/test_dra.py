"""Kubernetes DRA (dcgm-exporter KUBERNETES_ENABLE_DRA) as the scenario library renders it (no Prometheus).

The recorded series of the ``dra1`` install are checked in the kubernetes variant's promtool suite
(``library.attribution_suite``); this pins that the install does carry what DRA publishes there, so
that check means something.
"""

from __future__ import annotations

from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.scenario import library
from gpu_execution_pack.scenario.render import Renderer

DRA_LABELS = {"dra_claim_name", "dra_claim_namespace", "dra_driver_name", "dra_pool_name", "dra_device_name"}


def test_each_gpu_series_comes_once_per_container_with_the_claims_labels():
    scenario = library.real_install("dra1")
    cfg = config_from_mapping({"attribution": {"mode": "kubernetes"}})
    series = [s for s in Renderer(scenario, cfg).all_series() if s.metric.startswith("DCGM_FI_DEV_GPU_UTIL")]
    held = [dict(s.labels) for s in series if "exported_pod" in dict(s.labels)]
    execution = scenario.executions[0]
    assert len(held) == len(execution.gpus) * len(scenario.hosts[0].dra_containers)
    assert {labels["exported_container"] for labels in held} == {"trainer", "data-loader"}
    assert all(labels.keys() >= DRA_LABELS for labels in held)
    assert {labels["dra_claim_namespace"] for labels in held} == {execution.namespace}
