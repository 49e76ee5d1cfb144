"""Signals: what exporters publish, per vendor and exporter generation, with its unit and labels.

A signal is one logical measurement (GPU utilisation, framebuffer used, ...) with the raw metric
each exporter generation emits for it. Adding an exporter generation is one more ``RawMetric`` in
the signals it renamed. AMD GPUs' measurements come from ROCm's device-metrics-exporter (``AmdSource``):
rules.amd records each in the NVIDIA series' labels and base unit, and the rules read that as one more
generation's raw metric.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpu_execution_pack.promql import Matcher, Selector, match, selector

from .labels import NODE_INFO_METRIC
from .units import VIOLATION_UNIT

# --- Exporter generations -------------------------------------------------------------------
# dcgm-exporter renamed fields and changed units twice (GENERATION_NOTES says how). A generation is
# named by the first release that emits its names; "4.8" stands for every release up to 4.8.x.
GENERATIONS: tuple[str, ...] = ("3.3", "4.8", "4.9", "4.10")
GENERATION_NOTES: dict[str, str] = {
    "3.3": "dcgm-exporter 2.x up to 3.3.6-3.4.2: as 4.8, but PCIe in DCGM_FI_DEV_PCIE_{RX,TX}_THROUGHPUT (KB/s)",
    "4.8": "dcgm-exporter 3.3.7-3.5.0 up to 4.8.x: DCGM 3 names, utilisation in %, clocks in MHz, memory in MiB",
    "4.9": "4.9.x: DCGM 4.7 names, utilisation as ratio 0-1, clocks in Hz, memory in bytes",
    "4.10": "4.10 and later: as 4.9, and DCGM_FI_PROF_PCIE_{RX,TX}_BYTES become *_BYTES_PER_SECOND",
}
# The first dcgm-exporter release of each generation (the exporter's version, the part of a tag such as
# 3.3.7-3.5.0 after DCGM's). A field's default collection can start within a generation (RawMetric.default_from).
GENERATION_FIRST_RELEASE: dict[str, str] = {"3.3": "2.0.0", "4.8": "3.5.0", "4.9": "4.9.0", "4.10": "4.10.0"}


def release_key(release: str) -> tuple[int, ...]:
    """A dcgm-exporter release ("4.0.0", "3.5.0") as a key that orders releases."""
    return tuple(int(part) for part in release.split("."))


def generation_of_release(release: str) -> str:
    """The generation whose names a dcgm-exporter release publishes."""
    return [g for g in GENERATIONS if release_key(GENERATION_FIRST_RELEASE[g]) <= release_key(release)][-1]


# --- Vendors ----------------------------------------------------------------------------------
# NVIDIA GPUs through dcgm-exporter (the generations above); AMD Instinct GPUs through ROCm's
# device-metrics-exporter (AMD_EXPORTER_VERSIONS).
VENDORS: tuple[str, ...] = ("nvidia", "amd")
# The device-metrics-exporter releases whose names the AMD sources below cover: each source says which
# release first published it (AmdMetric.since). Names are the same from v1.4.0 to v1.5.1; v1.3.x spelled
# the thermal residency soc_thermal; clock_type values are GPU_CLOCK_TYPE_* up to v1.4.1.2.
AMD_EXPORTER_VERSIONS: tuple[str, ...] = ("v1.3.1", "v1.4.0", "v1.4.2", "v1.5.0", "v1.5.1")

# --- Raw metrics and signals ------------------------------------------------------------------


@dataclass(frozen=True)
class RawMetric:
    """One metric as an exporter emits it."""

    name: str
    unit: str
    type: Literal["gauge", "counter"] = "gauge"
    generations: tuple[str, ...] = GENERATIONS
    # In the newest release's etc/default-counters.csv of (one of) its generations; collected by default from
    # release ``default_from`` on, where that is later than its generations' first release.
    default_collected: bool = True
    default_from: str = ""
    matchers: tuple[Matcher, ...] = ()  # fixed label matchers, e.g. the idle mode of a CPU counter
    vendor: str = "nvidia"  # "amd": the AMD group's recorded series (Signal.amd_series), in the base unit

    def select(self, *matchers: Matcher) -> Selector:
        """A selector of this metric: its fixed matchers, then ``matchers``."""
        return selector(self.name, *self.matchers, *matchers)

    def default_in_release(self, release: str) -> bool:
        """Whether dcgm-exporter ``release`` publishes this metric with its default counters."""
        return (
            self.default_collected
            and generation_of_release(release) in self.generations
            and release_key(release) >= release_key(self.default_from or "0")
        )

    def default_in(self, generation: str, *, newest: bool = False) -> bool:
        """Whether every release of ``generation`` publishes this metric with its default counters (``newest``:
        its newest release does, as the scenarios' exporters of that generation are)."""
        if not newest:
            return self.default_in_release(GENERATION_FIRST_RELEASE[generation])
        later = GENERATIONS[GENERATIONS.index(generation) + 1 :]
        if not self.default_collected or generation not in self.generations:
            return False
        return not later or release_key(self.default_from or "0") < release_key(GENERATION_FIRST_RELEASE[later[0]])


@dataclass(frozen=True)
class AmdMetric:
    """One metric as ROCm's device-metrics-exporter publishes it (after any configured name prefix).

    Every one is a gauge, its accumulators too. ``per`` names an index label with one series per
    engine or clock domain (XCC, clock index), reduced away by ``reduce``; ``residency_of`` makes it
    a residency accumulator, read as its rate over that accumulator's rate (the share of time).
    """

    name: str
    unit: str
    since: str  # the first exporter release that publishes it under this name
    matchers: tuple[Matcher, ...] = ()
    per: str = ""
    reduce: Literal["max", "avg"] = "max"
    residency_of: str = ""
    until: str = ""  # the last release with this name, where a later one renamed it


@dataclass(frozen=True)
class AmdSource:
    """How an AMD GPU publishes a signal: its metrics, tried in order (PromQL ``or``).

    ``device_wide``: one value for the physical GPU, published by MI300 partition 0 only (the other
    partitions publish nothing or 0): rules.amd gives every partition of the GPU that value, as
    DCGM repeats a device-wide field on every MIG instance.
    """

    metrics: tuple[AmdMetric, ...]
    device_wide: bool = False
    note: str = ""


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
    # A counter recorded as its running total (readers take increase()), not read as a rate.
    cumulative: bool = False
    amd: AmdSource | None = None  # where AMD's exporter publishes it

    @property
    def amd_series(self) -> str:
        """The series the AMD group records for this signal, in its base unit and the NVIDIA labels."""
        return f"amd_gpu:{self.key}_{self.base_unit}"

    def raws_for(self, generations: tuple[str, ...], vendors: tuple[str, ...] = ("nvidia",)) -> tuple[RawMetric, ...]:
        """The raw metrics emitted by any of the given generations, newest name first, then AMD's where
        ``vendors`` has it and AMD publishes the signal."""
        chosen = [r for r in self.raws if set(r.generations) & set(generations)] if "nvidia" in vendors else []
        ordered = sorted(chosen, key=lambda r: -max(GENERATIONS.index(g) for g in r.generations))
        if "amd" in vendors and self.amd is not None:
            ordered.append(RawMetric(self.amd_series, self.base_unit, generations=(), vendor="amd"))
        return tuple(ordered)


_OLD = ("3.3", "4.8")  # DCGM 3 names
_NEW = ("4.9", "4.10")  # DCGM 4.7 names


def _dcgm(
    key: str,
    base: str,
    doc: str,
    *raws: RawMetric,
    device_wide: bool = False,
    cumulative: bool = False,
    amd: AmdSource | None = None,
) -> Signal:
    return Signal(key, "dcgm", base, raws, doc, device_wide, cumulative, amd)


# --- AMD sources (ROCm/device-metrics-exporter, pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go) ------------
# The engines' activity in %: gpu_gfx_activity for an unpartitioned GPU (and MI300 partition 0 only);
# on a partition, the mean of its XCCs' gpu_gfx_busy_instantaneous (v1.3.1 on). amdsmi has one activity
# figure, so it stands for both NVIDIA's GPU_UTIL and its engine activity: AMD GPUs never read as stalled.
_AMD_GFX = AmdSource(
    (
        AmdMetric("gpu_gfx_activity", "percent", "v1.0.0"),
        AmdMetric("gpu_gfx_busy_instantaneous", "percent", "v1.3.1", per="xcc_index", reduce="avg"),
    ),
    note="partitions: the mean of their XCCs' gpu_gfx_busy_instantaneous",
)
# VRAM is published per partition, in MiB under an "MB" help text (gpuagent divides bytes by 1024 twice).
_AMD_VRAM = {kind: AmdSource((AmdMetric(f"gpu_{kind}_vram", "MiB", "v1.0.0"),)) for kind in ("used", "free", "total")}
# The clocks are MHz, one gpu_clock series per clock domain (eight system clocks on an MI300X, one per XCD):
# the highest is served. clock_type was GPU_CLOCK_TYPE_SYSTEM up to v1.4.1.2 and system from v1.4.2.
_CLOCK_TYPE = "clock_type"


def _amd_clock(name: str, kind: str, since: str) -> AmdSource:
    spelled = f"{kind}|GPU_CLOCK_TYPE_{kind.upper()}"
    return AmdSource((AmdMetric(name, "MHz", since, (match(_CLOCK_TYPE, spelled, "=~"),), per="clock_index"),), True)


# The AMD group's per-GPU identity (value 1): the exporter's labels and the NVIDIA names derived from
# them (rules.amd), recorded once so each signal's rule joins it rather than relabelling again.
AMD_IDENTITY_SERIES = "amd_gpu:identity_info"
# The signals whose metrics say a GPU or partition reports (their per-GPU metrics, in this order): VRAM,
# which every partition publishes, then what an exporter without VRAM (total 0) still publishes.
AMD_IDENTITY_SIGNALS: tuple[str, ...] = ("fb_used", "fb_capacity", "gpu_util", "power_usage", "gpu_temp")

# Socket-level residency accumulators (MI300, v1.3.0 on): ticks spent limited, against the firmware's own
# tick counter, so their rates' ratio is the share of time held down.
_AMD_TICKS = "gpu_violation_current_accumulated_counter"


SIGNALS: dict[str, Signal] = {
    s.key: s
    for s in (
        _dcgm(
            "gpu_util",
            "ratio",
            "Share of time a kernel ran on the GPU; 0 or absent on MIG instances.",
            # Not in 2.4.x and 2.5.0's default counters (added for 2.6.0, dcgm-exporter commit b54068a).
            RawMetric("DCGM_FI_DEV_GPU_UTIL", "percent", generations=_OLD, default_from="2.6.0"),
            RawMetric("DCGM_FI_DEV_GPU_UTIL_RATIO", "ratio", generations=_NEW),
            amd=_AMD_GFX,
        ),
        _dcgm(
            "gr_engine_active",
            "ratio",
            "Share of time the graphics/compute engine was active (work, where GPU_UTIL counts any resident "
            "kernel); the utilisation of a MIG instance.",
            RawMetric("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "ratio", generations=_OLD, default_from="4.0.0"),
            RawMetric("DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", "ratio", generations=_NEW),
            amd=_AMD_GFX,
        ),
        # The profiling (DCP) activity fields, ratios 0-1 in every release. DCGM 4.7 renamed them
        # *_UTIL_RATIO (same field ids); dcgm-exporter 4.9 publishes the new names. GR_ENGINE,
        # TENSOR and DRAM are default counters since dcgm-exporter 4.0.0 (its commit 5f9250c; 2.x, 3.x and
        # 3.5.0-3.6.1 of generation 4.8 collect them with dcp-metrics-included.csv only); SM activity and
        # occupancy come with the DCP counters file. On MIG instances they are the instance's own.
        _dcgm(
            "tensor_active",
            "ratio",
            "Share of cycles any tensor pipe was active; 0 on a job that never uses tensor cores.",
            RawMetric("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "ratio", generations=_OLD, default_from="4.0.0"),
            RawMetric("DCGM_FI_PROF_TENSOR_UTIL_RATIO", "ratio", generations=_NEW),
        ),
        _dcgm(
            "dram_active",
            "ratio",
            "Share of cycles the device memory interface was sending or receiving data.",
            RawMetric("DCGM_FI_PROF_DRAM_ACTIVE", "ratio", generations=_OLD, default_from="4.0.0"),
            RawMetric("DCGM_FI_PROF_DRAM_UTIL_RATIO", "ratio", generations=_NEW),
            amd=AmdSource((AmdMetric("gpu_umc_activity", "percent", "v1.0.0"),), note="MI300 partition 0 only"),
        ),
        _dcgm(
            "sm_active",
            "ratio",
            "Share of cycles at least one warp was resident on an SM, averaged over the SMs.",
            RawMetric("DCGM_FI_PROF_SM_ACTIVE", "ratio", generations=_OLD, default_collected=False),
            RawMetric("DCGM_FI_PROF_SM_UTIL_RATIO", "ratio", generations=_NEW, default_collected=False),
        ),
        _dcgm(
            "sm_occupancy",
            "ratio",
            "Resident warps as a share of the SMs' maximum, averaged over the SMs.",
            RawMetric("DCGM_FI_PROF_SM_OCCUPANCY", "ratio", generations=_OLD, default_collected=False),
            RawMetric("DCGM_FI_PROF_SM_OCCUPANCY_RATIO", "ratio", generations=_NEW, default_collected=False),
        ),
        _dcgm(
            "fb_used",
            "bytes",
            "Framebuffer memory in use (not MEM_COPY_UTIL, which is bandwidth).",
            RawMetric("DCGM_FI_DEV_FB_USED", "MiB", generations=_OLD),
            RawMetric("DCGM_FI_DEV_FB_USED_BYTES", "bytes", generations=_NEW),
            amd=_AMD_VRAM["used"],
        ),
        _dcgm(
            "fb_free",
            "bytes",
            "Framebuffer memory free.",
            RawMetric("DCGM_FI_DEV_FB_FREE", "MiB", generations=_OLD),
            RawMetric("DCGM_FI_DEV_FB_FREE_BYTES", "bytes", generations=_NEW),
            amd=_AMD_VRAM["free"],
        ),
        _dcgm(
            "fb_reserved",
            "bytes",
            "Framebuffer memory the driver reserves.",
            # A default counter from 4.3.1-4.4.0 (dcgm-exporter commit 6949141).
            RawMetric("DCGM_FI_DEV_FB_RESERVED", "MiB", generations=_OLD, default_from="4.4.0"),
            RawMetric("DCGM_FI_DEV_FB_RESERVED_BYTES", "bytes", generations=_NEW),
        ),
        _dcgm(
            "fb_capacity",
            "bytes",
            "Framebuffer size, reserved memory included.",
            RawMetric("DCGM_FI_DEV_FB_TOTAL", "MiB", generations=_OLD, default_collected=False),
            RawMetric("DCGM_FI_DEV_FB_CAPACITY_BYTES", "bytes", generations=_NEW),
            amd=_AMD_VRAM["total"],
        ),
        _dcgm(
            "gpu_temp",
            "celsius",
            "GPU die temperature.",
            RawMetric("DCGM_FI_DEV_GPU_TEMP", "celsius", generations=_OLD),
            RawMetric("DCGM_FI_DEV_GPU_TEMP_CELSIUS", "celsius", generations=_NEW),
            device_wide=True,
            amd=AmdSource(
                (
                    AmdMetric("gpu_junction_temperature", "celsius", "v1.0.0"),
                    AmdMetric("gpu_edge_temperature", "celsius", "v1.0.0"),  # MI200, which may lack the junction
                ),
                device_wide=True,
                note="the junction (hotspot) temperature, else the edge temperature",
            ),
        ),
        _dcgm(
            "power_usage",
            "watts",
            "Board power draw.",
            RawMetric("DCGM_FI_DEV_POWER_USAGE", "watts", generations=_OLD),
            RawMetric("DCGM_FI_DEV_BOARD_POWER_WATTS", "watts", generations=_NEW),
            device_wide=True,
            amd=AmdSource(
                (
                    AmdMetric("gpu_package_power", "watts", "v1.0.0"),  # MI300: current socket power
                    AmdMetric("gpu_average_package_power", "watts", "v1.0.0"),  # MI200
                    AmdMetric("gpu_power_usage", "watts", "v1.0.0"),
                ),
                device_wide=True,
                note="socket power; an MI250X publishes it for one of its two GCDs",
            ),
        ),
        _dcgm(
            "power_limit_enforced",
            "watts",
            "Effective power limit after every limiter; needs a custom counters file.",
            RawMetric("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "watts", generations=_OLD, default_collected=False),
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
            RawMetric("DCGM_FI_DEV_SM_CLOCK", "MHz", generations=_OLD),
            RawMetric("DCGM_FI_DEV_SM_CLOCK_HERTZ", "hertz", generations=_NEW),
            device_wide=True,
            amd=_amd_clock("gpu_clock", "system", "v1.0.0"),
        ),
        _dcgm(
            "mem_clock",
            "hertz",
            "Memory clock.",
            RawMetric("DCGM_FI_DEV_MEM_CLOCK", "MHz", generations=_OLD),
            RawMetric("DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", "hertz", generations=_NEW),
            device_wide=True,
            amd=_amd_clock("gpu_clock", "memory", "v1.0.0"),
        ),
        _dcgm(
            "max_sm_clock",
            "hertz",
            "Highest SM clock the GPU supports.",
            RawMetric("DCGM_FI_DEV_MAX_SM_CLOCK", "MHz", generations=_OLD, default_collected=False),
            RawMetric("DCGM_FI_DEV_MAX_SM_CLOCK_HERTZ", "hertz", generations=_NEW, default_collected=False),
            device_wide=True,
            amd=_amd_clock("gpu_max_clock", "system", "v1.4.2"),
        ),
        # PCIe profiling fields are gauges of bytes per second, not counters; RX is host to device.
        # The oldest exporters' default counters held NVML's PCIe throughput instead: typed counter in
        # their CSV, but a per-second gauge in KB/s.
        _dcgm(
            "pcie_rx",
            "bytes_per_second",
            "PCIe receive (host to device) throughput.",
            RawMetric("DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "KB_per_second", generations=("3.3",)),
            RawMetric("DCGM_FI_PROF_PCIE_RX_BYTES", "bytes_per_second", generations=("4.8", "4.9")),
            RawMetric("DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND", "bytes_per_second", generations=("4.10",)),
        ),
        _dcgm(
            "pcie_tx",
            "bytes_per_second",
            "PCIe transmit (device to host) throughput.",
            RawMetric("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "KB_per_second", generations=("3.3",)),
            RawMetric("DCGM_FI_PROF_PCIE_TX_BYTES", "bytes_per_second", generations=("4.8", "4.9")),
            RawMetric("DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", "bytes_per_second", generations=("4.10",)),
        ),
        _dcgm(
            "clocks_event_reasons",
            "bitmask",
            "Why clocks are held down: DCGM's bitmask "
            "(0x4 SW power cap, 0x20 SW thermal, 0x40 HW thermal, 0x80 HW power brake).",
            RawMetric("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "bitmask", default_collected=False),
            RawMetric("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "bitmask", generations=_OLD, default_collected=False),
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
            amd=AmdSource(
                (AmdMetric("gpu_violation_ppt_residency_accumulated", "ratio", "v1.3.0", residency_of=_AMD_TICKS),),
                device_wide=True,
                note="package power tracking (PPT) residency",
            ),
        ),
        _dcgm(
            "thermal_violation",
            "ratio",
            "Share of time clocks were held down by temperature.",
            RawMetric("DCGM_FI_DEV_THERMAL_VIOLATION", VIOLATION_UNIT, "counter", default_collected=False),
            device_wide=True,
            amd=AmdSource(
                (
                    AmdMetric(
                        "gpu_violation_socket_thermal_residency_accumulated", "ratio", "v1.4.0", residency_of=_AMD_TICKS
                    ),
                    AmdMetric(
                        "gpu_violation_soc_thermal_residency_accumulated",
                        "ratio",
                        "v1.3.0",
                        residency_of=_AMD_TICKS,
                        until="v1.3.1",
                    ),
                ),
                device_wide=True,
                note="socket thermal residency",
            ),
        ),
        _dcgm(
            "xid_last",
            "xid",
            "The last Xid code, sticky until the exporter restarts: use changes().",
            RawMetric("DCGM_FI_DEV_XID_ERRORS", "xid", generations=_OLD),
            RawMetric("DCGM_FI_DEV_XID_ERROR", "xid", generations=_NEW),
            device_wide=True,
        ),
        # Energy since the driver loaded, a default counter. 4.9 moved it to joules under a DCGM 4.7
        # name our references do not give: add that RawMetric here once known. Until then newer
        # exporters' energy is the integral of board power (the report says which it used).
        _dcgm(
            "energy",
            "joules",
            "Energy the GPU consumed since the driver loaded; device-wide, so it repeats on every MIG instance.",
            RawMetric("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "millijoules", "counter", generations=_OLD),
            device_wide=True,
            cumulative=True,
            amd=AmdSource(
                (AmdMetric("gpu_energy_consumed", "microjoules", "v1.0.0"),),
                device_wide=True,
                note="an accumulating gauge",
            ),
        ),
        _dcgm(
            "slowdown_temp",
            "celsius",
            "Temperature at which the GPU starts slowing down.",
            RawMetric("DCGM_FI_DEV_SLOWDOWN_TEMP", "celsius", generations=_OLD, default_collected=False),
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
            (RawMetric("node_cpu_seconds_total", "seconds", "counter", matchers=(match("mode", "idle"),)),),
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

# The signals that say a dcgm-exporter target reports a GPU entry: a target's host labels
# (rules.recording) and whether a held GPU still reports (the TelemetryMissing alert) are read from
# any of them. Framebuffer use is in every release's default counters, but dcgm-exporter publishes no
# DCGM_FI_DEV_FB_* field for MIG-enabled H100s or their instances; the temperature, device-wide,
# is repeated on every instance. Reported upstream: https://github.com/NVIDIA/dcgm-exporter/issues/380
# and https://github.com/NVIDIA/dcgm-exporter/issues/512.
PRESENCE_SIGNALS: tuple[str, ...] = ("fb_used", "gpu_temp")


def presence_raws(generations: tuple[str, ...], vendors: tuple[str, ...] = ("nvidia",)) -> tuple[RawMetric, ...]:
    """The raw metrics of PRESENCE_SIGNALS that the given exporter generations (and vendors) emit."""
    return tuple(raw for key in PRESENCE_SIGNALS for raw in SIGNALS[key].raws_for(generations, vendors))
