"""The catalog: every raw metric the pack reads and every series it records.

This module is the one place that names exporter metrics, their units and labels. Rules,
scenario data, tests and docs all derive from it:

- ``UNITS``: how an exporter's unit converts to the base unit we record.
- ``SIGNALS``: one logical measurement (GPU utilisation, framebuffer used, ...) with the raw
  metric each exporter generation emits for it. Adding an exporter generation is one more
  ``RawMetric`` in the signals it renamed.
- ``API_SERIES``: the 12 series of the per-execution API (domain-notes section 1), each with
  the series it is recorded as and the formula that computes it from signals.
- ``GPU_HEALTH_SERIES`` and ``NODE_DERIVED_SERIES``: further series the alerts and dashboards read.

Formulas are PromQL templates whose ``{placeholders}`` name signals; ``generator.recording``
expands each placeholder into a normalised, attributed selector.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Literal

# --- Exporter generations -------------------------------------------------------------------
# dcgm-exporter renamed fields and changed units twice (domain-notes 2.4). A generation is
# named by the first release that emits its names; "4.8" stands for every release up to 4.8.x.
GENERATIONS: tuple[str, ...] = ("4.8", "4.9", "4.10")
GENERATION_NOTES: dict[str, str] = {
    "4.8": "dcgm-exporter up to 4.8.x: DCGM 3 names, utilisation in %, clocks in MHz, memory in MiB",
    "4.9": "4.9.x: DCGM 4.7 names, utilisation as ratio 0-1, clocks in Hz, memory in bytes",
    "4.10": "4.10 and later: as 4.9, and DCGM_FI_PROF_PCIE_{RX,TX}_BYTES become *_BYTES_PER_SECOND",
}

# --- Labels -----------------------------------------------------------------------------------
EXECUTION_LABEL = "execution_id"  # the contract's label on every recorded series
HOST_LABEL = "hostname"  # the contract's host label on every recorded series

# Labels that identify one GPU, or one MIG instance of it, on every execution_gpu: series.
# GPU_I_ID and GPU_I_PROFILE exist only on MIG instances and stay absent elsewhere.
GPU_IDENTITY_LABELS: tuple[str, ...] = (HOST_LABEL, "gpu", "UUID", "modelName", "GPU_I_ID", "GPU_I_PROFILE")
# The labels a mapping metric joins on: a GPU's UUID and, on MIG, its instance id (CEEMS style).
GPU_JOIN_LABELS: tuple[str, ...] = ("UUID", "GPU_I_ID")
MIG_INSTANCE_LABEL = "GPU_I_ID"

# (target, source) label copies applied to raw DCGM series before anything else: a non-empty
# source label overwrites the target. dcgm-exporter 4.8.3 renamed Hostname to hostname.
DCGM_LABEL_ALIASES: tuple[tuple[str, str], ...] = ((HOST_LABEL, "Hostname"),)
# Behind a Helm ServiceMonitor with honorLabels: false the workload's pod labels arrive as
# exported_* while pod/namespace name the exporter itself (domain-notes 2.3).
KUBERNETES_LABEL_ALIASES: tuple[tuple[str, str], ...] = (
    ("namespace", "exported_namespace"),
    ("pod", "exported_pod"),
)
KUBERNETES_JOIN_LABELS: tuple[str, ...] = ("namespace", "pod")
# kube-state-metrics exposes an allow-listed pod label <name> as label_<name>.
KUBE_POD_LABEL_PREFIX = "label_"

# node_exporter: host-level series are joined to executions through the node's name.
NODE_INFO_METRIC = "node_uname_info"
NODE_NAME_LABEL = "nodename"
NODE_TARGET_LABELS: tuple[str, ...] = ("job", "instance")

# --- Units --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """An exporter unit and how PromQL turns it into the base unit (``value <op> factor``).

    Conversions divide where the factor is a power of ten below one, so that integer
    percent values give the exact ratio (57 / 100 == 0.57, while 57 * 0.01 does not).
    """

    name: str
    base: str
    op: Literal["*", "/", ""] = ""
    factor: int = 1

    def to_base(self, expr: str) -> str:
        """Wrap a PromQL expression so it yields the base unit."""
        return f"{expr} {self.op} {self.factor}" if self.op else expr

    def from_base(self, value: float) -> float:
        """Convert a base-unit value to this unit (for rendering synthetic exporter samples)."""
        if self.op == "*":
            return value / self.factor
        if self.op == "/":
            return value * self.factor
        return value

    def apply(self, value: float) -> float:
        """Convert a value in this unit to the base unit, as the PromQL of to_base does."""
        if self.op == "*":
            return value * self.factor
        if self.op == "/":
            return value / self.factor
        return value


UNITS: dict[str, Unit] = {
    u.name: u
    for u in (
        Unit("ratio", "ratio"),
        Unit("percent", "ratio", "/", 100),
        Unit("bytes", "bytes"),
        Unit("MiB", "bytes", "*", 1024 * 1024),
        Unit("hertz", "hertz"),
        Unit("MHz", "hertz", "*", 1_000_000),
        Unit("watts", "watts"),
        Unit("celsius", "celsius"),
        Unit("bytes_per_second", "bytes_per_second"),
        Unit("seconds", "seconds"),
        # DCGM's violation counters: time held down, in a unit the sources disagree on (config).
        Unit("nanoseconds", "seconds", "/", 1_000_000_000),
        Unit("microseconds", "seconds", "/", 1_000_000),
        Unit("count", "count"),
        Unit("bitmask", "bitmask"),
        Unit("xid", "xid"),  # an Xid code, not a quantity
        Unit("info", "info"),  # a constant-1 identity series
    )
}
# A raw metric whose unit is this is read in the unit dcgm.violation_counter_unit names.
VIOLATION_UNIT = "violation_time"
VIOLATION_UNITS: dict[str, str] = {"ns": "nanoseconds", "us": "microseconds"}

# --- Raw metrics and signals ------------------------------------------------------------------


@dataclass(frozen=True)
class RawMetric:
    """One metric as an exporter emits it."""

    name: str
    unit: str
    type: Literal["gauge", "counter"] = "gauge"
    generations: tuple[str, ...] = GENERATIONS
    default_collected: bool = True
    matchers: str = ""  # fixed label matchers, e.g. mode="idle"


@dataclass(frozen=True)
class Signal:
    """A measurement in one base unit, read from whichever raw metric the exporter emits."""

    key: str
    exporter: Literal["dcgm", "node"]
    base_unit: str
    raws: tuple[RawMetric, ...]
    doc: str
    # Device-wide DCGM fields repeat on every MIG instance of a GPU: roll them up per UUID.
    device_wide: bool = False

    def raws_for(self, generations: tuple[str, ...]) -> tuple[RawMetric, ...]:
        """The raw metrics emitted by any of the given generations, newest name first."""
        chosen = [r for r in self.raws if set(r.generations) & set(generations)]
        return tuple(sorted(chosen, key=lambda r: -max(GENERATIONS.index(g) for g in r.generations)))


_NEW = ("4.9", "4.10")


def _dcgm(key: str, base: str, doc: str, *raws: RawMetric, device_wide: bool = False) -> Signal:
    return Signal(key, "dcgm", base, raws, doc, device_wide)


SIGNALS: dict[str, Signal] = {
    s.key: s
    for s in (
        _dcgm(
            "gpu_util",
            "ratio",
            "Share of time a kernel ran on the GPU; 0 or absent on MIG instances.",
            RawMetric("DCGM_FI_DEV_GPU_UTIL", "percent", generations=("4.8",)),
            RawMetric("DCGM_FI_DEV_GPU_UTIL_RATIO", "ratio", generations=_NEW),
        ),
        _dcgm(
            "gr_engine_active",
            "ratio",
            "Graphics/compute engine activity; the utilisation of a MIG instance.",
            RawMetric("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "ratio", generations=("4.8",)),
            RawMetric("DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", "ratio", generations=_NEW),
        ),
        _dcgm(
            "fb_used",
            "bytes",
            "Framebuffer memory in use (not MEM_COPY_UTIL, which is bandwidth).",
            RawMetric("DCGM_FI_DEV_FB_USED", "MiB", generations=("4.8",)),
            RawMetric("DCGM_FI_DEV_FB_USED_BYTES", "bytes", generations=_NEW),
        ),
        _dcgm(
            "fb_free",
            "bytes",
            "Framebuffer memory free.",
            RawMetric("DCGM_FI_DEV_FB_FREE", "MiB", generations=("4.8",)),
            RawMetric("DCGM_FI_DEV_FB_FREE_BYTES", "bytes", generations=_NEW),
        ),
        _dcgm(
            "fb_reserved",
            "bytes",
            "Framebuffer memory the driver reserves.",
            RawMetric("DCGM_FI_DEV_FB_RESERVED", "MiB", generations=("4.8",)),
            RawMetric("DCGM_FI_DEV_FB_RESERVED_BYTES", "bytes", generations=_NEW),
        ),
        _dcgm(
            "fb_capacity",
            "bytes",
            "Framebuffer size, reserved memory included.",
            RawMetric("DCGM_FI_DEV_FB_TOTAL", "MiB", generations=("4.8",), default_collected=False),
            RawMetric("DCGM_FI_DEV_FB_CAPACITY_BYTES", "bytes", generations=_NEW),
        ),
        _dcgm(
            "gpu_temp",
            "celsius",
            "GPU die temperature.",
            RawMetric("DCGM_FI_DEV_GPU_TEMP", "celsius", generations=("4.8",)),
            RawMetric("DCGM_FI_DEV_GPU_TEMP_CELSIUS", "celsius", generations=_NEW),
            device_wide=True,
        ),
        _dcgm(
            "power_usage",
            "watts",
            "Board power draw.",
            RawMetric("DCGM_FI_DEV_POWER_USAGE", "watts", generations=("4.8",)),
            RawMetric("DCGM_FI_DEV_BOARD_POWER_WATTS", "watts", generations=_NEW),
            device_wide=True,
        ),
        _dcgm(
            "power_limit_enforced",
            "watts",
            "Effective power limit after every limiter; needs a custom counters file.",
            RawMetric("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "watts", generations=("4.8",), default_collected=False),
            RawMetric(
                "DCGM_FI_DEV_BOARD_POWER_LIMIT_ENFORCED_WATTS", "watts", generations=_NEW, default_collected=False
            ),
            device_wide=True,
        ),
        _dcgm(
            "power_limit_requested",
            "watts",
            "Power management limit as requested, before other limiters.",
            RawMetric("DCGM_FI_DEV_POWER_MGMT_LIMIT", "watts", default_collected=False),
            device_wide=True,
        ),
        _dcgm(
            "sm_clock",
            "hertz",
            "SM clock.",
            RawMetric("DCGM_FI_DEV_SM_CLOCK", "MHz", generations=("4.8",)),
            RawMetric("DCGM_FI_DEV_SM_CLOCK_HERTZ", "hertz", generations=_NEW),
            device_wide=True,
        ),
        _dcgm(
            "mem_clock",
            "hertz",
            "Memory clock.",
            RawMetric("DCGM_FI_DEV_MEM_CLOCK", "MHz", generations=("4.8",)),
            RawMetric("DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", "hertz", generations=_NEW),
            device_wide=True,
        ),
        _dcgm(
            "max_sm_clock",
            "hertz",
            "Highest SM clock the GPU supports.",
            RawMetric("DCGM_FI_DEV_MAX_SM_CLOCK", "MHz", generations=("4.8",), default_collected=False),
            RawMetric("DCGM_FI_DEV_MAX_SM_CLOCK_HERTZ", "hertz", generations=_NEW, default_collected=False),
            device_wide=True,
        ),
        # PCIe profiling fields are gauges of bytes per second, not counters; RX is host to device.
        _dcgm(
            "pcie_rx",
            "bytes_per_second",
            "PCIe receive (host to device) throughput.",
            RawMetric("DCGM_FI_PROF_PCIE_RX_BYTES", "bytes_per_second", generations=("4.8", "4.9")),
            RawMetric("DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND", "bytes_per_second", generations=("4.10",)),
        ),
        _dcgm(
            "pcie_tx",
            "bytes_per_second",
            "PCIe transmit (device to host) throughput.",
            RawMetric("DCGM_FI_PROF_PCIE_TX_BYTES", "bytes_per_second", generations=("4.8", "4.9")),
            RawMetric("DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", "bytes_per_second", generations=("4.10",)),
        ),
        _dcgm(
            "clocks_event_reasons",
            "bitmask",
            "Why clocks are held down (bits in domain-notes 2.1).",
            RawMetric("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "bitmask", default_collected=False),
            RawMetric("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "bitmask", generations=("4.8",), default_collected=False),
            device_wide=True,
        ),
        # The violation counters' unit is disputed (ns in the exporter's help, us in DCGM's
        # header): dcgm.violation_counter_unit says which. Counters are read as rates, so the
        # signal is the share of wall time the clocks were held down.
        _dcgm(
            "power_violation",
            "ratio",
            "Share of time clocks were held down by the power limit.",
            RawMetric("DCGM_FI_DEV_POWER_VIOLATION", VIOLATION_UNIT, "counter", default_collected=False),
            device_wide=True,
        ),
        _dcgm(
            "thermal_violation",
            "ratio",
            "Share of time clocks were held down by temperature.",
            RawMetric("DCGM_FI_DEV_THERMAL_VIOLATION", VIOLATION_UNIT, "counter", default_collected=False),
            device_wide=True,
        ),
        _dcgm(
            "xid_last",
            "xid",
            "The last Xid code, sticky until the exporter restarts: use changes().",
            RawMetric("DCGM_FI_DEV_XID_ERRORS", "xid", generations=("4.8",)),
            RawMetric("DCGM_FI_DEV_XID_ERROR", "xid", generations=_NEW),
            device_wide=True,
        ),
        _dcgm(
            "slowdown_temp",
            "celsius",
            "Temperature at which the GPU starts slowing down.",
            RawMetric("DCGM_FI_DEV_SLOWDOWN_TEMP", "celsius", generations=("4.8",), default_collected=False),
            RawMetric("DCGM_FI_DEV_GPU_TEMP_SLOWDOWN_CELSIUS", "celsius", generations=_NEW, default_collected=False),
            device_wide=True,
        ),
        Signal("mem_total", "node", "bytes", (RawMetric("node_memory_MemTotal_bytes", "bytes"),), "Host RAM size."),
        Signal(
            "mem_available",
            "node",
            "bytes",
            (RawMetric("node_memory_MemAvailable_bytes", "bytes"),),
            "Host RAM available to new allocations without swapping.",
        ),
        Signal(
            "cpu_idle_seconds",
            "node",
            "seconds",
            (RawMetric("node_cpu_seconds_total", "seconds", "counter", matchers='mode="idle"'),),
            "Seconds each CPU spent idle.",
        ),
        Signal(
            "node_info",
            "node",
            "info",
            (RawMetric(NODE_INFO_METRIC, "info"),),
            "Constant 1 per node_exporter target; its nodename label names the host.",
        ),
    )
}

# --- Recorded series --------------------------------------------------------------------------


@dataclass(frozen=True)
class Formula:
    """One way to compute a series; a series tries its formulas in order (PromQL ``or``).

    ``template`` is PromQL whose ``{placeholders}`` name signals; ``where`` adds label
    matchers to every raw selector of the formula. A template without placeholders reads
    recorded series only and is used as it stands.
    """

    template: str
    where: str = ""
    note: str = ""


@dataclass(frozen=True)
class Series:
    """A recorded series: its name, base unit, how it is computed, and its API name if any."""

    record: str
    unit: str
    formulas: tuple[Formula, ...]
    doc: str
    api_name: str = ""
    api_unit: str = ""
    optional: bool = False  # the raw data may be missing on a healthy install


def _gpu(
    record: str, unit: str, doc: str, *formulas: Formula, api: tuple[str, str] = ("", ""), optional: bool = False
) -> Series:
    return Series(record, unit, formulas, doc, api[0], api[1], optional)


# Per-GPU series, in evaluation order: a formula may read series recorded above it.
GPU_SERIES: tuple[Series, ...] = (
    _gpu(
        "execution_gpu:gpu_utilization_ratio",
        "ratio",
        "GPU utilisation, 0-1.",
        Formula("{gpu_util}", where='GPU_I_ID=""', note="whole GPUs"),
        Formula("{gr_engine_active}", note="MIG instances, and GPUs without DCGM_FI_DEV_GPU_UTIL"),
        api=("gpuUtilizationPercent", "percent"),
    ),
    _gpu(
        "execution_gpu:gpu_memory_used_bytes",
        "bytes",
        "Framebuffer memory in use.",
        Formula("{fb_used}"),
    ),
    # Usable capacity excludes the driver's reserve, so the ratio reaches 1 exactly when
    # nothing is left to allocate, whichever of the memory fields an install collects.
    _gpu(
        "execution_gpu:gpu_memory_total_bytes",
        "bytes",
        "Framebuffer memory usable by processes.",
        Formula("{fb_used} + {fb_free}"),
        Formula("{fb_capacity} - {fb_reserved}", note="where FB_FREE is not collected"),
        Formula("{fb_capacity}", note="where neither FB_FREE nor FB_RESERVED is collected"),
    ),
    _gpu(
        "execution_gpu:gpu_memory_utilization_ratio",
        "ratio",
        "Framebuffer capacity used, 0-1.",
        Formula("execution_gpu:gpu_memory_used_bytes / (execution_gpu:gpu_memory_total_bytes > 0)"),
        api=("gpuMemoryUtilizationPercent", "percent"),
    ),
    _gpu(
        "execution_gpu:gpu_temperature_celsius",
        "celsius",
        "GPU temperature.",
        Formula("{gpu_temp}"),
        api=("gpuTemperatureCelsius", "celsius"),
    ),
    _gpu(
        "execution_gpu:gpu_power_watts",
        "watts",
        "Board power draw (device-wide on MIG).",
        Formula("{power_usage}"),
        api=("gpuPowerWatt", "watts"),
    ),
    _gpu(
        "execution_gpu:gpu_power_limit_watts",
        "watts",
        "Enforced power limit where exported, else the requested one.",
        Formula("{power_limit_enforced}"),
        Formula("{power_limit_requested}", note="where the enforced limit is not exported"),
        api=("gpuPowerLimitWatt", "watts"),
        optional=True,
    ),
    _gpu(
        "execution_gpu:gpu_sm_clock_hertz",
        "hertz",
        "SM clock.",
        Formula("{sm_clock}"),
        api=("gpuClockSmMhz", "MHz"),
    ),
    _gpu(
        "execution_gpu:gpu_memory_clock_hertz",
        "hertz",
        "Memory clock.",
        Formula("{mem_clock}"),
        api=("gpuClockMemMhz", "MHz"),
    ),
    _gpu(
        "execution_gpu:gpu_pcie_rx_bytes_per_second",
        "bytes_per_second",
        "PCIe host-to-device throughput.",
        Formula("{pcie_rx}"),
        api=("gpuPcieThroughputRxBytesPerSec", "bytes_per_second"),
        optional=True,
    ),
    _gpu(
        "execution_gpu:gpu_pcie_tx_bytes_per_second",
        "bytes_per_second",
        "PCIe device-to-host throughput.",
        Formula("{pcie_tx}"),
        api=("gpuPcieThroughputTxBytesPerSec", "bytes_per_second"),
        optional=True,
    ),
)

# Per-GPU series the alert rules read. The exporter fields behind the optional ones are not
# collected by default; where they are missing the alerts fall back to the series above.
GPU_HEALTH_SERIES: tuple[Series, ...] = (
    _gpu(
        "execution_gpu:gpu_power_to_limit_ratio",
        "ratio",
        "Board power draw as a share of the power limit.",
        Formula("execution_gpu:gpu_power_watts / (execution_gpu:gpu_power_limit_watts > 0)"),
        optional=True,
    ),
    # A running maximum: the rule reads its own previous value, and the comparison with the
    # current clock ends the series with the execution. It holds through hours of capping,
    # where a max_over_time window would forget the unthrottled clock.
    _gpu(
        "execution_gpu:gpu_sm_clock_peak_hertz",
        "hertz",
        "The GPU's highest SM clock: its max clock where exported, else the peak seen during the execution.",
        Formula("{max_sm_clock}", note="where DCGM_FI_DEV_MAX_SM_CLOCK is collected"),
        Formula("execution_gpu:gpu_sm_clock_peak_hertz > execution_gpu:gpu_sm_clock_hertz", note="earlier peak"),
        Formula("execution_gpu:gpu_sm_clock_hertz", note="first sample, or a new peak"),
    ),
    _gpu(
        "execution_gpu:gpu_clocks_event_reasons",
        "bitmask",
        "Why the clocks are held down, as DCGM's bitmask (domain-notes 2.1).",
        Formula("{clocks_event_reasons}"),
        optional=True,
    ),
    _gpu(
        "execution_gpu:gpu_power_violation_ratio",
        "ratio",
        "Share of the rate window the clocks were held down by the power limit.",
        Formula("{power_violation}"),
        optional=True,
    ),
    _gpu(
        "execution_gpu:gpu_thermal_violation_ratio",
        "ratio",
        "Share of the rate window the clocks were held down by temperature.",
        Formula("{thermal_violation}"),
        optional=True,
    ),
    _gpu(
        "execution_gpu:gpu_last_xid",
        "xid",
        "The last Xid code the GPU reported; sticky, so alerts look at its changes.",
        Formula("{xid_last}"),
    ),
)

# The series that says which GPUs an execution holds: present for every attributed GPU.
GPU_PRESENCE_SERIES = "execution_gpu:gpu_utilization_ratio"

# Host-level series. Templates compute one value per node_exporter target (job, instance);
# generator.recording joins them to the hosts each execution holds GPUs on.
NODE_SERIES: tuple[Series, ...] = (
    Series(
        "execution_node:system_ram_total_bytes",
        "bytes",
        (Formula("{mem_total}"),),
        "Host RAM size.",
        "systemRamTotalBytes",
        "bytes",
    ),
    Series(
        "execution_node:system_ram_used_bytes",
        "bytes",
        (Formula("{mem_total} - {mem_available}"),),
        "Host RAM in use (total minus available).",
        "systemRamUsedBytes",
        "bytes",
    ),
    Series(
        "execution_node:system_cpu_utilization_ratio",
        "ratio",
        (Formula("1 - avg by (job, instance) (rate({cpu_idle_seconds}[{rate_window}]))"),),
        "Host CPU busy share, averaged over its CPUs, 0-1.",
        "systemCpuUsagePercent",
        "percent",
    ),
)

# Read from the host series above, once they are joined to executions.
NODE_DERIVED_SERIES: tuple[Series, ...] = (
    Series(
        "execution_node:system_ram_utilization_ratio",
        "ratio",
        (Formula("execution_node:system_ram_used_bytes / (execution_node:system_ram_total_bytes > 0)"),),
        "Host RAM in use, 0-1.",
    ),
)

# The hosts an execution holds GPUs on; every execution_node: series is joined through it.
NODE_PRESENCE_SERIES = Series(
    "execution_node:gpu_count",
    "count",
    (Formula(f"count by ({EXECUTION_LABEL}, {HOST_LABEL}) ({GPU_PRESENCE_SERIES})"),),
    "GPUs or MIG instances the execution holds on the host.",
)

# Per-execution rollups, read from the series above. Device-wide fields (power) repeat on
# every MIG instance of a GPU, so sums of them are taken once per UUID.
EXECUTION_SERIES: tuple[Series, ...] = (
    Series(
        "execution:gpu_count",
        "count",
        (Formula(f"count by ({EXECUTION_LABEL}) ({GPU_PRESENCE_SERIES})"),),
        "GPUs or MIG instances the execution holds.",
    ),
    Series(
        "execution:host_count",
        "count",
        (Formula(f"count by ({EXECUTION_LABEL}) (execution_node:gpu_count)"),),
        "Hosts the execution holds GPUs on.",
    ),
    Series(
        "execution:gpu_utilization_ratio:avg",
        "ratio",
        (Formula(f"avg by ({EXECUTION_LABEL}) (execution_gpu:gpu_utilization_ratio)"),),
        "Mean utilisation over the execution's GPUs, 0-1.",
    ),
    Series(
        "execution:gpu_memory_utilization_ratio:max",
        "ratio",
        (Formula(f"max by ({EXECUTION_LABEL}) (execution_gpu:gpu_memory_utilization_ratio)"),),
        "Highest framebuffer capacity used among the execution's GPUs, 0-1.",
    ),
    Series(
        "execution:gpu_memory_used_bytes:sum",
        "bytes",
        (Formula(f"sum by ({EXECUTION_LABEL}) (execution_gpu:gpu_memory_used_bytes)"),),
        "Framebuffer memory in use over all the execution's GPUs (MIG instances have their own).",
    ),
    Series(
        "execution:gpu_power_watts:sum",
        "watts",
        (Formula(f"sum by ({EXECUTION_LABEL}) (max by ({EXECUTION_LABEL}, UUID) (execution_gpu:gpu_power_watts))"),),
        "Board power of the execution's GPUs, each physical GPU counted once.",
    ),
    Series(
        "execution:gpu_temperature_celsius:max",
        "celsius",
        (Formula(f"max by ({EXECUTION_LABEL}) (execution_gpu:gpu_temperature_celsius)"),),
        "Hottest of the execution's GPUs.",
    ),
)

# What cost attribution needs, per execution and GPU model: GPU-hours are the allocated count
# integrated over time, GPU-hours of work the summed utilisation integrated over time.
MODEL_LABEL = "modelName"
COST_SERIES: tuple[Series, ...] = (
    Series(
        "execution_model:gpu_count",
        "count",
        (Formula(f"count by ({EXECUTION_LABEL}, {MODEL_LABEL}) ({GPU_PRESENCE_SERIES})"),),
        "GPUs or MIG instances of each model the execution holds: integrated over time, the GPU-hours billed.",
    ),
    Series(
        "execution_model:gpu_utilization_ratio:sum",
        "ratio",
        (Formula(f"sum by ({EXECUTION_LABEL}, {MODEL_LABEL}) (execution_gpu:gpu_utilization_ratio)"),),
        "Busy GPU-equivalents of each model: integrated over time, the GPU-hours of actual work.",
    ),
)
# The price of a GPU-hour per model, recorded from the config (dashboards.price_per_gpu_hour).
PRICE_SERIES = "gpu_model:price_per_gpu_hour"

API_SERIES: tuple[Series, ...] = tuple(s for s in GPU_SERIES + NODE_SERIES if s.api_name)
ALL_SERIES: tuple[Series, ...] = (
    *GPU_SERIES,
    *GPU_HEALTH_SERIES,
    NODE_PRESENCE_SERIES,
    *NODE_SERIES,
    *NODE_DERIVED_SERIES,
    *EXECUTION_SERIES,
    *COST_SERIES,
)


def signal_keys(template: str) -> tuple[str, ...]:
    """The signal placeholders of a formula template, in order of first use."""
    keys: list[str] = []
    for _, name, _, _ in string.Formatter().parse(template):
        if name and name not in keys and name != "rate_window":
            keys.append(name)
    return tuple(keys)


def raw_metric_names() -> tuple[str, ...]:
    """Every raw metric name the catalog knows, sorted."""
    return tuple(sorted({r.name for s in SIGNALS.values() for r in s.raws}))
