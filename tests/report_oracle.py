"""What the execution report should say about a scenario's executions: the report tests' oracle.

``report_suite`` is the scenario they run: one execution per verdict.

Figures are computed from the scenario's own model on its sample grid, and each verdict's rule is
restated here over them (throttling through the alert oracle's own conditions), so a wrong
threshold, comparison or figure in ``gpu_execution_pack.report`` makes the tests fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.promql import parse_duration_seconds
from gpu_execution_pack.scenario import alerting, model
from gpu_execution_pack.scenario.library import (
    dcgm_lost,
    gap_job,
    host_oom,
    hot,
    idle_job,
    mig,
    oom_crash,
    power_capped,
    training,
    waste,
    xid,
)
from gpu_execution_pack.scenario.model import STEP_SECONDS, Execution, Scenario


def merged(name: str, scenarios: list[Scenario]) -> Scenario:
    """Several scenarios on one Prometheus: their hosts, executions and quirks side by side."""
    return Scenario(
        name,
        "; ".join(s.name for s in scenarios),
        tuple(h for s in scenarios for h in s.hosts),
        tuple(e for s in scenarios for e in s.executions),
        unowned_gpus=tuple(g for s in scenarios for g in s.unowned_gpus),
        missing=frozenset().union(*(s.missing for s in scenarios)),
        exported=frozenset().union(*(s.exported for s in scenarios)),
        xid_events=tuple(x for s in scenarios for x in s.xid_events),
    )


def report_suite() -> Scenario:
    """One execution per verdict of the report: idle, input- and I/O-bound, a leak ending in a crash, host RAM
    exhaustion, power capping, a hot GPU, a new Xid, a telemetry gap, healthy runs, MIG, two hosts."""
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
        ],
    )


GAP_MINUTES = 5  # samples missing for this long (Prometheus' lookback) make a gap


@dataclass(frozen=True)
class ExpectedReport:
    execution_id: str
    codes: tuple[str, ...]
    gpu_hours_billed: float
    gpu_hours_worked: float
    energy_kwh: float
    power_throttled_seconds: float  # the most of any GPU
    thermal_throttled_seconds: float


def report(scenario: Scenario, cfg: Config, execution: Execution) -> ExpectedReport:
    """The expected report of ``execution`` over its span."""
    a, r = cfg.alerts, cfg.report
    world = alerting.World(scenario, cfg)
    specs = {s.name: s for s in alerting.specs(cfg)}
    minutes = model.grid(execution.start_minute, execution.end_minute - STEP_SECONDS / 60)
    reporting = {m: world.reporting(execution, m) for m in minutes}
    span_samples = len(minutes)

    samples = {g: sum(1 for m in minutes if any(x is g for x, _ in reporting[m])) for g in execution.gpus}
    utils = [t[catalog.GPU_UTILIZATION] for m in minutes for _, t in reporting[m]]
    worked = sum(utils) * STEP_SECONDS / 3600
    billed = sum(samples.values()) * STEP_SECONDS / 3600
    per_gpu_util = [
        sum(t[catalog.GPU_UTILIZATION] for m in minutes for x, t in reporting[m] if x is g) / samples[g]
        for g in execution.gpus
        if samples[g]
    ]
    mean_util = sum(per_gpu_util) / len(per_gpu_util)

    # Energy: each physical GPU once, its power held for each sample it reported (none is known while it does not).
    devices = {g.device_key: g for g in execution.gpus}
    joules = sum(
        model.device_power(scenario, g, m) * STEP_SECONDS
        for g in devices.values()
        for m in minutes
        if world.alive(g.host, m)
    )

    def held(name: str) -> float:
        spec = specs[name]
        entities = [e for e in spec.entities(world) if e.execution is execution]
        return max(sum(spec.holds(world, e, m) for m in minutes) for e in entities) * STEP_SECONDS

    power_s, thermal_s = held("PowerThrottling"), held("ThermalThrottling")

    codes = []
    last = minutes[-1]
    if any(t.get(catalog.GPU_MEMORY_UTILIZATION, 0) >= a.gpu_memory_high.threshold for _, t in reporting[last]):
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
    low = [m for m in minutes if reporting[m] and _mean_util(reporting[m]) < a.gpu_underutilized.threshold]
    if mean_util < r.gpu_idle_threshold:
        codes.append("gpu_idle")
    elif len(low) * STEP_SECONDS >= parse_duration_seconds(a.gpu_underutilized.for_):
        cpus = [_cpu(world, execution, hosts, m) for m in low]
        cpu = sum(cpus) / len(cpus)
        saturated = cpu >= a.gpu_underutilized.cpu_saturated
        codes.append("gpu_underutilized_input_bound" if saturated else "gpu_underutilized_io_bound")
    if power_s >= parse_duration_seconds(a.power_throttling.for_):
        codes.append("power_throttled")
    if thermal_s >= parse_duration_seconds(a.thermal_throttling.for_):
        codes.append("thermal_throttled")
    lost = any(
        labels.get(catalog.EXECUTION_LABEL) == execution.id
        and labels["alertname"] == alerting.PREFIX + "TelemetryMissing"
        for labels, _ in alert_series(scenario, cfg)
    )
    if lost or any((span_samples - n) * STEP_SECONDS >= GAP_MINUTES * 60 for n in samples.values()):
        codes.append("telemetry_incomplete")
    if not codes:
        codes.append("healthy")
    return ExpectedReport(execution.id, tuple(codes), billed, worked, joules / 3_600_000, power_s, thermal_s)


def _mean_util(reporting: list) -> float:
    return sum(t[catalog.GPU_UTILIZATION] for _, t in reporting) / len(reporting)


def _cpu(world: alerting.World, execution: Execution, hosts: list[str], minute: float) -> float:
    """The busiest of the execution's hosts, as the report's max by execution reads it."""
    values = [h[catalog.NODE_CPU_UTILIZATION] for host in hosts if (h := world.host_truth(execution, host, minute))]
    return max(values) if values else 0.0


@cache
def alert_series(scenario: Scenario, cfg: Config) -> list[tuple[dict[str, str], list[bool]]]:
    """Prometheus' ALERTS series for the scenario as the alert oracle says they fire: labels, firing per step."""
    world = alerting.World(scenario, cfg)
    timelines = alerting.Timelines(alerting.specs(cfg), world)
    out = []
    for spec in timelines.specs:
        for entity in timelines.entities[spec.name]:
            firing = [timelines.firing(spec, entity, k) for k in range(scenario.steps + 1)]
            if any(firing):
                labels = dict(entity.labels) | {
                    "alertname": alerting.PREFIX + spec.name,
                    "alertstate": "firing",
                    "severity": spec.severity,
                }
                out.append((labels, firing))
    return out
