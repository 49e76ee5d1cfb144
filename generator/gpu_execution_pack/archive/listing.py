"""The executions Prometheus holds in a window: one query, read by the archiver (what to archive) and the fleet
view (what the archive need not add). Needs no database library."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.promql import aggregate, call, render
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
