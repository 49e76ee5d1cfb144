"""The report's documents of many ended executions at once: the archiver's batched path.

``report.document.execution_summary`` asks some 40 instant queries per execution, each over the execution's
span and at its last sample. Here every such query is asked once for a batch of executions: each execution's
own expression, evaluated at its own time with the ``@`` modifier (``promql.pinned``), joined with ``or``, so
Prometheus computes for each execution exactly what it would have for that execution alone, and the answer is
split per execution in Python by its labels. The raw samples the time figures are counted from (matrices,
which ``or`` cannot join) are read once per batch over a window covering every execution's span, and each
execution keeps the samples its own range holds: the samples up to its last, as many as
``count_over_time`` over its own range counts (asked in the batch like the figures), so the range's open or
closed start is Prometheus' own. The heavy phase's start is found per execution (a range query on the
execution's own grid, as the report finds it), and every GPU's mean utilisation in it is asked once for the
batch, pinned like the figures; the co-holders of a shared GPU and the shares of a GPU instance are asked per
execution. The figures then go through the report's own readers and document. The spans come from
``archive.spans``.
``tests/test_archive.py`` compares the records of both paths on the scenario library.
"""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from gpu_execution_pack.archive.listing import Found
from gpu_execution_pack.config import Config
from gpu_execution_pack.promql import Expr, any_of, call, parse_duration_seconds, pinned, render
from gpu_execution_pack.query.execution import Span
from gpu_execution_pack.query.prometheus import PrometheusClient
from gpu_execution_pack.report import document
from gpu_execution_pack.report import figures as fig

ALERTS = "alerts"  # the name of the firing alerts' samples among a batch's answers (as in ``fig.collect``)
Rows = list[dict[str, Any]]
# A batch's queries in flight at once: Prometheus answers no faster with more on two cores, and the HTTP
# client's pool does work per request for every connection it holds (55 at once cost more than they saved).
ASKED_AT_ONCE = 8


@dataclass(frozen=True)
class Item:
    """One ended execution of a batch, read as ``execution_summary`` reads it over its whole span."""

    found: Found
    span: Span
    alerts_after: float  # alerts are read this far beyond the last sample (``execution_summary``'s ``after``)

    @property
    def tenant(self) -> str:
        return self.found.tenant  # "": the GPUs without the tenant label, apart from any tenant's of the same id

    @property
    def key(self) -> fig.Key:
        return (self.span.cluster or "", self.found.execution_id)

    def scope(self, cfg: Config, named: Iterable[str] = ()) -> fig.Scope:
        own = None if named else self.found.execution_id
        return fig.Scope(cfg, own, self.tenant, named, cluster=self.span.cluster)

    @property
    def window(self) -> fig.Window:
        return fig.Window(fig.span_range(self.span.last - self.span.first))

    @property
    def alerts_window(self) -> str:
        return fig.span_range(self.span.last - self.span.first + self.alerts_after)


def item(cfg: Config, found: Found, span: Span, now: float) -> Item:
    """``found`` with its span, and how far beyond it its alerts are read (as ``execution_summary`` says)."""
    after = min(parse_duration_seconds(cfg.alerts.telemetry_missing.window), now - span.last)
    return Item(found, span, max(after, 0.0))


def batches(items: list[Item], size: int) -> list[list[Item]]:
    """``items`` in batches of at most ``size``, by cluster and tenant (a batch reads its raw samples once per
    cluster and tenant: ``ask``), then by end, with an execution id of a cluster at most once in a batch: two
    tenants' executions of one id share their host series, which ``or`` would keep for one only."""
    out: list[list[Item]] = []
    held: set[fig.Key] = set()
    for one in sorted(items, key=lambda i: (i.found.cluster, i.found.tenant, i.span.last, i.found)):
        if not out or len(out[-1]) >= size or one.key in held:
            out.append([])
            held = set()
        out[-1].append(one)
        held.add(one.key)
    return out


def vectors(cfg: Config, one: Item) -> dict[str, Expr]:
    """The execution's instant queries of ``fig.collect``, by name, each pinned at its last sample."""
    scope, w = one.scope(cfg), one.window
    queries = {
        **fig.gpu_queries(cfg, scope, w),
        **fig.presence_queries(scope, w),
        **fig.host_queries(scope, w),
        **fig.execution_queries(scope, w),
    }
    # How many raw samples each matrix holds over the execution's own range: ``split`` keeps that many.
    for name, expr in matrices(cfg, one).items():
        queries[f"count:{name}"] = call("count_over_time", expr)
    at = {name: one.span.last + (one.alerts_after if name == f"count:{ALERTS}" else 0.0) for name in queries}
    return {name: pinned(scope.clusters.partitioned(expr), at[name]) for name, expr in queries.items()}


def matrices(cfg: Config, one: Item, named: Iterable[str] = ()) -> dict[str, Expr]:
    """The raw samples ``fig.collect`` reads (``fig.timed_queries`` and the alerts), by name: over the execution's
    own range, or (``named``) the executions of a batch, ranges to be set by the caller."""
    scope, w = one.scope(cfg, named), one.window
    return {**fig.timed_queries(scope, w), ALERTS: fig.alerts_query(scope, one.alerts_window)}


async def ask(cfg: Config, prometheus: PrometheusClient, batch: list[Item]) -> dict[fig.Key, dict[str, Rows]]:
    """Every answer ``fig.collect`` reads, for each execution of ``batch``: by execution, then by query name."""
    pieces = [vectors(cfg, one) for one in batch]
    at = max(one.span.last + one.alerts_after for one in batch)
    names = list(pieces[0])
    joined = [render(any_of([p[name] for p in pieces], stacked=False)) for name in names]
    groups: dict[tuple[str | None, str | None], list[Item]] = defaultdict(list)
    for one in batch:  # a matrix is read per tenant and cluster: its scope names them once
        groups[(one.span.cluster, one.tenant)].append(one)
    wide: list[tuple[str, str]] = []
    for group in groups.values():
        start = min(one.span.first for one in group)
        covered = {
            name: (expr, max(one.span.last + (one.alerts_after if name == ALERTS else 0.0) for one in group))
            for name, expr in matrices(cfg, group[0], [one.found.execution_id for one in group]).items()
        }
        for name, (expr, end) in covered.items():
            ranged = widened(expr, fig.span_range(end - start + 1))
            wide.append((name, render(pinned(group[0].scope(cfg).clusters.partitioned(ranged), end))))
    limit = asyncio.Semaphore(ASKED_AT_ONCE)

    async def asked(query: str) -> Rows:
        async with limit:
            return await prometheus.instant(query, at=at)

    answers = await asyncio.gather(*map(asked, [*joined, *(q for _, q in wide)]))
    vector = dict(zip(names, answers[: len(joined)], strict=True))
    return split(cfg, batch, vector, list(zip(wide, answers[len(joined) :], strict=True)))


async def held_by_other_tenants(
    cfg: Config, prometheus: PrometheusClient, batch: list[Item], limit: asyncio.Semaphore
) -> dict[fig.Key, frozenset[str]]:
    """Each execution's id where another tenant held it too within its own span (``fig.held_by_other_tenants``), as
    ``execution_summary`` asks it for ``Scope.own_alert``; only of executions of one tenant (not every tenant)."""

    async def held(one: Item) -> frozenset[str]:
        async with limit:
            return await fig.held_by_other_tenants(
                prometheus, one.scope(cfg), one.span.last - one.span.first, one.span.last
            )

    return dict(zip([one.key for one in batch], await asyncio.gather(*map(held, batch)), strict=True))


def widened(expr: Expr, window: str) -> Expr:
    """A matrix query (a range selector) over ``window`` instead of its own range."""
    return replace(expr, window=window)


def split(
    cfg: Config, batch: list[Item], vector: dict[str, Rows], wide: list[tuple[tuple[str, str], Rows]]
) -> dict[fig.Key, dict[str, Rows]]:
    """The batch's answers per execution: the vectors by the execution's labels; the matrices' samples up to its
    own end, the last as many as its own range holds (``count:<name>``)."""
    by_key = {one.key: one for one in batch}
    scope = batch[0].scope(cfg)
    out: dict[fig.Key, dict[str, Rows]] = {key: defaultdict(list) for key in by_key}
    for name, rows in vector.items():
        for r in rows:
            if (key := scope.key(r["metric"])) in out:
                out[key][name].append(r)
    counts = {
        (key, name.removeprefix("count:"), labels_of(r["metric"])): int(fig.value_of(r))
        for key, answers in out.items()
        for name, rows in answers.items()
        if name.startswith("count:")
        for r in rows
    }
    for (name, _), rows in wide:
        for r in rows:
            key = scope.key(r["metric"])
            if key not in by_key:
                continue
            one = by_key[key]
            end = one.span.last + (one.alerts_after if name == ALERTS else 0.0)
            held = counts.get((key, name, labels_of(r["metric"])), 0)
            values = [v for v in r["values"] if v[0] <= end + 1e-9][-held:] if held else []
            if values:
                out[key][name].append({"metric": r["metric"], "values": values})
    return out


def labels_of(metric: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """A series' labels but its name (``count_over_time`` drops the name; a range selector keeps it)."""
    return tuple(sorted((k, v) for k, v in metric.items() if k != "__name__"))


async def summaries(
    cfg: Config, prometheus: PrometheusClient, known: fig.Intervals, batch: list[Item], limit: asyncio.Semaphore
) -> dict[Found, dict[str, Any] | None]:
    """The report's document of each execution of ``batch`` as ``execution_summary`` gives it over its whole span
    (None: it left Prometheus between the listing and the read); ``limit``: the executions read at once for
    what is asked per execution."""
    answers, shared = await asyncio.gather(
        ask(cfg, prometheus, batch), held_by_other_tenants(cfg, prometheus, batch, limit)
    )
    figures: dict[fig.Key, fig.ExecutionFigures] = {}
    for one in batch:
        ends = (math.inf, one.span.last + one.alerts_after)  # up to its last sample, which counts (fig.collect)
        scope = one.scope(cfg)
        scope.shared_ids = shared[one.key]
        if (found := figures_of(cfg, scope, answers[one.key], known, ends).get(one.key)) is not None:
            figures[one.key] = found
    read = [one for one in batch if one.key in figures]
    await heavy_phases(cfg, prometheus, read, figures, limit)

    async def one_document(one: Item) -> dict[str, Any]:
        first, last, f, scope = one.span.first, one.span.last, figures[one.key], one.scope(cfg)
        async with limit:  # two small queries, each filling its own fields of f's GPUs
            await asyncio.gather(
                fig.co_holders(prometheus, scope, last - first, last, f),
                fig.instance_shares(prometheus, scope, last - first, last, [f]),
            )
        notes = (known.note,) if known.note else ()
        return document.summary(cfg, f, first, last, one.span.running, last - first, notes)

    documents = dict(zip([one.key for one in read], await asyncio.gather(*map(one_document, read)), strict=True))
    return {one.found: documents.get(one.key) for one in batch}


async def heavy_phases(
    cfg: Config,
    prometheus: PrometheusClient,
    batch: list[Item],
    figures: dict[fig.Key, fig.ExecutionFigures],
    limit: asyncio.Semaphore,
) -> None:
    """Each execution's heavy phase into its ``figures``, as ``fig.heavy_phase`` finds it: its start per execution
    (a range query on the execution's own grid), then every GPU's mean utilisation in it in one query for the
    batch, each execution's pinned at its own end."""

    async def start_of(one: Item) -> float | None:
        first, last = one.span.first, one.span.last
        step = max(figures[one.key].gpu_interval, (last - first) / document.MAX_HEAVY_PHASE_POINTS)
        async with limit:
            return await fig.heavy_phase_start(cfg, prometheus, one.scope(cfg), first, last, step)

    starts = await asyncio.gather(*map(start_of, batch))
    heavy = [(one, begin) for one, begin in zip(batch, starts, strict=True) if begin is not None]
    rows: Rows = []
    if heavy:
        means = [pinned(one.scope(cfg).clusters.partitioned(fig.heavy_phase_mean(one.scope(cfg), begin, one.span.last)),
                        one.span.last) for one, begin in heavy]  # fmt: skip
        rows = await prometheus.instant(render(any_of(means, stacked=False)), at=max(one.span.last for one, _ in heavy))
    for one, begin in zip(batch, starts, strict=True):
        scope = one.scope(cfg)
        mean = {fig.key_of(r["metric"], scope.gpu_key): float(r["values"][0][1]) for r in rows
                if scope.key(r["metric"]) == one.key}  # fmt: skip
        figures[one.key].heavy_phase_start = begin
        for g in figures[one.key].gpus:
            g.util_heavy_mean = mean.get(fig.key_of({**g.labels}, scope.gpu_key))


def figures_of(
    cfg: Config, scope: fig.Scope, results: dict[str, Rows], known: fig.Intervals, ends: tuple[float, float]
) -> dict[fig.Key, fig.ExecutionFigures]:
    """``fig.collect``'s reading of its answers, for one execution's."""
    gpu = fig.gpu_queries(cfg, scope, fig.Window("1s"))  # the names only
    host = fig.host_queries(scope, fig.Window("1s"))
    executions = fig.read_gpus(results, gpu, known.pair, scope)
    fig.read_timed(results, executions, scope, cfg, ends)
    fig.read_hosts(results, host, executions, scope)
    fig.read_executions(results, executions, scope)
    return dict(sorted(executions.items()))
