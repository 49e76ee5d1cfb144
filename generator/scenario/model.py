"""What a synthetic scenario is: executions on GPUs on hosts, going through phases.

A scenario is the truth that tests compare recorded series with. Values are given in the
units the older exporters use (percent, MiB, MHz, W, degrees C, bytes/s); ``Truth`` turns them
into base units with this module's own constants, independently of ``generator.catalog``, so
a wrong conversion in the catalog makes the tests fail instead of agreeing with itself.

Values are chosen so that every conversion is exact in floating point (integer MiB and MHz,
percent divided by 100, dyadic CPU shares): promtool 2.42 compares sample values exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# Independent unit facts for the oracle (not read from the catalog on purpose).
BYTES_PER_MIB = 1024 * 1024
HERTZ_PER_MHZ = 1_000_000
PERCENT_PER_RATIO = 100

STEP_SECONDS = 15  # dcgm-exporter's and node_exporter's usual scrape interval


@dataclass(frozen=True)
class GpuLoad:
    """What one GPU reports during a phase (older exporters' units)."""

    util_percent: float
    mem_used_mib: int
    mem_used_end_mib: int | None  # a linear ramp to this value over the phase, else flat
    power_watts: float
    temp_celsius: float
    sm_clock_mhz: int
    mem_clock_mhz: int
    pcie_rx_bytes_per_second: int
    pcie_tx_bytes_per_second: int


@dataclass(frozen=True)
class HostLoad:
    """What one execution adds to a host during a phase. CPU shares are dyadic (n/8)."""

    cpu_busy: float
    ram_used_bytes: int


@dataclass(frozen=True)
class Phase:
    name: str
    minutes: int
    gpu: GpuLoad
    host: HostLoad


# H100-like numbers: 80 GiB usable framebuffer, 700 W enforced limit.
PHASES: dict[str, Phase] = {
    p.name: p
    for p in (
        Phase(
            "loading",
            5,
            GpuLoad(4, 4096, None, 110.5, 36, 1755, 2619, 2_000_000_000, 50_000_000),
            HostLoad(0.75, 32 * 1024**3),
        ),
        Phase(
            "compute",
            10,
            GpuLoad(97, 61440, None, 650.25, 68, 1980, 2619, 400_000_000, 200_000_000),
            HostLoad(0.25, 48 * 1024**3),
        ),
        Phase(
            "memory_ramp",
            10,
            GpuLoad(92, 61440, 81408, 640, 70, 1980, 2619, 300_000_000, 100_000_000),
            HostLoad(0.25, 56 * 1024**3),
        ),
        Phase(
            "throttled",
            10,
            GpuLoad(95, 65536, None, 699.5, 86, 1410, 2619, 400_000_000, 200_000_000),
            HostLoad(0.375, 48 * 1024**3),
        ),
        Phase("idle", 5, GpuLoad(0, 512, None, 72.25, 31, 345, 2619, 0, 0), HostLoad(0, 4 * 1024**3)),
    )
}

TRAINING = ("loading", "compute", "memory_ramp", "throttled", "idle")


@dataclass(frozen=True)
class Gpu:
    """A GPU, or a MIG instance of one (mig_instance set)."""

    host: str
    index: int
    model: str = "NVIDIA H100 80GB HBM3"
    mig_instance: str = ""
    mig_profile: str = ""
    mem_total_mib: int = 81920  # used + free, the driver's reserve excluded

    @property
    def uuid(self) -> str:
        return f"GPU-{self.host}-{self.index:04d}"

    @property
    def device_key(self) -> tuple[str, int]:
        return (self.host, self.index)


@dataclass(frozen=True)
class Execution:
    id: str
    gpus: tuple[Gpu, ...]
    phases: tuple[str, ...] = TRAINING
    start_minute: int = 0
    # Per-GPU change of utilisation (percent points), so GPUs of one execution differ.
    util_offsets: tuple[float, ...] = ()
    namespace: str = "research"

    @property
    def end_minute(self) -> int:
        return self.start_minute + sum(PHASES[p].minutes for p in self.phases)

    def phase_at(self, minute: float) -> Phase | None:
        t = self.start_minute
        for name in self.phases:
            phase = PHASES[name]
            if t <= minute < t + phase.minutes:
                return phase
            t += phase.minutes
        return None

    def phase_start(self, name: str) -> int:
        t = self.start_minute
        for p in self.phases:
            if p == name:
                return t
            t += PHASES[p].minutes
        raise KeyError(name)

    def util_offset(self, gpu: Gpu) -> float:
        i = self.gpus.index(gpu)
        return self.util_offsets[i] if i < len(self.util_offsets) else 0


@dataclass(frozen=True)
class Host:
    name: str
    generation: str = "4.8"  # the dcgm-exporter generation on this host
    host_label: str = ""  # "Hostname" or "hostname"; default by generation
    cpus: int = 2
    ram_total_bytes: int = 256 * 1024**3
    base_cpu_busy: float = 0.125
    base_ram_used_bytes: int = 8 * 1024**3

    @property
    def dcgm_host_label(self) -> str:
        return self.host_label or ("Hostname" if self.generation == "4.8" else "hostname")


@dataclass(frozen=True)
class Scenario:
    """A set of hosts and executions over a time window, with exporter quirks."""

    name: str
    description: str
    hosts: tuple[Host, ...]
    executions: tuple[Execution, ...]
    unowned_gpus: tuple[Gpu, ...] = ()
    missing: frozenset[str] = frozenset()  # catalog signal keys the exporter does not export
    power_limit_enforced_watts: float = 700
    power_limit_requested_watts: float = 750
    minutes: int = 0  # window length; default: until the last execution ends

    @property
    def window_minutes(self) -> int:
        return self.minutes or max(e.end_minute for e in self.executions)

    @property
    def steps(self) -> int:
        return self.window_minutes * 60 // STEP_SECONDS

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def with_generation(self, generation: str, name: str, host_label: str = "") -> Scenario:
        hosts = tuple(replace(h, generation=generation, host_label=host_label) for h in self.hosts)
        return replace(self, name=name, hosts=hosts)

    def all_gpus(self) -> list[Gpu]:
        return [g for e in self.executions for g in e.gpus] + list(self.unowned_gpus)


def gpu_truth(scenario: Scenario, execution: Execution, gpu: Gpu, minute: float) -> dict[str, float] | None:
    """What each per-GPU recorded series should be, in base units; None when the execution is not running."""
    phase = execution.phase_at(minute)
    if phase is None:
        return None
    load = phase.gpu
    device = device_load(scenario, gpu, minute)  # temperature and clocks are device-wide on MIG
    util = (load.util_percent + execution.util_offset(gpu)) / PERCENT_PER_RATIO
    used_mib = mem_used_mib(execution, gpu, minute)
    out = {
        "gpu_utilization_ratio": util,
        "gpu_memory_used_bytes": used_mib * BYTES_PER_MIB,
        "gpu_memory_total_bytes": gpu.mem_total_mib * BYTES_PER_MIB,
        "gpu_memory_utilization_ratio": (used_mib * BYTES_PER_MIB) / (gpu.mem_total_mib * BYTES_PER_MIB),
        "gpu_temperature_celsius": float(device.temp_celsius),
        "gpu_power_watts": float(device_power(scenario, gpu, minute)),
        "gpu_sm_clock_hertz": float(device.sm_clock_mhz * HERTZ_PER_MHZ),
        "gpu_memory_clock_hertz": float(device.mem_clock_mhz * HERTZ_PER_MHZ),
        "gpu_pcie_rx_bytes_per_second": float(load.pcie_rx_bytes_per_second),
        "gpu_pcie_tx_bytes_per_second": float(load.pcie_tx_bytes_per_second),
    }
    limit = power_limit(scenario)
    if limit is not None:
        out["gpu_power_limit_watts"] = limit
    if "pcie_rx" in scenario.missing:
        del out["gpu_pcie_rx_bytes_per_second"]
    if "pcie_tx" in scenario.missing:
        del out["gpu_pcie_tx_bytes_per_second"]
    return out


def power_limit(scenario: Scenario) -> float | None:
    if "power_limit_enforced" not in scenario.missing:
        return float(scenario.power_limit_enforced_watts)
    if "power_limit_requested" not in scenario.missing:
        return float(scenario.power_limit_requested_watts)
    return None


def mem_used_mib(execution: Execution, gpu: Gpu, minute: float) -> int:
    """Framebuffer used at ``minute``, following the phase's ramp on the 15 s sample grid."""
    phase = execution.phase_at(minute)
    assert phase is not None
    load = phase.gpu
    scale = gpu.mem_total_mib / 81920  # MIG instances hold a share of the GPU's memory
    start = int(load.mem_used_mib * scale)
    if load.mem_used_end_mib is None:
        return start
    end = int(load.mem_used_end_mib * scale)
    steps = phase.minutes * 60 // STEP_SECONDS - 1
    k = int((minute - execution.phase_start(phase.name)) * 60 // STEP_SECONDS)
    return start + k * ((end - start) // steps)


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


def host_truth(scenario: Scenario, host: Host, minute: float) -> dict[str, float]:
    """A host's RAM and CPU at ``minute``: its base load plus each running execution's share."""
    busy, ram = host.base_cpu_busy, host.base_ram_used_bytes
    for e in scenario.executions:
        phase = e.phase_at(minute)
        if phase and any(g.host == host.name for g in e.gpus):
            busy += phase.host.cpu_busy
            ram += phase.host.ram_used_bytes
    return {
        "system_ram_total_bytes": float(host.ram_total_bytes),
        "system_ram_used_bytes": float(ram),
        "system_cpu_utilization_ratio": min(busy, 1.0),
    }
