"""``python -m bench.archive``: how long ``archive`` takes for a day of 10,000 executions, and the archive's size.

A real Prometheus holds the recorded series of N executions of 2 GPUs each (``bench.report``'s data: the
series the report and the endpoint read, as the rules would have written them at 1-minute intervals),
spread over ``bench.report.DAYS`` days and ended 15 minutes ago. One ``archive`` pass over the whole
window writes every record into a new SQLite file and, with ``--postgres``, into a throwaway PostgreSQL;
the time of each pass, per execution and for N, and the archive's size per execution are printed.
The figures in docs/archive.md come from it.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from gpu_execution_pack.archive.archiver import archive_window
from gpu_execution_pack.archive.store import Store
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.query.prometheus import PrometheusClient

from bench import report
from bench.common import entry_parser
from harness.postgres import Postgres
from harness.prometheus import Prometheus

EXECUTIONS = 10_000


def one_pass(url: str, prometheus_url: str, window_seconds: float) -> tuple[float, int]:
    """Seconds for one archive pass over the window into the archive at ``url``, and the records written."""
    cfg = config_from_mapping({**report.CONFIG, "archive": {"url": url, "ended_after": "5m"}})
    store = Store.open(url)
    assert store is not None

    async def run() -> int:
        client = PrometheusClient(prometheus_url, 600)
        try:
            return (await archive_window(cfg, client, store, window_seconds)).archived
        finally:
            await client.close()

    started = time.monotonic()
    try:
        archived = asyncio.run(run())
    finally:
        store.close()
    return time.monotonic() - started, archived


def main(argv: list[str] | None = None) -> int:
    parser = entry_parser("bench.archive", __doc__)
    parser.add_argument("--executions", type=int, default=EXECUTIONS)
    parser.add_argument("--postgres", action="store_true", help="also archive into a throwaway PostgreSQL")
    args = parser.parse_args(argv)
    cfg = config_from_mapping(report.CONFIG)
    end = int(time.time()) // 60 * 60 - 15 * 60
    window = report.DAYS * 86400 + 3600
    with tempfile.TemporaryDirectory() as tmp:
        server = Prometheus(Path(tmp) / "prometheus")
        try:
            print(f"backfilling {args.executions} executions over {report.DAYS} days", flush=True)
            text = report.openmetrics(cfg, end, args.executions)
            server.load_openmetrics(text, [], end - report.DAYS * 86400, end, max_block="24h")
            sqlite = Path(tmp) / "archive.sqlite"
            seconds, archived = one_pass(str(sqlite), server.url, window)
            size = sqlite.stat().st_size
            each, per_execution = seconds / max(archived, 1) * 1000, size / max(archived, 1) / 1000
            print(f"sqlite: {archived} records in {seconds:.1f} s ({each:.1f} ms each); {size / 1e6:.1f} MB, "
                  f"{per_execution:.1f} kB per execution", flush=True)  # fmt: skip
            if args.postgres:
                postgres = Postgres()
                postgres.start()
                try:
                    seconds, archived = one_pass(postgres.url, server.url, window)
                    print(f"postgresql: {archived} records in {seconds:.1f} s", flush=True)
                finally:
                    postgres.stop()
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
