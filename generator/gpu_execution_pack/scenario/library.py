"""The scenarios the pack's tests run: every case the rules must get right has one here."""

from __future__ import annotations

import re
from dataclasses import replace

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.promql import Matcher, match
from gpu_execution_pack.scenario.amd import (
    BINARY_V131,
    BINARY_V141,
    HELM_V151,
    AmdExecution,
    AmdFleet,
    AmdGpu,
    AmdHost,
    AmdLoad,
)
from gpu_execution_pack.scenario.model import UUID_PREFIX, Execution, Gpu, Host, NameCollision, Scenario, XidEvent
from gpu_execution_pack.scenario.oracle import FRAMEBUFFER_SIGNALS
from gpu_execution_pack.scenario.phases import TRAINING


def training() -> Scenario:
    """Two executions sharing host h1, one of them also on h2, and a GPU nobody holds.

    e1 runs the full training profile on 4 GPUs over two hosts; e2 starts later on two other
    GPUs of h1, so both get h1's RAM and CPU while their phases differ.
    """
    h1 = [Gpu("h1", i) for i in range(5)]
    h2 = [Gpu("h2", i) for i in range(2)]
    e1 = Execution("train-0001", (h1[0], h1[1], h2[0], h2[1]), TRAINING, util_offsets=(0, -2, -4, -6))
    e2 = Execution(
        "train-0002", (h1[2], h1[3]), ("loading", "compute", "throttled"), start_minute=3, util_offsets=(1, -1)
    )
    return Scenario(
        "training",
        __doc__ or "",
        (Host("h1"), Host("h2")),
        (e1, e2),
        unowned_gpus=(h1[4],),
    )


def training_in(generation: str, host_label: str = "") -> Scenario:
    """The training scenario as one exporter generation (and host label spelling) publishes it."""
    name = f"training, dcgm-exporter {generation}" + (f" with label {host_label}" if host_label else "")
    return training().with_generation(generation, name, host_label)


def mixed_generations() -> Scenario:
    """h1 still runs dcgm-exporter 4.8 (Hostname label), h2 already runs 4.10."""
    s = training()
    return replace(s, name="training, h1 on 4.8 and h2 on 4.10", hosts=(Host("h1", "4.8"), Host("h2", "4.10")))


def mig() -> Scenario:
    """MIG: e3 holds both 3g instances of one A100, e4 the 3g instance of another whose 4g instance is free.

    Device-wide fields (power, temperature, clocks) repeat on every instance: e3's power sum must count its
    GPU once, and e4 is given 3 of the second GPU's 7 slices of its power, not all of it.
    """
    model = "NVIDIA A100-SXM4-80GB"

    def instance(index: int, gi: str, profile: str = "3g.40gb") -> Gpu:
        return Gpu("m1", index, model, mig_instance=gi, mig_profile=profile, mem_total_mib=40960)

    e3 = Execution("mig-0003", (instance(0, "1"), instance(0, "2")), TRAINING)
    e4 = Execution("mig-0004", (instance(1, "1"),), ("compute", "idle"), start_minute=3)
    free = instance(1, "2", "4g.40gb")  # A100 80GB: 3g.40gb and 4g.40gb make the whole GPU
    return Scenario("mig", mig.__doc__ or "", (Host("m1", "4.9"),), (e3, e4), unowned_gpus=(free,), minutes=40)


def missing_optional(missing: frozenset[str], name: str) -> Scenario:
    """One execution on 2 GPUs whose exporter publishes no power limit or PCIe series."""
    e = Execution("solo-0005", (Gpu("h3", 0), Gpu("h3", 1)), ("compute", "idle"))
    return Scenario(name, missing_optional.__doc__ or "", (Host("h3"),), (e,), missing=missing)


# --- Real installs ----------------------------------------------------------------------------
# How labels really arrive: each scenario is one execution on a host whose exporters are deployed
# one real way (the GPU Operator, the upstream Helm chart, bare metal). Host.name is the node's
# name as the series must give it (its FQDN where both exporters say it, else its short name),
# however the exporters spell it.


def _install(
    name: str,
    host: Host,
    phases: tuple[str, ...] = ("loading", "compute", "idle"),
    gpus: tuple[Gpu, Gpu, Gpu] | None = None,
    **kw,
) -> Scenario:
    """One execution on two GPUs of ``host`` (``gpus``' first two; the third is free)."""
    first, second, free = gpus or (Gpu(host.name, 0), Gpu(host.name, 1), Gpu(host.name, 2))
    execution = Execution(f"{host.name}-job", (first, second), phases, util_offsets=(0, -2), namespace="team-a")
    return Scenario(name, f"{name}: the node is {host.name}.", (host,), (execution,), unowned_gpus=(free,), **kw)


def _pair(name: str, first: Host, second: Host, collisions: tuple[NameCollision, ...] = (), **kw) -> Scenario:
    """Two machines whose names agree in part, one execution on two GPUs of each (the third free).

    Their RAM and CPU differ, so a series carrying the other machine's values fails.
    """
    first = replace(first, ram_total_bytes=128 * 1024**3, base_ram_used_bytes=16 * 1024**3, base_cpu_busy=0.25)
    executions, free = [], []
    for host in (first, second):
        gpus = (Gpu(host.name, 0), Gpu(host.name, 1))
        executions.append(
            Execution(
                f"{host.name}-job", gpus, ("loading", "compute", "idle"), util_offsets=(0, -2), namespace="team-a"
            )
        )
        free.append(Gpu(host.name, 2))
    return Scenario(
        name,
        f"{name}: the nodes are {first.name} and {second.name}.",
        (first, second),
        tuple(executions),
        unowned_gpus=tuple(free),
        host_name_collisions=collisions,
        **kw,
    )


def name_collision_installs() -> list[Scenario]:
    """Two machines whose short names agree, seen by one Prometheus: never merged."""
    return [
        # Bare metal: dcgm-exporter's os.Hostname() is the short name, node_exporter's nodename the FQDN. The
        # short name is claimed twice: no GPU is joined by it; each node keeps its FQDN, and each GPU finds it
        # through the node_exporter at its own address.
        _pair(
            "same short name in two domains, dcgm-exporter with the short name",
            Host("gpu-01.dc1.example.com", "4.10", dcgm_host="gpu-01"),
            Host("gpu-01.dc2.example.com", "4.10", dcgm_host="gpu-01"),
            collisions=(NameCollision("gpu-01", 2),),
        ),
        # Both exporters publish the FQDN, on different addresses from the node_exporter's: only the exact
        # names tell the machines apart, and the series keep the FQDN.
        _pair(
            "same short name in two domains, FQDN on both sides",
            Host("gpu-02.dc1.example.com", "4.9", dcgm_address="10.1.0.2"),
            Host("gpu-02.dc2.example.com", "4.9", dcgm_address="10.2.0.2"),
        ),
        # Kubernetes nodes named by their private IP (OKE's virtual nodes, a kubelet's --hostname-override): the GPU
        # Operator's NODE_NAME is the IP, dcgm-exporter is on the pod network, and node_exporter's nodename is a
        # placeholder, so each node is named by its address. An IP is a whole name: its first number is no
        # machine's short name, or every machine of 10.0.0.0/8 would be one host "10".
        _pair(
            "nodes named by their IP, placeholder nodenames, exporters on the pod network",
            Host("10.0.3.17", "4.9", nodename="localhost.localdomain", dcgm_address="10.244.1.5"),
            Host("10.0.3.18", "4.9", nodename="localhost.localdomain", dcgm_address="10.244.2.9"),
        ),
        # EKS in two regions: private-IP node names. The GPU Operator's NODE_NAME is the node's FQDN on both;
        # one AMI's nodename is the FQDN (exact), the other's the short name, which no other machine claims.
        _pair(
            "private-IP node names in two VPCs",
            Host("ip-10-0-1-5.ec2.internal", "4.9", exporter_pod="nvidia-dcgm-exporter-a1b2c"),
            Host(
                "ip-10-0-1-5",
                "4.9",
                dcgm_host="ip-10-0-1-5.us-west-2.compute.internal",
                address="ip-10-0-1-5.us-west-2.compute.internal",
                exporter_pod="nvidia-dcgm-exporter-d3e4f",
            ),
        ),
    ]


def two_clusters() -> list[Scenario]:
    """Two clusters whose hosts, GPUs, pods and execution ids have the same names, in one store (a central
    ruler over both): every series stays in its own cluster. The first host of each has less RAM and more
    CPU load, and it is gpu-01 in one cluster and gpu-02 in the other, so a series carrying the other
    cluster's values, or a sum over both, fails."""
    eu = _pair("cluster eu-1", Host("gpu-01"), Host("gpu-02"))
    us = _pair("cluster us-1", Host("gpu-02"), Host("gpu-01"))
    return [replace(eu, cluster="eu-1"), replace(us, cluster="us-1")]


def in_own_clusters(scenarios: list[Scenario]) -> list[Scenario]:
    """``scenarios`` each in a cluster of its own (``<cluster>-<n>``), to be held in one store as a central ruler
    holds its clusters: with a cluster label set, nothing of one may reach another, whatever names they share."""
    return [replace(s, cluster=f"{s.cluster}-{n:02d}") for n, s in enumerate(scenarios, 1)]


def apart(scenarios: list[Scenario], cfg: Config) -> list[Scenario]:
    """``scenarios`` under names of their own (``s01-...``: every host name, address, pod, node, GPU and
    execution of the first), to be held in one store without a cluster label, as one Prometheus holds many
    teams' machines: a series of one reaching another fails its checks.

    Each rename is a prefix without a dot or colon, so every likeness within a scenario holds as before: a short
    name is still the part before the first dot, two hosts that shared a name still do. Nodenames that name no
    machine (``node.placeholder_nodenames``) are kept: the scenarios that have one share it, as real fleets'
    badly provisioned hosts do, and the rules must never join by it. A scenario alone keeps its names."""
    if len(scenarios) < 2:
        return scenarios
    placeholder = re.compile(cfg.node.placeholder_nodenames)

    def renamed(scenario: Scenario, prefix: str) -> Scenario:
        def own(name: str) -> str:
            return name if not name or placeholder.fullmatch(name) else prefix + name

        def gpu(g: Gpu) -> Gpu:
            return replace(g, host=own(g.host))

        hosts = tuple(
            replace(
                h,
                name=own(h.name),
                dcgm_host=own(h.dcgm_host),
                relabelled_hostname=own(h.relabelled_hostname),
                nodename=own(h.nodename),
                address=own(h.address),
                dcgm_address=own(h.dcgm_address),
                exporter_pod=own(h.exporter_pod),
                kube_node=own(h.kube_node),
            )
            for h in scenario.hosts
        )
        return replace(
            scenario,
            hosts=hosts,
            executions=tuple(replace(e, id=own(e.id), gpus=tuple(map(gpu, e.gpus))) for e in scenario.executions),
            unowned_gpus=tuple(map(gpu, scenario.unowned_gpus)),
            xid_events=tuple(replace(x, host=own(x.host)) for x in scenario.xid_events),
            host_name_collisions=tuple(replace(c, name=own(c.name)) for c in scenario.host_name_collisions),
            name_prefix=prefix,
        )

    return [renamed(s, f"s{n:02d}-") for n, s in enumerate(scenarios, 1)]


def own_name(scenario: Scenario, label: str) -> Matcher:
    """The matcher of the series whose ``label`` (a host's or an execution's name, or a GPU's UUID, which names its
    host) is ``scenario``'s own in a store of scenarios ``apart``: its prefix, letters, digits and a dash, then the
    name."""
    if not scenario.name_prefix:
        raise ValueError(f"{scenario.name}: a scenario alone in its store has no prefix to select its names by")
    before = UUID_PREFIX if label == catalog.UUID_LABEL else ""
    return match(label, before + scenario.name_prefix + ".+", "=~")


def store_name(scenarios: list[Scenario]) -> str:
    """A promtool test's name for ``scenarios`` in one store: each with the prefix its names carry."""
    return " + ".join(s.name_prefix + s.name for s in scenarios)


def as_configured(scenarios: list[Scenario], cfg: Config) -> list[Scenario]:
    """``scenarios`` as ``cfg``'s Prometheus stores them. Where the scrape config names every target's host
    (``node.host_identity: scrape``), each machine is scraped under its own name: no name is claimed by two
    machines, whatever their exporters call them."""
    if not cfg.node.at_scrape:
        return scenarios
    return [replace(s, host_name_collisions=()) for s in scenarios]


def _h100_instance(host: str, index: int, instance: str) -> Gpu:
    return Gpu(host, index, mig_instance=instance, mig_profile="3g.40gb", mem_total_mib=40960)


def real_installs() -> list[Scenario]:
    """One scenario per way real clusters deploy the exporters, with their label sets."""
    return [*kubernetes_installs(), *host_installs(), *name_collision_installs()]


def kubernetes_installs() -> list[Scenario]:
    """dcgm-exporter deployed on Kubernetes: by the GPU Operator or the upstream Helm chart."""
    return [
        # GPU Operator 4.x: NODE_NAME is the Kubernetes node (a FQDN here), nodename the short name;
        # its ServiceMonitor does not honor labels, so the workload's namespace arrives as exported_namespace.
        _install(
            "GPU Operator 4.x: FQDN node name, short nodename, exported_namespace",
            Host("gpuop4", "4.9", dcgm_host="gpuop4.cluster.internal", exporter_pod="nvidia-dcgm-exporter-cwbcm"),
        ),
        _install(
            "GPU Operator 3.x: Hostname label, exported_namespace",
            Host("gpuop3", "4.8", host_label="Hostname", exporter_pod="nvidia-dcgm-exporter-6ldbb"),
        ),
        # The upstream Helm chart sets no NODE_NAME: the host label is the exporter's pod name.
        _install(
            "upstream Helm chart with kube-state-metrics: host label is the pod name",
            Host(
                "helm1",
                "4.10",
                dcgm_host="dcgm-exporter-wwwjh",
                exporter_pod="dcgm-exporter-wwwjh",
                exporter_namespace="dcgm-exporter",
                pod_info=True,
                kube_node="helm1.cluster.internal",
                address="10.0.3.1",
                dcgm_address="10.244.3.17",  # the pod's own IP
            ),
        ),
        # The same behind a ServiceMonitor without honorLabels (kubernetes-mixin issue 523): kube_pod_info names
        # every pod as exported_namespace and exported_pod, and kube-state-metrics' own pod in namespace and pod.
        _install(
            "upstream Helm chart, kube-state-metrics scraped without honor_labels: pods as exported_*",
            Host(
                "helm3",
                "4.8",
                dcgm_host="dcgm-exporter-q8r7s",
                exporter_pod="dcgm-exporter-q8r7s",
                exporter_namespace="dcgm-exporter",
                pod_info=True,
                pod_info_exported=True,
                kube_node="helm3.cluster.internal",
                address="10.0.3.3",
                dcgm_address="10.244.4.21",
            ),
        ),
        _install(
            "upstream Helm chart without kube-state-metrics, hostNetwork: the address names the host",
            Host(
                "helm2",
                "4.8",
                host_label="hostname",
                dcgm_host="dcgm-exporter-6ldbb",
                exporter_pod="dcgm-exporter-6ldbb",
                exporter_namespace="dcgm-exporter",
                address="10.0.3.2",
            ),
        ),
        # Kubernetes DRA (KUBERNETES_ENABLE_DRA): pod, namespace and container, the claim's dra_* labels, and one
        # copy of each series per container of the pod that references the claim; behind the ServiceMonitor the
        # workload's pod, namespace and container arrive as exported_*.
        _install(
            "Kubernetes DRA: dra_* claim labels, one copy per container that references the claim",
            Host(
                "dra1",
                "4.10",
                dcgm_host="dra1",
                exporter_pod="nvidia-dcgm-exporter-d8f2k",
                dra_containers=("trainer", "data-loader"),
            ),
        ),
        # An exporter before 4.8.3 (Hostname = its pod) behind a scrape config adding hostname.
        _install(
            "both Hostname (the pod) and a relabelled hostname (the node)",
            Host("both1", "4.8", dcgm_host="nvidia-dcgm-exporter-x7k2p", relabelled_hostname="both1"),
        ),
    ]


def host_installs() -> list[Scenario]:
    """Hosts named by their nodename or address, and exporters with quirks of their version or scrape."""
    return [
        # Bare metal with dcgm-exporter 2.x: legacy PCIe throughput in KB/s, no engine activity or
        # reserved memory among the default counters, nodename a FQDN, targets by IP.
        _install(
            "bare metal 2.x: legacy PCIe fields, FQDN nodename, IP targets",
            Host(
                "bm2x",
                "3.3",
                nodename="bm2x.dc1.example.com",
                address="192.0.2.21",
                missing=frozenset({"gr_engine_active", "fb_reserved"}),
            ),
        ),
        _install(
            "FQDN on both sides",
            Host("fqdn1.dc1.example.com", "4.9"),
        ),
        _install(
            "no host label on the DCGM series: the shared address names the host",
            Host("nolabel1", "4.8", host_label="none", address="192.0.2.31"),
        ),
        _install(
            "nodename localhost.localdomain: named by the dcgm-exporter at the same address",
            Host("badnode1", "4.8", nodename="localhost.localdomain", address="192.0.2.41"),
        ),
        # node_exporter before 1.1: idle seconds step back within the check's rate window (minute 7.5).
        _install(
            "old node_exporter: idle counter steps back",
            Host("oldnode1", "4.8", node_cpu_backjump=7.25),
            phases=("idle",) * 4,
        ),
        # MIG-enabled H100s: dcgm-exporter publishes no framebuffer field for them or their instances;
        # every other field is there, device-wide ones repeated on each instance.
        _install(
            "MIG-enabled H100s: no framebuffer fields",
            Host("h100mig1", "4.8", missing=FRAMEBUFFER_SIGNALS),
            gpus=tuple(_h100_instance("h100mig1", i, instance) for i, instance in ((0, "1"), (0, "2"), (1, "1"))),
        ),
        # Prometheus' own default scrape interval: a 1m window holds one sample between scrapes.
        _install(
            "node_exporter scraped every minute",
            Host("slow1", "4.8", node_scrape_seconds=60),
            phases=("idle",) * 4,
        ),
    ]


def real_install(host: str) -> Scenario:
    """The real-install scenario whose node is ``host``."""
    return next(s for s in real_installs() if s.hosts[0].name == host)


def by_label(scenario: Scenario) -> bool:
    """Whether label attribution can attribute ``scenario``: none of its hosts' exporters maps pods through DRA or
    KUBERNETES_VIRTUAL_GPUS, on which paths dcgm-exporter copies no pod label (``Host.copies_no_pod_labels``)."""
    return not any(h.copies_no_pod_labels for h in scenario.hosts)


def default_suite() -> list[Scenario]:
    """Scenarios the default configuration's rules are tested on: every one label attribution can attribute (the
    others, ``pod_mapped_suite``, are tested under kubernetes attribution)."""
    return [s for s in _label_suite() if by_label(s)]


def pod_mapped_suite() -> list[Scenario]:
    """Pods holding GPUs through dcgm-exporter's DRA and virtual-GPU paths, which carry the pod's namespace and name
    but none of its own labels: tested under kubernetes attribution (kube_pod_labels joined on namespace and pod)."""
    return [s for s in [*real_installs(), *work_suite()] if not by_label(s)]


def pod_mapped_alert_suite() -> list[Scenario]:
    """The alert scenarios of ``pod_mapped_suite``: tested under kubernetes attribution."""
    return [
        virtual_gpus_full(),  # the GPU's fill, every holder's, names the other holder
    ]


def _label_suite() -> list[Scenario]:
    return [
        training_in("4.8"),
        training_in("4.8", host_label="hostname"),  # 4.8.3 renamed Hostname to hostname
        training_in("4.9"),
        training_in("4.10"),
        mixed_generations(),
        mig(),
        missing_optional(
            frozenset({"power_limit_enforced", "pcie_rx", "pcie_tx"}),
            "no enforced power limit and no PCIe: requested limit used, others intact",
        ),
        missing_optional(
            frozenset({"power_limit_enforced", "power_limit_requested"}),
            "no power limit at all: no power limit series, others intact",
        ),
        *real_installs(),
        *work_suite(),
        queued_jobs(),
    ]


def attribution_suite() -> list[Scenario]:
    """Scenarios every attribution mode is tested on (label attribution on those ``by_label``: not dra1)."""
    return [
        training_in("4.8"),
        mig(),
        real_install("helm1"),
        real_install("gpuop4"),
        real_install("dra1"),
        mps_shared(),
    ]


# --- Alert scenarios ----------------------------------------------------------------------
# Each puts a faulty execution beside a healthy one of the same shape, so every alert test
# shows the alert naming the right execution and staying quiet on the other.


def oom_crash() -> Scenario:
    """A leak to 100 % of GPU memory that ends in a crash, beside a steady job on the same host."""
    h = [Gpu("h4", i) for i in range(4)]
    leak = Execution("leak-0006", (h[0], h[1]), ("loading", "leak", "oom"), util_offsets=(0, -2))
    steady = Execution("steady-0007", (h[2], h[3]), ("loading", "compute", "compute"))
    return Scenario(
        "GPU memory leak ending in a crash", oom_crash.__doc__ or "", (Host("h4"),), (leak, steady), minutes=35
    )


def host_oom() -> Scenario:
    """Host RAM of h5 fills up: both executions on h5 are told, the one also on h6 only for h5."""
    leak = Execution("hostleak-0008", (Gpu("h5", 0),), ("loading", "host_leak"))
    neighbour = Execution(
        "neighbour-0009", (Gpu("h5", 1), Gpu("h6", 0)), ("loading", "compute", "compute", "compute", "compute")
    )
    hosts = (Host("h5"), Host("h6"))
    return Scenario("host RAM filling up", host_oom.__doc__ or "", hosts, (leak, neighbour), minutes=55)


def power_capped() -> Scenario:
    """90 minutes at the power limit with the SM clock pulled down, beside an uncapped job."""
    capped = Execution("capped-0010", (Gpu("h7", 0), Gpu("h7", 1)), ("compute", "capped", "capped", "capped", "idle"))
    steady = Execution("steady-0011", (Gpu("h7", 2),), ("compute",) * 10 + ("idle",))
    return Scenario("power capped for 90 minutes", power_capped.__doc__ or "", (Host("h7"),), (capped, steady))


def capped_from_start(exported: frozenset[str], name: str) -> Scenario:
    """At the power limit from the first minute: only an exported max clock (or reasons) can confirm it."""
    e = Execution("capped-0012", (Gpu("h8", 0),), ("capped", "idle"))
    return Scenario(name, capped_from_start.__doc__ or "", (Host("h8"),), (e,), exported=exported)


def no_power_limit(exported: frozenset[str], name: str) -> Scenario:
    """No power limit is exported: power throttling rests on the reasons bitmask, or stays quiet."""
    e = Execution("nolimit-0013", (Gpu("h9", 0),), ("compute", "capped", "idle"))
    missing = frozenset({"power_limit_enforced", "power_limit_requested"})
    return Scenario(name, no_power_limit.__doc__ or "", (Host("h9"),), (e,), missing=missing, exported=exported)


def hot() -> Scenario:
    """15 minutes at 88 °C with thermal reasons and counters exported, beside a cool job."""
    hot_ = Execution("hot-0014", (Gpu("h10", 0),), ("compute", "hot", "compute"))
    cool = Execution("cool-0015", (Gpu("h10", 1),), ("compute", "compute", "compute", "compute"))
    exported = frozenset({"clocks_event_reasons", "thermal_violation", "power_violation"})
    return Scenario("GPU running hot", hot.__doc__ or "", (Host("h10"),), (hot_, cool), exported=exported)


def waste() -> Scenario:
    """Two stalled executions, one waiting on I/O and one CPU-bound, and one that idles only while loading."""
    io = Execution("stall-0016", (Gpu("h11", 0), Gpu("h11", 1)), ("loading", "stalled", "compute"))
    cpu = Execution("cpubound-0017", (Gpu("h12", 0),), ("loading", "cpu_bound", "compute"))
    warmup = Execution("warmup-0018", (Gpu("h13", 0),), ("loading", "compute", "compute", "compute", "compute"))
    hosts = (Host("h11"), Host("h12"), Host("h13"))
    return Scenario("GPUs held but barely used", waste.__doc__ or "", hosts, (io, cpu, warmup))


def dcgm_lost() -> Scenario:
    """h14's exporter is down from minute 12 to 50, during a job; on h15 a job ends and its GPU reports on."""
    lost = Execution("lost-0019", (Gpu("h14", 0), Gpu("h14", 1)), ("compute", "compute", "compute"))
    done = Execution("done-0020", (Gpu("h15", 0),), ("compute", "loading"))
    hosts = (Host("h14", dcgm_outage=(12, 50)), Host("h15"))
    return Scenario("dcgm-exporter down", dcgm_lost.__doc__ or "", hosts, (lost, done), minutes=60)


def xid() -> Scenario:
    """GPU 0 reports Xid 79 mid-job; GPU 1 holds Xid 31 from before the job, which is old news."""
    e = Execution("xid-0021", (Gpu("h16", 0), Gpu("h16", 1)), ("compute", "compute", "compute"), start_minute=5)
    events = (XidEvent("h16", 0, 17, 79), XidEvent("h16", 1, 1, 31))
    return Scenario("Xid errors", xid.__doc__ or "", (Host("h16"),), (e,), xid_events=events, minutes=40)


def name_collision_while_exporter_down() -> Scenario:
    """gpu-03.dc1's dcgm-exporter gives its FQDN, gpu-03.dc2's the short name. While dc1's exporter is down
    (minutes 12 to 32) nothing names dc1's node exactly, both nodes claim `gpu-03`, and dc2's GPUs find their
    node by its address only: the collision is recorded, and alerts once it has lasted 10 minutes."""
    return _pair(
        "a short name two machines claim while one exporter is down",
        Host("gpu-03.dc1.example.com", "4.10", dcgm_outage=(12, 32)),
        Host("gpu-03.dc2.example.com", "4.10", dcgm_host="gpu-03"),
        collisions=(NameCollision("gpu-03", 2, 12, 32),),
        minutes=45,
    )


def alert_suite() -> list[Scenario]:
    """Scenarios the alert rules are tested on (with the built-in defaults); those of pods holding GPUs through
    dcgm-exporter's DRA or virtual-GPU paths are ``pod_mapped_alert_suite``'s."""
    return [
        oom_crash(),
        host_oom(),
        power_capped(),
        capped_from_start(frozenset(), "capped from the start, no max clock: quiet"),
        capped_from_start(frozenset({"max_sm_clock"}), "capped from the start, max clock exported"),
        no_power_limit(frozenset(), "no power limit and no reasons: power throttling quiet"),
        no_power_limit(frozenset({"clocks_event_reasons"}), "no power limit: reasons bitmask decides"),
        hot(),
        mig(),
        waste(),
        dcgm_lost(),
        xid(),
        training_in("4.8"),
        real_install("h100mig1"),  # its GPUs report, though without framebuffer fields
        hung_collective(),  # runs on 20 minutes past the hang (tensor-0025), so the alert is seen to clear
        fp32_job(),  # busy engines, idle tensor pipes: not stalled
        mig_activity_only(),  # utilisation is the engine activity: never stalled
        profiling_locked(),
        name_collision_while_exporter_down(),
    ]


def profiling_locked() -> Scenario:
    """A collective hangs on a host whose exporter publishes no profiling fields (dcgm-exporter
    before 4.0, or Nsight / `dcgmi profile --pause` holding the profiling lock): nothing tells a
    stall from work, so GpuStalled stays quiet."""
    e = Execution("locked-0033", (Gpu("h23", 0),), ("loading", "compute", "hung"))
    missing = frozenset({"gr_engine_active", "tensor_active", "dram_active", "pcie_rx", "pcie_tx"})
    return Scenario(
        "hung without profiling fields", profiling_locked.__doc__ or "", (Host("h23", missing=missing),), (e,)
    )


# The profiling fields dcgm-exporter 3.x does not collect by default, and GPUs without DCP cannot publish.
PROFILING = frozenset({"gr_engine_active", "tensor_active", "dram_active"})


def no_profiling_fleet() -> Scenario:
    """Busy, healthy jobs on a fleet without the profiling fields: dcgm-exporter 3.x with its default counters
    (h41) and GPUs without DCP metrics (h42, as an M60 is). A field a GPU never publishes is no gap: each job is
    healthy, with a note that the stall could not be judged."""
    hosts = (Host("h41", generation="3.3", missing=PROFILING), Host("h42", missing=PROFILING))
    busy = ("loading",) + ("compute",) * 4
    executions = (
        Execution("noprof-0044", (Gpu("h41", 0), Gpu("h41", 1)), busy, util_offsets=(0, -1)),
        Execution("nodcp-0045", (Gpu("h42", 0),), busy),
    )
    return Scenario("no profiling fields", no_profiling_fleet.__doc__ or "", hosts, executions)


# --- Report scenarios -----------------------------------------------------------------------


def idle_job() -> Scenario:
    """An execution that never uses its GPU, beside nothing."""
    e = Execution("idle-0022", (Gpu("h17", 0),), ("idle",) * 8)
    return Scenario("a job that never touches its GPU", idle_job.__doc__ or "", (Host("h17"),), (e,))


def gap_job() -> Scenario:
    """h18's exporter is down for 10 minutes in the middle of a job, then answers again."""
    e = Execution("gap-0023", (Gpu("h18", 0),), ("compute",) * 6)
    return Scenario("a gap in telemetry", gap_job.__doc__ or "", (Host("h18", dcgm_outage=(25, 35)),), (e,))


def queued_jobs() -> Scenario:
    """One GPU's queue: a job ends, and the next starts on the GPU at the following evaluation, nothing else
    running: its first sample stands for the time since the first job's last (the per-GPU group's previous
    evaluation), not the config's interval."""
    first = Execution("queued-0046", (Gpu("h46", 0),), ("compute", "compute"))
    second = Execution("queued-0047", (Gpu("h46", 0),), ("compute", "idle"), start_minute=first.end_minute)
    return Scenario("a GPU's queue", queued_jobs.__doc__ or "", (Host("h46"),), (first, second))


# --- Work truth: activity, and GPUs held by several executions ----------------------------------


def hung_collective() -> Scenario:
    """A job whose NCCL collective hangs for 30 minutes (GPU_UTIL 98 %, engines at 2 %), beside a
    healthy job on the tensor cores."""
    hung = Execution("hung-0024", (Gpu("h19", 0), Gpu("h19", 1)), ("loading", "compute", "hung"), util_offsets=(0, -1))
    tensor = Execution("tensor-0025", (Gpu("h19", 2),), ("loading", "tensor", "tensor"))
    return Scenario("a hung collective", hung_collective.__doc__ or "", (Host("h19"),), (hung, tensor))


# The profiling fields dcgm-exporter collects only with its DCP counters file (etc/dcp-metrics-included.csv):
# every DCGM_FI_PROF_* field outside its default counters (SM activity and occupancy today).
DCP_FIELDS = frozenset(
    key
    for key, signal in catalog.SIGNALS.items()
    if any(raw.name.startswith("DCGM_FI_PROF_") and not raw.default_collected for raw in signal.raws)
)


def fp32_job() -> Scenario:
    """A job that keeps its engines busy in FP32 with the tensor pipes idle; SM fields exported."""
    e = Execution("fp32-0026", (Gpu("h20", 0),), ("loading", "fp32", "fp32"))
    return Scenario(
        "FP32 on tensor-core GPUs", fp32_job.__doc__ or "", (Host("h20", "4.10"),), (e,), exported=DCP_FIELDS
    )


def mig_activity_only() -> Scenario:
    """MIG instances of an H100 on dcgm-exporter 4.9 with no GPU_UTIL at all: utilisation and activity
    come from the profiling fields alone (dcgm-exporter #430)."""

    def instance(gi: str) -> Gpu:
        return _h100_instance("m2", 0, gi)

    e = Execution("migact-0027", (instance("1"),), ("loading", "tensor"))
    f = Execution("migact-0028", (instance("2"),), ("loading", "fp32"), start_minute=5)
    return Scenario(
        "MIG with activity fields only",
        mig_activity_only.__doc__ or "",
        (Host("m2", "4.9"),),
        (e, f),
        missing=frozenset({"gpu_util"}),
    )


def time_sliced() -> Scenario:
    """Two pods time-slice one GPU for their whole run: each is published with the GPU's own values."""
    gpu = Gpu("h21", 0)
    a = Execution("slice-0029", (gpu,), ("compute", "compute", "compute"), namespace="team-a")
    b = Execution("slice-0030", (gpu,), ("compute", "compute", "compute"), namespace="team-b")
    return Scenario("a time-sliced pair", time_sliced.__doc__ or "", (Host("h21"),), (a, b))


def virtual_gpus() -> Scenario:
    """Two pods time-slice an A10 under dcgm-exporter's KUBERNETES_VIRTUAL_GPUS: each pod's utilisation and
    framebuffer use are its own processes' (with pod_uid and a vgpu replica), beside the device's series; one
    pod idles while the other works, and both idle at the end."""
    gpu = Gpu("h24", 0, model="NVIDIA A10", mem_total_mib=22 * 1024)
    a = Execution("vgpu-0035", (gpu,), ("sliced_heavy", "sliced_heavy", "sliced_light", "idle"), namespace="team-a")
    b = Execution("vgpu-0036", (gpu,), ("sliced_light", "idle", "idle", "sliced_heavy", "idle"), namespace="team-b")
    host = Host("h24", exporter_pod="nvidia-dcgm-exporter-v9x2q", virtual_gpus=True)
    return Scenario("a virtual-GPU pair with per-process values", virtual_gpus.__doc__ or "", (host,), (a, b))


def virtual_gpus_full() -> Scenario:
    """Two pods time-slicing an A10 with per-process values fill its framebuffer between them, each under half
    of it: the memory alerts and gpu_oom judge the GPU's fill and name the other pod's execution."""
    gpu = Gpu("h25", 0, model="NVIDIA A10", mem_total_mib=22 * 1024)
    a = Execution("vgpufull-0037", (gpu,), ("sliced_light", "sliced_fill"), namespace="team-a")
    b = Execution("vgpufull-0038", (gpu,), ("sliced_light", "sliced_fill"), namespace="team-b")
    host = Host("h25", exporter_pod="nvidia-dcgm-exporter-k3m8d", virtual_gpus=True)
    return Scenario("a virtual-GPU pair filling its GPU", virtual_gpus_full.__doc__ or "", (host,), (a, b))


def mps_shared() -> Scenario:
    """MPS: mps-0031 holds GPUs 0 and 1 for 50 minutes; mps-0032 shares GPU 0 with it from minute 10 to 40."""
    g0, g1 = Gpu("h22", 0), Gpu("h22", 1)
    a = Execution("mps-0031", (g0, g1), ("compute",) * 5)
    b = Execution("mps-0032", (g0,), ("tensor",), start_minute=10)
    return Scenario("MPS sharing part of a run", mps_shared.__doc__ or "", (Host("h22"),), (a, b))


def work_suite() -> list[Scenario]:
    """Scenarios for the activity figures and verdicts and for shared GPUs."""
    return [
        hung_collective(),
        fp32_job(),
        mig_activity_only(),
        time_sliced(),
        mps_shared(),
        virtual_gpus(),
        virtual_gpus_full(),
    ]


# --- AMD Instinct GPUs (scenario.amd) -------------------------------------------------------------
# Three device-metrics-exporter releases as installed: the Helm chart's (amd_ prefix, every label), and
# the binary's without the prefix or the optional gpu_uuid and card_series labels.
_MI300X_MIB = 192 * 1024
_CPX_MIB = _MI300X_MIB // 8
AMD_RUN = (5, 35)  # the minutes of amd_fleet()'s 40-minute window its executions hold their GPUs
AMD_MID_RUN_MINUTE = 20


def amd_fleet() -> AmdFleet:
    """AMD hosts, one execution of each verdict: three whole MI300X under the Helm chart v1.5.1 (healthy, at
    the power limit, idle), an MI300X in CPX partitions under the v1.4.1 binary (two partitions filled to
    an out-of-memory error), and an MI250X's two GCDs under the v1.3.1 binary (hot; one GCD without power)."""
    whole = [AmdGpu("mi300a", i, f"PHX0A{i:07d}", "MI300X", _MI300X_MIB) for i in range(3)]
    cpx = [AmdGpu("mi300b", i, "PHX0B0000042", "MI300X", _CPX_MIB, "cpx", i) for i in range(8)]
    gcds = [AmdGpu("mi250", i, f"PHX0C{i:07d}", "MI250X", 64 * 1024, publishes_power=i == 0) for i in range(2)]
    hosts = (
        AmdHost("mi300a", HELM_V151, tuple(whole)),
        AmdHost("mi300b", BINARY_V141, tuple(cpx)),
        AmdHost("mi250", BINARY_V131, tuple(gcds)),
    )
    gib = 1024
    executions = (
        AmdExecution("amd-healthy", (whole[0],), AmdLoad(90.0, 120 * gib, 70.0, 600.0), *AMD_RUN),
        AmdExecution("amd-power", (whole[1],), AmdLoad(95.0, 100 * gib, 75.0, 750.0, ppt_share=0.6), *AMD_RUN),
        AmdExecution("amd-idle", (whole[2],), AmdLoad(1.0, 2 * gib, 45.0, 160.0, umc_percent=0.0), *AMD_RUN),
        # Nearly all of both partitions' 24 GiB taken: the job dies of an out-of-memory error.
        AmdExecution("amd-oom", (cpx[0], cpx[1]), AmdLoad(80.0, _CPX_MIB - 512, 72.0, 520.0), *AMD_RUN),
        AmdExecution("amd-thermal", tuple(gcds), AmdLoad(85.0, 40 * gib, 92.0, 480.0), *AMD_RUN),
    )
    return AmdFleet(hosts, executions, 40)
