"""AMD Instinct GPUs beside NVIDIA's in one Prometheus: ROCm device-metrics-exporter read into the same series.

A mixed fleet (``library.amd_fleet``, the scenario library's AMD hosts: MI300X whole and in CPX partitions,
an MI250X's two GCDs, three exporter releases with and without the ``amd_`` prefix) and an H100 under
dcgm-exporter 4.10 are backfilled into a real Prometheus with every rule of the defaults. The served
series must carry the NVIDIA names, units and identity labels; the report must give each AMD execution its
verdict and its energy within 2 %, and the H100's series must be what they are without AMD. With the
vendors pinned to NVIDIA, the rule files are the ones generated before AMD was added, byte for byte
(tests/golden/nvidia-rules). The promtool suites of ``gpu-execution-pack test`` check the same fleet's
per-GPU series in every attribution variant (testsuites.amd).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.build import archive_outputs, rule_outputs
from gpu_execution_pack.config import Config, config_from_mapping, load_config
from gpu_execution_pack.query.params import iso
from gpu_execution_pack.query.prometheus import PrometheusClient
from gpu_execution_pack.report import document
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.scenario import library
from gpu_execution_pack.scenario.amd import (
    HELM_V151,
    AmdExecution,
    AmdFleet,
    AmdGpu,
    AmdHost,
    AmdLoad,
    fleet_node_series,
    node_series,
    pod_label_series,
    unpublished,
)
from gpu_execution_pack.scenario.model import STEP_SECONDS
from gpu_execution_pack.scenario.render import RenderedSeries, Renderer

from harness.prometheus import Prometheus

from .conftest import REPO

GOLDEN = REPO / "tests/golden/nvidia-rules"
GOLDEN_CONFIG = "tests/golden/nvidia-rules.yml"  # what `make golden` generates them with
GIB_MIB = 1024
MI300X_MIB = 192 * GIB_MIB

# --- the fleet: the scenario library's AMD hosts, and an H100 ---------------------------------------
FLEET = library.amd_fleet()
EXECUTIONS = {e.id: e for e in FLEET.executions}
WHOLE = next(h for h in FLEET.hosts if h.name == "mi300a").gpus
RUN = library.AMD_RUN
MID_RUN_SECONDS = library.AMD_MID_RUN_MINUTE * 60  # when the tests read the served series
WANT_CODES = {
    "amd-healthy": ("healthy",),
    "amd-power": ("power_throttled",),
    "amd-idle": ("gpu_idle",),
    "amd-oom": ("gpu_oom",),
    # The GCD without power: its power is absent, and the report says so rather than judge from it.
    "amd-thermal": ("thermal_throttled", "telemetry_incomplete"),
    "nv-h100": ("healthy",),
}
H100_UUID = "GPU-5e3b1f2a-9c4d-4e6f-8a7b-0c1d2e3f4a5b"
H100_WATTS, H100_UTIL, H100_FB_USED, H100_FB_FREE = 550.0, 0.85, 60 * 1024**3, 19 * 1024**3


def h100_series(steps: int) -> list[RenderedSeries]:
    """An H100 under dcgm-exporter 4.10 (DCGM 4.7 names, base units), its job labelled by the exporter's pod mapping."""
    labels = {
        "DCGM_FI_SYSTEM_DRIVER_VERSION": "570.124.06",
        "UUID": H100_UUID,
        "device": "nvidia0",
        "gpu": "0",
        "hostname": "h100a",
        "instance": "h100a:9400",
        "job": "dcgm-exporter",
        "modelName": "NVIDIA H100 80GB HBM3",
        "pci_bus_id": "00000000:18:00.0",
    }
    running = [RUN[0] * 60 <= k * STEP_SECONDS < RUN[1] * 60 for k in range(steps + 1)]
    out = []
    values = {
        "DCGM_FI_DEV_GPU_UTIL_RATIO": H100_UTIL,
        "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO": 0.8,
        "DCGM_FI_PROF_TENSOR_UTIL_RATIO": 0.4,
        "DCGM_FI_PROF_DRAM_UTIL_RATIO": 0.5,
        "DCGM_FI_DEV_FB_USED_BYTES": float(H100_FB_USED),
        "DCGM_FI_DEV_FB_FREE_BYTES": float(H100_FB_FREE),
        "DCGM_FI_DEV_GPU_TEMP_CELSIUS": 65.0,
        "DCGM_FI_DEV_BOARD_POWER_WATTS": H100_WATTS,
        "DCGM_FI_DEV_POWER_MGMT_LIMIT": 700.0,
        "DCGM_FI_DEV_SM_CLOCK_HERTZ": 1_980_000_000.0,
        "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ": 2_619_000_000.0,
        "DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND": 2.5e9,
        "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND": 1.5e9,
        "DCGM_FI_DEV_XID_ERROR": 0.0,
    }
    for name, value in values.items():
        samples = tuple(value if r else None for r in running)
        tagged = tuple(sorted((labels | {"execution_id": "nv-h100"}).items()))
        out.append(RenderedSeries(name, tagged, samples))
    out.append(RenderedSeries("up", (("instance", "h100a:9400"), ("job", "dcgm-exporter")), (1.0,) * (steps + 1)))
    return out


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory):
    cfg = config_from_mapping({"rule_interval": f"{STEP_SECONDS}s", "derived_rule_interval": f"{STEP_SECONDS}s"})
    end = int(time.time()) // 60 * 60 - 15 * 60
    start = end - FLEET.minutes * 60
    series = FLEET.series() + fleet_node_series(FLEET) + h100_series(FLEET.steps) + node_series(["h100a"], FLEET.steps)
    server = Prometheus(tmp_path_factory.mktemp("amd"))
    try:
        server.load(series, all_groups(cfg), start, end)
        yield server, cfg, start
    finally:
        server.stop()


def served(server: Prometheus, series: catalog.Series, at: float, execution: str) -> list[dict]:
    return server.query(f'{series.name}{{execution_id="{execution}"}}', at)


def served_values(server: Prometheus, series: catalog.Series, at: float, execution: str) -> list[float]:
    """The execution's values of ``series`` at ``at``, in ascending order."""
    return sorted(float(r["value"][1]) for r in served(server, series, at, execution))


# --- tests ------------------------------------------------------------------------------------
def test_the_series_amd_leaves_absent_are_those_the_catalog_has_no_amd_source_for():
    """The AMD suite checks every served per-GPU series the AMD oracle has no value for is absent: that list
    (from the oracle, which is written from the exporter's own source) is the catalog's served series
    without an AMD source, so a new served series needs no edit to the AMD oracle either way."""
    absent = set(unpublished(FLEET, Config(), library.AMD_MID_RUN_MINUTE))
    no_source = {s for s in catalog.SERVABLE_SERIES if s.labels == catalog.GPU_LABELS and not catalog.amd_publishes(s)}
    assert absent == no_source
    assert {catalog.GPU_PCIE_RX, catalog.GPU_POWER_LIMIT, catalog.GPU_TENSOR_ACTIVE} <= absent
    assert catalog.GPU_POWER not in absent  # on the GPUs that publish power


def test_with_the_vendors_pinned_to_nvidia_the_rule_files_are_those_before_amd(monkeypatch: pytest.MonkeyPatch):
    """The goldens are the rule files with the vendors pinned to NVIDIA, as `make golden` writes them: written
    before AMD existed and unchanged by it but for the command that regenerates them."""
    monkeypatch.chdir(REPO)  # the config and the paths it gives are the repository's relative ones
    cfg = load_config(GOLDEN_CONFIG)
    assert cfg.vendors == ("nvidia",)
    # What `generate` writes: the rule files and, beside them, the archiver's systemd unit and Deployment.
    written = rule_outputs(cfg, GOLDEN_CONFIG) | archive_outputs(cfg, GOLDEN_CONFIG)
    ours = {Path(p): text for p, text in written.items()}
    golden = {p.relative_to(REPO): p.read_text() for p in sorted(GOLDEN.rglob("*")) if p.is_file()}
    assert ours.keys() == golden.keys()
    for path, text in golden.items():
        assert ours[path] == text, f"{path}: run `make golden` if the change is meant"


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_amd_gpus_record_the_served_series_in_nvidia_names_units_and_labels(loaded):
    server, _, start = loaded
    at = start + MID_RUN_SECONDS
    util = {
        tuple(sorted(r["metric"].items())): float(r["value"][1])
        for r in served(server, catalog.GPU_UTILIZATION, at, "amd-healthy")
    }
    assert len(util) == 1
    ((labels, value),) = util.items()
    labels = dict(labels)
    # gpu_uuid (enabled in the Helm chart's config) is the UUID; card_series names the model.
    assert labels == {
        "__name__": catalog.GPU_UTILIZATION.name,
        "execution_id": "amd-healthy",
        "hostname": "mi300a",
        "gpu": "0",
        "UUID": WHOLE[0].uuid,
        "modelName": "AMD Instinct MI300X",
    }
    assert value == pytest.approx(0.90)
    checks = {
        catalog.GPU_MEMORY_USED: 120 * 1024**3,
        catalog.GPU_MEMORY_TOTAL: 192 * 1024**3,
        catalog.GPU_TEMPERATURE: 70.0,
        catalog.GPU_POWER: 600.0,
        catalog.GPU_SM_CLOCK: 2100e6,  # the highest of the eight XCD clocks
        catalog.GPU_MEMORY_CLOCK: 1300e6,
        catalog.GPU_DRAM_ACTIVE: 0.30,
        catalog.GPU_POWER_VIOLATION: 0.0,
    }
    for series, want in checks.items():
        assert served_values(server, series, at, "amd-healthy") == [pytest.approx(want)], series.name
    for series in (catalog.GPU_POWER_LIMIT, catalog.GPU_PCIE_RX, catalog.GPU_PCIE_TX, catalog.GPU_TENSOR_ACTIVE):
        assert served(server, series, at, "amd-healthy") == [], f"{series.name}: AMD publishes none"
    assert served_values(server, catalog.GPU_POWER_VIOLATION, at, "amd-power") == [pytest.approx(0.6)]


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_mi300x_partitions_are_instances_of_their_gpu_with_its_device_wide_values(loaded):
    server, _, start = loaded
    at = start + MID_RUN_SECONDS
    rows = served(server, catalog.GPU_POWER, at, "amd-oom")
    # v1.4.1 without gpu_uuid or card_series: the serial is the GPU, the part number names its model; both
    # partitions read partition 0's power (partition 1 publishes 0).
    assert sorted((r["metric"]["GPU_I_ID"], r["metric"]["GPU_I_PROFILE"], float(r["value"][1])) for r in rows) == [
        ("0", "cpx", 520.0),
        ("1", "cpx", 520.0),
    ]
    assert {r["metric"]["UUID"] for r in rows} == {"PHX0B0000042"}
    assert {r["metric"]["modelName"] for r in rows} == {"AMD Instinct MI300X"}
    # Partition 1 has no gpu_gfx_activity: the mean of its XCCs' instantaneous busy (79 and 81).
    util = served_values(server, catalog.GPU_UTILIZATION, at, "amd-oom")
    assert util == [pytest.approx(0.80), pytest.approx(0.80)]
    # The GPU's power repeats on each of its eight CPX partitions: amd-oom's two are given 2 of 8 shares of it
    # (six are free), not the whole GPU's power, and not twice.
    assert served_values(server, catalog.GPU_POWER_ATTRIBUTED, at, "amd-oom") == [pytest.approx(65.0)] * 2
    assert served_values(server, catalog.EXECUTION_GPU_POWER_SUM, at, "amd-oom") == [pytest.approx(130.0)]
    assert served_values(server, catalog.GPU_TEMPERATURE, at, "amd-oom") == [72.0, 72.0]


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_an_mi250x_is_two_gpus_of_which_one_publishes_power(loaded):
    server, _, start = loaded
    at = start + MID_RUN_SECONDS
    util = served(server, catalog.GPU_UTILIZATION, at, "amd-thermal")
    # v1.3.1 without card_series: the part number is the model; each GCD its own GPU (its own serial).
    assert sorted((r["metric"]["gpu"], r["metric"]["UUID"], r["metric"]["modelName"]) for r in util) == [
        ("0", "PHX0C0000000", "102-D65209-0C"),
        ("1", "PHX0C0000001", "102-D65209-0C"),
    ]
    assert all("GPU_I_ID" not in r["metric"] for r in util)
    power = served(server, catalog.GPU_POWER, at, "amd-thermal")
    assert [(r["metric"]["gpu"], float(r["value"][1])) for r in power] == [("0", 480.0)]
    # MI200's edge temperature
    assert served_values(server, catalog.GPU_TEMPERATURE, at, "amd-thermal") == [92.0, 92.0]


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_the_h100_beside_them_records_what_it_records_without_amd(loaded):
    server, _, start = loaded
    at = start + MID_RUN_SECONDS
    rows = served(server, catalog.GPU_UTILIZATION, at, "nv-h100")
    assert [r["metric"] for r in rows] == [
        {
            "__name__": catalog.GPU_UTILIZATION.name,
            "execution_id": "nv-h100",
            "hostname": "h100a",
            "gpu": "0",
            "UUID": H100_UUID,
            "modelName": "NVIDIA H100 80GB HBM3",
        }
    ]
    assert float(rows[0]["value"][1]) == pytest.approx(H100_UTIL)
    for series, want in (
        (catalog.GPU_POWER, H100_WATTS),
        (catalog.GPU_POWER_LIMIT, 700.0),
        (catalog.GPU_MEMORY_TOTAL, float(H100_FB_USED + H100_FB_FREE)),
        (catalog.GPU_PCIE_RX, 2.5e9),
    ):
        assert served_values(server, series, at, "nv-h100") == [pytest.approx(want)]


def summary(server: Prometheus, cfg, execution_id: str, start: int) -> dict:
    async def run() -> dict:
        client = PrometheusClient(server.url, 30)
        try:
            # Up to just before the scrape after the last one: backfilled series read on after it.
            end = iso(start + RUN[1] * 60 - 1)
            return await document.execution_summary(cfg, client, execution_id, end=end)
        finally:
            await client.close()

    return asyncio.run(run())


def energy_kwh(execution_id: str) -> float:
    """The energy truth: each GPU's power over the run, an MI300 partition's in its share of the GPU (one of
    the partitions its mode makes, held or free; an MI250X publishes its card's power on one GCD)."""
    if execution_id == "nv-h100":
        return H100_WATTS * (RUN[1] - RUN[0]) * 60 / 3.6e6
    e = EXECUTIONS[execution_id]
    partitions = {"spx": 1, "cpx": 8}  # an MI300X's XCDs: CPX makes each of its eight a GPU
    shares = sum(1 / partitions[g.partition_mode] for g in e.gpus if g.publishes_power)
    return shares * e.load.power_watts * (RUN[1] - RUN[0]) * 60 / 3.6e6


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
@pytest.mark.parametrize("execution_id", list(WANT_CODES))
def test_the_report_gives_amd_executions_their_verdicts_and_energy(loaded, execution_id):
    server, cfg, start = loaded
    got = summary(server, cfg, execution_id, start)
    assert tuple(v["code"] for v in got["verdicts"]) == WANT_CODES[execution_id], got["verdicts"]
    # Within 2 %, beside the two steps the backfill's rule levels cost at either end.
    want = energy_kwh(execution_id)
    edge = 2 * 2 * STEP_SECONDS * 800 / 3.6e6
    assert got["power"]["energyKwh"] == pytest.approx(want, rel=0.02, abs=edge)


# --- Kubernetes, and the alerts ------------------------------------------------------------------
NVIDIA_K8S_HOST = "gpuop4"  # library.kubernetes_installs(): the GPU Operator 4.x, exported_namespace
K8S_GPUS = tuple(AmdGpu("mi300k", i, f"PHX0K{i:07d}", "MI300X", MI300X_MIB) for i in range(2))
K8S_RUN = AmdExecution(
    "amd-k8s",
    (K8S_GPUS[0],),
    AmdLoad(90.0, 186 * GIB_MIB, 92.0, 740.0, ppt_share=0.6),
    5,
    60,
    pod="amd-k8s-worker-0",
    namespace="research",
)
# Beside it, a job that holds the other GPU and barely uses it.
K8S_IDLE = AmdExecution(
    "amd-k8s-idle",
    (K8S_GPUS[1],),
    AmdLoad(1.0, 2 * GIB_MIB, 40.0, 150.0, umc_percent=0.0),
    1,
    60,
    pod="amd-k8s-idle-worker-0",
    namespace="research",
)
# The exporter's pod is evicted at minute 40 while the jobs still hold their GPUs.
K8S_FLEET = AmdFleet((AmdHost("mi300k", HELM_V151, K8S_GPUS, down_from_minute=40),), (K8S_RUN, K8S_IDLE), 60)


def k8s_suite(tmp_path: Path) -> None:
    """promtool over the defaults' rules in kubernetes mode: the AMD fleet, kube-state-metrics and node_exporter."""
    from gpu_execution_pack import promtool
    from gpu_execution_pack.build import rule_outputs
    from gpu_execution_pack.output import to_yaml
    from gpu_execution_pack.scenario.render import expand_notation

    cfg = config_from_mapping({"attribution": {"mode": "kubernetes"}, "rule_interval": "15s"})
    rules = {tmp_path / p.name: text for p, text in rule_outputs(cfg).items() if p.name.endswith(".rules.yml")}
    for path, text in rules.items():
        path.write_text(text)
    # One cluster of both vendors: the GPU Operator's dcgm-exporter on an H100 node beside the AMD one.
    nvidia = next(s for s in library.kubernetes_installs() if s.hosts[0].name == NVIDIA_K8S_HOST)
    series = [
        *K8S_FLEET.series(),
        *fleet_node_series(K8S_FLEET),
        *pod_label_series(K8S_FLEET, cfg),  # kube-state-metrics' labels of both jobs' pods
        *Renderer(nvidia, cfg).all_series(),
    ]
    nvidia_gpus = len(nvidia.executions[0].gpus)
    gpu = 'execution_id="amd-k8s", hostname="mi300k", gpu="0", modelName="AMD Instinct MI300X", namespace="research"'
    alerts = 'count by (alertname) (ALERTS{alertstate="firing", hostname="mi300k"})'
    tests = [
        {
            "interval": f"{STEP_SECONDS}s",
            "input_series": [{"series": s.selector, "values": expand_notation(s.samples)} for s in series],
            "promql_expr_test": [
                # The workload's pod and namespace, kept by the chart's honorLabels, join kube_pod_labels.
                {
                    "expr": f'count({catalog.GPU_UTILIZATION.name}{{{gpu}, UUID="{K8S_GPUS[0].uuid}"}})',
                    "eval_time": "20m",
                    "exp_samples": [{"labels": "{}", "value": 1}],
                },
                {
                    "expr": f'count({catalog.GPU_UTILIZATION.name}{{execution_id="{nvidia.executions[0].id}"}})',
                    "eval_time": "10m",
                    "exp_samples": [{"labels": "{}", "value": nvidia_gpus}],
                },
                # Hot, at the package power limit 60 % of the time, memory 97 % full: the three alerts.
                {
                    "expr": alerts,
                    "eval_time": "30m",
                    "exp_samples": [
                        {"labels": '{alertname="GpuExecutionGpuMemoryHigh"}', "value": 1},
                        {"labels": '{alertname="GpuExecutionPowerThrottling"}', "value": 1},
                        {"labels": '{alertname="GpuExecutionThermalThrottling"}', "value": 1},
                    ],
                },
                # The idle job: its GPU at 1 % for 30m.
                {
                    "expr": 'count(ALERTS{alertname="GpuExecutionGpuUnderutilized", alertstate="firing",'
                    ' execution_id="amd-k8s-idle"})',
                    "eval_time": "38m",
                    "exp_samples": [{"labels": "{}", "value": 1}],
                },
                # The exporter gone: its target is down and the GPUs the jobs hold no longer report.
                {
                    "expr": alerts,
                    "eval_time": "55m",
                    "exp_samples": [
                        {"labels": '{alertname="GpuExecutionDcgmExporterDown"}', "value": 1},
                        {"labels": '{alertname="GpuExecutionTelemetryMissing"}', "value": 2},
                    ],
                },
            ],
        }
    ]
    suite = tmp_path / "amd.test.yml"
    doc = {"rule_files": [str(p) for p in rules], "evaluation_interval": f"{STEP_SECONDS}s", "tests": tests}
    suite.write_text(to_yaml(doc))
    promtool.run(["test", "rules", str(suite)])


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_in_one_kubernetes_cluster_with_nvidia_amd_gpus_are_attributed_by_pod_and_alert(tmp_path: Path):
    k8s_suite(tmp_path)


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_the_fleet_dashboard_shows_both_vendors_by_model_and_filters_them(loaded):
    import json

    from gpu_execution_pack.dashboards import lint as dashboard_lint
    from gpu_execution_pack.dashboards import queries

    server, _, start = loaded
    fleet = json.loads((REPO / "dashboards/fleet.json").read_text())
    model = next(v for v in fleet["templating"]["list"] if v["name"] == queries.MODEL_VARIABLE)
    assert model["multi"] and model["includeAll"]
    expr = next(
        t["expr"]
        for p in dashboard_lint.panels(fleet)
        if p.get("title") == "Utilisation by GPU model"
        for t in p.get("targets", [])
    )
    at = start + MID_RUN_SECONDS

    def models(chosen: str) -> dict[str, float]:
        sent = dashboard_lint.substitute(expr, {queries.MODEL_VARIABLE: chosen})
        return {r["metric"][catalog.MODEL_LABEL]: float(r["value"][1]) for r in server.query(sent, at)}

    # Every model side by side at the default (All): NVIDIA's, AMD's named ones and a part number.
    assert models(".*") == {
        "NVIDIA H100 80GB HBM3": pytest.approx(H100_UTIL),
        # mi300a's three GPUs (90, 95, 1 %), and the two CPX partitions of mi300b (80 %), each once
        "AMD Instinct MI300X": pytest.approx((0.90 + 0.95 + 0.01 + 0.80 + 0.80) / 5),
        "102-D65209-0C": pytest.approx(0.85),
    }
    assert models("AMD Instinct MI300X") == {"AMD Instinct MI300X": pytest.approx(0.692)}
