"""The spans of many executions at once: the archiver's batched ``ExecutionMetrics.span``.

``span`` asks three queries per execution: its samples counted per bucket over the lookback (one range
query), then the first and the last bucket with samples read whole, for the first and the last sample. Here
the counting is asked for up to ``fig.MAX_NAMED`` executions of a cluster and tenant at once, each counted
apart (``by`` its id too). Every count of a pass shares one grid (the lookback's buckets up to one ``now``),
so the executions whose first or last bucket is the same step are read in one query: a few queries per hour
of the window, where ``span`` asked three per execution. Each execution's windows, matchers (but the id's,
one of a set) and arithmetic are ``span``'s own, so its first and last samples are the ones ``span`` finds
(``tests/test_archive.py`` compares the records). An execution ``span`` refuses (an id that two clusters or
two tenants hold) is asked of ``span`` itself, which says so as before.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpu_execution_pack import catalog
from gpu_execution_pack.archive.listing import Found
from gpu_execution_pack.promql import Expr, parse_duration_seconds, render
from gpu_execution_pack.query.execution import (
    LOOKBACK_SECONDS,
    ExecutionMetrics,
    Span,
    presence_counts,
    seconds,
    span_bucket,
)
from gpu_execution_pack.query.params import RequestError
from gpu_execution_pack.report import figures as fig

CONCURRENCY = 4  # span queries in flight at once
Asked = tuple[str | None, str | None]  # the cluster and tenant ``span`` is asked for (None: any; tenant "": none)


@dataclass
class Counted:
    """One execution's buckets with samples, and the cluster its samples are in (``span``'s ``cluster``)."""

    found: Found
    steps: list[float]
    cluster: str | None

    @property
    def tenant(self) -> str:
        return self.found.tenant


def asked(found: Found) -> Asked:
    """What ``span`` is asked for ``found`` (as ``archiver.ended_span`` asks it)."""
    return found.cluster or None, found.tenant  # "": the GPUs without the tenant label only (``within_tenant``)


def presence(metrics: ExecutionMetrics, ids: Iterable[str], tenant: str | None, cluster: str | None) -> Expr:
    """``span``'s presence selector, for any of ``ids``."""
    execution = (fig.any_execution(ids), *metrics.clusters.matchers(cluster))
    return metrics.within_tenant(catalog.GPU_PRESENCE.select(*execution), True, execution, tenant)


def chunks(found: Iterable[Found]) -> list[tuple[Asked, list[Found]]]:
    """``found`` by what ``span`` is asked for, at most ``fig.MAX_NAMED`` executions a chunk."""
    by_asked: dict[Asked, list[Found]] = defaultdict(list)
    for f in sorted(found):
        by_asked[asked(f)].append(f)
    return [
        (key, group[i : i + fig.MAX_NAMED])
        for key, group in by_asked.items()
        for i in range(0, len(group), fig.MAX_NAMED)
    ]


def counted(metrics: ExecutionMetrics, found: Found, rows: list[dict[str, Any]]) -> Counted | None:
    """``span``'s reading of its counts for one execution (``rows``: its own); None where ``span`` refuses it."""
    cluster = found.cluster or None
    if metrics.clusters.enabled and cluster is None:
        clusters = sorted({metrics.clusters.of(r["metric"]) for r in rows})
        if len(clusters) > 1:
            return None
        cluster = clusters[0] if clusters else None
    held = (r["metric"] for r in rows if not metrics.clusters.enabled or metrics.clusters.of(r["metric"]) == cluster)
    if len({m.get(metrics.api.tenant_label, "") for m in held}) > 1:
        return None
    return Counted(found, [t for r in rows for t, _ in r["values"]], cluster)


async def spans(metrics: ExecutionMetrics, found: list[Found]) -> dict[Found, Span | None]:
    """Each execution's ``span`` (None: not found), in a few queries per bucket of the window."""
    now = time.time()
    lookback = parse_duration_seconds(metrics.api.lookback)
    bucket = span_bucket(lookback)
    limit = asyncio.Semaphore(CONCURRENCY)
    tenant_label = metrics.api.tenant_label

    async def count(key: Asked, chunk: list[Found]) -> list[dict[str, Any]]:
        cluster, tenant = key
        by = (catalog.EXECUTION_LABEL, tenant_label) if tenant is None else (catalog.EXECUTION_LABEL,)
        ids = [f.execution_id for f in chunk]
        counting = metrics.clusters.partitioned(presence_counts(presence(metrics, ids, tenant, cluster), bucket, by))
        async with limit:
            return await metrics.prometheus.range(render(counting), now - lookback, now, bucket)

    asked_chunks = chunks(found)
    answers = await asyncio.gather(*(count(key, chunk) for key, chunk in asked_chunks))
    out: dict[Found, Span | None] = {}
    refused: list[Found] = []
    ready: list[Counted] = []
    for (_, chunk), rows in zip(asked_chunks, answers, strict=True):
        by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            by_id[r["metric"].get(catalog.EXECUTION_LABEL, "")].append(r)
        for f in chunk:
            if not by_id.get(f.execution_id):
                out[f] = None
            elif (c := counted(metrics, f, by_id[f.execution_id])) is None:
                refused.append(f)
            else:
                ready.append(c)
    out.update(await read_ends(metrics, ready, bucket, now, limit))
    for f in refused:  # span raises what it raised before (a 409), or finds it now
        out[f] = await ended_or_none(metrics, f)
    return out


async def read_ends(
    metrics: ExecutionMetrics, ready: list[Counted], bucket: int, now: float, limit: asyncio.Semaphore
) -> dict[Found, Span | None]:
    """The first and last sample of each of ``ready``: its first and last bucket read whole, as ``span`` reads
    them, every execution of a cluster and tenant whose bucket is at the same step in one query."""
    wanted: dict[tuple[str | None, str | None, float], list[Counted]] = defaultdict(list)
    for c in ready:
        for step in sorted({min(c.steps), max(c.steps)}):
            wanted[(c.cluster, c.tenant, step)].append(c)
    reads = [
        (key, group[i : i + fig.MAX_NAMED])
        for key, group in sorted(wanted.items(), key=lambda kv: (kv[0][0] or "", kv[0][1] or "", kv[0][2]))
        for i in range(0, len(group), fig.MAX_NAMED)
    ]

    async def read(key: tuple[str | None, str | None, float], group: list[Counted]) -> list[dict[str, Any]]:
        cluster, tenant, step = key
        samples = presence(metrics, [c.found.execution_id for c in group], tenant, cluster).range(seconds(bucket))
        async with limit:
            return await metrics.prometheus.instant(render(samples), at=step)

    answers = await asyncio.gather(*(read(key, group) for key, group in reads))
    firsts: dict[Found, list[float]] = defaultdict(list)
    lasts: dict[Found, list[float]] = defaultdict(list)
    for ((_, _, step), group), rows in zip(reads, answers, strict=True):
        times: dict[str, list[float]] = defaultdict(list)
        for r in rows:
            times[r["metric"].get(catalog.EXECUTION_LABEL, "")] += [t for t, _ in r["values"]]
        for c in group:
            if step == min(c.steps):
                firsts[c.found] += times[c.found.execution_id]
            if step == max(c.steps):
                lasts[c.found] += times[c.found.execution_id]
    out: dict[Found, Span | None] = {}
    for c in ready:
        first, last = firsts.get(c.found), lasts.get(c.found)
        # None: its samples left the retention between the queries (span's 404)
        out[c.found] = (
            Span(min(first), max(last), now - max(last) < LOOKBACK_SECONDS, c.cluster) if first and last else None
        )
    return out


async def ended_or_none(metrics: ExecutionMetrics, found: Found) -> Span | None:
    """``span`` of one execution, None where it is not found."""
    try:
        return await metrics.span(found.execution_id, found.tenant, found.cluster or None)
    except RequestError as err:
        if err.status != 404:
            raise
        return None
