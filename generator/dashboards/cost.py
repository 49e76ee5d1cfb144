"""The Cost dashboard: GPU-hours billed against GPU-hours of actual work, per execution and per model."""

from __future__ import annotations

from generator.config import Config
from generator.dashboards import fleet, house
from generator.dashboards.house import Query, Section, table, timeseries

PRICE = "on (modelName) group_left () gpu_model:price_per_gpu_hour"


def title(cfg: Config) -> str:
    return f"{cfg.dashboards.title_prefix} / Cost"


def hours(record: str, by: str) -> str:
    """GPU-hours of ``record`` per ``by`` over the time range (a per-minute subquery, summed)."""
    return f"sum by ({by}) (sum_over_time({record}[$__range:1m])) / 60"


def render(cfg: Config) -> str:
    d = cfg.dashboards
    money = f"currency{d.currency}"  # Grafana's unit id for the currency, e.g. currencyUSD
    sections = []
    for by, name in (("execution_id", "execution"), ("modelName", "GPU model")):
        billed = hours("execution_model:gpu_count", by)
        work = hours("execution_model:gpu_utilization_ratio:sum", by)
        cost = f"sum by ({by}) (\n  sum_over_time(execution_model:gpu_count[$__range:1m]) / 60\n  * {PRICE}\n)"
        sections.append(
            Section(f"Per {name}").add(
                table(
                    f"GPU-hours and cost per {name}",
                    [Query(billed), Query(work), Query(f"100 * ({work})\n/\n({billed})"), Query(cost)],
                    "GPU-hours billed (GPUs held over time), GPU-hours of work (utilisation summed over time), "
                    "work as a percentage of billed, and the billed cost at the configured price per model.",
                    ["GPU-hours billed", "GPU-hours of work", "Efficiency (%)", f"Cost ({d.currency})"],
                    link=fleet.execution_link(cfg) if by == "execution_id" else "",
                ),
                width=24,
                height=10,
            )
        )
    trend = (
        Section("Over time")
        .add(
            timeseries(
                "GPUs billed and GPUs busy",
                "none",
                [
                    Query("sum(execution_model:gpu_count)", "billed (held)"),
                    Query("sum(execution_model:gpu_utilization_ratio:sum)", "busy (utilisation summed)"),
                ],
                "GPUs held by executions against the GPU-equivalents they kept busy; the gap is paid idle time.",
            ),
        )
        .add(
            timeseries(
                f"Spend per hour ({d.currency})",
                money,
                [Query(f"sum by (modelName) (\n  execution_model:gpu_count\n  * {PRICE}\n)", "{{modelName}}")],
                "What the GPUs held cost per hour, per model, at the configured prices.",
            ),
        )
    )
    panels = house.layout([*sections, trend])
    return house.render(
        title(cfg),
        panels,
        [house.datasource_variable(d.datasource_name)],
        "GPU-hours billed against GPU-hours of actual work, and their cost, per execution and per GPU model.",
        time_from="now-7d",
    )
