"""``make bench-report``: the fleet view and the execution report over 1,000 executions.

A real Prometheus holds the recorded series of 1,000 executions of 2 GPUs each, spread over 7
days, as the recording rules would have written them at a 1-minute interval (the report reads
recorded series only, so the raw exporter data and the rules are left out: the rules' own cost is
``make bench``'s). Each case runs the pack's report code against it; the floor, measured in the
same run, is one bare query that reads every GPU sample of the window once (``count_over_time``
of the GPU utilisation series over 7 days). Medians of several runs, and
their ratio to the floor's median, are written to docs/benchmarks-report.md.

The data hold every series the report reads or its verdicts will read (the activity fields, the
GPU share, the recorded conditions), valued consistently with the config's thresholds. Where the
report does not read one of the series the work-truth verdicts need yet, each report case asks
for it beside the report (``VERDICT_QUERIES``), so the timings count the verdicts either way.
"""

from __future__ import annotations

import asyncio
import functools
import re
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from gpu_execution_pack import catalog
from gpu_execution_pack.catalog import EXECUTION_LABEL, HOST_LABEL, MODEL_LABEL, UUID_LABEL, Series
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.promql import render
from gpu_execution_pack.query.prometheus import PrometheusClient
from gpu_execution_pack.report import document
from gpu_execution_pack.report.figures import Scope, over

from bench.common import REPO, entry_parser
from harness.prometheus import Prometheus

DOC = REPO / "docs" / "benchmarks-report.md"
EXECUTIONS = 1000
GPUS_PER_EXECUTION = 2
MINUTES = 30  # each execution's length
DAYS = 7
INTERVAL = 60  # seconds: the rules' interval
RUNS = 7
CONFIG = {"rule_interval": "1m", "derived_rule_interval": "1m"}


PerSample = Callable[[int, int], float]  # a value by execution number and minute of the execution
TOTAL_BYTES = 80e9  # each GPU's usable memory


def gpu_values(cfg: Config) -> dict[Series, PerSample]:
    """Every per-GPU recorded series the report reads, by execution ``i`` and minute ``k``.

    A quarter of the executions idle, one in ten ends near full memory, one in seven and one in eleven are
    throttled (power, heat), one in nine stalls (kernels resident, engines idle), one in six does its maths
    without tensor cores, one in fifty shares its GPUs; the conditions follow from the config's thresholds
    as the rules would record them.
    """
    a, r = cfg.alerts, cfg.report

    def util(i: int, k: int) -> float:
        return 0.05 if i % 4 == 0 else 0.9

    def memory(i: int, k: int) -> float:
        return 0.5 + (0.49 if i % 10 == 0 and k > MINUTES - 5 else 0)

    def engine(i: int, k: int) -> float:
        return 0.02 if i % 9 == 0 else 0.8 * util(i, k)

    def tensor(i: int, k: int) -> float:
        return 0.0 if i % 6 == 0 else 0.3

    def share(i: int, k: int) -> float:
        return 0.5 if i % 50 == 0 else 1.0

    def stalled(i: int, k: int) -> float:
        return float(util(i, k) >= a.gpu_stalled.util_threshold and engine(i, k) < a.gpu_stalled.engine_threshold)

    def tensor_unused(i: int, k: int) -> float:
        return float(engine(i, k) >= r.tensor_engine_busy and tensor(i, k) < r.tensor_active_threshold)

    return {
        catalog.GPU_UTILIZATION: util,
        catalog.GPU_MEMORY_USED: lambda i, k: memory(i, k) * TOTAL_BYTES,
        catalog.GPU_MEMORY_TOTAL: lambda i, k: TOTAL_BYTES,
        catalog.GPU_MEMORY_UTILIZATION: memory,
        # The whole GPU's: its holder's own, the bench's GPUs never sharing memory with another.
        catalog.GPU_DEVICE_MEMORY_USED: lambda i, k: memory(i, k) * TOTAL_BYTES,
        catalog.GPU_DEVICE_MEMORY_UTILIZATION: memory,
        catalog.GPU_POWER: lambda i, k: 400.0,
        catalog.GPU_POWER_LIMIT: lambda i, k: 700.0,
        catalog.GPU_TEMPERATURE: lambda i, k: 60.0,
        catalog.GPU_LAST_XID: lambda i, k: 0.0,
        catalog.GPU_ENERGY: lambda i, k: 1e8 + 400.0 * 60 * k,
        catalog.GPU_GRAPHICS_ENGINE_ACTIVE: engine,
        catalog.GPU_TENSOR_ACTIVE: tensor,
        catalog.GPU_DRAM_ACTIVE: lambda i, k: 0.3,
        catalog.GPU_SHARE: share,
        catalog.GPU_WORKED: lambda i, k: util(i, k) * share(i, k),
        catalog.GPU_POWER_ATTRIBUTED: lambda i, k: 400.0 * share(i, k),
        # The seconds each sample stands for, as the rules measure them: the fleet view ranks on them.
        catalog.GPU_SAMPLE_SECONDS: lambda i, k: float(INTERVAL),
        catalog.GPU_POWER_THROTTLED: lambda i, k: 1.0 if i % 7 == 0 else 0.0,
        catalog.GPU_THERMAL_THROTTLED: lambda i, k: 1.0 if i % 11 == 0 else 0.0,
        catalog.GPU_STALLED: stalled,
        catalog.GPU_TENSOR_CORES_UNUSED: tensor_unused,
        catalog.GPU_MEMORY_HIGH: lambda i, k: float(memory(i, k) >= a.gpu_memory_high.threshold),
    }


def host_values() -> dict[Series, PerSample]:
    """Every per-host recorded series the report reads; one host per execution."""
    return {
        catalog.NODE_CPU_UTILIZATION: lambda i, k: 0.95 if i % 8 == 0 else 0.3,
        catalog.NODE_RAM_USED: lambda i, k: 64 * 2**30,
        catalog.NODE_RAM_TOTAL: lambda i, k: 256 * 2**30,
        catalog.NODE_RAM_UTILIZATION: lambda i, k: 0.25,
    }


def execution_values(cfg: Config) -> dict[Series, Callable[[int, int], float | None]]:
    """The per-execution conditions (None: no sample), from the per-GPU and per-host values above."""
    util, cpu = gpu_values(cfg)[catalog.GPU_UTILIZATION], host_values()[catalog.NODE_CPU_UTILIZATION]

    def low(i: int, k: int) -> bool:  # every GPU of an execution has the same utilisation here
        return util(i, k) < cfg.alerts.gpu_underutilized.threshold

    return {
        catalog.EXECUTION_UNDERUTILIZED: lambda i, k: float(low(i, k)),
        catalog.EXECUTION_CPU_WHILE_UNDERUTILIZED: lambda i, k: cpu(i, k) if low(i, k) else None,
    }


def openmetrics(cfg: Config, end: int, executions: int = EXECUTIONS) -> str:
    """The recorded series the report reads, for ``executions`` executions over the DAYS before ``end``, as
    OpenMetrics."""
    span = DAYS * 86400 - MINUTES * 60
    gpu, host, execution = gpu_values(cfg), host_values(), execution_values(cfg)
    lines: dict[str, list[str]] = {s.name: [] for s in (*gpu, *host, *execution)}
    start = end - DAYS * 86400
    for i in range(executions):
        first = start + (span * i // executions) // INTERVAL * INTERVAL
        eid, tenant, hostname = f"job-{i:05d}", f'{cfg.api.tenant_label}="team-{i % 5}"', f"node{i % 250:03d}"
        per_gpu = [
            f'{EXECUTION_LABEL}="{eid}",{tenant},{HOST_LABEL}="{hostname}",gpu="{g}",'
            f'{UUID_LABEL}="GPU-{i:05d}-{g}",{MODEL_LABEL}="NVIDIA H100 80GB HBM3"'
            for g in range(GPUS_PER_EXECUTION)
        ]
        for values, label_sets in (
            (gpu, per_gpu),
            (host, [f'{EXECUTION_LABEL}="{eid}",{HOST_LABEL}="{hostname}"']),
            (execution, [f'{EXECUTION_LABEL}="{eid}",{tenant}']),
        ):
            for series, value in values.items():
                for labels in label_sets:
                    for k in range(MINUTES):
                        if (v := value(i, k)) is not None:
                            lines[series.name].append(f"{series.name}{{{labels}}} {v} {first + k * INTERVAL}")
    out = []
    for name in sorted(lines):  # OpenMetrics wants a metric's samples together, in time order per series
        out += lines[name]
    return "\n".join(out) + "\n# EOF\n"


# One case: what it asks of Prometheus through the report's client.
Query = Callable[[PrometheusClient], Awaitable[Any]]
# What the work-truth figures and verdicts read, per GPU over the span: the activity means, the stalled and
# tensor-idle conditions' sums (recorded 0/1 series: cheap), and the GPU's smallest share (shared or not).
VERDICT_QUERIES: dict[Series, str] = {
    catalog.GPU_GRAPHICS_ENGINE_ACTIVE: "avg_over_time",
    catalog.GPU_TENSOR_ACTIVE: "avg_over_time",
    catalog.GPU_DRAM_ACTIVE: "avg_over_time",
    catalog.GPU_STALLED: "sum_over_time",
    catalog.GPU_TENSOR_CORES_UNUSED: "sum_over_time",
    catalog.GPU_SHARE: "min_over_time",
}


def through_client(url: str, query: Query) -> Any:
    """``query`` answered through a new client of the Prometheus at ``url``, closed afterwards."""

    async def go() -> Any:
        client = PrometheusClient(url, 120)
        try:
            return await query(client)
        finally:
            await client.close()

    return asyncio.run(go())


def asked_by(url: str, query: Query) -> list[str]:
    """The PromQL text of every query ``query`` sends."""
    asked: list[str] = []

    async def go(client: PrometheusClient) -> Any:
        instant, ranged = client.instant, client.range

        async def record_instant(text: str, at: float | None = None) -> list[dict[str, Any]]:
            asked.append(text)
            return await instant(text, at)

        async def record_range(text: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
            asked.append(text)
            return await ranged(text, start, end, step)

        client.instant, client.range = record_instant, record_range  # type: ignore[method-assign]
        return await query(client)

    through_client(url, go)
    return asked


def unread(asked: list[str]) -> list[Series]:
    """The VERDICT_QUERIES series no query in ``asked`` reads."""
    names = "|".join(re.escape(s.name) for s in VERDICT_QUERIES)
    read = re.compile(rf"(?<![a-zA-Z0-9_:])({names})(?![a-zA-Z0-9_:])")
    found = {m.group(1) for text in asked for m in read.finditer(text)}
    return [s for s in VERDICT_QUERIES if s.name not in found]


def with_verdicts(report: Query, scope: Scope, series: list[Series]) -> Query:
    """``report`` and, at the same time, a query over the span for each of ``series`` (the verdicts it does
    not read itself yet)."""
    window = f"{DAYS}d"

    async def both(client: PrometheusClient) -> Any:
        extra = [client.instant(render(over(VERDICT_QUERIES[s], scope.gpu(s), window))) for s in series]
        answers = await asyncio.gather(report(client), *extra)
        return answers[0]

    return both


def timed(runs: int, call: Callable[[], object]) -> list[float]:
    """The wall time of each of ``runs`` calls."""
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        call()
        out.append(time.perf_counter() - t)
    return out


FLEET = f"fleet view, {EXECUTIONS} executions over 7 days (report --since 7d)"


def cases(cfg: Config) -> dict[str, tuple[Query, Scope | None]]:
    """The cases by name, the floor first (the others' ratios are to it), each with the scope its verdict
    queries are asked in (None: the floor, which has none)."""
    floor = render(over("count_over_time", catalog.GPU_UTILIZATION.select(), f"{DAYS}d"))
    one = f"job-{EXECUTIONS // 2:05d}"
    return {
        "floor: one bare count_over_time over every GPU sample of 7 days": (lambda c: c.instant(floor), None),
        FLEET: (lambda c: document.fleet_summary(cfg, c, "7d", 20), Scope(cfg, None, None)),
        "fleet view, one tenant's 200 executions": (
            lambda c: document.fleet_summary(cfg, c, "7d", 20, tenant="team-1"),
            Scope(cfg, None, "team-1"),
        ),
        "one execution's report (report ID)": (
            lambda c: document.execution_summary(cfg, c, one),
            Scope(cfg, one, None),
        ),
    }


def measure(url: str, cfg: Config) -> tuple[dict[str, float], list[Series], int]:
    """Each case's median seconds against the Prometheus at ``url``, after one warm-up run; the verdict
    series the report does not read yet, asked beside it; and how many queries the fleet view sends."""
    fleet = through_client(url, lambda c: document.fleet_summary(cfg, c, "7d", 20))
    assert fleet["executions"] == EXECUTIONS, fleet["executions"]
    medians: dict[str, float] = {}
    added: list[Series] = []
    fleet_queries = 0
    for name, (report, scope) in cases(cfg).items():
        query = report
        if scope is not None:
            asked = asked_by(url, report)
            added = unread(asked)
            query = with_verdicts(report, scope, added)
            fleet_queries = len(asked) + len(added) if name == FLEET else fleet_queries
        call = functools.partial(through_client, url, query)
        call()  # warm up Prometheus' caches and the page cache alike for every case
        medians[name] = statistics.median(timed(RUNS, call))
        print(f"{name}: {medians[name] * 1000:.0f} ms", flush=True)
    return medians, added, fleet_queries


TARGET = 5.0  # the most the fleet view may cost, as a multiple of the floor


def render_doc(medians: dict[str, float], added: list[Series], fleet_queries: int) -> str:
    """docs/benchmarks-report.md from the cases' medians, the verdict series asked beside the report and the
    number of queries the fleet view sends."""
    floor = next(iter(medians.values()))
    rows = [f"| {name} | {seconds * 1000:.0f} ms | {seconds / floor:.1f}x |" for name, seconds in medians.items()]
    beside = (
        "Every case reads the work-truth verdicts' series (activity, stalled, tensor cores unused, GPU share) "
        "through the report itself."
        if not added
        else "The report does not read every series of the work-truth verdicts yet; each report case asks for "
        + ", ".join(f"`{VERDICT_QUERIES[s]}` of `{s.name}`" for s in added)
        + " over the span at the same time, so the timings include them."
    )
    return "\n".join(
        [
            "<!-- Written by `make bench-report` (bench/report.py). -->",
            "# Benchmark: the execution report at fleet scale",
            "",
            f"{EXECUTIONS} executions of {GPUS_PER_EXECUTION} GPUs, {MINUTES} minutes each, spread over {DAYS} "
            f"days, as recorded series at a {INTERVAL} s rule interval in a real Prometheus (Debian's 2.42) "
            "on this machine. Medians of "
            f"{RUNS} runs after a warm-up; the ratio is to the floor measured in the same run, a bare query "
            f"that reads every GPU sample of the window once. The fleet view's target is {TARGET:.0f}x.",
            "",
            "| case | median | against the floor |",
            "|---|---|---|",
            *rows,
            "",
            "The fleet view ranks every execution on a few queries (the seconds each GPU sample stands for "
            "summed per execution, and weighted by the utilisation's mean over each five minutes; the share and "
            "worked series only where a GPU was shared), then runs the report's "
            "queries, grouped by execution, for its top rows only (named in a regex matcher), so its cost "
            "grows with the samples in the window and with `top`, not with every execution's figures. The "
            "figures are `*_over_time` of recorded series: the time over the out-of-memory threshold, under "
            "the waste threshold and the host CPU meanwhile are recorded as conditions (0/1 series) instead "
            "of subqueries that re-evaluated a comparison at every step of the span. The fleet view sends "
            f"{fleet_queries} queries.",
            "",
            beside,
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """``make bench-report``: backfill the executions, time each case, write docs/benchmarks-report.md."""
    entry_parser("bench.report", __doc__).parse_args(argv)
    cfg = config_from_mapping(CONFIG)
    end = int(time.time()) // 60 * 60 - 15 * 60
    with tempfile.TemporaryDirectory() as tmp:
        server = Prometheus(Path(tmp))
        try:
            print(f"backfilling {EXECUTIONS} executions of {GPUS_PER_EXECUTION} GPUs over {DAYS} days", flush=True)
            server.load_openmetrics(openmetrics(cfg, end), [], end - DAYS * 86400, end, max_block="24h")
            medians, added, fleet_queries = measure(server.url, cfg)
        finally:
            server.stop()
    DOC.write_text(render_doc(medians, added, fleet_queries))
    print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
