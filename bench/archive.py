"""``make bench-archive``: how long ``archive`` takes per execution (for a day of 10,000), and the archive's size.

A real Prometheus holds the recorded series of N executions of 2 GPUs each (``bench.report``'s data: the
series the report and the endpoint read, as the rules would have written them at 1-minute intervals, 30
minutes per execution), spread over ``bench.report.DAYS`` days and ended 15 minutes ago. Measured in one run:

- the floor: bare queries that read every recorded sample of the window once (``count_over_time`` of each
  series name the data hold, summed, all at once), median of RUNS;
- the batched archiver (``archive_window``, ``archive.batch``): RUNS passes over the whole window, each
  into a new SQLite file; the median, per execution;
- the per-execution path (``batch_size=1``: the report's own ``execution_summary`` per execution, as
  before batching) once over the last day only (a seventh of the executions): per execution;
- the SQLite file's size per execution; with ``--postgres``, one batched pass into a throwaway PostgreSQL.

The figures go to docs/benchmarks.json (``archive``) and docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from gpu_execution_pack.archive.archiver import BATCH, archive_window
from gpu_execution_pack.archive.store import Store
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.promql import aggregate, render, selector
from gpu_execution_pack.query.prometheus import PrometheusClient
from gpu_execution_pack.report.figures import over

from bench import report
from bench.common import entry_parser, log
from bench.document import add_figures
from harness.postgres import Postgres
from harness.prometheus import Prometheus

EXECUTIONS = 1000
RUNS = 3
PER_DAY = 10_000  # the fleet: executions ended per day


def one_pass(cfg: Config, url: str, prometheus_url: str, window_seconds: float, batch_size: int) -> tuple[float, int]:
    """Seconds for one archive pass over the window into the archive at ``url``, and the records written."""
    store = Store.open(url)
    assert store is not None

    async def run() -> int:
        client = PrometheusClient(prometheus_url, 600)
        try:
            return (await archive_window(cfg, client, store, window_seconds, batch_size=batch_size)).archived
        finally:
            await client.close()

    started = time.perf_counter()
    try:
        archived = asyncio.run(run())
    finally:
        store.close()
    return time.perf_counter() - started, archived


def floor_seconds(cfg: Config, prometheus_url: str, window_seconds: float) -> float:
    """The bare query's median seconds: every recorded sample of the window read once, one number back."""
    series = sorted({s.name for s in (*report.gpu_values(cfg), *report.host_values(), *report.execution_values(cfg))})
    # One query per series name (count_over_time drops the name: two names in one vector would clash), at once.
    queries = [render(aggregate("sum", None, over("count_over_time", selector(n), f"{int(window_seconds)}s")))
               for n in series]  # fmt: skip

    async def run() -> None:
        client = PrometheusClient(prometheus_url, 600)
        try:
            await asyncio.gather(*(client.instant(q) for q in queries))
        finally:
            await client.close()

    asyncio.run(run())  # warm-up
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        asyncio.run(run())
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(tmp: Path, executions: int, postgres: bool) -> dict:
    """Every figure of one run (module docstring)."""
    cfg = config_from_mapping(report.CONFIG)
    end = int(time.time()) // 60 * 60 - 15 * 60
    window = report.DAYS * 86400 + 3600
    server = Prometheus(tmp / "prometheus")
    try:
        log(f"backfilling {executions} executions over {report.DAYS} days")
        server.load_openmetrics(
            report.openmetrics(cfg, end, executions), [], end - report.DAYS * 86400, end, max_block="24h"
        )
        floor = floor_seconds(cfg, server.url, window)
        log(f"floor: {floor:.2f} s")
        batched, size, archived = [], 0, 0
        for run in range(RUNS):
            url = str(tmp / f"archive-{run}.sqlite")
            archive_cfg = config_from_mapping({**report.CONFIG, "archive": {"url": url, "ended_after": "5m"}})
            seconds, archived = one_pass(archive_cfg, url, server.url, window, BATCH)
            batched.append(seconds)
            size = Path(url).stat().st_size
            log(f"batched pass {run + 1}: {archived} records in {seconds:.1f} s")
        url = str(tmp / "per-execution.sqlite")
        archive_cfg = config_from_mapping({**report.CONFIG, "archive": {"url": url, "ended_after": "5m"}})
        single_seconds, single = one_pass(archive_cfg, url, server.url, 86400 + 3600, 1)
        log(f"per-execution pass over the last day: {single} records in {single_seconds:.1f} s")
        figures = {
            "executions": executions,
            "runs": RUNS,
            "batch": BATCH,
            "load_average": round(os.getloadavg()[0], 1),
            "floor_seconds": round(floor, 3),
            "batched_seconds": [round(s, 2) for s in batched],
            "archived": archived,
            "per_execution_records": single,
            "per_execution_seconds": round(single_seconds, 2),
            "sqlite_bytes": size,
        }
        if postgres:
            database = Postgres()
            database.start()
            try:
                pg_cfg = config_from_mapping({**report.CONFIG, "archive": {"url": database.url, "ended_after": "5m"}})
                seconds, _ = one_pass(pg_cfg, database.url, server.url, window, BATCH)
                figures["postgresql_seconds"] = round(seconds, 2)
                log(f"postgresql: {seconds:.1f} s")
            finally:
                database.stop()
        return figures
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = entry_parser("bench.archive", __doc__)
    parser.add_argument("--executions", type=int, default=EXECUTIONS)
    parser.add_argument("--postgres", action="store_true", help="also archive into a throwaway PostgreSQL")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        add_figures("archive", measure(Path(tmp), args.executions, args.postgres))
    print("wrote docs/benchmarks.md and docs/benchmarks.json", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
