"""What a live Prometheus says about the deployment: the facts ``checks`` judges.

Everything here is read from Prometheus' own API (metric names, loaded rule groups, scrape targets,
runtime info) and from a few instant queries built as trees over the catalog's raw metrics, so the
doctor judges the deployment by its data, not by what the config assumes of it.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.promql import (
    Expr,
    Matcher,
    Range,
    aggregate,
    any_of,
    call,
    join,
    label_copy,
    labelled,
    match,
    on,
    render,
    selector,
)
from gpu_execution_pack.promql.durations import parse_duration_seconds
from gpu_execution_pack.query.prometheus import PrometheusClient, PrometheusError
from gpu_execution_pack.rules.alerts import UP
from gpu_execution_pack.rules.hosts import from_exported

T = TypeVar("T")
# Labels that name a cluster on real installs: kube-prometheus' and Thanos' external labels, the
# GKE/EKS managed collectors' and the mixins' defaults. Any of them with two values on the GPU series
# means several clusters share the store. The configured cluster_label is asked too (``cluster_labels``).
CLUSTER_LABELS: tuple[str, ...] = ("cluster", "cluster_name", "k8s_cluster", "kubernetes_cluster", "cluster_id")
# The target label a scrape config sets to name a target's host (node.host_identity: scrape).
HOST_TARGET_LABEL = "hostname"
# Prometheus' own counters of each rule group's evaluations (label rule_group: "<file>;<group name>").
ITERATIONS_MISSED = "prometheus_rule_group_iterations_missed_total"
ITERATIONS = "prometheus_rule_group_iterations_total"
# The GPU-time share attributed to executions is read over this span, sampled at this step (a subquery:
# raw presence and the recorded series are counted at the same instants, whatever their own intervals).
COVERAGE_SPAN, COVERAGE_STEP = "1d", "5m"


AlertShape = tuple[str, float, str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class LoadedGroup:
    """One rule group as Prometheus runs it (``/api/v1/rules``)."""

    name: str
    file: str
    interval_seconds: float
    evaluation_seconds: float
    versions: tuple[str, ...] = ()  # the pack versions its rules_info rules name (catalog.PACK_RULES_INFO)
    records: bool = False  # whether it holds a recording rule (a file of alerts only carries no version)
    alerts: tuple[str, ...] = ()  # its alerting rules' names, sorted: what tells an alerts file's version
    digests: tuple[str, ...] = ()  # the digests its rules_info rules name (rules.files.rules_digest)
    # Its alerting rules as written (name, `for` in seconds, severity, annotations), sorted: what tells an alerts
    # file generated from another config (thresholds and `for` are in the annotations' words).
    alert_rules: tuple[AlertShape, ...] = ()


@dataclass(frozen=True)
class Target:
    """One active scrape target (``/api/v1/targets``): its job, labels after relabelling, and interval."""

    job: str
    labels: dict[str, str]
    interval_seconds: float


@dataclass(frozen=True)
class Deployment:
    """The facts of one live deployment."""

    metric_names: frozenset[str]
    groups: tuple[LoadedGroup, ...]
    targets: tuple[Target, ...]
    retention: str  # as Prometheus states it ("15d"), or "" where it does not say
    cluster_values: dict[str, tuple[str, ...]]  # candidate cluster label -> values seen on GPU series
    gpus: int  # GPUs and MIG instances that report (presence series), now
    attributed_gpus: int  # of those, held by an execution (the recorded presence series), now
    collisions: tuple[str, ...]  # host names two machines claim
    max_cpus_per_host: int  # the most CPUs one node_exporter target reports
    # group name -> (iterations missed, iterations scheduled, the missed among them), from its own counters
    iterations: dict[str, tuple[float, float]] = field(default_factory=dict)
    # cluster ("" without cluster_label) -> (GPU-time, GPU-time held by an execution) over COVERAGE_SPAN,
    # in COVERAGE_STEP steps
    gpu_time: dict[str, tuple[float, float]] = field(default_factory=dict)
    # The jobs whose targets publish what the rules read (a GPU's presence, a host's CPU counters); None: not asked
    read_jobs: frozenset[str] | None = None
    # Nodes whose device plugin advertises more nvidia.com/gpu than dcgm-exporter reports GPUs (or MIG instances)
    # under the node's name: their GPUs are shared (time-slicing or MPS replicas). None: no capacity series.
    shared_gpu_nodes: tuple[str, ...] | None = None
    # Of those, the nodes none of whose GPU series carried the replica a pod holds (catalog.VGPU_LABEL) over the
    # last day (COVERAGE_SPAN)
    unlabelled_shared_nodes: tuple[str, ...] = ()
    # dcgm-exporter's MIG instances that report now, and the targets of those without engine activity (a MIG
    # instance has no GPU_UTIL: engine activity is its only utilisation, hence what the rules count it held by)
    mig_instances: int = 0
    unmeasured_mig_targets: tuple[str, ...] = ()
    unmeasured_mig_instances: int = 0
    # The targets whose GPU series carry dcgm-exporter's old pod labels (--use-old-namespace), which no rule reads
    old_pod_label_targets: tuple[str, ...] = ()
    # In label attribution: MIG instances that carry several executions' ids at once with no replica label (vgpu),
    # and their targets; None where the raw series carry no execution id (another attribution mode)
    crowded_mig_instances: int | None = None
    crowded_mig_targets: tuple[str, ...] = ()
    # The jobs of the targets that publish dcgm-exporter's series now, and the jobs of the `up` series
    # selectors.dcgm_targets selects (what the exporter-down alert reads); None: not asked (vendors without nvidia)
    dcgm_jobs: tuple[str, ...] = ()
    dcgm_target_jobs: tuple[str, ...] | None = None
    # The targets (instance) whose GPU presence or host CPU series report now without a hostname label: under
    # node.host_identity: scrape the rules record them with an empty host
    unnamed_host_targets: tuple[str, ...] = ()
    # In label attribution: the targets whose GPU series of a DRA claim (dra_claim_name) or a virtual GPU (vgpu) carry
    # no execution id, which dcgm-exporter never copies there; None: another attribution mode
    podless_claim_targets: tuple[str, ...] | None = None
    # The same for device-metrics-exporter (amd.targets); None: not asked (vendors without amd)
    amd_jobs: tuple[str, ...] = ()
    amd_target_jobs: tuple[str, ...] | None = None


def presence(vendors: tuple[str, ...], *matchers: Matcher) -> Expr:
    """Every GPU entry's presence series, as any exporter generation the catalog knows publishes it, those
    ``matchers`` select."""
    raws = catalog.presence_raws(catalog.GENERATIONS, vendors)
    return any_of([raw.select(*matchers) for raw in raws])


async def ask_if(wanted: bool, query: Callable[[], Awaitable[T]]) -> T | None:
    """``query``'s answer where ``wanted``, else None without asking Prometheus: a fact the config makes moot (the
    execution id on the raw series outside label attribution, a vendor the config does not read)."""
    return await query() if wanted else None


def without_host_name() -> Expr:
    """The GPU presence and host CPU series (the inputs of the per-GPU and host rules) that carry no
    ``HOST_TARGET_LABEL``: what node.host_identity: scrape records with an empty host."""
    unnamed = match(HOST_TARGET_LABEL, "")
    return any_of([presence(catalog.VENDORS, unnamed), catalog.SIGNALS["cpu_idle_seconds"].raws[0].select(unnamed)])


def amd_presence(cfg: Config) -> Expr:
    """device-metrics-exporter's series of a GPU's presence (catalog.PRESENCE_SIGNALS' AMD metrics), under every
    name prefix it may carry (``amd.metric_prefixes``, none and ``amd_``) and with ``amd.selector``: the jobs
    publishing them hold its targets."""
    prefixes = sorted({*cfg.amd.metric_prefixes, "", "amd_"})
    names = [m.name for key in catalog.PRESENCE_SIGNALS if (a := catalog.SIGNALS[key].amd) for m in a.metrics]
    return any_of([selector(prefix + name, *cfg.amd.matchers) for name in names for prefix in prefixes])


def claimed_without_execution(execution_label: str) -> Expr:
    """dcgm-exporter's presence series of a GPU a pod holds through a DRA claim (catalog.DRA_CLAIM_LABEL) or as a
    virtual GPU (catalog.VGPU_LABEL) that carry no execution id: the exporter copies the pod's own labels
    (--kubernetes-enable-pod-labels) on its device-plugin path only, so under label attribution these GPUs are held
    by no execution."""
    unlabelled = match(execution_label, "")
    return any_of(
        [presence(("nvidia",), labelled(label), unlabelled) for label in (catalog.DRA_CLAIM_LABEL, catalog.VGPU_LABEL)]
    )


def mig_instances(*matchers: Matcher) -> Expr:
    """dcgm-exporter's MIG instances that report (any generation's presence series with an instance id), those
    ``matchers`` select."""
    return presence(("nvidia",), labelled(catalog.MIG_INSTANCE_LABEL), *matchers)


def unmeasured_mig_instances() -> Expr:
    """The MIG instances that report without engine activity (DCGM_FI_PROF_GR_ENGINE_ACTIVE or its 4.9 name), by
    target: dcgm-exporter publishes it only with its profiling counters, not among 3.x's default ones."""
    instance, keys = labelled(catalog.MIG_INSTANCE_LABEL), (catalog.UUID_LABEL, catalog.MIG_INSTANCE_LABEL)
    activity = catalog.SIGNALS["gr_engine_active"].raws_for(catalog.GENERATIONS, ("nvidia",))
    measured = aggregate("group", keys, any_of([raw.select(instance) for raw in activity]))
    reporting = aggregate("group", (catalog.INSTANCE_LABEL, *keys), mig_instances())
    return reporting.unless(measured, on(keys))


def old_pod_labelled() -> Expr:
    """dcgm-exporter's presence series that carry its old pod labels (``catalog.OLD_POD_LABELS``), as published or
    behind a ServiceMonitor without honorLabels (exported_*), or its old UUID label (``catalog.OLD_UUID_LABEL``)."""
    spellings = [p + label for label in catalog.OLD_POD_LABELS.values() for p in ("", catalog.EXPORTED_PREFIX)]
    spellings.append(catalog.OLD_UUID_LABEL)  # the exporter's own label, never exported_: on every series
    return any_of([presence(("nvidia",), labelled(label)) for label in spellings])


def crowded_mig_instances(execution_label: str) -> Expr:
    """dcgm-exporter's MIG instances that carry several executions' ids (``execution_label``) at once without the
    replica a pod holds (catalog.VGPU_LABEL: time-slicing on MIG), by target: its HPC job mapping read a file per
    GPU index before it read one per instance (``<gpu>.<GPU_I_ID>``), and gave each instance every job of its GPU."""
    keys = (catalog.INSTANCE_LABEL, catalog.UUID_LABEL, catalog.MIG_INSTANCE_LABEL)
    held = mig_instances(labelled(execution_label), match(catalog.VGPU_LABEL, ""))
    holders = aggregate("group", (*keys, execution_label), held)
    return aggregate("count", keys, holders).gt(1)


def gpu_count(expr: Expr, labels: tuple[str, ...] = ("UUID", "GPU_I_ID")) -> Expr:
    """How many GPU entries ``expr`` holds, one per distinct ``labels``."""
    return aggregate("count", None, aggregate("group", labels, expr))


def cluster_labels(cfg: Config) -> tuple[str, ...]:
    """The labels whose values on the GPU series are asked: CLUSTER_LABELS, and the configured cluster label
    where it is another (``region``, say), or the clusters check finds none of it on a fleet that carries it."""
    return (*CLUSTER_LABELS, *(label for label in cluster_scope(cfg).partition if label not in CLUSTER_LABELS))


class Unexpected(ValueError):
    """What in an API answer's ``data`` is not of the shape Prometheus serves, in words."""


def unexpected(client: PrometheusClient, what: str, reason: str) -> PrometheusError:
    """The 502 of an answer of the wrong shape, as the client gives one for a query answer's (the CLI exits 3)."""
    return PrometheusError(502, f"Prometheus answered {what} with an unexpected body", client.url, reason)


def json_type(value: Any) -> str:
    """``value``'s JSON type in words ("null", "a list"), for what an answer holds instead of what it should."""
    names = {type(None): "null", bool: "a boolean", str: "a string", list: "a list", dict: "an object"}
    return names.get(type(value), "a number")


def expect(value: Any, kind: type, what: str) -> Any:
    """``value`` where it is a ``kind`` (dict: an object, list, str), else Unexpected naming ``what``."""
    if not isinstance(value, kind):
        wanted = {dict: "an object", list: "a list", str: "a string"}[kind]
        raise Unexpected(f"{what} is {json_type(value)}, not {wanted}")
    return value


def seconds(value: Any, what: str) -> float:
    """A duration in seconds as the API writes it (a number; a numeric string where a compatible API quotes it)."""
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError
        number = float(value)
    except (ValueError, OverflowError):  # OverflowError: an integer past a float's range
        raise Unexpected(f"{what} is {json_type(value)} {str(value)[:40]!r}, not a number of seconds") from None
    if not math.isfinite(number) or number < 0:
        raise Unexpected(f"{what} is {number}, not a number of seconds")
    return number


async def api_object(
    client: PrometheusClient, path: str, read: Callable[[Any], T], params: dict[str, Any] | None = None
) -> T:
    """``read`` of the ``data`` of ``path``'s answer: the 502 an unexpected body deserves where its shape is not
    what ``read`` takes (``data: null``, a list where an object is expected), never a crash."""
    return shaped(client, path, await client.api_data(path, params), read)


def shaped(client: PrometheusClient, path: str, data: Any, read: Callable[[Any], T]) -> T:
    """``read`` of ``path``'s ``data``, or the 502 of an unexpected body where it is not of the shape ``read`` takes."""
    try:
        return read(data)
    except Unexpected as err:
        raise unexpected(client, path, str(err)) from None


def count(client: PrometheusClient, value: float, what: str) -> int:
    """A count a query answered as a number; NaN or an infinity (what a compatible API may answer) is the 502 of an
    unexpected body, not a crash in int()."""
    if not math.isfinite(value) or value < 0:
        raise unexpected(client, "an instant query", f"{what} counted as {value}")
    return int(value)


def first_value(client: PrometheusClient, item: dict[str, Any]) -> float:
    """An instant query's result item's value: a vector's one sample (or a matrix series' first, as a
    compatible API may answer)."""
    if not item["values"]:
        raise unexpected(client, "an instant query", "a series without a sample")
    return item["values"][0][1]


async def instant_value(client: PrometheusClient, expr: Expr) -> float:
    """A one-sample instant query's value, 0 where it has none."""
    items = await client.instant(render(expr))
    return first_value(client, items[0]) if items else 0.0


async def label_values(client: PrometheusClient, label: str, expr: Expr) -> tuple[str, ...]:
    """The values ``label`` takes on ``expr``'s series now."""
    items = await client.instant(render(aggregate("group", (label,), expr)))
    return tuple(sorted(v for v in (i["metric"].get(label, "") for i in items) if v))


def metric_names(names: Any) -> frozenset[str]:
    """The metric names ``/api/v1/label/__name__/values`` serves: a list of strings (Unexpected otherwise)."""
    for name in expect(names, list, "data"):
        expect(name, str, "a metric name")
    return frozenset(names)


def loaded_groups(rules: Any) -> tuple[LoadedGroup, ...]:
    """The rule groups ``/api/v1/rules`` serves (Unexpected where its ``data`` is not of their shape)."""
    out = []
    for g in expect(expect(rules, dict, "data").get("groups", []), list, "data.groups"):
        expect(g, dict, "a rule group")
        name = expect(g.get("name"), str, "a rule group's name")
        where = f"rule group {name[:60]!r}"
        group_rules = [expect(r, dict, f"a rule of {where}") for r in expect(g.get("rules", []), list, where)]
        out.append(
            LoadedGroup(
                name,
                expect(g.get("file", ""), str, f"the file of {where}"),
                seconds(g.get("interval", 0), f"the interval of {where}"),
                seconds(g.get("evaluationTime", 0), f"the evaluationTime of {where}"),
                info_labels(group_rules, "version", where),
                any(r.get("type") == "recording" for r in group_rules),
                tuple(sorted(str(r.get("name", "")) for r in group_rules if r.get("type") == "alerting")),
                info_labels(group_rules, "digest", where),
                tuple(sorted(alert_shape(r, where) for r in group_rules if r.get("type") == "alerting")),
            )
        )
    return tuple(out)


def info_labels(group_rules: list[dict], label: str, where: str) -> tuple[str, ...]:
    """``label`` of each rules_info rule of a group ("" where one lacks it: written before it carried it)."""
    return tuple(
        str(expect(r.get("labels") or {}, dict, f"the labels of a rule of {where}").get(label, ""))
        for r in group_rules
        if r.get("name") == catalog.PACK_RULES_INFO.name
    )


def alert_shape(rule: dict, where: str) -> AlertShape:
    """An alerting rule as its file wrote it: name, ``for`` (seconds), severity, annotations."""
    labels = expect(rule.get("labels") or {}, dict, f"the labels of an alert of {where}")
    annotations = expect(rule.get("annotations") or {}, dict, f"the annotations of an alert of {where}")
    return (
        str(rule.get("name", "")),
        seconds(rule.get("duration", 0), f"the duration of an alert of {where}"),
        str(labels.get("severity", "")),
        tuple(sorted((str(k), str(v)) for k, v in annotations.items())),
    )


def active_targets(targets: Any) -> tuple[Target, ...]:
    """The scrape targets ``/api/v1/targets`` serves (Unexpected where its ``data`` is not of their shape)."""
    out = []
    for t in expect(expect(targets, dict, "data").get("activeTargets", []), list, "data.activeTargets"):
        labels = expect(expect(t, dict, "an active target").get("labels", {}), dict, "a target's labels")
        if not all(isinstance(v, str) for v in labels.values()):
            raise Unexpected("a target's labels are not all strings")
        interval = expect(t.get("scrapeInterval", ""), str, "a target's scrapeInterval")
        try:
            every = parse_duration_seconds(interval) if interval else 0.0
        except ValueError:
            raise Unexpected(f"a target's scrapeInterval {interval[:40]!r} is not a duration") from None
        out.append(Target(labels.get("job", ""), labels, every))
    return tuple(out)


def storage_retention(info: Any) -> str:
    """The retention ``/api/v1/status/runtimeinfo`` states ("" where it does not say)."""
    retention = expect(info, dict, "data").get("storageRetention", "")
    return str(retention) if isinstance(retention, (str, int, float)) else ""


def group_iterations(metrics_text: str) -> dict[str, tuple[float, float]]:
    """Each group's (missed, scheduled) iterations in Prometheus' /metrics text, by group name (summed over
    files). Their one label is rule_group, "<file>;<group name>"."""
    counts: dict[str, list[float]] = {}
    for line in metrics_text.splitlines():
        metric, _, rest = line.partition("{")
        if metric in (ITERATIONS_MISSED, ITERATIONS) and rest.count('"') == 2:
            _, rule_group, value = rest.split('"')
            try:  # "} 12", or "} 12 1700000000000" with a timestamp; a line not of that shape is not counted
                number = float(value.lstrip("} ").split(" ")[0])
            except ValueError:
                continue
            pair = counts.setdefault(rule_group.rsplit(";", 1)[-1], [0.0, 0.0])
            pair[metric == ITERATIONS] += number
    return {name: (missed, scheduled) for name, (missed, scheduled) in counts.items()}


async def iterations(client: PrometheusClient) -> dict[str, tuple[float, float]]:
    """Missed and scheduled iterations per group: the server's own /metrics, or else (a query frontend, Thanos,
    Mimir) its counters as stored where it scrapes itself, over the last day."""
    try:
        response = await client.client.get("/metrics")
        found = group_iterations(response.text) if response.status_code == 200 else {}
    except httpx.HTTPError:
        found = {}
    if found:
        return found
    stored: dict[str, list[float]] = {}
    for index, metric in enumerate((ITERATIONS_MISSED, ITERATIONS)):
        grown = call("increase", Range(selector(metric), COVERAGE_SPAN))
        for item in await client.instant(render(aggregate("sum", ("rule_group",), grown))):
            name = item["metric"].get("rule_group", "").rsplit(";", 1)[-1]
            stored.setdefault(name, [0.0, 0.0])[index] += first_value(client, item)
    return {name: (missed, scheduled) for name, (missed, scheduled) in stored.items()}


async def gpu_time(client: PrometheusClient, cfg: Config, present: Expr) -> dict[str, tuple[float, float]]:
    """Per cluster, the GPU-time (GPU entries present, counted at each COVERAGE_STEP over COVERAGE_SPAN) and the
    part of it some execution held (the recorded presence series: shared GPUs count once)."""
    by = cluster_scope(cfg).partition

    def steps(expr: Expr) -> Expr:
        entries = aggregate("group", (*by, "UUID", "GPU_I_ID"), expr)
        return aggregate("sum", by, call("count_over_time", Range(entries, COVERAGE_SPAN, COVERAGE_STEP)))

    total, held = await asyncio.gather(
        client.instant(render(steps(present))), client.instant(render(steps(catalog.GPU_PRESENCE.select())))
    )
    held_by = {cluster_scope(cfg).of(i["metric"]): first_value(client, i) for i in held}
    return {
        (cluster := cluster_scope(cfg).of(i["metric"])): (first_value(client, i), held_by.get(cluster, 0.0))
        for i in total
    }


def by_node(expr: Expr) -> Expr:
    """``expr`` with a ``node`` label from dcgm-exporter's host label (hostname over Hostname): what the GPU
    Operator sets it to, the Kubernetes node's name."""
    for label in reversed(catalog.DCGM_HOST_LABELS):
        expr = label_copy(expr, catalog.POD_NODE_LABEL, label)
    return expr


def gpu_nodes(cfg: Config, expr: Expr) -> Expr:
    """Each GPU entry of ``expr`` (by UUID and MIG instance) with its Kubernetes ``node``: the node kube-state-metrics
    names for the pod on its series (dcgm-exporter's own pod behind a ServiceMonitor, else the workload's: either
    runs on the GPU's node), else its host label (``by_node``). The upstream Helm chart sets no NODE_NAME, and its
    exporter's host label is then its own pod's name, no node's."""
    node, keys, pods = catalog.POD_NODE_LABEL, ("UUID", "GPU_I_ID"), catalog.KUBERNETES_JOIN_LABELS
    a = cfg.attribution
    pod_info = from_exported(selector(a.pod_info_metric, *a.kubernetes_matchers), (*pods, node))
    # One node per pod, even where a pod of one name ran on two nodes within the lookback (or two clusters share it).
    nodes = aggregate("topk", pods, aggregate("group", (*pods, node), pod_info), param=1)
    on_pods = join(aggregate("group", (*pods, *keys), expr), "*", on(pods, group_left=(node,)), nodes)
    by_pod = aggregate("group", (node, *keys), on_pods)
    return any_of([by_pod, aggregate("group", (node, *keys), by_node(expr))], matching=on(keys))


def advertised_gpus() -> Expr:
    """Each node's nvidia.com/gpu capacity as kube-state-metrics publishes it."""
    return selector(
        catalog.NODE_CAPACITY_METRIC, match(catalog.NODE_CAPACITY_RESOURCE_LABEL, catalog.NVIDIA_GPU_RESOURCE)
    )


async def shared_gpu_nodes(client: PrometheusClient, cfg: Config) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """The nodes whose advertised nvidia.com/gpu exceed the GPU entries dcgm-exporter reports on them (``gpu_nodes``;
    shared GPUs: the device plugin advertises each GPU once per replica), and those of them whose GPU series
    carry no replica label. A node none of whose GPUs can be placed is not compared. (None, ()) without
    kube-state-metrics' capacity series."""
    node = catalog.POD_NODE_LABEL
    advertised = aggregate("sum", (node,), advertised_gpus())
    raws = catalog.presence_raws(catalog.GENERATIONS, ("nvidia",))
    nvidia = any_of([raw.select() for raw in raws])
    reported = aggregate("count", (node,), gpu_nodes(cfg, nvidia))
    shared = join(advertised, ">", on((node,)), reported)
    # Over the last day: a node whose GPUs no pod holds right now publishes no pod series, replica or not.
    replicas = any_of(
        [call("last_over_time", Range(raw.select(labelled(catalog.VGPU_LABEL)), COVERAGE_SPAN)) for raw in raws]
    )
    capacity, nodes, with_replicas = await asyncio.gather(
        client.instant(render(aggregate("count", None, advertised))),
        label_values(client, node, shared),
        label_values(client, node, gpu_nodes(cfg, replicas)),
    )
    if not capacity:
        return None, ()
    return nodes, tuple(n for n in nodes if n not in with_replicas)


async def retention(client: PrometheusClient) -> str:
    """The TSDB retention Prometheus states in its runtime info (2.x and 3.x both have it)."""
    path = "/api/v1/status/runtimeinfo"
    try:
        info = await client.api_data(path)
    except PrometheusError as err:  # Mimir and Thanos Query serve no runtime info
        if err.status == 504:  # past the deadline: said as such, not as a retention nobody stated
            raise
        return ""
    return shaped(client, path, info, storage_retention)  # served, but not as runtime info is: unexpected


async def probe(cfg: Config, client: PrometheusClient) -> Deployment:
    """Read every fact the checks need from the Prometheus behind ``client``."""
    present = presence(catalog.VENDORS)
    idle_cpus = catalog.SIGNALS["cpu_idle_seconds"].raws[0].select()
    names, groups, targets, kept = await asyncio.gather(
        api_object(client, "/api/v1/label/__name__/values", metric_names),
        api_object(client, "/api/v1/rules", loaded_groups),
        api_object(client, "/api/v1/targets", active_targets, {"state": "active"}),
        retention(client),
    )
    asked = cluster_labels(cfg)
    clusters = await asyncio.gather(*(label_values(client, label, present) for label in asked))
    gpus, attributed, most_cpus = await asyncio.gather(
        instant_value(client, gpu_count(present)),
        instant_value(client, gpu_count(catalog.GPU_PRESENCE.select())),
        instant_value(client, aggregate("max", None, aggregate("count", ("instance",), idle_cpus))),
    )
    collisions, missed, coverage, read_jobs, (shared, unlabelled) = await asyncio.gather(
        label_values(client, "hostname", catalog.NODE_HOST_COLLISIONS.select()),
        iterations(client),
        gpu_time(client, cfg, present),
        label_values(client, "job", any_of([present, idle_cpus])),
        shared_gpu_nodes(client, cfg),
    )
    # One row per instance without engine activity (with its target): counted and named from the one answer.
    # The raw series carry an execution id under label attribution only; a vendor's exporters are judged where the
    # config reads that vendor.
    by_label, nvidia, amd = cfg.attribution.mode == "label", "nvidia" in cfg.vendors, "amd" in cfg.vendors
    instances, unmeasured, old_pod_labels, crowded, podless, unnamed = await asyncio.gather(
        instant_value(client, gpu_count(mig_instances())),
        client.instant(render(unmeasured_mig_instances())),
        label_values(client, catalog.INSTANCE_LABEL, old_pod_labelled()),
        ask_if(by_label, lambda: client.instant(render(crowded_mig_instances(cfg.execution_label)))),
        ask_if(
            by_label,
            lambda: label_values(client, catalog.INSTANCE_LABEL, claimed_without_execution(cfg.execution_label)),
        ),
        label_values(client, catalog.INSTANCE_LABEL, without_host_name()),
    )
    dcgm_jobs, dcgm_target_jobs, amd_jobs, amd_target_jobs = await asyncio.gather(
        ask_if(nvidia, lambda: label_values(client, catalog.JOB_LABEL, presence(("nvidia",)))),
        ask_if(
            nvidia, lambda: label_values(client, catalog.JOB_LABEL, selector(UP, *cfg.selectors.dcgm_targets_matchers))
        ),
        ask_if(amd, lambda: label_values(client, catalog.JOB_LABEL, amd_presence(cfg))),
        ask_if(amd, lambda: label_values(client, catalog.JOB_LABEL, selector(UP, *cfg.amd.targets_matchers))),
    )
    return Deployment(
        metric_names=names,
        groups=groups,
        targets=targets,
        retention=kept,
        cluster_values={label: values for label, values in zip(asked, clusters, strict=True) if values},
        gpus=count(client, gpus, "the GPUs reporting"),
        attributed_gpus=count(client, attributed, "the GPUs held"),
        collisions=collisions,
        max_cpus_per_host=count(client, most_cpus, "the most CPUs of a host"),
        iterations=missed,
        gpu_time=coverage,
        read_jobs=frozenset(read_jobs),
        shared_gpu_nodes=shared,
        unlabelled_shared_nodes=unlabelled,
        mig_instances=count(client, instances, "the MIG instances reporting"),
        unmeasured_mig_instances=len(unmeasured),
        unmeasured_mig_targets=tuple(sorted({t for r in unmeasured if (t := r["metric"].get(catalog.INSTANCE_LABEL))})),
        old_pod_label_targets=old_pod_labels,
        crowded_mig_instances=None if crowded is None else len(crowded),
        crowded_mig_targets=tuple(sorted({t for r in crowded or () if (t := r["metric"].get(catalog.INSTANCE_LABEL))})),
        dcgm_jobs=dcgm_jobs or (),
        dcgm_target_jobs=dcgm_target_jobs,
        unnamed_host_targets=unnamed,
        podless_claim_targets=podless,
        amd_jobs=amd_jobs or (),
        amd_target_jobs=amd_target_jobs,
    )
