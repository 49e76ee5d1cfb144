"""The executions Prometheus holds in a window: one query, read by the archiver (what to archive) and the fleet
view (what the archive need not add). Needs no database library."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.promql import aggregate, call, match, render
from gpu_execution_pack.query.execution import seconds
from gpu_execution_pack.query.prometheus import PrometheusClient


@dataclass(frozen=True, order=True)
class Found:
    """An execution with samples in the window: its cluster ("" without a cluster label), tenant ("" without
    the tenant label) and id."""

    cluster: str
    tenant: str
    execution_id: str


async def executions_in(cfg: Config, prometheus: PrometheusClient, window_seconds: float, at: float) -> list[Found]:
    """Every (cluster, tenant, execution id) with a GPU sample in the ``window_seconds`` before ``at``: one query."""
    tenant, scope = cfg.api.tenant_label, cluster_scope(cfg)
    labels = tuple(x for x in (*scope.partition, tenant, catalog.EXECUTION_LABEL) if x)
    present = call("last_over_time", catalog.GPU_PRESENCE.select().range(seconds(math.ceil(window_seconds))))
    result = await prometheus.instant(render(aggregate("group", labels, present)), at=at)
    found = {
        Found(
            scope.of(r["metric"]),
            r["metric"].get(tenant, ""),
            r["metric"].get(catalog.EXECUTION_LABEL, ""),
        )
        for r in result
    }
    return sorted(f for f in found if f.execution_id)


# How many of ``still_held``'s queries are in flight at once: each is small, and a month's fleet view asks one per
# archived run that Prometheus may still hold.
HELD_QUERIES_AT_ONCE = 8
# The span before a run's end in which a sample of it shows that Prometheus still holds the run.
RUN_END_SPAN_SECONDS = 600


async def still_held(cfg: Config, prometheus: PrometheusClient, runs: Sequence[tuple[Found, float]]) -> list[bool]:
    """For each (execution, end) of ``runs`` (archived runs), whether Prometheus holds a GPU sample of that execution
    in the ten minutes before the run's end: then it still holds the run (its retention drops the oldest data
    first), and ranks it in that execution's row. An earlier run of a reused id, past the retention, is not held,
    though Prometheus holds the id's later run."""
    tenant, scope = cfg.api.tenant_label, cluster_scope(cfg)
    limit = asyncio.Semaphore(HELD_QUERIES_AT_ONCE)

    async def held(found: Found, end: float) -> bool:
        own = (match(catalog.EXECUTION_LABEL, found.execution_id), match(tenant, found.tenant))
        present = catalog.GPU_PRESENCE.select(*own, *scope.matchers(found.cluster)).range(seconds(RUN_END_SPAN_SECONDS))
        async with limit:
            return bool(await prometheus.instant(render(aggregate("group", (), call("last_over_time", present))), end))

    return list(await asyncio.gather(*(held(found, end) for found, end in runs)))
