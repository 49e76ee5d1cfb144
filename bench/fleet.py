"""A synthetic fleet on the scenario model, rendered fast enough for 10,000 GPUs.

``fleet_scenario`` lays out H hosts x 8 GPUs and up to E executions as a ``Scenario``: executions
of 1 to 64 GPUs (or MIG instances) on consecutive slots, so some span hosts and some share one;
every 16th host partitioned into two MIG instances per GPU; each execution cycling through one
of the model's phase profiles, from a different phase, for the whole window.

``FleetExposition`` renders that scenario as dcgm-exporter 4.8 (label attribution) and
node_exporter publish it at any instant: the text a live exporter serves, and OpenMetrics lines
for promtool backfill. The live text has the shape of a default install, since every series a
real exporter publishes costs Prometheus ingestion and selector work whether a rule reads it or
not: every field of the release's default counters file on every GPU entry, and node_exporter's
CPU (8 modes per logical CPU, ``CPUS_PER_HOST`` of them), memory, filesystem and network
families. A ``Shape`` gives a fleet of other hosts (``FEW_CPUS``: 32 CPUs publishing 2 modes, and
dcgm-exporter's profiling fields enabled); ``MANY_CPUS``, the default, is the fleet above.
Values come from the model's own functions; labels, metric names and units from the renderer and
the catalog. The generic ``render.Renderer`` (every generation and
attribution mode, exact values for promtool) walks every execution per GPU and sample, which is
fine for a handful of GPUs and far too slow for a fleet; here each GPU and host is given a
scenario of its own executions only, so one instant costs O(GPUs).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, replace

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.scenario import oracle, render
from gpu_execution_pack.scenario.model import STEP_SECONDS, Execution, Gpu, Host, Scenario
from gpu_execution_pack.scenario.oracle import raw_for
from gpu_execution_pack.scenario.phases import PHASES
from gpu_execution_pack.scenario.render import Renderer, fmt, to_unit

GPUS_PER_HOST = 8
MIG_EVERY = 16  # every 16th host is partitioned: two 3g.40gb instances per A100
# GPUs (or instances) per execution, drawn at random: mostly small jobs, a few large ones.
SIZES = (1, 1, 1, 2, 2, 4, 4, 8, 8, 8, 16, 64)
PROFILES = (
    ("loading", "compute", "memory_ramp", "throttled", "idle"),  # training with checkpoints
    ("loading", "compute", "compute", "idle"),
    ("loading", "stalled", "compute", "idle"),  # waits on input
    ("cpu_bound", "compute"),  # pre-processing bound
    ("loading", "capped", "compute"),  # held at its power limit
)
TENANTS = ("research", "vision", "speech", "platform")
GENERATION = "4.8"
# The metric fields of dcgm-exporter's etc/default-counters.csv at release 4.5.3-4.8.2, in the
# file's order with the file's type (DCGM_FI_DRIVER_VERSION, a label there, is one on every entry).
DEFAULT_COUNTERS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge"),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter"),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge"),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge"),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge"),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge"),
    ("DCGM_FI_DEV_FB_FREE", "gauge"),
    ("DCGM_FI_DEV_FB_USED", "gauge"),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge"),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter"),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge"),
)
# The catalog's signals the fleet publishes: those of the default counters, and the enforced power
# limit, which the pack needs from a custom counters file (opt-in from 4.8.4).
DCGM_SIGNALS = tuple(
    key
    for key in render.DCGM_SIGNALS
    if (raw := raw_for(key, GENERATION)) is not None and (raw.default_collected or key == "power_limit_enforced")
)
# The default fields no catalog signal reads, with the value each GPU entry publishes: constant
# gauges, and counters growing at a fixed rate per second (the fleet prices ingestion, not figures).
OTHER_FIELDS: dict[str, float] = {
    "DCGM_FI_DEV_MEMORY_TEMP": 48,
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
    "DCGM_FI_DEV_MEM_COPY_UTIL": 35,
    "DCGM_FI_DEV_ENC_UTIL": 0,
    "DCGM_FI_DEV_DEC_UTIL": 0,
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": 2.5e9,
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": 0,
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0,
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0,
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
}
# The profiling fields a dcgm-exporter publishes once they are uncommented in its counters file (SM activity and
# occupancy, the FP64/32/16 pipes: commented out in default-counters.csv and dcp-metrics-included.csv alike).
PROFILING_COUNTERS = (
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "gauge"),
    ("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge"),
)
# The catalog's signals among them (read from the model), and the others' constant values.
PROFILING_SIGNALS = ("sm_active", "sm_occupancy")
PROFILING_OTHER_FIELDS: dict[str, float] = {
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": 0.01,
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": 0.2,
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": 0.1,
}
DCGM_KINDS = dict(DEFAULT_COUNTERS + PROFILING_COUNTERS)

# node_exporter. Real GPU hosts have 64 to 224 logical CPUs; each publishes 8 modes.
CPUS_PER_HOST = 128
# How a CPU's busy time splits over the modes other than idle (shares of 1 - idle).
BUSY_MODES = {"iowait": 0.03, "irq": 0.01, "nice": 0.01, "softirq": 0.02, "steal": 0.01, "system": 0.12, "user": 0.8}


@dataclass(frozen=True)
class Shape:
    """What each host of a fleet publishes: its logical CPUs (``fleet_scenario``'s ``cpus``), the CPU modes
    node_exporter publishes for each (idle always: the rules read it), and whether dcgm-exporter publishes the
    profiling fields too (``FleetExposition``'s ``shape``)."""

    name: str
    cpus: int = CPUS_PER_HOST
    busy_modes: tuple[str, ...] = tuple(BUSY_MODES)  # the modes besides idle
    profiling: bool = False

    @property
    def cpu_modes(self) -> int:
        """How many CPU modes each CPU publishes."""
        return 1 + len(self.busy_modes)


# Today's fleet (the default of every bench): 128 CPUs x 8 modes, the default counters.
MANY_CPUS = Shape("128 CPUs x 8 modes")
# Lighter hosts: 32 CPUs publishing idle and user only (node_exporter's cpu collector filtered), and the
# profiling fields enabled, as another fleet the table measured.
FEW_CPUS = Shape("32 CPUs x 2 modes, profiling fields", cpus=32, busy_modes=("user",), profiling=True)
# The meminfo gauges a default node_exporter publishes on x86_64 Linux, as shares of MemTotal
# (MemTotal and MemAvailable come from the model).
MEMINFO = {
    "Active": 0.12,
    "Active_anon": 0.08,
    "Active_file": 0.04,
    "AnonHugePages": 0.02,
    "AnonPages": 0.09,
    "Bounce": 0.0,
    "Buffers": 0.001,
    "Cached": 0.3,
    "CommitLimit": 0.5,
    "Committed_AS": 0.2,
    "DirectMap1G": 0.9,
    "DirectMap2M": 0.09,
    "DirectMap4k": 0.001,
    "Dirty": 0.0001,
    "FileHugePages": 0.0,
    "FilePmdMapped": 0.0,
    "HardwareCorrupted": 0.0,
    "Hugetlb": 0.0,
    "Inactive": 0.25,
    "Inactive_anon": 0.01,
    "Inactive_file": 0.24,
    "KReclaimable": 0.01,
    "KernelStack": 0.0002,
    "Mapped": 0.01,
    "MemFree": 0.5,
    "Mlocked": 0.0,
    "NFS_Unstable": 0.0,
    "PageTables": 0.001,
    "Percpu": 0.0001,
    "SReclaimable": 0.01,
    "SUnreclaim": 0.005,
    "SecPageTables": 0.0,
    "Shmem": 0.002,
    "ShmemHugePages": 0.0,
    "ShmemPmdMapped": 0.0,
    "Slab": 0.015,
    "SwapCached": 0.0,
    "SwapFree": 0.0,
    "SwapTotal": 0.0,
    "Unaccepted": 0.0,
    "Unevictable": 0.0,
    "VmallocChunk": 0.0,
    "VmallocTotal": 0.13,
    "VmallocUsed": 0.001,
    "Writeback": 0.0,
    "WritebackTmp": 0.0,
    "Zswap": 0.0,
    "Zswapped": 0.0,
}
MEMINFO_COUNTS = ("HugePages_Free", "HugePages_Rsvd", "HugePages_Surp", "HugePages_Total")  # pages, not bytes
# (device, fstype, mountpoint) a GPU host mounts, and the filesystem collector's gauges of each.
FILESYSTEMS = (
    ("/dev/nvme0n1p2", "ext4", "/"),
    ("/dev/nvme0n1p1", "vfat", "/boot/efi"),
    ("/dev/md0", "ext4", "/raid"),
    ("tmpfs", "tmpfs", "/run"),
    ("tmpfs", "tmpfs", "/run/lock"),
    ("tmpfs", "tmpfs", "/dev/shm"),
)
FILESYSTEM_GAUGES = ("avail_bytes", "device_error", "files", "files_free", "free_bytes", "readonly", "size_bytes")
# A DGX-like host's interfaces: loopback, two Ethernet ports, eight InfiniBand HCAs.
NET_DEVICES = ("lo", "enp170s0f0np0", "enp170s0f1np1", *(f"ibp{n}s0" for n in (12, 75, 141, 186, 24, 84, 154, 204)))
# netdev (counters, bytes or packets per second at a fixed rate) and netclass (gauges) per device.
NETDEV_COUNTERS = {
    f"{way}_{what}_total": rate
    for way in ("receive", "transmit")
    for what, rate in (
        ("bytes", 1.2e8),
        ("compressed", 0),
        ("drop", 0.01),
        ("errs", 0),
        ("fifo", 0),
        ("frame" if way == "receive" else "carrier", 0),
        ("multicast" if way == "receive" else "colls", 0.1),
        ("packets", 9e4),
    )
}
NETCLASS_GAUGES = (
    "address_assign_type",
    "carrier",
    "device_id",
    "dormant",
    "flags",
    "iface_id",
    "iface_link",
    "iface_link_mode",
    "mtu_bytes",
    "name_assign_type",
    "net_dev_group",
    "protocol_type",
    "speed_bytes",
    "transmit_queue_length",
    "up",
)
NETCLASS_COUNTERS = ("carrier_changes_total", "carrier_down_changes_total", "carrier_up_changes_total")


def host_name(index: int) -> str:
    """The name of the fleet's ``index``-th host."""
    return f"h{index:05d}"


def fleet_scenario(gpus: int, executions: int, minutes: int, seed: int = 7, cpus: int = CPUS_PER_HOST) -> Scenario:
    """``gpus`` GPUs on gpus/8 hosts of ``cpus`` CPUs; up to ``executions`` executions, each running all ``minutes``."""
    rng = random.Random(seed)
    hosts = tuple(Host(host_name(h), cpus=cpus) for h in range(-(-gpus // GPUS_PER_HOST)))
    slots: list[Gpu] = []
    for g in range(gpus):
        host, index = host_name(g // GPUS_PER_HOST), g % GPUS_PER_HOST
        if (g // GPUS_PER_HOST) % MIG_EVERY == MIG_EVERY - 1:
            slots += [Gpu(host, index, "NVIDIA A100-SXM4-80GB", str(i), "3g.40gb", mem_total_mib=40960) for i in (1, 2)]
        else:
            slots.append(Gpu(host, index))
    placed: list[Execution] = []
    position = 0
    for e in range(executions):
        size = rng.choice(SIZES)
        if position + size > len(slots):
            break
        profile = rng.choice(PROFILES)
        cycle = sum(PHASES[p].minutes for p in profile)
        shift = rng.randrange(len(profile))  # executions start in different phases
        phases = (profile[shift:] + profile[:shift]) * (minutes // cycle + 1)
        offsets = tuple(float(rng.choice((0, -1, -2, -3))) for _ in range(size))
        placed.append(
            Execution(
                f"exec-{e:05d}",
                tuple(slots[position : position + size]),
                phases,
                util_offsets=offsets,
                namespace=TENANTS[e % len(TENANTS)],
            )
        )
        position += size + rng.choice((0, 0, 1))  # some leave a slot free, so hosts hold idle GPUs
    held = {g for e in placed for g in e.gpus}
    return Scenario(
        f"fleet of {gpus} GPUs",
        fleet_scenario.__doc__ or "",
        hosts,
        tuple(placed),
        unowned_gpus=tuple(g for g in slots if g not in held),
        minutes=minutes,
    )


ENERGY = "energy"  # the cumulative signal, which gpu_publishes (gauges only) does not give
FLEET_ENERGY_WATTS = 400


@dataclass(frozen=True)
class _Slot:
    """One GPU or MIG instance with what its series need, worked out once."""

    gpu: Gpu
    owner: Execution | None
    labels: str  # the exposition's label set
    device: Scenario  # the scenario narrowed to the executions on this physical GPU


class FleetExposition:
    """A fleet scenario as exporters publish it, with scenario minute 0 at unix time ``start``."""

    def __init__(self, scenario: Scenario, start: float, cfg: Config | None = None, shape: Shape = MANY_CPUS):
        self.s, self.start, self.shape = scenario, start, shape
        # The catalog's signals this fleet publishes, and its other fields with their values.
        self.signals = DCGM_SIGNALS + (PROFILING_SIGNALS if shape.profiling else ())
        self.other_fields = OTHER_FIELDS | (PROFILING_OTHER_FIELDS if shape.profiling else {})
        self.renderer = renderer = Renderer(scenario, cfg or Config())
        owners = {g: e for e in scenario.executions for g in e.gpus}
        on_device: dict[tuple[str, int], list[Execution]] = {}
        for e in scenario.executions:
            for key in {g.device_key for g in e.gpus}:
                on_device.setdefault(key, []).append(replace(e, gpus=tuple(g for g in e.gpus if g.device_key == key)))
        hosts = {h.name: h for h in scenario.hosts}
        self.slots: list[_Slot] = []
        for gpu in sorted(scenario.all_gpus(), key=lambda g: (g.host, g.index, g.mig_instance)):
            owner = owners.get(gpu)
            labels = renderer.gpu_labels(hosts[gpu.host], gpu, owner)
            text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            device = replace(scenario, executions=tuple(on_device.get(gpu.device_key, ())))
            self.slots.append(_Slot(gpu, owner, text, device))
        on_host: dict[str, list[Execution]] = {}
        for e in scenario.executions:
            for host in dict.fromkeys(g.host for g in e.gpus):
                on_host.setdefault(host, []).append(e)
        # Each host narrowed to the executions on it: its RAM and CPU are theirs and its base load.
        self.on_host = {h.name: replace(scenario, executions=tuple(on_host.get(h.name, ()))) for h in scenario.hosts}
        self.names = {key: raw_for(key, GENERATION) for key in self.signals}
        self._idle: dict[str, tuple[float, float]] = {}
        self._prefixes: dict[tuple[str, str], list[str]] = {}  # a host's CPU lines of a mode, without value
        self._static: dict[str, dict[str, list[str]]] = {}  # a host's unchanging node lines by family

    def minute(self, t: float) -> float:
        """The scenario minute at unix time ``t``, on the 15 s sample grid."""
        return (int(t - self.start) // STEP_SECONDS) * STEP_SECONDS / 60

    # -- dcgm-exporter -----------------------------------------------------------------------
    def gpu_values(self, slot: _Slot, minute: float) -> dict[str, float]:
        """What one GPU entry publishes at ``minute`` of the catalog's signals, in dcgm-exporter 4.8's units."""
        base = oracle.gpu_publishes(slot.device, slot.gpu, slot.owner, minute)
        values = {key: to_unit(base[key], self.names[key].unit) for key in self.signals if key != ENERGY}
        # The energy counter (mJ) grows at a fixed rate here: the fleet prices its rule, not its figure.
        values[ENERGY] = oracle.ENERGY_AT_START_MILLIJOULES + FLEET_ENERGY_WATTS * 1000 * minute * 60
        return values

    def dcgm_samples(self, slots: list[_Slot], times: Iterable[float], stamp: bool) -> dict[str, list[str]]:
        """Lines of the catalog's signals by metric name: every slot at every unix time, timestamped for backfill."""
        lines: dict[str, list[str]] = {self.names[k].name: [] for k in self.signals}
        for slot in slots:
            for t in times:
                suffix = f" {int(t)}" if stamp else ""
                for key, value in self.gpu_values(slot, self.minute(t)).items():
                    lines[self.names[key].name].append(f"{self.names[key].name}{{{slot.labels}}} {fmt(value)}{suffix}")
        return lines

    def dcgm_text(self, t: float, hosts: frozenset[str] | None = None) -> str:
        """dcgm-exporter's /metrics at unix time ``t``, of every host or of ``hosts``: every default field (and
        the profiling fields, where the shape enables them)."""
        slots = self.slots if hosts is None else [s for s in self.slots if s.gpu.host in hosts]
        samples = self.dcgm_samples(slots, (t,), stamp=False)
        seconds = t - self.start
        for name, value in self.other_fields.items():
            shown = fmt(value * seconds if DCGM_KINDS[name] == "counter" else value)
            samples[name] = [f"{name}{{{slot.labels}}} {shown}" for slot in slots]
        return exposition(samples, DCGM_KINDS)

    # -- node_exporter -----------------------------------------------------------------------
    def host_truth(self, host: Host, t: float) -> dict[str, float]:
        """What the model says ``host`` shows at unix time ``t``, from the executions on it."""
        return oracle.host_truth(self.on_host[host.name], host, self.minute(t))

    def cpu_idle_seconds(self, host: Host, t: float) -> float:
        """One CPU's idle-seconds counter at unix time ``t``, counted from ``start``.

        Kept per host and carried forward, so a live exporter's scrape costs one step per host.
        """
        last, idle = self._idle.get(host.name, (self.start, 0.0))
        if t < last:
            last, idle = self.start, 0.0
        for step in range(int(last), int(t) - STEP_SECONDS + 1, STEP_SECONDS):
            idle += STEP_SECONDS * (1 - self.host_truth(host, step)[catalog.NODE_CPU_UTILIZATION])
            last = step + STEP_SECONDS
        self._idle[host.name] = (last, idle)
        return idle

    def node_samples(self, hosts: Iterable[Host], times: Iterable[float], stamp: bool) -> dict[str, list[str]]:
        """Sample lines of what the rules read, by metric name, of every host at every unix time.

        That is node_uname_info, MemTotal, MemAvailable and each CPU's idle counter (counted from
        ``start``): the backfill's node series. ``node_text`` adds the rest of a default install.
        """
        names = ("node_uname_info", "node_memory_MemTotal_bytes", "node_memory_MemAvailable_bytes")
        lines: dict[str, list[str]] = {n: [] for n in (*names, "node_cpu_seconds_total")}
        for host in hosts:
            target = self._node_target(host)
            idle = self.cpu_idle_seconds(host, min(times))
            for t in times:
                truth, suffix = self.host_truth(host, t), f" {int(t)}" if stamp else ""
                available = truth[catalog.NODE_RAM_TOTAL] - truth[catalog.NODE_RAM_USED]
                lines[names[0]].append(f'node_uname_info{{{target},nodename="{host.name}"}} 1{suffix}')
                lines[names[1]].append(f"{names[1]}{{{target}}} {fmt(truth[catalog.NODE_RAM_TOTAL])}{suffix}")
                lines[names[2]].append(f"{names[2]}{{{target}}} {fmt(available)}{suffix}")
                for cpu in range(host.cpus):
                    lines["node_cpu_seconds_total"].append(
                        f'node_cpu_seconds_total{{{target},cpu="{cpu}",mode="idle"}} {fmt(idle)}{suffix}'
                    )
                idle += STEP_SECONDS * (1 - truth[catalog.NODE_CPU_UTILIZATION])
        return lines

    def node_text(self, t: float, hosts: frozenset[str] | None = None) -> str:
        """node_exporter's /metrics at unix time ``t`` of every host or of ``hosts``, as a default install publishes.

        Every CPU of a host counts the same seconds in a mode: Prometheus compresses each series
        against its own past, so equal values across CPUs cost it what different ones would.
        """
        chosen = [h for h in self.s.hosts if hosts is None or h.name in hosts]
        samples = self.node_samples(chosen, (t,), stamp=False)
        cpu = samples["node_cpu_seconds_total"]
        for host in chosen:
            last, idle = self._idle[host.name]
            busy = max(last - self.start - idle, 0.0)
            for mode in self.shape.busy_modes:
                value = f" {fmt(busy * BUSY_MODES[mode])}"
                cpu += [f"{p}{value}" for p in self._cpu_prefixes(host, mode)]
        seconds = t - self.start
        for host in chosen:
            for name, lines in self._node_static(host).items():
                samples.setdefault(name, []).extend(lines)
            target = 'device="{}",' + self._node_target(host)
            for name, rate in NETDEV_COUNTERS.items():
                family = f"node_network_{name}"
                samples.setdefault(family, []).extend(
                    f"{family}{{{target.format(d)}}} {fmt(rate * seconds)}" for d in NET_DEVICES
                )
        return exposition(samples, NODE_KINDS)

    def _node_target(self, host: Host) -> str:
        """A host's node_exporter target labels, with the host the scrape names under node.host_identity scrape."""
        labels = self.renderer.scraped(host, {"instance": f"{host.name}:9100", "job": "node"})
        return ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))

    def _cpu_prefixes(self, host: Host, mode: str) -> list[str]:
        key = (host.name, mode)
        if key not in self._prefixes:
            target = self._node_target(host)
            self._prefixes[key] = [
                f'node_cpu_seconds_total{{{target},cpu="{c}",mode="{mode}"}}' for c in range(host.cpus)
            ]
        return self._prefixes[key]

    def _node_static(self, host: Host) -> dict[str, list[str]]:
        """The lines of a host's families that do not change: meminfo, filesystems, network class."""
        if host.name in self._static:
            return self._static[host.name]
        target = self._node_target(host)
        total = host.ram_total_bytes
        lines: dict[str, list[str]] = {}
        for field, share in MEMINFO.items():
            lines[f"node_memory_{field}_bytes"] = [f"node_memory_{field}_bytes{{{target}}} {fmt(share * total)}"]
        for field in MEMINFO_COUNTS:
            lines[f"node_memory_{field}"] = [f"node_memory_{field}{{{target}}} 0"]
        for gauge in FILESYSTEM_GAUGES:
            family = f"node_filesystem_{gauge}"
            lines[family] = [
                f'{family}{{device="{dev}",fstype="{fs}",{target},mountpoint="{mount}"}} '
                f"{fmt(0 if gauge in ('device_error', 'readonly') else 2**40 >> (i + 2))}"
                for i, (dev, fs, mount) in enumerate(FILESYSTEMS)
            ]
        device = f'device="{{}}",{target}'
        for gauge in NETCLASS_GAUGES:
            family = f"node_network_{gauge}"
            lines[family] = [f"{family}{{{device.format(d)}}} 1" for d in NET_DEVICES]
        for counter in NETCLASS_COUNTERS:
            family = f"node_network_{counter}"
            lines[family] = [f"{family}{{{device.format(d)}}} 2" for d in NET_DEVICES]
        lines["node_network_info"] = [f'node_network_info{{{device.format(d)},operstate="up"}} 1' for d in NET_DEVICES]
        self._static[host.name] = lines
        return lines

    def host_series(self, host: Host) -> int:
        """How many series node_exporter publishes for ``host`` here."""
        text = self.node_text(self.start + STEP_SECONDS, frozenset({host.name}))
        return sum(not line.startswith("#") for line in text.splitlines())

    # -- backfill ----------------------------------------------------------------------------
    def openmetrics(self, t_from: int, t_to: int, execution_id: str = "") -> str:
        """OpenMetrics of one execution's GPUs and hosts, or the whole fleet's: a sample every 15 s in [t_from, t_to).

        A day of 10,000 GPUs is about 0.75 billion samples, more than promtool backfills in
        minutes: a benchmark backfills the execution it measures and scrapes the rest live.
        """
        slots = [s for s in self.slots if not execution_id or (s.owner is not None and s.owner.id == execution_id)]
        if not slots:
            raise ValueError(f"no execution {execution_id!r} in {self.s.name}")
        times = range(t_from, t_to, STEP_SECONDS)
        hosts = [h for h in self.s.hosts if h.name in {s.gpu.host for s in slots}]
        samples = {**self.dcgm_samples(slots, times, stamp=True), **self.node_samples(hosts, times, stamp=True)}
        # A series' samples in time order, series after series: what promtool's parser expects.
        return "".join("\n".join(sorted(lines, key=_series_then_time)) + "\n" for lines in samples.values()) + "# EOF\n"


def _series_then_time(line: str) -> tuple[str, int]:
    series, _, stamp = line.rpartition(" ")
    return series.rpartition(" ")[0], int(stamp)


# The TYPE of each node_exporter family the fleet publishes (gauge where not named here).
NODE_KINDS: dict[str, str] = {
    "node_cpu_seconds_total": "counter",
    **{f"node_network_{name}": "counter" for name in (*NETDEV_COUNTERS, *NETCLASS_COUNTERS)},
}


def exposition(samples: dict[str, list[str]], kinds: dict[str, str] | None = None) -> str:
    """Prometheus text exposition: each metric family together under its TYPE line (``kinds``, else gauge)."""
    kinds = kinds or NODE_KINDS
    return "".join(
        f"# TYPE {name} {kinds.get(name, 'gauge')}\n" + "\n".join(lines) + "\n"
        for name, lines in samples.items()
        if lines
    )
