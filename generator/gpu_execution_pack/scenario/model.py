"""What a synthetic scenario is: executions on GPUs on hosts, going through phases.

A scenario is the truth that tests compare recorded series with. Values are given in the
units the older exporters use (percent, MiB, MHz, W, degrees C, bytes/s); ``Truth`` turns them
into base units with this module's own constants, independently of the catalog's units, so a
wrong conversion in the catalog makes the tests fail instead of agreeing with itself. Truths are
keyed by the catalog's series objects: names are shared, values are not.

Values are chosen so that every conversion is exact in floating point (integer MiB and MHz,
percent divided by 100, dyadic CPU shares): promtool 2.42 compares sample values exactly.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, replace
from functools import cache, cached_property

from gpu_execution_pack import catalog
from gpu_execution_pack.catalog import Series

# Independent unit facts for the oracle (not read from the catalog on purpose).
BYTES_PER_MIB = 1024 * 1024
HERTZ_PER_MHZ = 1_000_000
PERCENT_PER_RATIO = 100
MILLIJOULES_PER_JOULE = 1000

STEP_SECONDS = 15  # dcgm-exporter's and node_exporter's usual scrape interval
CLUSTER = "eu-1"  # a scenario's cluster, where the config names a cluster label
RESERVED_MIB = 512  # framebuffer the driver keeps: FB_RESERVED, and in FB_TOTAL but not in used + free
# DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ since the driver loaded): the generations that publish it
# under that name, and what it reads when the scenario starts (a value seen on a real A30).
ENERGY_COUNTER_GENERATIONS = ("3.3", "4.8")
ENERGY_AT_START_MILLIJOULES = 126_272_101_025


@dataclass(frozen=True, kw_only=True)
class GpuLoad:
    """What one GPU reports during a phase (older exporters' units); given by keyword in the phase table."""

    util_percent: float
    mem_used_mib: int
    mem_used_end_mib: int | None = None  # a linear ramp to this value over the phase, else flat
    power_watts: float
    temp_celsius: float
    sm_clock_mhz: int
    mem_clock_mhz: int
    pcie_rx_bytes_per_second: int
    pcie_tx_bytes_per_second: int
    # Profiling activity (percent of cycles) on whole GPUs. Unset: the engines are active half the
    # time GPU_UTIL counts (so a rule that read them for utilisation would fail); on MIG instances
    # always as much as the utilisation, which is read from them. Tensor pipes unset: half the
    # engines; memory interface: a quarter of the utilisation; SM activity as the engines, SM
    # occupancy a quarter of them.
    engine_active_percent: float | None = None
    tensor_active_percent: float | None = None
    dram_active_percent: float | None = None
    # Throttle evidence, published only where a scenario exports those optional fields.
    clock_event_reasons: int = 0
    power_violation_share: float = 0.0  # of wall time, held down by the power limit
    thermal_violation_share: float = 0.0


@dataclass(frozen=True, kw_only=True)
class HostLoad:
    """What one execution adds to a host during a phase. CPU shares are dyadic (n/8)."""

    cpu_busy: float
    ram_used_bytes: int
    ram_used_end_bytes: int | None = None  # a linear ramp to this value over the phase, else flat


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
            GpuLoad(
                util_percent=4,
                mem_used_mib=4096,
                power_watts=110.5,
                temp_celsius=36,
                sm_clock_mhz=1755,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=2_000_000_000,
                pcie_tx_bytes_per_second=50_000_000,
            ),
            HostLoad(cpu_busy=0.75, ram_used_bytes=32 * 1024**3),
        ),
        Phase(
            "compute",
            10,
            GpuLoad(
                util_percent=97,
                mem_used_mib=61440,
                power_watts=650.25,
                temp_celsius=68,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=400_000_000,
                pcie_tx_bytes_per_second=200_000_000,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "memory_ramp",
            10,
            GpuLoad(
                util_percent=92,
                mem_used_mib=61440,
                mem_used_end_mib=81408,
                power_watts=640,
                temp_celsius=70,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=300_000_000,
                pcie_tx_bytes_per_second=100_000_000,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=56 * 1024**3),
        ),
        Phase(
            "throttled",
            10,
            # SW power cap and SW thermal slowdown bits (0x4 | 0x20).
            GpuLoad(
                util_percent=95,
                mem_used_mib=65536,
                power_watts=699.5,
                temp_celsius=86,
                sm_clock_mhz=1410,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=400_000_000,
                pcie_tx_bytes_per_second=200_000_000,
                clock_event_reasons=0x24,
                power_violation_share=0.75,
                thermal_violation_share=0.5,
            ),
            HostLoad(cpu_busy=0.375, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "idle",
            5,
            GpuLoad(
                util_percent=0,
                mem_used_mib=512,
                power_watts=72.25,
                temp_celsius=31,
                sm_clock_mhz=345,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=0,
                pcie_tx_bytes_per_second=0,
                clock_event_reasons=0x1,
            ),
            HostLoad(cpu_busy=0, ram_used_bytes=4 * 1024**3),
        ),
        # Phases the alert tests use.
        Phase(
            "leak",  # framebuffer grows from 60 % to 97.5 % over 15 minutes...
            15,
            GpuLoad(
                util_percent=90,
                mem_used_mib=49152,
                mem_used_end_mib=79872,
                power_watts=610,
                temp_celsius=71,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=300_000_000,
                pcie_tx_bytes_per_second=100_000_000,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "oom",  # ... and on to 100 % over 5, when the framework gives up
            5,
            GpuLoad(
                util_percent=90,
                mem_used_mib=79872,
                mem_used_end_mib=81920,
                power_watts=610,
                temp_celsius=71,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=300_000_000,
                pcie_tx_bytes_per_second=100_000_000,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "host_leak",  # host RAM grows from 128 GiB to 254 GiB of 256 GiB over 40 minutes
            40,
            GpuLoad(
                util_percent=93,
                mem_used_mib=61440,
                power_watts=630,
                temp_celsius=69,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=400_000_000,
                pcie_tx_bytes_per_second=200_000_000,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=120 * 1024**3, ram_used_end_bytes=246 * 1024**3),
        ),
        Phase(
            "capped",  # at the power limit with the SM clock pulled down (SW power cap bit)
            30,
            GpuLoad(
                util_percent=96,
                mem_used_mib=61440,
                power_watts=699.5,
                temp_celsius=79,
                sm_clock_mhz=1410,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=400_000_000,
                pcie_tx_bytes_per_second=200_000_000,
                clock_event_reasons=0x4,
                power_violation_share=0.75,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "hot",  # at 88 °C, under the power limit
            15,
            GpuLoad(
                util_percent=95,
                mem_used_mib=61440,
                power_watts=560,
                temp_celsius=88,
                sm_clock_mhz=1830,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=400_000_000,
                pcie_tx_bytes_per_second=200_000_000,
                clock_event_reasons=0x20,
                power_violation_share=0.0,
                thermal_violation_share=0.625,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "stalled",  # waiting on input, the host CPU mostly idle
            40,
            GpuLoad(
                util_percent=6,
                mem_used_mib=30720,
                power_watts=120,
                temp_celsius=40,
                sm_clock_mhz=1755,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=20_000_000,
                pcie_tx_bytes_per_second=1_000_000,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=24 * 1024**3),
        ),
        Phase(
            "hung",  # a deadlocked NCCL collective: kernels resident (GPU_UTIL high), the engines idle
            30,
            GpuLoad(
                util_percent=98,
                mem_used_mib=61440,
                power_watts=160,
                temp_celsius=48,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=0,
                pcie_tx_bytes_per_second=0,
                engine_active_percent=2,
                tensor_active_percent=0,
                dram_active_percent=1,
            ),
            HostLoad(cpu_busy=0.125, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "fp32",  # busy engines doing FP32 maths: the tensor pipes idle
            30,
            GpuLoad(
                util_percent=96,
                mem_used_mib=61440,
                power_watts=580,
                temp_celsius=66,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=400_000_000,
                pcie_tx_bytes_per_second=200_000_000,
                engine_active_percent=88,
                tensor_active_percent=0,
                dram_active_percent=40,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "tensor",  # busy engines on the tensor cores (mixed precision)
            30,
            GpuLoad(
                util_percent=96,
                mem_used_mib=61440,
                power_watts=660,
                temp_celsius=70,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=400_000_000,
                pcie_tx_bytes_per_second=200_000_000,
                engine_active_percent=90,
                tensor_active_percent=45,
                dram_active_percent=50,
            ),
            HostLoad(cpu_busy=0.25, ram_used_bytes=48 * 1024**3),
        ),
        Phase(
            "cpu_bound",  # pre-processing saturates the host CPU
            40,
            GpuLoad(
                util_percent=9,
                mem_used_mib=30720,
                power_watts=140,
                temp_celsius=42,
                sm_clock_mhz=1755,
                mem_clock_mhz=2619,
                pcie_rx_bytes_per_second=50_000_000,
                pcie_tx_bytes_per_second=1_000_000,
            ),
            HostLoad(cpu_busy=0.875, ram_used_bytes=24 * 1024**3),
        ),
    )
}

TRAINING = ("loading", "compute", "memory_ramp", "throttled", "idle")
# The framebuffer fields, which dcgm-exporter leaves out altogether on MIG-enabled H100s.
FRAMEBUFFER_SIGNALS = frozenset({"fb_used", "fb_free", "fb_reserved", "fb_capacity"})


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

    @cached_property
    def phase_starts(self) -> tuple[int, ...]:
        """The minute each phase begins, then the end: a fleet's day-long executions have hundreds."""
        starts = [self.start_minute]
        for name in self.phases:
            starts.append(starts[-1] + PHASES[name].minutes)
        return tuple(starts)

    @property
    def end_minute(self) -> int:
        return self.phase_starts[-1]

    def _phase_index(self, minute: float) -> int | None:
        if not self.start_minute <= minute < self.end_minute:
            return None
        return bisect_right(self.phase_starts, minute) - 1

    def phase_at(self, minute: float) -> Phase | None:
        i = self._phase_index(minute)
        return None if i is None else PHASES[self.phases[i]]

    def phase_start_at(self, minute: float) -> int:
        """When the phase running at ``minute`` began (phases may repeat)."""
        i = self._phase_index(minute)
        if i is None:
            raise ValueError(f"execution {self.id} is not running at minute {minute}")
        return self.phase_starts[i]

    def util_offset(self, gpu: Gpu) -> float:
        i = self.gpus.index(gpu)
        return self.util_offsets[i] if i < len(self.util_offsets) else 0


@dataclass(frozen=True)
class XidEvent:
    """An Xid error on a physical GPU; its exporter's gauge holds the code afterwards."""

    host: str
    index: int
    minute: float
    code: int


@dataclass(frozen=True)
class NameCollision:
    """A host name two or more machines' node_exporters claim while a dcgm-exporter gives it, from minute
    ``start`` until ``end``: what the recorded collision series (catalog.NODE_HOST_COLLISIONS) must hold."""

    name: str
    machines: int
    start: float = 0
    end: float = float("inf")

    def at(self, minute: float) -> bool:
        return self.start <= minute < self.end


@dataclass(frozen=True)
class Host:
    """A machine: ``name`` is what every recorded series must call it: the name both exporters give it
    where they agree exactly, else its short name (its whole nodename where two machines claim that).

    The other fields say how its exporters spell it, as the GPU Operator, the upstream Helm chart and
    bare-metal installs do (``library.real_installs``).
    """

    name: str
    generation: str = "4.8"  # the dcgm-exporter generation on this host
    host_label: str = ""  # "Hostname" or "hostname" (default by generation), or "none"
    dcgm_host: str = ""  # what dcgm-exporter's host label says (default: name); a pod name without NODE_NAME
    relabelled_hostname: str = ""  # a scrape config's own `hostname` beside an old exporter's `Hostname`
    nodename: str = ""  # node_exporter's nodename (default: name); a FQDN, or localhost.localdomain
    address: str = ""  # the host part of both exporters' scrape targets (default: name)
    dcgm_address: str = ""  # dcgm-exporter's own, where it differs (a pod IP without hostNetwork)
    exporter_pod: str = ""  # the dcgm-exporter pod: the target's namespace and pod, the workload's exported_*
    exporter_namespace: str = "gpu-operator"
    # Kubernetes DRA (dcgm-exporter KUBERNETES_ENABLE_DRA): the containers of the workload's pod that reference
    # the GPU's claim; the exporter publishes one copy of each series per container, with the claim's labels.
    dra_containers: tuple[str, ...] = ()
    pod_info: bool = False  # kube-state-metrics publishes kube_pod_info (with the node) for the exporter pod
    kube_node: str = ""  # the Kubernetes node name (default: name)
    node_cpu_backjump: float | None = None  # minute at which an old node_exporter's idle counter steps back
    node_scrape_seconds: int = STEP_SECONDS  # node_exporter's scrape interval
    dcgm_outage: tuple[float, float] | None = None  # the host's dcgm-exporter is down from, until
    missing: frozenset[str] = frozenset()  # signal keys this host's exporter does not publish (see Scenario)
    cpus: int = 2
    ram_total_bytes: int = 256 * 1024**3
    base_cpu_busy: float = 0.125
    base_ram_used_bytes: int = 8 * 1024**3

    @property
    def dcgm_host_label(self) -> str:
        return self.host_label or ("Hostname" if self.generation in ("3.3", "4.8") else "hostname")

    @property
    def dcgm_instance(self) -> str:
        return f"{self.dcgm_address or self.address or self.name}:9400"

    @property
    def node_instance(self) -> str:
        return f"{self.address or self.name}:9100"


@dataclass(frozen=True)
class Scenario:
    """A set of hosts and executions over a time window, with exporter quirks."""

    name: str
    description: str
    hosts: tuple[Host, ...]
    executions: tuple[Execution, ...]
    unowned_gpus: tuple[Gpu, ...] = ()
    missing: frozenset[str] = frozenset()  # catalog signal keys the exporter does not export
    exported: frozenset[str] = frozenset()  # signal keys it exports beyond the defaults (see render.published)
    max_sm_clock_mhz: int = 1980
    xid_events: tuple[XidEvent, ...] = ()
    power_limit_enforced_watts: float = 700
    power_limit_requested_watts: float = 750
    minutes: int = 0  # window length; default: until the last execution ends
    host_name_collisions: tuple[NameCollision, ...] = ()
    cluster: str = CLUSTER  # the cluster label's value on every series (cluster_label set)

    @property
    def window_minutes(self) -> int:
        return self.minutes or max(e.end_minute for e in self.executions)

    @property
    def steps(self) -> int:
        return self.window_minutes * 60 // STEP_SECONDS

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def missing_on(self, host: str) -> frozenset[str]:
        """The signal keys the exporter on ``host`` does not publish: the scenario's and the host's own."""
        return self.missing | self.host(host).missing

    def with_generation(self, generation: str, name: str, host_label: str = "") -> Scenario:
        hosts = tuple(replace(h, generation=generation, host_label=host_label) for h in self.hosts)
        return replace(self, name=name, hosts=hosts)

    def all_gpus(self) -> list[Gpu]:
        """Every GPU (or MIG instance) once, however many executions hold it."""
        return list(dict.fromkeys([g for e in self.executions for g in e.gpus] + list(self.unowned_gpus)))


def holders(scenario: Scenario, gpu: Gpu, minute: float) -> list[Execution]:
    """The executions running on ``gpu`` (a GPU or MIG instance) at ``minute``, in the scenario's order:
    more than one where it is time-sliced or shared through MPS."""
    return [e for e in scenario.executions if gpu in e.gpus and e.phase_at(minute) is not None]


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
OPTIONAL_ACTIVITY = frozenset({"sm_active", "sm_occupancy"})


def gpu_truth(scenario: Scenario, execution: Execution, gpu: Gpu, minute: float) -> dict[Series, float] | None:
    """What each per-GPU recorded series should be, in base units; None when the execution is not running.

    A GPU several executions hold at once publishes one set of values for all of them (the first
    running holder's load here), and each is given an equal share of it.
    """
    if execution.phase_at(minute) is None:
        return None
    on_gpu = holders(scenario, gpu, minute)
    lead = on_gpu[0]
    load = lead.phase_at(minute).gpu  # type: ignore[union-attr]
    device = device_load(scenario, gpu, minute)  # temperature and clocks are device-wide on MIG
    util = (load.util_percent + lead.util_offset(gpu)) / PERCENT_PER_RATIO
    used_mib = mem_used_mib(lead, gpu, minute)
    out = {
        catalog.GPU_UTILIZATION: util,
        catalog.GPU_MEMORY_USED: used_mib * BYTES_PER_MIB,
        catalog.GPU_MEMORY_TOTAL: gpu.mem_total_mib * BYTES_PER_MIB,
        catalog.GPU_MEMORY_UTILIZATION: (used_mib * BYTES_PER_MIB) / (gpu.mem_total_mib * BYTES_PER_MIB),
        catalog.GPU_TEMPERATURE: float(device.temp_celsius),
        catalog.GPU_POWER: float(device_power(scenario, gpu, minute)),
        catalog.GPU_SM_CLOCK: float(device.sm_clock_mhz * HERTZ_PER_MHZ),
        catalog.GPU_MEMORY_CLOCK: float(device.mem_clock_mhz * HERTZ_PER_MHZ),
        catalog.GPU_PCIE_RX: float(load.pcie_rx_bytes_per_second),
        catalog.GPU_PCIE_TX: float(load.pcie_tx_bytes_per_second),
    }
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
    share = 1 / len(on_gpu)
    out[catalog.GPU_SHARE] = share
    out[catalog.GPU_WORKED] = util * share
    out[catalog.GPU_POWER_ATTRIBUTED] = out[catalog.GPU_POWER] * share
    missing = scenario.missing_on(gpu.host)
    for series, key in ACTIVITY_TRUTHS.items():
        if key not in missing and (key not in OPTIONAL_ACTIVITY or key in scenario.exported):
            out[series] = activity(load, util, bool(gpu.mig_instance))[key]
    if "pcie_rx" in missing:
        del out[catalog.GPU_PCIE_RX]
    if "pcie_tx" in missing:
        del out[catalog.GPU_PCIE_TX]
    if missing >= FRAMEBUFFER_SIGNALS:  # no framebuffer field at all (MIG-enabled H100s): no memory series
        for series in (catalog.GPU_MEMORY_USED, catalog.GPU_MEMORY_TOTAL, catalog.GPU_MEMORY_UTILIZATION):
            del out[series]
    return out


def gpu_publishes(scenario: Scenario, gpu: Gpu, owner: Execution | None, minute: float) -> dict[str, float]:
    """What a GPU (or MIG instance) publishes for each DCGM gauge signal at ``minute``, in base units.

    The one definition of a GPU's exporter values: the generic renderer and the fleet's both read
    it. ``owner`` is the execution holding the GPU, whether or not it runs at ``minute``.
    """
    # A GPU time-sliced between executions publishes the same values on each one's series.
    lead = next(iter(holders(scenario, gpu, minute)), owner)
    phase = lead.phase_at(minute) if lead is not None else None
    running = lead is not None and phase is not None
    util = (phase.gpu.util_percent + lead.util_offset(gpu)) / PERCENT_PER_RATIO if running else 0.0
    used_mib = mem_used_mib(lead, gpu, minute) if running else PHASES["idle"].gpu.mem_used_mib
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
        "sm_clock": float(device.sm_clock_mhz * HERTZ_PER_MHZ),
        "mem_clock": float(device.mem_clock_mhz * HERTZ_PER_MHZ),
        "pcie_rx": float(own.pcie_rx_bytes_per_second),
        "pcie_tx": float(own.pcie_tx_bytes_per_second),
        "xid_last": float(last_xid(scenario, gpu, minute)),
        "max_sm_clock": float(scenario.max_sm_clock_mhz * HERTZ_PER_MHZ),
        "clocks_event_reasons": float(device.clock_event_reasons),
    }


def grid(start: float, end: float) -> list[float]:
    """The sample minutes from ``start`` to ``end``, both included."""
    first = -(-round(start * 60) // STEP_SECONDS)
    return [k * STEP_SECONDS / 60 for k in range(first, int(end * 60 // STEP_SECONDS) + 1)]


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
