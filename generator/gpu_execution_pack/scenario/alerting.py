"""Which alerts a scenario should fire, and when: the alert tests' oracle.

Each alert's condition is restated here in Python over the scenario's truth (``model``), not
read from the rules, so a wrong threshold, comparison, label or description in
``gpu_execution_pack.rules.alerts`` makes the promtool tests fail. The recorded series are modelled as the
rules define them: a GPU's series exist while its execution runs and its host's exporter
answers; an execution's host and execution series exist while any of its GPUs report.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from gpu_execution_pack import catalog
from gpu_execution_pack.catalog import EXECUTION_LABEL, HOST_LABEL, Series
from gpu_execution_pack.config import Alerts, Config, PredictAlert, cluster_scope
from gpu_execution_pack.promql import parse_duration_seconds
from gpu_execution_pack.scenario import expected, model, oracle
from gpu_execution_pack.scenario.humanize import go_value, humanize, humanize_percentage
from gpu_execution_pack.scenario.model import STEP_SECONDS, Execution, Gpu, NameCollision, Scenario

PREFIX = "GpuExecution"
# The level, used and total series of each "runs out" alert pair.
# The device's fill, every holder's use counted (the execution's own on a GPU it holds alone).
GPU_MEMORY = (catalog.GPU_DEVICE_MEMORY_UTILIZATION, catalog.GPU_DEVICE_MEMORY_USED, catalog.GPU_MEMORY_TOTAL)
HOST_RAM = (catalog.NODE_RAM_UTILIZATION, catalog.NODE_RAM_USED, catalog.NODE_RAM_TOTAL)
STEP_MINUTES = STEP_SECONDS / 60


@dataclass(frozen=True)
class Entity:
    """One alert instance an alert could fire for: its labels, and what it is about."""

    labels: tuple[tuple[str, str], ...]
    execution: Execution | None = None
    gpu: Gpu | None = None
    host: str = ""


@dataclass(frozen=True)
class AlertSpec:
    """An alert as the oracle understands it."""

    name: str
    for_minutes: float
    severity: str
    entities: Callable[[World], list[Entity]]
    holds: Callable[[World, Entity, float], bool]
    describe: Callable[[World, Entity, float], str]


class World:
    """The recorded series of one scenario, as the rules should produce them."""

    def __init__(self, scenario: Scenario, cfg: Config):
        self.s = expected.attributable(scenario, cfg)
        self.cfg = cfg
        # Descriptions name the cluster where the config has a cluster label.
        self.in_cluster = cluster_scope(cfg).named(scenario.cluster)
        # The exporters descriptions name: dcgm-exporter alone where the vendors are pinned to NVIDIA.
        names = {"nvidia": "dcgm-exporter", "amd": "device-metrics-exporter"}
        self.exporters = " or ".join(names[v] for v in cfg.vendors)
        self.nvidia_only = cfg.vendors == ("nvidia",)
        self.gpu_truth = cache(self._gpu_truth)
        self.host_truth = cache(self._host_truth)

    def alive(self, host: str, minute: float) -> bool:
        outage = self.s.host(host).dcgm_outage
        return outage is None or not outage[0] <= minute < outage[1]

    def _gpu_truth(self, execution: Execution, gpu: Gpu, minute: float) -> dict[Series, float] | None:
        if not self.alive(gpu.host, minute):
            return None
        return oracle.gpu_truth(self.s, execution, gpu, minute)

    def reporting(self, execution: Execution, minute: float, host: str = "") -> list[tuple[Gpu, dict[Series, float]]]:
        """The execution's GPUs (on ``host`` if given) with recorded series at ``minute``."""
        out = []
        for g in execution.gpus:
            if host and g.host != host:
                continue
            truth = self.gpu_truth(execution, g, minute)
            if truth is not None:
                out.append((g, truth))
        return out

    def _host_truth(self, execution: Execution, host: str, minute: float) -> dict[Series, float] | None:
        if not self.reporting(execution, minute, host):
            return None
        return oracle.host_truth(self.s, self.s.host(host), minute)

    def samples(self, value: Callable[[float], float | None], minute: float, window: str) -> list[tuple[float, float]]:
        """(minute, value) of a series over a range selector ``[window]`` ending at ``minute``."""
        start = minute - parse_duration_seconds(window) / 60
        out = []
        for m in model.grid(max(start, 0), minute):
            v = value(m)
            if v is not None:
                out.append((m, v))
        return out


# --- Prometheus functions over samples ------------------------------------------------------


def predict_linear(samples: list[tuple[float, float]], at_minute: float, seconds: float) -> float | None:
    """predict_linear, as Prometheus 2.x computes it (least squares, intercept at the evaluation time)."""
    if len(samples) < 2:
        return None
    n = sum_x = sum_y = sum_xy = sum_x2 = 0.0
    for m, v in samples:
        x = (m - at_minute) * 60
        n += 1.0
        sum_y += v
        sum_x += x
        sum_xy += x * v
        sum_x2 += x * x
    cov_xy = sum_xy - sum_x * sum_y / n
    var_x = sum_x2 - sum_x * sum_x / n
    slope = cov_xy / var_x
    intercept = sum_y / n - slope * sum_x / n
    return intercept + slope * seconds


def changes(samples: list[tuple[float, float]]) -> int:
    return sum(1 for (_, a), (_, b) in itertools.pairwise(samples) if a != b)


def bit_set(value: float, bit: int) -> bool:
    return int(value) // bit % 2 == 1


# --- Entities -------------------------------------------------------------------------------


def gpu_entities(world: World) -> list[Entity]:
    return [
        Entity(tuple(sorted(expected.gpu_labels(e, g, world.cfg.api.tenant_label).items())), e, g)
        for e in world.s.executions
        for g in e.gpus
    ]


def host_entities(world: World) -> list[Entity]:
    return [
        Entity(((EXECUTION_LABEL, e.id), (HOST_LABEL, h)), e, host=h)
        for e in world.s.executions
        for h in sorted({g.host for g in e.gpus})
    ]


def execution_entities(world: World) -> list[Entity]:
    """An execution's alerts carry its tenant beside its id: the rollups they read keep it."""
    return [
        Entity(tuple(sorted({EXECUTION_LABEL: e.id, world.cfg.api.tenant_label: e.namespace}.items())), e)
        for e in world.s.executions
    ]


def target_entities(world: World) -> list[Entity]:
    """dcgm-exporter targets, named by the host they were last seen on (every scenario's were within the hour)."""
    return [
        Entity(((HOST_LABEL, h.name), ("instance", h.dcgm_instance), ("job", "dcgm-exporter")), host=h.name)
        for h in world.s.hosts
    ]


def gpu_name(entity: Entity) -> str:
    g = entity.gpu
    assert g is not None
    mig = f" (MIG instance {g.mig_instance})" if g.mig_instance else ""
    return f"GPU {g.index}{mig} ({g.model}, {g.uuid}) on {g.host}"


def truth_of(world: World, entity: Entity, minute: float) -> dict[Series, float] | None:
    assert entity.execution is not None and entity.gpu is not None
    return world.gpu_truth(entity.execution, entity.gpu, minute)


# --- The alerts, one family at a time ----------------------------------------------------------

# What an alert's oracle reads of an entity at a minute: a series' value, whether the condition
# holds, the description it fires with.
Getter = Callable[[World, Entity, float], float | None]
Condition = Callable[[World, Entity, float], bool]
Description = Callable[[World, Entity, float], str]


def minutes(duration: str) -> float:
    """A duration of the config in minutes."""
    return parse_duration_seconds(duration) / 60


def value(key: Series) -> Getter:
    """The GPU's recorded ``key``, or None where the GPU has no series then."""

    def get(world: World, entity: Entity, minute: float) -> float | None:
        truth = truth_of(world, entity, minute)
        return truth.get(key) if truth else None

    return get


def host_value(key: Series) -> Getter:
    """The execution's host's recorded ``key``, or None where the host has no series then."""

    def get(world: World, entity: Entity, minute: float) -> float | None:
        assert entity.execution is not None
        truth = world.host_truth(entity.execution, entity.host, minute)
        return truth[key] if truth else None

    return get


def at_least(get: Getter, threshold: float) -> Condition:
    """``get`` has a value, at ``threshold`` or above."""
    return lambda w, e, m: (v := get(w, e, m)) is not None and v >= threshold


def filling_up(
    series: tuple[Series, Series, Series], get: Callable[[Series], Getter], alert: PredictAlert
) -> Condition:
    """Used capacity predicted to reach the total within the horizon, the level high enough all the lookback."""
    ratio, used, total = (get(s) for s in series)
    horizon = int(parse_duration_seconds(alert.horizon))

    def holds(w: World, e: Entity, m: float) -> bool:
        if ratio(w, e, m) is None:
            return False
        ratios = w.samples(lambda t: ratio(w, e, t), m, alert.lookback)
        predicted = predict_linear(w.samples(lambda t: used(w, e, t), m, alert.lookback), m, horizon)
        return predicted is not None and predicted >= total(w, e, m) and min(v for _, v in ratios) >= alert.min_level

    return holds


def gpu_memory_specs(a: Alerts) -> list[AlertSpec]:
    """GpuMemoryHigh and GpuMemoryFillingUp: the framebuffer of one GPU."""
    high, pred = a.gpu_memory_high, a.gpu_memory_exhaustion
    ratio = value(catalog.GPU_DEVICE_MEMORY_UTILIZATION)

    def described(tail: str) -> Description:
        def describe(w: World, e: Entity, m: float) -> str:
            assert e.execution is not None and e.gpu is not None
            # An execution is its id and its tenant: a Job of the same name in another namespace is another holder.
            own = (e.execution.id, e.execution.namespace)
            others = sorted({(x.id, x.namespace) for x in model.holders(w.s, e.gpu, m)} - {own})
            names = [f"{i} ({w.cfg.api.tenant_label} {t})" if t else i for i, t in others]
            shared = f" Every execution holding the GPU counts: it is shared with {', '.join(names)}." if names else ""
            return (
                f"Execution {e.execution.id}{w.in_cluster} has used {humanize_percentage(ratio(w, e, m))} "
                f"of the memory of {gpu_name(e)}{tail}{shared}"
            )

        return describe

    return [
        AlertSpec(
            "GpuMemoryHigh",
            minutes(high.for_),
            high.severity,
            gpu_entities,
            at_least(ratio, high.threshold),
            described(f" for {high.for_} (threshold {high.threshold * 100:g}%)."),
        ),
        AlertSpec(
            "GpuMemoryFillingUp",
            minutes(pred.for_),
            pred.severity,
            gpu_entities,
            filling_up(GPU_MEMORY, value, pred),
            described(f", and at the trend of the last {pred.lookback} it runs out within {pred.horizon}."),
        ),
    ]


def host_memory_specs(a: Alerts) -> list[AlertSpec]:
    """HostMemoryHigh and HostMemoryFillingUp: the RAM of a host an execution runs on."""
    high, pred = a.host_memory_high, a.host_memory_exhaustion
    ratio = host_value(catalog.NODE_RAM_UTILIZATION)

    def described(tail: str) -> Description:
        def describe(w: World, e: Entity, m: float) -> str:
            assert e.execution is not None
            return (
                f"Host {e.host}{w.in_cluster}, where execution {e.execution.id} runs, has used "
                f"{humanize_percentage(ratio(w, e, m))} of its RAM{tail}"
            )

        return describe

    return [
        AlertSpec(
            "HostMemoryHigh",
            minutes(high.for_),
            high.severity,
            host_entities,
            at_least(ratio, high.threshold),
            described(f" for {high.for_} (threshold {high.threshold * 100:g}%)."),
        ),
        AlertSpec(
            "HostMemoryFillingUp",
            minutes(pred.for_),
            pred.severity,
            host_entities,
            filling_up(HOST_RAM, host_value, pred),
            described(f", and at the trend of the last {pred.lookback} its RAM runs out within {pred.horizon}."),
        ),
    ]


def held_down(truth: dict[Series, float], bits: tuple[int, ...], violation: Series, share: float) -> bool:
    """DCGM says the clocks are held down: a reason bit among ``bits`` set, or the ``violation`` share at ``share``."""
    r = truth.get(catalog.GPU_CLOCKS_EVENT_REASONS)
    v = truth.get(violation)
    return (r is not None and any(bit_set(r, b) for b in bits)) or (v is not None and v >= share)


def power_spec(a: Alerts) -> AlertSpec:
    """PowerThrottling: at the power limit with the clock below its peak, or DCGM's power reasons."""
    p = a.power_throttling

    def holds(w: World, e: Entity, m: float) -> bool:
        truth = truth_of(w, e, m)
        if truth is None:
            return False
        evidence = held_down(truth, (0x4, 0x80), catalog.GPU_POWER_VIOLATION, p.min_throttled_share)
        ratio = truth.get(catalog.GPU_POWER_TO_LIMIT)
        if ratio is None:
            return evidence
        clock_down = truth[catalog.GPU_SM_CLOCK] < truth[catalog.GPU_SM_CLOCK_PEAK]
        return ratio >= p.threshold and (clock_down or evidence)

    def describe(w: World, e: Entity, m: float) -> str:
        truth = truth_of(w, e, m)
        assert truth is not None and e.execution is not None
        drawing = ""
        if catalog.GPU_POWER_TO_LIMIT in truth:
            drawing = f", drawing {humanize_percentage(truth[catalog.GPU_POWER_TO_LIMIT])} of the limit"
        return (
            f"Execution {e.execution.id}{w.in_cluster}: {gpu_name(e)} has been held at its power limit for "
            f"{p.for_}{drawing}"
            f", SM clock at {humanize(truth[catalog.GPU_SM_CLOCK])}Hz"
            f" (peak {humanize(truth[catalog.GPU_SM_CLOCK_PEAK])}Hz)."
        )

    return AlertSpec("PowerThrottling", minutes(p.for_), p.severity, gpu_entities, holds, describe)


def thermal_spec(a: Alerts) -> AlertSpec:
    """ThermalThrottling: at the temperature threshold, or DCGM's thermal reasons."""
    t = a.thermal_throttling

    def holds(w: World, e: Entity, m: float) -> bool:
        truth = truth_of(w, e, m)
        if truth is None:
            return False
        hot = truth[catalog.GPU_TEMPERATURE] >= t.threshold_celsius
        return hot or held_down(truth, (0x20, 0x40), catalog.GPU_THERMAL_VIOLATION, t.min_throttled_share)

    def describe(w: World, e: Entity, m: float) -> str:
        truth = truth_of(w, e, m)
        assert truth is not None and e.execution is not None
        return (
            f"Execution {e.execution.id}{w.in_cluster}: {gpu_name(e)} has been hot or slowed down by temperature "
            f"for {t.for_}"
            f", at {humanize(truth[catalog.GPU_TEMPERATURE])} °C (threshold {t.threshold_celsius:g} °C)."
        )

    return AlertSpec("ThermalThrottling", minutes(t.for_), t.severity, gpu_entities, holds, describe)


def mean_utilization(w: World, e: Entity, m: float) -> float | None:
    """The execution's mean utilisation over the GPUs reporting at ``m``."""
    assert e.execution is not None
    utils = [truth[catalog.GPU_UTILIZATION] for _, truth in w.reporting(e.execution, m)]
    return sum(utils) / len(utils) if utils else None


def waste_spec(a: Alerts) -> AlertSpec:
    """GpuUnderutilized: the execution's mean utilisation under the threshold, and whether its CPU is why."""
    u = a.gpu_underutilized

    def describe(w: World, e: Entity, m: float) -> str:
        assert e.execution is not None
        gpus = len(w.reporting(e.execution, m))
        hosts = [w.host_truth(e.execution, h, m) for h in sorted({g.host for g in e.execution.gpus})]
        cpus = [h[catalog.NODE_CPU_UTILIZATION] for h in hosts if h]
        text = (
            f"Execution {e.execution.id}{w.in_cluster} has kept its {go_value(gpus)} GPUs at "
            f"{humanize_percentage(mean_utilization(w, e, m))} mean utilisation for {u.for_} "
            f"(threshold {u.threshold * 100:g}%). "
        )
        if not cpus:
            return text + "No host CPU data is recorded for it."
        cpu = max(cpus)
        if cpu >= u.cpu_saturated:
            return (
                text
                + f"Its host CPU is saturated ({humanize_percentage(cpu)}): "
                + "CPU-bound pre-processing is starving the GPUs."
            )
        return text + (
            f"Its host CPU is not saturated ({humanize_percentage(cpu)}): "
            "the GPUs are likely waiting on data loading or I/O."
        )

    def holds(w: World, e: Entity, m: float) -> bool:
        return (v := mean_utilization(w, e, m)) is not None and v < u.threshold

    return AlertSpec("GpuUnderutilized", minutes(u.for_), u.severity, execution_entities, holds, describe)


def stalled_spec(a: Alerts) -> AlertSpec:
    """GpuStalled: kernels resident (utilisation at the threshold) while the graphics engine idles.

    Only a GPU with engine activity can tell: without it (an exporter before 4.0, a profiling
    lock) the alert stays quiet. On MIG instances the utilisation is the engine activity, so the
    two never disagree and it never fires there.
    """
    s = a.gpu_stalled
    util, engine = value(catalog.GPU_UTILIZATION), value(catalog.GPU_GRAPHICS_ENGINE_ACTIVE)

    def holds(w: World, e: Entity, m: float) -> bool:
        u, g = util(w, e, m), engine(w, e, m)
        return u is not None and g is not None and u >= s.util_threshold and g < s.engine_threshold

    def describe(w: World, e: Entity, m: float) -> str:
        assert e.execution is not None
        u, g = util(w, e, m), engine(w, e, m)
        assert u is not None and g is not None
        return (
            f"Execution {e.execution.id}{w.in_cluster}: {gpu_name(e)} has had kernels resident "
            f"{humanize_percentage(u)} "
            f"of the time for {s.for_}, its graphics engine active only {humanize_percentage(g)} "
            f"(threshold {s.engine_threshold * 100:g}%): a hung collective or a spin-wait."
        )

    return AlertSpec("GpuStalled", minutes(s.for_), s.severity, gpu_entities, holds, describe)


def telemetry_specs(a: Alerts) -> list[AlertSpec]:
    """TelemetryMissing (a held GPU's series stopped) and DcgmExporterDown (its exporter's target is down)."""
    tm, down = a.telemetry_missing, a.dcgm_exporter_down

    def missing(w: World, e: Entity, m: float) -> bool:
        assert e.gpu is not None
        if w.alive(e.gpu.host, m):
            return False  # the GPU reports, labelled or not
        return bool(w.samples(lambda t_: 1.0 if truth_of(w, e, t_) else None, m, tm.window))

    def missing_described(w: World, e: Entity, m: float) -> str:
        assert e.execution is not None
        return (
            f"{gpu_name(e)}{w.in_cluster}, held by execution {e.execution.id}, has reported nothing to "
            f"{w.exporters} for {tm.for_}."
        )

    def down_described(w: World, e: Entity, m: float) -> str:
        target = "dcgm-exporter" if w.nvidia_only else f"GPU exporter ({w.exporters})"
        return (
            f"{target} target {e.host}:9400 of job dcgm-exporter{w.in_cluster} has been down for {down.for_}: "
            "executions on its GPUs have no GPU metrics."
        )

    return [
        AlertSpec("TelemetryMissing", minutes(tm.for_), tm.severity, gpu_entities, missing, missing_described),
        AlertSpec(
            "DcgmExporterDown",
            minutes(down.for_),
            down.severity,
            target_entities,
            lambda w, e, m: not w.alive(e.host, m),
            down_described,
        ),
    ]


def xid_spec(a: Alerts) -> AlertSpec:
    """XidError: the GPU's last Xid changed to a non-zero code within the window; it fires at once."""
    x = a.xid_errors
    xid = value(catalog.GPU_LAST_XID)

    def holds(w: World, e: Entity, m: float) -> bool:
        now = xid(w, e, m)
        return now is not None and now > 0 and changes(w.samples(lambda t_: xid(w, e, t_), m, x.window)) > 0

    def describe(w: World, e: Entity, m: float) -> str:
        assert e.execution is not None
        code = go_value(xid(w, e, m))
        return (
            f"Execution {e.execution.id}{w.in_cluster}: {gpu_name(e)} reported Xid {code} within the last {x.window}."
        )

    return AlertSpec("XidError", 0, x.severity, gpu_entities, holds, describe)


def collision_spec(cfg: Config) -> AlertSpec:
    """HostNameCollision: while two machines claim a name a dcgm-exporter gives (the scenario says when)."""
    a = cfg.alerts.host_name_collision

    def entities(w: World) -> list[Entity]:
        return [Entity(((HOST_LABEL, c.name),), host=c.name) for c in dict.fromkeys(w.s.host_name_collisions)]

    def collisions(w: World, e: Entity, m: float) -> list[NameCollision]:
        return [c for c in w.s.host_name_collisions if c.name == e.host and c.at(m)]

    def describe(w: World, e: Entity, m: float) -> str:
        [collision] = collisions(w, e, m)
        return (
            f"{go_value(collision.machines)} machines' node_exporters claim the host name {e.host}{w.in_cluster} "
            "(after "
            f"node.host_regex `{cfg.node.host_regex}`), which a dcgm-exporter gives: each node keeps its whole "
            "nodename, and a GPU naming its host that way finds it only by its scrape address."
        )

    return AlertSpec(
        "HostNameCollision", minutes(a.for_), a.severity, entities, lambda w, e, m: bool(collisions(w, e, m)), describe
    )


def specs(cfg: Config) -> list[AlertSpec]:
    """Every alert the pack ships, as the oracle states it, in the rules' order."""
    a = cfg.alerts
    return [
        *gpu_memory_specs(a),
        *host_memory_specs(a),
        power_spec(a),
        thermal_spec(a),
        waste_spec(a),
        stalled_spec(a),
        *telemetry_specs(a),
        xid_spec(a),
        collision_spec(cfg),
    ]


# --- Firing ---------------------------------------------------------------------------------


class Timelines:
    """Each alert's condition per entity on the sample grid, and when it fires."""

    MARGIN = 8  # steps of condition computed beyond the window on both sides, for shifted checks

    def __init__(self, specs_: list[AlertSpec], world: World):
        self.world = world
        self.specs = specs_
        self.entities = {spec.name: spec.entities(world) for spec in specs_}
        self.steps = world.s.steps
        self._held: dict[tuple[str, Entity], list[int]] = {}  # prefix sums of "condition holds"
        for spec in specs_:
            for entity in self.entities[spec.name]:
                sums = [0]
                for k in range(-self.MARGIN, self.steps + self.MARGIN + 1):
                    sums.append(sums[-1] + spec.holds(world, entity, k * STEP_MINUTES))
                self._held[spec.name, entity] = sums

    def holds(self, spec: AlertSpec, entity: Entity, step: int) -> bool:
        sums = self._held[spec.name, entity]
        i = step + self.MARGIN
        return sums[i + 1] - sums[i] == 1

    def firing(self, spec: AlertSpec, entity: Entity, step: int, shift: int = 0) -> bool:
        """The condition held at every evaluation of the last ``for`` (as shifted by ``shift`` steps)."""
        length = round(spec.for_minutes / STEP_MINUTES)
        if step - length < 0:
            return False
        sums = self._held[spec.name, entity]
        lo, hi = step - length + shift + self.MARGIN, step + shift + self.MARGIN
        return sums[hi + 1] - sums[lo] == length + 1

    def firing_at(self, spec: AlertSpec, step: int) -> list[Entity]:
        return [e for e in self.entities[spec.name] if self.firing(spec, e, step)]

    def robust(self, step: int, steps: int = 2) -> bool:
        """No alert's outcome at ``step`` changes if a condition starts or ends a few steps sooner or later."""
        return all(self.robust_for(spec, step, steps) for spec in self.specs)

    def robust_for(self, spec: AlertSpec, step: int, steps: int = 2) -> bool:
        """``robust``, for the alert of ``spec`` alone."""
        for entity in self.entities[spec.name]:
            if len({self.firing(spec, entity, step, d) for d in range(-steps, steps + 1)}) > 1:
                return False
        return True

    def transitions(self) -> list[int]:
        """Steps where some alert's condition starts or stops, or its ``for`` elapses."""
        out = set()
        for spec in self.specs:
            length = round(spec.for_minutes / STEP_MINUTES)
            for entity in self.entities[spec.name]:
                for k in range(self.steps + 1):
                    if self.holds(spec, entity, k) != self.holds(spec, entity, k - 1):
                        out.update({k, k + length})
        return sorted(k for k in out if 0 <= k <= self.steps)


def alert_series(scenario: Scenario, cfg: Config) -> list[tuple[dict[str, str], list[bool]]]:
    """Prometheus' ALERTS series for the scenario as this oracle says they fire: labels, firing per step (for a
    backfill, where promtool records no alerts: the report tests' and ``gpu-execution-pack demo``'s)."""
    world = World(scenario, cfg)
    timelines = Timelines(specs(cfg), world)
    out = []
    for spec in timelines.specs:
        for entity in timelines.entities[spec.name]:
            firing = [timelines.firing(spec, entity, k) for k in range(scenario.steps + 1)]
            if any(firing):
                labels = dict(entity.labels) | {
                    "alertname": PREFIX + spec.name,
                    "alertstate": "firing",
                    "severity": spec.severity,
                }
                out.append((labels, firing))
    return out
