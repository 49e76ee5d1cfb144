"""What a live Prometheus says about the deployment: the facts ``checks`` judges.

Everything here is read from Prometheus' own API (metric names, loaded rule groups, scrape targets,
runtime info) and from a few instant queries built as trees over the catalog's raw metrics, so the
doctor judges the deployment by its data, not by what the config assumes of it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httpx

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.promql import Expr, Range, aggregate, any_of, call, render, selector
from gpu_execution_pack.promql.durations import parse_duration_seconds
from gpu_execution_pack.query.prometheus import PrometheusClient, PrometheusError

# Labels that name a cluster on real installs: kube-prometheus' and Thanos' external labels, the
# GKE/EKS managed collectors' and the mixins' defaults. Any of them with two values on the GPU series
# means several clusters share the store.
CLUSTER_LABELS: tuple[str, ...] = ("cluster", "cluster_name", "k8s_cluster", "kubernetes_cluster", "cluster_id")
# The target label a scrape config sets to name a target's host (node.host_identity: scrape).
HOST_TARGET_LABEL = "hostname"
# Prometheus' own counters of each rule group's evaluations (label rule_group: "<file>;<group name>").
ITERATIONS_MISSED = "prometheus_rule_group_iterations_missed_total"
ITERATIONS = "prometheus_rule_group_iterations_total"
# The GPU-time share attributed to executions is read over this span, sampled at this step (a subquery:
# raw presence and the recorded series are counted at the same instants, whatever their own intervals).
COVERAGE_SPAN, COVERAGE_STEP = "1d", "5m"


@dataclass(frozen=True)
class LoadedGroup:
    """One rule group as Prometheus runs it (``/api/v1/rules``)."""

    name: str
    file: str
    interval_seconds: float
    evaluation_seconds: float
    versions: tuple[str, ...] = ()  # the pack versions its rules_info rules name (catalog.PACK_RULES_INFO)
    records: bool = False  # whether it holds a recording rule (a file of alerts only carries no version)


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


def presence(vendors: tuple[str, ...]) -> Expr:
    """Every GPU entry's presence series, as any exporter generation the catalog knows publishes it."""
    raws = catalog.presence_raws(catalog.GENERATIONS, vendors)
    return any_of([raw.select() for raw in raws])


def gpu_count(expr: Expr, labels: tuple[str, ...] = ("UUID", "GPU_I_ID")) -> Expr:
    """How many GPU entries ``expr`` holds, one per distinct ``labels``."""
    return aggregate("count", None, aggregate("group", labels, expr))


async def instant_value(client: PrometheusClient, expr: Expr) -> float:
    """A one-sample instant query's value, 0 where it has none."""
    items = await client.instant(render(expr))
    return items[0]["values"][0][1] if items else 0.0


async def label_values(client: PrometheusClient, label: str, expr: Expr) -> tuple[str, ...]:
    """The values ``label`` takes on ``expr``'s series now."""
    items = await client.instant(render(aggregate("group", (label,), expr)))
    return tuple(sorted(v for v in (i["metric"].get(label, "") for i in items) if v))


def loaded_groups(rules: dict[str, Any]) -> tuple[LoadedGroup, ...]:
    return tuple(
        LoadedGroup(
            g["name"],
            g.get("file", ""),
            float(g.get("interval", 0)),
            float(g.get("evaluationTime", 0)),
            tuple(
                str((r.get("labels") or {}).get("version", ""))
                for r in g.get("rules", [])
                if r.get("name") == catalog.PACK_RULES_INFO.name
            ),
            any(r.get("type") == "recording" for r in g.get("rules", [])),
        )
        for g in rules.get("groups", [])
    )


def active_targets(targets: dict[str, Any]) -> tuple[Target, ...]:
    out = []
    for t in targets.get("activeTargets", []):
        labels = t.get("labels", {})
        interval = t.get("scrapeInterval", "")
        out.append(Target(labels.get("job", ""), labels, parse_duration_seconds(interval) if interval else 0.0))
    return tuple(out)


def group_iterations(metrics_text: str) -> dict[str, tuple[float, float]]:
    """Each group's (missed, scheduled) iterations in Prometheus' /metrics text, by group name (summed over
    files). Their one label is rule_group, "<file>;<group name>"."""
    counts: dict[str, list[float]] = {}
    for line in metrics_text.splitlines():
        metric, _, rest = line.partition("{")
        if metric in (ITERATIONS_MISSED, ITERATIONS) and rest.count('"') == 2:
            _, rule_group, value = rest.split('"')
            pair = counts.setdefault(rule_group.rsplit(";", 1)[-1], [0.0, 0.0])
            pair[metric == ITERATIONS] += float(value.lstrip("} "))
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
            stored.setdefault(name, [0.0, 0.0])[index] += item["values"][0][1]
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
    held_by = {cluster_scope(cfg).of(i["metric"]): i["values"][0][1] for i in held}
    return {
        (cluster := cluster_scope(cfg).of(i["metric"])): (i["values"][0][1], held_by.get(cluster, 0.0)) for i in total
    }


async def retention(client: PrometheusClient) -> str:
    """The TSDB retention Prometheus states in its runtime info (2.x and 3.x both have it)."""
    try:
        info = await client.api_data("/api/v1/status/runtimeinfo")
    except PrometheusError:  # Mimir and Thanos Query serve no runtime info
        return ""
    return str(info.get("storageRetention", ""))


async def probe(cfg: Config, client: PrometheusClient) -> Deployment:
    """Read every fact the checks need from the Prometheus behind ``client``."""
    present = presence(catalog.VENDORS)
    idle_cpus = catalog.SIGNALS["cpu_idle_seconds"].raws[0].select()
    names, rules, targets, kept = await asyncio.gather(
        client.api_data("/api/v1/label/__name__/values"),
        client.api_data("/api/v1/rules"),
        client.api_data("/api/v1/targets", {"state": "active"}),
        retention(client),
    )
    clusters = await asyncio.gather(*(label_values(client, label, present) for label in CLUSTER_LABELS))
    gpus, attributed, most_cpus = await asyncio.gather(
        instant_value(client, gpu_count(present)),
        instant_value(client, gpu_count(catalog.GPU_PRESENCE.select())),
        instant_value(client, aggregate("max", None, aggregate("count", ("instance",), idle_cpus))),
    )
    collisions, missed, coverage = await asyncio.gather(
        label_values(client, "hostname", catalog.NODE_HOST_COLLISIONS.select()),
        iterations(client),
        gpu_time(client, cfg, present),
    )
    return Deployment(
        metric_names=frozenset(names),
        groups=loaded_groups(rules),
        targets=active_targets(targets),
        retention=kept,
        cluster_values={label: values for label, values in zip(CLUSTER_LABELS, clusters, strict=True) if values},
        gpus=int(gpus),
        attributed_gpus=int(attributed),
        collisions=collisions,
        max_cpus_per_host=int(most_cpus),
        iterations=missed,
        gpu_time=coverage,
    )
