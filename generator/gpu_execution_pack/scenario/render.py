"""Render a scenario as the raw series exporters would publish, for promtool ``input_series``.

Raw metric names and their units come from the catalog (that is what the rules read);
the numbers come from the scenario's oracle (``model``), converted with the oracle's own
unit facts. Series are rendered for one exporter generation per host and one attribution
mode, so the same truth can be checked through every combination.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import cache, partial

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.scenario import model, oracle
from gpu_execution_pack.scenario.model import Execution, Gpu, Host, Scenario
from gpu_execution_pack.scenario.oracle import published, raw_for

STALE = "stale"
Sample = float | str | None  # a value, STALE, or None for no sample

DRIVER_VERSION = "550.54.15"

# Every DCGM signal a recorded series reads: each is published as ``oracle.published`` says.
DCGM_SIGNALS = tuple(k for k, s in catalog.SIGNALS.items() if s.exporter == "dcgm" and k in catalog.READ_SIGNALS)


BACKJUMP_SECONDS = 0.01  # how far an old node_exporter's idle counter steps back
# Exporter units of the violation counters, per dcgm.violation_counter_unit.
# kube-state-metrics' own pod (namespace, pod, node, node address), on a CPU node, as kube_pod_info lists it.
KUBE_STATE_POD = ("monitoring", "kube-state-metrics-855b4fbdb5-crgtg", "cpu-node-1", "10.0.9.1")
VIOLATION_TICKS_PER_SECOND = {"ns": 1_000_000_000, "us": 1_000_000}


class ScenarioError(ValueError):
    """A scenario value cannot be rendered exactly in an exporter's unit."""


def to_unit(base: float, unit: str) -> float:
    """Convert an oracle base-unit value to an exporter unit, exactly or not at all."""
    if unit == "percent":
        value = round(base * oracle.PERCENT_PER_RATIO, 9)
        back = value / oracle.PERCENT_PER_RATIO
    elif unit == "MiB":
        value = base / oracle.BYTES_PER_MIB
        back = value * oracle.BYTES_PER_MIB
    elif unit == "MHz":
        value = base / oracle.HERTZ_PER_MHZ
        back = value * oracle.HERTZ_PER_MHZ
    elif unit == "KB_per_second":  # NVML's PCIe throughput, KB read as 1024 bytes (see the catalog)
        value = base / 1024
        back = value * 1024
    else:
        return base
    if back != base:
        raise ScenarioError(f"{base} does not convert exactly to {unit}; choose a value that does")
    return value


@dataclass(frozen=True)
class RenderedSeries:
    metric: str
    labels: tuple[tuple[str, str], ...]
    samples: tuple[Sample, ...]

    @property
    def selector(self) -> str:
        inner = ",".join(f'{k}="{v}"' for k, v in self.labels)
        return f"{self.metric}{{{inner}}}"


def dra_labels(host: Host, gpu: Gpu, owner: Execution) -> dict[str, str]:
    """The labels dcgm-exporter adds with KUBERNETES_ENABLE_DRA: the resource claim and the device it allocated
    (its MIG profile and device for a MIG instance), beside the pod's namespace, pod and container."""
    labels = {
        "dra_claim_name": f"{owner.id}-gpu-claim",
        "dra_claim_namespace": owner.namespace,
        "dra_driver_name": "gpu.nvidia.com",
        "dra_pool_name": host.kube_node or host.name,
        "dra_device_name": f"gpu-{gpu.index}" + (f"-mig-{gpu.mig_instance}" if gpu.mig_instance else ""),
    }
    if gpu.mig_instance:
        labels |= {"dra_mig_profile": gpu.mig_profile, "dra_mig_device_uuid": f"MIG-{gpu.uuid[4:]}-{gpu.mig_instance}"}
    return labels


class Renderer:
    """Renders one scenario for one configuration (attribution mode and labels)."""

    def __init__(self, scenario: Scenario, cfg: Config):
        self.s = scenario
        self.cfg = cfg
        self.mode = cfg.attribution.mode
        # Every raw metric of a GPU reads the same values: compute them once per sample.
        self.publishes = cache(partial(oracle.gpu_publishes, scenario))

    # -- time ----------------------------------------------------------------------------
    def minutes(self) -> list[float]:
        return [k * model.STEP_SECONDS / 60 for k in range(self.s.steps + 1)]

    def when(self, active: Callable[[float], bool], value: Callable[[float], float]) -> tuple[Sample, ...]:
        """Samples while ``active``, a stale marker where it stops, nothing otherwise."""
        out: list[Sample] = []
        for m in self.minutes():
            if active(m):
                out.append(value(m))
            elif out and out[-1] not in (None, STALE):
                out.append(STALE)
            else:
                out.append(None)
        return tuple(out)

    def while_running(self, execution: Execution, value: Callable[[float], float]) -> tuple[Sample, ...]:
        """Samples while ``execution`` holds its GPUs, a stale marker after it ends, nothing before."""
        return self.when(lambda m: execution.start_minute <= m < execution.end_minute, value)

    @staticmethod
    def dcgm_alive(host: Host, minute: float) -> bool:
        return host.dcgm_outage is None or not host.dcgm_outage[0] <= minute < host.dcgm_outage[1]

    # -- DCGM ----------------------------------------------------------------------------
    def owner(self, gpu: Gpu) -> Execution | None:
        return next(iter(self.owners(gpu)), None)

    def owners(self, gpu: Gpu) -> list[Execution]:
        """Every execution that holds ``gpu``: more than one where it is time-sliced or shared through MPS."""
        return [e for e in self.s.executions if gpu in e.gpus]

    def gpu_labels(self, host: Host, gpu: Gpu, owner: Execution | None, container: str = "") -> dict[str, str]:
        old = host.generation in ("3.3", "4.8")
        labels = {
            "DCGM_FI_DRIVER_VERSION" if old else "DCGM_FI_SYSTEM_DRIVER_VERSION": DRIVER_VERSION,
            "UUID": gpu.uuid,
            "device": f"nvidia{gpu.index}",
            "gpu": str(gpu.index),
            "instance": host.dcgm_instance,
            "job": "dcgm-exporter",
            "modelName": gpu.model,
            "pci_bus_id": f"00000000:{0x18 + gpu.index:02X}:00.0",
        }
        if host.dcgm_host_label != "none":
            labels[host.dcgm_host_label] = host.dcgm_host or host.name
        if host.relabelled_hostname:
            labels["hostname"] = host.relabelled_hostname
        if gpu.mig_instance:
            labels |= {"GPU_I_ID": gpu.mig_instance, "GPU_I_PROFILE": gpu.mig_profile}
        exporter_pod = self.exporter_pod(host)
        workload: dict[str, str] = {}
        if owner is not None and self.pod_mapped(host):
            # The pod's namespace, which the pod join reads, and the tenant (api.tenant_label: the namespace
            # itself by default, else a label the scrape config puts on the workload's series).
            workload = {"namespace": owner.namespace, "pod": self.pod_name(owner, host)}
            workload[self.cfg.api.tenant_label] = owner.namespace
            if container:
                workload["container"] = container
                labels |= dra_labels(host, gpu, owner)
        elif owner is not None and self.mode == "label":
            # With its pod mapping, dcgm-exporter also attaches the workload's namespace: the tenant.
            labels[self.cfg.execution_label] = owner.id
            workload = {self.cfg.api.tenant_label: owner.namespace}
        if host.old_pod_labels:  # --use-old-namespace: the GPU's UUID label too
            workload = {catalog.OLD_POD_LABELS.get(k, k): v for k, v in workload.items()}
            labels[catalog.OLD_UUID_LABEL] = labels.pop(catalog.UUID_LABEL)
        if owner is not None and host.virtual_gpus and self.mode != "mapping":
            # The device plugin's time-slicing replica the pod holds (device id <UUID>::<replica>).
            labels["vgpu"] = str(self.owners(gpu).index(owner))
        if exporter_pod:
            # Behind a ServiceMonitor with honorLabels: false, namespace and pod name the exporter itself
            # and the workload's arrive as exported_*.
            labels |= {"namespace": host.exporter_namespace, "pod": exporter_pod}
            labels |= {f"exported_{k}": v for k, v in workload.items()}
        else:
            labels |= workload
        return self.scraped(host, labels)

    def pod_mapped(self, host: Host) -> bool:
        """Whether ``host``'s GPU series name the workload's pod (namespace, pod, container) and no execution id:
        under kubernetes attribution, and under label attribution where its exporter maps pods through DRA or
        KUBERNETES_VIRTUAL_GPUS (``Host.copies_no_pod_labels``): the exporter publishes what it publishes, whatever
        the pack's attribution mode, so there its series carry no execution id (no execution holds its GPUs)."""
        return self.mode == "kubernetes" or (self.mode == "label" and host.copies_no_pod_labels)

    def scraped(self, host: Host, labels: dict[str, str]) -> dict[str, str]:
        """An exporter target's labels as stored: under ``node.host_identity: scrape`` the scrape config sets the
        target label ``hostname`` to the machine's name, and an exporter's own ``hostname`` becomes
        ``exported_hostname`` (honor_labels: false)."""
        if not self.cfg.node.at_scrape:
            return labels
        host_label = catalog.HOST_LABEL
        stored = {k: v for k, v in labels.items() if k != host_label}
        if host_label in labels:
            stored[catalog.EXPORTED_PREFIX + host_label] = labels[host_label]
        return stored | {host_label: host.name}

    def exporter_pod(self, host: Host) -> str:
        """The dcgm-exporter pod's name where its target carries it (always in kubernetes mode)."""
        if host.exporter_pod or self.mode != "kubernetes":
            return host.exporter_pod
        return f"nvidia-dcgm-exporter-{host.name}"

    @staticmethod
    def pod_name(execution: Execution, host: Host) -> str:
        return f"{execution.id}-worker-{host.name}"

    def violation_counter(self, key: str, gpu: Gpu) -> Callable[[float], float]:
        """A violation counter in the configured unit: it grows by the throttled share of each step."""
        ticks = VIOLATION_TICKS_PER_SECOND[self.cfg.dcgm.violation_counter_unit]
        field = {"power_violation": "power_violation_share", "thermal_violation": "thermal_violation_share"}[key]
        totals, total = {}, 0.0
        for m in self.minutes():
            totals[m] = total
            total += getattr(oracle.device_load(self.s, gpu, m), field) * model.STEP_SECONDS * ticks
        return totals.__getitem__

    def gpu_spans(self, host: Host, gpu: Gpu) -> list[tuple[dict[str, str], Callable[[float], bool], Execution | None]]:
        """Each label set a GPU's series carry, when, and the execution whose labels they are (None: the GPU's own).

        The exporter attaches an execution's labels only while it runs and publishes the GPU
        without them before and after; in mapping mode the raw series never carry them.
        Nothing is published while the host's exporter is down.
        """
        owners = self.owners(gpu)
        alive = partial(self.dcgm_alive, host)
        if not owners or self.mode == "mapping":
            return [(self.gpu_labels(host, gpu, next(iter(owners), None)), alive, None)]

        def running(owner: Execution, m: float) -> bool:
            return owner.start_minute <= m < owner.end_minute

        # A GPU several executions hold at once (time-slicing, MPS) is published once per holder, as Slurm's job
        # mapping and dcgm-exporter's KUBERNETES_VIRTUAL_GPUS do; under DRA, once per container of the pod that
        # references the claim. (Kubernetes' pod mapping without KUBERNETES_VIRTUAL_GPUS labels one pod per GPU,
        # a case the library does not render: the rules cannot see the other holders, docs/report.md says so.)
        containers = host.dra_containers if self.pod_mapped(host) and host.dra_containers else ("",)
        return [
            *(
                (self.gpu_labels(host, gpu, owner, c), lambda m, owner=owner: running(owner, m) and alive(m), owner)
                for owner in owners
                for c in containers
            ),
            (self.gpu_labels(host, gpu, None), lambda m: not any(running(o, m) for o in owners) and alive(m), None),
        ]

    def per_process(self, host: Host, gpu: Gpu, key: str) -> bool:
        """Whether ``key`` is published per pod (its processes' sum) beside the device's own series, which is then
        published whoever holds the GPU (dcgm-exporter's KUBERNETES_VIRTUAL_GPUS)."""
        return (
            host.virtual_gpus
            and self.mode != "mapping"
            and key in oracle.PER_PROCESS_SIGNALS
            and bool(self.owners(gpu))
        )

    def per_process_span(
        self, host: Host, labels: dict[str, str], active: Callable[[float], bool], holder: Execution | None
    ) -> tuple[dict[str, str], Callable[[float], bool]]:
        """A per-process field's span: its pod series carry the pod's UID, its device series (no pod) is
        published all along."""
        if holder is None:
            return labels, partial(self.dcgm_alive, host)
        uid = {"pod_uid": f"uid-{holder.id}-{host.name}"} if self.pod_mapped(host) else {}
        return labels | uid, active

    def dcgm_series(self) -> Iterator[RenderedSeries]:
        for host in self.s.hosts:
            for gpu in (g for g in self.s.all_gpus() if g.host == host.name):
                owner = self.owner(gpu)
                for span_labels, span_active, holder in self.gpu_spans(host, gpu):
                    for key in DCGM_SIGNALS:
                        raw = raw_for(key, host.generation)
                        if raw is None or not published(key, raw, self.s, host.name):
                            continue
                        labels, active = span_labels, span_active
                        if key == "energy":
                            value = partial(oracle.energy_millijoules, self.s, gpu)
                        elif raw.type == "counter":
                            value = self.violation_counter(key, gpu)
                        else:
                            value = partial(self.raw_value, key, gpu, owner, raw.unit)
                        if self.per_process(host, gpu, key):
                            labels, active = self.per_process_span(host, labels, active, holder)
                            if holder is not None:
                                value = partial(self.own_value, key, holder, gpu, raw.unit)
                        yield RenderedSeries(raw.name, tuple(sorted(labels.items())), self.when(active, value))
            # The exporter's scrape target: up while it answers.
            target = tuple(
                sorted(self.scraped(host, {"instance": f"{host.name}:9400", "job": "dcgm-exporter"}).items())
            )
            yield RenderedSeries("up", target, tuple(float(self.dcgm_alive(host, m)) for m in self.minutes()))

    def raw_value(self, key: str, gpu: Gpu, owner: Execution | None, unit: str, minute: float) -> float:
        """What the exporter publishes for ``key``, in its own unit."""
        return to_unit(self.publishes(gpu, owner, minute)[key], unit)

    def own_value(self, key: str, execution: Execution, gpu: Gpu, unit: str, minute: float) -> float:
        """A per-process field on ``execution``'s pod series, in the exporter's unit."""
        return to_unit(oracle.own_publishes(self.s, execution, gpu, minute)[key], unit)

    # -- attribution metrics -------------------------------------------------------------
    def attribution_series(self) -> Iterator[RenderedSeries]:
        if self.mode == "mapping":
            for e in self.s.executions:
                for gpu in e.gpus:
                    labels = {
                        self.cfg.execution_label: e.id,
                        self.cfg.api.tenant_label: e.namespace,
                        "UUID": gpu.uuid,
                        "hostname": gpu.host,
                        "instance": "scheduler:9800",
                        "job": "scheduler-exporter",
                    }
                    if gpu.mig_instance:
                        labels["GPU_I_ID"] = gpu.mig_instance
                    yield RenderedSeries(
                        self.cfg.attribution.mapping_metric,
                        tuple(sorted(labels.items())),
                        self.while_running(e, lambda m: 1.0),
                    )
        elif self.mode == "kubernetes":
            label = catalog.KUBE_POD_LABEL_PREFIX + self.cfg.execution_label
            for e in self.s.executions:
                for host in sorted({g.host for g in e.gpus}):
                    labels = {
                        label: e.id,
                        "namespace": e.namespace,
                        "pod": self.pod_name(e, self.s.host(host)),
                        "uid": f"uid-{e.id}-{host}",
                        "instance": "kube-state-metrics:8080",
                        "job": "kube-state-metrics",
                    }
                    yield RenderedSeries(
                        self.cfg.attribution.kubernetes_metric,
                        tuple(sorted(labels.items())),
                        self.while_running(e, lambda m: 1.0),
                    )

    # -- node_exporter -------------------------------------------------------------------
    def node_series(self) -> Iterator[RenderedSeries]:
        for host in self.s.hosts:
            target = tuple(sorted(self.scraped(host, {"instance": host.node_instance, "job": "node"}).items()))
            truths = [oracle.host_truth(self.s, host, m) for m in self.minutes()]
            nodename = host.nodename or host.name
            every = host.node_scrape_seconds // model.STEP_SECONDS  # a sample at every `every`-th step

            def scraped(values: list[float], every: int = every) -> tuple[Sample, ...]:
                return tuple(v if k % every == 0 else None for k, v in enumerate(values))

            uname = tuple(sorted((*target, ("nodename", nodename))))
            yield RenderedSeries("node_uname_info", uname, scraped([1.0] * len(truths)))
            yield RenderedSeries(
                "node_memory_MemTotal_bytes", target, scraped([t[catalog.NODE_RAM_TOTAL] for t in truths])
            )
            yield RenderedSeries(
                "node_memory_MemAvailable_bytes",
                target,
                scraped([t[catalog.NODE_RAM_TOTAL] - t[catalog.NODE_RAM_USED] for t in truths]),
            )
            # Counters: each sample adds the step's idle (or busy) seconds.
            for mode in ("idle", "user"):
                for cpu in range(host.cpus):
                    total, samples, back = 0.0, [], 0.0
                    for m, t in zip(self.minutes(), truths, strict=True):
                        busy = t[catalog.NODE_CPU_UTILIZATION]
                        step = model.STEP_SECONDS * ((1 - busy) if mode == "idle" else busy)
                        # node_exporter before 1.1 let idle seconds step back a little: from the
                        # jump on, CPU 0 reads BACKJUMP_SECONDS less than the sample before the jump.
                        if mode == "idle" and cpu == 0 and m == host.node_cpu_backjump:
                            back = (total - samples[-1]) + BACKJUMP_SECONDS
                        samples.append(total - back)
                        total += step
                    labels = tuple(sorted((*target, ("cpu", str(cpu)), ("mode", mode))))
                    yield RenderedSeries("node_cpu_seconds_total", labels, scraped(samples))

    def kube_state_series(self) -> Iterator[RenderedSeries]:
        """kube_pod_info of the dcgm-exporter pods where the scenario says kube-state-metrics runs; scraped
        without honor_labels, kube-state-metrics' own pod's too (on a node of its own), as every pod's is."""
        pod_info, every_minute = self.cfg.attribution.pod_info_metric, tuple(1.0 for _ in self.minutes())
        for host in self.s.hosts:
            if not host.pod_info:
                continue
            pods = [(host.exporter_namespace, self.exporter_pod(host), host.kube_node or host.name, host.address)]
            if host.pod_info_exported:
                pods.append(KUBE_STATE_POD)
            for namespace, pod, node, address in pods:
                labels = {"namespace": namespace, "pod": pod, "node": node, "host_ip": address or node}
                if host.pod_info_exported:  # the pod's own labels renamed; the target's (kube-state-metrics') set
                    labels = {f"exported_{k}" if k in ("namespace", "pod") else k: v for k, v in labels.items()}
                    labels |= {"namespace": KUBE_STATE_POD[0], "pod": KUBE_STATE_POD[1]}
                labels |= {"instance": "kube-state-metrics:8080", "job": "kube-state-metrics"}
                yield RenderedSeries(pod_info, tuple(sorted(labels.items())), every_minute)

    def all_series(self) -> list[RenderedSeries]:
        """Every raw series of the scenario; each carries the scenario's cluster where the config names a
        cluster label (an external label of the cluster's Prometheus, as a central store sees it)."""
        series = [*self.dcgm_series(), *self.attribution_series(), *self.node_series(), *self.kube_state_series()]
        cluster = cluster_scope(self.cfg).labels(self.s.cluster)
        if not cluster:
            return series
        return [replace(s, labels=tuple(sorted(dict(s.labels, **cluster).items()))) for s in series]


# -- promtool notation -----------------------------------------------------------------------


def fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def expand_notation(samples: tuple[Sample, ...]) -> str:
    """Compress samples into promtool's notation: ``axN``, ``a+bxN``, ``_xN``, ``stale``."""
    parts: list[str] = []
    i, n = 0, len(samples)
    while i < n:
        v = samples[i]
        if v is None:
            j = i
            while j < n and samples[j] is None:
                j += 1
            parts.append("_" if j - i == 1 else f"_x{j - i}")
            i = j
            continue
        if v == STALE:
            parts.append(STALE)
            i += 1
            continue
        # The longest run with a constant step from samples[i].
        j = i + 1
        step = None
        while j < n and isinstance(samples[j], float) and samples[j] is not None:
            d = samples[j] - samples[j - 1]  # type: ignore[operator]
            if step is None:
                step = d
            elif d != step or samples[i] + step * (j - i) != samples[j]:  # type: ignore[operator]
                break
            j += 1
        count = j - i - 1
        if count == 0:
            parts.append(fmt(v))  # type: ignore[arg-type]
        elif not step:
            parts.append(f"{fmt(v)}x{count}")  # type: ignore[arg-type]
        else:
            sign = "+" if step > 0 else "-"
            parts.append(f"{fmt(v)}{sign}{fmt(abs(step))}x{count}")  # type: ignore[arg-type]
        i = j
    return " ".join(parts)


def input_series(scenario: Scenario, cfg: Config) -> list[dict[str, str]]:
    """promtool ``input_series`` entries for ``scenario`` under ``cfg``."""
    return [{"series": s.selector, "values": expand_notation(s.samples)} for s in Renderer(scenario, cfg).all_series()]
