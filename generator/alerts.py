"""Alert rules: throttling, OOM risk, waste, missing telemetry and Xid errors, per execution.

Alerts read the recorded ``execution_gpu:`` / ``execution_node:`` / ``execution:`` series, so
they carry ``execution_id`` and name the GPU or host; only the two telemetry alerts look at raw
exporter data, because they are about its absence. Thresholds, ``for`` durations and severities
come from ``cfg.alerts``; docs/runbook.md has a section per alert, named by the alert.

Conventions (checked by ``generator.alert_lint``): a ``severity`` label, a static ``summary``, a
templated ``description`` with the values that matter, and a ``runbook_url`` to the alert's
runbook section. Descriptions fetch further values with ``query`` where the alert's own value
is not the one worth reading (the host CPU of an underused execution, say).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from generator import catalog
from generator.catalog import EXECUTION_LABEL, GPU_IDENTITY_LABELS
from generator.config import Config, PredictAlert, parse_duration_seconds
from generator.promql import aggregate, any_of, indent, selector

ALERT_PREFIX = "GpuExecution"
GROUP_NAME = "gpu-execution-pack.alerts"
GROUP_FILE = "alerts"

# Clock event reason bits (domain-notes 2.1). PromQL has no bit operators: bit k of x is set
# where floor(x / 2^k) % 2 == 1.
POWER_REASON_BITS = {0x4: "SW power cap", 0x80: "HW power brake"}
THERMAL_REASON_BITS = {0x20: "SW thermal slowdown", 0x40: "HW thermal slowdown"}

# The signal whose raw series say DCGM reports on a GPU: collected by default in every
# generation, on whole GPUs and MIG instances alike.
PRESENCE_SIGNAL = "fb_used"


@dataclass(frozen=True)
class AlertRule:
    alert: str
    expr: str
    severity: str
    summary: str
    description: str
    runbook_url: str
    for_: str = ""
    labels: dict[str, str] = field(default_factory=dict)


# --- Template snippets ------------------------------------------------------------------------
# Go templates, rendered by Prometheus at each evaluation. A per-GPU alert's $labels are
# execution_id, the tenant label and the GPU's identity; GPU_I_ID is empty on whole GPUs,
# which a selector reads as "label absent".

GPU_NAME = (
    "GPU {{ $labels.gpu }}{{ if $labels.GPU_I_ID }} (MIG instance {{ $labels.GPU_I_ID }}){{ end }}"
    " ({{ $labels.modelName }}, {{ $labels.UUID }}) on {{ $labels.hostname }}"
)
EXECUTION = "Execution {{ $labels.execution_id }}"


def gpu_value(record: str, humanize: str, before: str = "", after: str = "") -> str:
    """``before value after`` with the alerting GPU's current value of ``record``; empty if it has none."""
    query = (
        f'printf "{record}{{execution_id=%q, UUID=%q, GPU_I_ID=%q}}" $labels.execution_id $labels.UUID $labels.GPU_I_ID'
    )
    return f"{{{{ with {query} | query }}}}{before}{{{{ . | first | value | {humanize} }}}}{after}{{{{ end }}}}"


def bit_set(expr: str, bit: int) -> str:
    return f"floor({expr} / {bit}) % 2 == 1"


def percent(ratio: float) -> str:
    """A threshold as the description prints it (``0.95`` -> ``95%``)."""
    return f"{ratio * 100:g}%"


class AlertBuilder:
    """The alert rules for one configuration."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.a = cfg.alerts

    def rule(self, name: str, expr: str, severity: str, summary: str, description: str, for_: str = "") -> AlertRule:
        alert = ALERT_PREFIX + name
        url = f"{self.a.runbook_url}#{alert.lower()}"
        return AlertRule(alert, expr, severity, summary, description, url, for_)

    # -- GPU memory --------------------------------------------------------------------------
    def gpu_memory_high(self) -> AlertRule:
        a = self.a.gpu_memory_high
        return self.rule(
            "GpuMemoryHigh",
            f"execution_gpu:gpu_memory_utilization_ratio >= {a.threshold}",
            a.severity,
            "An execution's GPU memory is nearly full; its next allocations may fail with out-of-memory.",
            f"{EXECUTION} has used {{{{ $value | humanizePercentage }}}} of the memory of {GPU_NAME} "
            f"for {a.for_} (threshold {percent(a.threshold)}).",
            a.for_,
        )

    def predicted_exhaustion(
        self, a: PredictAlert, ratio: str, used: str, total: str, horizon_words: str
    ) -> tuple[str, str]:
        """The "runs out within the horizon" expression, and its description's trend clause.

        The trend only counts once the level has stayed above ``min_level`` for the whole
        window: a fresh job's step from nothing to its working set is not a leak.
        """
        horizon = int(parse_duration_seconds(a.horizon))
        expr = (
            f"{ratio}\nand\npredict_linear({used}[{a.lookback}], {horizon}) >= {total}\n"
            f"and\nmin_over_time({ratio}[{a.lookback}]) >= {a.min_level}"
        )
        clause = f"at the trend of the last {a.lookback} {horizon_words} runs out within {a.horizon}"
        return expr, clause

    def gpu_memory_exhaustion(self) -> AlertRule:
        a = self.a.gpu_memory_exhaustion
        expr, clause = self.predicted_exhaustion(
            a,
            "execution_gpu:gpu_memory_utilization_ratio",
            "execution_gpu:gpu_memory_used_bytes",
            "execution_gpu:gpu_memory_total_bytes",
            "it",
        )
        return self.rule(
            "GpuMemoryFillingUp",
            expr,
            a.severity,
            "An execution's GPU memory is predicted to run out.",
            f"{EXECUTION} has used {{{{ $value | humanizePercentage }}}} of the memory of {GPU_NAME}, and {clause}.",
            a.for_,
        )

    # -- host RAM ----------------------------------------------------------------------------
    def host_memory_high(self) -> AlertRule:
        a = self.a.host_memory_high
        return self.rule(
            "HostMemoryHigh",
            f"execution_node:system_ram_utilization_ratio >= {a.threshold}",
            a.severity,
            "A host an execution runs on is nearly out of RAM; the kernel's OOM killer may end the job.",
            f"Host {{{{ $labels.hostname }}}}, where execution {{{{ $labels.execution_id }}}} runs, has used "
            f"{{{{ $value | humanizePercentage }}}} of its RAM for {a.for_} (threshold {percent(a.threshold)}).",
            a.for_,
        )

    def host_memory_exhaustion(self) -> AlertRule:
        a = self.a.host_memory_exhaustion
        expr, clause = self.predicted_exhaustion(
            a,
            "execution_node:system_ram_utilization_ratio",
            "execution_node:system_ram_used_bytes",
            "execution_node:system_ram_total_bytes",
            "its RAM",
        )
        return self.rule(
            "HostMemoryFillingUp",
            expr,
            a.severity,
            "A host an execution runs on is predicted to run out of RAM.",
            f"Host {{{{ $labels.hostname }}}}, where execution {{{{ $labels.execution_id }}}} runs, has used "
            f"{{{{ $value | humanizePercentage }}}} of its RAM, and {clause}.",
            a.for_,
        )

    # -- throttling --------------------------------------------------------------------------
    def reasons(self, bits: dict[int, str], violation: str, share: float) -> str:
        """The clock event reason bits or the violation counter say the GPU is held down."""
        reasons = "execution_gpu:gpu_clocks_event_reasons"
        return any_of([*(bit_set(reasons, b) for b in bits), f"{violation} >= {share}"])

    def power_throttling(self) -> AlertRule:
        a = self.a.power_throttling
        ratio = "execution_gpu:gpu_power_to_limit_ratio"
        evidence = self.reasons(POWER_REASON_BITS, "execution_gpu:gpu_power_violation_ratio", a.min_throttled_share)
        # At the limit, confirmed by the SM clock below its peak (or by the reasons), or by
        # power alone where no clock is exported. Without a power limit series, the reasons
        # and violation counters alone decide, and without those the alert stays quiet.
        confirmed = any_of(
            [
                "execution_gpu:gpu_sm_clock_hertz < execution_gpu:gpu_sm_clock_peak_hertz",
                evidence,
                f"{ratio} unless execution_gpu:gpu_sm_clock_hertz",
            ]
        )
        expr = f"(\n  {ratio} >= {a.threshold}\n  and\n  (\n{indent(confirmed, 4)}\n  )\n)\nor\n"
        expr += f"(\n  (\n{indent(evidence, 4)}\n  )\n  unless\n  {ratio}\n)"
        return self.rule(
            "PowerThrottling",
            expr,
            a.severity,
            "An execution's GPU is held down by its power limit.",
            f"{EXECUTION}: {GPU_NAME} has been held at its power limit for {a.for_}"
            + gpu_value(ratio, "humanizePercentage", ", drawing ", " of the limit")
            + gpu_value("execution_gpu:gpu_sm_clock_hertz", "humanize", ", SM clock at ", "Hz")
            + gpu_value("execution_gpu:gpu_sm_clock_peak_hertz", "humanize", " (peak ", "Hz)")
            + ".",
            a.for_,
        )

    def thermal_throttling(self) -> AlertRule:
        a = self.a.thermal_throttling
        temp = "execution_gpu:gpu_temperature_celsius"
        evidence = self.reasons(THERMAL_REASON_BITS, "execution_gpu:gpu_thermal_violation_ratio", a.min_throttled_share)
        expr = f"{temp} >= {a.threshold_celsius:g}\nor\n(\n{indent(evidence)}\n)"
        return self.rule(
            "ThermalThrottling",
            expr,
            a.severity,
            "An execution's GPU is hot enough to slow down.",
            f"{EXECUTION}: {GPU_NAME} has been hot or slowed down by temperature for {a.for_}"
            + gpu_value(temp, "humanize", ", at ", " °C")
            + f" (threshold {a.threshold_celsius:g} °C).",
            a.for_,
        )

    # -- waste -------------------------------------------------------------------------------
    def gpu_underutilized(self) -> AlertRule:
        a = self.a.gpu_underutilized
        cpu = 'printf "max(execution_node:system_cpu_utilization_ratio{execution_id=%q})" $labels.execution_id'
        gpus = 'printf "execution:gpu_count{execution_id=%q}" $labels.execution_id'
        cpu_clause = (
            f"{{{{ with {cpu} | query }}}}{{{{ $cpu := . | first | value }}}}"
            f"{{{{ if ge $cpu {a.cpu_saturated} }}}}Its host CPU is saturated ({{{{ $cpu | humanizePercentage }}}}):"
            " CPU-bound pre-processing is starving the GPUs."
            "{{ else }}Its host CPU is not saturated ({{ $cpu | humanizePercentage }}):"
            " the GPUs are likely waiting on data loading or I/O.{{ end }}"
            "{{ else }}No host CPU data is recorded for it.{{ end }}"
        )
        return self.rule(
            "GpuUnderutilized",
            f"execution:gpu_utilization_ratio:avg < {a.threshold}",
            a.severity,
            "An execution holds GPUs it barely uses.",
            f"{EXECUTION} has kept its {{{{ with {gpus} | query }}}}{{{{ . | first | value }}}} {{{{ end }}}}GPUs "
            f"at {{{{ $value | humanizePercentage }}}} mean utilisation for {a.for_} "
            f"(threshold {percent(a.threshold)}). {cpu_clause}",
            a.for_,
        )

    # -- telemetry ---------------------------------------------------------------------------
    def telemetry_missing(self) -> AlertRule:
        a = self.a.telemetry_missing
        # GPUs an execution held within the window, less the GPUs DCGM reports on now, with or
        # without an execution label: a job that ended leaves its GPU reporting unlabelled.
        labels = (EXECUTION_LABEL, self.cfg.api.tenant_label, *GPU_IDENTITY_LABELS)
        held = aggregate("group", labels, f"last_over_time({catalog.GPU_PRESENCE_SERIES}[{a.window}])")
        raws = [
            selector(r.name, self.cfg.selectors.dcgm)
            for r in catalog.SIGNALS[PRESENCE_SIGNAL].raws_for(self.cfg.dcgm.generations)
        ]
        reporting = aggregate("group", ("UUID",), any_of(raws).replace("\n", " "))
        return self.rule(
            "TelemetryMissing",
            f"{held}\nunless on (UUID)\n{reporting}",
            a.severity,
            "A GPU an execution holds stopped reporting to DCGM; its metrics and billing are incomplete.",
            f"{GPU_NAME}, held by execution {{{{ $labels.execution_id }}}}, has reported nothing to dcgm-exporter "
            f"for {a.for_}.",
            a.for_,
        )

    def dcgm_exporter_down(self) -> AlertRule:
        a = self.a.dcgm_exporter_down
        return self.rule(
            "DcgmExporterDown",
            f"{selector('up', self.cfg.selectors.dcgm_targets)} == 0",
            a.severity,
            "A dcgm-exporter target is down; its GPUs cannot be attributed to executions.",
            "dcgm-exporter target {{ $labels.instance }} of job {{ $labels.job }} has been down for "
            f"{a.for_}: executions on its GPUs have no GPU metrics.",
            a.for_,
        )

    def xid_errors(self) -> AlertRule:
        a = self.a.xid_errors
        xid = "execution_gpu:gpu_last_xid"
        # The gauge holds the last Xid until the exporter restarts: only a change is news, and
        # a restart (back to 0) is not.
        return self.rule(
            "XidError",
            f"{xid} > 0 and changes({xid}[{a.window}]) > 0",
            a.severity,
            "An execution's GPU reported an Xid error.",
            f"{EXECUTION}: {GPU_NAME} reported Xid {{{{ $value }}}} within the last {a.window}.",
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
            self.telemetry_missing(),
            self.dcgm_exporter_down(),
            self.xid_errors(),
        )


def alert_rules(cfg: Config) -> tuple[AlertRule, ...]:
    """The alert rules for ``cfg``, in the order they are written."""
    return AlertBuilder(cfg).rules()
