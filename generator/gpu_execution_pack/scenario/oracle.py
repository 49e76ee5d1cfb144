"""The per-GPU and per-host oracle: what a scenario's exporters publish and what each recorded series must hold.

Values come from the phase table (``phases``) in the older exporters' units and are turned into base units
with this module's own constants, independently of the catalog's units, so a wrong conversion in the
catalog makes the tests fail instead of agreeing with itself. Truths are keyed by the catalog's series
objects: names are shared, values are not.

What the catalog already says is read from it, not restated: which signal a plain per-GPU series reads
(a series whose one formula is ``signal(key)``), whether the signal is device-wide, and whether an
exporter generation collects it by default. A signal with a load field (``<key>_<unit>`` on ``GpuLoad``)
and no rule of its own here is published from that field, and every such series holds it
(``LOAD_SIGNALS``, ``PLAIN_SERIES``): a new one needs its load field and nothing in this module.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import fields
from functools import cache

from gpu_execution_pack import catalog
from gpu_execution_pack.catalog import Series
from gpu_execution_pack.scenario.model import STEP_SECONDS, Execution, Gpu, Host, Scenario, grid, holders
from gpu_execution_pack.scenario.phases import PHASES, GpuLoad, Phase

# Independent unit facts for the oracle (not read from the catalog on purpose).
BYTES_PER_MIB = 1024 * 1024
HERTZ_PER_MHZ = 1_000_000
PERCENT_PER_RATIO = 100
MILLIJOULES_PER_JOULE = 1000

RESERVED_MIB = 512  # framebuffer the driver keeps: FB_RESERVED, and in FB_TOTAL but not in used + free
# DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ since the driver loaded): the generations that publish it
# under that name, and what it reads when the scenario starts (a value seen on a real A30).
ENERGY_COUNTER_GENERATIONS = ("3.3", "4.8")
ENERGY_AT_START_MILLIJOULES = 126_272_101_025
# The framebuffer fields, which dcgm-exporter leaves out altogether on MIG-enabled H100s.
FRAMEBUFFER_SIGNALS = frozenset({"fb_used", "fb_free", "fb_reserved", "fb_capacity"})
# The custom counters file the README asks for adds the power limits to dcgm-exporter's defaults.
CUSTOM_COUNTERS = frozenset({"power_limit_enforced", "power_limit_requested"})


def activity(load: GpuLoad, util: float, mig: bool) -> dict[str, float]:
    """The profiling activity signals (ratios) of a GPU running ``load`` at utilisation ``util``."""

    def given(percent: float | None, otherwise: float) -> float:
        return otherwise if percent is None else percent / PERCENT_PER_RATIO

    # A MIG instance has no GPU_UTIL: its utilisation is its engine activity, whatever the load says.
    engine = util if mig else given(load.engine_active_percent, util / 2)
    return {
        "gr_engine_active": engine,
        "tensor_active": given(load.tensor_active_percent, engine / 2),
        "dram_active": given(load.dram_active_percent, util / 4),
        "sm_active": engine,
        "sm_occupancy": engine / 4,
    }


# The activity series and the signal each reads; SM activity and occupancy only where exported.
ACTIVITY_TRUTHS: dict[Series, str] = {
    catalog.GPU_GRAPHICS_ENGINE_ACTIVE: "gr_engine_active",
    catalog.GPU_TENSOR_ACTIVE: "tensor_active",
    catalog.GPU_DRAM_ACTIVE: "dram_active",
    catalog.GPU_SM_ACTIVE: "sm_active",
    catalog.GPU_SM_OCCUPANCY: "sm_occupancy",
}


# The units a load field may be given in (its name's suffix), and each one's value in the base unit.
LOAD_UNITS: dict[str, Callable[[float], float]] = {
    "percent": lambda v: v / PERCENT_PER_RATIO,
    "mib": lambda v: float(v * BYTES_PER_MIB),
    "mhz": lambda v: float(v * HERTZ_PER_MHZ),
    "bytes_per_second": float,
    "bytes": float,
    "watts": float,
    "celsius": float,
    "ratio": float,
}


def _load_field(key: str) -> tuple[str, Callable[[float], float]] | None:
    """The ``GpuLoad`` field (``<key>_<unit>``) that gives signal ``key``, and its unit's conversion."""
    for field in fields(GpuLoad):
        for suffix, to_base in LOAD_UNITS.items():
            if field.name == f"{key}_{suffix}":
                return field.name, to_base
    return None


# The DCGM signals published straight from a load field (the clocks, PCIe): key -> (field, conversion). The
# activity signals' fields are optional, with their own rule (``activity``).
LOAD_SIGNALS: dict[str, tuple[str, Callable[[float], float]]] = {
    key: found
    for key, signal in catalog.SIGNALS.items()
    if signal.exporter == "dcgm" and key not in ACTIVITY_TRUTHS.values() and (found := _load_field(key)) is not None
}


def plain_series(series: Series) -> str | None:
    """The load signal a per-GPU series reads as it is (one formula, ``signal(key)``, no matchers), else None:
    what the catalog says feeds it, so its truth is that signal's published value."""
    if series.labels != catalog.GPU_LABELS or len(series.formulas) != 1:
        return None
    (formula,) = series.formulas
    keys = formula.signals
    if formula.where or len(keys) != 1 or keys[0] not in LOAD_SIGNALS or formula.expr != catalog.signal(keys[0]):
        return None
    return keys[0]


# Every per-GPU series whose truth is a load signal's value, and that signal.
PLAIN_SERIES: dict[Series, str] = {s: key for s in catalog.ALL_SERIES if (key := plain_series(s)) is not None}


def raw_for(signal_key: str, generation: str) -> catalog.RawMetric | None:
    """The raw metric an exporter generation publishes for a signal, if any."""
    for raw in catalog.SIGNALS[signal_key].raws:
        if generation in raw.generations:
            return raw
    return None


def published(key: str, raw: catalog.RawMetric, scenario: Scenario, host: str) -> bool:
    """Whether the exporter on ``host`` in ``scenario`` publishes ``raw`` for signal ``key``: each raw metric an
    exporter collects by default (a host's dcgm-exporter is the newest release of its generation), and the custom
    counters, unless the scenario says the field is missing
    (Scenario.missing, Host.missing); the rest only where it says it exports them (Scenario.exported)."""
    if key in scenario.missing_on(host):
        return False
    default = (
        raw.default_collected if raw.vendor != "nvidia" else raw.default_in(scenario.host(host).generation, newest=True)
    )
    return default or key in CUSTOM_COUNTERS or key in scenario.exported


def load_values(own: GpuLoad, device: GpuLoad) -> dict[str, float]:
    """The load signals' values in base units: a device-wide one (the catalog says which) from the physical
    GPU's load (``device_load``), the others from the instance's own."""
    return {
        key: to_base(getattr(device if catalog.SIGNALS[key].device_wide else own, name))
        for key, (name, to_base) in LOAD_SIGNALS.items()
    }


# The fields dcgm-exporter publishes per pod under KUBERNETES_VIRTUAL_GPUS (transformation.isPerProcessMetric).
PER_PROCESS_SIGNALS = frozenset({"gpu_util", "fb_used"})


def per_process(scenario: Scenario, gpu: Gpu) -> bool:
    """Whether the GPU's exporter publishes each holder's own utilisation and framebuffer use."""
    return scenario.host(gpu.host).virtual_gpus


def own_util(execution: Execution, gpu: Gpu, minute: float) -> float:
    """The utilisation (ratio) ``execution``'s phase gives the GPU at ``minute``."""
    phase = execution.phase_at(minute)
    assert phase is not None
    return (phase.gpu.util_percent + execution.util_offset(gpu)) / PERCENT_PER_RATIO


def device_use(scenario: Scenario, gpu: Gpu, minute: float) -> tuple[float, int]:
    """The whole GPU's utilisation (ratio) and framebuffer used (MiB) while someone holds it: with per-process
    values the holders' sum (the utilisation at most 100 %), else the first running holder's load."""
    on_gpu = holders(scenario, gpu, minute)
    if per_process(scenario, gpu):
        return min(1.0, sum(own_util(e, gpu, minute) for e in on_gpu)), sum(
            mem_used_mib(e, gpu, minute) for e in on_gpu
        )
    return own_util(on_gpu[0], gpu, minute), mem_used_mib(on_gpu[0], gpu, minute)


def own_use(scenario: Scenario, execution: Execution, gpu: Gpu, minute: float) -> tuple[float, int]:
    """What the exporter publishes as ``execution``'s utilisation and framebuffer used (MiB): its own where
    the exporter has per-process values, else the GPU's."""
    if per_process(scenario, gpu):
        return own_util(execution, gpu, minute), mem_used_mib(execution, gpu, minute)
    return device_use(scenario, gpu, minute)


def work_share(scenario: Scenario, execution: Execution, gpu: Gpu, minute: float) -> float:
    """``execution``'s share of the GPU's work and energy: its own utilisation over the holders' (each holder
    alike where all are idle, or where the exporter publishes the GPU's values to each)."""
    on_gpu = holders(scenario, gpu, minute)
    if not per_process(scenario, gpu):
        return 1 / len(on_gpu)
    total = sum(own_util(e, gpu, minute) for e in on_gpu)
    return own_util(execution, gpu, minute) / total if total else 1 / len(on_gpu)


def compute_slices(gpu: Gpu) -> int:
    """A MIG instance's compute slices: the ``<n>g`` its profile begins with (``3g.40gb``: 3)."""
    found = re.match(r"(\d+)g\.", gpu.mig_profile)
    return int(found.group(1)) if found else 1


def instance_share(scenario: Scenario, gpu: Gpu) -> float:
    """A MIG instance's share of its physical GPU's power: its compute slices over those of every instance of
    that GPU the exporter publishes, free ones included (a free instance's share is nobody's); 1 for a whole
    GPU. dcgm-exporter repeats the GPU's power on each instance, so without this two executions on two
    instances would each be given all of it."""
    if not gpu.mig_instance:
        return 1.0
    siblings = [g for g in scenario.all_gpus() if g.device_key == gpu.device_key and g.mig_instance]
    return compute_slices(gpu) / sum(compute_slices(g) for g in siblings)


def gpu_truth(scenario: Scenario, execution: Execution, gpu: Gpu, minute: float) -> dict[Series, float] | None:
    """What each per-GPU recorded series should be, in base units; None when the execution is not running.

    A GPU several executions hold at once publishes one set of values for all of them (the first
    running holder's load here), and each is billed an equal share of it. Where the exporter publishes
    each holder's own utilisation and framebuffer use (``Host.virtual_gpus``), those are the execution's,
    the capacity stays the GPU's, and work and energy are split in proportion to the holders' utilisation.
    """
    if execution.phase_at(minute) is None:
        return None
    on_gpu = holders(scenario, gpu, minute)
    lead = on_gpu[0]
    load = lead.phase_at(minute).gpu  # type: ignore[union-attr]
    device = device_load(scenario, gpu, minute)  # temperature and clocks are device-wide on MIG
    util, used_mib = own_use(scenario, execution, gpu, minute)
    device_util, device_used_mib = device_use(scenario, gpu, minute)
    total = gpu.mem_total_mib * BYTES_PER_MIB
    out = {
        catalog.GPU_UTILIZATION: util,
        catalog.GPU_MEMORY_USED: used_mib * BYTES_PER_MIB,
        catalog.GPU_MEMORY_TOTAL: total,
        catalog.GPU_MEMORY_UTILIZATION: (used_mib * BYTES_PER_MIB) / total,
        catalog.GPU_DEVICE_UTILIZATION: device_util,
        catalog.GPU_DEVICE_MEMORY_USED: device_used_mib * BYTES_PER_MIB,
        catalog.GPU_DEVICE_MEMORY_UTILIZATION: (device_used_mib * BYTES_PER_MIB) / total,
        catalog.GPU_TEMPERATURE: float(device.temp_celsius),
        catalog.GPU_POWER: float(device_power(scenario, gpu, minute)),
    }
    host = scenario.host(gpu.host)
    values = load_values(load, device)
    for series, key in PLAIN_SERIES.items():
        raw = raw_for(key, host.generation)
        if raw is not None and published(key, raw, scenario, host.name):
            out[series] = values[key]
    limit = power_limit(scenario)
    if limit is not None:
        out[catalog.GPU_POWER_LIMIT] = limit
        out[catalog.GPU_POWER_TO_LIMIT] = out[catalog.GPU_POWER] / limit
    out[catalog.GPU_SM_CLOCK_PEAK] = float(sm_clock_peak_mhz(scenario, execution, gpu, minute) * HERTZ_PER_MHZ)
    out[catalog.GPU_LAST_XID] = float(last_xid(scenario, gpu, minute))
    if publishes_energy(scenario, gpu):
        out[catalog.GPU_ENERGY] = energy_millijoules(scenario, gpu, minute) / MILLIJOULES_PER_JOULE
    if "clocks_event_reasons" in scenario.exported:
        out[catalog.GPU_CLOCKS_EVENT_REASONS] = float(device.clock_event_reasons)
    if "power_violation" in scenario.exported:
        out[catalog.GPU_POWER_VIOLATION] = device.power_violation_share
    if "thermal_violation" in scenario.exported:
        out[catalog.GPU_THERMAL_VIOLATION] = device.thermal_violation_share
    share = work_share(scenario, execution, gpu, minute)
    out[catalog.GPU_SHARE] = 1 / len(on_gpu)
    out[catalog.GPU_WORK_SHARE] = share
    # Its own utilisation where the exporter has it (the holders' together within the GPU's 100 %), else the
    # GPU's in its share.
    out[catalog.GPU_WORKED] = device_util * share
    out[catalog.GPU_POWER_ATTRIBUTED] = out[catalog.GPU_POWER] * share * instance_share(scenario, gpu)
    missing = scenario.missing_on(gpu.host)
    for series, key in ACTIVITY_TRUTHS.items():
        # As the exporter publishes the field (what the renderer reads too): its release's default counters (the
        # profiling fields from dcgm-exporter 4.0.0 on), else only where the scenario exports it.
        raw = raw_for(key, host.generation)
        if raw is not None and published(key, raw, scenario, host.name):
            out[series] = activity(load, device_util, bool(gpu.mig_instance))[key]
    if missing >= FRAMEBUFFER_SIGNALS:  # no framebuffer field at all (MIG-enabled H100s): no memory series
        for series in MEMORY_SERIES:
            del out[series]
    return out


# The per-GPU series that read the framebuffer fields.
MEMORY_SERIES = (
    catalog.GPU_MEMORY_USED,
    catalog.GPU_MEMORY_TOTAL,
    catalog.GPU_MEMORY_UTILIZATION,
    catalog.GPU_DEVICE_MEMORY_USED,
    catalog.GPU_DEVICE_MEMORY_UTILIZATION,
)


def gpu_publishes(scenario: Scenario, gpu: Gpu, owner: Execution | None, minute: float) -> dict[str, float]:
    """What a GPU (or MIG instance) publishes for each DCGM gauge signal at ``minute``, in base units.

    The one definition of a GPU's exporter values: the generic renderer and the fleet's both read
    it. ``owner`` is the execution holding the GPU, whether or not it runs at ``minute``.
    """
    # A GPU time-sliced between executions publishes the same values on each one's series (GPU_UTIL and FB_USED
    # per pod beside these, where it has per-process values: ``own_publishes``).
    lead = next(iter(holders(scenario, gpu, minute)), owner)
    phase = lead.phase_at(minute) if lead is not None else None
    running = lead is not None and phase is not None
    util, used_mib = device_use(scenario, gpu, minute) if running else (0.0, PHASES["idle"].gpu.mem_used_mib)
    used, total = used_mib * BYTES_PER_MIB, gpu.mem_total_mib * BYTES_PER_MIB
    device = device_load(scenario, gpu, minute)  # temperature and clocks are device-wide on MIG
    own = phase.gpu if running else PHASES["idle"].gpu  # PCIe traffic is the instance's own
    return {
        # On MIG instances GPU_UTIL reads 0 and the engine activity carries the utilisation;
        # on whole GPUs the engine activity differs, to prove GPU_UTIL is preferred.
        "gpu_util": 0.0 if gpu.mig_instance else util,
        **activity(own, util, bool(gpu.mig_instance)),
        "fb_used": float(used),
        "fb_free": float(total - used),
        "fb_reserved": float(RESERVED_MIB * BYTES_PER_MIB),
        "fb_capacity": float(total + RESERVED_MIB * BYTES_PER_MIB),
        "gpu_temp": float(device.temp_celsius),
        "power_usage": float(device_power(scenario, gpu, minute)),
        "power_limit_enforced": float(scenario.power_limit_enforced_watts),
        "power_limit_requested": float(scenario.power_limit_requested_watts),
        **load_values(own, device),
        "xid_last": float(last_xid(scenario, gpu, minute)),
        "max_sm_clock": float(scenario.max_sm_clock_mhz * HERTZ_PER_MHZ),
        "clocks_event_reasons": float(device.clock_event_reasons),
    }


def own_publishes(scenario: Scenario, execution: Execution, gpu: Gpu, minute: float) -> dict[str, float]:
    """The per-process fields on ``execution``'s pod series while it runs, in base units (``PER_PROCESS_SIGNALS``)."""
    util, used_mib = own_use(scenario, execution, gpu, minute)
    return {"gpu_util": 0.0 if gpu.mig_instance else util, "fb_used": float(used_mib * BYTES_PER_MIB)}


def sm_clock_peak_mhz(scenario: Scenario, execution: Execution, gpu: Gpu, minute: float) -> int:
    """The highest SM clock the GPU showed since the execution started (its max clock where exported)."""
    if "max_sm_clock" in scenario.exported:
        return scenario.max_sm_clock_mhz
    return _clock_peaks(scenario, gpu, execution.start_minute)[minute]


@cache
def _clock_peaks(scenario: Scenario, gpu: Gpu, start: float) -> dict[float, int]:
    """Running maximum of the GPU's SM clock from ``start``, at every sample minute of the scenario."""
    peaks, peak = {}, 0
    for m in grid(start, scenario.window_minutes):
        peak = max(peak, device_load(scenario, gpu, m).sm_clock_mhz)
        peaks[m] = peak
    return peaks


def publishes_energy(scenario: Scenario, gpu: Gpu) -> bool:
    """Whether the GPU's exporter publishes the energy counter."""
    host = scenario.host(gpu.host)
    return "energy" not in scenario.missing_on(host.name) and host.generation in ENERGY_COUNTER_GENERATIONS


def energy_millijoules(scenario: Scenario, gpu: Gpu, minute: float) -> int:
    """The physical GPU's energy counter at ``minute``: each earlier sample's power held for one step."""
    return _energy_totals(scenario, gpu.device_key)[minute]


@cache
def _energy_totals(scenario: Scenario, device: tuple[str, int]) -> dict[float, int]:
    gpu = next(g for g in scenario.all_gpus() if g.device_key == device)
    totals, total = {}, ENERGY_AT_START_MILLIJOULES
    for m in grid(0, scenario.window_minutes + 10):  # the alert oracle looks a few steps past the window
        totals[m] = total
        total += round(device_power(scenario, gpu, m) * STEP_SECONDS * MILLIJOULES_PER_JOULE)
    return totals


def last_xid(scenario: Scenario, gpu: Gpu, minute: float) -> int:
    """The physical GPU's last Xid code at ``minute`` (0: none since the exporter started)."""
    seen = sorted(
        (e for e in scenario.xid_events if (e.host, e.index) == gpu.device_key and e.minute <= minute),
        key=lambda e: e.minute,
    )
    return seen[-1].code if seen else 0


def power_limit(scenario: Scenario) -> float | None:
    if "power_limit_enforced" not in scenario.missing:
        return float(scenario.power_limit_enforced_watts)
    if "power_limit_requested" not in scenario.missing:
        return float(scenario.power_limit_requested_watts)
    return None


def ramp(phase: Phase, start: int, end: int | None, into_phase: float) -> int:
    """A value ramping linearly from ``start`` to about ``end`` over the phase, on the 15 s sample grid."""
    if end is None:
        return start
    steps = phase.minutes * 60 // STEP_SECONDS - 1
    k = int(into_phase * 60 // STEP_SECONDS)
    return start + k * ((end - start) // steps)


def mem_used_mib(execution: Execution, gpu: Gpu, minute: float) -> int:
    """Framebuffer used at ``minute``, following the phase's ramp."""
    phase = execution.phase_at(minute)
    assert phase is not None
    load = phase.gpu
    scale = gpu.mem_total_mib / 81920  # MIG instances hold a share of the GPU's memory
    end = None if load.mem_used_end_mib is None else int(load.mem_used_end_mib * scale)
    return ramp(phase, int(load.mem_used_mib * scale), end, minute - execution.phase_start_at(minute))


def device_power(scenario: Scenario, gpu: Gpu, minute: float) -> float:
    """A physical GPU's power: that of the busiest execution on any of its instances."""
    powers = []
    for e in scenario.executions:
        for g in e.gpus:
            if g.device_key == gpu.device_key:
                phase = e.phase_at(minute)
                powers.append(phase.gpu.power_watts if phase else PHASES["idle"].gpu.power_watts)
    return max(powers) if powers else PHASES["idle"].gpu.power_watts


def device_load(scenario: Scenario, gpu: Gpu, minute: float) -> GpuLoad:
    """Device-wide readings (temperature, clocks) of a physical GPU: the first running instance's."""
    for e in scenario.executions:
        for g in e.gpus:
            if g.device_key == gpu.device_key and e.phase_at(minute):
                return e.phase_at(minute).gpu  # type: ignore[union-attr]
    return PHASES["idle"].gpu


def host_truth(scenario: Scenario, host: Host, minute: float) -> dict[Series, float]:
    """A host's RAM and CPU at ``minute``: its base load plus each running execution's share."""
    busy, ram = host.base_cpu_busy, host.base_ram_used_bytes
    for e in scenario.executions:
        phase = e.phase_at(minute)
        if phase and any(g.host == host.name for g in e.gpus):
            busy += phase.host.cpu_busy
            ram += ramp(
                phase, phase.host.ram_used_bytes, phase.host.ram_used_end_bytes, minute - e.phase_start_at(minute)
            )
    return {
        catalog.NODE_RAM_TOTAL: float(host.ram_total_bytes),
        catalog.NODE_RAM_USED: float(ram),
        catalog.NODE_RAM_UTILIZATION: ram / host.ram_total_bytes,
        catalog.NODE_CPU_UTILIZATION: min(busy, 1.0),
    }
