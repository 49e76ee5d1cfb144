"""The Cost dashboard: GPU-hours billed against GPU-hours of actual work, per execution and per model."""

from __future__ import annotations

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.dashboards import fleet, house, queries
from gpu_execution_pack.dashboards.house import Section, table, timeseries
from gpu_execution_pack.dashboards.queries import (
    MODEL_LEGEND,
    billed_cost,
    energy_kwh,
    gpu_hours,
    priced,
    query,
    stacked,
)
from gpu_execution_pack.promql import aggregate


def title(cfg: Config) -> str:
    return f"{cfg.dashboards.title_prefix} / Cost"


# How the figures treat a GPU several executions hold at once, said on the panels that sum them.
SHARED_SPLIT = (
    "A GPU (or MIG instance) N executions hold at once, by time-slicing or MPS, is split 1/N to each at every "
    "moment: its GPU-hours billed, its work and its energy. NVML cannot tell the holders' work apart, and "
    "dcgm-exporter publishes the GPU's values once per holder, so an even split is the one that adds up: "
    "the rows sum to the GPUs' own totals, each GPU counted once. A MIG instance (or MI300 partition) counts its "
    "share of the GPU: its compute slices over those of the GPU's instances, held or free."
)


def render(cfg: Config) -> str:
    """The Cost dashboard as JSON text."""
    d = cfg.dashboards
    money = f"currency{d.currency}"  # Grafana's unit id for the currency, e.g. currencyUSD
    gpus, busy = catalog.MODEL_GPU_COUNT.select(), catalog.MODEL_GPU_UTILIZATION_SUM.select()
    sections = []
    for by, name in ((catalog.EXECUTION_LABEL, "execution"), (catalog.MODEL_LABEL, "GPU model")):
        billed = gpu_hours(gpus, [by])
        work = gpu_hours(busy, [by])
        sections.append(
            Section(f"Per {name}").add(
                table(
                    f"GPU-hours and cost per {name}",
                    [
                        query(billed),
                        query(work),
                        query(stacked(100 * work, "/", billed)),
                        query(billed_cost([by])),
                        query(energy_kwh([by])),
                    ],
                    "GPU-hours billed (GPUs held over time), GPU-hours of work (utilisation summed over time), "
                    "work as a percentage of billed, the billed cost at the configured price per model, and the "
                    "energy drawn (the energy counter's rise where exported, else board power integrated per "
                    f"minute). {SHARED_SPLIT}",
                    ["GPU-hours billed", "GPU-hours of work", "Efficiency (%)", f"Cost ({d.currency})", "Energy (kWh)"],
                    link=fleet.execution_link(cfg) if by == catalog.EXECUTION_LABEL else "",
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
                    query(aggregate("sum", None, gpus), "billed (held)"),
                    query(aggregate("sum", None, busy), "busy (utilisation summed)"),
                ],
                "GPUs held by executions against the GPU-equivalents they kept busy; the gap is paid idle time. "
                "A GPU several executions share counts once, split between them.",
            ),
        )
        .add(
            timeseries(
                f"Spend per hour ({d.currency})",
                money,
                [query(aggregate("sum", [catalog.MODEL_LABEL], priced(gpus)), MODEL_LEGEND)],
                "What the GPUs held cost per hour, per model, at the configured prices; a GPU several executions "
                "share counts once, split between them.",
            ),
        )
    )
    panels = house.layout([*sections, trend])
    return house.render(
        title(cfg),
        panels,
        [*queries.variables(cfg), queries.model_variable(cfg)],
        "GPU-hours billed against GPU-hours of actual work, and their cost, per execution and per GPU model.",
        time_from="now-7d",
        scope=queries.of_models(cfg),
    )
