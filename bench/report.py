"""``make bench-report``: the fleet view and the execution report over 1,000 executions.

A real Prometheus holds the recorded series of 1,000 executions of 2 GPUs each, spread over 7
days, as the recording rules would have written them at a 1-minute interval (the report reads
recorded series only, so the raw exporter data and the rules are left out: the rules' own cost is
``make bench``'s). Each case runs the pack's report code against it; the floor, measured in the
same run, is one bare query that reads every GPU sample of the window once (``count_over_time``
of the GPU utilisation series over 7 days). Medians of several runs, and
their ratio to the floor's median, are written to docs/benchmarks-report.md.
"""

from __future__ import annotations

import asyncio
import functools
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.query.prometheus import PrometheusClient
from gpu_execution_pack.report import document

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


def openmetrics(end: int) -> str:
    """The recorded series the report reads, for every execution, as OpenMetrics."""
    span = DAYS * 86400 - MINUTES * 60
    gpu_series = {
        catalog.GPU_UTILIZATION.name: lambda i, k: 0.05 if i % 4 == 0 else 0.9,
        catalog.GPU_MEMORY_USED.name: lambda i, k: 40e9,
        catalog.GPU_MEMORY_UTILIZATION.name: lambda i, k: 0.5 + (0.49 if i % 10 == 0 and k > MINUTES - 5 else 0),
        catalog.GPU_POWER.name: lambda i, k: 400.0,
        catalog.GPU_POWER_LIMIT.name: lambda i, k: 700.0,
        catalog.GPU_TEMPERATURE.name: lambda i, k: 60.0,
        catalog.GPU_LAST_XID.name: lambda i, k: 0.0,
        catalog.GPU_ENERGY.name: lambda i, k: 1e8 + 400.0 * 60 * k,
        catalog.GPU_POWER_THROTTLED.name: lambda i, k: 1.0 if i % 7 == 0 else 0.0,
        catalog.GPU_THERMAL_THROTTLED.name: lambda i, k: 0.0,
    }
    host_series = {
        catalog.NODE_CPU_UTILIZATION.name: lambda i, k: 0.95 if i % 8 == 0 else 0.3,
        catalog.NODE_RAM_USED.name: lambda i, k: 64 * 2**30,
        catalog.NODE_RAM_TOTAL.name: lambda i, k: 256 * 2**30,
        catalog.NODE_RAM_UTILIZATION.name: lambda i, k: 0.25,
    }
    lines: dict[str, list[str]] = {name: [] for name in (*gpu_series, *host_series)}
    start = end - DAYS * 86400
    for i in range(EXECUTIONS):
        first = start + (span * i // EXECUTIONS) // INTERVAL * INTERVAL
        host = f"node{i % 250:03d}"
        for g in range(GPUS_PER_EXECUTION):
            labels = (
                f'execution_id="job-{i:05d}",namespace="team-{i % 5}",hostname="{host}",gpu="{g}",'
                f'UUID="GPU-{i:05d}-{g}",modelName="NVIDIA H100 80GB HBM3"'
            )
            for name, value in gpu_series.items():
                lines[name] += [f"{name}{{{labels}}} {value(i, k)} {first + k * INTERVAL}" for k in range(MINUTES)]
        labels = f'execution_id="job-{i:05d}",hostname="{host}"'
        for name, value in host_series.items():
            lines[name] += [f"{name}{{{labels}}} {value(i, k)} {first + k * INTERVAL}" for k in range(MINUTES)]
    out = []
    for name in sorted(lines):  # OpenMetrics wants a metric's samples together, in time order per series
        out += lines[name]
    return "\n".join(out) + "\n# EOF\n"


# One case: what it asks of Prometheus through the report's client.
Query = Callable[[PrometheusClient], Awaitable[Any]]


def through_client(url: str, query: Query) -> Any:
    """``query`` answered through a new client of the Prometheus at ``url``, closed afterwards."""

    async def go() -> Any:
        client = PrometheusClient(url, 120)
        try:
            return await query(client)
        finally:
            await client.close()

    return asyncio.run(go())


def timed(runs: int, call: Callable[[], object]) -> list[float]:
    """The wall time of each of ``runs`` calls."""
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        call()
        out.append(time.perf_counter() - t)
    return out


def cases(cfg: Config) -> dict[str, Query]:
    """The cases by name, the floor first (the others' ratios are to it)."""
    floor_query = f"count_over_time({catalog.GPU_UTILIZATION.name}[{DAYS}d])"
    return {
        "floor: one bare count_over_time over every GPU sample of 7 days": lambda c: c.instant(floor_query),
        f"fleet view, {EXECUTIONS} executions over 7 days (report --since 7d)": lambda c: document.fleet_summary(
            cfg, c, "7d", 20
        ),
        "fleet view, one tenant's 200 executions": lambda c: document.fleet_summary(cfg, c, "7d", 20, tenant="team-1"),
        "one execution's report (report ID)": lambda c: document.execution_summary(
            cfg, c, f"job-{EXECUTIONS // 2:05d}"
        ),
    }


def measure(url: str, cfg: Config) -> dict[str, float]:
    """Each case's median seconds against the Prometheus at ``url``, after one warm-up run."""
    fleet = through_client(url, lambda c: document.fleet_summary(cfg, c, "7d", 20))
    assert fleet["executions"] == EXECUTIONS, fleet["executions"]
    medians = {}
    for name, query in cases(cfg).items():
        call = functools.partial(through_client, url, query)
        call()  # warm up Prometheus' caches and the page cache alike for every case
        medians[name] = statistics.median(timed(RUNS, call))
        print(f"{name}: {medians[name] * 1000:.0f} ms", flush=True)
    return medians


def write_doc(medians: dict[str, float]) -> None:
    """docs/benchmarks-report.md from the cases' medians."""
    floor = next(iter(medians.values()))
    rows = [f"| {name} | {seconds * 1000:.0f} ms | {seconds / floor:.1f}x |" for name, seconds in medians.items()]
    DOC.write_text(
        "\n".join(
            [
                "<!-- Written by `make bench-report` (bench/report.py). -->",
                "# Benchmark: the execution report at fleet scale",
                "",
                f"{EXECUTIONS} executions of {GPUS_PER_EXECUTION} GPUs, {MINUTES} minutes each, spread over {DAYS} "
                f"days, as recorded series at a {INTERVAL} s rule interval in a real Prometheus (Debian's 2.42) "
                "on this machine. Medians of "
                f"{RUNS} runs after a warm-up; the ratio is to the floor measured in the same run, a bare query "
                "that reads every GPU sample of the window once.",
                "",
                "| case | median | against the floor |",
                "|---|---|---|",
                *rows,
                "",
                "The fleet view runs the report's queries once for all executions (grouped by execution, not "
                "one query per execution), so its cost grows with the samples in the window, not with "
                "round trips per execution.",
                "",
            ]
        )
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
            server.load_openmetrics(openmetrics(end), [], end - DAYS * 86400, end, max_block="24h")
            medians = measure(server.url, cfg)
        finally:
            server.stop()
    write_doc(medians)
    print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
