"""AMD hosts as ROCm's device-metrics-exporter publishes them, and what their served series must hold.

The exporter is written from its own source (ROCm/device-metrics-exporter,
pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go, its Helm chart and docs/configuration/metricslist.md), not
from the catalog, so a wrong name or unit in the catalog fails against it: every metric a gauge, VRAM in
MiB, power in W, energy accumulated in µJ, one gpu_clock series per clock domain, socket residency
accumulators beside the firmware's tick counter; names with the ``amd_`` prefix from the Helm chart and
the Debian package, without it from the binary; ``clock_type`` spelled GPU_CLOCK_TYPE_* up to v1.4.1.2;
the thermal residency spelled soc_thermal in v1.3.x. An MI300X in CPX mode is eight GPUs (``gpu_id``)
sharing the parent's serial, of which only partition 0 publishes power, temperature, clocks, energy,
activity and residencies (v1.5 suppresses them on the others; v1.4 publishes power 0 there). An MI250X is
two GPUs, one per GCD, of which one publishes power and energy.

A workload arrives as the exporter attaches it: Slurm's ``job_id`` (label attribution), or the pod and
namespace the Helm chart's ``honorLabels: true`` keeps (kubernetes attribution, with kube_pod_labels).

Values are constant over each execution (``AmdLoad``), so the oracle (``AmdFleet.served``) is the load
itself, converted with this module's own unit facts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from gpu_execution_pack import catalog
from gpu_execution_pack.catalog import Series
from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.scenario.model import STEP_SECONDS
from gpu_execution_pack.scenario.render import STALE, RenderedSeries, Sample

# Independent unit facts for the oracle (not read from the catalog on purpose).
BYTES_PER_MIB = 1024 * 1024
HERTZ_PER_MHZ = 1_000_000
PERCENT_PER_RATIO = 100
SLURM_JOB_LABEL = "job_id"  # the exporter's Slurm job label
POD_NAMESPACE = "research"  # the namespace of an execution's pod, where the fleet runs on Kubernetes
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
    def partitioned(self) -> bool:
        return self.partition_mode != "spx"

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
    job_label: str = SLURM_JOB_LABEL  # what a Slurm job's id is stored as (a scrape config may rename job_id)
    extra_labels: tuple[tuple[str, str], ...] = ()  # on every series, e.g. the cluster as a central store sees it
    tenant_label: str = "namespace"  # api.tenant_label: the pod's namespace itself by default
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
            labels[self.tenant_label] = holder.namespace
        elif holder is not None:
            labels |= {self.job_label: holder.id, "job_user": holder.user, "job_partition": "gpu"}
        return labels | dict(self.extra_labels)

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
            target = tuple(
                sorted({"instance": f"{host.name}:5000", "job": self.job, **dict(self.extra_labels)}.items())
            )
            out[("up", target)] = [float(host.up(step)) for step in range(self.steps + 1)]
        return [RenderedSeries(name, labels, tuple(stale_ends(s))) for (name, labels), s in sorted(out.items())]

    def metrics(self, host: AmdHost, gpu: AmdGpu, step: int) -> Iterator[tuple[str, dict[str, str], float]]:
        """(name without prefix, extra labels, value) of every metric the GPU publishes at ``step``."""
        own, device = self.load(gpu, step), self.device_load(gpu, step)
        yield "gpu_used_vram", {}, float(own.vram_used_mib)
        yield "gpu_total_vram", {}, float(gpu.vram_total_mib)
        yield "gpu_free_vram", {}, float(gpu.vram_total_mib - own.vram_used_mib)
        if gpu.partitioned:  # the partition's XCCs: two per CPX partition of an MI300X
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
        peak = 3 if mi300 else 0
        for index in range(8 if mi300 else 1):  # one system clock per XCD; the highest is the device's
            mhz = device.system_clock_mhz - (0 if index == peak else 100)
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


# -- beside the GPUs ----------------------------------------------------------------------------------
def node_series(hosts: Iterable[str], steps: int, extra: tuple[tuple[str, str], ...] = ()) -> list[RenderedSeries]:
    """node_exporter on each of ``hosts`` over ``steps``: 512 GiB, a quarter used, two CPUs 30 % busy."""
    out = []
    for host in hosts:
        target = tuple(sorted({"instance": f"{host}:9100", "job": "node", **dict(extra)}.items()))
        out += [
            RenderedSeries("node_uname_info", tuple(sorted((*target, ("nodename", host)))), (1.0,) * (steps + 1)),
            RenderedSeries("node_memory_MemTotal_bytes", target, (512.0 * 1024**3,) * (steps + 1)),
            RenderedSeries("node_memory_MemAvailable_bytes", target, (384.0 * 1024**3,) * (steps + 1)),
        ]
        for cpu in ("0", "1"):
            for mode, share in (("idle", 0.7), ("user", 0.3)):
                labels = tuple(sorted((*target, ("cpu", cpu), ("mode", mode))))
                samples = tuple(k * STEP_SECONDS * share for k in range(steps + 1))
                out.append(RenderedSeries("node_cpu_seconds_total", labels, samples))
    return out


def fleet_node_series(fleet: AmdFleet) -> list[RenderedSeries]:
    """node_exporter on every host of ``fleet``."""
    return node_series((h.name for h in fleet.hosts), fleet.steps, fleet.extra_labels)


def pod_label_series(fleet: AmdFleet, cfg: Config) -> list[RenderedSeries]:
    """kube-state-metrics' pod labels of every execution running in a pod: its execution label."""
    out = []
    for e in fleet.executions:
        if not e.pod:
            continue
        labels = {
            "instance": "kube-state-metrics:8080",
            "job": "kube-state-metrics",
            catalog.KUBE_POD_LABEL_PREFIX + cfg.execution_label: e.id,
            "namespace": e.namespace,
            "pod": e.pod,
            **dict(fleet.extra_labels),
        }
        samples = tuple(
            1.0 if e.start_minute * 60 <= k * STEP_SECONDS < e.end_minute * 60 else None for k in range(fleet.steps + 1)
        )
        out.append(
            RenderedSeries(
                cfg.attribution.kubernetes_metric, tuple(sorted(labels.items())), tuple(stale_ends(list(samples)))
            )
        )
    return out


def as_configured(fleet: AmdFleet, cfg: Config, cluster: str = "") -> AmdFleet:
    """``fleet`` as ``cfg``'s Prometheus stores it: each exporter's name prefix one ``amd.metric_prefixes``
    reads, the Slurm job id under the label the rules read it from (``amd.execution_label``, else the
    execution label a scrape config renamed it to), ``amd.selector``'s equality matchers on every series,
    the cluster label where ``cluster_label`` is set, a pod's tenant in ``api.tenant_label``, and in kubernetes mode
    each execution in a pod."""
    prefixes = cfg.amd.metric_prefixes
    hosts = tuple(
        h if h.exporter.prefix in prefixes else replace(h, exporter=replace(h.exporter, prefix=prefixes[0]))
        for h in fleet.hosts
    )
    job_label = cfg.amd.execution_label or cfg.execution_label
    extra = tuple(cluster_scope(cfg).labels(cluster).items())
    # amd.selector's equality matchers hold on every series (e.g. the job a user's scrape config names).
    fixed = {m.label: str(m.value) for m in cfg.amd.matchers if m.op == "="}
    job = fixed.pop("job", fleet.job)
    extra += tuple(sorted(fixed.items()))
    executions = fleet.executions
    if cfg.attribution.mode == "kubernetes":  # each execution in a pod of its own
        executions = tuple(
            e if e.pod else replace(e, pod=f"{e.id}-worker-0", namespace=POD_NAMESPACE) for e in executions
        )
    return replace(
        fleet,
        hosts=hosts,
        executions=executions,
        job=job,
        job_label=job_label,
        extra_labels=extra,
        tenant_label=cfg.api.tenant_label,
        _accumulated={},
    )


# -- the oracle ----------------------------------------------------------------------------------------
def model_name(gpu: AmdGpu, exporter: Exporter, cfg: Config) -> str:
    """The served modelName: card_series (else card_model), renamed by the first ``amd.model_names`` entry
    that matches it whole, as Prometheus anchors a regular expression."""
    raw = CARD_SERIES[gpu.card] if exporter.all_labels else CARD_MODEL[gpu.card]
    named = raw
    for pattern, name in cfg.amd.model_names:
        if re.fullmatch(pattern, named):
            named = name
    return named


@dataclass(frozen=True)
class Served:
    """One GPU's (or partition's) served per-GPU series while an execution holds it: identity labels and values."""

    gpu: AmdGpu
    labels: dict[str, str]
    values: dict[Series, float]
    # Its share of its physical GPU: a partition's, partitions of one mode being equal, held or free; else 1.
    gpu_share: float = 1.0


def served(fleet: AmdFleet, execution: AmdExecution, cfg: Config, minute: float) -> list[Served]:
    """What the per-GPU series of ``execution`` must hold at ``minute``, in base units, from the loads alone.

    Device-wide values (temperature, power, clocks, residencies) are the physical GPU's: its partition 0
    holder's load on an MI300 in partitions. The GCD of an MI250X without power has no power series;
    partitions other than 0 have no memory activity (amdsmi has none per partition).
    """
    out, step = [], round(minute * 60) // STEP_SECONDS
    for gpu in execution.gpus:
        host = next(h for h in fleet.hosts if gpu in h.gpus)
        own, device = fleet.load(gpu, step), fleet.device_load(gpu, step)
        labels = {
            catalog.HOST_LABEL: host.name,
            "gpu": str(gpu.gpu_id),
            "UUID": gpu.serial if gpu.partitioned or not host.exporter.all_labels else gpu.uuid,
            "modelName": model_name(gpu, host.exporter, cfg),
        }
        if gpu.partitioned:
            labels |= {"GPU_I_ID": str(gpu.partition_id), "GPU_I_PROFILE": gpu.partition_mode}
        values = {
            catalog.GPU_UTILIZATION: own.gfx_percent / PERCENT_PER_RATIO,
            catalog.GPU_GRAPHICS_ENGINE_ACTIVE: own.gfx_percent / PERCENT_PER_RATIO,
            catalog.GPU_MEMORY_USED: float(own.vram_used_mib * BYTES_PER_MIB),
            catalog.GPU_MEMORY_TOTAL: float(gpu.vram_total_mib * BYTES_PER_MIB),
            catalog.GPU_TEMPERATURE: device.temperature_celsius,
            catalog.GPU_SM_CLOCK: float(device.system_clock_mhz * HERTZ_PER_MHZ),
            catalog.GPU_MEMORY_CLOCK: float(device.memory_clock_mhz * HERTZ_PER_MHZ),
        }
        values |= {
            catalog.GPU_MEMORY_UTILIZATION: own.vram_used_mib / gpu.vram_total_mib,
            # Held by one execution at a time: the whole GPU, worked at its utilisation.
            catalog.GPU_SHARE: 1.0,
            catalog.GPU_WORKED: values[catalog.GPU_UTILIZATION],
            # Mid-run: held at the step before, so each sample stands for one step.
            catalog.GPU_SAMPLE_SECONDS: float(STEP_SECONDS),
            # No max clock before v1.4.2: the highest SM clock since the execution began (constant here).
            catalog.GPU_SM_CLOCK_PEAK: values[catalog.GPU_SM_CLOCK],
        }
        if gpu.primary:
            values[catalog.GPU_DRAM_ACTIVE] = own.umc_percent / PERCENT_PER_RATIO
        # A partition's share of its GPU: partitions of one mode are equal, held or free.
        share = 1 / sum(1 for g in host.gpus if g.serial == gpu.serial) if gpu.partitioned else 1.0
        if gpu.publishes_power:
            values[catalog.GPU_POWER] = device.power_watts
            values[catalog.GPU_POWER_ATTRIBUTED] = device.power_watts * share
        if gpu.card == "MI300X":  # the socket residency accumulators
            values[catalog.GPU_POWER_VIOLATION] = device.ppt_share
            values[catalog.GPU_THERMAL_VIOLATION] = device.thermal_share
        out.append(Served(gpu, labels, values, share))
    return out


def unpublished(fleet: AmdFleet, cfg: Config, minute: float) -> tuple[Series, ...]:
    """The served per-GPU series no GPU of the fleet has a value for in the oracle (``served``): those AMD
    publishes no source for, absent on every AMD GPU, never a 0. Read from the oracle, not from the
    catalog's AMD sources, so that a test can hold the two against each other."""
    held = {s for e in fleet.executions for row in served(fleet, e, cfg, minute) for s in row.values}
    return tuple(s for s in catalog.SERVABLE_SERIES if s.labels == catalog.GPU_LABELS and s not in held)


def billed_gpus(fleet: AmdFleet, execution: AmdExecution, cfg: Config, minute: float) -> dict[str, float]:
    """What ``catalog.MODEL_GPU_COUNT`` must hold for ``execution`` at ``minute``, by model: a whole GPU (or GCD)
    counts one, an MI300 partition its share of the GPU."""
    out: dict[str, float] = {}
    for row in served(fleet, execution, cfg, minute):
        model = row.labels[catalog.MODEL_LABEL]
        out[model] = out.get(model, 0.0) + row.gpu_share
    return out


def execution_served(fleet: AmdFleet, execution: AmdExecution, cfg: Config, minute: float) -> dict[Series, float]:
    """What the execution's own series must hold at ``minute``: its GPUs' rolled up, each partition's power in
    its share of the GPU's."""
    rows = served(fleet, execution, cfg, minute)
    attributed = [r.values[catalog.GPU_POWER_ATTRIBUTED] for r in rows if catalog.GPU_POWER_ATTRIBUTED in r.values]
    return {
        catalog.EXECUTION_GPU_COUNT: float(len(rows)),
        catalog.EXECUTION_HOST_COUNT: float(len({r.labels[catalog.HOST_LABEL] for r in rows})),
        catalog.EXECUTION_GPU_POWER_SUM: sum(attributed),
        catalog.EXECUTION_GPU_UTILIZATION_AVG: sum(r.values[catalog.GPU_UTILIZATION] for r in rows) / len(rows),
        catalog.EXECUTION_GPU_MEMORY_USED_SUM: sum(r.values[catalog.GPU_MEMORY_USED] for r in rows),
        catalog.EXECUTION_GPU_MEMORY_UTILIZATION_MAX: max(r.values[catalog.GPU_MEMORY_UTILIZATION] for r in rows),
        catalog.EXECUTION_GPU_TEMPERATURE_MAX: max(r.values[catalog.GPU_TEMPERATURE] for r in rows),
    }
