"""The Execution dashboard: one execution's GPUs, memory, power, clocks, PCIe and hosts."""

from __future__ import annotations

from generator.config import Config
from generator.dashboards import house
from generator.dashboards.house import Query, Section, stat, timeseries

VARIABLE = "execution_id"
SEL = f'{{execution_id="${VARIABLE}"}}'
GPU_LEGEND = "{{hostname}} GPU {{gpu}} {{GPU_I_ID}}"


def gpu_hours(record: str) -> str:
    """GPU-hours over the dashboard's range: a per-minute subquery summed, so the rule interval does not matter."""
    return f"sum(sum_over_time({record}{SEL}[$__range:1m])) / 60"


def billed_cost() -> str:
    return (
        f"sum(\n  sum_over_time(execution_model:gpu_count{SEL}[$__range:1m]) / 60\n"
        "  * on (modelName) group_left ()\n  gpu_model:price_per_gpu_hour\n)"
    )


def title(cfg: Config) -> str:
    return f"{cfg.dashboards.title_prefix} / Execution"


def render(cfg: Config) -> str:
    a, d = cfg.alerts, cfg.dashboards
    overview = Section("Overview")
    for name, unit, expr, text_mode, desc in (
        (
            "Duration",
            "s",
            f"max(count_over_time(execution:gpu_count{SEL}[$__range:1m])) * 60",
            "value",
            "Wall-clock time the execution held GPUs within the time range, to the minute.",
        ),
        (
            "GPUs",
            "none",
            f"max(max_over_time(execution:gpu_count{SEL}[$__range]))",
            "value",
            "GPUs or MIG instances held (the most at any time).",
        ),
        ("Hosts", "none", f"max(max_over_time(execution:host_count{SEL}[$__range]))", "value", "Hosts it ran on."),
        (
            "GPU model",
            "none",
            f"group by (modelName) (max_over_time(execution_model:gpu_count{SEL}[$__range]))",
            "name",
            "The GPU models it held.",
        ),
        (
            "Mean utilisation",
            "percentunit",
            f"avg(avg_over_time(execution:gpu_utilization_ratio:avg{SEL}[$__range]))",
            "value",
            "Mean GPU utilisation over its GPUs and the time range.",
        ),
        (
            "Peak GPU memory",
            "percentunit",
            f"max(max_over_time(execution:gpu_memory_utilization_ratio:max{SEL}[$__range]))",
            "value",
            "Highest share of a GPU's memory it used.",
        ),
        (
            "GPU-hours billed",
            "none",
            gpu_hours("execution_model:gpu_count"),
            "value",
            "GPUs held, integrated over time.",
        ),
        (
            "GPU-hours of work",
            "none",
            gpu_hours("execution_model:gpu_utilization_ratio:sum"),
            "value",
            "Utilisation summed over its GPUs, integrated over time.",
        ),
        (
            "Efficiency",
            "percentunit",
            f"{gpu_hours('execution_model:gpu_utilization_ratio:sum')}\n/\n{gpu_hours('execution_model:gpu_count')}",
            "value",
            "GPU-hours of work per GPU-hour billed.",
        ),
        (
            f"Cost ({d.currency})",
            f"currency{d.currency}",
            billed_cost(),
            "value",
            "GPU-hours billed times the price of each model (dashboards.price_per_gpu_hour).",
        ),
    ):
        overview.add(stat(name, unit, [Query(expr, "{{modelName}}")], desc, text_mode), width=4, height=4)

    utilisation = Section("Utilisation").add(
        timeseries(
            "GPU utilisation",
            "percentunit",
            [Query(f"execution_gpu:gpu_utilization_ratio{SEL}", GPU_LEGEND)],
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
                [Query(f"execution_gpu:gpu_memory_utilization_ratio{SEL}", GPU_LEGEND)],
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
                    Query(f"execution_gpu:gpu_memory_used_bytes{SEL}", f"used {GPU_LEGEND}"),
                    Query(f"execution_gpu:gpu_memory_total_bytes{SEL}", f"usable {GPU_LEGEND}"),
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
                    Query(f"execution_gpu:gpu_power_watts{SEL}", f"power {GPU_LEGEND}"),
                    Query(f"execution_gpu:gpu_power_limit_watts{SEL}", f"limit {GPU_LEGEND}"),
                ],
                "Board power and the enforced power limit: power pressed against the limit means power capping.",
            ),
            width=8,
        )
        .add(
            timeseries(
                "Power / limit",
                "percentunit",
                [Query(f"execution_gpu:gpu_power_to_limit_ratio{SEL}", GPU_LEGEND)],
                "Power as a share of the limit; the line is the power-throttling threshold.",
                threshold=a.power_throttling.threshold,
            ),
            width=8,
        )
        .add(
            timeseries(
                "Temperature",
                "celsius",
                [Query(f"execution_gpu:gpu_temperature_celsius{SEL}", GPU_LEGEND)],
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
                [
                    Query(f"execution_gpu:gpu_sm_clock_hertz{SEL}", GPU_LEGEND),
                    Query(f"execution_gpu:gpu_sm_clock_peak_hertz{SEL}", f"peak {GPU_LEGEND}"),
                ],
                "SM clock and its peak (max clock where exported): below its peak at the power limit means capping.",
            ),
        )
        .add(
            timeseries(
                "Memory clock",
                "hertz",
                [Query(f"execution_gpu:gpu_memory_clock_hertz{SEL}", GPU_LEGEND)],
                "Memory clock.",
            ),
        )
    )
    pcie = Section("PCIe").add(
        timeseries(
            "PCIe throughput",
            "Bps",
            [
                Query(f"execution_gpu:gpu_pcie_rx_bytes_per_second{SEL}", f"RX (host to GPU) {GPU_LEGEND}"),
                Query(f"execution_gpu:gpu_pcie_tx_bytes_per_second{SEL}", f"TX (GPU to host) {GPU_LEGEND}"),
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
                [
                    Query(f"execution_node:system_ram_used_bytes{SEL}", "used {{hostname}}"),
                    Query(f"execution_node:system_ram_total_bytes{SEL}", "total {{hostname}}"),
                ],
                "RAM used (total minus available) against total, per host; shared with other executions on the host.",
            ),
        )
        .add(
            timeseries(
                "Host CPU",
                "percentunit",
                [Query(f"execution_node:system_cpu_utilization_ratio{SEL}", "{{hostname}}")],
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
        "expr": f'ALERTS{{alertstate="firing", execution_id="${VARIABLE}"}}',
        "titleFormat": "{{alertname}}",
        "textFormat": "{{hostname}} GPU {{gpu}}",
        "step": "1m",
    }
    variables = [
        house.datasource_variable(d.datasource_name),
        house.query_variable(VARIABLE, "Execution", "label_values(execution:gpu_count, execution_id)"),
    ]
    panels = house.layout([overview, utilisation, memory, power, clocks, pcie, host])
    return house.render(
        title(cfg),
        panels,
        variables,
        "One execution: whether it used the GPUs it was billed for, OOM risk, throttling, and its hosts.",
        annotations=[alerts],
    )
