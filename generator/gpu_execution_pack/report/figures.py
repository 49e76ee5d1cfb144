"""The figures of an execution report, read from the recorded series with a few instant queries.

Every figure is an ``*_over_time`` of a recorded series over the span, evaluated at the span's
end, grouped by execution and GPU (or host), and by cluster where a cluster label is configured:
two clusters' executions of the same id are two executions. The same queries answer one execution (an
``execution_id`` matcher) and the fleet (none): one implementation behind ``report ID`` and
``report --since``. Times (GPU-hours, energy from power, seconds throttled and the like) are counted
from the recorded samples' own timestamps (``timeline``), read as raw samples over the span, never
from an interval the config names: the rules may run at another.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpu_execution_pack import catalog
from gpu_execution_pack.catalog import (
    ALERTS_METRIC,
    EXECUTION_LABEL,
    HOST_LABEL,
    MIG_INSTANCE_LABEL,
    UUID_LABEL,
    Series,
)
from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.promql import (
    Expr,
    Matcher,
    Paren,
    Range,
    Selector,
    aggregate,
    any_of,
    call,
    format_duration,
    ignoring,
    label_set,
    labelled,
    match,
    on,
    parse_duration_seconds,
    pinned,
    render,
    selector,
    transform,
)
from gpu_execution_pack.query.prometheus import PrometheusClient, PrometheusError, PrometheusUnreachable
from gpu_execution_pack.report import timeline
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.rules.groups import RecordingRule, RuleGroup

GPU_KEY = (EXECUTION_LABEL, *catalog.GPU_IDENTITY_LABELS)
HOST_KEY = (EXECUTION_LABEL, HOST_LABEL)
PROMETHEUS_DEFAULT_INTERVAL = "1m"  # Prometheus' global evaluation_interval when its config sets none
MAX_NAMED = 50  # executions a query names in a regex matcher, at most
MAX_WHOLE = 2**53  # the largest count a figure takes from Prometheus' float (a compatible API may answer 1e308)
# The GPU series whose absence a report names: without them a verdict cannot be given.
REQUIRED_GPU_SERIES: tuple[Series, ...] = (
    catalog.GPU_UTILIZATION,
    catalog.GPU_MEMORY_UTILIZATION,
    catalog.GPU_POWER,
    catalog.GPU_TEMPERATURE,
    catalog.GPU_POWER_LIMIT,
)


@dataclass
class GpuFigures:
    """One GPU (or MIG instance) of one execution over the span."""

    labels: dict[str, str]
    samples: int = 0  # utilisation samples: a GPU with none is not reported
    held_seconds: float = 0.0  # utilisation samples weighted by their timestamps (report.timeline)
    covered_seconds: float = 0.0  # of the time from its first to its last utilisation sample, how much it covers
    util_mean: float | None = None
    util_heavy_mean: float | None = None
    worked_seconds: float = 0.0  # utilisation integrated over time
    mem_peak_bytes: float | None = None
    mem_peak_ratio: float | None = None
    mem_last_ratio: float | None = None
    # The whole GPU's framebuffer, every holder's use counted: the execution's own unless the exporter
    # publishes per-pod values of a shared GPU (KUBERNETES_VIRTUAL_GPUS).
    device_mem_peak_bytes: float | None = None
    device_mem_last_ratio: float | None = None
    oom_seconds: float = 0.0  # time at or above the OOM threshold
    power_mean: float | None = None
    power_limit_mean: float | None = None
    power_throttled_seconds: float = 0.0
    thermal_throttled_seconds: float = 0.0
    temp_max: float | None = None
    xid_changes: float = 0.0
    xid_last: float | None = None
    energy_increase: float | None = None  # the energy counter's increase(), extrapolated by Prometheus
    energy_spread: float | None = None  # its highest less its lowest sample: the increase where it did not reset
    energy_resets: float = 0.0
    energy_samples: int = 0
    energy_span_seconds: float = 0.0  # from the counter's first sample to its last
    power_integral_joules: float | None = None  # board power integrated over time
    present: set[str] = field(default_factory=set)  # names of the REQUIRED_GPU_SERIES it has
    # What the engines did (None: the exporter publishes no such field for the GPU).
    engine_mean: float | None = None
    tensor_mean: float | None = None
    dram_mean: float | None = None
    stalled_seconds: float = 0.0  # time with the GpuStalled condition
    tensor_unused_seconds: float = 0.0  # time busy with the tensor pipes idle
    tensor_judged_seconds: float = 0.0  # time that condition was recorded (where engine activity exists)
    util_high_seconds: float = 0.0  # without engine activity only: time at or above the stall's utilisation
    # A GPU several executions hold at once: its share integrated and at its lowest, and the shared figures.
    share_seconds: float | None = None
    share_min: float | None = None
    worked_shared_seconds: float | None = None  # utilisation times share, integrated over time
    power_attributed_joules: float | None = None  # board power in the execution's share, integrated over time
    co_holders: list[str] | None = None  # the executions it was shared with (None: not looked up)
    # A MIG instance's (or MI300 partition's) share of its GPU, its mean over the span (``instance_shares``): its
    # time and work are billed in it. None: a whole GPU, or rules that record no share (older than the series).
    instance_share: float | None = None

    @property
    def shared(self) -> bool:
        """Whether another execution held the GPU at the same moment at some sample."""
        return self.share_min is not None and self.share_min < 1

    @property
    def own_values(self) -> bool:
        """Whether the exporter published the execution's own utilisation and memory on this shared GPU (the
        GPU's memory in use, every holder's, exceeded the execution's): work and energy were then split in
        proportion to the holders' utilisation, not equally."""
        device, own = self.device_mem_peak_bytes, self.mem_peak_bytes
        return self.shared and device is not None and own is not None and device > own

    @property
    def device_fill(self) -> float | None:
        """The GPU's memory in use at the end over its capacity, every holder's use counted."""
        return self.mem_last_ratio if self.device_mem_last_ratio is None else self.device_mem_last_ratio

    @property
    def gpu_fraction(self) -> float:
        """The fraction of a GPU this is, what each of its seconds counts in GPU-seconds: a GPU instance's share
        of its GPU, else 1."""
        return 1.0 if self.instance_share is None else self.instance_share

    @property
    def billed_seconds(self) -> float:
        """Time held in GPU-seconds, a shared GPU's counted in the execution's share at each sample, a GPU
        instance's in its share of the GPU."""
        held = self.share_seconds if self.shared and self.share_seconds is not None else self.held_seconds
        return held * self.gpu_fraction

    @property
    def worked(self) -> float:
        """Utilisation integrated over time (GPU-seconds), a shared GPU's in the execution's share at each sample, a
        GPU instance's in its share of the GPU."""
        if self.shared and self.worked_shared_seconds is not None:
            return self.worked_shared_seconds * self.gpu_fraction
        return self.worked_seconds * self.gpu_fraction

    @property
    def power_share(self) -> float:
        """The execution's share of the GPU's energy: its attributed power over the GPU's board power, summed
        over the same samples (so exact at each moment). Below 1 on a GPU shared with other executions and
        on a MIG instance or MI300 partition (its share of the GPU); 1 without both series."""
        if self.power_attributed_joules is None or not self.power_integral_joules:
            return 1.0
        return self.power_attributed_joules / self.power_integral_joules

    @property
    def attributed_power_integral(self) -> float | None:
        """Board power integrated over the span, a shared GPU's in the execution's share."""
        if self.power_integral_joules is None:
            return None
        return self.power_integral_joules * self.power_share


@dataclass
class HostFigures:
    hostname: str
    cpu_mean: float | None = None
    ram_peak_bytes: float | None = None
    ram_peak_ratio: float | None = None
    ram_total_bytes: float | None = None


@dataclass
class AlertFigures:
    alertname: str
    severity: str
    firing_seconds: float


@dataclass
class ExecutionFigures:
    """Everything the verdicts and the document read about one execution."""

    execution_id: str
    # Seconds between samples of the per-GPU and of the derived groups, as the config or Prometheus' global
    # interval says: the step of range queries and the weight of a series with a single sample only. Time
    # is counted from the samples' timestamps (report.timeline).
    gpu_interval: float
    derived_interval: float
    cluster: str = ""  # the cluster that holds it ("" without a cluster label)
    gpus: list[GpuFigures] = field(default_factory=list)
    hosts: list[HostFigures] = field(default_factory=list)
    alerts: list[AlertFigures] = field(default_factory=list)
    low_util_seconds: float = 0.0  # time with mean utilisation under the waste threshold
    cpu_during_low_util: float | None = None
    heavy_phase_start: float | None = None
    # A GPU series had a sample within Prometheus' lookback before the window's end: still running then.
    reporting_at_end: bool = False

    def energy_joules(self, gpu: GpuFigures) -> float | None:
        """The GPU's energy over the span from its counter; None without two samples of it.

        The counter's first and last samples span a little less than the GPU was held (the
        recorded series start a rule evaluation or two late), so its rise is scaled to the time
        held at the mean power between them: both times from the samples' own timestamps.
        """
        if gpu.energy_samples < 2 or gpu.energy_span_seconds <= 0:
            return None
        rise = gpu.energy_spread if gpu.energy_resets == 0 and gpu.energy_spread is not None else gpu.energy_increase
        if rise is None:
            return None
        # A GPU shared with other executions, or a GPU instance: the execution's share of the rise
        # (GpuFigures.power_share).
        return rise * gpu.held_seconds / gpu.energy_span_seconds * gpu.power_share

    @property
    def billed_seconds(self) -> float:
        return sum(g.billed_seconds for g in self.gpus)

    @property
    def worked_seconds(self) -> float:
        return sum(g.worked for g in self.gpus)


def any_execution(ids: Iterable[str]) -> Matcher:
    """A matcher for any of the executions ``ids``, each matched as it is spelled."""
    return match(EXECUTION_LABEL, "|".join(re.escape(eid) for eid in ids), "=~")


Key = tuple[str, str]  # an execution's cluster ("" without a cluster label) and id
TenantKey = tuple[str, str, str]  # and its tenant ("" where its series carry no tenant label)


class Scope:
    """Which series a report reads: one execution, a few named ones (``named``) or all, of one tenant or all,
    in one cluster (``cluster``) or all.

    With a cluster label configured, every query is computed per cluster (``query``) and every figure
    is keyed by it too (``gpu_key``, ``host_key``, ``key``).
    """

    def __init__(
        self,
        cfg: Config,
        execution_id: str | None,
        tenant: str | None,
        named: Iterable[str] = (),
        cluster: str | None = None,
    ):
        self.cfg = cfg
        self.tenant_value = tenant
        # The ids of the scope's executions that another tenant held too (``held_by_other_tenants``): an alert that
        # carries neither the tenant nor a host is then no more this tenant's than the other's (``own_alert``).
        self.shared_ids: frozenset[str] = frozenset()
        self.execution = [match(EXECUTION_LABEL, execution_id)] if execution_id else []
        if ids := sorted(named):
            self.execution = [any_execution(ids)]
        # None: every tenant; "": the GPUs without the tenant label only (a match of "" is one of an absent label).
        self.tenant = [] if tenant is None else [match(cfg.api.tenant_label, tenant)]
        self.cluster_value = cluster
        self.clusters = cluster_scope(cfg)
        self.cluster = self.clusters.matchers(cluster)
        partition = self.clusters.partition
        self.gpu_key, self.host_key = (*partition, *GPU_KEY), (*partition, *HOST_KEY)

    def key(self, metric: dict[str, str]) -> Key:
        """The execution a result belongs to: its cluster ("" without a cluster label) and id."""
        return (self.clusters.of(metric), metric.get(EXECUTION_LABEL, ""))

    def narrowed(self, ids: Iterable[str]) -> Scope:
        """This scope of the executions ``ids`` only, while few enough to name in a query (``MAX_NAMED``); else
        this scope as it is (every execution of it, the caller keeping those it asked for)."""
        named = set(ids)
        if len(named) > MAX_NAMED:
            return self
        return Scope(self.cfg, None, self.tenant_value, named, self.cluster_value)

    def tenant_key(self, metric: dict[str, str]) -> TenantKey:
        """``key`` and the result's tenant ("" where it carries no tenant label)."""
        return (*self.key(metric), metric.get(self.cfg.api.tenant_label, ""))

    @property
    def by_execution(self) -> tuple[str, ...]:
        """What a figure per execution is summed by: the id and the tenant, whose executions of one id are apart."""
        return (EXECUTION_LABEL, self.cfg.api.tenant_label)

    def query(self, expr: Expr) -> str:
        """``expr`` as PromQL, computed apart for each cluster where a cluster label is configured."""
        return render(self.clusters.partitioned(expr))

    def gpu(self, series: Series, *matchers: Matcher) -> Expr:
        """The scope's rows of a per-GPU series, those ``matchers`` select."""
        return series.select(*matchers, *self.execution, *self.cluster, *self.tenant)

    def host(self, series: Series) -> Expr:
        """Host series carry no tenant: they are kept for the hosts the tenant's GPUs are on."""
        expr = series.select(*self.execution, *self.cluster)
        if not self.tenant:
            return expr
        hosts = aggregate("group", HOST_KEY, self.gpu(catalog.GPU_PRESENCE))
        return expr.and_(hosts, on(HOST_KEY))

    def host_over(self, function: str, series: Series, window: str) -> Expr:
        """``function`` over ``window`` of a host series, kept for the hosts the tenant's GPUs were on in it."""
        expr = over(function, series.select(*self.execution, *self.cluster), window)
        if not self.tenant:
            return expr
        hosts = aggregate("group", HOST_KEY, over("count_over_time", self.gpu(catalog.GPU_PRESENCE), window))
        return expr.and_(hosts, on(HOST_KEY))

    def alerts(self) -> Expr:
        """Firing alerts that may be the executions': GPU and execution-wide alerts carry the tenant (the execution
        rollups keep it); host alerts, execution-wide ones of rules generated before that, and those of GPUs without
        the tenant label carry none. ``own_alert`` keeps those that are."""
        executions = self.execution or [labelled(EXECUTION_LABEL)]
        tenant = []
        if self.tenant_value is not None:
            tenant = [match(self.cfg.api.tenant_label, re.escape(self.tenant_value) + "|", "=~")]
        return selector(ALERTS_METRIC, match("alertstate", "firing"), *executions, *self.cluster, *tenant)

    def own_alert(self, metric: dict[str, str], hosts: set[str]) -> bool:
        """Whether a firing alert (its labels, ``metric``) of ``alerts`` is its execution's, whose GPUs (in this
        scope's tenant) were on ``hosts``. An alert on a host is the execution's on one of those hosts only: host
        series carry no tenant, and another tenant's execution of the id, or GPUs without the tenant label, may be on
        other hosts. A GPU's alert (it names the GPU's UUID) carries the GPU's tenant label as its series do: within a
        tenant it is the execution's in that tenant only, not where GPUs without the label share a host with the
        tenant's. One with neither a host nor the tenant is the execution's where no other tenant held the id."""
        tenant = metric.get(self.cfg.api.tenant_label, "")
        if self.tenant_value is not None and UUID_LABEL in metric and tenant != self.tenant_value:
            return False
        if host := metric.get(HOST_LABEL):
            return host in hosts
        if self.tenant_value is None or tenant == self.tenant_value:
            return True
        return metric.get(EXECUTION_LABEL, "") not in self.shared_ids


def span_range(seconds: float) -> str:
    """A span of ``seconds`` as a range that holds a sample ``seconds`` before its end as well as one at its end
    (at least a second long).

    Prometheus 3's ranges leave out their start (2's hold it), and a report's span runs from its first sample to
    its last, whole multiples of the rules' interval apart: a range of exactly the span lost the first sample on
    3.x. A millisecond more holds it on both."""
    whole, rest = divmod(max(1000, math.ceil(seconds * 1000) + 1), 1000)
    return format_duration(whole) + (f"{rest}ms" if rest else "")


def over(function: str, expr: Expr, window: str) -> Expr:
    return call(function, expr.range(window))


def last_of(scope: Scope, series: Series, window: str) -> Expr:
    """``series``' formula (over recorded per-GPU series) computed from each input's last sample in ``window``, the
    scope's rows of it: a ratio recorded less often than its inputs, as of their newest samples."""
    by_name = {s.name: s for s in catalog.ALL_SERIES}

    def last(node: Expr) -> Expr | None:
        if not isinstance(node, Selector):
            return None
        assert not node.matchers, node  # a formula's input is the whole series; the scope narrows it here
        return over("last_over_time", scope.gpu(by_name[node.metric]), window)

    return transform(series.formulas[0].expr, last)


async def global_interval(prometheus: PrometheusClient) -> float:
    """Prometheus' global evaluation_interval, from its configuration (status/config)."""
    body = await prometheus.status_config()
    try:
        config = yaml.safe_load(body) or {}
        value = (config.get("global") or {}).get("evaluation_interval") or PROMETHEUS_DEFAULT_INTERVAL
        return parse_duration_seconds(str(value))
    except (yaml.YAMLError, ValueError, AttributeError):
        raise PrometheusError(502, "Prometheus' configuration has no readable global evaluation_interval") from None


async def configured_intervals(cfg: Config, prometheus: PrometheusClient) -> tuple[float, float]:
    """Seconds between samples of the per-GPU and of the derived groups as the config says; Prometheus' own where
    the config is empty."""
    found: float | None = None

    async def of(value: str) -> float:
        nonlocal found
        if value:
            return parse_duration_seconds(value)
        if found is None:
            try:
                found = await global_interval(prometheus)
            except PrometheusUnreachable:  # no server at all: nothing the config's intervals would mend
                raise
            except PrometheusError as err:
                if err.status == 504:
                    raise
                # Short: an answer's message is bounded (what Prometheus said comes first).
                advice = (
                    "set rule_interval and derived_rule_interval where the configuration is not served (Thanos, Mimir)"
                )
                raise PrometheusError(502, f"{err.public}; {advice}", err.url, hint=err.hint) from None
        return found

    return await of(cfg.rule_interval), await of(cfg.derived_interval)


@dataclass(frozen=True)
class Intervals:
    """The per-GPU and derived groups' intervals (the deployed rules' where Prometheus serves them, else the
    config's): only the step of range queries and the weight of a lone sample, never a multiplier of counts.
    ``note``: one line where the config and the deployed rules disagree."""

    gpu: float
    derived: float
    note: str = ""

    @property
    def pair(self) -> tuple[float, float]:
        return self.gpu, self.derived


def interval_note(groups: list[RuleGroup], deployed: dict[str, float], unset: float) -> str:
    """Where the pack's groups Prometheus loaded (``deployed``: interval by group name) run at another interval
    than the config names (``unset``: the seconds of Prometheus' global interval, where it names none), one line
    saying so."""
    differ = []
    for group in groups:
        named = parse_duration_seconds(group.interval) if group.interval else unset
        if group.name in deployed and abs(named - deployed[group.name]) > 1e-6:
            running, config = format_duration(deployed[group.name]), format_duration(named)
            differ.append(f"{group.name} every {running} (config: {config})")
    if not differ:
        return ""
    return (
        "The deployed rules' intervals differ from the config's (rule_interval, derived_rule_interval): "
        + "; ".join(differ)
        + ". Time is counted from the samples' timestamps, so the figures hold; align the config with the rules."
    )


async def intervals(cfg: Config, prometheus: PrometheusClient) -> Intervals:
    """The groups' intervals, and a note where the config and the loaded rules disagree (``Intervals``)."""
    configured = await configured_intervals(cfg, prometheus)
    deployed: dict[str, float] = {}
    for g in await prometheus.rule_groups():
        if isinstance(g.get("name"), str) and isinstance(g.get("interval"), int | float) and g["interval"] > 0:
            deployed[g["name"]] = float(g["interval"])
    groups = all_groups(cfg)
    # A group without an interval of its own runs at the global one: rule_interval is empty then.
    note = interval_note(groups, deployed, configured[0])
    records = {r.record: grp.name for grp in groups for r in grp.rules if isinstance(r, RecordingRule)}
    gpu = deployed.get(records.get(catalog.GPU_UTILIZATION.name, ""), configured[0])
    derived = deployed.get(records.get(catalog.EXECUTION_UNDERUTILIZED.name, ""), configured[1])
    return Intervals(gpu, derived, note)


def key_of(metric: dict[str, str], labels: Iterable[str]) -> tuple[str, ...]:
    """The values of ``labels`` in a result's labels ("" where absent), as the figures are keyed."""
    return tuple(metric.get(label, "") for label in labels)


def value_of(result: dict[str, Any]) -> float:
    """An instant query result's one value."""
    return float(result["values"][0][1])


@dataclass(frozen=True)
class Window:
    """The span the figures cover, as a range."""

    window: str


def gpu_queries(cfg: Config, scope: Scope, w: Window) -> dict[str, Expr]:
    """One query per ``GpuFigures`` field that is no time figure, by field name; ``samples`` (the utilisation's)
    first. The time figures come from ``timed_gpu_series``."""
    window = w.window

    def g(series: Series) -> Expr:
        return scope.gpu(series)

    util, memory, energy = g(catalog.GPU_UTILIZATION), g(catalog.GPU_MEMORY_UTILIZATION), g(catalog.GPU_ENERGY)
    return {
        "samples": over("count_over_time", util, window),
        "util_mean": over("avg_over_time", util, window),
        "mem_peak_bytes": over("max_over_time", g(catalog.GPU_MEMORY_USED), window),
        "mem_peak_ratio": over("max_over_time", memory, window),
        "mem_last_ratio": over("last_over_time", memory, window),
        "device_mem_peak_bytes": over("max_over_time", g(catalog.GPU_DEVICE_MEMORY_USED), window),
        # The fill at the end from the 15 s series it is the ratio of: the recorded ratio is the memory alerts'
        # input, recorded at derived_rule_interval, and its last sample may be a minute older than the end.
        "device_mem_last_ratio": last_of(scope, catalog.GPU_DEVICE_MEMORY_UTILIZATION, window),
        "power_mean": over("avg_over_time", g(catalog.GPU_POWER), window),
        "power_limit_mean": over("avg_over_time", g(catalog.GPU_POWER_LIMIT), window),
        "temp_max": over("max_over_time", g(catalog.GPU_TEMPERATURE), window),
        "xid_changes": over("changes", g(catalog.GPU_LAST_XID), window),
        "xid_last": over("last_over_time", g(catalog.GPU_LAST_XID), window),
        "energy_increase": over("increase", energy, window),
        "energy_spread": over("max_over_time", energy, window) - over("min_over_time", energy, window),
        "energy_resets": over("resets", energy, window),
        "energy_samples": over("count_over_time", energy, window),
        # What the engines did, and a GPU shared between executions.
        "engine_mean": over("avg_over_time", g(catalog.GPU_GRAPHICS_ENGINE_ACTIVE), window),
        "tensor_mean": over("avg_over_time", g(catalog.GPU_TENSOR_ACTIVE), window),
        "dram_mean": over("avg_over_time", g(catalog.GPU_DRAM_ACTIVE), window),
        "share_min": over("min_over_time", g(catalog.GPU_SHARE), window),
    }


# The series whose time figures the report counts, each read as its raw samples over the span: the
# utilisation (time held, worked, high), board power (joules), the 0/1 conditions (seconds), the share
# series and the energy counter (the time its samples span).
TIMED_GPU_SERIES: tuple[Series, ...] = (
    catalog.GPU_UTILIZATION,
    catalog.GPU_POWER,
    catalog.GPU_MEMORY_HIGH,
    catalog.GPU_POWER_THROTTLED,
    catalog.GPU_THERMAL_THROTTLED,
    catalog.GPU_STALLED,
    catalog.GPU_TENSOR_CORES_UNUSED,
    catalog.GPU_SHARE,
    catalog.GPU_WORKED,
    catalog.GPU_POWER_ATTRIBUTED,
    catalog.GPU_ENERGY,
)


def timed_queries(scope: Scope, w: Window) -> dict[str, Expr]:
    """The raw samples over the span of each TIMED_GPU_SERIES and of the execution's underutilised condition
    (by ``timed:<series>``), and of its firing alerts (``timed:alerts``)."""
    out: dict[str, Expr] = {f"timed:{s.name}": scope.gpu(s).range(w.window) for s in TIMED_GPU_SERIES}
    out[f"timed:{catalog.EXECUTION_UNDERUTILIZED.name}"] = scope.gpu(catalog.EXECUTION_UNDERUTILIZED).range(w.window)
    return out


def read_timed(
    results: dict[str, list[dict[str, Any]]],
    executions: dict[Key, ExecutionFigures],
    scope: Scope,
    cfg: Config,
    ends: tuple[float, float],
) -> None:
    """Each GPU's and execution's time figures from the raw samples of ``timed_queries``, weighted by their
    timestamps (``timeline``) up to the span's end, and the alerts' up to theirs (``ends``)."""
    end, alerts_end = ends
    gpus = {key_of(g.labels, scope.gpu_key): (f, g) for f in executions.values() for g in f.gpus}

    def each(series: Series) -> Iterable[tuple[ExecutionFigures, GpuFigures, list[list[float]]]]:
        for r in results[f"timed:{series.name}"]:
            if (found := gpus.get(key_of(r["metric"], scope.gpu_key))) is not None and r["values"]:
                yield (*found, r["values"])

    stall = cfg.alerts.gpu_stalled.util_threshold
    for f, g, v in each(catalog.GPU_UTILIZATION):
        g.held_seconds = timeline.seconds(v, f.gpu_interval, end)
        g.covered_seconds = timeline.covered(v, f.gpu_interval)
        g.worked_seconds = timeline.integral(v, f.gpu_interval, end)
        g.util_high_seconds = timeline.seconds_where(v, f.gpu_interval, stall, end)
    integrals = {
        catalog.GPU_POWER: "power_integral_joules",
        catalog.GPU_MEMORY_HIGH: "oom_seconds",
        catalog.GPU_POWER_THROTTLED: "power_throttled_seconds",
        catalog.GPU_THERMAL_THROTTLED: "thermal_throttled_seconds",
        catalog.GPU_STALLED: "stalled_seconds",
        catalog.GPU_TENSOR_CORES_UNUSED: "tensor_unused_seconds",
        catalog.GPU_SHARE: "share_seconds",
        catalog.GPU_WORKED: "worked_shared_seconds",
        catalog.GPU_POWER_ATTRIBUTED: "power_attributed_joules",
    }
    for series, name in integrals.items():
        for f, g, v in each(series):
            # The weight of a lone sample: the conditions are recorded by the derived groups.
            fallback = f.derived_interval if series in catalog.GPU_CONDITION_SERIES else f.gpu_interval
            setattr(g, name, timeline.integral(v, fallback, end))
    for f, g, v in each(catalog.GPU_TENSOR_CORES_UNUSED):
        g.tensor_judged_seconds = timeline.seconds(v, f.derived_interval, end)
    for _, g, v in each(catalog.GPU_ENERGY):
        g.energy_span_seconds = timeline.spread(v)
    clocks: dict[Key, list[float]] = defaultdict(list)
    for r in results[f"timed:{catalog.EXECUTION_UNDERUTILIZED.name}"]:
        if (execution := scope.key(r["metric"])) in executions:
            f = executions[execution]
            # One series per tenant of the execution, each over the same time: the longest, not their sum.
            f.low_util_seconds = max(f.low_util_seconds, timeline.integral(r["values"], f.derived_interval, end))
            clocks[execution] += [t for t, _ in r["values"]]
    # An alert fires once per GPU (or tenant): it fired for the execution at any instant one of its series did.
    instants: dict[tuple[Key, str, str], set[float]] = defaultdict(set)
    hosts = {key: {g.labels.get(HOST_LABEL, "") for g in f.gpus} for key, f in executions.items()}
    for r in results["alerts"]:
        m, execution = r["metric"], scope.key(r["metric"])
        if execution in executions and scope.own_alert(m, hosts[execution]):
            instants[(execution, m.get("alertname", ""), m.get("severity", ""))].update(t for t, _ in r["values"])
    for (execution, name, severity), times in sorted(instants.items()):
        f = executions[execution]
        clock = timeline.Clock(clocks.get(execution, []), f.derived_interval)
        fired = clock.firing_seconds([[t, 1.0] for t in sorted(times)], alerts_end)
        f.alerts.append(AlertFigures(name, severity, fired))


def presence_queries(scope: Scope, w: Window) -> dict[str, Expr]:
    """Which GPUs have each of the REQUIRED_GPU_SERIES, by series name. A series AMD's exporter does not
    publish (the power limit) counts as present on AMD GPUs, where vendors has amd: no input is missing
    that the GPU's exporter never publishes (docs/series.md)."""
    out: dict[str, Expr] = {}
    for s in REQUIRED_GPU_SERIES:
        out[s.name] = over("count_over_time", scope.gpu(s), w.window)
        if "amd" in scope.cfg.vendors and not catalog.amd_publishes(s):
            out[s.name] = any_of([out[s.name], amd_gpus(scope, w)], stacked=False)
    return out


def amd_gpus(scope: Scope, w: Window) -> Expr:
    """The GPUs of the scope that AMD's exporter reported in the window (by UUID, which the AMD group records)."""
    amd = catalog.SIGNALS[catalog.PRESENCE_SIGNALS[0]].amd_series
    reported = aggregate("group", (UUID_LABEL,), over("count_over_time", selector(amd, *scope.cluster), w.window))
    return over("count_over_time", scope.gpu(catalog.GPU_PRESENCE), w.window).and_(reported, on((UUID_LABEL,)))


def host_queries(scope: Scope, w: Window) -> dict[str, Expr]:
    """One query per ``HostFigures`` field, by field name."""
    return {
        "cpu_mean": scope.host_over("avg_over_time", catalog.NODE_CPU_UTILIZATION, w.window),
        "ram_peak_bytes": scope.host_over("max_over_time", catalog.NODE_RAM_USED, w.window),
        "ram_peak_ratio": scope.host_over("max_over_time", catalog.NODE_RAM_UTILIZATION, w.window),
        "ram_total_bytes": scope.host_over("max_over_time", catalog.NODE_RAM_TOTAL, w.window),
    }


def execution_queries(scope: Scope, w: Window) -> dict[str, Expr]:
    """The execution-wide figures: the host CPU while utilisation was low (the time it was: ``timed_queries``),
    and whether it still reports. The conditions are recorded per execution and tenant, so ``scope.gpu`` scopes them."""
    return {
        "cpu_during_low_util": over("avg_over_time", scope.gpu(catalog.EXECUTION_CPU_WHILE_UNDERUTILIZED), w.window),
        # An instant selector: the lookback.
        "reporting_at_end": aggregate("group", (EXECUTION_LABEL,), scope.gpu(catalog.GPU_UTILIZATION)),
    }


def alerts_query(scope: Scope, window: str) -> Expr:
    """The samples of each alert of each execution that fired in ``window`` (``read_timed`` weighs them)."""
    return scope.alerts().range(window)


def whole_count(value: float) -> int | None:
    """A count or a code from Prometheus' float, None where no integer stands for it: NaN, an infinity, or past
    MAX_WHOLE, which no float holds whole nor JSON's integers (only a compatible API's odd answer has them)."""
    return int(value) if abs(value) <= MAX_WHOLE else None


def read_gpus(
    results: dict[str, list[dict[str, Any]]], fields: Iterable[str], intervals: tuple[float, float], scope: Scope
) -> dict[Key, ExecutionFigures]:
    """The executions and their GPUs: every GPU with utilisation samples, its ``fields`` and the series it has."""
    executions: dict[Key, ExecutionFigures] = {}
    gpus: dict[tuple[str, ...], GpuFigures] = {}
    for r in results["samples"]:
        key, execution = key_of(r["metric"], scope.gpu_key), scope.key(r["metric"])
        labels = {k: v for k, v in zip(scope.gpu_key, key, strict=True) if v}
        gpus[key] = GpuFigures(labels, samples=whole_count(value_of(r)) or 0)
        if execution not in executions:
            executions[execution] = ExecutionFigures(execution[1], *intervals, cluster=execution[0])
        executions[execution].gpus.append(gpus[key])
    for name in fields:
        if name == "samples":
            continue
        for r in results[name]:
            target = gpus.get(key_of(r["metric"], scope.gpu_key))
            value = value_of(r)
            if target is not None and math.isfinite(value):
                current = getattr(target, name)
                if isinstance(current, int):  # a count or a code
                    count = whole_count(value)
                    if count is not None:
                        setattr(target, name, count)
                else:
                    setattr(target, name, value)
    for series in REQUIRED_GPU_SERIES:
        for r in results[series.name]:
            target = gpus.get(key_of(r["metric"], scope.gpu_key))
            if target is not None:
                target.present.add(series.name)
    return executions


def read_hosts(
    results: dict[str, list[dict[str, Any]]],
    fields: Iterable[str],
    executions: dict[Key, ExecutionFigures],
    scope: Scope,
) -> None:
    """Each execution's hosts and their ``fields`` (None where not a number)."""
    hosts: dict[tuple[str, ...], HostFigures] = {}
    for name in fields:
        for r in results[name]:
            key, execution = key_of(r["metric"], scope.host_key), scope.key(r["metric"])
            if execution not in executions:
                continue  # a host series without GPU series in the window: nothing to report on
            if key not in hosts:
                hosts[key] = HostFigures(key[-1])
                executions[execution].hosts.append(hosts[key])
            value = value_of(r)
            setattr(hosts[key], name, value if math.isfinite(value) else None)


def read_executions(
    results: dict[str, list[dict[str, Any]]], executions: dict[Key, ExecutionFigures], scope: Scope
) -> None:
    """The execution-wide figures of ``execution_queries``; GPUs, hosts and alerts in a stable order."""

    def of(name: str) -> Iterable[tuple[ExecutionFigures, dict[str, Any]]]:
        for r in results[name]:
            if (execution := scope.key(r["metric"])) in executions:
                yield executions[execution], r

    for figures, r in of("cpu_during_low_util"):
        figures.cpu_during_low_util = value_of(r)
    for figures, _ in of("reporting_at_end"):
        figures.reporting_at_end = True
    for figures in executions.values():
        figures.alerts.sort(key=lambda x: (x.alertname, x.severity))
        figures.gpus.sort(key=lambda x: tuple(x.labels.get(k, "") for k in GPU_KEY))
        figures.hosts.sort(key=lambda x: x.hostname)


async def collect(
    cfg: Config,
    prometheus: PrometheusClient,
    scope: Scope,
    window_seconds: float,
    at: float,
    alerts_after: float = 0.0,
    known_intervals: Intervals | None = None,
    counted_to: float | None = None,
) -> dict[Key, ExecutionFigures]:
    """Figures of every execution in ``scope`` with samples in the ``window_seconds`` before ``at``, by
    cluster ("" without a cluster label) and id.

    Alerts are read ``alerts_after`` seconds beyond ``at`` too: an execution whose telemetry
    stopped is told so by alerts that fire after its last sample. ``known_intervals``: ``intervals``'
    answer where the caller has read it already. No sample counts time past ``counted_to`` (default ``at``):
    a report up to an execution's own last sample gives math.inf, so that sample counts its interval as every
    other does (``timeline.weights``), not nothing.
    """
    gpu_interval, derived_interval = (known_intervals or await intervals(cfg, prometheus)).pair
    w = Window(span_range(window_seconds))
    gpu, host = gpu_queries(cfg, scope, w), host_queries(scope, w)
    queries = {**gpu, **presence_queries(scope, w), **host, **execution_queries(scope, w), **timed_queries(scope, w)}
    asked = [(expr, at) for expr in queries.values()]
    alerts_window = span_range(window_seconds + alerts_after)
    asked.append((alerts_query(scope, alerts_window), at + alerts_after))
    answers = await asyncio.gather(*(prometheus.instant(scope.query(expr), at=when) for expr, when in asked))
    results = dict(zip([*queries, "alerts"], answers, strict=True))
    executions = read_gpus(results, gpu, (gpu_interval, derived_interval), scope)
    read_timed(results, executions, scope, cfg, (at if counted_to is None else counted_to, at + alerts_after))
    read_hosts(results, host, executions, scope)
    read_executions(results, executions, scope)
    await instance_shares(prometheus, scope, window_seconds, at, executions.values())
    return dict(sorted(executions.items()))


async def instance_shares(
    prometheus: PrometheusClient, scope: Scope, window_seconds: float, at: float, executions: Iterable[ExecutionFigures]
) -> None:
    """Each GPU instance's (MIG, MI300 partition) share of its GPU among ``executions``' GPUs, its mean over the
    window (``GpuFigures.instance_share``), in one query of their GPUs' instances; none asked without instances.
    The mean: a GPU's instances change rarely, and an execution holds its instance throughout. Left None where the
    rules record no share (rules older than ``catalog.GPU_INSTANCE_SHARE``): billed as a whole GPU, as before."""
    instances = [g for f in executions for g in f.gpus if g.labels.get(MIG_INSTANCE_LABEL)]
    if not instances:
        return
    uuids = sorted({g.labels.get(UUID_LABEL, "") for g in instances})
    devices = match(UUID_LABEL, "|".join(re.escape(uuid) for uuid in uuids), "=~")
    share = catalog.GPU_INSTANCE_SHARE.select(devices, *scope.cluster)
    rows = await prometheus.instant(scope.query(over("avg_over_time", share, span_range(window_seconds))), at=at)
    key = (*scope.clusters.partition, *catalog.INSTANCE_KEY)
    means = {key_of(r["metric"], key): value_of(r) for r in rows}
    for g in instances:
        g.instance_share = means.get(key_of(g.labels, key))


@dataclass(frozen=True)
class Waste:
    """One execution's GPU time over a window, a shared GPU's in the execution's share at each sample."""

    execution_id: str
    billed_seconds: float
    worked_seconds: float
    cluster: str = ""  # the cluster that holds it ("" without a cluster label)
    # Its GPU time counted as samples times the deployed interval: its rules record no measured seconds for (part
    # of) the window (``catalog.GPU_SAMPLE_SECONDS``: rules older than it).
    assumed_interval: bool = False
    # Its tenant ("" where its series carry no tenant label): two tenants' executions of one id are two rows.
    tenant: str = ""

    @property
    def key(self) -> Key:
        """The execution's key among ``collect``'s figures."""
        return (self.cluster, self.execution_id)

    @property
    def wasted_seconds(self) -> float:
        return self.billed_seconds - self.worked_seconds


# The ranking weighs a mean over pieces of the window this long (Prometheus' lookback), each piece's mean times
# its measured seconds: a change of interval moves the weights within one piece only.
PIECE_MS = 300_000
PIECE_LABEL = "gpu_pack_piece"  # tells the pieces' sums apart until they are added (a label no series carries)


def pieces(window_seconds: float, at: float) -> list[tuple[str, int, int]]:
    """The window ``(at - window_seconds, at]`` in pieces: (name, end, length) in milliseconds, for the pieces
    before and after the whole ``PIECE_MS`` ones (at most one each), and ``("whole", last end, count)`` for those."""
    start_ms, end_ms = round((at - window_seconds) * 1000), round(at * 1000)
    first, last = -(-start_ms // PIECE_MS) * PIECE_MS, end_ms // PIECE_MS * PIECE_MS
    if last <= first:
        return [("tail", end_ms, end_ms - start_ms)]
    out = [("head", first, first - start_ms)] if first > start_ms else []
    out.append(("whole", last, (last - first) // PIECE_MS))
    return out + ([("tail", end_ms, end_ms - last)] if end_ms > last else [])


def piecewise(mean: Callable[[str], Expr], seconds: Expr, window_seconds: float, at: float) -> Expr:
    """Each GPU's ``mean(range)`` over each piece of the window times the sum of ``seconds`` over it, summed over the
    pieces (``pieces``), to be asked at ``at``: a mean weighted by time, where the mean of the window weighs each
    sample alike. Each piece's range ends a millisecond short of it: Prometheus 2 includes both ends of a range."""

    def piece(length_ms: int) -> Expr:
        span = f"{length_ms - 1}ms"
        return mean(span) * over("sum_over_time", seconds, span)

    terms = []
    for name, end, length in pieces(window_seconds, at):
        if name != "whole":
            terms.append(label_set(pinned(piece(length), end / 1000), PIECE_LABEL, name))
            continue
        # Steps at the multiples of a piece in (its first end - half a piece, last end]: never on the range's start,
        # which Prometheus 3 leaves out and 2 keeps.
        steps = Range(piece(PIECE_MS), f"{(length - 1) * PIECE_MS + PIECE_MS // 2}ms", f"{PIECE_MS}ms")
        terms.append(label_set(call("sum_over_time", pinned(steps, end / 1000)), PIECE_LABEL, name))
    return any_of(terms)


def shared_gpus(scope: Scope, window: str) -> Expr:
    """The GPUs of ``scope`` held by several executions at some sample in ``window``: their share fell below 1."""
    return over("min_over_time", scope.gpu(catalog.GPU_SHARE), window).lt(1)


def shared_or_instances(scope: Scope, window: str) -> Expr:
    """The GPUs of ``scope`` in ``window`` that count less than a whole GPU each: those held by several executions
    (``shared_gpus``), and the GPU instances (MIG, MI300 partitions), which count in their share of the GPU."""
    instances = over("count_over_time", scope.gpu(catalog.GPU_UTILIZATION, labelled(MIG_INSTANCE_LABEL)), window)
    return any_of([shared_gpus(scope, window), instances], stacked=False)


def counted_in_gpus(per_gpu: Callable[[Matcher], Expr], instance_share: Expr) -> Expr:
    """A figure of each GPU row (``per_gpu`` of the rows a matcher selects) counted in GPUs: a whole GPU's as it is,
    a GPU instance's times ``instance_share`` (its share of its GPU over the same span), or as it is where the rules
    record no share (rules older than it). Whole GPUs and instances selected apart: no whole GPU's figure is
    computed twice."""
    whole, instances = per_gpu(match(MIG_INSTANCE_LABEL, "")), per_gpu(labelled(MIG_INSTANCE_LABEL))
    return Paren(any_of([whole, catalog.of_instance_share(instances, instance_share), instances], stacked=False))


def instance_share_mean(scope: Scope, window: str) -> Expr:
    """Each GPU instance's mean share of its GPU over ``window`` (every instance of the scope's clusters)."""
    return over("avg_over_time", catalog.GPU_INSTANCE_SHARE.select(*scope.cluster), window)


def measured_throughout(scope: Scope, window: str) -> Expr:
    """The GPUs whose utilisation samples over ``window`` all carry the seconds the rules measured them to stand
    for (``catalog.GPU_SAMPLE_SECONDS``), all but possibly the first (none where the rules know no interval)."""
    measured = over("count_over_time", scope.gpu(catalog.GPU_SAMPLE_SECONDS), window)
    return (measured + 1).ge(over("count_over_time", scope.gpu(catalog.GPU_UTILIZATION), window))


async def waste_by_execution(
    cfg: Config, prometheus: PrometheusClient, scope: Scope, window_seconds: float, at: float, gpu_interval: float
) -> list[Waste]:
    """GPU time billed and worked of every execution in ``scope`` with samples in the ``window_seconds`` before
    ``at``, in a few queries however many executions there are: the fleet view ranks all executions with them
    and collects the figures of its top rows only. The rows shown are counted from the samples' timestamps
    (``collect``).

    Each sample counts the seconds the rules measured it to stand for (``catalog.GPU_SAMPLE_SECONDS``): whatever
    interval they ran at, changed to, or missed evaluations of, with no interval assumed. Billed is their sum;
    worked, the utilisation's mean over each five minutes times their sum over them (``piecewise``; a mean weighs
    each sample alike, exact at a constant interval: so a change of interval moves the weights within five
    minutes, not across the window). A GPU held by several executions at some moment counts its share's mean and
    its worked series' instead, the same way, and a GPU instance (MIG, MI300 partition) those times its share of
    the GPU's mean; only those GPUs read the share series for their sums (reading it for every GPU would double the
    cost of the ranking).

    An execution some of whose GPUs' samples lack the measured seconds (rules older than that series, for all or
    part of the window) is counted as the ranking did before: its samples at ``gpu_interval``, the deployed
    per-GPU group's (``intervals``); it is marked ``assumed_interval``."""
    window = span_range(window_seconds)

    def by_execution(expr: Expr) -> Expr:
        return aggregate("sum", scope.by_execution, expr)

    util, seconds = (scope.gpu(s) for s in (catalog.GPU_UTILIZATION, catalog.GPU_SAMPLE_SECONDS))

    def util_mean(span: str) -> Expr:
        return over("avg_over_time", util, span)

    asked = (
        by_execution(over("sum_over_time", seconds, window)),
        by_execution(piecewise(util_mean, seconds, window_seconds, at)),
        aggregate("group", scope.by_execution, shared_or_instances(scope, window)),
        aggregate(
            "group",
            scope.by_execution,
            over("count_over_time", util, window).unless(measured_throughout(scope, window)),
        ),
    )
    answers = await asyncio.gather(*(prometheus.instant(scope.query(expr), at=at) for expr in asked))
    billed, worked, corrected, assumed = ({scope.tenant_key(r["metric"]): value_of(r) for r in a} for a in answers)
    if corrected:
        for sums, answer in zip(
            (billed, worked),
            await shared_corrections(
                prometheus, scope, scope.narrowed(eid for _, eid, _ in corrected), window_seconds, at
            ),
            strict=True,
        ):
            for r in answer:
                execution = scope.tenant_key(r["metric"])
                sums[execution] = sums.get(execution, 0.0) + value_of(r)
    if assumed:
        for sums, answer in zip(
            (billed, worked),
            await counted_as_before(
                prometheus, scope, scope.narrowed(eid for _, eid, _ in assumed), window, at, gpu_interval
            ),
            strict=True,
        ):
            for r in answer:
                if (execution := scope.tenant_key(r["metric"])) in assumed:
                    sums[execution] = value_of(r)
    return [
        Waste(eid, seconds_billed, worked.get(key, 0.0), cluster, key in assumed, tenant)
        for key, seconds_billed in sorted(billed.items())
        for cluster, eid, tenant in [key]
        if eid
    ]


async def shared_corrections(
    prometheus: PrometheusClient, scope: Scope, named: Scope, window_seconds: float, at: float
) -> list[list[dict[str, Any]]]:
    """By execution, what its shared GPUs and GPU instances (of ``named``: ``shared_or_instances``) add to the billed
    and the worked seconds the ranking counted at a whole GPU and at the utilisation: their share's mean's
    difference from 1, and their worked series' mean's from the utilisation's, each times the measured seconds,
    piece by piece (``piecewise``); an instance's means times its share of the GPU's over the piece
    (``counted_in_gpus``)."""
    on_corrected = shared_or_instances(named, span_range(window_seconds))

    def mean(series: Series, span: str) -> Callable[[Matcher], Expr]:
        return lambda rows: over("avg_over_time", named.gpu(series, rows), span)

    def share_less_one(span: str) -> Expr:
        return counted_in_gpus(mean(catalog.GPU_SHARE, span), instance_share_mean(named, span)) - 1

    def worked_less_util(span: str) -> Expr:
        worked = counted_in_gpus(mean(catalog.GPU_WORKED, span), instance_share_mean(named, span))
        return worked - over("avg_over_time", named.gpu(catalog.GPU_UTILIZATION), span)

    seconds = named.gpu(catalog.GPU_SAMPLE_SECONDS)
    corrections = (
        aggregate(
            "sum",
            scope.by_execution,
            piecewise(m, seconds, window_seconds, at).and_(on_corrected, ignoring((PIECE_LABEL,))),
        )
        for m in (share_less_one, worked_less_util)
    )
    return list(await asyncio.gather(*(prometheus.instant(scope.query(c), at=at) for c in corrections)))


async def counted_as_before(
    prometheus: PrometheusClient, scope: Scope, named: Scope, window: str, at: float, gpu_interval: float
) -> list[list[dict[str, Any]]]:
    """By execution of ``named``, the billed and the worked seconds as the ranking counted them before the rules
    measured them: each GPU's utilisation samples and their sum at the deployed interval, a shared GPU's share
    and worked series instead, a GPU instance's those times its share of the GPU's mean over the window."""
    on_corrected = shared_or_instances(named, window)
    counted = (
        (catalog.GPU_SHARE, over("count_over_time", named.gpu(catalog.GPU_UTILIZATION), window)),
        (catalog.GPU_WORKED, over("sum_over_time", named.gpu(catalog.GPU_UTILIZATION), window)),
    )

    def summed(series: Series) -> Callable[[Matcher], Expr]:
        return lambda rows: over("sum_over_time", named.gpu(series, rows), window)

    queries = (
        aggregate(
            "sum",
            scope.by_execution,
            any_of(
                [counted_in_gpus(summed(s), instance_share_mean(named, window)).and_(on_corrected), alone],
                stacked=False,
            ),
        )
        * gpu_interval
        for s, alone in counted
    )
    return list(await asyncio.gather(*(prometheus.instant(scope.query(q), at=at) for q in queries)))


def assumed_interval_note(ranking: list[Waste], gpu_interval: float) -> str:
    """One line where some execution's ranked GPU time is its samples times the deployed interval (``Waste``)."""
    assumed = sum(w.assumed_interval for w in ranking)
    if not assumed:
        return ""
    return (
        f"The ranking's GPU-hours of {assumed} of {len(ranking)} executions count samples at the deployed per-GPU "
        f"interval ({format_duration(gpu_interval)}): their rules record no {catalog.GPU_SAMPLE_SECONDS.name} for "
        "(part of) the window (rules generated before it). The totals assume that interval until the rules are "
        "upgraded; the rows shown are counted from the samples' timestamps."
    )


async def held_by_other_tenants(
    prometheus: PrometheusClient, scope: Scope, window_seconds: float, at: float
) -> frozenset[str]:
    """The ids of the scope's executions that a tenant other than the scope's (GPUs without the tenant label count as
    one) held within the window, in one query; none where the scope is of every tenant."""
    if scope.tenant_value is None or not scope.execution:
        return frozenset()
    others = match(scope.cfg.api.tenant_label, scope.tenant_value, "!=")
    held = catalog.GPU_PRESENCE.select(*scope.execution, *scope.cluster, others).range(span_range(window_seconds))
    rows = await prometheus.instant(
        scope.query(aggregate("group", (EXECUTION_LABEL,), call("last_over_time", held))), at=at
    )
    return frozenset(r["metric"].get(EXECUTION_LABEL, "") for r in rows)


async def co_holders(
    prometheus: PrometheusClient, scope: Scope, window_seconds: float, at: float, f: ExecutionFigures
) -> None:
    """Name, on each of ``f``'s shared GPUs, the other executions (within the scope's tenant and cluster) that
    held it at the same moments as ``f`` did: those whose share was under 1 at a sample where ``f``'s was.

    Read from the share's own samples, which one rule records for every holder at the same instants: no
    subquery stepped at an interval, which a config disagreeing with the deployed rules would make miss
    or invent an overlap."""
    shared = [g for g in f.gpus if g.shared]
    if not shared:
        return
    uuids = sorted({g.labels.get(UUID_LABEL, "") for g in shared})
    devices = match(UUID_LABEL, "|".join(re.escape(uuid) for uuid in uuids), "=~")
    samples = catalog.GPU_SHARE.select(devices, *scope.cluster, *scope.tenant).range(span_range(window_seconds))
    result = await prometheus.instant(scope.query(samples), at=at)
    moments: dict[tuple[tuple[str, ...], str], set[float]] = defaultdict(set)
    for r in result:
        held = moments[key_of(r["metric"], catalog.DEVICE_LABELS), r["metric"].get(EXECUTION_LABEL, "")]
        held.update(float(t) for t, v in r["values"] if float(v) < 1)
    for g in shared:
        device = key_of(g.labels, catalog.DEVICE_LABELS)
        own = moments.get((device, f.execution_id), set())
        g.co_holders = sorted(
            eid for (d, eid), times in moments.items() if d == device and eid and eid != f.execution_id and times & own
        )


async def heavy_phase(
    cfg: Config, prometheus: PrometheusClient, scope: Scope, start: float, end: float, step: float
) -> tuple[float | None, dict[tuple[str, ...], float]]:
    """When the heavy phase starts (the execution's GPU memory first at ``report.heavy_phase_memory_share``
    of its peak) and each GPU's mean utilisation from then to ``end``, by ``scope.gpu_key``."""
    begin = await heavy_phase_start(cfg, prometheus, scope, start, end, step)
    if begin is None:
        return None, {}
    result = await prometheus.instant(scope.query(heavy_phase_mean(scope, begin, end)), at=end)
    return begin, {key_of(r["metric"], scope.gpu_key): float(r["values"][0][1]) for r in result}


async def heavy_phase_start(
    cfg: Config, prometheus: PrometheusClient, scope: Scope, start: float, end: float, step: float
) -> float | None:
    """``heavy_phase``'s start: the first point of the ``step`` grid from ``start`` to ``end`` where the execution's
    GPU memory is at ``report.heavy_phase_memory_share`` of its peak over the grid (None: no memory samples)."""
    used = aggregate("sum", (EXECUTION_LABEL,), scope.gpu(catalog.GPU_MEMORY_USED))
    points = await prometheus.range(scope.query(used), start, end, step)
    values = [(float(t), float(v)) for r in points for t, v in r["values"] if math.isfinite(float(v))]
    if not values:
        return None
    peak = max(v for _, v in values)
    share = cfg.report.heavy_phase_memory_share
    return next(t for t, v in values if v >= share * peak)


def heavy_phase_mean(scope: Scope, begin: float, end: float) -> Expr:
    """Each GPU's mean utilisation from the heavy phase's start ``begin`` to ``end`` (asked at ``end``)."""
    return over("avg_over_time", scope.gpu(catalog.GPU_UTILIZATION), format_duration(max(1.0, end - begin)))
