"""The Execution dashboard: one execution's GPUs, memory, power, clocks, PCIe and hosts.

The top row is a set of figures over the time range; the rows below plot recorded series over time,
laid out by ``ROWS``. A served series no panel of ``ROWS`` plots gets a panel of its own in the row its
catalog entry names (``Series.row``), so adding one to the catalog puts it on the dashboard with no edit here.
The queries come from ``queries``, the library the Fleet and Cost dashboards share.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from grafanalib import core

from gpu_execution_pack import catalog, promql
from gpu_execution_pack.catalog import Series
from gpu_execution_pack.config import Alerts, Config
from gpu_execution_pack.dashboards import house
from gpu_execution_pack.dashboards.house import Query, Section, stat, timeseries
from gpu_execution_pack.dashboards.queries import (
    GPU_LEGEND,
    HOST_LEGEND,
    MODEL_LEGEND,
    SEL,
    VARIABLE,
    billed_cost,
    energy_kwh,
    gpu_hours,
    in_cluster,
    of_tenant,
    over_range,
    per_minute,
    query,
    selected,
    stacked,
    tenant_variable,
    variables,
)
from gpu_execution_pack.promql import Expr, aggregate, call, match, selector


def plot(series: Series, legend: str = GPU_LEGEND) -> Query:
    """A target plotting the dashboard's execution's ``series`` as recorded."""
    return query(selected(series), legend)


def condition_seconds(series: Series) -> Expr:
    """The most time any of the execution's GPUs spent with ``series`` (a 0/1 condition) at 1, to the minute."""
    return aggregate("max", None, call("sum_over_time", per_minute(selected(series)))) * 60


def efficiency() -> Expr:
    """GPU-hours of work per GPU-hour billed (before the tree, this panel divided by 3600 once too often)."""
    work = gpu_hours(selected(catalog.MODEL_GPU_UTILIZATION_SUM))
    return stacked(work, "/", gpu_hours(selected(catalog.MODEL_GPU_COUNT)))


def title(cfg: Config) -> str:
    return f"{cfg.dashboards.title_prefix} / Execution"


# --- Overview: the report's questions as figures over the time range --------------------------


def execution_mean(series: Series) -> Series:
    """The per-execution mean of an activity series (``catalog.GPU_ACTIVITY_SERIES``): the one whose formula
    reads it."""
    return next(s for s in catalog.EXECUTION_ACTIVITY_SERIES if series.name in s.formulas[0].expr.metric_names())


def peak(function: str, op: str, series: Series, by: Iterable[str] | None = None) -> Expr:
    """``op`` (``by`` the labels given) of ``function`` (a ``*_over_time``) of the execution's ``series`` over the
    time range."""
    return aggregate(op, by, over_range(function, selected(series)))


def overview(cfg: Config) -> Section:
    """The top row: first what identifies the run (duration, GPUs, hosts, model), then memory against the OOM
    threshold, energy, throttling, GPU-hours held, utilisation against engine activity, efficiency and cost.
    Each line's widths add up to the grid's 24 columns; the model is a name, so it gets half a line."""
    section = Section("Overview")
    lines: tuple[tuple[list[core.Stat], tuple[int, ...]], ...] = (
        (identity_stats(), (4, 4, 4, 12)),
        ([*health_stats(cfg.alerts), *usage_stats()], (4, 4, 4, 4, 4, 4)),
        ([*work_stats(cfg.alerts), *value_stats(cfg)], (4, 4, 4, 6, 6)),
    )
    for panels, widths in lines:
        if len(panels) != len(widths) or sum(widths) != house.GRID_WIDTH:
            raise ValueError(f"overview line {[p.title for p in panels]}: widths {widths} do not tile the grid")
        for panel, width in zip(panels, widths, strict=True):
            section.add(panel, width=width, height=4)
    return section


def figure(
    title: str, unit: str, expr: Expr, description: str, text_mode: str = "value", threshold: float | None = None
) -> core.Stat:
    """A figure of the top row, its query's legend the GPU model (one value for most)."""
    return stat(title, unit, [query(expr, MODEL_LEGEND)], description, text_mode, threshold)


def health_stats(a: Alerts) -> list[core.Stat]:
    """Memory against the OOM-risk threshold, energy, and time throttled."""
    memory = a.gpu_memory_high.threshold
    return [
        figure(
            "Peak GPU memory",
            "percentunit",
            peak("max_over_time", "max", catalog.EXECUTION_GPU_MEMORY_UTILIZATION_MAX),
            f"Highest share of a GPU's memory it used; red at the OOM-risk alert's {memory:.0%}.",
            threshold=memory,
        ),
        figure(
            "Energy",
            "kwatth",
            energy_kwh(None, SEL),
            "Energy of its GPUs: the energy counter's rise where exported, else board power integrated per minute; "
            "a GPU held with N-1 other executions at once counts 1/N.",
        ),
        figure(
            "Power-throttled",
            "s",
            condition_seconds(catalog.GPU_POWER_THROTTLED),
            "Longest time a GPU met the PowerThrottling alert's condition, to the minute.",
        ),
        figure(
            "Thermal-throttled",
            "s",
            condition_seconds(catalog.GPU_THERMAL_THROTTLED),
            "Longest time a GPU met the ThermalThrottling alert's condition, to the minute.",
        ),
    ]


def work_stats(a: Alerts) -> list[core.Stat]:
    """Mean utilisation beside mean engine activity, and the time stalled: a GPU that looks busy and is not."""
    stall = a.gpu_stalled
    return [
        figure(
            "Mean utilisation",
            "percentunit",
            peak("avg_over_time", "avg", catalog.EXECUTION_GPU_UTILIZATION_AVG),
            "Mean GPU utilisation over its GPUs and the time range.",
        ),
        figure(
            "Mean engine activity",
            "percentunit",
            peak("avg_over_time", "avg", execution_mean(catalog.GPU_GRAPHICS_ENGINE_ACTIVE)),
            "Mean graphics-engine activity over its GPUs and the time range, beside the mean utilisation: "
            "utilisation counts time with a kernel resident, this the time the engines worked, so high "
            "utilisation over low activity is a GPU waiting, not working. No data where the field is not collected.",
        ),
        figure(
            "Stalled",
            "s",
            condition_seconds(catalog.GPU_STALLED),
            f"Longest time a GPU met the stalled alert's condition, to the minute: utilisation at or "
            f"above {stall.util_threshold:.0%} while the graphics engine is under "
            f"{stall.engine_threshold:.0%} (kernels resident, not working: a hung collective or a "
            "spin-wait). No data where the engine activity field is not collected.",
        ),
    ]


def identity_stats() -> list[core.Stat]:
    """What identifies the run: how long it held GPUs, how many, on how many hosts, and their model (the
    ``modelName`` label dcgm-exporter puts on every series, kept on the per-model GPU count)."""
    gpus = selected(catalog.EXECUTION_GPU_COUNT)
    return [
        figure(
            "Duration",
            "s",
            aggregate("max", None, call("count_over_time", per_minute(gpus))) * 60,
            "Wall-clock time the execution held GPUs within the time range, to the minute.",
        ),
        figure(
            "GPUs",
            "none",
            peak("max_over_time", "max", catalog.EXECUTION_GPU_COUNT),
            "GPUs or MIG instances held (the most at any time).",
        ),
        figure("Hosts", "none", peak("max_over_time", "max", catalog.EXECUTION_HOST_COUNT), "Hosts it ran on."),
        figure(
            "GPU model",
            "none",
            peak("max_over_time", "group", catalog.MODEL_GPU_COUNT, [catalog.MODEL_LABEL]),
            "The GPU models it held.",
            text_mode="name",
        ),
    ]


def usage_stats() -> list[core.Stat]:
    """GPU-hours worked against billed."""
    return [
        figure(
            "GPU-hours billed",
            "none",
            gpu_hours(selected(catalog.MODEL_GPU_COUNT)),
            "GPUs held, integrated over time; a GPU held with N-1 other executions at once (time-slicing, MPS) "
            "counts 1/N, a MIG instance its share of the GPU (its compute slices over those of the GPU's instances).",
        ),
        figure(
            "GPU-hours of work",
            "none",
            gpu_hours(selected(catalog.MODEL_GPU_UTILIZATION_SUM)),
            "Utilisation summed over its GPUs, integrated over time.",
        ),
    ]


def value_stats(cfg: Config) -> list[core.Stat]:
    """Work per GPU-hour billed, and what the GPU-hours cost."""
    currency = cfg.dashboards.currency
    return [
        figure("Efficiency", "percentunit", efficiency(), "GPU-hours of work per GPU-hour billed."),
        figure(
            f"Cost ({currency})",
            f"currency{currency}",
            billed_cost(None, SEL),
            "GPU-hours billed times the price of each model (dashboards.price_per_gpu_hour).",
        ),
    ]


# --- Rows of series over time -------------------------------------------------------------------

# Grafana's unit for each base unit the catalog records in.
GRAFANA_UNITS: dict[str, str] = {
    "ratio": "percentunit",
    "bytes": "bytes",
    "hertz": "hertz",
    "watts": "watt",
    "celsius": "celsius",
    "bytes_per_second": "Bps",
    "seconds": "s",
    "joules": "joule",
}
# The legend of a series' lines, by the level of series (its labels).
LEGENDS: dict[tuple[str, ...], str] = {catalog.GPU_LABELS: GPU_LEGEND, catalog.NODE_LABELS: HOST_LEGEND}


def unit_of(series: Series) -> str:
    """Grafana's unit for ``series``: counts, codes and flags have none."""
    return GRAFANA_UNITS.get(series.unit, "none")


def legend(series: Series, prefix: str = "") -> str:
    """The legend of a line of ``series``: ``prefix``, then the GPU or host the line is of."""
    if series.labels not in LEGENDS:
        raise ValueError(f"{series.name}: the Execution dashboard plots per-GPU and per-host series only")
    return f"{prefix} {LEGENDS[series.labels]}" if prefix else LEGENDS[series.labels]


def not_collected(series: Iterable[Series]) -> str:
    """What a panel of ``series`` shows without data: the exporter fields they are read from."""
    fields = dict.fromkeys(
        raw.name for s in series for f in s.formulas for key in f.signals for raw in catalog.SIGNALS[key].raws
    )
    return f"No data: the exporter does not collect {' or '.join(fields)}"


@dataclass(frozen=True)
class Plot:
    """A time-series panel of the execution's recorded series, a line per GPU or host of each.

    ``lines`` are (legend prefix, series): the legend is the prefix and the series' GPU or host; the
    unit is the series' own. ``threshold`` reads the line drawn from the config. ``optional`` plots fields
    an exporter may not collect: without data the panel names them.
    """

    title: str
    description: str
    lines: tuple[tuple[str, Series], ...]
    threshold: Callable[[Config], float] | None = None
    max_value: float | None = None
    width: int = 12
    optional: bool = False

    def panel(self, cfg: Config) -> core.TimeSeries:
        """The panel, its threshold line from the config ``cfg``."""
        units = {unit_of(s) for _, s in self.lines}
        if len(units) != 1:
            raise ValueError(f"panel {self.title!r} plots series in different units: {sorted(units)}")
        targets = [plot(s, legend(s, prefix)) for prefix, s in self.lines]
        threshold = self.threshold(cfg) if self.threshold else None
        no_data = not_collected(s for _, s in self.lines) if self.optional else ""
        return timeseries(self.title, units.pop(), targets, self.description, threshold, self.max_value, no_data)


def activity(series: Series, title: str, description: str, threshold: Callable[[Config], float] | None = None) -> Plot:
    """A panel of one activity series (``catalog.GPU_ACTIVITY_SERIES``), 0-100 %, naming its fields without data."""
    return Plot(title, description, (("", series),), threshold, max_value=1, width=8, optional=True)


# The rows under the overview, each a title and its panels, left to right.
ROWS: tuple[tuple[str, tuple[Plot, ...]], ...] = (
    (
        "Utilisation",
        (
            Plot(
                "GPU utilisation and engine activity",
                "Per GPU or MIG instance: utilisation (time with a kernel resident) and graphics-engine activity "
                "(time the engines worked). Low utilisation during the heavy phase: a data-loading or CPU "
                "bottleneck. High utilisation over engine activity under the line (the stalled alert's engine "
                "threshold): kernels resident but not working, as in a hung collective. On MIG instances the "
                "two are the same field.",
                (("util", catalog.GPU_UTILIZATION), ("engine", catalog.GPU_GRAPHICS_ENGINE_ACTIVE)),
                threshold=lambda c: c.alerts.gpu_stalled.engine_threshold,
                max_value=1,
                width=24,
            ),
        ),
    ),
    (
        "Work truth",
        (
            activity(
                catalog.GPU_TENSOR_ACTIVE,
                "Tensor-pipe activity",
                "Share of cycles the tensor pipes worked. Near 0 while the engines are busy: matrix maths without "
                "tensor cores (FP32); mixed precision or TF32 would use them. The line is "
                "report.tensor_active_threshold.",
                threshold=lambda c: c.report.tensor_active_threshold,
            ),
            activity(
                catalog.GPU_DRAM_ACTIVE,
                "DRAM activity",
                "Share of cycles the device-memory interface moved data: high with idle tensor pipes is a "
                "memory-bound kernel.",
            ),
            Plot(
                "SM activity and occupancy",
                "SM activity (a warp resident on an SM) and occupancy (resident warps against the maximum), where "
                "the exporter collects the DCP counters; low occupancy on an active SM: small kernels or launch-bound.",
                (("active", catalog.GPU_SM_ACTIVE), ("occupancy", catalog.GPU_SM_OCCUPANCY)),
                max_value=1,
                width=8,
                optional=True,
            ),
        ),
    ),
    (
        "GPU memory",
        (
            Plot(
                "GPU memory used",
                "Framebuffer capacity used; the line is the OOM-risk alert threshold. "
                "A climb to 100 % just before a crash is an out-of-memory, not a code bug.",
                (("", catalog.GPU_MEMORY_UTILIZATION),),
                threshold=lambda c: c.alerts.gpu_memory_high.threshold,
                max_value=1,
            ),
            Plot(
                "GPU memory used (bytes)",
                "Framebuffer used against what processes can use (the driver's reserve excluded).",
                (("used", catalog.GPU_MEMORY_USED), ("usable", catalog.GPU_MEMORY_TOTAL)),
            ),
        ),
    ),
    (
        "Power and temperature",
        (
            Plot(
                "Power against power limit",
                "Board power and the enforced power limit: power pressed against the limit means power capping.",
                (("power", catalog.GPU_POWER), ("limit", catalog.GPU_POWER_LIMIT)),
                width=8,
            ),
            Plot(
                "Power / limit",
                "Power as a share of the limit; the line is the power-throttling threshold.",
                (("", catalog.GPU_POWER_TO_LIMIT),),
                threshold=lambda c: c.alerts.power_throttling.threshold,
                width=8,
            ),
            Plot(
                "Temperature",
                "GPU temperature; the line is the thermal-throttling threshold.",
                (("", catalog.GPU_TEMPERATURE),),
                threshold=lambda c: c.alerts.thermal_throttling.threshold_celsius,
                width=8,
            ),
        ),
    ),
    (
        "Clocks",
        (
            Plot(
                "SM clock",
                "SM clock and its peak (max clock where exported): below its peak at the power limit means capping.",
                (("", catalog.GPU_SM_CLOCK), ("peak", catalog.GPU_SM_CLOCK_PEAK)),
            ),
            Plot("Memory clock", "Memory clock.", (("", catalog.GPU_MEMORY_CLOCK),)),
        ),
    ),
    (
        "PCIe",
        (
            Plot(
                "PCIe throughput",
                "PCIe traffic; RX is host to device.",
                (("RX (host to GPU)", catalog.GPU_PCIE_RX), ("TX (GPU to host)", catalog.GPU_PCIE_TX)),
                width=24,
            ),
        ),
    ),
    (
        "Hosts",
        (
            Plot(
                "Host RAM",
                "RAM used (total minus available) against total, per host; shared with other executions on the host.",
                (("used", catalog.NODE_RAM_USED), ("total", catalog.NODE_RAM_TOTAL)),
            ),
            Plot(
                "Host CPU",
                "Host CPU busy share; saturated CPU with idle GPUs means CPU-bound pre-processing.",
                (("", catalog.NODE_CPU_UTILIZATION),),
                max_value=1,
            ),
        ),
    ),
)


def own_plot(series: Series) -> Plot:
    """A panel of its own for a served series no panel of ``ROWS`` plots, titled by the first sentence of its
    doc; a series served only on request may not be collected, so its panel names its fields without data."""
    return Plot(series.doc.split(". ")[0].rstrip("."), series.doc, (("", series),), optional=series.api_optional)


def laid_out() -> dict[str, list[Plot]]:
    """The panels of each row: ``ROWS``, and each served series no panel of it plots at the end of the row its
    catalog entry names (``Series.row``; a row ``ROWS`` lacks comes after them). Adding a served series to the
    catalog puts it on the dashboard with no edit here."""
    placed = {s for _, plots in ROWS for p in plots for _, s in p.lines}
    layout = {name: list(plots) for name, plots in ROWS}
    for series in catalog.SERVABLE_SERIES:
        if series not in placed:
            if not series.row:
                raise ValueError(f"{series.name}: a served series names its Execution dashboard row (Series.row)")
            layout.setdefault(series.row, []).append(own_plot(series))
    return layout


def rows(cfg: Config) -> list[Section]:
    """The rows under the overview, their panels left to right."""
    sections = []
    for name, plots in laid_out().items():
        section = Section(name)
        for p in plots:
            section.add(p.panel(cfg), width=p.width)
        sections.append(section)
    return sections


# --- The dashboard ----------------------------------------------------------------------------


def alert_annotations(cfg: Config) -> dict[str, object]:
    """The execution's firing alerts (those of the dashboard's cluster), marked on every panel."""
    firing = in_cluster(cfg)(selector(catalog.ALERTS_METRIC, match("alertstate", "firing"), SEL))
    return {
        "name": "Alerts",
        "datasource": house.DATASOURCE,
        "enable": True,
        "iconColor": "red",
        "expr": promql.render(firing),
        "titleFormat": "{{alertname}}",
        "textFormat": "{{hostname}} GPU {{gpu}}",
        "step": "1m",
    }


def render(cfg: Config) -> str:
    """The Execution dashboard as JSON text."""
    panels = house.layout([overview(cfg), *rows(cfg)])
    return house.render(
        title(cfg),
        panels,
        [
            *variables(cfg, (VARIABLE, "Execution", catalog.EXECUTION_GPU_COUNT, catalog.EXECUTION_LABEL)),
            tenant_variable(cfg),
        ],
        "One execution: whether it used the GPUs it was billed for, OOM risk, throttling, and its hosts.",
        annotations=[alert_annotations(cfg)],
        scope=of_tenant(cfg),
    )
