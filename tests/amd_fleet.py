"""A mixed fleet as its exporters publish it: ROCm device-metrics-exporter on AMD hosts beside dcgm-exporter.

The AMD side is written from the exporter's own source (ROCm/device-metrics-exporter,
pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go, its Helm chart and docs/configuration/metricslist.md), not
from the catalog, so a wrong name or unit in the catalog fails against it: every metric a gauge, VRAM in
MiB, power in W, energy accumulated in µJ, one gpu_clock series per clock domain, socket residency
accumulators beside the firmware's tick counter; names with the ``amd_`` prefix from the Helm chart and
the Debian package, without it from the binary; ``clock_type`` spelled GPU_CLOCK_TYPE_* up to v1.4.1.2;
the thermal residency spelled soc_thermal in v1.3.x. An MI300X in CPX mode is eight GPUs (``gpu_id``)
sharing the parent's serial, of which only partition 0 publishes power, temperature, clocks, energy,
activity and residencies (v1.5 suppresses them on the others; v1.4 publishes power 0 there). An MI250X is
two GPUs, one per GCD, of which one publishes power and energy.

Values are constant over each execution (``AmdLoad``), so the truth a test compares with is the load itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from gpu_execution_pack.scenario.render import STALE, RenderedSeries, Sample

STEP_SECONDS = 15
TICKS_PER_SECOND = 100  # the residency accumulators' tick rate (firmware's; any rate reads the same share)
ENERGY_START_UJ = 4_000_000_000_000  # an energy accumulator some hours after the driver loaded


@dataclass(frozen=True)
class Exporter:
    """One device-metrics-exporter release as installed: its names, label spellings and labels enabled."""

    version: str
    prefix: str  # MetricsFieldPrefix: "amd_" from the Helm chart and the Debian package (v1.3.0 on)
    all_labels: bool  # the shipped configs enable gpu_uuid, card_series and the other optional labels

    @property
    def clock_type(self) -> dict[str, str]:
        if self.version >= "v1.4.2":
            return {"system": "system", "memory": "memory"}
        return {"system": "GPU_CLOCK_TYPE_SYSTEM", "memory": "GPU_CLOCK_TYPE_MEMORY"}

    @property
    def thermal_residency(self) -> str:
        v13 = self.version.startswith("v1.3")
        return (
            "gpu_violation_soc_thermal_residency_accumulated"
            if v13
            else ("gpu_violation_socket_thermal_residency_accumulated")
        )

    @property
    def suppresses_partition_power(self) -> bool:
        """v1.5 hides power on partitions other than 0; earlier releases publish 0 there."""
        return self.version >= "v1.5.0"


HELM_V151 = Exporter("v1.5.1", "amd_", True)
BINARY_V141 = Exporter("v1.4.1", "", False)
BINARY_V131 = Exporter("v1.3.1", "", False)


@dataclass(frozen=True)
class AmdLoad:
    """What one AMD GPU (or partition) does while an execution holds it, in the exporter's units."""

    gfx_percent: float
    vram_used_mib: int
    temperature_celsius: float
    power_watts: float  # the device's socket power
    ppt_share: float = 0.0  # share of time held at the package power limit
    thermal_share: float = 0.0
    umc_percent: float = 30.0
    system_clock_mhz: int = 2100  # the highest XCD clock; the others read up to 100 MHz lower
    memory_clock_mhz: int = 1300


IDLE = AmdLoad(0.0, 300, 40.0, 140.0, umc_percent=0.0, system_clock_mhz=800)


@dataclass(frozen=True)
class AmdGpu:
    """One GPU as the exporter enumerates it: a whole GPU, one GCD of an MI250X or one MI300 partition."""

    host: str
    gpu_id: int
    serial: str
    card: str  # "MI300X" or "MI250X"
    vram_total_mib: int
    partition_mode: str = "spx"
    partition_id: int = 0
    publishes_power: bool = True  # an MI250X publishes power on one of its two GCDs

    @property
    def primary(self) -> bool:
        """Partition 0 (or an unpartitioned GPU): the one that publishes device-wide values."""
        return self.partition_id == 0

    @property
    def uuid(self) -> str:
        # gpu_uuid embeds the device id (74a1 for an MI300X); one per GPU the exporter enumerates.
        device = {"MI300X": "74a1", "MI250X": "740c"}[self.card]
        return f"{self.gpu_id:02x}ff{device}-0000-1000-80{self.gpu_id:02x}-{self.serial[-12:].lower():0>12}"


CARD_MODEL = {"MI300X": "102-G30211-0C", "MI250X": "102-D65209-0C"}
CARD_SERIES = {"MI300X": "AMD Instinct MI300X OAM", "MI250X": "AMD Instinct MI250X"}


@dataclass(frozen=True)
class AmdExecution:
    """A Slurm job on AMD GPUs: the exporter labels its GPUs' series with job_id while it runs."""

    id: str
    gpus: tuple[AmdGpu, ...]
    load: AmdLoad
    start_minute: int
    end_minute: int
    user: str = "alice"
    pod: str = ""  # in Kubernetes: the workload's pod and namespace (the Helm chart's honorLabels: true keeps them)
    namespace: str = ""


@dataclass(frozen=True)
class AmdHost:
    name: str
    exporter: Exporter
    gpus: tuple[AmdGpu, ...]
    down_from_minute: int | None = None  # the exporter stops answering: up 0, no series

    def up(self, step: int) -> bool:
        return self.down_from_minute is None or step * STEP_SECONDS < self.down_from_minute * 60


@dataclass
class AmdFleet:
    """AMD hosts and the executions on them, sampled every 15 s over ``minutes``."""

    hosts: tuple[AmdHost, ...]
    executions: tuple[AmdExecution, ...]
    minutes: int
    job: str = "exporter-amdgpu-metrics-exporter"  # the Helm chart's job (jobLabel: app)
    _accumulated: dict = field(default_factory=dict)

    @property
    def steps(self) -> int:
        return self.minutes * 60 // STEP_SECONDS

    def holder(self, gpu: AmdGpu, step: int) -> AmdExecution | None:
        minute = step * STEP_SECONDS / 60
        return next((e for e in self.executions if gpu in e.gpus and e.start_minute <= minute < e.end_minute), None)

    def load(self, gpu: AmdGpu, step: int) -> AmdLoad:
        holder = self.holder(gpu, step)
        return holder.load if holder else IDLE

    def device_load(self, gpu: AmdGpu, step: int) -> AmdLoad:
        """A partitioned GPU's device-wide values are its partition 0's: that partition's holder's load."""
        host = next(h for h in self.hosts if h.name == gpu.host)
        primary = next(g for g in host.gpus if g.serial == gpu.serial and g.primary)
        return self.load(primary, step)

    # -- rendering ---------------------------------------------------------------------------
    def labels(self, host: AmdHost, gpu: AmdGpu, step: int) -> dict[str, str]:
        """A GPU's labels at a step, as stored: empty ones (no workload) are not stored at all."""
        labels = {
            "card_model": CARD_MODEL[gpu.card],
            "gpu_compute_partition_type": gpu.partition_mode,
            "gpu_id": str(gpu.gpu_id),
            "gpu_memory_partition_type": "nps1",
            "gpu_partition_id": str(gpu.partition_id),
            "hostname": host.name,
            "instance": f"{host.name}:5000",
            "job": self.job,
            "serial_number": gpu.serial,
            "cluster_name": "amdgpu-k8s-metrics-exporter",
        }
        if host.exporter.version >= "v1.4.2":
            labels["deployment_mode"] = "baremetal"
        if host.exporter.all_labels:
            labels |= {
                "card_series": CARD_SERIES[gpu.card],
                "card_vendor": "AMD",
                "driver_version": "6.12.12",
                "gpu_uuid": gpu.uuid,
                "vbios_version": "113-M3000100-102",
            }
        holder = self.holder(gpu, step)
        if holder is not None and holder.pod:
            labels |= {"pod": holder.pod, "namespace": holder.namespace, "container": "trainer"}
        elif holder is not None:
            labels |= {"job_id": holder.id, "job_user": holder.user, "job_partition": "gpu"}
        return labels

    def series(self) -> list[RenderedSeries]:
        """Every series the fleet's exporters publish, and their targets' ``up``."""
        out: dict[tuple[str, tuple[tuple[str, str], ...]], list[Sample]] = {}
        for host in self.hosts:
            for step in range(self.steps + 1):
                for gpu in host.gpus if host.up(step) else ():
                    labels = self.labels(host, gpu, step)
                    for name, extra, value in self.metrics(host, gpu, step):
                        key = (host.exporter.prefix + name, tuple(sorted((labels | extra).items())))
                        out.setdefault(key, [None] * (self.steps + 1))[step] = value
            target = (("instance", f"{host.name}:5000"), ("job", self.job))
            out[("up", target)] = [float(host.up(step)) for step in range(self.steps + 1)]
        return [RenderedSeries(name, labels, tuple(stale_ends(s))) for (name, labels), s in sorted(out.items())]

    def metrics(self, host: AmdHost, gpu: AmdGpu, step: int) -> Iterator[tuple[str, dict[str, str], float]]:
        """(name without prefix, extra labels, value) of every metric the GPU publishes at ``step``."""
        own, device = self.load(gpu, step), self.device_load(gpu, step)
        yield "gpu_used_vram", {}, float(own.vram_used_mib)
        yield "gpu_total_vram", {}, float(gpu.vram_total_mib)
        yield "gpu_free_vram", {}, float(gpu.vram_total_mib - own.vram_used_mib)
        if gpu.partition_mode != "spx":  # the partition's XCCs: two per CPX partition of an MI300X
            for xcc in range(2):
                yield "gpu_gfx_busy_instantaneous", {"xcc_index": str(xcc)}, own.gfx_percent + (xcc - 0.5) * 2
        if not gpu.primary:
            if not host.exporter.suppresses_partition_power:
                yield "gpu_package_power", {}, 0.0
            return
        yield "gpu_gfx_activity", {}, own.gfx_percent
        yield "gpu_umc_activity", {}, device.umc_percent
        mi300 = gpu.card == "MI300X"
        if mi300:
            yield "gpu_junction_temperature", {}, device.temperature_celsius
            yield "gpu_edge_temperature", {}, 0.0  # not measured on MI300; 0 before v1.4.0's NA handling
        else:
            yield "gpu_edge_temperature", {}, device.temperature_celsius
        if gpu.publishes_power:
            yield ("gpu_package_power" if mi300 else "gpu_average_package_power"), {}, device.power_watts
            yield "gpu_power_usage", {}, device.power_watts
            yield (
                "gpu_energy_consumed",
                {},
                self.accumulated(
                    ("energy", gpu),
                    step,
                    lambda s: self.device_load(gpu, s).power_watts * STEP_SECONDS * 1_000_000,
                    ENERGY_START_UJ,
                ),
            )
        clock_type = host.exporter.clock_type
        for index in range(8 if mi300 else 1):  # one system clock per XCD; the highest is the device's
            mhz = device.system_clock_mhz - (0 if index == 3 else 100)
            yield "gpu_clock", {"clock_index": str(index), "clock_type": clock_type["system"]}, float(mhz)
        memory_index = "8" if mi300 else "1"
        yield (
            "gpu_clock",
            {"clock_index": memory_index, "clock_type": clock_type["memory"]},
            float(device.memory_clock_mhz),
        )
        if mi300:  # socket-level residency accumulators (v1.3.0 on)
            ticks = TICKS_PER_SECOND * STEP_SECONDS
            yield (
                "gpu_violation_current_accumulated_counter",
                {},
                self.accumulated(("ticks", gpu), step, lambda s: ticks),
            )
            yield (
                "gpu_violation_ppt_residency_accumulated",
                {},
                self.accumulated(("ppt", gpu), step, lambda s: round(self.device_load(gpu, s).ppt_share * ticks)),
            )
            yield (
                host.exporter.thermal_residency,
                {},
                self.accumulated(
                    ("thermal", gpu), step, lambda s: round(self.device_load(gpu, s).thermal_share * ticks)
                ),
            )

    def accumulated(self, key: tuple, step: int, per_step, start: float = 0) -> float:
        """An accumulator's value at ``step``: ``start`` plus ``per_step(s)`` of every earlier step."""
        totals = self._accumulated.setdefault(key, [float(start)])
        while len(totals) <= step:
            totals.append(totals[-1] + per_step(len(totals) - 1))
        return totals[step]


def stale_ends(samples: list[Sample]) -> list[Sample]:
    """A stale marker where a series stops (its labels changed, or its execution ended)."""
    out = list(samples)
    for k in range(1, len(out)):
        if out[k] is None and out[k - 1] not in (None, STALE):
            out[k] = STALE
    return out
