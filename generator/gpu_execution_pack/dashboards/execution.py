"""The Execution dashboard: one execution's GPUs, memory, power, clocks, PCIe and hosts."""

from __future__ import annotations

from collections.abc import Iterable

from gpu_execution_pack import catalog, promql
from gpu_execution_pack.catalog import Series
from gpu_execution_pack.config import Config
from gpu_execution_pack.dashboards import house
from gpu_execution_pack.dashboards.house import Query, Section, stat, timeseries
from gpu_execution_pack.promql import Binary, Expr, Range, Selector, aggregate, any_of, call, join, match, on, selector

VARIABLE = "execution_id"
# The dashboard's execution: Grafana substitutes the variable before the query is sent.
SEL = match(catalog.EXECUTION_LABEL, f"${VARIABLE}")
GPU_LEGEND = "{{hostname}} GPU {{gpu}} {{GPU_I_ID}}"
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


def energy_kwh(by: Iterable[str] | None, *matchers: str) -> Expr:
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


def billed_cost(by: Iterable[str] | None, *matchers: str) -> Expr:
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


def render(cfg: Config) -> str:
    a, d = cfg.alerts, cfg.dashboards
    gpus, hosts = selected(catalog.EXECUTION_GPU_COUNT), selected(catalog.EXECUTION_HOST_COUNT)
    overview = Section("Overview")
    # The top row answers the report's questions: memory against the OOM threshold, energy,
    # throttling, and GPU-hours worked against billed.
    for name, unit, expr, text_mode, desc, red_from in (
        (
            "Peak GPU memory",
            "percentunit",
            aggregate("max", None, over_range("max_over_time", selected(catalog.EXECUTION_GPU_MEMORY_UTILIZATION_MAX))),
            "value",
            f"Highest share of a GPU's memory it used; red at the OOM-risk alert's {a.gpu_memory_high.threshold:.0%}.",
            a.gpu_memory_high.threshold,
        ),
        (
            "Energy",
            "kwatth",
            energy_kwh(None, SEL),
            "value",
            "Energy of its GPUs: the energy counter's rise where exported, else board power integrated per minute.",
            None,
        ),
        (
            "Power-throttled",
            "s",
            throttled_seconds(catalog.GPU_POWER_THROTTLED),
            "value",
            "Longest time a GPU met the PowerThrottling alert's condition, to the minute.",
            None,
        ),
        (
            "Thermal-throttled",
            "s",
            throttled_seconds(catalog.GPU_THERMAL_THROTTLED),
            "value",
            "Longest time a GPU met the ThermalThrottling alert's condition, to the minute.",
            None,
        ),
        (
            "GPU-hours billed",
            "none",
            gpu_hours(selected(catalog.MODEL_GPU_COUNT)),
            "value",
            "GPUs held, integrated over time.",
            None,
        ),
        (
            "GPU-hours of work",
            "none",
            gpu_hours(selected(catalog.MODEL_GPU_UTILIZATION_SUM)),
            "value",
            "Utilisation summed over its GPUs, integrated over time.",
            None,
        ),
        (
            "Duration",
            "s",
            aggregate("max", None, call("count_over_time", per_minute(gpus))) * 60,
            "value",
            "Wall-clock time the execution held GPUs within the time range, to the minute.",
            None,
        ),
        (
            "GPUs",
            "none",
            aggregate("max", None, over_range("max_over_time", gpus)),
            "value",
            "GPUs or MIG instances held (the most at any time).",
            None,
        ),
        (
            "Hosts",
            "none",
            aggregate("max", None, over_range("max_over_time", hosts)),
            "value",
            "Hosts it ran on.",
            None,
        ),
        (
            "GPU model",
            "none",
            aggregate("group", [catalog.MODEL_LABEL], over_range("max_over_time", selected(catalog.MODEL_GPU_COUNT))),
            "name",
            "The GPU models it held.",
            None,
        ),
        (
            "Mean utilisation",
            "percentunit",
            aggregate("avg", None, over_range("avg_over_time", selected(catalog.EXECUTION_GPU_UTILIZATION_AVG))),
            "value",
            "Mean GPU utilisation over its GPUs and the time range.",
            None,
        ),
        ("Efficiency", "percentunit", efficiency(), "value", "GPU-hours of work per GPU-hour billed.", None),
        (
            f"Cost ({d.currency})",
            f"currency{d.currency}",
            billed_cost(None, SEL),
            "value",
            "GPU-hours billed times the price of each model (dashboards.price_per_gpu_hour).",
            None,
        ),
    ):
        overview.add(stat(name, unit, [query(expr, "{{modelName}}")], desc, text_mode, red_from), width=4, height=4)

    utilisation = Section("Utilisation").add(
        timeseries(
            "GPU utilisation",
            "percentunit",
            [plot(catalog.GPU_UTILIZATION)],
            "Per GPU or MIG instance. Low during the heavy phase: a data-loading or CPU bottleneck.",
            max_value=1,
        ),
        width=24,
    )
    memory = (
        Section("GPU memory")
        .add(
            timeseries(
                "GPU memory used",
                "percentunit",
                [plot(catalog.GPU_MEMORY_UTILIZATION)],
                "Framebuffer capacity used; the line is the OOM-risk alert threshold. "
                "A climb to 100 % just before a crash is an out-of-memory, not a code bug.",
                threshold=a.gpu_memory_high.threshold,
                max_value=1,
            ),
        )
        .add(
            timeseries(
                "GPU memory used (bytes)",
                "bytes",
                [
                    plot(catalog.GPU_MEMORY_USED, f"used {GPU_LEGEND}"),
                    plot(catalog.GPU_MEMORY_TOTAL, f"usable {GPU_LEGEND}"),
                ],
                "Framebuffer used against what processes can use (the driver's reserve excluded).",
            ),
        )
    )
    power = (
        Section("Power and temperature")
        .add(
            timeseries(
                "Power against power limit",
                "watt",
                [
                    plot(catalog.GPU_POWER, f"power {GPU_LEGEND}"),
                    plot(catalog.GPU_POWER_LIMIT, f"limit {GPU_LEGEND}"),
                ],
                "Board power and the enforced power limit: power pressed against the limit means power capping.",
            ),
            width=8,
        )
        .add(
            timeseries(
                "Power / limit",
                "percentunit",
                [plot(catalog.GPU_POWER_TO_LIMIT)],
                "Power as a share of the limit; the line is the power-throttling threshold.",
                threshold=a.power_throttling.threshold,
            ),
            width=8,
        )
        .add(
            timeseries(
                "Temperature",
                "celsius",
                [plot(catalog.GPU_TEMPERATURE)],
                "GPU temperature; the line is the thermal-throttling threshold.",
                threshold=a.thermal_throttling.threshold_celsius,
            ),
            width=8,
        )
    )
    clocks = (
        Section("Clocks")
        .add(
            timeseries(
                "SM clock",
                "hertz",
                [plot(catalog.GPU_SM_CLOCK), plot(catalog.GPU_SM_CLOCK_PEAK, f"peak {GPU_LEGEND}")],
                "SM clock and its peak (max clock where exported): below its peak at the power limit means capping.",
            ),
        )
        .add(
            timeseries("Memory clock", "hertz", [plot(catalog.GPU_MEMORY_CLOCK)], "Memory clock."),
        )
    )
    pcie = Section("PCIe").add(
        timeseries(
            "PCIe throughput",
            "Bps",
            [
                plot(catalog.GPU_PCIE_RX, f"RX (host to GPU) {GPU_LEGEND}"),
                plot(catalog.GPU_PCIE_TX, f"TX (GPU to host) {GPU_LEGEND}"),
            ],
            "PCIe traffic; RX is host to device.",
        ),
        width=24,
    )
    host = (
        Section("Hosts")
        .add(
            timeseries(
                "Host RAM",
                "bytes",
                [plot(catalog.NODE_RAM_USED, "used {{hostname}}"), plot(catalog.NODE_RAM_TOTAL, "total {{hostname}}")],
                "RAM used (total minus available) against total, per host; shared with other executions on the host.",
            ),
        )
        .add(
            timeseries(
                "Host CPU",
                "percentunit",
                [plot(catalog.NODE_CPU_UTILIZATION, "{{hostname}}")],
                "Host CPU busy share; saturated CPU with idle GPUs means CPU-bound pre-processing.",
                max_value=1,
            ),
        )
    )
    alerts = {
        "name": "Alerts",
        "datasource": house.DATASOURCE,
        "enable": True,
        "iconColor": "red",
        "expr": promql.render(selector("ALERTS", match("alertstate", "firing"), SEL)),
        "titleFormat": "{{alertname}}",
        "textFormat": "{{hostname}} GPU {{gpu}}",
        "step": "1m",
    }
    # label_values() is Grafana's variable query, not PromQL: it names the series and the label.
    executions = f"label_values({catalog.EXECUTION_GPU_COUNT.name}, {catalog.EXECUTION_LABEL})"
    variables = [
        house.datasource_variable(d.datasource_name),
        house.query_variable(VARIABLE, "Execution", executions),
    ]
    panels = house.layout([overview, utilisation, memory, power, clocks, pcie, host])
    return house.render(
        title(cfg),
        panels,
        variables,
        "One execution: whether it used the GPUs it was billed for, OOM risk, throttling, and its hosts.",
        annotations=[alerts],
    )
