"""Correct on real installs: host identity, tenant, legacy exporter fields, robust CPU.

The scenario library's real-install scenarios (``library.real_installs``) render the label sets
and quirks of real deployments; the promtool suites check every recorded series
on them. Each test here brings one of the nine known failures back and shows the suite catches it;
tests 10 and 11 bring back the merging of two machines whose short names agree (issue 24).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from gpu_execution_pack import catalog, testsuites
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.promql import aggregate, call, join, selector
from gpu_execution_pack.rules.hosts import HostIdentity
from gpu_execution_pack.rules.recording import Attribution, RuleBuilder
from gpu_execution_pack.scenario import library, oracle
from gpu_execution_pack.scenario.oracle import FRAMEBUFFER_SIGNALS

from .conftest import named, suite_failures

# Our suites catching a broken rule (single_version: what breaks is ours); the real Prometheus test runs on both.
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("promtool_available")]

INSTALLS = {s.hosts[0].name: s for s in library.real_installs()}
# What an exporter without framebuffer fields leaves unrecorded: the memory series and their rollups.
MEMORY_SERIES = (
    catalog.GPU_MEMORY_USED,
    catalog.GPU_MEMORY_TOTAL,
    catalog.GPU_MEMORY_UTILIZATION,
    catalog.EXECUTION_GPU_MEMORY_USED_SUM,
    catalog.EXECUTION_GPU_MEMORY_UTILIZATION_MAX,
)


def failures(tmp_path: Path, hosts: list[str], overrides: dict[str, Any] | None = None) -> str:
    """Run the recording suite of the named real-install scenarios; promtool's failure text ('' if it passes)."""
    cfg = config_from_mapping(overrides or {})
    return suite_failures([testsuites.Variant("installs", cfg, tuple(INSTALLS[h] for h in hosts))], tmp_path, amd=False)


@pytest.mark.single_version
def test_every_real_install_records_every_series_under_the_nodes_real_name():
    """Every real install is in the library the defaults' recording suite runs, but the DRA install, which label
    attribution cannot attribute (dcgm-exporter copies no pod label on its DRA path) and the kubernetes variant's
    runs: `gpu-execution-pack test` checks each of its recorded series, under the node's real name, on Prometheus 2
    and 3 (test_promtool_rules.test_the_test_command_builds_every_suite_and_promtool_passes_them)."""
    assert len(INSTALLS) >= 14
    default = library.default_suite()
    assert [name for name, s in INSTALLS.items() if s not in default] == ["dra1"]
    variants = {v.name: v for v in testsuites.default_variants()}
    assert variants["default"].scenarios == tuple(default)
    assert INSTALLS["dra1"] in variants["kubernetes"].scenarios


@pytest.mark.single_version
def test_1_the_upstream_helm_charts_pod_name_is_resolved_through_kube_state_metrics(tmp_path, monkeypatch):
    original = HostIdentity.host_candidates

    def without_pod_node(self, candidates):
        return original(self, {k: v for k, v in candidates.items() if k != "exporter pod's node"})

    monkeypatch.setattr(HostIdentity, "host_candidates", without_pod_node)
    out = failures(tmp_path, ["helm1"])
    assert 'hostname="dcgm-exporter-wwwjh"' in out and catalog.GPU_UTILIZATION.name in out


@pytest.mark.single_version
def test_2_a_relabelled_hostname_wins_over_the_exporters_own_hostname(tmp_path, monkeypatch):
    original = HostIdentity.host_candidates

    def hostname_last(self, candidates):
        # The old rules: a non-empty Hostname overwrote hostname, known node or not.
        hostname_label = candidates["Hostname label"].expr.lhs  # without its "names a known host" filter
        return original(self, {"Hostname first": hostname_label, **candidates})

    monkeypatch.setattr(HostIdentity, "host_candidates", hostname_last)
    out = failures(tmp_path, ["both1"])
    assert 'hostname="nvidia-dcgm-exporter-x7k2p"' in out


@pytest.mark.single_version
def test_3_short_names_and_fqdns_are_matched_on_both_sides(tmp_path):
    # gpuop4's FQDN is still matched through the shared address; bm2x's short label is not. An FQDN both
    # exporters give matches exactly, whatever the regex.
    out = failures(tmp_path, ["fqdn1.dc1.example.com", "bm2x"], {"node": {"host_regex": "(.+)"}})
    assert re.search(named('hostname="', "bm2x.dc1.example.com"), out)
    assert "fqdn1" not in out


def without_exact_names(monkeypatch) -> None:
    """The old host map: every name read through node.host_regex, none matched exactly first."""
    gpu_candidates, node_candidates = HostIdentity.host_candidates, HostIdentity.node_host_candidates

    def gpu(self, candidates):
        return gpu_candidates(self, {k: v for k, v in candidates.items() if not k.endswith("exactly")})

    def node(self, candidates):
        return node_candidates(self, {k: v for k, v in candidates.items() if k != "nodename exactly"})

    monkeypatch.setattr(HostIdentity, "host_candidates", gpu)
    monkeypatch.setattr(HostIdentity, "node_host_candidates", node)


@pytest.mark.single_version
def test_10_an_fqdn_both_exporters_give_is_matched_exactly_and_kept(tmp_path, monkeypatch):
    without_exact_names(monkeypatch)
    out = failures(tmp_path, ["fqdn1.dc1.example.com", "gpu-02.dc1.example.com", "ip-10-0-1-5.ec2.internal"])
    # Named by the short name, and the two machines of each pair merged into one host.
    for short in ("fqdn1", "gpu-02", "ip-10-0-1-5"):
        assert re.search(named('hostname="', short), out), short
    assert catalog.NODE_RAM_TOTAL.name in out


@pytest.mark.single_version
def test_11_a_short_name_two_machines_claim_joins_no_gpu(tmp_path, monkeypatch):
    # Without the collision check, both nodes are named by the short name and merged: each execution
    # reads the other machine's RAM and CPU.
    monkeypatch.setattr(HostIdentity, "host_name_collisions", lambda self: call("vector", 0).gt(1))
    out = failures(tmp_path, ["gpu-01.dc1.example.com"])
    assert 'hostname="gpu-01"' in out and catalog.NODE_RAM_TOTAL.name in out
    assert f'expr: "{catalog.NODE_HOST_COLLISIONS.name}"' in out


@pytest.mark.single_version
def test_12_kube_state_metrics_scraped_without_honor_labels_still_names_the_exporter_pods_node(tmp_path, monkeypatch):
    # The old join read kube_pod_info's namespace and pod as they come: behind a ServiceMonitor without
    # honorLabels those are kube-state-metrics' own on every series, so the pods side is not unique and Prometheus
    # refuses the join at every evaluation: no host map, hence no per-GPU series at all.
    original = HostIdentity.pod_nodes

    def honoured_labels_only(self):
        plain = catalog.KUBERNETES_JOIN_LABELS
        pods = aggregate("group", (*plain, catalog.POD_NODE_LABEL), selector(self.cfg.attribution.pod_info_metric))
        expr = original(self)
        return join(expr.lhs, "*", expr.matching, pods)

    assert failures(tmp_path, ["helm3"]) == ""
    monkeypatch.setattr(HostIdentity, "pod_nodes", honoured_labels_only)
    out = failures(tmp_path, ["helm3"])
    assert f"rule: {catalog.GPU_EXPORTER_HOST.name}, time: 0s, err: found duplicate series" in out, out
    assert "many-to-many matching not allowed" in out


@pytest.mark.single_version
def test_4a_without_a_host_label_the_shared_address_names_the_host(tmp_path, monkeypatch):
    original = HostIdentity.host_candidates

    def without_address(self, candidates):
        return original(self, {k: v for k, v in candidates.items() if k != "node_exporter at the same address"})

    monkeypatch.setattr(HostIdentity, "host_candidates", without_address)
    out = failures(tmp_path, ["nolabel1"])
    assert 'hostname="192.0.2.31"' in out and catalog.NODE_RAM_USED.name in out


@pytest.mark.single_version
def test_4b_a_placeholder_nodename_takes_the_name_of_the_gpu_exporter_beside_it(tmp_path):
    out = failures(tmp_path, ["badnode1"], {"node": {"placeholder_nodenames": "^$"}})
    assert 'hostname="localhost"' in out


@pytest.mark.single_version
def test_5_legacy_pcie_throughput_fields_are_read_in_kib_per_second(tmp_path):
    out = failures(tmp_path, ["bm2x"], {"dcgm": {"generations": ["4.8", "4.9", "4.10"]}})
    assert f'expr: "{catalog.GPU_PCIE_RX.name}"' in out and "got: nil" in out.replace("got:  nil", "got: nil")


@pytest.mark.single_version
def test_6_a_counter_back_jump_yields_no_rate_for_its_window(tmp_path, monkeypatch):
    # Without the ceiling on the recorded rate, irate() reads CPU 0 stepping back as a reset worth its
    # whole counter: the host reads as idle (clamped to 0) instead of having no value.
    monkeypatch.setattr(RuleBuilder, "implausible", lambda self, key: call("vector", 0).gt(1))
    out = failures(tmp_path, ["oldnode1"])
    assert catalog.NODE_CPU_UTILIZATION.name in out and "oldnode1" in out and "exp: nil" in out


@pytest.mark.single_version
def test_7_a_one_minute_scrape_still_answers_through_the_fallback_window(tmp_path):
    # A fallback window shorter than the scrape interval never holds a CPU's last two samples.
    out = failures(tmp_path, ["slow1"], {"rate_window": "30s", "rate_window_fallback": "30s"})
    assert catalog.NODE_CPU_UTILIZATION.name in out and "slow1" in out


@pytest.mark.single_version
def test_8_the_tenant_is_the_workloads_namespace_behind_a_service_monitor(tmp_path, monkeypatch):
    monkeypatch.setattr(Attribution, "label_aliases", property(lambda self: ()))
    out = failures(tmp_path, ["gpuop4", "gpuop3"])
    assert 'namespace="gpu-operator"' in out


@pytest.mark.single_version
def test_9_mig_enabled_h100s_without_framebuffer_fields_still_record_their_other_series(tmp_path, monkeypatch):
    # With the framebuffer use as the only sign of a reporting GPU, the target has no host labels and
    # no host map: every series of its GPUs is lost, not just the memory ones the exporter leaves out.
    monkeypatch.setattr(catalog.signals, "PRESENCE_SIGNALS", ("fb_used",))
    out = failures(tmp_path, ["h100mig1"])
    assert f'expr: "{catalog.GPU_EXPORTER_HOST.name}"' in out and 'hostname="h100mig1"' in out
    assert f'expr: "{catalog.GPU_TEMPERATURE.name}"' in out


def test_a_real_prometheus_records_every_api_series_of_every_install_under_the_nodes_name(tmp_path: Path):
    """End to end: the real installs side by side in one Prometheus, backfilled and recorded by the pack's rules."""
    import time

    from gpu_execution_pack.config import Config
    from gpu_execution_pack.scenario.model import Scenario

    from harness.prometheus import Prometheus

    installs = list(INSTALLS.values())
    together = Scenario(
        "real installs side by side",
        "",
        tuple(h for s in installs for h in s.hosts),
        tuple(e for s in installs for e in s.executions),
        unowned_gpus=tuple(g for s in installs for g in s.unowned_gpus),
    )
    end = int(time.time()) // 60 * 60 - 15 * 60
    server = Prometheus(tmp_path)
    try:
        start = server.load_scenario(together, Config(), end)
        # Every execution is running. The harness backfills every rule level at the same instants, as a
        # live group evaluates them in order, so no level reads a host map a step before it had a value.
        minute = 2.5
        at = start + minute * 60
        for execution in together.executions:
            host = execution.gpus[0].host
            match = f'{{execution_id="{execution.id}"}}'
            if together.host(host).copies_no_pod_labels:
                # dra1: dcgm-exporter copies no pod label onto a DRA claim's series, so under label attribution
                # nothing names its execution (the kubernetes variant's suite checks its series through
                # kube_pod_labels); its exporter's target is still placed on its host.
                assert not any(server.query(s.name + match, at) for s in catalog.API_SERIES), host
                assert server.query(f'{catalog.GPU_EXPORTER_HOST.name}{{hostname="{host}"}}', at), host
                continue
            no_memory = together.missing_on(host) >= FRAMEBUFFER_SIGNALS
            # The model's truth says which served GPU series the exporter's fields give (none of the
            # memory series without framebuffer fields, no engine activity without its field).
            truth = oracle.gpu_truth(together, execution, execution.gpus[0], minute) or {}
            for series in catalog.API_SERIES:
                result = server.query(series.name + match, at)
                if series.labels == catalog.GPU_LABELS and series not in truth:
                    assert not result, (host, series.name)
                    continue
                assert result, (host, series.name)
                assert {r["metric"]["hostname"] for r in result} == {host}, (series.name, result)
                if series.labels == catalog.GPU_LABELS:
                    assert len(result) == 2 and {r["metric"]["namespace"] for r in result} == {"team-a"}
            # An execution's mean activity exists where its GPUs publish the field (SM activity and
            # occupancy only with the DCP counters file).
            activity_input = dict(zip(catalog.EXECUTION_ACTIVITY_SERIES, catalog.GPU_ACTIVITY_SERIES, strict=True))
            for series in catalog.EXECUTION_SERIES:
                expected = not (no_memory and series in MEMORY_SERIES)
                if series in activity_input:
                    expected = activity_input[series] in truth
                assert bool(server.query(series.name + match, at)) == expected, (host, series.name)
            [gpus] = server.query(catalog.EXECUTION_GPU_COUNT.name + match, at)
            assert float(gpus["value"][1]) == 2
            # The host's own RAM, never another machine's (the machines of each pair differ in RAM).
            [ram] = server.query(catalog.NODE_RAM_TOTAL.name + match, at)
            assert float(ram["value"][1]) == together.host(host).ram_total_bytes, (host, ram)
    finally:
        server.stop()


CPU_EACH_MINUTE = {"node": {"cpu_rate_interval": "1m"}}


@pytest.mark.single_version
def test_6b_recorded_each_minute_a_counter_back_jump_blanks_the_rates_window_and_the_average(tmp_path, monkeypatch):
    # rate() over 4m sees the step back as a reset for 4m, and the host series average 2m of recorded
    # rates: no value from minute 7.25 to 13.25, checked at 7.5 and 12.5. Without the ceiling they read
    # the reset as idle time.
    assert failures(tmp_path / "kept", ["oldnode1"], CPU_EACH_MINUTE) == ""
    monkeypatch.setattr(RuleBuilder, "implausible", lambda self, key: call("vector", 0).gt(1))
    out = failures(tmp_path / "dropped", ["oldnode1"], CPU_EACH_MINUTE)
    assert catalog.NODE_CPU_UTILIZATION.name in out and "time: 12m30s" in out and "exp: nil" in out


@pytest.mark.single_version
def test_7b_recorded_more_often_than_scraped_the_rate_still_answers_through_the_fallback_window(tmp_path):
    # rate() over the interval alone (30s) never holds two samples of a node_exporter scraped every
    # minute: the rate's window is the fallback (4m) where that is longer.
    every_half_minute = {"node": {"cpu_rate_interval": "30s"}}
    assert failures(tmp_path / "kept", ["slow1"], every_half_minute) == ""
    out = failures(
        tmp_path / "short", ["slow1"], every_half_minute | {"rate_window": "30s", "rate_window_fallback": "30s"}
    )
    assert catalog.NODE_CPU_UTILIZATION.name in out and "slow1" in out


@pytest.mark.single_version  # our host_regex, whichever Prometheus evaluates it
def test_13_gpus_of_nodes_named_by_their_ip_are_not_one_host_named_by_its_first_number(tmp_path: Path):
    """Nodes named by their private IP (OKE's virtual nodes; dcgm-exporter's NODE_NAME, or `-r <ip>:5555`) whose
    nodename is another name, the exporter on the pod network: no node is found for their GPUs, which are named
    after host_regex. The default cut an IP to its first number: every GPU of 10.0.0.0/8 was on host "10"."""
    import time

    from gpu_execution_pack.config import Config
    from gpu_execution_pack.scenario.model import Host

    from harness.prometheus import Prometheus

    pair = library._pair(
        "nodes named by their IP, nodenames another name",
        Host("10.0.3.17", "4.9", nodename="gpu-17", dcgm_address="10.244.1.5"),
        Host("10.0.3.18", "4.9", nodename="gpu-18", dcgm_address="10.244.2.9"),
    )
    server = Prometheus(tmp_path)
    try:
        start = server.load_scenario(pair, Config(), int(time.time()) // 60 * 60 - 15 * 60)
        at = start + 150  # both executions run
        hosts = server.query(f"count by (hostname) ({catalog.GPU_UTILIZATION.name})", at)
    finally:
        server.stop()
    assert {r["metric"]["hostname"]: float(r["value"][1]) for r in hosts} == {"10.0.3.17": 2, "10.0.3.18": 2}
