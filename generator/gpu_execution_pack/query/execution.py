"""One execution in Prometheus: its span (first and last sample), its scope (tenant, hosts), and its series.

An execution's series are read from the recorded series the API serves (``catalog.API_SERIES`` by
default, those a request names among ``catalog.SERVABLE_SERIES`` otherwise; only those are
queried), one entry per GPU (GPU series) or per host (system series). Prometheus answers at most
11,000 points per series per query, so long ranges are read in chunks on one grid (``start + k *
step``) and stitched, which leaves no gap and no duplicate. A finished execution's span is cached.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.promql import (
    Expr,
    Matcher,
    Selector,
    aggregate,
    call,
    match,
    on,
    parse_duration_seconds,
    render,
    selector,
)
from gpu_execution_pack.promql.durations import duration_text
from gpu_execution_pack.query.params import (
    Params,
    RequestError,
    Window,
    bad,
    check_execution_id,
    iso,
    parse_params,
    shown,
)
from gpu_execution_pack.query.prometheus import PrometheusClient, PrometheusError, bounded

CHUNK_POINTS = 10_000  # points per series per range query, under the 11,000 Prometheus accepts (tests lower it)
DISCOVERY_STEPS = 50  # evaluation points of the query that lists a window's entries
DISCOVERY_MARGIN_SECONDS = 3600  # how far before the window an entry's samples may count (>= any lookback)
CONCURRENCY = 8  # queries in flight per request
LOOKBACK_SECONDS = catalog.LOOKBACK_SECONDS  # Prometheus' default lookback (staleness) window
SPAN_CACHE_SECONDS = 300  # how long a finished execution's span is reused
SPAN_CACHE_ENTRIES = 4096
SPAN_BUCKET_SECONDS = 3600  # the shortest bucket the span's first pass counts samples in


@dataclass(frozen=True)
class Span:
    """An execution's first and last sample (unix seconds), and whether it still reports."""

    first: float
    last: float
    running: bool
    cluster: str | None = None  # the cluster that holds it (None: no cluster label configured)


def seconds(n: int) -> str:
    """A whole number of seconds as a range's duration, ``3600s``."""
    return f"{n}s"


def presence_counts(presence: Expr, bucket: int, by: tuple[str, ...] = ()) -> Expr:
    """``sum by (by) (count_over_time(presence[bucket]))``: the execution's samples per bucket, every GPU
    together (per value of ``by``'s labels: the tenant's, when every tenant is asked for)."""
    return aggregate("sum", by or None, call("count_over_time", presence.range(seconds(bucket))))


def span_bucket(lookback: float) -> int:
    """The seconds of each bucket ``ExecutionMetrics.span`` counts samples in over a ``lookback`` of that many."""
    return max(SPAN_BUCKET_SECONDS, math.ceil(lookback / CHUNK_POINTS))


def resolve_window(params: Params, span: Span, max_points: float, now: float) -> Window:
    """The step grid a request is answered on, from its parameters and the execution's span.

    Not given, ``start`` is the execution's first sample, moved to the first point of the step grid
    (multiples of ``step``) at or after it, and ``end`` its last sample, or ``now`` while it still
    reports. The window must run forward, and ``step`` must be at most its length (else there may
    be no grid point in it), or any step when start and end are the same instant: one point.
    """
    start = span.first if params.start is None else params.start
    execution_end = now if span.running else span.last
    end = execution_end if params.end is None else params.end
    if end < start:
        if params.start is not None:  # and end is the execution's (both given was checked before)
            still = ", now: it still reports" if span.running else ""
            raise bad(
                f"start: {iso(start)} is after the execution's end ({iso(execution_end)}{still}); "
                "accepted: a start at or before it"
            )
        raise bad(
            f"end: {iso(end)} is before the execution's first sample ({iso(span.first)}); "
            "accepted: an end at or after it"
        )
    length = end - start
    if 0 < length < params.step:
        what = (
            "the execution's length" if params.start is None and params.end is None else "the window from start to end"
        )
        raise bad(
            f"step: {shown(params.step_text)} is longer than {what} ({duration_text(length)}); "
            f"accepted: at most {duration_text(length)}"
        )
    if params.start is None and length > 0:  # step <= length: a grid point lies in the window
        start = math.ceil(start / params.step) * params.step
    window = Window(start, start + ((end - start) // params.step) * params.step, params.step)
    if window.points > max_points:
        raise too_many_points(params, window.points, start, end, max_points)
    return window


def ambiguous(execution_id: str, label: str, clusters: list[str]) -> RequestError:
    """The 409 for an execution id that more than one cluster holds, the request naming none of them."""
    return RequestError(
        409,
        f"cluster: execution {execution_id!r} exists in {len(clusters)} clusters ({label}: {', '.join(clusters)}); "
        "accepted: a cluster parameter naming one of them",
        {"clusters": clusters},
    )


def tenant_named(tenant: str, label: str) -> str:
    """A tenant as a message names it: its name, or what the empty one stands for (GPUs without the label)."""
    return tenant or f"none (GPUs without {label}: an empty tenant, tenant= or --tenant '')"


def held_by_tenants(execution_id: str, label: str, tenants: list[str]) -> RequestError:
    """The 409 for an execution id that more than one tenant holds, asked for with a key to every tenant.

    ``tenants`` may hold "": GPUs without the tenant label (bare metal, a Slurm partition beside Kubernetes) hold
    the id as well, and are asked for with an empty tenant (``tenant=``, ``--tenant ''``)."""
    named = ", ".join(tenant_named(t, label) for t in tenants)
    return RequestError(
        409,
        f"tenant: execution {execution_id!r} is held by {len(tenants)} tenants ({label}: {named}); "
        "accepted: a tenant parameter naming one of them",
        {"tenants": tenants},
    )


def too_many_points(params: Params, points: int, start: float, end: float, max_points: float) -> RequestError:
    """The 400 for a window of more than ``max_points`` points, naming the parameter the client set."""
    most = int(max_points)
    span = f"{points} points per series from {iso(start)} to {iso(end)} at step {shown(params.step_text)}"
    if params.start is not None:
        return bad(
            f"start: {iso(start)} is too early: {span}; the most accepted is {most}; "
            f"accepted: a start from {iso(end - (most - 1) * params.step)}, or a longer step"
        )
    if params.end is not None:
        return bad(
            f"end: {iso(end)} is too late: {span}; the most accepted is {most}; "
            f"accepted: an end up to {iso(start + (most - 1) * params.step)}, or a longer step"
        )
    return bad(
        f"step: {span} (the whole execution); the most accepted is {most}; "
        f"accepted: a step of at least {duration_text(math.ceil((end - start) / (most - 1)))}"
    )


class ExecutionMetrics:
    """Reads executions' API series for one configuration, through one Prometheus client."""

    def __init__(self, cfg: Config, prometheus: PrometheusClient):
        self.cfg = cfg
        self.api = cfg.api
        self.prometheus = prometheus
        self.clusters = cluster_scope(cfg)
        self.id_pattern = re.compile(cfg.api.execution_id_pattern)
        # Spans of finished executions, by (id, tenant, cluster): 3 round trips saved per repeated request.
        self.finished: OrderedDict[tuple[str, str | None, str | None], tuple[Span, float]] = OrderedDict()

    def execution(self, execution_id: str, cluster: str | None) -> tuple[Matcher, ...]:
        """The matchers of one execution: its id, and its cluster's where one is named (None: any cluster)."""
        own = match(catalog.EXECUTION_LABEL, execution_id)
        return (own, *self.clusters.matchers(cluster))

    def selector(
        self, series: catalog.Series, execution_id: str, tenant: str | None, *matchers: Matcher, cluster: str | None
    ) -> str:
        """The query for one series of the execution in ``cluster``, scoped to ``tenant`` (None: every tenant).

        Per-GPU series carry the tenant label. Host series do not (a host is shared): they are
        kept only for the hosts where this tenant's GPUs of the execution are, so a tenant never
        sees the hosts of another tenant's execution under the same id. ``matchers`` narrow it
        further (to one entry, for a streamed window).
        """
        return render(self.scoped(series, execution_id, tenant, lambda e: e, *matchers, cluster=cluster))

    def scoped(
        self,
        series: catalog.Series,
        execution_id: str,
        tenant: str | None,
        read: Callable[[Expr], Expr],
        *matchers: Matcher,
        cluster: str | None = None,
    ) -> Expr:
        """``read(selector)`` of one series of the execution, scoped to ``tenant`` as ``selector`` says.

        ``read`` maps a plain selector to what is asked of it (itself, or ``last_over_time`` of it); for
        host series under a tenant, the hosts of the tenant's GPUs are read the same way.
        """
        execution = self.execution(execution_id, cluster)
        per_gpu = series.labels == catalog.GPU_LABELS
        return self.within_tenant(series.select(*execution), per_gpu, execution, tenant, read, matchers)

    def within_tenant(
        self,
        picked: Selector,
        per_gpu: bool,
        execution: tuple[Matcher, ...],
        tenant: str | None,
        read: Callable[[Expr], Expr] = lambda e: e,
        matchers: tuple[Matcher, ...] = (),
    ) -> Expr:
        """``read(picked)`` narrowed by ``matchers``, scoped to ``tenant`` (None: every tenant; "": the GPUs without
        the tenant label, which the matcher ``label=""`` selects): per-GPU series by their tenant label, host series
        to the hosts of the tenant's GPUs of the ``execution`` (its matchers)."""
        if tenant is None:
            return read(picked.where(*matchers))
        scoped = match(self.api.tenant_label, tenant)
        if per_gpu:
            return read(picked.where(scoped, *matchers))
        hosts = aggregate("group", catalog.NODE_LABELS, read(catalog.GPU_PRESENCE.select(*execution, scoped)))
        return read(picked.where(*matchers)).and_(hosts, on(catalog.NODE_LABELS))

    def by_name(
        self,
        level: tuple[str, ...],
        execution_id: str,
        tenant: str | None,
        series: tuple[catalog.Series, ...] = catalog.API_SERIES,
        cluster: str | None = None,
    ) -> str | None:
        """One query for the ``series`` of a level (``catalog.GPU_LABELS`` or ``NODE_LABELS``), by name;
        None when none of them is of that level (nothing to ask)."""
        expr = self.level_query(level, execution_id, tenant, series, cluster)
        return None if expr is None else render(expr)

    def level_query(
        self,
        level: tuple[str, ...],
        execution_id: str,
        tenant: str | None,
        series: tuple[catalog.Series, ...] = catalog.API_SERIES,
        cluster: str | None = None,
    ) -> Expr | None:
        """``by_name``'s query as a tree."""
        names = [s.name for s in series if s.labels == level]
        if not names:
            return None
        execution = self.execution(execution_id, cluster)
        picked = selector("", match("__name__", "|".join(re.escape(n) for n in names), "=~"), *execution)
        return self.within_tenant(picked, level == catalog.GPU_LABELS, execution, tenant)

    async def span(self, execution_id: str, tenant: str | None, cluster: str | None = None) -> Span:
        """First and last sample of the execution's GPU series, and whether it still reports; 404 if none.

        Samples are counted per hour over the lookback (one cheap pass over the data; a
        ``timestamp()`` subquery is far slower), then the first and last hour with samples are
        read whole for the exact times. With a cluster label configured, they are counted per
        cluster: the one that holds the execution is the span's, and an id that several clusters
        hold (within the tenant) is a 409 unless ``cluster`` names one. Asked for every tenant (``tenant``
        None), an id that two tenants hold (in that cluster) is a 409 naming them; GPUs without the tenant label
        are the tenant "" (``within_tenant``), apart from the tenants beside them.
        """
        presence = self.scoped(catalog.GPU_PRESENCE, execution_id, tenant, lambda e: e, cluster=cluster)
        now = time.time()
        lookback = parse_duration_seconds(self.api.lookback)
        bucket = span_bucket(lookback)
        by_tenant = (self.api.tenant_label,) if tenant is None else ()
        counting = self.clusters.partitioned(presence_counts(presence, bucket, by_tenant))
        counts = await self.prometheus.range(render(counting), now - lookback, now, bucket)
        hours = [t for c in counts for t, _ in c["values"]]
        not_found = RequestError(404, f"execution {execution_id!r} not found")
        if not hours:
            raise not_found
        if self.clusters.enabled and cluster is None:
            clusters = sorted({self.clusters.of(c["metric"]) for c in counts})
            if len(clusters) > 1:
                raise ambiguous(execution_id, self.clusters.label, clusters)
            cluster = clusters[0]
            presence = self.scoped(catalog.GPU_PRESENCE, execution_id, tenant, lambda e: e, cluster=cluster)
        # Within its cluster: one id, two tenants' executions would be merged, answering neither. GPUs without the
        # tenant label are one more holder (the tenant ""), not part of whichever tenant holds the id beside them.
        held = (c["metric"] for c in counts if not self.clusters.enabled or self.clusters.of(c["metric"]) == cluster)
        tenants = sorted({metric.get(self.api.tenant_label, "") for metric in held})
        if len(tenants) > 1:
            raise held_by_tenants(execution_id, self.api.tenant_label, tenants)
        samples = render(presence.range(seconds(bucket)))
        first = await self.prometheus.instant(samples, at=min(hours))
        last = await self.prometheus.instant(samples, at=max(hours))
        firsts = [t for r in first for t, _ in r["values"]]
        lasts = [t for r in last for t, _ in r["values"]]
        if not firsts or not lasts:  # its samples left the retention between the queries
            raise not_found
        end = max(lasts)
        # Within Prometheus' lookback: it reports.
        return Span(min(firsts), end, now - end < LOOKBACK_SECONDS, cluster)

    async def window(self, execution_id: str, params: Params, tenant: str | None) -> tuple[Params, Window]:
        """The grid a request for ``execution_id`` (already checked) is answered on (its span read from Prometheus),
        and ``params`` naming the cluster that holds the execution."""
        span = await self.cached_span(execution_id, tenant, params.cluster)
        return replace(params, cluster=span.cluster), resolve_window(params, span, self.api.max_points, time.time())

    async def cached_span(self, execution_id: str, tenant: str | None, cluster: str | None = None) -> Span:
        """``span``, kept SPAN_CACHE_SECONDS for an execution that has finished: its span does not change
        (unless its id is reused, which the expiry bounds). Running executions are always read anew."""
        key, now = (execution_id, tenant, cluster), time.monotonic()
        kept = self.finished.get(key)
        if kept is not None and kept[1] > now:
            self.finished.move_to_end(key)
            return kept[0]
        span = await self.span(execution_id, tenant, cluster)
        if not span.running:
            self.finished[key] = (span, now + SPAN_CACHE_SECONDS)
            self.finished.move_to_end(key)
            while len(self.finished) > SPAN_CACHE_ENTRIES:
                self.finished.popitem(last=False)
        return span

    async def request_window(
        self,
        execution_id: str,
        start: str | None,
        end: str | None,
        step: str | None,
        tenant: str | None,
        series: str | None = None,
        cluster: str | None = None,
    ) -> tuple[Params, Window]:
        """A request's id and parameters checked, and the window they ask for (400s name what is wrong);
        the parameters name the cluster that holds the execution (``Params.cluster``)."""
        check_execution_id(execution_id, self.id_pattern)
        params = parse_params(start, end, step, series, cluster, self.clusters)
        return await self.window(execution_id, params, tenant)

    async def answers(
        self,
        execution_id: str,
        window: Window,
        tenant: str | None,
        series: tuple[catalog.Series, ...] = catalog.API_SERIES,
        cluster: str | None = None,
    ) -> list[list[dict[str, Any]]]:
        """Prometheus' answers for the window: one range query per level (GPU, host) with any of ``series``
        and chunk, in order; of the execution in ``cluster`` (None: no cluster label)."""
        limit = asyncio.Semaphore(CONCURRENCY)

        async def chunk(query: str, chunk_start: float, chunk_end: float) -> list[dict[str, Any]]:
            async with limit:
                return await self.prometheus.range(query, chunk_start, chunk_end, window.step)

        # One range query per level (GPU, host) and chunk, the series picked by name: a round trip per
        # series cost more than the data. Chunks come back in order, so values stay sorted.
        levels = (catalog.GPU_LABELS, catalog.NODE_LABELS)
        asked = (self.by_name(level, execution_id, tenant, series, cluster) for level in levels)
        queries = [q for q in asked if q is not None]
        answers = await asyncio.gather(*(chunk(q, a, b) for q in queries for a, b in window.chunks(CHUNK_POINTS)))
        # What reads them files each item under its series' name: an item without one of the names asked for (a
        # compatible API or a proxy that drops or rewrites __name__) is Prometheus' fault, a 502, not a KeyError.
        names = {s.name for s in series}
        for result in answers:
            for r in result:
                if (name := r["metric"].get("__name__")) not in names:
                    named = "without a __name__" if name is None else f"named {bounded(name, 80)!r}"
                    raise PrometheusError(
                        502,
                        "Prometheus answered 200 with an unexpected body",
                        self.prometheus.url,
                        f"a series {named}, not one of those asked for",
                    )
        return answers

    async def entries(
        self,
        execution_id: str,
        window: Window,
        tenant: str | None,
        series: tuple[catalog.Series, ...] = catalog.API_SERIES,
        cluster: str | None = None,
    ) -> dict[str, list[dict[str, str]]]:
        """The label sets each of ``series`` may have an entry for in the window, in the document's order.

        One cheap range query per series: ``last_over_time`` at DISCOVERY_STEPS points, each reading
        back to the one before and DISCOVERY_MARGIN_SECONDS more, so it finds every series with a
        sample from before the window's lookback to its end: at least those the range query answers
        (an entry found here that has no point in the window is left out of the document).
        """
        length = window.end - window.start
        every = max(math.ceil(length / DISCOVERY_STEPS), 60)
        reach = seconds(every + DISCOVERY_MARGIN_SECONDS)
        limit = asyncio.Semaphore(CONCURRENCY)

        def last(e: Expr) -> Expr:
            return call("last_over_time", e.range(reach))

        async def found(one: catalog.Series) -> list[dict[str, str]]:
            query = render(self.scoped(one, execution_id, tenant, last, cluster=cluster))
            async with limit:
                result = await self.prometheus.range(query, window.start, window.end + every, every)
            labels = {}
            for r in result:
                entry = {k: v for k, v in r["metric"].items() if k != "__name__"}
                labels[tuple(sorted(entry.items()))] = entry
            return [labels[k] for k in sorted(labels)]

        sets = await asyncio.gather(*(found(s) for s in series))
        return {s.api_name: found_sets for s, found_sets in zip(series, sets, strict=True)}
