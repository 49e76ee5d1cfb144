"""Kubernetes DRA (dcgm-exporter KUBERNETES_ENABLE_DRA) and virtual GPUs (KUBERNETES_VIRTUAL_GPUS) as the scenario
library renders them (no Prometheus).

The recorded series of the ``dra1`` install and the virtual-GPU pairs are checked in the kubernetes variant's
promtool suites (``library.pod_mapped_suite``); this pins that they carry what those paths publish there, so that
check means something, and that under label attribution they carry what dcgm-exporter publishes there too: the
pod's namespace, name and container, but none of the pod's own labels (its transformation/kubernetes.go copies
them on the device-plugin path only), so no execution id.
"""

from __future__ import annotations

import pytest
from gpu_execution_pack import testsuites
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.scenario import alerting, expected, library
from gpu_execution_pack.scenario.render import Renderer
from gpu_execution_pack.testsuites.recording import recording_suite

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


KUBERNETES = config_from_mapping({"attribution": {"mode": "kubernetes"}})
POD_MAPPED = {s.hosts[0].name: s for s in library.pod_mapped_suite()}


def test_the_pod_mapped_scenarios_are_the_dra_install_and_the_virtual_gpu_pairs():
    assert sorted(POD_MAPPED) == ["dra1", "h24", "h25"]
    assert all(h.dra_containers or h.virtual_gpus for s in POD_MAPPED.values() for h in s.hosts)


@pytest.mark.parametrize("host", sorted(POD_MAPPED))
def test_under_label_attribution_the_exporter_publishes_what_it_does_under_kubernetes_attribution(host: str):
    """What dcgm-exporter publishes does not depend on the pack's attribution mode: under label attribution the
    series of its DRA and virtual-GPU paths are the same label sets, the pod's namespace and name (exported_*
    behind the ServiceMonitor) and the claim's or the replica's labels, with no execution id."""
    scenario = POD_MAPPED[host]
    labelled = Renderer(scenario, Config()).dcgm_series()
    assert sorted(labelled, key=str) == sorted(Renderer(scenario, KUBERNETES).dcgm_series(), key=str)
    held = [dict(s.labels) for s in Renderer(scenario, Config()).dcgm_series() if "exported_pod" in dict(s.labels)]
    assert held and not any(Config().execution_label in labels for labels in held)
    assert all({"exported_namespace", "exported_pod"} <= labels.keys() for labels in held)
    assert all(labels.keys() & (DRA_LABELS | {"vgpu"}) for labels in held)
    # Under label attribution nothing names the executions: no kube_pod_labels, no mapping metric.
    assert list(Renderer(scenario, Config()).attribution_series()) == []


def test_a_device_plugin_host_keeps_the_pods_own_labels_under_label_attribution():
    labels = [dict(s.labels) for s in Renderer(library.time_sliced(), Config()).dcgm_series()]
    assert {x[Config().execution_label] for x in labels if Config().execution_label in x} == {
        "slice-0029",
        "slice-0030",
    }


@pytest.mark.parametrize("host", sorted(POD_MAPPED))
def test_the_oracles_refuse_to_predict_executions_label_attribution_cannot_see(host: str):
    scenario = POD_MAPPED[host]
    minute = scenario.executions[0].start_minute + 1
    for predict in (
        lambda cfg: expected.expected(scenario, minute, cfg),
        lambda cfg: expected.conditions(scenario, cfg, minute),
        lambda cfg: alerting.World(scenario, cfg),
        lambda cfg: recording_suite(cfg, [scenario]),
    ):
        with pytest.raises(ValueError, match=r"carry no execution id; test it under attribution\.mode: kubernetes"):
            predict(Config())
        predict(KUBERNETES)


def test_label_attribution_suites_hold_no_pod_mapped_scenario_and_the_kubernetes_variant_holds_them_all():
    """dra1 and the virtual-GPU pairs moved from the label-attribution variants to the kubernetes variant, its
    alert suite on the pair filling its GPU (the memory alerts naming the other pod)."""
    names = {s.name for s in POD_MAPPED.values()}
    variants = {v.name: v for v in testsuites.default_variants()}
    for v in variants.values():
        held = {s.name for s in v.scenarios} & names
        if v.config.attribution.mode == "label":
            assert held == set(), v.name
            assert not {s.name for s in v.alert_library()} & names if v.alerts else True, v.name
    assert {s.name for s in variants["kubernetes"].scenarios} >= names
    assert [s.name for s in variants["kubernetes"].alert_library()] == [library.virtual_gpus_full().name]
    for mode, wanted in (("label", set()), ("kubernetes", names)):
        [config] = testsuites.config_variants(config_from_mapping({"attribution": {"mode": mode}}))
        assert {s.name for s in config.scenarios} & names == wanted, mode
        full = {library.virtual_gpus_full().name} if mode == "kubernetes" else set()
        assert {s.name for s in config.alert_library()} & names == full, mode
