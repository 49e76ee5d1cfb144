"""The Execution dashboard: one execution's GPUs, memory, power, clocks, PCIe and hosts.

The top row is a set of figures over the time range; the rows below plot recorded series over time,
laid out by ``ROWS``. A served series ``ROWS`` does not place gets a panel of its own in a last row,
so adding one to the catalog puts it on the dashboard with no edit here.
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
from gpu_execution_pack.promql import (
    Binary,
    Expr,
    Matcher,
    Range,
    Selector,
    aggregate,
    any_of,
    call,
    join,
    match,
    on,
    selector,
)

# The dashboard's Grafana variable. Its name is also the URL parameter (var-execution_id) that links
# from outside (bookmarks, a scheduler's job page) carry, so it stays fixed even were the recorded
# series' label (catalog.EXECUTION_LABEL, which SEL matches) renamed.
VARIABLE = "execution_id"
# The dashboard's execution: Grafana substitutes the variable before the query is sent.
SEL = match(catalog.EXECUTION_LABEL, f"${VARIABLE}")
GPU_LEGEND = "{{hostname}} GPU {{gpu}} {{GPU_I_ID}}"
HOST_LEGEND = "{{hostname}}"
MODEL_LEGEND = "{{modelName}}"
RANGE = "$__range"  # the dashboard's time range


def selected(series: Series) -> Selector:
    """``series`` of the dashboard's execution."""
    return series.select(SEL)


def query(expr: Expr, legend: str = "") -> Query:
    """A panel target: ``expr`` printed as PromQL."""
    return Query(promql.render(expr), legend)


def plot(series: Series, legend: str = GPU_LEGEND) -> Query:
    """A target plotting the dashboard's execution's ``series`` as recorded."""
    return query(selected(series), legend)


def over_range(function: str, expr: Expr) -> Expr:
    """``function`` (a ``*_over_time``) of ``expr`` over the dashboard's time range."""
    return call(function, expr.range(RANGE))


def per_minute(expr: Expr) -> Range:
    """``expr`` over the time range as a subquery sampled every minute: summing it counts minutes,
    whatever the rule interval."""
    return Range(expr, RANGE, "1m")


def gpu_minutes(expr: Expr) -> Expr:
    """Minutes of ``expr`` (GPUs held, or busy GPU-equivalents) over the time range, per series."""
    return call("sum_over_time", per_minute(expr))


def gpu_hours(expr: Expr, by: Iterable[str] | None = None) -> Expr:
    """GPU-hours of ``expr`` over the time range, summed ``by`` the labels given (over all without)."""
    return aggregate("sum", by, gpu_minutes(expr)) / 60


JOULES_PER_KWH = 3_600_000


def energy_kwh(by: Iterable[str] | None, *matchers: Matcher) -> Expr:
    """kWh over the time range, summed ``by`` the labels given: each physical GPU once (MIG instances repeat
    the device's fields), from the energy counter's rise where it is recorded, else board power integrated
    per minute. docs/report.md defines the same figure for the report."""
    device = (catalog.EXECUTION_LABEL, "UUID", catalog.MODEL_LABEL)
    counter = catalog.GPU_ENERGY.select(*matchers)
    rise = call("max_over_time", counter.range(RANGE)) - call("min_over_time", counter.range(RANGE))
    integral = gpu_minutes(catalog.GPU_POWER.select(*matchers)) * 60
    per_device = any_of([aggregate("max", device, rise), aggregate("max", device, integral)])
    return aggregate("sum", by, per_device) / JOULES_PER_KWH


def throttled_seconds(series: Series) -> Expr:
    """The most time any of the execution's GPUs spent with ``series`` (a 0/1 condition) at 1, to the minute."""
    return aggregate("max", None, call("sum_over_time", per_minute(selected(series)))) * 60


def priced(expr: Expr) -> Expr:
    """``expr``, per execution and GPU model, times the price of a GPU-hour of that model."""
    return join(expr, "*", on([catalog.MODEL_LABEL], group_left=()), catalog.PRICE.select())


def billed_cost(by: Iterable[str] | None, *matchers: Matcher) -> Expr:
    """What the GPUs held over the time range cost, at each model's price, summed ``by`` the labels given."""
    return aggregate("sum", by, priced(gpu_minutes(catalog.MODEL_GPU_COUNT.select(*matchers)) / 60))


def stacked(lhs: Expr, op: str, rhs: Expr) -> Binary:
    """``lhs op rhs`` with each on a line of its own."""
    return Binary(op, lhs, rhs, stacked=True)


def efficiency() -> Expr:
    """GPU-hours of work per GPU-hour billed (before the tree, this panel divided by 3600 once too often)."""
    work = gpu_hours(selected(catalog.MODEL_GPU_UTILIZATION_SUM))
    return stacked(work, "/", gpu_hours(selected(catalog.MODEL_GPU_COUNT)))


def title(cfg: Config) -> str:
    return f"{cfg.dashboards.title_prefix} / Execution"


# --- Overview: the report's questions as figures over the time range --------------------------


def peak(function: str, op: str, series: Series, by: Iterable[str] | None = None) -> Expr:
    """``op`` (``by`` the labels given) of ``function`` (a ``*_over_time``) of the execution's ``series`` over the
    time range."""
    return aggregate(op, by, over_range(function, selected(series)))


def overview(cfg: Config) -> Section:
    """The top row: memory against the OOM threshold, energy, throttling, then GPU-hours and cost."""
    section = Section("Overview")
    for panel in (*health_stats(cfg.alerts), *usage_stats(cfg)):
        section.add(panel, width=4, height=4)
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
            "Energy of its GPUs: the energy counter's rise where exported, else board power integrated per minute.",
        ),
        figure(
            "Power-throttled",
            "s",
            throttled_seconds(catalog.GPU_POWER_THROTTLED),
            "Longest time a GPU met the PowerThrottling alert's condition, to the minute.",
        ),
        figure(
            "Thermal-throttled",
            "s",
            throttled_seconds(catalog.GPU_THERMAL_THROTTLED),
            "Longest time a GPU met the ThermalThrottling alert's condition, to the minute.",
        ),
    ]


def usage_stats(cfg: Config) -> list[core.Stat]:
    """GPU-hours worked against billed, what it held, and what that cost."""
    currency = cfg.dashboards.currency
    gpus = selected(catalog.EXECUTION_GPU_COUNT)
    return [
        figure(
            "GPU-hours billed", "none", gpu_hours(selected(catalog.MODEL_GPU_COUNT)), "GPUs held, integrated over time."
        ),
        figure(
            "GPU-hours of work",
            "none",
            gpu_hours(selected(catalog.MODEL_GPU_UTILIZATION_SUM)),
            "Utilisation summed over its GPUs, integrated over time.",
        ),
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
        figure(
            "Mean utilisation",
            "percentunit",
            peak("avg_over_time", "avg", catalog.EXECUTION_GPU_UTILIZATION_AVG),
            "Mean GPU utilisation over its GPUs and the time range.",
        ),
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


@dataclass(frozen=True)
class Plot:
    """A time-series panel of the execution's recorded series, a line per GPU or host of each.

    ``lines`` are (legend prefix, series): the legend is the prefix and the series' GPU or host; the
    unit is the series' own. ``threshold`` reads the line drawn from the alert config.
    """

    title: str
    description: str
    lines: tuple[tuple[str, Series], ...]
    threshold: Callable[[Alerts], float] | None = None
    max_value: float | None = None
    width: int = 12

    def panel(self, a: Alerts) -> core.TimeSeries:
        """The panel, its threshold line from the alert config ``a``."""
        units = {unit_of(s) for _, s in self.lines}
        if len(units) != 1:
            raise ValueError(f"panel {self.title!r} plots series in different units: {sorted(units)}")
        targets = [plot(s, legend(s, prefix)) for prefix, s in self.lines]
        threshold = self.threshold(a) if self.threshold else None
        return timeseries(self.title, units.pop(), targets, self.description, threshold, self.max_value)


# The rows under the overview, each a title and its panels, left to right.
ROWS: tuple[tuple[str, tuple[Plot, ...]], ...] = (
    (
        "Utilisation",
        (
            Plot(
                "GPU utilisation",
                "Per GPU or MIG instance. Low during the heavy phase: a data-loading or CPU bottleneck.",
                (("", catalog.GPU_UTILIZATION),),
                max_value=1,
                width=24,
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
                threshold=lambda a: a.gpu_memory_high.threshold,
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
                threshold=lambda a: a.power_throttling.threshold,
                width=8,
            ),
            Plot(
                "Temperature",
                "GPU temperature; the line is the thermal-throttling threshold.",
                (("", catalog.GPU_TEMPERATURE),),
                threshold=lambda a: a.thermal_throttling.threshold_celsius,
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
OTHER_ROW = "Other served series"


def served_plots() -> list[Plot]:
    """A panel for each served series ``ROWS`` does not plot, titled by its panel hint or else its doc."""
    placed = {s for _, plots in ROWS for p in plots for _, s in p.lines}
    return [
        Plot(s.panel or s.doc.split(". ")[0].rstrip("."), s.doc, (("", s),))
        for s in catalog.API_SERIES
        if s not in placed
    ]


def rows(a: Alerts) -> list[Section]:
    """The rows of ``ROWS``, then one of the served series they leave out (where there are any)."""
    sections = []
    for name, plots in (*ROWS, (OTHER_ROW, tuple(served_plots()))):
        if plots:
            section = Section(name)
            for p in plots:
                section.add(p.panel(a), width=p.width)
            sections.append(section)
    return sections


# --- The dashboard ----------------------------------------------------------------------------


def alert_annotations() -> dict[str, object]:
    """The execution's firing alerts, marked on every panel."""
    return {
        "name": "Alerts",
        "datasource": house.DATASOURCE,
        "enable": True,
        "iconColor": "red",
        "expr": promql.render(selector("ALERTS", match("alertstate", "firing"), SEL)),
        "titleFormat": "{{alertname}}",
        "textFormat": "{{hostname}} GPU {{gpu}}",
        "step": "1m",
    }


def render(cfg: Config) -> str:
    """The Execution dashboard as JSON text."""
    # label_values() is Grafana's variable query, not PromQL: it names the series and the label.
    executions = f"label_values({catalog.EXECUTION_GPU_COUNT.name}, {catalog.EXECUTION_LABEL})"
    variables = [
        house.datasource_variable(cfg.dashboards.datasource_name),
        house.query_variable(VARIABLE, "Execution", executions),
    ]
    panels = house.layout([overview(cfg), *rows(cfg.alerts)])
    return house.render(
        title(cfg),
        panels,
        variables,
        "One execution: whether it used the GPUs it was billed for, OOM risk, throttling, and its hosts.",
        annotations=[alert_annotations()],
    )
