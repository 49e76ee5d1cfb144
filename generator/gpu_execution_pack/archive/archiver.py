"""Archive ended executions: find those with samples in a window, and write each one's record.

A record holds the report's document as the report gives it (``report.document.execution_summary``,
scoped to the execution's tenant) and the served series at ``archive.step`` as Prometheus answers
them (every servable series, in base units: the endpoint converts them as it converts Prometheus'
answers). An execution still reporting, or whose last sample is less than ``archive.ended_after``
old, is left for a later pass; one whose record holds the same span is not rewritten.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

from gpu_execution_pack import __version__, catalog
from gpu_execution_pack.archive import batch, spans
from gpu_execution_pack.archive.listing import Found, executions_in
from gpu_execution_pack.archive.store import Record, Store, refused_key
from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.promql import any_of, parse_duration_seconds, render
from gpu_execution_pack.query.execution import CHUNK_POINTS, ExecutionMetrics, Span, resolve_window
from gpu_execution_pack.query.params import MAX_ID_LENGTH, RequestError, Window, parse_params
from gpu_execution_pack.query.prometheus import PrometheusClient
from gpu_execution_pack.report import figures as fig
from gpu_execution_pack.report.document import execution_summary

CONCURRENCY = 4  # executions read from Prometheus at once (each reads with its own queries in parallel)
# Executions whose documents are read together (archive.batch): each batch query holds an expression per
# execution, so a larger batch asks fewer, longer queries.
BATCH = 25


@dataclass
class Tally:
    """What one pass did."""

    archived: int = 0
    unchanged: int = 0  # its record already holds this span
    running: int = 0  # still reporting, or ended less than ended_after ago
    gone: int = 0  # left Prometheus' retention between the listing and the read
    skipped: list[str] = field(default_factory=list)  # why each execution the archive cannot key was left out

    def line(self) -> str:
        return (
            f"{self.archived} archived, {self.unchanged} unchanged, {self.running} still running, "
            f"{self.gone} no longer in Prometheus" + (f", {len(self.skipped)} skipped" if self.skipped else "")
        )


def series_window(cfg: Config, span: Span, step: str) -> tuple[tuple[catalog.Series, ...], Window]:
    """The grid the record's series are kept on: the endpoint's default window at ``step`` (one point for an
    execution shorter than the step)."""
    params = replace(parse_params(None, None, step, None, None, cluster_scope(cfg)), series=catalog.SERVABLE_SERIES)
    try:
        return params.series, resolve_window(params, span, math.inf, time.time())
    except RequestError:  # shorter than one step
        return params.series, Window(span.first, span.first, params.step)


async def kept_answers(
    metrics: ExecutionMetrics,
    execution_id: str,
    window: Window,
    tenant: str | None,
    series: tuple[catalog.Series, ...],
    cluster: str | None,
) -> list[list[dict[str, Any]]]:
    """``metrics.answers``' answers (per level, then chunk) from one range query per chunk: both levels' queries
    joined with ``or`` (a GPU series carries its GPU's labels and a host series none, so neither hides the
    other), the rows parted by name. Prometheus sorts a range query's rows by labels, so each level's come in
    the order its own query gives them."""
    levels = (catalog.GPU_LABELS, catalog.NODE_LABELS)
    asked = [(level, q) for level in levels if (q := metrics.level_query(level, execution_id, tenant, series, cluster))]
    query = render(any_of([q for _, q in asked], stacked=False))
    gpu_names = {s.name for s in series if s.labels == catalog.GPU_LABELS}
    chunks = await asyncio.gather(
        *(metrics.prometheus.range(query, a, b, window.step) for a, b in window.chunks(CHUNK_POINTS))
    )
    return [
        [r for r in rows if (r["metric"].get("__name__") in gpu_names) == (level == catalog.GPU_LABELS)]
        for level, _ in asked
        for rows in chunks
    ]


async def record_of(
    cfg: Config,
    metrics: ExecutionMetrics,
    found: Found,
    span: Span,
    document: dict[str, Any] | None = None,
    batched: bool = False,
) -> Record:
    """The record of an ended execution: the report's document (read here unless given: the batched path's) and
    its series at ``archive.step`` (``batched``: both levels in one query, ``kept_answers``)."""
    # "": the GPUs without the tenant label only, as `report --tenant ''` reads them; a tenant's execution of the same
    # id (Kubernetes beside bare metal) is its own record, not part of this one.
    tenant = found.tenant
    cluster = found.cluster or None
    if document is None:
        document = await execution_summary(cfg, metrics.prometheus, found.execution_id, tenant=tenant, cluster=cluster)
    series, window = series_window(cfg, span, cfg.archive.step)
    # Per execution even when batched: a range query over a batch's covering grid evaluates every step for
    # every execution's series, costlier than each execution's own short grid where runs are sparse.
    if batched:
        answers = await kept_answers(metrics, found.execution_id, window, tenant, series, span.cluster)
    else:
        answers = await metrics.answers(found.execution_id, window, tenant, series, span.cluster)
    kept = {
        "start": window.start,
        "end": window.end,
        "step": cfg.archive.step,
        "series": [s.name for s in series],
        "answers": answers,
    }
    return Record(
        found.cluster,
        found.tenant,
        found.execution_id,
        span.first,
        span.last,
        window.step,
        __version__,
        document,
        kept,
    )


async def ended_span(cfg: Config, store: Store, found: Found, span: Span | None, tally: Tally) -> Span | None:
    """``span`` (None: not found) if the execution has ended and its record does not hold it yet; None (counted)
    otherwise."""
    if span is None:
        tally.gone += 1
        return None
    if span.running or time.time() - span.last < parse_duration_seconds(cfg.archive.ended_after):
        tally.running += 1
        return None
    kept_end = await asyncio.to_thread(store.end_of, found.cluster, found.tenant, found.execution_id, span.first)
    if kept_end is not None and abs(kept_end - span.last) < 1e-3:
        tally.unchanged += 1
        return None
    return span


async def write(
    cfg: Config,
    metrics: ExecutionMetrics,
    store: Store,
    ended: tuple[Found, Span],
    document: dict[str, Any] | None,
    tally: Tally,
) -> None:
    """Write one ended execution's record (its document read here unless given)."""
    found, span = ended
    try:
        record = await record_of(cfg, metrics, found, span, document, batched=document is not None)
    except RequestError as err:
        if err.status != 404:
            raise
        tally.gone += 1
        return
    await asyncio.to_thread(store.put, record)
    tally.archived += 1


def follow_window(cfg: Config, since_seconds: float, watermark: float | None, now: float) -> float:
    """The seconds a ``--follow`` pass at ``now`` lists executions over: ``since_seconds`` on the first pass, then
    only the time after ``watermark`` (``watermark_after`` of the last complete pass), at most ``since_seconds``.

    Every execution whose last sample is after the watermark has a sample in that window, so it is listed: one
    that ended since, one still running, and one that reappeared (its record is updated, its span having moved).
    One that ended before the watermark was archived by that pass, and is neither listed nor read again."""
    if watermark is None:
        return since_seconds
    return min(since_seconds, max(now - watermark, 1.0))


def watermark_after(cfg: Config, at: float) -> float:
    """The watermark a complete pass at ``at`` leaves: every execution whose last sample is at or before it had
    ended (``archive.ended_after``) and was archived; a later one was left for the next pass."""
    return at - parse_duration_seconds(cfg.archive.ended_after)


async def archive_window(
    cfg: Config,
    prometheus: PrometheusClient,
    store: Store,
    window_seconds: float,
    at: float | None = None,
    batch_size: int = BATCH,
) -> Tally:
    """One pass: every ended execution with samples in the ``window_seconds`` before ``at`` (default: now).

    The documents are read ``batch_size`` executions at a time (``archive.batch``); 1: each on its own, as the
    report reads it (the records are the same: ``tests/test_archive.py`` compares them)."""
    now = time.time() if at is None else at
    metrics = ExecutionMetrics(cfg, prometheus)
    tally = Tally()
    found = []
    for f in await executions_in(cfg, prometheus, window_seconds, now):
        # A key longer than the archive's columns, or an id longer than the endpoint and report read, is left out
        # before any work, with why (the same on both stores).
        if reason := refused_key(f.cluster, f.tenant, f.execution_id, MAX_ID_LENGTH):
            tally.skipped.append(reason)
        else:
            found.append(f)
    limit = asyncio.Semaphore(CONCURRENCY)
    ended: list[tuple[Found, Span]] = []

    # Batched: the spans in a few queries per hour of the window; else each on its own, as the report reads it.
    read = await spans.spans(metrics, found) if batch_size > 1 else None

    async def check(f: Found) -> None:
        async with limit:
            span = read[f] if read is not None else await spans.ended_or_none(metrics, f)
            if (span := await ended_span(cfg, store, f, span, tally)) is not None:
                ended.append((f, span))

    await asyncio.gather(*(check(f) for f in found))

    async def one(pair: tuple[Found, Span], document: dict[str, Any] | None) -> None:
        async with limit:
            await write(cfg, metrics, store, pair, document, tally)

    if batch_size <= 1:
        await asyncio.gather(*(one(pair, None) for pair in sorted(ended)))
        return tally
    known = await fig.intervals(cfg, prometheus)
    ended_spans = dict(ended)
    items = [batch.item(cfg, f, span, time.time()) for f, span in ended]
    for group in batch.batches(items, batch_size):  # one batch at a time: each asks its queries at once
        documents = await batch.summaries(cfg, prometheus, known, group, limit)
        tally.gone += sum(1 for document in documents.values() if document is None)
        await asyncio.gather(*(one((f, ended_spans[f]), d) for f, d in documents.items() if d is not None))
    return tally
