"""Alert rules: throttling, OOM risk, waste, missing telemetry and Xid errors, per execution.

Alerts read the recorded ``execution_gpu:`` / ``execution_node:`` / ``execution:`` series, so
they carry the execution label and name the GPU or host; only the two telemetry alerts look at raw
exporter data, because they are about its absence. Thresholds, ``for`` durations and severities
come from ``cfg.alerts``; docs/runbook.md has a section per alert, named by the alert.

Conventions (checked by ``gpu_execution_pack.rules.lint``): a ``severity`` label, a static ``summary``, a
templated ``description`` with the values that matter, and a ``runbook_url`` to the alert's
runbook section. Descriptions fetch further values with ``query`` where the alert's own value
is not the one worth reading (the host CPU of an underused execution, say).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack import catalog
from gpu_execution_pack.catalog import (
    EXECUTION_LABEL,
    GPU_IDENTITY_LABELS,
    GPU_INDEX_LABEL,
    GPU_JOIN_LABELS,
    HOST_LABEL,
    MIG_INSTANCE_LABEL,
    MODEL_LABEL,
    UUID_LABEL,
    Series,
)
from gpu_execution_pack.config import Config, PredictAlert, cluster_scope
from gpu_execution_pack.promql import (
    Binary,
    Expr,
    LabelRef,
    Paren,
    Selector,
    aggregate,
    all_of,
    any_of,
    call,
    join,
    match,
    on,
    parse_duration_seconds,
    selector,
    template_query,
)
from gpu_execution_pack.rules.amd import gpu_presence
from gpu_execution_pack.rules.groups import AlertRule, RuleGroup

ALERT_PREFIX = "GpuExecution"
UP = "up"  # Prometheus' own series: 1 where a target's last scrape succeeded
GROUP_NAME = "gpu-execution-pack.alerts"
GROUP_FILE = "alerts"


@dataclass(frozen=True)
class Alert:
    """One alert as routing and the tests know it without building its rule: its name, its section of
    ``cfg.alerts`` (named as its ``AlertBuilder`` method: thresholds, ``for`` and severity), and whether it
    fires on one GPU's own measurements (which missing telemetry or a down exporter makes unreliable)."""

    key: str
    name: str
    gpu_measurement: bool = False

    def severity(self, cfg: Config) -> str:
        """The severity ``cfg`` gives the alert."""
        severity: str = getattr(cfg.alerts, self.key).severity
        return severity


GPU_MEMORY_HIGH = Alert("gpu_memory_high", f"{ALERT_PREFIX}GpuMemoryHigh", gpu_measurement=True)
GPU_MEMORY_EXHAUSTION = Alert("gpu_memory_exhaustion", f"{ALERT_PREFIX}GpuMemoryFillingUp", gpu_measurement=True)
HOST_MEMORY_HIGH = Alert("host_memory_high", f"{ALERT_PREFIX}HostMemoryHigh")
HOST_MEMORY_EXHAUSTION = Alert("host_memory_exhaustion", f"{ALERT_PREFIX}HostMemoryFillingUp")
POWER_THROTTLING = Alert("power_throttling", f"{ALERT_PREFIX}PowerThrottling", gpu_measurement=True)
THERMAL_THROTTLING = Alert("thermal_throttling", f"{ALERT_PREFIX}ThermalThrottling", gpu_measurement=True)
GPU_UNDERUTILIZED = Alert("gpu_underutilized", f"{ALERT_PREFIX}GpuUnderutilized")
GPU_STALLED = Alert("gpu_stalled", f"{ALERT_PREFIX}GpuStalled", gpu_measurement=True)
# About the telemetry itself: its absence (per held GPU) and the exporter target that is down.
TELEMETRY_MISSING = Alert("telemetry_missing", f"{ALERT_PREFIX}TelemetryMissing")
DCGM_EXPORTER_DOWN = Alert("dcgm_exporter_down", f"{ALERT_PREFIX}DcgmExporterDown")
# A cause (an Xid 79 is why a GPU goes silent), not a measurement made unreliable by silence.
XID_ERRORS = Alert("xid_errors", f"{ALERT_PREFIX}XidError")
HOST_NAME_COLLISION = Alert("host_name_collision", f"{ALERT_PREFIX}HostNameCollision")
# Every alert, in the order the rule file lists them (``AlertBuilder.rules``).
ALERTS = (
    GPU_MEMORY_HIGH,
    GPU_MEMORY_EXHAUSTION,
    HOST_MEMORY_HIGH,
    HOST_MEMORY_EXHAUSTION,
    POWER_THROTTLING,
    THERMAL_THROTTLING,
    GPU_UNDERUTILIZED,
    GPU_STALLED,
    TELEMETRY_MISSING,
    DCGM_EXPORTER_DOWN,
    XID_ERRORS,
    HOST_NAME_COLLISION,
)

# Bits of DCGM's clock event reasons (DCGM_FI_DEV_CLOCKS_EVENT_REASONS). PromQL has no bit
# operators: bit k of x is set where floor(x / 2^k) % 2 == 1.
POWER_REASON_BITS = {0x4: "SW power cap", 0x80: "HW power brake"}
THERMAL_REASON_BITS = {0x20: "SW thermal slowdown", 0x40: "HW thermal slowdown"}

# One GPU or MIG instance of one execution, as the per-GPU series and alerts name it.
GPU_OF_EXECUTION: tuple[str, ...] = (EXECUTION_LABEL, *GPU_JOIN_LABELS)

# --- Template snippets ------------------------------------------------------------------------
# Go templates, rendered by Prometheus at each evaluation. A per-GPU alert's $labels are the
# execution label, the tenant label and the GPU's identity; the MIG instance id is empty on whole
# GPUs, which a selector reads as "label absent".


def label_value(label: str) -> str:
    """The alert's value of ``label``, as a description prints it."""
    return f"{{{{ $labels.{label} }}}}"


GPU_NAME = (
    f"GPU {label_value(GPU_INDEX_LABEL)}"
    f"{{{{ if $labels.{MIG_INSTANCE_LABEL} }}}} (MIG instance {label_value(MIG_INSTANCE_LABEL)}){{{{ end }}}}"
    f" ({label_value(MODEL_LABEL)}, {label_value(UUID_LABEL)}) on {label_value(HOST_LABEL)}"
)
EXECUTION = f"Execution {label_value(EXECUTION_LABEL)}"


def alerts_own(series: Series, labels: tuple[str, ...]) -> Selector:
    """``series`` where ``labels`` have the alert's own values (filled in when the template renders)."""
    return series.select(*(match(label, LabelRef(label)) for label in labels))


def bit_set(expr: Expr, bit: int) -> Expr:
    return (call("floor", expr / bit) % 2).eq(1)


def percent(ratio: float) -> str:
    """A threshold as the description prints it (``0.95`` -> ``95%``)."""
    return f"{ratio * 100:g}%"


EXPORTER_OF = {"nvidia": "dcgm-exporter", "amd": "device-metrics-exporter"}


class AlertBuilder:
    """The alert rules for one configuration."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.a = cfg.alerts
        clusters = cluster_scope(cfg)
        # Where rules run over several clusters, descriptions name the alert's cluster and their
        # queries read that cluster's series only.
        self.in_cluster = clusters.named(label_value(clusters.label))
        self.own_labels: tuple[str, ...] = clusters.partition
        self.execution = EXECUTION + self.in_cluster

    @property
    def exporters(self) -> str:
        """The GPU exporters the configured vendors run, as descriptions name them."""
        return " or ".join(EXPORTER_OF[v] for v in self.cfg.vendors)

    def own(self, series: Series, labels: tuple[str, ...]) -> Selector:
        """``series`` where ``labels`` (and the cluster label) have the alert's own values."""
        return alerts_own(series, (*labels, *self.own_labels))

    def gpu_value(self, series: Series, humanize: str, before: str = "", after: str = "") -> str:
        """``before value after`` with the alerting GPU's current value of ``series``; empty if it has none."""
        query = template_query(self.own(series, GPU_OF_EXECUTION))
        return f"{{{{ with {query} | query }}}}{before}{{{{ . | first | value | {humanize} }}}}{after}{{{{ end }}}}"

    def rule(self, alert: Alert, expr: Expr, summary: str, description: str, for_: str = "") -> AlertRule:
        """``alert``'s rule: its name, its configured severity, and its runbook section."""
        url = f"{self.a.runbook_url}#{alert.name.lower()}"
        return AlertRule(alert.name, expr, alert.severity(self.cfg), summary, description, url, for_)

    # -- GPU memory --------------------------------------------------------------------------
    def co_holders(self) -> str:
        """A description's clause naming the other executions that hold the alerting GPU at once (time-slicing,
        MPS): its memory is theirs too, and any of them can run it out. Empty where it holds the GPU alone.

        An execution is its id and its tenant: Kubernetes Job names repeat across namespaces, so the clause names
        the GPU's holders less the alerting one's own (id, tenant) pair, in order, each with its tenant where it has
        one. Where series carry no tenant at all (bare metal, Slurm) the alert's tenant is "", which a matcher reads
        as the label's absence."""
        tenant = self.cfg.api.tenant_label
        key = (EXECUTION_LABEL, tenant)
        holders = self.own(catalog.GPU_SHARE, catalog.DEVICE_LABELS)
        own = self.own(catalog.GPU_SHARE, (*catalog.DEVICE_LABELS, *key))
        query = template_query(aggregate("group", key, holders).unless(own, on(key)))
        # An aggregation's series come in no set order; sortByLabel's sort is stable: by id, then by tenant.
        ordered = f'query | sortByLabel "{tenant}" | sortByLabel "{EXECUTION_LABEL}"'
        return (
            f"{{{{ with {query} | {ordered} }}}} Every execution holding the GPU counts: it is shared with "
            f"{{{{ range $i, $s := . }}}}{{{{ if $i }}}}, {{{{ end }}}}{{{{ $s.Labels.{EXECUTION_LABEL} }}}}"
            f"{{{{ with $s.Labels.{tenant} }}}} ({tenant} {{{{ . }}}}){{{{ end }}}}"
            "{{ end }}.{{ end }}"
        )

    def gpu_memory_high(self) -> AlertRule:
        a = self.a.gpu_memory_high
        # The device's fill, every holder's use counted: on a shared GPU any holder can run it out.
        return self.rule(
            GPU_MEMORY_HIGH,
            catalog.GPU_DEVICE_MEMORY_UTILIZATION.select().ge(a.threshold),
            "An execution's GPU memory is nearly full; its next allocations may fail with out-of-memory.",
            f"{self.execution} has used {{{{ $value | humanizePercentage }}}} of the memory of {GPU_NAME} "
            f"for {a.for_} (threshold {percent(a.threshold)})." + self.co_holders(),
            a.for_,
        )

    def predicted_exhaustion(
        self, a: PredictAlert, ratio: Series, used: Series, total: Series, horizon_words: str
    ) -> tuple[Expr, str]:
        """The "runs out within the horizon" expression, and its description's trend clause.

        The trend only counts once the level has stayed above ``min_level`` for the whole
        window: a fresh job's step from nothing to its working set is not a leak.
        """
        horizon = int(parse_duration_seconds(a.horizon))
        expr = all_of(
            [
                ratio.select(),
                call("predict_linear", used.select().range(a.lookback), horizon).ge(total.select()),
                call("min_over_time", ratio.select().range(a.lookback)).ge(a.min_level),
            ]
        )
        clause = f"at the trend of the last {a.lookback} {horizon_words} runs out within {a.horizon}"
        return expr, clause

    def gpu_memory_exhaustion(self) -> AlertRule:
        a = self.a.gpu_memory_exhaustion
        expr, clause = self.predicted_exhaustion(
            a,
            catalog.GPU_DEVICE_MEMORY_UTILIZATION,
            catalog.GPU_DEVICE_MEMORY_USED,
            catalog.GPU_MEMORY_TOTAL,
            "it",
        )
        return self.rule(
            GPU_MEMORY_EXHAUSTION,
            expr,
            "An execution's GPU memory is predicted to run out.",
            f"{self.execution} has used {{{{ $value | humanizePercentage }}}} of the memory of {GPU_NAME}, "
            f"and {clause}." + self.co_holders(),
            a.for_,
        )

    # -- host RAM ----------------------------------------------------------------------------
    def host_memory_high(self) -> AlertRule:
        a = self.a.host_memory_high
        return self.rule(
            HOST_MEMORY_HIGH,
            catalog.NODE_RAM_UTILIZATION.select().ge(a.threshold),
            "A host an execution runs on is nearly out of RAM; the kernel's OOM killer may end the job.",
            f"Host {label_value(HOST_LABEL)}{self.in_cluster}, where execution {label_value(EXECUTION_LABEL)} runs, "
            "has used "
            f"{{{{ $value | humanizePercentage }}}} of its RAM for {a.for_} (threshold {percent(a.threshold)}).",
            a.for_,
        )

    def host_memory_exhaustion(self) -> AlertRule:
        a = self.a.host_memory_exhaustion
        expr, clause = self.predicted_exhaustion(
            a, catalog.NODE_RAM_UTILIZATION, catalog.NODE_RAM_USED, catalog.NODE_RAM_TOTAL, "its RAM"
        )
        return self.rule(
            HOST_MEMORY_EXHAUSTION,
            expr,
            "A host an execution runs on is predicted to run out of RAM.",
            f"Host {label_value(HOST_LABEL)}{self.in_cluster}, where execution {label_value(EXECUTION_LABEL)} runs, "
            "has used "
            f"{{{{ $value | humanizePercentage }}}} of its RAM, and {clause}.",
            a.for_,
        )

    # -- throttling --------------------------------------------------------------------------
    def reasons(self, bits: dict[int, str], violation: Series, share: float) -> Expr:
        """The clock event reason bits or the violation counter say the GPU is held down."""
        reasons = catalog.GPU_CLOCKS_EVENT_REASONS.select()
        return any_of([*(bit_set(reasons, b) for b in bits), violation.select().ge(share)])

    def power_throttling_condition(self) -> Expr:
        """Per GPU, the PowerThrottling condition (what must hold for ``for``)."""
        a = self.a.power_throttling
        ratio = catalog.GPU_POWER_TO_LIMIT.select()
        clock = catalog.GPU_SM_CLOCK.select()
        evidence = self.reasons(POWER_REASON_BITS, catalog.GPU_POWER_VIOLATION, a.min_throttled_share)
        # At the limit, confirmed by the SM clock below its peak (or by the reasons), or by
        # power alone where no clock is exported. Without a power limit series, the reasons
        # and violation counters alone decide, and without those the alert stays quiet.
        confirmed = any_of([clock.lt(catalog.GPU_SM_CLOCK_PEAK.select()), evidence, ratio.unless(clock)])
        at_limit = Paren(all_of([ratio.ge(a.threshold), Paren(confirmed)]))
        without_limit = Paren(Paren(evidence).unless(ratio, stacked=True))
        return any_of([at_limit, without_limit])

    def power_throttling(self) -> AlertRule:
        a = self.a.power_throttling
        return self.rule(
            POWER_THROTTLING,
            self.power_throttling_condition(),
            "An execution's GPU is held down by its power limit.",
            f"{self.execution}: {GPU_NAME} has been held at its power limit for {a.for_}"
            + self.gpu_value(catalog.GPU_POWER_TO_LIMIT, "humanizePercentage", ", drawing ", " of the limit")
            + self.gpu_value(catalog.GPU_SM_CLOCK, "humanize", ", SM clock at ", "Hz")
            + self.gpu_value(catalog.GPU_SM_CLOCK_PEAK, "humanize", " (peak ", "Hz)")
            + ".",
            a.for_,
        )

    def thermal_throttling_condition(self) -> Expr:
        """Per GPU, the ThermalThrottling condition (what must hold for ``for``)."""
        a = self.a.thermal_throttling
        evidence = self.reasons(THERMAL_REASON_BITS, catalog.GPU_THERMAL_VIOLATION, a.min_throttled_share)
        return any_of([catalog.GPU_TEMPERATURE.select().ge(a.threshold_celsius), Paren(evidence)])

    def thermal_throttling(self) -> AlertRule:
        a = self.a.thermal_throttling
        temp = catalog.GPU_TEMPERATURE
        return self.rule(
            THERMAL_THROTTLING,
            self.thermal_throttling_condition(),
            "An execution's GPU is hot enough to slow down.",
            f"{self.execution}: {GPU_NAME} has been hot or slowed down by temperature for {a.for_}"
            + self.gpu_value(temp, "humanize", ", at ", " °C")
            + f" (threshold {a.threshold_celsius:g} °C).",
            a.for_,
        )

    # -- waste -------------------------------------------------------------------------------
    def gpu_underutilized(self) -> AlertRule:
        a = self.a.gpu_underutilized
        execution, tenant = (EXECUTION_LABEL,), (EXECUTION_LABEL, self.cfg.api.tenant_label)
        # The busiest CPU of the hosts this tenant's execution holds GPUs on (host series carry no tenant), and its
        # GPU count (the rollups keep the tenant: rules.recording.per_tenant_rule): this execution's, not its id's.
        own_hosts = self.own(catalog.GPU_PRESENCE, tenant)
        cpu = template_query(
            aggregate("max", None, self.own(catalog.NODE_CPU_UTILIZATION, execution).and_(own_hosts, on((HOST_LABEL,))))
        )
        gpus = template_query(self.own(catalog.EXECUTION_GPU_COUNT, tenant))
        cpu_clause = (
            f"{{{{ with {cpu} | query }}}}{{{{ $cpu := . | first | value }}}}"
            f"{{{{ if ge $cpu {a.cpu_saturated} }}}}Its host CPU is saturated ({{{{ $cpu | humanizePercentage }}}}):"
            " CPU-bound pre-processing is starving the GPUs."
            "{{ else }}Its host CPU is not saturated ({{ $cpu | humanizePercentage }}):"
            " the GPUs are likely waiting on data loading or I/O.{{ end }}"
            "{{ else }}No host CPU data is recorded for it.{{ end }}"
        )
        return self.rule(
            GPU_UNDERUTILIZED,
            catalog.EXECUTION_GPU_UTILIZATION_AVG.select().lt(a.threshold),
            "An execution holds GPUs it barely uses.",
            f"{self.execution} has kept its {{{{ with {gpus} | query }}}}{{{{ . | first | value }}}} {{{{ end }}}}GPUs "
            f"at {{{{ $value | humanizePercentage }}}} mean utilisation for {a.for_} "
            f"(threshold {percent(a.threshold)}). {cpu_clause}",
            a.for_,
        )

    def stalled_condition(self) -> Expr:
        """Per GPU, the Stalled condition: kernels resident (GPU_UTIL high) while the engines idle.

        GPU_UTIL is the share of time a kernel was resident; a collective spinning on a dead peer
        keeps it at 100 % while the graphics engine does nothing. A GPU without engine activity
        (before dcgm-exporter 4.0, or a profiling lock held by Nsight) never matches.
        """
        a = self.a.gpu_stalled
        return all_of(
            [
                catalog.GPU_UTILIZATION.select().ge(a.util_threshold),
                catalog.GPU_GRAPHICS_ENGINE_ACTIVE.select().lt(a.engine_threshold),
            ]
        )

    def gpu_stalled(self) -> AlertRule:
        a = self.a.gpu_stalled
        return self.rule(
            GPU_STALLED,
            self.stalled_condition(),
            "An execution's GPU looks busy but does no work: kernels are resident while its engines idle.",
            f"{self.execution}: {GPU_NAME} has had kernels resident {{{{ $value | humanizePercentage }}}} of the time "
            f"for {a.for_}"
            + self.gpu_value(
                catalog.GPU_GRAPHICS_ENGINE_ACTIVE, "humanizePercentage", ", its graphics engine active only "
            )
            + f" (threshold {percent(a.engine_threshold)}): a hung collective or a spin-wait.",
            a.for_,
        )

    def tensor_cores_unused_condition(self) -> Expr:
        """Per GPU, the engines busy while the tensor pipes idle (the report's tensor_cores_unused)."""
        r = self.cfg.report
        return all_of(
            [
                catalog.GPU_GRAPHICS_ENGINE_ACTIVE.select().ge(r.tensor_engine_busy),
                catalog.GPU_TENSOR_ACTIVE.select().lt(r.tensor_active_threshold),
            ]
        )

    # -- telemetry ---------------------------------------------------------------------------
    def telemetry_missing(self) -> AlertRule:
        a = self.a.telemetry_missing
        # GPUs an execution held within the window, less the GPUs DCGM reports on now, with or
        # without an execution label: a job that ended leaves its GPU reporting unlabelled.
        labels = (EXECUTION_LABEL, self.cfg.api.tenant_label, *GPU_IDENTITY_LABELS)
        held = aggregate("group", labels, call("last_over_time", catalog.GPU_PRESENCE.select().range(a.window)))
        to, exporter = (
            ("DCGM", "dcgm-exporter") if self.cfg.vendors == ("nvidia",) else ("its exporter", self.exporters)
        )
        return self.rule(
            TELEMETRY_MISSING,
            join(held, "unless", on((UUID_LABEL,)), self.reporting()),
            f"A GPU an execution holds stopped reporting to {to}; its metrics and billing are incomplete.",
            f"{GPU_NAME}{self.in_cluster}, held by execution {label_value(EXECUTION_LABEL)}, "
            f"has reported nothing to {exporter} "
            f"for {a.for_}.",
            a.for_,
        )

    def reporting(self) -> Expr:
        """The GPUs DCGM reports on now, by UUID: any presence signal (catalog.PRESENCE_SIGNALS) of theirs."""
        return aggregate("group", (UUID_LABEL,), gpu_presence(self.cfg))

    def targets_down(self) -> Expr:
        """The GPU exporter targets whose last scrape failed: dcgm-exporter's (``selectors.dcgm_targets`` picks
        them) and, where vendors has amd, device-metrics-exporter's (``amd.targets``)."""
        targets = {"nvidia": self.cfg.selectors.dcgm_targets_matchers, "amd": self.cfg.amd.targets_matchers}
        return any_of([selector(UP, *targets[v]).eq(0) for v in self.cfg.vendors], stacked=False)

    def dcgm_exporter_down(self) -> AlertRule:
        a = self.a.dcgm_exporter_down
        down = self.targets_down()
        # The host the target was last seen on (its host map within telemetry_missing.window), so
        # Alertmanager can silence that host's GPU alerts; a target never seen up alerts without it.
        last_seen = call("last_over_time", catalog.GPU_EXPORTER_HOST.select().range(self.a.telemetry_missing.window))
        hosts = aggregate("topk", catalog.TARGET_LABELS, last_seen, param=1)
        named = join(down, "*", on(catalog.TARGET_LABELS, group_left=(catalog.HOST_LABEL,)), hosts)
        exporter = "dcgm-exporter" if self.cfg.vendors == ("nvidia",) else f"GPU exporter ({self.exporters})"
        return self.rule(
            DCGM_EXPORTER_DOWN,
            Binary("or", named, down, on(catalog.TARGET_LABELS), stacked=True),
            f"A {exporter} target is down; its GPUs cannot be attributed to executions.",
            f"{exporter} target {label_value(catalog.INSTANCE_LABEL)} of job "
            f"{label_value(catalog.JOB_LABEL)}{self.in_cluster} "
            f"has been down for {a.for_}: executions on its GPUs have no GPU metrics.",
            a.for_,
        )

    def xid_errors(self) -> AlertRule:
        a = self.a.xid_errors
        xid = catalog.GPU_LAST_XID.select()
        # The gauge holds the last Xid until the exporter restarts: only a change is news, and
        # a restart (back to 0) is not.
        return self.rule(
            XID_ERRORS,
            xid.gt(0).and_(call("changes", xid.range(a.window)).gt(0)),
            "An execution's GPU reported an Xid error.",
            f"{self.execution}: {GPU_NAME} reported Xid {{{{ $value }}}} within the last {a.window}.",
        )

    # -- host identity -----------------------------------------------------------------------
    def host_name_collision(self) -> AlertRule:
        a = self.a.host_name_collision
        return self.rule(
            HOST_NAME_COLLISION,
            catalog.NODE_HOST_COLLISIONS.select(),
            "Two machines claim one host name; GPUs giving only that name are joined to no host by it.",
            f"{{{{ $value }}}} machines' node_exporters claim the host name "
            f"{label_value(HOST_LABEL)}{self.in_cluster} (after "
            f"node.host_regex `{self.cfg.node.host_regex}`), which a dcgm-exporter gives: each node keeps its whole "
            "nodename, and a GPU naming its host that way finds it only by its scrape address.",
            a.for_,
        )

    def rules(self) -> tuple[AlertRule, ...]:
        return (
            self.gpu_memory_high(),
            self.gpu_memory_exhaustion(),
            self.host_memory_high(),
            self.host_memory_exhaustion(),
            self.power_throttling(),
            self.thermal_throttling(),
            self.gpu_underutilized(),
            self.gpu_stalled(),
            self.telemetry_missing(),
            self.dcgm_exporter_down(),
            self.xid_errors(),
            self.host_name_collision(),
        )


def alert_rules(cfg: Config) -> tuple[AlertRule, ...]:
    """The alert rules for ``cfg``, in the order they are written."""
    return AlertBuilder(cfg).rules()


def alert_group(cfg: Config) -> RuleGroup:
    """The alerts' rule group; it reads recorded series only, so it runs at the derived interval."""
    return RuleGroup(GROUP_NAME, GROUP_FILE, alert_rules(cfg), cfg.derived_interval)
