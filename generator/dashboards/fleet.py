"""The Fleet dashboard: which executions waste GPUs, throttle or risk OOM, and utilisation by model."""

from __future__ import annotations

from generator.config import Config
from generator.dashboards import execution, house
from generator.dashboards.house import Query, Section, stat, table, timeseries


def title(cfg: Config) -> str:
    return f"{cfg.dashboards.title_prefix} / Fleet"


def execution_link(cfg: Config) -> str:
    """The Execution dashboard for the row's execution, over the same time range."""
    uid = house.uid_for(execution.title(cfg))
    variables = "var-execution_id=${__data.fields.execution_id}&var-datasource=${datasource}"
    return f"/d/{uid}?{variables}&${{__url_time_range}}"


def render(cfg: Config) -> str:
    a = cfg.alerts
    low = a.gpu_underutilized.threshold
    wasted = (
        f"sum by (execution_id) (\n  sum_over_time(\n    (execution_model:gpu_count and on (execution_id) "
        f"(execution:gpu_utilization_ratio:avg < {low}))[$__range:1m]\n  )\n) / 60"
    )
    billed = "sum by (execution_id) (sum_over_time(execution_model:gpu_count[$__range:1m])) / 60"
    overview = (
        Section("Now")
        .add(stat("Executions", "none", [Query("count(execution:gpu_count)")], "Executions holding GPUs."), 6, 4)
        .add(stat("GPUs held", "none", [Query("sum(execution:gpu_count)")], "GPUs or MIG instances held."), 6, 4)
        .add(
            stat(
                "Fleet utilisation",
                "percentunit",
                [Query("avg(execution_gpu:gpu_utilization_ratio)")],
                "Mean utilisation over every GPU an execution holds.",
            ),
            6,
            4,
        )
        .add(
            stat("Hosts", "none", [Query("count(count by (hostname) (execution_node:gpu_count))")], "Hosts in use."),
            6,
            4,
        )
    )
    waste = Section("Waste").add(
        table(
            f"Executions by GPU-hours below {low * 100:g} % utilisation",
            [Query(f"topk(20, {wasted})"), Query(billed)],
            "GPU-hours each execution held while its mean utilisation was under the waste alert's threshold, "
            "against all GPU-hours it held in the time range. Click a row to open the execution.",
            ["GPU-hours wasted", "GPU-hours billed"],
            link=execution_link(cfg),
        ),
        width=24,
        height=10,
    )
    health = (
        Section("Throttling and OOM risk")
        .add(
            timeseries(
                "GPUs throttling or at OOM risk",
                "none",
                [
                    Query(
                        f"count(execution_gpu:gpu_power_to_limit_ratio >= {a.power_throttling.threshold})",
                        "at power limit",
                    ),
                    Query(
                        f"count(execution_gpu:gpu_temperature_celsius >= {a.thermal_throttling.threshold_celsius:g})",
                        "hot",
                    ),
                    Query(
                        f"count(execution_gpu:gpu_memory_utilization_ratio >= {a.gpu_memory_high.threshold})",
                        "memory high",
                    ),
                ],
                "GPUs at the alert thresholds now: power at the limit, temperature, memory nearly full.",
            ),
        )
        .add(
            timeseries(
                "Utilisation by GPU model",
                "percentunit",
                [Query("avg by (modelName) (execution_gpu:gpu_utilization_ratio)", "{{modelName}}")],
                "Mean utilisation of the GPUs executions hold, per model.",
                max_value=1,
            ),
        )
    )
    panels = house.layout([overview, waste, health])
    return house.render(
        title(cfg),
        panels,
        [house.datasource_variable(cfg.dashboards.datasource_name)],
        "Every execution at once: waste, throttling, OOM risk and utilisation by GPU model.",
    )
