"""The execution report and the fleet ranking as JSON documents: the one implementation behind
``gpu-execution-pack report`` and the summary endpoints.

Keys are camelCase like the metrics endpoint's; figures are in the API's units (percent, bytes,
watts, seconds, kWh). docs/report.md describes every key, verdict and threshold.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from typing import Any

from gpu_execution_pack import catalog
from gpu_execution_pack.config import CLUSTER, Config, cluster_scope
from gpu_execution_pack.promql import parse_duration_seconds
from gpu_execution_pack.query.execution import ExecutionMetrics
from gpu_execution_pack.query.params import RequestError, check_execution_id, iso, parse_cluster, parse_time
from gpu_execution_pack.query.params import shown as echoed
from gpu_execution_pack.query.prometheus import PrometheusClient
from gpu_execution_pack.report import figures as fig
from gpu_execution_pack.report.verdicts import judge

JOULES_PER_KWH = 3_600_000
MAX_HEAVY_PHASE_POINTS = 10_000  # points of the one range query that finds the heavy phase
MAX_FLEET_TOP = 1000


def pct(ratio: float | None) -> float | None:
    return None if ratio is None else round(ratio * 100, 2)


def rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


def whole(value: float | None) -> int | None:
    """A count, bytes or seconds as the document gives them: a whole number (None stays None, and so does what no
    float holds whole: 1e308 from a compatible API's odd answer rounded to an integer orjson refuses, a 500)."""
    return None if value is None or not abs(value) <= fig.MAX_WHOLE else round(value)


def when(ts: float, up: bool = False) -> str:
    """A time as the report gives it: ISO 8601 in UTC to the second, rounded down (``up``: up, so that
    a span's end still covers its last sample). Nobody reads the milliseconds."""
    return iso(math.ceil(ts) if up else math.floor(ts))


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def energy(f: fig.ExecutionFigures) -> tuple[float | None, str]:
    """Joules over the span, and which source gave them: the energy counter, the integral of board power, or
    both (per GPU). Each GPU or MIG instance counts in the execution's share of it (``GpuFigures.power_share``):
    the instances of one GPU repeat its counter and power, each is given its share of the GPU's."""
    per_gpu: list[tuple[float, str]] = []
    for g in f.gpus:
        if (joules := f.energy_joules(g)) is not None:
            per_gpu.append((joules, "energy_counter"))
        elif (integral := g.attributed_power_integral) is not None:
            per_gpu.append((integral, "power_integral"))
    if not per_gpu:
        return None, "none"
    sources = {source for _, source in per_gpu}
    return sum(j for j, _ in per_gpu), sources.pop() if len(sources) == 1 else "mixed"


def cost(cfg: Config, f: fig.ExecutionFigures) -> float:
    """GPU-hours billed at each model's price (dashboards.price_per_gpu_hour), a shared GPU's in the share."""
    d = cfg.dashboards
    prices = d.model_prices()
    return sum(
        g.billed_seconds / 3600 * prices.get(g.labels.get(catalog.MODEL_LABEL, ""), d.default_price_per_gpu_hour)
        for g in f.gpus
    )


def cost_block(cfg: Config, f: fig.ExecutionFigures, joules: float | None) -> dict[str, Any]:
    billed, worked = f.billed_seconds / 3600, f.worked_seconds / 3600
    r = cfg.report
    block: dict[str, Any] = {
        "gpuHoursBilled": rounded(billed, 4),
        "gpuHoursWorked": rounded(worked, 4),
        "gpuHoursWasted": rounded(billed - worked, 4),
        "efficiencyPercent": pct(worked / billed) if billed else None,
        "currency": cfg.dashboards.currency,
        "cost": rounded(cost(cfg, f), 2),
    }
    kwh = None if joules is None else joules / JOULES_PER_KWH
    if r.energy_price_per_kwh and kwh is not None:
        block["energyCost"] = rounded(kwh * r.energy_price_per_kwh, 2)
    if r.grams_co2e_per_kwh and kwh is not None:
        block["co2eKg"] = rounded(kwh * r.grams_co2e_per_kwh / 1000, 3)
    return block


def activity(engine: float | None, tensor: float | None, dram: float | None) -> dict[str, float]:
    """The activity figures as percentages, each left out where its series is absent."""
    named = {
        "graphicsEngineActivePercent": engine,
        "tensorActivePercent": tensor,
        "dramActivePercent": dram,
    }
    return {key: value for key, ratio in named.items() if (value := pct(ratio)) is not None}


def gpu_entry(f: fig.ExecutionFigures, g: fig.GpuFigures) -> dict[str, Any]:
    labels = g.labels
    joules = f.energy_joules(g)
    joules = g.attributed_power_integral if joules is None else joules
    return {
        "hostname": labels.get(catalog.HOST_LABEL, ""),
        "gpu": labels.get("gpu", ""),
        "uuid": labels.get("UUID", ""),
        "model": labels.get(catalog.MODEL_LABEL, ""),
        "migInstance": labels.get("GPU_I_ID", ""),
        "migProfile": labels.get("GPU_I_PROFILE", ""),
        "utilizationPercent": pct(g.util_mean),
        **activity(g.engine_mean, g.tensor_mean, g.dram_mean),
        "heavyPhaseUtilizationPercent": pct(g.util_heavy_mean),
        "memoryPeakBytes": whole(g.mem_peak_bytes),
        "memoryPeakPercent": pct(g.mem_peak_ratio),
        "secondsAboveOomThreshold": whole(g.oom_seconds),
        "powerMeanWatt": rounded(g.power_mean, 2),
        "powerLimitMeanWatt": rounded(g.power_limit_mean, 2),
        "powerThrottledSeconds": whole(g.power_throttled_seconds),
        "thermalThrottledSeconds": whole(g.thermal_throttled_seconds),
        "temperatureMaxCelsius": rounded(g.temp_max, 1),
        "xidErrors": [xid] if g.xid_changes > 0 and (xid := whole(g.xid_last) or 0) > 0 else [],
        "energyKwh": None if joules is None else rounded(joules / JOULES_PER_KWH, 4),
        "gpuHoursBilled": rounded(g.billed_seconds / 3600, 4),
        "gpuHoursWorked": rounded(g.worked / 3600, 4),
    }


def gpus_block(f: fig.ExecutionFigures) -> dict[str, Any]:
    """The ``gpus`` section: how many, which models and MIG profiles, and each device's figures."""
    return {
        "count": len(f.gpus),
        "models": sorted({g.labels.get(catalog.MODEL_LABEL, "") for g in f.gpus}),
        "migProfiles": sorted({g.labels["GPU_I_PROFILE"] for g in f.gpus if g.labels.get("GPU_I_PROFILE")}),
        "devices": [gpu_entry(f, g) for g in f.gpus],
    }


def host_entry(h: fig.HostFigures) -> dict[str, Any]:
    """One host of the ``hosts`` section."""
    return {
        "hostname": h.hostname,
        "cpuMeanPercent": pct(h.cpu_mean),
        "ramPeakBytes": whole(h.ram_peak_bytes),
        "ramPeakPercent": pct(h.ram_peak_ratio),
        "ramTotalBytes": whole(h.ram_total_bytes),
    }


def utilization_block(cfg: Config, f: fig.ExecutionFigures, end: float) -> dict[str, Any]:
    """The ``utilization`` section: over the run, in the heavy phase, the hosts' CPU, and time spent low."""
    utils = [g.util_mean for g in f.gpus if g.util_mean is not None]
    heavy = [g.util_heavy_mean for g in f.gpus if g.util_heavy_mean is not None]
    cpus = [h.cpu_mean for h in f.hosts if h.cpu_mean is not None]

    def over_gpus(ratios: list[float | None]) -> float | None:
        return mean([r for r in ratios if r is not None])

    return {
        "gpuMeanPercent": pct(mean(utils)),
        **activity(
            over_gpus([g.engine_mean for g in f.gpus]),
            over_gpus([g.tensor_mean for g in f.gpus]),
            over_gpus([g.dram_mean for g in f.gpus]),
        ),
        "heavyPhase": {
            "start": None if f.heavy_phase_start is None else when(f.heavy_phase_start),
            "seconds": None if f.heavy_phase_start is None else whole(end - f.heavy_phase_start),
            "gpuMeanPercent": pct(mean(heavy)),
            "memoryShareOfPeak": cfg.report.heavy_phase_memory_share,
        },
        "hostCpuMeanPercent": pct(mean(cpus)),
        "lowUtilizationSeconds": whole(f.low_util_seconds),
    }


def memory_block(cfg: Config, f: fig.ExecutionFigures) -> dict[str, Any]:
    """The ``memory`` section: the GPUs' and hosts' peaks and the time above the OOM threshold."""
    return {
        "gpuPeakBytes": whole(max((g.mem_peak_bytes or 0 for g in f.gpus), default=None)),
        "gpuPeakPercent": pct(max((g.mem_peak_ratio or 0 for g in f.gpus), default=None)),
        "oomThresholdPercent": pct(cfg.alerts.gpu_memory_high.threshold),
        "secondsAboveOomThreshold": whole(max((g.oom_seconds for g in f.gpus), default=0.0)),
        "hostRamPeakBytes": whole(max((h.ram_peak_bytes or 0 for h in f.hosts), default=None)),
        "hostRamPeakPercent": pct(max((h.ram_peak_ratio or 0 for h in f.hosts), default=None)),
    }


def power_block(f: fig.ExecutionFigures, joules: float | None, source: str) -> dict[str, Any]:
    """The ``power`` section: energy and where it came from, power against the limit, throttling, heat."""
    powers = [g.power_mean for g in f.gpus if g.power_mean is not None]
    limits = [g.power_limit_mean for g in f.gpus if g.power_limit_mean is not None]
    ratios = [g.power_mean / g.power_limit_mean for g in f.gpus if g.power_mean and g.power_limit_mean]
    return {
        "energyKwh": None if joules is None else rounded(joules / JOULES_PER_KWH, 4),
        "energySource": source,
        "powerMeanWatt": rounded(mean(powers), 2),
        "powerLimitMeanWatt": rounded(mean(limits), 2),
        "powerToLimitPercent": pct(mean(ratios)),
        "powerThrottledSeconds": whole(max((g.power_throttled_seconds for g in f.gpus), default=0.0)),
        "thermalThrottledSeconds": whole(max((g.thermal_throttled_seconds for g in f.gpus), default=0.0)),
        "temperatureMaxCelsius": rounded(max((g.temp_max or 0 for g in f.gpus), default=None), 1),
    }


def cluster_of(cfg: Config, f: fig.ExecutionFigures) -> dict[str, str]:
    """The ``cluster`` key of an execution's document or row: only where a cluster label is configured."""
    return {CLUSTER: f.cluster} if cluster_scope(cfg).enabled else {}


def summary(
    cfg: Config,
    f: fig.ExecutionFigures,
    start: float,
    end: float,
    running: bool,
    span_seconds: float | None,
    notes: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The report document of one execution's figures."""
    joules, source = energy(f)
    return {
        "executionId": f.execution_id,
        **cluster_of(cfg, f),
        "start": when(start),
        "end": when(end, up=True),
        "durationSeconds": whole(end - start),
        "running": running,
        "gpus": gpus_block(f),
        "hosts": [host_entry(h) for h in f.hosts],
        "utilization": utilization_block(cfg, f, end),
        "memory": memory_block(cfg, f),
        "power": power_block(f, joules, source),
        "cost": cost_block(cfg, f, joules),
        "alerts": [
            {"alertname": x.alertname, "severity": x.severity, "firingSeconds": whole(x.firing_seconds)}
            for x in f.alerts
        ],
        "verdicts": [v.as_json() for v in judge(f, cfg, running=running, span_seconds=span_seconds)],
        "notes": list(notes),
    }


async def execution_summary(
    cfg: Config,
    prometheus: PrometheusClient,
    execution_id: str,
    start: str | None = None,
    end: str | None = None,
    tenant: str | None = None,
    cluster: str | None = None,
) -> dict[str, Any]:
    """The report of one execution over its span (or ``start``..``end``); ``tenant`` None: every tenant;
    ``cluster`` None: the one cluster that holds it (a 409 when several do)."""
    metrics = ExecutionMetrics(cfg, prometheus)
    check_execution_id(execution_id, metrics.id_pattern)
    start_s, end_s = parse_time("start", start), parse_time("end", end)
    if start_s is not None and end_s is not None and end_s < start_s:
        raise RequestError(
            400, f"end: before start ({iso(end_s)} < {iso(start_s)}); accepted: an end at or after start"
        )
    span = await metrics.span(execution_id, tenant, parse_cluster(cluster, cluster_scope(cfg)))
    first, last, running = span.first, span.last, span.running
    start_s = first if start_s is None else max(start_s, first)
    end_s = last if end_s is None else min(end_s, last)
    if end_s < start_s:
        raise RequestError(
            400,
            f"start..end: the execution has no samples between them (it ran {when(first)} to {when(last, up=True)})",
        )
    scope = fig.Scope(cfg, execution_id, tenant, cluster=span.cluster)
    scope.shared_ids = await fig.held_by_other_tenants(prometheus, scope, last - first, last)
    # Alerts about lost telemetry fire after the last sample: read them a telemetry_missing.window on.
    after = 0.0 if running else min(parse_duration_seconds(cfg.alerts.telemetry_missing.window), time.time() - end_s)
    known = await fig.intervals(cfg, prometheus)
    # Up to its last sample, that sample counts the interval before it, as the fleet view counts it (the seconds
    # the rules measured each sample to stand for); only an end inside the span cuts a sample's time short.
    counted_to = end_s if end_s < last else math.inf
    found = await fig.collect(cfg, prometheus, scope, end_s - start_s, end_s, max(after, 0.0), known, counted_to)
    key = (span.cluster or "", execution_id)
    if key not in found:  # the span found it: start..end falls between two of its samples
        raise RequestError(
            400,
            f"start..end: the execution has no samples between them (it ran {when(first)} to {when(last, up=True)}; "
            "a window must hold one of its samples)",
        )
    figures = found[key]
    step = max(figures.gpu_interval, (end_s - start_s) / MAX_HEAVY_PHASE_POINTS)
    figures.heavy_phase_start, heavy = await fig.heavy_phase(cfg, prometheus, scope, start_s, end_s, step)
    for g in figures.gpus:
        g.util_heavy_mean = heavy.get(fig.key_of({**g.labels}, scope.gpu_key))
    await fig.co_holders(prometheus, scope, end_s - start_s, end_s, figures)
    notes = (known.note,) if known.note else ()
    return summary(cfg, figures, start_s, end_s, running and end is None, end_s - start_s, notes)


def fleet_row(cfg: Config, f: fig.ExecutionFigures, waste: fig.Waste) -> dict[str, Any]:
    """One execution's row of the fleet ranking: its GPU time as ranked (``waste``), the rest from its figures."""
    # Ranked on the seconds the rules measured each sample to stand for (``fig.waste_by_execution``); the row's own
    # figures are counted from the samples' timestamps.
    billed, worked = f.billed_seconds / 3600, f.worked_seconds / 3600
    joules, _ = energy(f)
    # Without a span per execution the fleet view judges no gaps; an execution still reporting at the
    # window's end is running (its memory at the end is no crash).
    verdicts = judge(f, cfg, running=f.reporting_at_end, span_seconds=None)
    return {
        "executionId": f.execution_id,
        **cluster_of(cfg, f),
        # The tenant label's value on its GPUs' series (null without one): over every tenant, one id may be several
        # tenants' executions, one row each.
        "tenant": waste.tenant or None,
        "gpus": len(f.gpus),
        "models": sorted({g.labels.get(catalog.MODEL_LABEL, "") for g in f.gpus}),
        "gpuHoursBilled": rounded(billed, 4),
        "gpuHoursWorked": rounded(worked, 4),
        "gpuHoursWasted": rounded(billed - worked, 4),
        "efficiencyPercent": pct(worked / billed) if billed else None,
        "energyKwh": None if joules is None else rounded(joules / JOULES_PER_KWH, 4),
        "verdicts": [v.code for v in verdicts],
    }


TENANT_READS_AT_ONCE = 4  # the fleet view's reads of one tenant's rows at once (``fleet_figures``)


async def fleet_figures(
    cfg: Config,
    prometheus: PrometheusClient,
    scope: fig.Scope,
    shown: list[fig.Waste],
    ranking: list[fig.Waste],
    window: float,
    now: float,
    known_intervals: fig.Intervals,
) -> list[fig.ExecutionFigures | None]:
    """The figures of each row ``shown`` (None where none were found). Figures are keyed by cluster and id: an id
    that several tenants' executions hold in the ranking (a view over every tenant, Kubernetes Job names repeat
    across namespaces) has each tenant's read within that tenant, the other rows in one read of them all."""
    rows_of = Counter(w.key for w in ranking)
    alone = [w for w in shown if rows_of[w.key] == 1]
    found: dict[fig.Key, fig.ExecutionFigures] = {}
    if alone:
        named = scope.narrowed(w.execution_id for w in alone)
        found = await fig.collect(cfg, prometheus, named, window, now, known_intervals=known_intervals)

    # The rest, one read per tenant of its rows (a few at a time: each read is a score of queries at once).
    apart: dict[str, list[fig.Waste]] = {}
    for w in shown:
        if rows_of[w.key] > 1:
            apart.setdefault(w.tenant, []).append(w)
    limit = asyncio.Semaphore(TENANT_READS_AT_ONCE)

    async def of_tenant(tenant: str, rows: list[fig.Waste]) -> dict[tuple[fig.Key, str], fig.ExecutionFigures]:
        own = fig.Scope(cfg, None, tenant, cluster=scope.cluster_value)
        own = own.narrowed(w.execution_id for w in rows)
        async with limit:
            read = await fig.collect(cfg, prometheus, own, window, now, known_intervals=known_intervals)
        return {(key, tenant): figures for key, figures in read.items()}

    of_tenants: dict[tuple[fig.Key, str], fig.ExecutionFigures] = {}
    for read in await asyncio.gather(*(of_tenant(t, rows) for t, rows in apart.items())):
        of_tenants.update(read)
    return [found.get(w.key) if rows_of[w.key] == 1 else of_tenants.get((w.key, w.tenant)) for w in shown]


async def fleet_summary(
    cfg: Config,
    prometheus: PrometheusClient,
    since: str = "7d",
    top: int = 20,
    tenant: str | None = None,
    at: float | None = None,
    cluster: str | None = None,
) -> dict[str, Any]:
    """Executions with samples in the ``since`` before ``at`` (default: now), ranked by GPU-hours wasted
    (billed less worked); of one ``cluster``, or of all (two clusters' executions of one id are two rows)."""
    try:
        window = parse_duration_seconds(since)
    except ValueError:
        raise RequestError(400, f"since: {echoed(since)} is not a Prometheus duration such as 1d or 7d") from None
    lookback = parse_duration_seconds(cfg.api.lookback)
    # At least a second: Prometheus refuses the rounded-down range of a shorter one (a 502 for the caller's 1ms).
    if not 1 <= window <= lookback:
        raise RequestError(400, f"since: {echoed(since)} is not accepted; accepted: 1s to {cfg.api.lookback}")
    if not 1 <= top <= MAX_FLEET_TOP:
        raise RequestError(400, f"top: {top} is not accepted; accepted: 1 to {MAX_FLEET_TOP}")
    cluster = parse_cluster(cluster, cluster_scope(cfg))
    now = time.time() if at is None else at
    scope = fig.Scope(cfg, None, tenant, cluster=cluster)
    # Ranked on a few queries over every execution; the figures and verdicts are read for the top rows only
    # (named in the queries while few), so the view's cost grows with ``top``, not with the fleet.
    known_intervals = await fig.intervals(cfg, prometheus)
    ranking = await fig.waste_by_execution(cfg, prometheus, scope, window, now, known_intervals.gpu)
    ranking.sort(key=lambda w: (-round(w.wasted_seconds / 3600, 4), w.execution_id, w.cluster, w.tenant))
    shown = ranking[:top]
    figures = await fleet_figures(cfg, prometheus, scope, shown, ranking, window, now, known_intervals)
    rows = [fleet_row(cfg, f, w) for w, f in zip(shown, figures, strict=True) if f is not None]
    billed = sum(w.billed_seconds for w in ranking) / 3600
    return {
        "since": since,
        "end": when(now),
        # What the view covers (None: every tenant): its rows alone cannot say, each carrying its own tenant.
        "tenant": tenant,
        "executions": len(ranking),
        "gpuHoursBilled": rounded(billed, 4),
        "gpuHoursWasted": rounded(billed - sum(w.worked_seconds for w in ranking) / 3600, 4),
        "top": rows,
        "notes": [n for n in (known_intervals.note, fig.assumed_interval_note(ranking, known_intervals.gpu)) if n],
    }
