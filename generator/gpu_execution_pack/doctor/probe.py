"""What a live Prometheus says about the deployment: the facts ``checks`` judges.

Everything here is read from Prometheus' own API (metric names, loaded rule groups, scrape targets,
runtime info) and from a few instant queries built as trees over the catalog's raw metrics, so the
doctor judges the deployment by its data, not by what the config assumes of it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.promql import Expr, aggregate, any_of, render
from gpu_execution_pack.promql.durations import parse_duration_seconds
from gpu_execution_pack.query.prometheus import PrometheusClient, PrometheusError

# Labels that name a cluster on real installs: kube-prometheus' and Thanos' external labels, the
# GKE/EKS managed collectors' and the mixins' defaults. Any of them with two values on the GPU series
# means several clusters share the store.
CLUSTER_LABELS: tuple[str, ...] = ("cluster", "cluster_name", "k8s_cluster", "kubernetes_cluster", "cluster_id")
# The target label a scrape config sets to name a target's host (node.host_identity: scrape).
HOST_TARGET_LABEL = "hostname"


@dataclass(frozen=True)
class LoadedGroup:
    """One rule group as Prometheus runs it (``/api/v1/rules``)."""

    name: str
    file: str
    interval_seconds: float
    evaluation_seconds: float


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
        LoadedGroup(g["name"], g.get("file", ""), float(g.get("interval", 0)), float(g.get("evaluationTime", 0)))
        for g in rules.get("groups", [])
    )


def active_targets(targets: dict[str, Any]) -> tuple[Target, ...]:
    out = []
    for t in targets.get("activeTargets", []):
        labels = t.get("labels", {})
        interval = t.get("scrapeInterval", "")
        out.append(Target(labels.get("job", ""), labels, parse_duration_seconds(interval) if interval else 0.0))
    return tuple(out)


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
    collisions = await label_values(client, "hostname", catalog.NODE_HOST_COLLISIONS.select())
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
    )
