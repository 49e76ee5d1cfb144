"""What the execution report should say about a scenario's executions: the report tests' oracle.

``report_suite`` is the scenario they run: one execution per verdict.

Figures are computed from the scenario's own model on its sample grid, and each verdict's rule is
restated here over them (throttling through the alert oracle's own conditions), so a wrong
threshold, comparison or figure in ``gpu_execution_pack.report`` makes the tests fail. Shares of
a GPU several executions hold are counted here from ``model.holders`` (which executions run on
it), never from the recorded share series.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.promql import parse_duration_seconds
from gpu_execution_pack.scenario import alerting, model, oracle
from gpu_execution_pack.scenario.library import (
    dcgm_lost,
    gap_job,
    host_oom,
    hot,
    idle_job,
    mig,
    no_profiling_fleet,
    oom_crash,
    power_capped,
    training,
    waste,
    work_suite,
    xid,
)
from gpu_execution_pack.scenario.model import STEP_SECONDS, Execution, Gpu, Host, Scenario

# The report suite's configuration: its backfill evaluates every rule every 15 s, and the config says so.
# Kubernetes attribution (kube_pod_labels joined on namespace and pod): the virtual-GPU pairs' pods are named through
# it only, dcgm-exporter copying no pod label onto the series of its virtual-GPU path (library.pod_mapped_suite).
CONFIG = {
    "rule_interval": f"{STEP_SECONDS}s",
    "derived_rule_interval": f"{STEP_SECONDS}s",
    "attribution": {"mode": "kubernetes"},
}


def merged(name: str, scenarios: list[Scenario]) -> Scenario:
    """Several scenarios on one Prometheus: their hosts, executions and quirks side by side.

    A scenario's missing fields go to its own hosts, so they stay missing there only (a MIG host without
    GPU_UTIL leaves the others' alone); the power limit, read scenario-wide, stays scenario-wide.
    """
    scenario_wide = frozenset({"power_limit_enforced", "power_limit_requested"})
    return Scenario(
        name,
        "; ".join(s.name for s in scenarios),
        tuple(replace(h, missing=h.missing | (s.missing - scenario_wide)) for s in scenarios for h in s.hosts),
        tuple(e for s in scenarios for e in s.executions),
        unowned_gpus=tuple(g for s in scenarios for g in s.unowned_gpus),
        missing=frozenset().union(*(s.missing & scenario_wide for s in scenarios)),
        exported=frozenset().union(*(s.exported for s in scenarios)),
        xid_events=tuple(x for s in scenarios for x in s.xid_events),
    )


def blind() -> Scenario:
    """An exporter without engine activity (before 4.0): 30 minutes at high utilisation cannot be told from a
    stall; 10 minutes are too short for a stall, so nothing is missing for that one."""
    host = Host("h23", missing=frozenset({"gr_engine_active"}))
    long = Execution("blind-0033", (Gpu("h23", 0),), ("compute",) * 3)
    short = Execution("blindshort-0034", (Gpu("h23", 1),), ("loading", "compute", "idle"))
    return Scenario("no engine activity", blind.__doc__ or "", (host,), (long, short))


def report_suite() -> Scenario:
    """One execution per verdict of the report: idle, input- and I/O-bound, a leak ending in a crash, host RAM
    exhaustion, power capping, a hot GPU, a new Xid, a telemetry gap, healthy runs, MIG, two hosts; a hung
    collective, FP32, MIG with activity only, time-sliced and MPS-shared GPUs, no engine activity."""
    return merged(
        "report verdicts",
        [
            training(),
            waste(),
            oom_crash(),
            host_oom(),
            power_capped(),
            hot(),
            xid(),
            dcgm_lost(),
            gap_job(),
            mig(),
            idle_job(),
            *work_suite(),
            blind(),
            no_profiling_fleet(),
        ],
    )


GAP_MINUTES = 5  # samples missing for this long (Prometheus' lookback) make a gap
# The activity figures, with the signal each reads in the model's truths.
ACTIVITY = {
    "graphicsEngineActivePercent": catalog.GPU_GRAPHICS_ENGINE_ACTIVE,
    "tensorActivePercent": catalog.GPU_TENSOR_ACTIVE,
    "dramActivePercent": catalog.GPU_DRAM_ACTIVE,
}


@dataclass(frozen=True)
class ExpectedReport:
    execution_id: str
    codes: tuple[str, ...]
    gpu_hours_billed: float
    gpu_hours_worked: float
    energy_kwh: float
    power_throttled_seconds: float  # the most of any GPU
    thermal_throttled_seconds: float
    activity_percent: dict[str, float]  # the execution's mean over its GPUs, by document key; absent left out


class Shares:
    """Each execution's share of a GPU at each minute: 1 over the executions running on it.

    ``reads_on`` minutes: a Prometheus without stale markers (a backfilled one) reads an execution's
    series on for its lookback after the execution ends, and counts it among the holders meanwhile.
    """

    def __init__(self, scenario: Scenario, reads_on: float = 0.0):
        self.s = scenario
        self.reads_on = reads_on

    def holders(self, gpu: Gpu, minute: float) -> int:
        return sum(
            1 for e in self.s.executions if gpu in e.gpus and e.start_minute <= minute < e.end_minute + self.reads_on
        )

    def of(self, gpu: Gpu, minute: float) -> float:
        return 1 / max(1, self.holders(gpu, minute))

    def of_work(self, execution: Execution, gpu: Gpu, minute: float) -> float:
        """``execution``'s share of the GPU's work and energy. Where the exporter publishes each pod's own
        utilisation (``Host.virtual_gpus``): its utilisation over the running holders' (equal where all idle);
        elsewhere every holder reads the GPU's and the share is the equal one."""
        if not self.s.host(gpu.host).virtual_gpus:
            return self.of(gpu, minute)
        utils = {e.id: own_util(e, gpu, minute) for e in model.holders(self.s, gpu, minute)}
        total = sum(utils.values())
        return utils[execution.id] / total if total else 1 / len(utils)

    def worked(self, execution: Execution, gpu: Gpu, minute: float, util: float) -> float:
        """The GPU's utilisation that is ``execution``'s work: its own where the exporter publishes it (the holders'
        together within the GPU's 100 %), else the GPU's ``util`` in its equal share."""
        if not self.s.host(gpu.host).virtual_gpus:
            return util * self.of(gpu, minute)
        total = sum(own_util(e, gpu, minute) for e in model.holders(self.s, gpu, minute))
        return util * min(1.0, 1 / total) if total else 0.0


def slice_share(scenario: Scenario, gpu: Gpu) -> float:
    """A MIG instance's compute slices (the ``<n>g`` of its profile) over those of every instance of its GPU the
    scenario has, held or free; 1 for a whole GPU."""
    if not gpu.mig_instance:
        return 1.0
    slices = {g: int(g.mig_profile.split("g.")[0]) for g in scenario.all_gpus() if g.device_key == gpu.device_key}
    return slices[gpu] / sum(slices.values())


def own_util(execution: Execution, gpu: Gpu, minute: float) -> float:
    """The utilisation, 0-1, that ``execution``'s phase at ``minute`` gives the GPU, from the phase table."""
    phase = execution.phase_at(minute)
    assert phase is not None
    return (phase.gpu.util_percent + execution.util_offset(gpu)) / 100


def report(scenario: Scenario, cfg: Config, execution: Execution, reads_on: float = 0.0) -> ExpectedReport:
    """The expected report of ``execution`` over its span (``reads_on``: see ``Shares``)."""
    a = cfg.alerts
    world = alerting.World(scenario, cfg)
    shares = Shares(scenario, reads_on)
    minutes = model.grid(execution.start_minute, execution.end_minute - STEP_SECONDS / 60)
    reporting = {m: world.reporting(execution, m) for m in minutes}
    span_samples = len(minutes)

    samples = {g: sum(1 for m in minutes if any(x is g for x, _ in reporting[m])) for g in execution.gpus}
    # GPU-hours: a MIG instance's in its share of the GPU (its slices over those of all the GPU's instances), as a
    # GPU cloud prices a slice; a 3g beside a free 4g of an A100 bills 3/7 of its hours.
    billed = sum(shares.of(g, m) * slice_share(scenario, g) for m in minutes for g, _ in reporting[m])
    billed *= STEP_SECONDS / 3600
    worked = sum(
        shares.worked(execution, g, m, t[catalog.GPU_UTILIZATION]) * slice_share(scenario, g)
        for m in minutes
        for g, t in reporting[m]
    )
    worked *= STEP_SECONDS / 3600

    # Energy: the GPU's power held for each sample it reported (none is known while it does not), a shared
    # one's in the execution's share of its work, a MIG instance's in its share of the GPU (its slices over
    # those of all the GPU's instances): two instances of one GPU it holds count its power once between them.
    joules = sum(
        oracle.device_power(scenario, g, m) * shares.of_work(execution, g, m) * slice_share(scenario, g) * STEP_SECONDS
        for g in execution.gpus
        for m in minutes
        if world.alive(g.host, m)
    )
    power_s, thermal_s = (
        held(world, cfg, execution, minutes, "PowerThrottling"),
        held(world, cfg, execution, minutes, "ThermalThrottling"),
    )

    codes = []
    last = minutes[-1]
    # The device's fill, every holder's use counted.
    if any(t.get(catalog.GPU_DEVICE_MEMORY_UTILIZATION, 0) >= a.gpu_memory_high.threshold for _, t in reporting[last]):
        codes.append("gpu_oom")
    hosts = sorted({g.host for g in execution.gpus})
    host_ratios = [
        h[catalog.NODE_RAM_UTILIZATION]
        for m in minutes
        for host in hosts
        if (h := world.host_truth(execution, host, m))
    ]
    if host_ratios and max(host_ratios) >= a.host_memory_high.threshold:
        codes.append("host_oom")
    xids = {g: [t[catalog.GPU_LAST_XID] for m in minutes for x, t in reporting[m] if x is g] for g in execution.gpus}
    if any(v and alerting.changes([(0, x) for x in v]) > 0 and v[-1] > 0 for v in xids.values()):
        codes.append("xid_errors")
    stalled = is_stalled(cfg, execution, reporting)
    if stalled:
        codes.append("gpu_stalled")
    idle = mean_utilization(execution, reporting, samples) < cfg.report.gpu_idle_threshold
    codes += utilization_codes(world, cfg, execution, reporting, idle)
    if power_s >= parse_duration_seconds(a.power_throttling.for_):
        codes.append("power_throttled")
    if thermal_s >= parse_duration_seconds(a.thermal_throttling.for_):
        codes.append("thermal_throttled")
    if not idle and not stalled and tensor_cores_unused(cfg, execution, reporting):
        codes.append("tensor_cores_unused")
    if any(shares.holders(g, m) > 1 for m in minutes for g, _ in reporting[m]):
        codes.append("gpu_shared")
    lost = any(
        labels.get(catalog.EXECUTION_LABEL) == execution.id
        and labels["alertname"] == alerting.PREFIX + "TelemetryMissing"
        for labels, _ in alert_series(scenario, cfg)
    )
    gap = any((span_samples - n) * STEP_SECONDS >= GAP_MINUTES * 60 for n in samples.values())
    if lost or gap:
        codes.append("telemetry_incomplete")
    # A field the GPU never publishes is no gap: the stall is not judged, and healthy still given.
    if stall_unknowable(cfg, execution, reporting):
        codes.append("not_judged")
    if not [c for c in codes if c != "not_judged"]:
        codes.append("healthy")
    return ExpectedReport(
        execution.id,
        tuple(codes),
        billed,
        worked,
        joules / 3_600_000,
        power_s,
        thermal_s,
        activity_means(execution, reporting),
    )


Reporting = dict[float, list[tuple[Gpu, dict]]]


def held(world: alerting.World, cfg: Config, execution: Execution, minutes: list[float], name: str) -> float:
    """The most time any of the execution's GPUs met the alert oracle's condition ``name``."""
    spec = next(s for s in alerting.specs(cfg) if s.name == name)
    entities = [e for e in spec.entities(world) if e.execution is execution]
    return max(sum(spec.holds(world, e, m) for m in minutes) for e in entities) * STEP_SECONDS


def per_gpu(execution: Execution, reporting: Reporting) -> dict[Gpu, list[dict]]:
    """Each GPU's truths at the samples it reported."""
    return {g: [t for ts in reporting.values() for x, t in ts if x is g] for g in execution.gpus}


def mean_utilization(execution: Execution, reporting: Reporting, samples: dict[Gpu, int]) -> float:
    """The mean over the GPUs of each one's mean utilisation."""
    means = [
        sum(t[catalog.GPU_UTILIZATION] for t in ts) / len(ts) for ts in per_gpu(execution, reporting).values() if ts
    ]
    return sum(means) / len(means)


def utilization_codes(
    world: alerting.World, cfg: Config, execution: Execution, reporting: Reporting, idle: bool
) -> list[str]:
    """gpu_idle, or one of the underutilisation verdicts, or neither."""
    a = cfg.alerts
    if idle:
        return ["gpu_idle"]
    low = [m for m, ts in reporting.items() if ts and _mean_util(ts) < a.gpu_underutilized.threshold]
    if len(low) * STEP_SECONDS < parse_duration_seconds(a.gpu_underutilized.for_):
        return []
    hosts = sorted({g.host for g in execution.gpus})
    cpus = [_cpu(world, execution, hosts, m) for m in low]
    saturated = sum(cpus) / len(cpus) >= a.gpu_underutilized.cpu_saturated
    return ["gpu_underutilized_input_bound" if saturated else "gpu_underutilized_io_bound"]


def is_stalled(cfg: Config, execution: Execution, reporting: Reporting) -> bool:
    """A GPU with utilisation at or above the stall's threshold and engine activity under its own for the
    stall's ``for`` in all."""
    s = cfg.alerts.gpu_stalled
    engine = catalog.GPU_GRAPHICS_ENGINE_ACTIVE
    return any(
        sum(
            1
            for t in ts
            if engine in t and t[catalog.GPU_UTILIZATION] >= s.util_threshold and t[engine] < s.engine_threshold
        )
        * STEP_SECONDS
        >= parse_duration_seconds(s.for_)
        for ts in per_gpu(execution, reporting).values()
    )


def tensor_cores_unused(cfg: Config, execution: Execution, reporting: Reporting) -> bool:
    """A GPU publishing tensor activity, busy with the tensor pipes idle for the configured share of the
    samples where it has engine activity."""
    r = cfg.report
    engine, tensor = catalog.GPU_GRAPHICS_ENGINE_ACTIVE, catalog.GPU_TENSOR_ACTIVE
    for ts in per_gpu(execution, reporting).values():
        judged = [t for t in ts if engine in t]
        if not judged or not any(tensor in t for t in ts):
            continue
        unused = [
            t for t in judged if t[engine] >= r.tensor_engine_busy and t.get(tensor, 1) < r.tensor_active_threshold
        ]
        if len(unused) / len(judged) >= r.tensor_unused_share:
            return True
    return False


def stall_unknowable(cfg: Config, execution: Execution, reporting: Reporting) -> bool:
    """A GPU without any engine activity whose utilisation was high for the stall's ``for``."""
    s = cfg.alerts.gpu_stalled
    engine = catalog.GPU_GRAPHICS_ENGINE_ACTIVE
    return any(
        ts
        and not any(engine in t for t in ts)
        and sum(1 for t in ts if t[catalog.GPU_UTILIZATION] >= s.util_threshold) * STEP_SECONDS
        >= parse_duration_seconds(s.for_)
        for ts in per_gpu(execution, reporting).values()
    )


def activity_means(execution: Execution, reporting: Reporting) -> dict[str, float]:
    """Each activity figure in percent: the mean over the GPUs having it of each one's mean."""
    out = {}
    for key, series in ACTIVITY.items():
        means = [
            sum(v) / len(v)
            for ts in per_gpu(execution, reporting).values()
            if (v := [t[series] for t in ts if series in t])
        ]
        if means:
            out[key] = sum(means) / len(means) * 100
    return out


def gpu_totals(scenario: Scenario, gpu: Gpu) -> tuple[float, float]:
    """A GPU's own GPU-hours held (by anyone) and energy in kWh over the scenario, from the model alone."""
    held_minutes = [
        m for m in model.grid(0, scenario.window_minutes - STEP_SECONDS / 60) if model.holders(scenario, gpu, m)
    ]
    hours = len(held_minutes) * STEP_SECONDS / 3600
    kwh = sum(oracle.device_power(scenario, gpu, m) * STEP_SECONDS for m in held_minutes) / 3_600_000
    return hours, kwh


def _mean_util(reporting: list) -> float:
    return sum(t[catalog.GPU_UTILIZATION] for _, t in reporting) / len(reporting)


def _cpu(world: alerting.World, execution: Execution, hosts: list[str], minute: float) -> float:
    """The busiest of the execution's hosts, as the report's max by execution reads it."""
    values = [h[catalog.NODE_CPU_UTILIZATION] for host in hosts if (h := world.host_truth(execution, host, minute))]
    return max(values) if values else 0.0


# Prometheus' ALERTS series for a scenario as the alert oracle says they fire (test_report backfills them; cached,
# since the oracle's report reads them for every execution).
alert_series = cache(alerting.alert_series)
