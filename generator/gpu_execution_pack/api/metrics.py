"""One execution's 12 API series from the recorded series: the implementation behind the endpoint and ``query``.

The contract is domain-notes section 1: series under their API names, in the API's units, one
entry per GPU (GPU series) or per host (system series), over ``start``..``end`` at ``step``.
Prometheus answers at most 11,000 points per series per query, so long ranges are fetched in
chunks on one grid (``start + k * step``) and stitched, which leaves no gap and no duplicate.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpu_execution_pack.api.prometheus import PrometheusClient
from gpu_execution_pack.config import Config
from gpu_execution_pack.promql import aggregate, match, on, parse_duration_seconds, render
from gpu_execution_pack.rules import catalog

MAX_POINTS_PER_QUERY = 11_000  # Prometheus refuses more per series
CHUNK_POINTS = 10_000
CONCURRENCY = 8  # queries in flight per request
LOOKBACK_SECONDS = 300  # Prometheus' default lookback (staleness) window


class RequestError(Exception):
    """The request cannot be answered: ``status`` is the HTTP status, the message says why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Window:
    start: float  # unix seconds, on the step grid
    end: float
    step: float

    @property
    def points(self) -> int:
        return int((self.end - self.start) // self.step) + 1

    def chunks(self, points: int = CHUNK_POINTS) -> list[tuple[float, float]]:
        """[start, end] pairs covering the grid, each at most ``points`` points, none overlapping."""
        out, k = [], 0
        while k < self.points:
            last = min(k + points, self.points) - 1
            out.append((self.start + k * self.step, self.start + last * self.step))
            k = last + 1
        return out


def parse_time(name: str, value: str | None) -> float | None:
    """ISO 8601 (offset optional, ``Z`` accepted; naive times are UTC) to unix seconds; None when not given.

    An empty value is refused rather than read as "not given", and only ASCII digits are read:
    Python's parser would take other scripts' digits, which no client means.
    """
    if value is None:
        return None
    refused = RequestError(400, f"{name}: {value!r} is not an ISO 8601 time such as 2026-12-02T10:00:00Z")
    if not value.isascii() or not value.strip():
        raise refused
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise refused from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def parse_step(value: str | None) -> float:
    step = value or "15s"
    try:
        seconds = parse_duration_seconds(step)
    except ValueError:
        raise RequestError(400, f"step: {step!r} is not a Prometheus duration such as 15s, 1m or 1h") from None
    if seconds < 1:
        raise RequestError(400, f"step: {step!r} is under 1s; accepted: 1s or more")
    return seconds


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


class ExecutionMetrics:
    """Answers metrics requests for one configuration, through one Prometheus client."""

    def __init__(self, cfg: Config, prometheus: PrometheusClient):
        self.cfg = cfg
        self.api = cfg.api
        self.prometheus = prometheus
        self.id_pattern = re.compile(cfg.api.execution_id_pattern)

    def check_id(self, execution_id: str) -> None:
        """400 unless ``execution_id`` matches api.execution_id_pattern (in full: `$` would allow a final \\n)."""
        if len(execution_id) > 256 or not self.id_pattern.fullmatch(execution_id):
            raise RequestError(400, f"execution_id: not accepted; it must match {self.api.execution_id_pattern}")

    def selector(self, series: catalog.Series, execution_id: str, tenant: str | None) -> str:
        """The query for one series of the execution, scoped to ``tenant`` (None: every tenant).

        Per-GPU series carry the tenant label. Host series do not (a host is shared): they are
        kept only for the hosts where this tenant's GPUs of the execution are, so a tenant never
        sees the hosts of another tenant's execution under the same id.
        """
        execution = match(catalog.EXECUTION_LABEL, execution_id)
        if tenant is None:
            return render(series.select(execution))
        scoped = match(self.api.tenant_label, tenant)
        if series.labels == catalog.GPU_LABELS:
            return render(series.select(execution, scoped))
        hosts = aggregate("group", catalog.NODE_LABELS, catalog.GPU_PRESENCE.select(execution, scoped))
        return render(series.select(execution).and_(hosts, on(catalog.NODE_LABELS)))

    async def span(self, execution_id: str, tenant: str | None) -> tuple[float, float, bool]:
        """First and last sample of the execution's GPU series, and whether it still reports.

        Samples are counted per hour over the lookback (one cheap pass over the data; a
        ``timestamp()`` subquery is far slower), then the first and last hour with samples are
        read whole for the exact times.
        """
        presence = self.selector(catalog.GPU_PRESENCE, execution_id, tenant)
        now = time.time()
        lookback = parse_duration_seconds(self.api.lookback)
        bucket = max(3600, math.ceil(lookback / CHUNK_POINTS))
        counts = await self.prometheus.range(
            f"sum(count_over_time({presence}[{bucket}s]))", now - lookback, now, bucket
        )
        if not counts or not counts[0]["values"]:
            raise RequestError(404, f"execution {execution_id!r} not found")
        hours = [float(t) for t, _ in counts[0]["values"]]
        first = await self.prometheus.instant(f"{presence}[{bucket}s]", at=min(hours))
        last = await self.prometheus.instant(f"{presence}[{bucket}s]", at=max(hours))
        start = min(float(v[0]) for r in first for v in r["values"])
        end = max(float(v[0]) for r in last for v in r["values"])
        return start, end, now - end < LOOKBACK_SECONDS  # still within Prometheus' lookback: it reports

    async def fetch(
        self,
        execution_id: str,
        start: str | None = None,
        end: str | None = None,
        step: str | None = None,
        tenant: str | None = None,
    ) -> dict[str, Any]:
        """The response document. ``tenant`` None means every tenant (an unscoped key)."""
        self.check_id(execution_id)
        step_s = parse_step(step)
        start_s, end_s = parse_time("start", start), parse_time("end", end)
        if start_s is not None and end_s is not None and end_s < start_s:
            raise RequestError(400, "end: before start")
        first, last, running = await self.span(execution_id, tenant)
        start_s = first if start_s is None else start_s
        end_s = (time.time() if running else last) if end_s is None else end_s
        if end_s < start_s:
            raise RequestError(400, "end: before start (the execution's first sample)")
        if start is None:  # the first point of the step grid at or after the first sample carries data
            start_s = math.ceil(start_s / step_s) * step_s
        window = Window(start_s, start_s + ((end_s - start_s) // step_s) * step_s, step_s)
        if window.points > self.api.max_points:
            raise RequestError(
                400, f"step: {window.points} points per series; the most accepted is {int(self.api.max_points)}"
            )
        limit = asyncio.Semaphore(CONCURRENCY)

        async def one(series: catalog.Series) -> tuple[str, dict[str, Any]]:
            entries: dict[tuple, dict[str, Any]] = {}
            for chunk_start, chunk_end in window.chunks():
                async with limit:
                    result = await self.prometheus.range(
                        self.selector(series, execution_id, tenant), chunk_start, chunk_end, step_s
                    )
                for r in result:
                    labels = {k: v for k, v in r["metric"].items() if k != "__name__"}
                    entry = entries.setdefault(tuple(sorted(labels.items())), {"labels": labels, "values": []})
                    entry["values"] += [[float(t), api_value(series, v)] for t, v in r["values"]]
            return series.api_name, {
                "unit": series.api_unit,
                "entries": [entries[k] for k in sorted(entries)],
            }

        series = dict(await asyncio.gather(*(one(s) for s in catalog.API_SERIES)))
        return {
            "executionId": execution_id,
            "start": iso(window.start),
            "end": iso(window.end),
            "step": step or "15s",
            "series": series,
        }


def api_value(series: catalog.Series, sample: str) -> float | None:
    """A Prometheus sample value in the API's unit; NaN and infinities (which JSON cannot carry) as null."""
    value = float(sample)
    return series.to_api(value) if math.isfinite(value) else None
