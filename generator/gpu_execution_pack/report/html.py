"""The report as one self-contained HTML page: the verdicts and advice first, then charts over the span.

``report ID --html FILE``, ``report --since 7d --html FILE`` and the summary route (a client that
asks for ``text/html``) write the same page. Charts are drawn in the browser by uPlot, vendored in
``static/`` and inlined with the page's data (JSON in a ``<script type="application/json">``), so a
page opens without any network fetch; its Content-Security-Policy forbids one. The same document
and series give the same bytes: nothing in a page depends on when it was written.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.promql import aggregate
from gpu_execution_pack.query.execution import ExecutionMetrics
from gpu_execution_pack.query.params import parse_time
from gpu_execution_pack.query.prometheus import PrometheusClient
from gpu_execution_pack.report import figures as fig
from gpu_execution_pack.report.numbers import figure, percent_text
from gpu_execution_pack.report.text import ACTIVITY_ROWS, device, duration, names_tenants, tenant_shown

UPLOT_VERSION = "1.6.32"  # static/README.md says where the files come from
STATIC = Path(__file__).with_name("static")
TEMPLATES = Path(__file__).with_name("templates")
MAX_POINTS = 720  # points per line: a chart is some 600 pixels wide
SIGNIFICANT_DIGITS = 4  # of each charted value: a pixel's worth, and a smaller page

# The scale each API unit is drawn in: the unit shown and the factor from the API's.
SCALES: dict[str, tuple[str, float]] = {
    "percent": ("%", 1.0),
    "celsius": ("°C", 1.0),
    "watts": ("W", 1.0),
    "MHz": ("MHz", 1.0),
    "bytes_per_second": ("MiB/s", 1 / 1024**2),
    "bytes": ("GiB", 1 / 1024**3),
}


@dataclass(frozen=True)
class Chart:
    """One chart: a line per GPU (or host) for each series, the second series dashed (a limit or a total)."""

    title: str
    series: tuple[catalog.Series, ...]
    note: str = ""
    second: str = ""  # what the second series' lines are called in the legend: ``h1 GPU 0 limit``
    thresholds: str = ""  # which horizontal lines it draws: a key of ``thresholds()``


# Utilisation beside engine activity, memory beside power, first; the finer activity fields last.
CHARTS: tuple[Chart, ...] = (
    Chart("GPU utilisation", (catalog.GPU_UTILIZATION,), "time with a kernel resident"),
    Chart("Graphics engine active", (catalog.GPU_GRAPHICS_ENGINE_ACTIVE,), "time the engines did work"),
    Chart("GPU memory used, of capacity", (catalog.GPU_MEMORY_UTILIZATION,), "100 % is the capacity", "", "memory"),
    Chart("Power against the limit", (catalog.GPU_POWER, catalog.GPU_POWER_LIMIT), "dashed: the limit", "limit"),
    Chart("GPU temperature", (catalog.GPU_TEMPERATURE,), thresholds="temperature"),
    Chart("Host CPU", (catalog.NODE_CPU_UTILIZATION,)),
    Chart("Host RAM used", (catalog.NODE_RAM_USED, catalog.NODE_RAM_TOTAL), "dashed: the host's RAM", "RAM"),
    Chart("SM clock", (catalog.GPU_SM_CLOCK,)),
    Chart("Memory clock", (catalog.GPU_MEMORY_CLOCK,)),
    Chart("PCIe received", (catalog.GPU_PCIE_RX,)),
    Chart("PCIe sent", (catalog.GPU_PCIE_TX,)),
    Chart("Tensor pipes active", (catalog.GPU_TENSOR_ACTIVE,)),
    Chart("Memory interface active", (catalog.GPU_DRAM_ACTIVE,)),
    Chart("SM active", (catalog.GPU_SM_ACTIVE,)),
    Chart("SM occupancy", (catalog.GPU_SM_OCCUPANCY,)),
)


def charted_value(value: float | None, factor: float) -> float | None:
    """A value in the chart's scale, to SIGNIFICANT_DIGITS; None for a gap (or NaN)."""
    if value is None or not math.isfinite(value):
        return None
    scaled = value * factor
    if scaled == 0:
        return 0.0
    return round(scaled, SIGNIFICANT_DIGITS - 1 - math.floor(math.log10(abs(scaled))))


def line_name(labels: dict[str, str]) -> str:
    """A line's legend: ``host GPU n`` (``/instance`` on MIG), or the host for a host series."""
    if "gpu" not in labels:
        return labels.get(catalog.HOST_LABEL, "")
    return device(
        {
            "hostname": labels.get(catalog.HOST_LABEL, ""),
            "gpu": labels.get("gpu", ""),
            "migInstance": labels.get(catalog.MIG_INSTANCE_LABEL, ""),
        }
    )


def chart_data(
    chart: Chart, grid: list[float], found: dict[str, dict[str, list[list[float]]]]
) -> dict[str, Any] | None:
    """A chart's lines on the window's grid (uPlot's ``[xs, ys...]``); None where no series of it has data."""
    unit, factor = SCALES[chart.series[0].api_unit]
    index = {round(t, 3): k for k, t in enumerate(grid)}
    names = sorted({name for series in chart.series for name in found.get(series.name, {})})
    lines, columns = [], []
    for rank, series in enumerate(chart.series):
        for name, samples in sorted(found.get(series.name, {}).items()):
            column: list[float | None] = [None] * len(grid)
            for t, value in catalog.UNITS[series.api_unit].from_base_samples(samples):
                if (k := index.get(round(t, 3))) is not None:
                    column[k] = charted_value(value, factor)
            label = name if rank == 0 else f"{name} {chart.second}"
            lines.append({"label": label, "dashed": rank > 0, "colour": names.index(name)})
            columns.append(column)
    if not any(v is not None for column in columns for v in column):
        return None
    return {"title": chart.title, "note": chart.note, "unit": unit, "lines": lines, "data": [grid, *columns]}


def thresholds(cfg: Config, doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The horizontal lines charts draw (``Chart.thresholds``): the OOM threshold and the throttle temperature."""
    return {
        "memory": [
            {"label": "OOM threshold", "value": doc["memory"]["oomThresholdPercent"]},
            {"label": "capacity", "value": 100},
        ],
        "temperature": [
            {"label": "throttle threshold", "value": cfg.alerts.thermal_throttling.threshold_celsius},
        ],
    }


async def read_series(
    cfg: Config,
    prometheus: PrometheusClient,
    doc: dict[str, Any],
    tenant: str | None,
) -> tuple[list[float], dict[str, dict[str, list[list[float]]]], list[dict[str, Any]]]:
    """Every served series of the execution over the report's span, at most MAX_POINTS a line, and the
    alerts that fired (each with its firing intervals): the grid, series name -> line -> samples, alerts."""
    start, end = parse_time("start", doc["start"]) or 0.0, parse_time("end", doc["end"]) or 0.0
    step = max(1, math.ceil((end - start) / (MAX_POINTS - 1)))
    metrics = ExecutionMetrics(cfg, prometheus)
    names = ",".join(s.api_name for s in catalog.SERVABLE_SERIES)
    params, window = await metrics.request_window(
        doc["executionId"], doc["start"], doc["end"], f"{step}s", tenant, names, doc.get("cluster")
    )
    found: dict[str, dict[str, list[list[float]]]] = {}
    for result in await metrics.answers(doc["executionId"], window, tenant, params.series, params.cluster):
        for r in result:
            lines = found.setdefault(r["metric"]["__name__"], {})
            lines.setdefault(line_name(r["metric"]), []).extend(r["values"])
    grid = [window.start + k * window.step for k in range(window.points)]
    scope = fig.Scope(cfg, doc["executionId"], tenant, cluster=doc.get("cluster"))
    scope.shared_ids = await fig.held_by_other_tenants(prometheus, scope, window.end - window.start, window.end)
    # By what tells whose an alert is (``Scope.own_alert``), as the report's own figures keep them.
    telling = (
        "alertname",
        "severity",
        catalog.EXECUTION_LABEL,
        catalog.HOST_LABEL,
        catalog.UUID_LABEL,
        cfg.api.tenant_label,
    )
    firing = aggregate("max", telling, scope.alerts())
    answer = await prometheus.range(scope.query(firing), window.start, window.end, window.step) if grid else []
    hosts = {device["hostname"] for device in doc["gpus"]["devices"]}
    instants: dict[tuple[str, str], set[float]] = defaultdict(set)
    for r in answer:
        if scope.own_alert(r["metric"], hosts):
            instants[(r["metric"].get("alertname", ""), r["metric"].get("severity", ""))].update(
                t for t, _ in r["values"]
            )
    alerts = [
        {"name": name, "severity": severity, "intervals": intervals(sorted(times), window.step)}
        for (name, severity), times in sorted(instants.items())
    ]
    return grid, found, alerts


def intervals(times: list[float], step: float) -> list[list[float]]:
    """Sorted sample times as [start, end] runs, a run broken where a step is missing."""
    runs: list[list[float]] = []
    for t in times:
        if runs and t - runs[-1][1] <= step:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    return runs


def script_json(data: Any) -> str:
    """``data`` as JSON safe inside a ``<script>`` element: no ``<`` (so no ``</script>``), keys sorted."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters.update(figure=figure, percent=percent_text, duration=duration, tenant_shown=tenant_shown)
    return env


def page(template: str, **context: Any) -> str:
    """A page from ``template``, with uPlot and its stylesheet inlined."""
    static = {
        "uplot_js": (STATIC / "uPlot.iife.min.js").read_text(),
        "uplot_css": (STATIC / "uPlot.min.css").read_text(),
        "uplot_version": UPLOT_VERSION,
    }
    return environment().get_template(template).render(**static, **context)


def render_execution(
    cfg: Config,
    doc: dict[str, Any],
    grid: list[float],
    found: dict[str, dict[str, list[list[float]]]],
    alerts: list[dict[str, Any]],
) -> str:
    """One execution's page from its report document and its series over the span."""
    lines = thresholds(cfg, doc)
    charts = []
    for chart in CHARTS:
        if (drawn := chart_data(chart, grid, found)) is not None:
            charts.append({**drawn, "thresholds": lines.get(chart.thresholds, [])})
    heavy = doc["utilization"]["heavyPhase"]
    heavy_start = parse_time("start", heavy["start"]) if heavy["start"] else None
    data = {
        "kind": "execution",
        "charts": charts,
        "heavyPhase": None if heavy_start is None else [heavy_start, parse_time("end", doc["end"])],
        "alerts": alerts,
    }
    missing = [chart.title for chart in CHARTS if chart.title not in {c["title"] for c in charts}]
    return page("execution.html.j2", doc=doc, data=script_json(data), missing=missing, activity_rows=ACTIVITY_ROWS)


def bar_label(row: dict[str, Any], tenanted: bool) -> str:
    """A fleet row's bar as the chart names it: its id, with its cluster where the row names one and its tenant where
    the view names tenants (``names_tenants``). One id may be an execution in each cluster, and in one cluster a
    tenant's and the GPUs' without a tenant label: the table's columns tell them apart, and so must the bars."""
    named = [f"cluster {row['cluster']}"] if "cluster" in row else []
    if tenanted:
        named.append(row.get("tenant") or "-")
    return f"{row['executionId']} ({', '.join(named)})" if named else row["executionId"]


def render_fleet(doc: dict[str, Any]) -> str:
    """The fleet view's page: the waste ranking, and GPU-hours billed against worked per execution."""
    rows = doc["top"]
    tenanted = names_tenants(doc)
    chart = {
        "title": "GPU-hours billed and worked",
        "note": "most wasted first",
        "unit": "GPU-hours",
        "labels": [bar_label(row, tenanted) for row in rows],
        "lines": [{"label": "billed", "dashed": False, "colour": 0}, {"label": "worked", "dashed": False, "colour": 2}],
        "data": [
            list(range(len(rows))),
            [row["gpuHoursBilled"] for row in rows],
            [row["gpuHoursWorked"] for row in rows],
        ],
        "thresholds": [],
    }
    data = {"kind": "fleet", "charts": [chart] if rows else [], "heavyPhase": None, "alerts": []}
    return page("fleet.html.j2", doc=doc, data=script_json(data), tenanted=tenanted)
