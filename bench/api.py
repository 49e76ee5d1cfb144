"""``make bench`` and ``make bench-api``, endpoint part: the metrics endpoint beside bare Prometheus.

A real Prometheus holds the training scenario (as the tests load it); ``gpu-execution-pack
serve`` runs as its own process on a loopback port (one worker, and two); clients send requests
at a fixed concurrency. The floor, measured in the same run against the same Prometheus, is one
``query_range`` for the same execution's 12 series at the same step, selected by name: the data
without the endpoint. Figures are medians and percentiles of one run on this machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpu_execution_pack.api.app import PATH  # noqa: E402
from gpu_execution_pack.config import Config  # noqa: E402
from gpu_execution_pack.promql import match, render, selector  # noqa: E402
from gpu_execution_pack.rules import catalog  # noqa: E402
from gpu_execution_pack.scenario import library  # noqa: E402

from tests.prometheus_harness import Prometheus, free_port  # noqa: E402

KEY = "bench-key-0123456789"
EXECUTIONS = ("train-0001", "train-0002")
# (case, step, requests, clients at once): one client shows a request's own latency, 50 the
# throughput when Prometheus, the endpoint and the clients share the machine's cores.
CASES = (
    ("one client, whole execution at 15 s (40 min, 165 points per series)", "15s", 200, 1),
    ("50 clients, whole execution at 15 s", "15s", 1000, 50),
    ("50 clients, whole execution at 5 m", "5m", 1000, 50),
)
WORKERS = (1, 2)
# issue 15's targets: serial p50 within 3x of bare Prometheus; at 50 clients, a quarter of its throughput.
SERIAL_P50_RATIO_TARGET = 3.0
THROUGHPUT_SHARE_TARGET = 0.25


def bare_query(execution_id: str) -> str:
    """The execution's 12 API series in one selector, by name: what the endpoint reads, without it."""
    names = "|".join(s.name for s in catalog.API_SERIES)
    return render(selector("", match("__name__", names, "=~"), match(catalog.EXECUTION_LABEL, execution_id)))


async def load(send: Callable[[httpx.AsyncClient, int], object], requests: int, concurrency: int):
    """Latencies, wall time and errors of ``requests`` sends, ``concurrency`` at a time."""
    latencies: list[float] = []
    errors = 0
    limit = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=concurrency)) as client:

        async def one(i: int) -> None:
            nonlocal errors
            async with limit:
                t = time.perf_counter()
                r = await send(client, i)
                latencies.append(time.perf_counter() - t)
                errors += r.status_code != 200

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(requests)))
        return latencies, time.perf_counter() - t0, errors


def row(name: str, requests: int, result) -> list:
    latencies, wall, errors = result
    q = statistics.quantiles(latencies, n=100)
    return [name, requests, statistics.median(latencies), q[94], q[98], requests / wall, errors]


def wait_up(url: str) -> None:
    for _ in range(200):
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the endpoint at {url} did not start")


def measure() -> dict:
    """Rows per case (case, requests, median, p95, p99, requests/s, errors): bare Prometheus, then the endpoint."""
    cfg = Config()
    scenario = library.training_in("4.8")
    end = int(time.time()) // 60 * 60 - 15 * 60  # finished: its window is fixed (see tests/conftest.py)
    out: dict = {"bare": [], "endpoint": {}}
    with tempfile.TemporaryDirectory() as tmp:
        server = Prometheus(Path(tmp))
        try:
            print("bench: loading the training scenario into a real Prometheus", flush=True)
            start = server.load_scenario(scenario, cfg, end)
            config = Path(tmp) / "pack.yml"
            config.write_text(f"api: {{prometheus_url: '{server.url}'}}\n")
            for name, step, requests, concurrency in CASES:
                seconds = int(step[:-1]) * (60 if step.endswith("m") else 1)

                def bare(client: httpx.AsyncClient, i: int, seconds: int = seconds):
                    query = bare_query(EXECUTIONS[i % 2])
                    params = {"query": query, "start": start, "end": end, "step": seconds}
                    return client.get(f"{server.url}/api/v1/query_range", params=params)

                print(f"bench: bare Prometheus, {requests} requests: {name}", flush=True)
                out["bare"].append(row(name, requests, asyncio.run(load(bare, requests, concurrency))))
            for workers in WORKERS:
                port = free_port()
                env = {**os.environ, "GPU_PACK_API_KEYS": f"{KEY}:*"}
                command = [sys.executable, "-m", "gpu_execution_pack", "serve", "--config", str(config)]
                api = subprocess.Popen(
                    [*command, "--port", str(port), "--workers", str(workers)],
                    cwd=REPO,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                rows = []
                try:
                    url = f"http://127.0.0.1:{port}"
                    wait_up(url)
                    for name, step, requests, concurrency in CASES:

                        def endpoint(client: httpx.AsyncClient, i: int, step: str = step, url: str = url):
                            path = PATH.format(execution_id=EXECUTIONS[i % 2])
                            headers = {"Authorization": f"Bearer {KEY}"}
                            return client.get(f"{url}{path}", params={"step": step}, headers=headers)

                        print(f"bench: endpoint ({workers} worker(s)), {requests} requests: {name}", flush=True)
                        rows.append(row(name, requests, asyncio.run(load(endpoint, requests, concurrency))))
                finally:
                    api.terminate()
                    api.wait(timeout=30)
                out["endpoint"][str(workers)] = rows
        finally:
            server.stop()
    return out


def section(api: dict) -> list[str]:
    """The report's endpoint section: each case beside bare Prometheus, and issue 15's targets."""
    lines = [
        "## Metrics endpoint beside bare Prometheus",
        "",
        "Method (`bench/api.py`): a real Prometheus on loopback holds the training scenario (two executions,",
        "6 GPUs, 2 hosts, 40 minutes at 15 s). `gpu-execution-pack serve` runs as its own process, with one",
        "worker and with two; an async client sends requests one or 50 at a time, alternating the two",
        "executions, each answered with all 12 series (5 queries to Prometheus: 3 for the span, reused",
        "for a finished execution after its first request, one for the GPU series, one for the host",
        "series). The floor, in the same run: one `query_range` for the same execution's 12 series at the",
        "same step, straight to Prometheus.",
        "",
        "| case | server | median | p95 | p99 | requests/s | errors |",
        "|---|---|---|---|---|---|---|",
    ]

    def line(r: list, server: str) -> str:
        name, _, median, p95, p99, rate, errors = r
        ms = " | ".join(f"{x * 1000:.0f} ms" for x in (median, p95, p99))
        return f"| {name} | {server} | {ms} | {rate:.0f} | {errors} |"

    for i, bare in enumerate(api["bare"]):
        lines.append(line(bare, "bare Prometheus"))
        for workers, rows in sorted(api["endpoint"].items()):
            lines.append(line(rows[i], f"endpoint, {workers} worker(s)"))
    best = max(api["endpoint"].values(), key=lambda rows: rows[1][5])
    serial = api["endpoint"]["1"][0][2] / api["bare"][0][2]
    share = best[1][5] / api["bare"][1][5]
    lines += [
        "",
        "| target (issue 15) | measured | met |",
        "|---|---|---|",
        f"| serial p50 within {SERIAL_P50_RATIO_TARGET:g}x of bare Prometheus | {serial:.1f}x | "
        f"{'yes' if serial <= SERIAL_P50_RATIO_TARGET else 'no'} |",
        f"| throughput at 50 clients at least {THROUGHPUT_SHARE_TARGET:.0%} of bare Prometheus' | {share:.0%} | "
        f"{'yes' if share >= THROUGHPUT_SHARE_TARGET else 'no'} |",
        "| a 30-day, 8-GPU request adds at most its response size to RSS | not measured | - |",
        "| an unauthenticated request's p99 under 50 ms while a 30-day request runs | not measured | - |",
        "",
        "Where a target is missed: the endpoint parses Prometheus' JSON, converts units and writes its own",
        "JSON in Python, on the same cores as Prometheus and the clients; bare Prometheus does none of it.",
    ]
    return lines


def main() -> int:
    """``make bench-api``: measure, put the figures in docs/benchmarks.json, rewrite the report."""
    from bench.run import RESULTS, write

    results = json.loads(RESULTS.read_text())
    results["api"] = measure()
    RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    write(results)
    print("wrote docs/benchmarks.md and docs/benchmarks.json", flush=True)
    errors = [r[-1] for rows in [results["api"]["bare"], *results["api"]["endpoint"].values()] for r in rows]
    return 0 if not any(errors) else 1


if __name__ == "__main__":
    raise SystemExit(main())
