"""What a synthetic scenario is: executions on GPUs on hosts, going through phases (``phases.PHASES``).

A scenario is the truth that tests compare recorded series with: ``oracle`` says what every per-GPU and
per-host series must hold, from these types and the phase table alone.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, replace
from functools import cached_property

from gpu_execution_pack.hashed import hashed_once
from gpu_execution_pack.scenario.phases import PHASES, TRAINING, Phase

STEP_SECONDS = 15  # dcgm-exporter's and node_exporter's usual scrape interval
CLUSTER = "eu-1"  # a scenario's cluster, where the config names a cluster label
UUID_PREFIX = "GPU-"  # a GPU's UUID is this, then its host's name and its index


@hashed_once
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
        return f"{UUID_PREFIX}{self.host}-{self.index:04d}"

    @property
    def device_key(self) -> tuple[str, int]:
        return (self.host, self.index)


@hashed_once
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


@hashed_once
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
    # dcgm-exporter with KUBERNETES_VIRTUAL_GPUS (time-slicing): GPU_UTIL and FB_USED per pod, each the sum of its
    # processes, with pod_uid and the device plugin's replica as vgpu, beside the device's own series; every other
    # field the device's, copied to each pod (with vgpu).
    virtual_gpus: bool = False
    # dcgm-exporter with --use-old-namespace: the workload's pod labels spelt pod_name, pod_namespace, container_name,
    # and the GPU's UUID label uuid.
    old_pod_labels: bool = False
    pod_info: bool = False  # kube-state-metrics publishes kube_pod_info (with the node) for the exporter pod
    # kube-state-metrics scraped without honor_labels (a ServiceMonitor without honorLabels, kubernetes-mixin
    # issue 523): each pod's namespace and pod arrive as exported_*, kube-state-metrics' own in the plain labels.
    pod_info_exported: bool = False
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
    def copies_no_pod_labels(self) -> bool:
        """Whether its dcgm-exporter maps pods through DRA or KUBERNETES_VIRTUAL_GPUS: on those paths it sets the
        workload's pod, namespace and container (pod_uid and vgpu, or the claim's dra_* labels) but copies none of
        the pod's own labels, which it copies on the device-plugin path only (transformation/kubernetes.go), so under
        label attribution its series carry no execution id."""
        return self.virtual_gpus or bool(self.dra_containers)

    @property
    def dcgm_host_label(self) -> str:
        return self.host_label or ("Hostname" if self.generation in ("3.3", "4.8") else "hostname")

    @property
    def dcgm_instance(self) -> str:
        return f"{self.dcgm_address or self.address or self.name}:9400"

    @property
    def node_instance(self) -> str:
        return f"{self.address or self.name}:9100"


@hashed_once
@dataclass(frozen=True)
class Scenario:
    """A set of hosts and executions over a time window, with exporter quirks."""

    name: str
    description: str
    hosts: tuple[Host, ...]
    executions: tuple[Execution, ...]
    unowned_gpus: tuple[Gpu, ...] = ()
    missing: frozenset[str] = frozenset()  # catalog signal keys the exporter does not export
    exported: frozenset[str] = frozenset()  # signal keys it exports beyond the defaults (see oracle.published)
    max_sm_clock_mhz: int = 1980
    xid_events: tuple[XidEvent, ...] = ()
    power_limit_enforced_watts: float = 700
    power_limit_requested_watts: float = 750
    minutes: int = 0  # window length; default: until the last execution ends
    host_name_collisions: tuple[NameCollision, ...] = ()
    cluster: str = CLUSTER  # the cluster label's value on every series (cluster_label set)
    # The prefix of every name of its hosts and executions where it shares a store with other scenarios and no
    # cluster label parts them (``library.apart``): its checks select what carries it.
    name_prefix: str = ""

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


def grid(start: float, end: float) -> list[float]:
    """The sample minutes from ``start`` to ``end``, both included."""
    first = -(-round(start * 60) // STEP_SECONDS)
    return [k * STEP_SECONDS / 60 for k in range(first, int(end * 60 // STEP_SECONDS) + 1)]
