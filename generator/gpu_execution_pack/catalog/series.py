"""Recorded series: every series the pack records, with its labels, unit and formulas.

Formulas are PromQL trees in which ``signal("fb_used")`` stands for a signal;
``gpu_execution_pack.rules.recording`` expands each into a normalised, attributed selector.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack.hashed import hashed_once
from gpu_execution_pack.promql import (
    Expr,
    Matcher,
    Placeholder,
    Selector,
    aggregate,
    any_of,
    call,
    join,
    labelled,
    match,
    on,
    selector,
)

from .labels import (
    DCGM_HOST_LABELS,
    DEVICE_LABELS,
    EXECUTION_LABEL,
    GPU_IDENTITY_LABELS,
    HOST_LABEL,
    KUBERNETES_JOIN_LABELS,
    MIG_INSTANCE_LABEL,
    MIG_PROFILE_LABEL,
    MODEL_LABEL,
    NODE_TARGET_LABELS,
    SHARD_LABEL,
    TARGET_LABELS,
    UUID_LABEL,
)
from .signals import SIGNALS

# --- Recorded series --------------------------------------------------------------------------


def signal(key: str) -> Placeholder:
    """A signal in a formula: ``rules.recording`` puts its normalised, attributed selector there."""
    if key not in SIGNALS:
        raise KeyError(f"no signal {key!r} in the catalog")
    return Placeholder(key)


# Prometheus' own series of the alerts its rules hold active, with the alert's labels, `alertname` and
# `alertstate` ("pending" or "firing"): written at every evaluation while an alert is active.
ALERTS_METRIC = "ALERTS"


@dataclass(frozen=True)
class DeviceSignal(Placeholder):
    """A signal as the whole GPU (or MIG instance) publishes it, on each of its holders' rows (``device``)."""


def device(key: str) -> DeviceSignal:
    """A signal in a formula, read for the whole GPU: the highest value of any series the GPU publishes,
    those that carry no execution's labels included, put on each row the signal's own selector gives.

    dcgm-exporter with ``KUBERNETES_VIRTUAL_GPUS`` publishes GPU_UTIL and FB_USED once per pod that holds the
    GPU, each the sum of that pod's processes, beside the device's own series without pod labels; every
    other field is the device's, copied to each pod. The device's value is at least any pod's, so the
    highest is the device's whichever way the exporter runs."""
    signal(key)
    return DeviceSignal(key)


@dataclass(frozen=True)
class InstanceShare(Placeholder):
    """Each GPU instance's share of its GPU (``instance_share``), in a formula over recorded series."""


@dataclass(frozen=True)
class GpuSignal(Placeholder):
    """A signal on each execution's GPU rows (``per_gpu``), in a formula over recorded series."""


def per_gpu(key: str) -> GpuSignal:
    """A signal in a formula over recorded series, read as a per-GPU series' own formula reads it: in its base
    unit, on each execution's GPU rows, with their labels (``rules.recording`` attributes it). So a recorded
    series (the device's memory use) and a signal no rule records (free memory) can be added row by row,
    without computing again what the recorded series holds."""
    signal(key)
    return GpuSignal(key)


# The signal whose series list a GPU's instances for instance_share: power is device-wide, so dcgm-exporter
# repeats it on every MIG instance, free ones too, and the AMD group gives partition 0's to every partition.
INSTANCE_SHARE_SIGNAL = "power_usage"


def instance_share() -> InstanceShare:
    """Each GPU instance's share of its physical GPU, one series per instance (``INSTANCE_KEY``): its compute
    slices (MIG_SLICES, from the profile; one for any other profile, so MI300 partitions share equally) over
    those of every instance the exporter publishes for that GPU, held or free.

    Device-wide fields (power, energy) repeat on every instance: an instance is given its share of them, so
    an execution on a 1g of seven slices is not charged the whole GPU's power, and a sum over executions
    counts a GPU once at most. A free instance's share is nobody's, as a free whole GPU's power is.
    ``rules.recording`` reads the instances from the exporters' own series, not from the executions'."""
    return InstanceShare("instance_share")


# What one GPU instance (a MIG instance, an MI300 partition) is joined on: its GPU, its id on it, and its profile.
# The profile too: an id freed and created again with another profile is another instance, never two matches.
INSTANCE_KEY: tuple[str, ...] = (UUID_LABEL, MIG_INSTANCE_LABEL, MIG_PROFILE_LABEL)


@dataclass(frozen=True)
class Formula:
    """One way to compute a series; a series tries its formulas in order (PromQL ``or``).

    ``expr`` is a PromQL tree over signals (``signal("fb_used")``) or over recorded series;
    ``where`` adds label matchers to every raw selector of the formula.
    """

    expr: Expr
    where: tuple[Matcher, ...] = ()
    note: str = ""

    @property
    def signals(self) -> tuple[str, ...]:
        """The signals the formula reads, in order of first use (``per_gpu`` ones included); empty if it reads
        recorded series only."""
        read = (n for n in self.expr.walk() if isinstance(n, Placeholder) and not isinstance(n, InstanceShare))
        return tuple(dict.fromkeys(n.name for n in read))

    @property
    def over_signals(self) -> bool:
        """Whether the formula is over raw signals, attributed to the executions as a whole; else it is over
        recorded series, each ``per_gpu`` signal in it attributed on its own."""
        return any(
            isinstance(n, Placeholder) and not isinstance(n, InstanceShare | GpuSignal) for n in self.expr.walk()
        )


# Labels of each level of recorded series. The tenant label (api.tenant_label) is added by the rules, from the
# config: to the per-GPU series, and to the execution and model rollups of them (each aggregation by the
# execution keeps it), so that two tenants' executions of one id stay apart. The host series carry none.
GPU_LABELS: tuple[str, ...] = (EXECUTION_LABEL, *GPU_IDENTITY_LABELS)
NODE_LABELS: tuple[str, ...] = (EXECUTION_LABEL, HOST_LABEL)
EXECUTION_LABELS: tuple[str, ...] = (EXECUTION_LABEL,)
MODEL_LABELS: tuple[str, ...] = (EXECUTION_LABEL, MODEL_LABEL)


@hashed_once
@dataclass(frozen=True)
class Series:
    """A recorded series: its name, labels and base unit, how it is computed, and its API name if any."""

    name: str
    unit: str
    labels: tuple[str, ...]
    formulas: tuple[Formula, ...]
    doc: str
    api_name: str = ""
    api_unit: str = ""
    # The Execution dashboard's row that plots a served series: a panel of that row, or else a panel of
    # its own at the row's end, titled by the first sentence of ``doc`` (a row the dashboard does not lay
    # out comes after the others). A served series must name one.
    row: str = ""
    # Served only where the endpoint's ``series`` parameter names it; the default answer is the rest.
    api_optional: bool = False

    def select(self, *matchers: Matcher) -> Selector:
        """A selector of this series, e.g. ``GPU_UTILIZATION.select(match(EXECUTION_LABEL, id))``."""
        return selector(self.name, *matchers)


def _gpu(
    name: str,
    unit: str,
    doc: str,
    *formulas: Formula,
    api: tuple[str, str] = ("", ""),
    row: str = "",
    api_optional: bool = False,
) -> Series:
    return Series(name, unit, GPU_LABELS, formulas, doc, api[0], api[1], row, api_optional)


# Each GPU instance's share of its GPU, recorded once per instance (not per execution's row): its power and
# its bill are counted in it. A fleet without MIG instances or MI300 partitions records none. rules.recording
# puts it first in the per-GPU group, so each evaluation that records an instance's rows has its share (the
# readers join its newest sample within Prometheus' lookback).
GPU_INSTANCE_SHARE = Series(
    "gpu_instance:gpu_share_ratio",
    "ratio",
    INSTANCE_KEY,
    (Formula(instance_share()),),
    "Each MIG instance's (or MI300 partition's) share of its GPU, 0-1: its compute slices (`<n>g` of its "
    "profile, else one) over those of every instance the exporter publishes for the GPU, held or free. Recorded "
    "with the per-GPU series, at `rule_interval`; none for a whole GPU.",
)
GPU_INSTANCE_SERIES: tuple[Series, ...] = (GPU_INSTANCE_SHARE,)


def of_instance_share(per_instance: Expr, share: Expr) -> Expr:
    """``per_instance`` (rows of GPU instances) times ``share`` (one per instance, by ``INSTANCE_KEY``): each
    instance's figure in its share of the GPU. A row whose instance has no share is left out."""
    return join(per_instance, "*", on(INSTANCE_KEY, group_left=()), share)


def in_gpus(series: Series, unrecorded_whole: bool = False) -> Expr:
    """A per-GPU series counted in GPUs: a whole GPU's rows as they are, a MIG instance's or MI300 partition's
    times the instance's share of its GPU (GPU_INSTANCE_SHARE), so an instance-hour bills its share of a
    GPU-hour. Selected apart, one product per instance row: a fleet without instances has an empty side,
    which ``or`` passes over at no cost.

    ``unrecorded_whole``, for a query over past time (a dashboard's): an instance at a time with no share recorded
    (rules older than GPU_INSTANCE_SHARE, before an upgrade) counts as a whole GPU, as the model rollups recorded
    then and the report count it, rather than not at all. Its share is 1 there, so each instance row stays one
    product whatever the time: a series with a name before and none after would be two. Matched on the instance
    alone: the recorded share may carry labels (the cluster) that the rows grouped by the instance do not."""
    whole = series.select(match(MIG_INSTANCE_LABEL, ""))
    rows = series.select(labelled(MIG_INSTANCE_LABEL))
    share: Expr = GPU_INSTANCE_SHARE.select()
    if unrecorded_whole:
        share = any_of([share, aggregate("group", INSTANCE_KEY, rows)], matching=on(INSTANCE_KEY))
    return any_of([whole, of_instance_share(rows, share)])


# Per-GPU series, in evaluation order: a formula may read series recorded above it.
GPU_UTILIZATION = _gpu(
    "execution_gpu:gpu_utilization_ratio",
    "ratio",
    "GPU utilisation, 0-1.",
    Formula(signal("gpu_util"), where=(match(MIG_INSTANCE_LABEL, ""),), note="whole GPUs"),
    Formula(signal("gr_engine_active"), note="MIG instances, and GPUs without DCGM_FI_DEV_GPU_UTIL"),
    api=("gpuUtilizationPercent", "percent"),
    row="Utilisation",
)
GPU_MEMORY_USED = _gpu(
    "execution_gpu:gpu_memory_used_bytes",
    "bytes",
    "Framebuffer memory in use.",
    Formula(signal("fb_used")),
)
GPU_DEVICE_MEMORY_USED = _gpu(
    "execution_gpu:gpu_device_memory_used_bytes",
    "bytes",
    "Framebuffer memory in use on the whole GPU, by every holder: the execution's own where it holds it alone.",
    Formula(device("fb_used")),
)
# Usable capacity excludes the driver's reserve, so the ratio reaches 1 exactly when nothing is
# left to allocate, whichever of the memory fields an install collects.
GPU_MEMORY_TOTAL = _gpu(
    "execution_gpu:gpu_memory_total_bytes",
    "bytes",
    "Framebuffer memory usable by processes: the GPU's, however many executions share it.",
    # The device's use, not the execution's own: with per-pod values own + free is less than the GPU. Read
    # from its recorded series: computing it again here was the per-GPU group's costliest rule at 10,000 GPUs.
    Formula(GPU_DEVICE_MEMORY_USED.select() + per_gpu("fb_free")),
    Formula(signal("fb_capacity") - signal("fb_reserved"), note="where FB_FREE is not collected"),
    Formula(signal("fb_capacity"), note="where neither FB_FREE nor FB_RESERVED is collected"),
)
GPU_MEMORY_UTILIZATION = _gpu(
    "execution_gpu:gpu_memory_utilization_ratio",
    "ratio",
    "Framebuffer capacity used, 0-1.",
    Formula(GPU_MEMORY_USED.select() / GPU_MEMORY_TOTAL.select().gt(0)),
    api=("gpuMemoryUtilizationPercent", "percent"),
    row="GPU memory",
)
GPU_TEMPERATURE = _gpu(
    "execution_gpu:gpu_temperature_celsius",
    "celsius",
    "GPU temperature.",
    Formula(signal("gpu_temp")),
    api=("gpuTemperatureCelsius", "celsius"),
    row="Power and temperature",
)
GPU_POWER = _gpu(
    "execution_gpu:gpu_power_watts",
    "watts",
    "Board power draw (device-wide on MIG).",
    Formula(signal("power_usage")),
    api=("gpuPowerWatt", "watts"),
    row="Power and temperature",
)
GPU_POWER_LIMIT = _gpu(
    "execution_gpu:gpu_power_limit_watts",
    "watts",
    "Enforced power limit where exported, else the requested one.",
    Formula(signal("power_limit_enforced")),
    Formula(signal("power_limit_requested"), note="where the enforced limit is not exported"),
    api=("gpuPowerLimitWatt", "watts"),
    row="Power and temperature",
)
GPU_SM_CLOCK = _gpu(
    "execution_gpu:gpu_sm_clock_hertz",
    "hertz",
    "SM clock.",
    Formula(signal("sm_clock")),
    api=("gpuClockSmMhz", "MHz"),
    row="Clocks",
)
GPU_MEMORY_CLOCK = _gpu(
    "execution_gpu:gpu_memory_clock_hertz",
    "hertz",
    "Memory clock.",
    Formula(signal("mem_clock")),
    api=("gpuClockMemMhz", "MHz"),
    row="Clocks",
)
GPU_PCIE_RX = _gpu(
    "execution_gpu:gpu_pcie_rx_bytes_per_second",
    "bytes_per_second",
    "PCIe host-to-device throughput.",
    Formula(signal("pcie_rx")),
    api=("gpuPcieThroughputRxBytesPerSec", "bytes_per_second"),
    row="PCIe",
)
GPU_PCIE_TX = _gpu(
    "execution_gpu:gpu_pcie_tx_bytes_per_second",
    "bytes_per_second",
    "PCIe device-to-host throughput.",
    Formula(signal("pcie_tx")),
    api=("gpuPcieThroughputTxBytesPerSec", "bytes_per_second"),
    row="PCIe",
)
# What the GPU's engines really did. GPU_UTIL counts time with *a* kernel resident, so a job
# spinning in a hung NCCL collective reads 100 %; the profiling fields count active cycles.
GPU_GRAPHICS_ENGINE_ACTIVE = _gpu(
    "execution_gpu:gpu_graphics_engine_active_ratio",
    "ratio",
    "Graphics/compute engine activity, 0-1: the share of time the engines worked.",
    Formula(signal("gr_engine_active")),
    api=("gpuGraphicsEngineActivePercent", "percent"),
    row="Utilisation",
    api_optional=True,
)
GPU_TENSOR_ACTIVE = _gpu(
    "execution_gpu:gpu_tensor_active_ratio",
    "ratio",
    "Tensor-pipe activity, 0-1: near 0 on a job that does its matrix maths without tensor cores.",
    Formula(signal("tensor_active")),
    api=("gpuTensorActivePercent", "percent"),
    row="Work truth",
    api_optional=True,
)
GPU_DRAM_ACTIVE = _gpu(
    "execution_gpu:gpu_dram_active_ratio",
    "ratio",
    "Device-memory interface activity, 0-1: memory bandwidth in use.",
    Formula(signal("dram_active")),
    api=("gpuDramActivePercent", "percent"),
    row="Work truth",
    api_optional=True,
)
GPU_SM_ACTIVE = _gpu(
    "execution_gpu:gpu_sm_active_ratio",
    "ratio",
    "SM activity, 0-1: the share of cycles an SM had a warp resident (with the DCP counters file).",
    Formula(signal("sm_active")),
    api=("gpuSmActivePercent", "percent"),
    row="Work truth",
    api_optional=True,
)
GPU_SM_OCCUPANCY = _gpu(
    "execution_gpu:gpu_sm_occupancy_ratio",
    "ratio",
    "SM occupancy, 0-1: resident warps as a share of the maximum (with the DCP counters file).",
    Formula(signal("sm_occupancy")),
    api=("gpuSmOccupancyPercent", "percent"),
    row="Work truth",
    api_optional=True,
)
GPU_ACTIVITY_SERIES: tuple[Series, ...] = (
    GPU_GRAPHICS_ENGINE_ACTIVE,
    GPU_TENSOR_ACTIVE,
    GPU_DRAM_ACTIVE,
    GPU_SM_ACTIVE,
    GPU_SM_OCCUPANCY,
)

GPU_SERIES: tuple[Series, ...] = (
    GPU_UTILIZATION,
    GPU_MEMORY_USED,
    GPU_MEMORY_TOTAL,
    GPU_MEMORY_UTILIZATION,
    GPU_TEMPERATURE,
    GPU_POWER,
    GPU_POWER_LIMIT,
    GPU_SM_CLOCK,
    GPU_MEMORY_CLOCK,
    GPU_PCIE_RX,
    GPU_PCIE_TX,
)

# Per-GPU series the alert rules read. The exporter fields behind some are not collected by
# default; where they are missing the alerts fall back to the series above.
GPU_POWER_TO_LIMIT = _gpu(
    "execution_gpu:gpu_power_to_limit_ratio",
    "ratio",
    "Board power draw as a share of the power limit.",
    Formula(GPU_POWER.select() / GPU_POWER_LIMIT.select().gt(0)),
)
# A running maximum: the rule reads its own previous value, and the comparison with the current
# clock ends the series with the execution. It holds through hours of capping, where a
# max_over_time window would forget the unthrottled clock.
_SM_CLOCK_PEAK_NAME = "execution_gpu:gpu_sm_clock_peak_hertz"
GPU_SM_CLOCK_PEAK = _gpu(
    _SM_CLOCK_PEAK_NAME,
    "hertz",
    "The GPU's highest SM clock: its max clock where exported, else the peak seen during the execution.",
    Formula(signal("max_sm_clock"), note="where DCGM_FI_DEV_MAX_SM_CLOCK is collected"),
    Formula(selector(_SM_CLOCK_PEAK_NAME).gt(GPU_SM_CLOCK.select()), note="earlier peak"),
    Formula(GPU_SM_CLOCK.select(), note="first sample, or a new peak"),
)
GPU_CLOCKS_EVENT_REASONS = _gpu(
    "execution_gpu:gpu_clocks_event_reasons",
    "bitmask",
    "Why the clocks are held down, as DCGM's bitmask "
    "(0x4 SW power cap, 0x20 SW thermal, 0x40 HW thermal, 0x80 HW power brake).",
    Formula(signal("clocks_event_reasons")),
)
GPU_POWER_VIOLATION = _gpu(
    "execution_gpu:gpu_power_violation_ratio",
    "ratio",
    "Share of the rate window the clocks were held down by the power limit.",
    Formula(signal("power_violation")),
)
GPU_THERMAL_VIOLATION = _gpu(
    "execution_gpu:gpu_thermal_violation_ratio",
    "ratio",
    "Share of the rate window the clocks were held down by temperature.",
    Formula(signal("thermal_violation")),
)
GPU_LAST_XID = _gpu(
    "execution_gpu:gpu_last_xid",
    "xid",
    "The last Xid code the GPU reported; sticky, so alerts look at its changes.",
    Formula(signal("xid_last")),
)
# The energy counter as a running total in joules: increase() over a span is the energy used in it.
GPU_ENERGY = _gpu(
    "execution_gpu:gpu_energy_consumed_joules",
    "joules",
    "Energy the GPU consumed since its driver loaded (device-wide on MIG): take increase() over a span.",
    Formula(signal("energy")),
)
# A GPU held by several executions at once (time-slicing, MPS): dcgm-exporter publishes its series
# once per pod, with identical values (NVML cannot tell whose work they are), except that with
# KUBERNETES_VIRTUAL_GPUS GPU_UTIL and FB_USED are each pod's own (its processes' sum) beside the
# device's. Billing gives each holder an equal share at each moment (GPU_SHARE); work and energy go
# in proportion to the holders' utilisation (GPU_WORK_SHARE), which is the equal share where every
# holder reads the same (the copied values) or all are idle. Sums over executions count the GPU once.
GPU_DEVICE_UTILIZATION = _gpu(
    "execution_gpu:gpu_device_utilization_ratio",
    "ratio",
    "The whole GPU's utilisation, 0-1, every holder's work: the execution's own where it holds the GPU alone.",
    Formula(device("gpu_util"), where=(match(MIG_INSTANCE_LABEL, ""),), note="whole GPUs"),
    Formula(device("gr_engine_active"), note="MIG instances, and GPUs without DCGM_FI_DEV_GPU_UTIL"),
)
GPU_SHARE = _gpu(
    "execution_gpu:gpu_share_ratio",
    "ratio",
    "The execution's share of the GPU (or MIG instance): 1, or 1/N while N executions hold it at once.",
    Formula(
        join(
            GPU_UTILIZATION.select() * 0,
            "+",
            on(DEVICE_LABELS, group_left=()),
            1 / aggregate("count", DEVICE_LABELS, GPU_UTILIZATION.select()),
        )
    ),
)
GPU_WORK_SHARE = _gpu(
    "execution_gpu:gpu_work_share_ratio",
    "ratio",
    "The execution's share of the GPU's work: its utilisation over the sum of its holders' (the equal "
    "share where all are idle); 1 where it holds the GPU alone.",
    Formula(
        join(
            GPU_UTILIZATION.select(),
            "/",
            on(DEVICE_LABELS, group_left=()),
            aggregate("sum", DEVICE_LABELS, GPU_UTILIZATION.select()).gt(0),
        )
    ),
    # Times 1: arithmetic drops the metric name, so a range query over the rule (the backfill's) reads one
    # series per GPU whichever formula held at each step.
    Formula(GPU_SHARE.select() * 1, note="every holder idle"),
)
GPU_WORKED = _gpu(
    "execution_gpu:gpu_worked_ratio",
    "ratio",
    "The GPU's utilisation times the execution's share of its work: integrated over time, its GPU-hours of work.",
    Formula(GPU_DEVICE_UTILIZATION.select() * GPU_WORK_SHARE.select()),
)
GPU_POWER_ATTRIBUTED = _gpu(
    "execution_gpu:gpu_power_attributed_watts",
    "watts",
    "Board power times the execution's share of the GPU's work, on a MIG instance or MI300 partition also "
    "times the instance's share of the GPU (its compute slices over all instances'): what its energy is counted "
    "from.",
    # Whole GPUs and instances selected apart: one product per row, where trying the instances' formula first
    # and the plain one after computed the product twice for every whole GPU.
    Formula(
        GPU_POWER.select(match(MIG_INSTANCE_LABEL, "")) * GPU_WORK_SHARE.select(match(MIG_INSTANCE_LABEL, "")),
        note="whole GPUs",
    ),
    Formula(
        of_instance_share(
            GPU_POWER.select(labelled(MIG_INSTANCE_LABEL)) * GPU_WORK_SHARE.select(labelled(MIG_INSTANCE_LABEL)),
            GPU_INSTANCE_SHARE.select(),
        ),
        note="GPU instances",
    ),
)
GPU_SHARE_SERIES: tuple[Series, ...] = (
    GPU_DEVICE_UTILIZATION,
    GPU_DEVICE_MEMORY_USED,
    GPU_SHARE,
    GPU_WORK_SHARE,
    GPU_WORKED,
    GPU_POWER_ATTRIBUTED,
)

# Prometheus' default lookback (staleness) window: an instant selector reads a sample up to this old.
LOOKBACK_SECONDS = 300

# The seconds each per-GPU sample stands for, measured from the data: the time since the GPU's previous
# utilisation sample (a missed evaluation shows as a longer gap, counted as report.timeline counts gaps up to the
# lookback). Summed over a span, the time held, at whatever interval the rules ran, changed to or missed, without
# reading every sample: what the fleet ranking counts GPU-hours in. rules.recording builds it from the config (its
# rule_interval, for a series' very first sample).
GPU_SAMPLE_SECONDS = Series(
    "execution_gpu:gpu_sample_seconds",
    "seconds",
    GPU_LABELS,
    (),
    "Seconds the GPU's utilisation sample stands for: the time since its previous one (for a first sample, or the "
    "first after a gap longer than the lookback, since the group's previous evaluation, else `rule_interval`). "
    "Summed over a span, the time the execution held the GPU.",
)
GPU_TIME_SERIES: tuple[Series, ...] = (GPU_SAMPLE_SECONDS,)

# The memory alerts' input, with the other alert inputs at derived_rule_interval: the alerts and their report
# condition read it, the report computes a GPU's fill at its end from the per-GPU series themselves. (In the per-GPU
# group it took a place that group, at Mimir's 20 rules a group, has no more of.)
GPU_DEVICE_MEMORY_UTILIZATION = _gpu(
    "execution_gpu:gpu_device_memory_utilization_ratio",
    "ratio",
    "Framebuffer capacity used on the whole GPU by every holder, 0-1: what an out-of-memory error follows. "
    "Recorded at `derived_rule_interval`, for the memory alerts.",
    Formula(GPU_DEVICE_MEMORY_USED.select() / GPU_MEMORY_TOTAL.select().gt(0)),
)

GPU_HEALTH_SERIES: tuple[Series, ...] = (
    GPU_POWER_TO_LIMIT,
    GPU_DEVICE_MEMORY_UTILIZATION,
    GPU_SM_CLOCK_PEAK,
    GPU_CLOCKS_EVENT_REASONS,
    GPU_POWER_VIOLATION,
    GPU_THERMAL_VIOLATION,
    GPU_LAST_XID,
    GPU_ENERGY,
)

# 1 while the condition of the throttling alert holds for the GPU, else 0 (never absent while the
# GPU is held, so a span's sum counts throttled samples). rules.recording builds them from the
# alerts' own conditions, so the report's throttled time and the alerts cannot disagree.
GPU_POWER_THROTTLED = Series(
    "execution_gpu:gpu_power_throttled",
    "bool",
    GPU_LABELS,
    (),
    "1 while the PowerThrottling alert's condition holds for the GPU, else 0.",
)
GPU_THERMAL_THROTTLED = Series(
    "execution_gpu:gpu_thermal_throttled",
    "bool",
    GPU_LABELS,
    (),
    "1 while the ThermalThrottling alert's condition holds for the GPU, else 0.",
)
GPU_STALLED = Series(
    "execution_gpu:gpu_stalled",
    "bool",
    GPU_LABELS,
    (),
    "1 while the Stalled alert's condition holds for the GPU (kernels resident, engines idle), else 0.",
)
# Where the tensor pipes idle while the engines work: read by the report's tensor_cores_unused.
GPU_TENSOR_CORES_UNUSED = Series(
    "execution_gpu:gpu_tensor_cores_unused",
    "bool",
    GPU_LABELS,
    (),
    "1 while the graphics engine is busy (report.tensor_engine_busy) and the tensor pipes under "
    "report.tensor_active_threshold, 0 while it has activity figures otherwise.",
)
# Where the framebuffer is nearly full: the report's time over the out-of-memory threshold sums it,
# which costs a read of the samples where a subquery over the comparison re-evaluated it per step.
GPU_MEMORY_HIGH = Series(
    "execution_gpu:gpu_memory_high",
    "bool",
    GPU_LABELS,
    (),
    "1 while the GpuMemoryHigh alert's condition holds for the GPU (memory at or above "
    "alerts.gpu_memory_high.threshold), else 0.",
)
GPU_CONDITION_SERIES: tuple[Series, ...] = (
    GPU_POWER_THROTTLED,
    GPU_THERMAL_THROTTLED,
    GPU_STALLED,
    GPU_TENSOR_CORES_UNUSED,
    GPU_MEMORY_HIGH,
)


def amd_publishes(series: Series) -> bool:
    """Whether AMD's exporter publishes what some formula of ``series`` reads (every signal of it); a series
    over recorded series only is taken to follow its inputs."""
    formulas = [f for f in series.formulas if f.signals]
    return not formulas or any(all(SIGNALS[k].amd is not None for k in f.signals) for f in formulas)


# The series that says which GPUs an execution holds: present for every attributed GPU.
GPU_PRESENCE = GPU_UTILIZATION

# The hosts an execution holds GPUs on; every execution_node: series is joined through it.
NODE_GPU_COUNT = Series(
    "execution_node:gpu_count",
    "count",
    NODE_LABELS,
    (Formula(aggregate("count", NODE_LABELS, GPU_PRESENCE.select())),),
    "GPUs or MIG instances the execution holds on the host.",
)

# Host-level series. Formulas compute one value per node_exporter target (job, instance);
# rules.recording joins them to the hosts each execution holds GPUs on. Counter signals are
# read per target as the average of their CPUs' rates (NODE_COUNTER_RATES).
NODE_RAM_TOTAL = Series(
    "execution_node:system_ram_total_bytes",
    "bytes",
    NODE_LABELS,
    (Formula(signal("mem_total")),),
    "Host RAM size.",
    "systemRamTotalBytes",
    "bytes",
    row="Hosts",
)
NODE_RAM_USED = Series(
    "execution_node:system_ram_used_bytes",
    "bytes",
    NODE_LABELS,
    (Formula(signal("mem_total") - signal("mem_available")),),
    "Host RAM in use (total minus available).",
    "systemRamUsedBytes",
    "bytes",
    row="Hosts",
)
NODE_CPU_UTILIZATION = Series(
    "execution_node:system_cpu_utilization_ratio",
    "ratio",
    NODE_LABELS,
    # Clamped: a ratio never leaves [0, 1], whatever a counter does within the window.
    (Formula(call("clamp", 1 - aggregate("avg", NODE_TARGET_LABELS, signal("cpu_idle_seconds")), 0, 1)),),
    "Host CPU busy share, averaged over its CPUs, 0-1.",
    "systemCpuUsagePercent",
    "percent",
    row="Hosts",
)
NODE_SERIES: tuple[Series, ...] = (NODE_RAM_TOTAL, NODE_RAM_USED, NODE_CPU_UTILIZATION)

# Read from the host series above, once they are joined to executions.
NODE_RAM_UTILIZATION = Series(
    "execution_node:system_ram_utilization_ratio",
    "ratio",
    NODE_LABELS,
    (Formula(NODE_RAM_USED.select() / NODE_RAM_TOTAL.select().gt(0)),),
    "Host RAM in use, 0-1.",
)
NODE_DERIVED_SERIES: tuple[Series, ...] = (NODE_RAM_UTILIZATION,)


def _execution(name: str, unit: str, expr: Expr, doc: str) -> Series:
    return Series(name, unit, EXECUTION_LABELS, (Formula(expr),), doc)


def _by_execution(op: str, series: Series) -> Expr:
    return aggregate(op, EXECUTION_LABELS, series.select())


# Per-execution rollups, read from the series above. Device-wide fields repeat on every MIG instance of a GPU:
# power is summed as attributed, each instance in its share of the GPU (GPU_POWER_ATTRIBUTED).
EXECUTION_GPU_COUNT = _execution(
    "execution:gpu_count", "count", _by_execution("count", GPU_PRESENCE), "GPUs or MIG instances the execution holds."
)
# Counted from the GPU series, not execution_node:gpu_count: the host series carry no tenant, and the rules keep
# the tenant on every execution rollup (rules.recording), so two tenants' executions of one id count apart.
EXECUTION_HOST_COUNT = _execution(
    "execution:host_count",
    "count",
    aggregate("count", EXECUTION_LABELS, aggregate("group", NODE_LABELS, GPU_PRESENCE.select())),
    "Hosts the execution holds GPUs on.",
)
EXECUTION_GPU_UTILIZATION_AVG = _execution(
    "execution:gpu_utilization_ratio:avg",
    "ratio",
    _by_execution("avg", GPU_UTILIZATION),
    "Mean utilisation over the execution's GPUs, 0-1.",
)
EXECUTION_GPU_MEMORY_UTILIZATION_MAX = _execution(
    "execution:gpu_memory_utilization_ratio:max",
    "ratio",
    _by_execution("max", GPU_MEMORY_UTILIZATION),
    "Highest framebuffer capacity used among the execution's GPUs, 0-1.",
)
EXECUTION_GPU_MEMORY_USED_SUM = _execution(
    "execution:gpu_memory_used_bytes:sum",
    "bytes",
    _by_execution("sum", GPU_MEMORY_USED),
    "Framebuffer memory in use over all the execution's GPUs (MIG instances have their own).",
)
EXECUTION_GPU_POWER_SUM = _execution(
    "execution:gpu_power_watts:sum",
    "watts",
    _by_execution("sum", GPU_POWER_ATTRIBUTED),
    "Board power of the execution's GPUs: a shared one's in its share of the work, a MIG instance's in its share "
    "of the GPU.",
)
EXECUTION_GPU_TEMPERATURE_MAX = _execution(
    "execution:gpu_temperature_celsius:max",
    "celsius",
    _by_execution("max", GPU_TEMPERATURE),
    "Hottest of the execution's GPUs.",
)
# Mean activity over the execution's GPUs (or MIG instances): each is held once, so each counts once.
EXECUTION_ACTIVITY_SERIES: tuple[Series, ...] = tuple(
    _execution(
        f"execution:{series.name.split(':')[1]}:avg",
        "ratio",
        _by_execution("avg", series),
        f"Mean over the execution's GPUs of: {series.doc[0].lower()}{series.doc[1:]}",
    )
    for series in GPU_ACTIVITY_SERIES
)
EXECUTION_SERIES: tuple[Series, ...] = (
    EXECUTION_GPU_COUNT,
    EXECUTION_HOST_COUNT,
    EXECUTION_GPU_UTILIZATION_AVG,
    EXECUTION_GPU_MEMORY_UTILIZATION_MAX,
    EXECUTION_GPU_MEMORY_USED_SUM,
    EXECUTION_GPU_POWER_SUM,
    EXECUTION_GPU_TEMPERATURE_MAX,
    *EXECUTION_ACTIVITY_SERIES,
)

# The report's waste figures as recorded series (a subquery over the comparison per report re-evaluated
# it at every step of the span). Read per execution and tenant: the rules average the GPUs that carry
# the tenant label (api.tenant_label) by both, so a tenant's report counts its own GPUs only.
# rules.recording builds them from the config's threshold.
EXECUTION_UNDERUTILIZED = Series(
    "execution:gpu_underutilized",
    "bool",
    EXECUTION_LABELS,
    (),
    "1 while the execution's mean GPU utilisation is under alerts.gpu_underutilized.threshold, else 0 "
    "while it holds GPUs.",
)
EXECUTION_CPU_WHILE_UNDERUTILIZED = Series(
    "execution:system_cpu_utilization_ratio_while_underutilized:max",
    "ratio",
    EXECUTION_LABELS,
    (),
    "The busiest host CPU of the execution, 0-1, recorded only while execution:gpu_underutilized is 1: "
    "averaged over a span, the host CPU while the GPUs waited.",
)
EXECUTION_CONDITION_SERIES: tuple[Series, ...] = (EXECUTION_UNDERUTILIZED, EXECUTION_CPU_WHILE_UNDERUTILIZED)

# What cost attribution needs, per execution and GPU model: GPU-hours are the allocated count
# integrated over time, GPU-hours of work the summed utilisation integrated over time; a GPU
# several executions hold at once counts in each one's share (GPU_SHARE), a MIG instance or MI300
# partition in its share of the GPU (in_gpus): GPU clouds price a slice by its share of the GPU.
MODEL_GPU_COUNT = Series(
    "execution_model:gpu_count",
    "count",
    MODEL_LABELS,
    (Formula(aggregate("sum", MODEL_LABELS, in_gpus(GPU_SHARE))),),
    "GPUs of each model the execution holds, a shared one in its share, a MIG instance or MI300 partition in "
    "its share of the GPU (a 3g of seven slices: 3/7): integrated over time, the GPU-hours billed.",
)
MODEL_GPU_UTILIZATION_SUM = Series(
    "execution_model:gpu_utilization_ratio:sum",
    "ratio",
    MODEL_LABELS,
    (Formula(aggregate("sum", MODEL_LABELS, in_gpus(GPU_WORKED))),),
    "Busy GPU-equivalents of each model, a shared GPU in its share, a MIG instance or MI300 partition in its "
    "share of the GPU: integrated over time, the GPU-hours of actual work.",
)
COST_SERIES: tuple[Series, ...] = (MODEL_GPU_COUNT, MODEL_GPU_UTILIZATION_SUM)
# The price of a GPU-hour per model, recorded from the config (dashboards.price_per_gpu_hour);
# rules.recording builds its expression from the config.
PRICE = Series(
    "gpu_model:price_per_gpu_hour",
    "price",
    (MODEL_LABEL,),
    (),
    "Price of a GPU-hour per `modelName`, in `dashboards.currency`.",
)

# The host of every scrape target, recorded first; the formulas depend on the config (host_regex,
# selectors), so rules.recording builds them.
_TARGET_HOST = (*TARGET_LABELS, HOST_LABEL)
DCGM_TARGET_LABELS = Series(
    "gpu_exporter:host_labels",
    "info",
    (*TARGET_LABELS, *DCGM_HOST_LABELS, *KUBERNETES_JOIN_LABELS),
    (),
    "The host labels each dcgm-exporter target publishes (one pass over its GPUs): what its host is resolved from.",
)
NODE_HOST_COLLISIONS = Series(
    "node_exporter:host_name_collisions",
    "count",
    (HOST_LABEL,),
    (),
    "How many machines (distinct node_exporter nodenames) claim one host name: a node named exactly by a "
    "dcgm-exporter claims its nodename, any other its nodename after node.host_regex. Only names that a "
    "dcgm-exporter's host label, after node.host_regex, also gives. No GPU is joined to a host by such a name.",
)
NODE_EXPORTER_HOST = Series(
    "node_exporter:host_info",
    "info",
    _TARGET_HOST,
    (),
    "The host each node_exporter target is on: its nodename as a dcgm-exporter spells it exactly, else its "
    "nodename after node.host_regex (its whole nodename where that name collides), or, for a placeholder "
    "nodename, the dcgm-exporter host scraped from the same address, else that address.",
)
GPU_EXPORTER_HOST = Series(
    "gpu_exporter:host_info",
    "info",
    _TARGET_HOST,
    (),
    "The host each dcgm-exporter target is on: the first of its hostname or Hostname label, its pod's "
    "Kubernetes node that names a known host exactly, then the same after node.host_regex (never a colliding "
    "name), or the node_exporter at its address; else its own label.",
)
# A node counter is rated from one series per target: a host has 64 to 224 CPUs, and rating each
# CPU's counter over the rate windows in every evaluation cost the host CPU series most of its
# group's time at fleet scale (docs/benchmarks.md). One pass per evaluation records the average
# over a target's CPUs of each one's last rate (irate over rate_window_fallback: the last two
# samples, whatever the scrape interval up to half that window); the host series average that
# over rate_window. At a 15 s scrape and evaluation each recorded sample is one scrape interval,
# so the average over 1m is the counters' rate over 1m.
NODE_CPU_IDLE_RATE = Series(
    "node_exporter:cpu_idle_seconds:avg_irate",
    "ratio",
    TARGET_LABELS,
    (Formula(aggregate("avg", NODE_TARGET_LABELS, signal("cpu_idle_seconds"))),),
    "Idle seconds per second of each node_exporter target, averaged over its CPUs, from each CPU's last two "
    "samples: the host CPU series average it over rate_window (where node.cpu_rate_interval is empty).",
)
# The most a per-CPU rate of each node counter can really be (idle seconds per second: 1), with 10 %
# for scrape timing jitter. irate() reads a counter that went down as a reset worth its whole value:
# one CPU's idle seconds stepping back (node_exporter before 1.1 on some kernels) lifts its target's average
# far above this (a counter of 200 s over a 15 s scrape on a 128-CPU host already adds 0.1), and the
# host series have no value while such a sample lies within rate_window. A real reset (a reboot)
# reads as at most the seconds since boot, and passes.
NODE_COUNTER_RATES: dict[str, tuple[Series, float]] = {"cpu_idle_seconds": (NODE_CPU_IDLE_RATE, 1.1)}
# Where node.cpu_rate_interval records the rate less often than the host series read it: each CPU's
# rate() over the time since the last evaluation (at least rate_window_fallback), so the recorded
# rates cover the time between them instead of sampling one scrape interval of each. The same ceiling.
NODE_CPU_IDLE_RATE_OVER_INTERVAL = Series(
    "node_exporter:cpu_idle_seconds:avg_rate",
    "ratio",
    TARGET_LABELS,
    NODE_CPU_IDLE_RATE.formulas,
    "Idle seconds per second of each node_exporter target, averaged over its CPUs, each CPU's rate over "
    "node.cpu_rate_interval (or rate_window_fallback, if longer), recorded at that interval where it is set: "
    "the host CPU series average it over twice that interval (or rate_window, if longer).",
)
NODE_COUNTER_INTERVAL_RATES: dict[str, Series] = {"cpu_idle_seconds": NODE_CPU_IDLE_RATE_OVER_INTERVAL}
HOST_SERIES: tuple[Series, ...] = (
    DCGM_TARGET_LABELS,
    NODE_HOST_COLLISIONS,
    NODE_EXPORTER_HOST,
    GPU_EXPORTER_HOST,
    NODE_CPU_IDLE_RATE,
    NODE_CPU_IDLE_RATE_OVER_INTERVAL,
)

# Recorded only where scraping is sharded (sharding.shards > 0; rules.sharding builds it from the config):
# each shard's heartbeat, which the ruler's rollups require from every shard.
SHARD_UP = Series(
    "gpu_execution_pack:shard_up",
    "bool",
    (SHARD_LABEL,),
    (),
    "1 from each scrape shard, recorded by the shard itself at `rule_interval` and naming it: while a shard's "
    "newest sample is older than `sharding.heartbeat_freshness`, the ruler records no per-execution or cost "
    "series.",
)
SHARDING_SERIES: tuple[Series, ...] = (SHARD_UP,)

# Recorded once in each rule file (its last group), its labels written on the rule: the version of the pack that
# generated the file, as its header says, and the file's name. Prometheus shows a rule's labels in
# /api/v1/rules (2.x and 3.x alike), so `doctor` reads which version each loaded file came from.
PACK_RULES_INFO = Series(
    "gpu_execution_pack:rules_info",
    "info",
    ("version", "rule_file", "digest"),
    (),
    "1 from each rule file the pack generated, labelled with the pack's version, the file's name and a digest of "
    "its groups: what `doctor` compares with the installed pack and with the rules its config generates.",
)

# Every series the rules record on one Prometheus (SHARDING_SERIES only where scraping is sharded).
ALL_SERIES: tuple[Series, ...] = (
    *HOST_SERIES,
    *GPU_INSTANCE_SERIES,
    *GPU_SERIES,
    *GPU_SHARE_SERIES,
    *GPU_TIME_SERIES,
    *GPU_ACTIVITY_SERIES,
    *GPU_HEALTH_SERIES,
    *GPU_CONDITION_SERIES,
    NODE_GPU_COUNT,
    *NODE_SERIES,
    *NODE_DERIVED_SERIES,
    *EXECUTION_SERIES,
    *EXECUTION_CONDITION_SERIES,
    *COST_SERIES,
    PRICE,
)
# Every signal some recorded series reads: what the exporters must publish, and what the AMD group records.
READ_SIGNALS: frozenset[str] = frozenset(key for s in ALL_SERIES for f in s.formulas for key in f.signals)
# Every series the endpoint can serve, wherever its group puts it (a derived one comes after its inputs).
SERVABLE_SERIES: tuple[Series, ...] = tuple(s for s in ALL_SERIES if s.api_name)
# Its default answer (the contract's series); the rest only where the ``series`` parameter names them.
API_SERIES: tuple[Series, ...] = tuple(s for s in SERVABLE_SERIES if not s.api_optional)
