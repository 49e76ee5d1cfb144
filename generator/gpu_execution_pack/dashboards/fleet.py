"""The Fleet dashboard: which executions waste GPUs, throttle or risk OOM, and utilisation by model."""

from __future__ import annotations

from gpu_execution_pack import catalog
from gpu_execution_pack.catalog import Series
from gpu_execution_pack.config import Config
from gpu_execution_pack.dashboards import execution, house
from gpu_execution_pack.dashboards.execution import MODEL_LEGEND, energy_kwh, gpu_hours, query
from gpu_execution_pack.dashboards.house import Section, stat, table, timeseries
from gpu_execution_pack.promql import Expr, Paren, aggregate, any_of, call, on


def title(cfg: Config) -> str:
    return f"{cfg.dashboards.title_prefix} / Fleet"


def execution_link(cfg: Config) -> str:
    """The Execution dashboard for the row's execution, over the same time range."""
    uid = house.uid_for(execution.title(cfg))
    variables = (
        f"var-{execution.VARIABLE}=${{__data.fields.{catalog.EXECUTION_LABEL}}}"
        f"&var-{house.DATASOURCE_VARIABLE}=${{{house.DATASOURCE_VARIABLE}}}"
    )
    return f"/d/{uid}?{variables}&${{__url_time_range}}"


def or_zero(expr: Expr) -> Expr:
    """A count or sum that reads 0, not "No data", when nothing matches (a healthy or idle fleet)."""
    return any_of([expr, call("vector", 0)], stacked=False)


def over_fleet(op: str, series: Series) -> Expr:
    """``op`` of ``series`` over every execution now; counts and sums read 0 when there is none."""
    expr = aggregate(op, None, series.select())
    return or_zero(expr) if op in ("count", "sum") else expr


def at_threshold(series: Series, threshold: float) -> Expr:
    """How many GPUs' ``series`` is at or above an alert's ``threshold`` now: 0 on a healthy fleet."""
    return or_zero(aggregate("count", None, series.select().ge(threshold)))


def now(cfg: Config) -> Section:
    """The top row: executions, GPUs and hosts in use now, and the fleet's utilisation."""
    held = catalog.EXECUTION_GPU_COUNT
    hosts = or_zero(aggregate("count", None, aggregate("count", [catalog.HOST_LABEL], catalog.NODE_GPU_COUNT.select())))
    utilisation = "Mean utilisation over every GPU an execution holds."
    return (
        Section("Now")
        .add(stat("Executions", "none", [query(over_fleet("count", held))], "Executions holding GPUs."), 6, 4)
        .add(stat("GPUs held", "none", [query(over_fleet("sum", held))], "GPUs or MIG instances held."), 6, 4)
        .add(
            stat("Fleet utilisation", "percentunit", [query(over_fleet("avg", catalog.GPU_UTILIZATION))], utilisation),
            6,
            4,
        )
        .add(stat("Hosts", "none", [query(hosts)], "Hosts in use."), 6, 4)
    )


def waste(cfg: Config) -> Section:
    """The executions that held the most GPU-hours below the waste alert's threshold, each a link to it."""
    low = cfg.alerts.gpu_underutilized.threshold
    by_execution = [catalog.EXECUTION_LABEL]
    gpus = catalog.MODEL_GPU_COUNT.select()
    # GPUs held while the execution's mean utilisation was under the waste alert's threshold (the
    # parentheses are for the reader: `<` binds tighter than `and`).
    idle = gpus.and_(Paren(catalog.EXECUTION_GPU_UTILIZATION_AVG.select().lt(low)), on(by_execution))
    wasted = call("topk", 20, gpu_hours(idle, by_execution))
    billed = gpu_hours(gpus, by_execution)
    return Section("Waste").add(
        table(
            f"Executions by GPU-hours below {low * 100:g} % utilisation",
            [query(wasted), query(billed)],
            "GPU-hours each execution held while its mean utilisation was under the waste alert's threshold, "
            "against all GPU-hours it held in the time range. Click a row to open the execution.",
            ["GPU-hours wasted", "GPU-hours billed"],
            link=execution_link(cfg),
        ),
        width=24,
        height=10,
    )


def health(cfg: Config) -> Section:
    """GPUs at the alerts' thresholds now, energy and utilisation per GPU model."""
    a = cfg.alerts
    return (
        Section("Throttling and OOM risk")
        .add(
            timeseries(
                "GPUs throttling or at OOM risk",
                "none",
                [
                    query(at_threshold(catalog.GPU_POWER_TO_LIMIT, a.power_throttling.threshold), "at power limit"),
                    query(at_threshold(catalog.GPU_TEMPERATURE, a.thermal_throttling.threshold_celsius), "hot"),
                    query(at_threshold(catalog.GPU_MEMORY_UTILIZATION, a.gpu_memory_high.threshold), "memory high"),
                ],
                "GPUs at the alert thresholds now: power at the limit, temperature, memory nearly full.",
            ),
        )
        .add(
            stat(
                "Energy by GPU model",
                "kwatth",
                [query(energy_kwh([catalog.MODEL_LABEL]), MODEL_LEGEND)],
                "Energy of the GPUs executions held in the time range, per model: the energy counter's rise where "
                "exported, else board power integrated per minute; each physical GPU counted once.",
                text_mode="value_and_name",
            ),
            24,
            4,
        )
        .add(
            timeseries(
                "Utilisation by GPU model",
                "percentunit",
                [query(aggregate("avg", [catalog.MODEL_LABEL], catalog.GPU_UTILIZATION.select()), MODEL_LEGEND)],
                "Mean utilisation of the GPUs executions hold, per model.",
                max_value=1,
            ),
        )
    )


def render(cfg: Config) -> str:
    """The Fleet dashboard as JSON text."""
    return house.render(
        title(cfg),
        house.layout([now(cfg), waste(cfg), health(cfg)]),
        [house.datasource_variable(cfg.dashboards.datasource_name)],
        "Every execution at once: waste, throttling, OOM risk and utilisation by GPU model.",
    )
