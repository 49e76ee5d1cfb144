"""The Fleet dashboard: which executions waste GPUs, stall, share GPUs, throttle or risk OOM, and utilisation by
model."""

from __future__ import annotations

from collections.abc import Iterable

from gpu_execution_pack import catalog
from gpu_execution_pack.catalog import Series
from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.dashboards import execution, house, queries
from gpu_execution_pack.dashboards.house import Section, stat, table, timeseries
from gpu_execution_pack.dashboards.queries import MODEL_LEGEND, energy_kwh, gpu_hours, over_range, query
from gpu_execution_pack.promql import Expr, Paren, aggregate, any_of, call, on


def title(cfg: Config) -> str:
    return f"{cfg.dashboards.title_prefix} / Fleet"


def execution_link(cfg: Config) -> str:
    """The Execution dashboard for the row's execution (in the same cluster), over the same time range."""
    uid = house.uid_for(execution.title(cfg))
    variables = (
        f"var-{queries.VARIABLE}=${{__data.fields.{catalog.EXECUTION_LABEL}}}"
        f"&var-{house.DATASOURCE_VARIABLE}=${{{house.DATASOURCE_VARIABLE}}}"
    )
    if cluster_scope(cfg).enabled:
        variables += f"&var-{queries.CLUSTER_VARIABLE}=${{{queries.CLUSTER_VARIABLE}}}"
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


def per_device(series: Series, by: Iterable[str] = ()) -> Expr:
    """``series`` once per GPU or MIG instance (and ``by`` the labels given), however many executions hold it:
    a time-sliced or MPS GPU is published once per holder, with the same values."""
    return aggregate("max", (*catalog.DEVICE_LABELS, *by), series.select())


def now(cfg: Config) -> Section:
    """The top row: executions, GPUs and hosts in use now, and the fleet's utilisation."""
    held = catalog.EXECUTION_GPU_COUNT
    hosts = or_zero(aggregate("count", None, aggregate("count", [catalog.HOST_LABEL], catalog.NODE_GPU_COUNT.select())))
    devices = or_zero(aggregate("count", None, per_device(catalog.GPU_PRESENCE)))
    utilisation = "Mean utilisation over every GPU executions hold, a shared GPU counted once."
    return (
        Section("Now")
        .add(stat("Executions", "none", [query(over_fleet("count", held))], "Executions holding GPUs."), 6, 4)
        .add(
            stat("GPUs held", "none", [query(devices)], "GPUs or MIG instances held, a shared one counted once."), 6, 4
        )
        .add(
            stat(
                "Fleet utilisation",
                "percentunit",
                [query(aggregate("avg", None, per_device(catalog.GPU_UTILIZATION)))],
                utilisation,
            ),
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
    """GPUs at the alerts' thresholds now beside utilisation per GPU model, then energy per GPU model."""
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
            timeseries(
                "Utilisation by GPU model",
                "percentunit",
                [
                    query(
                        aggregate(
                            "avg", [catalog.MODEL_LABEL], per_device(catalog.GPU_UTILIZATION, [catalog.MODEL_LABEL])
                        ),
                        MODEL_LEGEND,
                    )
                ],
                "Mean utilisation of the GPUs executions hold, per model, a shared GPU counted once.",
                max_value=1,
            ),
        )
        .add(
            stat(
                "Energy by GPU model",
                "kwatth",
                [query(energy_kwh([catalog.MODEL_LABEL]), MODEL_LEGEND)],
                "Energy of the GPUs executions held in the time range, per model: the energy counter's rise where "
                "exported, else board power integrated per minute; a GPU several executions share split between "
                "them, a MIG instance counted in its share of the GPU.",
                text_mode="value_and_name",
            ),
            24,
            4,
        )
    )


TOP_DISAGREEING = 10  # rows of the disagreement table


def disagreement(cfg: Config) -> Section:
    """The GPUs whose utilisation and engine activity disagree most over the time range: kernels resident
    while the engines idle (a hung collective, a spin-wait), each a link to its execution."""
    stall = cfg.alerts.gpu_stalled
    util = over_range("avg_over_time", catalog.GPU_UTILIZATION.select())
    engine = over_range("avg_over_time", catalog.GPU_GRAPHICS_ENGINE_ACTIVE.select())
    gap = call("topk", TOP_DISAGREEING, 100 * Paren(util - engine))
    stalled = call("sum_over_time", queries.per_minute(catalog.GPU_STALLED.select()))
    columns = {
        "Gap (points)": gap,
        "Mean utilisation (%)": Paren(100 * util).and_(gap),
        "Mean engine activity (%)": Paren(100 * engine).and_(gap),
        "Minutes stalled": stalled.and_(gap),
    }
    return Section("Work truth").add(
        table(
            "GPUs by utilisation over engine activity",
            [query(e) for e in columns.values()],
            "The GPUs whose mean utilisation (time with a kernel resident) most exceeds their mean graphics-engine "
            "activity (time the engines worked) over the time range, in percentage points, and the minutes each "
            f"met the stalled alert's condition (utilisation at or above {stall.util_threshold:.0%}, engine under "
            f"{stall.engine_threshold:.0%}). A large gap is a GPU that looks busy and is not: a hung collective or a "
            "spin-wait. GPUs without the engine activity field are not listed. Click a row to open the execution.",
            list(columns),
            link=execution_link(cfg),
            sort_by=("Gap (points)", True),
        ),
        width=24,
        height=10,
    )


def shared(cfg: Config) -> Section:
    """The GPUs several executions held at once in the time range (time-slicing, MPS), and by whom."""
    share = catalog.GPU_SHARE.select()
    lowest = over_range("min_over_time", share).lt(1)
    minutes = call("count_over_time", queries.per_minute(share.lt(1)))
    # Per series, the tenant label kept; a MIG instance in its share of the GPU, as the cost rules bill it (a whole
    # GPU over history recorded without the share, as they billed it then).
    billed = Paren(queries.gpu_minutes(catalog.in_gpus(catalog.GPU_SHARE, unrecorded_whole=True)) / 60).and_(lowest)
    devices = or_zero(aggregate("count", None, aggregate("count", catalog.DEVICE_LABELS, lowest)))
    split = (
        "A GPU N executions hold at once is split 1/N to each at every moment (NVML cannot tell their work "
        "apart under time-slicing or MPS), so GPU-hours, work and energy add up to the GPU's own; a MIG "
        "instance's GPU-hours are its share of the GPU's."
    )
    return (
        Section("Shared GPUs")
        .add(
            stat(
                "GPUs shared",
                "none",
                [query(devices)],
                f"GPUs or MIG instances held by more than one execution at once in the time range. {split}",
            ),
            4,
            10,
        )
        .add(
            table(
                "Executions on shared GPUs",
                [query(lowest), query(minutes), query(billed)],
                "Each execution that shared a GPU in the time range, a row per execution and GPU (rows of one "
                "UUID are the executions that shared it): its lowest share (1/N for N holders), the minutes "
                f"it shared the GPU, and the GPU-hours billed to it. {split} Click a row to open the execution.",
                ["Lowest share", "Minutes shared", "GPU-hours billed"],
                link=execution_link(cfg),
                sort_by=(catalog.UUID_LABEL, False),
            ),
            20,
            10,
        )
    )


def render(cfg: Config) -> str:
    """The Fleet dashboard as JSON text."""
    return house.render(
        title(cfg),
        house.layout([now(cfg), waste(cfg), disagreement(cfg), shared(cfg), health(cfg)]),
        [*queries.variables(cfg), queries.model_variable(cfg)],
        "Every execution at once: waste, GPUs that look busy and are not, shared GPUs, throttling, OOM risk and "
        "utilisation by GPU model.",
        scope=queries.of_models(cfg),
    )
