"""``make bench`` and ``make bench-api``, endpoint part: the metrics endpoint beside bare Prometheus.

A real Prometheus holds the training scenario (as the tests load it); ``gpu-execution-pack
serve`` runs as its own process on a loopback port (one worker, and two); clients send requests
at a fixed concurrency. The floor, measured in the same run against the same Prometheus, is one
``query_range`` for the same execution's 12 series at the same step, selected by name: the data
without the endpoint. Figures are medians and percentiles of one run on this machine.

Then a second Prometheus holds a 30-day, 8-GPU execution (``measure_long``): one request for all
of it, its serve process's RSS against its response size, and unauthenticated requests beside it.
The report's text on these figures is ``endpoint_section`` in bench/document.py.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from gpu_execution_pack import catalog, promtool
from gpu_execution_pack.api.app import PATH
from gpu_execution_pack.config import Config
from gpu_execution_pack.promql import match, render, selector
from gpu_execution_pack.query.params import iso
from gpu_execution_pack.scenario import library

from bench.common import (
    LONG_DAYS,
    PROBE_P99_TARGET_SECONDS,
    PROBE_PAUSE_SECONDS,
    REPO,
    entry_parser,
)
from bench.document import add_figures
from harness.prometheus import Prometheus, free_port

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
# What one load gives: each request's latency, the wall time of them all, how many did not answer 200.
Load = tuple[list[float], float, int]


def bare_query(execution_id: str) -> str:
    """The execution's 12 API series in one selector, by name: what the endpoint reads, without it."""
    names = "|".join(s.name for s in catalog.API_SERIES)
    return render(selector("", match("__name__", names, "=~"), match(catalog.EXECUTION_LABEL, execution_id)))


async def load(
    send: Callable[[httpx.AsyncClient, int], Awaitable[httpx.Response]], requests: int, concurrency: int
) -> Load:
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


def row(name: str, requests: int, result: Load) -> list:
    """One line of figures: case, requests, median, p95, p99 (seconds), requests per second, errors."""
    latencies, wall, errors = result
    q = statistics.quantiles(latencies, n=100)
    return [name, requests, statistics.median(latencies), q[94], q[98], requests / wall, errors]


def wait_up(url: str) -> None:
    """Wait until the endpoint at ``url`` answers its health check (20 s at most)."""
    for _ in range(200):
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the endpoint at {url} did not start")


@contextmanager
def serving(config: Path, *options: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``gpu-execution-pack serve`` as its own process on a free loopback port: its URL once it answers, and it."""
    port = free_port()
    env = {**os.environ, "GPU_PACK_API_KEYS": f"{KEY}:*"}
    command = [sys.executable, "-m", "gpu_execution_pack", "serve", "--config", str(config), "--port", str(port)]
    api = subprocess.Popen(
        [*command, *options], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_up(url)
        yield url, api
    finally:
        api.terminate()
        api.wait(timeout=30)


def step_seconds(step: str) -> int:
    """A case's step ("15s", "5m") in seconds."""
    return int(step[:-1]) * (60 if step.endswith("m") else 1)


def measure_bare(server: Prometheus, start: int, end: int) -> list[list]:
    """A row per case for the floor: one ``query_range`` of the execution's 12 series, straight to Prometheus."""
    rows = []
    for name, step, requests, concurrency in CASES:

        def bare(client: httpx.AsyncClient, i: int, seconds: int = step_seconds(step)) -> Awaitable[httpx.Response]:
            query = bare_query(EXECUTIONS[i % 2])
            params = {"query": query, "start": start, "end": end, "step": seconds}
            return client.get(f"{server.url}/api/v1/query_range", params=params)

        print(f"bench: bare Prometheus, {requests} requests: {name}", flush=True)
        rows.append(row(name, requests, asyncio.run(load(bare, requests, concurrency))))
    return rows


def measure_endpoint(config: Path, workers: int) -> list[list]:
    """A row per case for the endpoint served with ``workers`` workers."""
    rows = []
    with serving(config, "--workers", str(workers)) as (url, _):
        for name, step, requests, concurrency in CASES:

            def endpoint(client: httpx.AsyncClient, i: int, step: str = step) -> Awaitable[httpx.Response]:
                path = PATH.format(execution_id=EXECUTIONS[i % 2])
                headers = {"Authorization": f"Bearer {KEY}"}
                return client.get(f"{url}{path}", params={"step": step}, headers=headers)

            print(f"bench: endpoint ({workers} worker(s)), {requests} requests: {name}", flush=True)
            rows.append(row(name, requests, asyncio.run(load(endpoint, requests, concurrency))))
    return rows


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
            out["bare"] = measure_bare(server, start, end)
            for workers in WORKERS:
                out["endpoint"][str(workers)] = measure_endpoint(config, workers)
        finally:
            server.stop()
        out["long"] = measure_long(Path(tmp) / "long")
    return out


# A 30-day (LONG_DAYS), 8-GPU execution (2 hosts, 4 GPUs each) at the contract's 15 s: the endpoint's
# memory and event-loop targets. Its recorded series are backfilled directly (OpenMetrics, one block), not
# computed from raw DCGM by rule backfill: the endpoint reads only them, and it takes a minute, not an hour.
LONG_ID = "long-8gpu-0030"
LONG_HOSTS = ("lh1", "lh2")
LONG_GPUS_PER_HOST = 4
LONG_STEP_SECONDS = 15
LONG_TENANT = "research"
# Base-unit values each series cycles through (the API converts ratios and hertz).
LONG_VALUES = {
    "percent": (0.25, 0.5, 0.75, 0.875, 1.0),
    "celsius": (55.0, 61.5, 68.25, 72.0),
    "watts": (212.5, 298.0, 301.25, 350.0),
    "MHz": (1.2e9, 1.41e9, 1.755e9),
    "bytes_per_second": (1.25e9, 3.5e9, 7.0e8),
    "bytes": (5.4e11, 2.75e11, 3.1e11),
}


def long_labels(series: catalog.Series) -> list[str]:
    """The label texts of the long execution's entries of ``series``: one per GPU, or one per host."""
    base = f'execution_id="{LONG_ID}",namespace="{LONG_TENANT}"'
    if series.labels == catalog.NODE_LABELS:
        return [f'{base},hostname="{host}"' for host in LONG_HOSTS]
    return [
        f'{base},hostname="{host}",gpu="{g}",UUID="GPU-{host}-{g:04d}",modelName="NVIDIA H100 80GB HBM3"'
        for host in LONG_HOSTS
        for g in range(LONG_GPUS_PER_HOST)
    ]


def write_long_execution(path: Path, start: int) -> int:
    """The long execution's API series as OpenMetrics at ``path``, from ``start``; the samples written."""
    points = LONG_DAYS * 86400 // LONG_STEP_SECONDS + 1
    written = 0
    with path.open("w") as out:
        for series in catalog.API_SERIES:
            values = [repr(v) for v in LONG_VALUES[series.api_unit]]
            for labels in long_labels(series):
                prefix = f"{series.name}{{{labels}}} "
                out.writelines(
                    f"{prefix}{values[k % len(values)]} {start + k * LONG_STEP_SECONDS}\n" for k in range(points)
                )
                written += points
        out.write("# EOF\n")
    return written


def proc_status_kib(pid: int, field: str) -> int:
    """A ``/proc/<pid>/status`` field in KiB (VmRSS, VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/status has no {field}")


def backfill_long(server: Prometheus, start: int) -> tuple[int, float]:
    """The long execution's series written into ``server``'s data and the server started: samples, seconds."""
    t = time.perf_counter()
    text = server.workdir / "long.om"
    samples = write_long_execution(text, start)
    promtool.run(
        ["tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=2000h", str(text), str(server.data)]
    )
    text.unlink()
    server.start()
    return samples, time.perf_counter() - t


@dataclass
class Probes:
    """Unauthenticated requests sent while the long request runs, and the RSS sampled between them."""

    seconds: list[float] = field(default_factory=list)
    slow: int = 0  # over PROBE_P99_TARGET_SECONDS
    unexpected: int = 0  # answered other than 401
    rss_kib: int = 0  # the largest VmRSS sampled


def probe_while(running: subprocess.Popen[str], url: str, path: str, pid: int, baseline_kib: int) -> Probes:
    """Send ``path`` without a key, one request after another PROBE_PAUSE_SECONDS apart, while ``running`` runs."""
    probes = Probes(rss_kib=baseline_kib)
    with httpx.Client(base_url=url, timeout=30) as client:
        while running.poll() is None:
            t = time.perf_counter()
            r = client.get(path)
            probes.seconds.append(time.perf_counter() - t)
            probes.slow += probes.seconds[-1] > PROBE_P99_TARGET_SECONDS
            probes.unexpected += r.status_code != 401
            probes.rss_kib = max(probes.rss_kib, proc_status_kib(pid, "VmRSS"))
            time.sleep(PROBE_PAUSE_SECONDS)
    return probes


def curl(url: str) -> subprocess.Popen[str]:
    """curl fetching ``url`` with the key, printing its status, size, time to first byte and total time."""
    return subprocess.Popen(
        [
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{size_download} %{time_starttransfer} %{time_total}",
            "-H",
            f"Authorization: Bearer {KEY}",
            url,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def long_request(url: str, pid: int, start: int, end: int) -> dict:
    """The whole long execution requested from the serve process ``pid`` at ``url``, with probes beside it."""
    path = PATH.format(execution_id=LONG_ID)
    auth = {"Authorization": f"Bearer {KEY}"}
    warm = httpx.get(f"{url}{path}", params={"start": iso(end - 3600)}, headers=auth, timeout=60)
    warm.raise_for_status()  # the app has imported and served a window once: its steady state
    time.sleep(1)
    baseline = proc_status_kib(pid, "VmRSS")
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM from here on
    query = urllib.parse.urlencode({"start": iso(start), "end": iso(end), "step": f"{LONG_STEP_SECONDS}s"})
    print(f"bench: the {LONG_DAYS}-day request, with unauthenticated requests beside it", flush=True)
    request = curl(f"{url}{path}?{query}")
    probes = probe_while(request, url, path, pid, baseline)
    status, size, first_byte, total = request.communicate()[0].split()
    peak = max(probes.rss_kib, proc_status_kib(pid, "VmHWM"))
    q = statistics.quantiles(probes.seconds, n=100)
    return {
        "status": int(status),
        "complete": request.returncode == 0,  # else curl saw the body cut short
        "response_bytes": int(size),
        "first_byte_seconds": float(first_byte),
        "seconds": float(total),
        "rss_baseline_bytes": baseline * 1024,
        "rss_peak_bytes": peak * 1024,
        "probes": len(probes.seconds),
        "probe_errors": probes.unexpected,
        "probe_median_seconds": statistics.median(probes.seconds),
        "probe_p99_seconds": q[98],
        "probe_max_seconds": max(probes.seconds),
        "probes_over_target": probes.slow,
    }


def measure_long(workdir: Path) -> dict:
    """A 30-day, 8-GPU request on one serve process: its RSS rise against its response size, and the
    latencies of unauthenticated requests sent one after another (PROBE_PAUSE_SECONDS apart) meanwhile."""
    end = int(time.time()) // 60 * 60 - 3600  # finished an hour ago
    start = end - LONG_DAYS * 86400
    server = Prometheus(workdir)
    try:
        print(f"bench: backfilling a {LONG_DAYS}-day, 8-GPU execution's recorded series", flush=True)
        samples, backfill = backfill_long(server, start)
        config = workdir / "pack.yml"
        config.write_text(f"api: {{prometheus_url: '{server.url}'}}\n")
        with serving(config) as (url, api):
            figures = long_request(url, api.pid, start, end)
    finally:
        server.stop()
    return {"samples": samples, "backfill_seconds": backfill, **figures}


def main(argv: list[str] | None = None) -> int:
    """``make bench-api``: measure, put the figures in docs/benchmarks.json, rewrite the report."""
    entry_parser("bench.api", __doc__).parse_args(argv)
    api = add_figures("api", measure())
    print("wrote docs/benchmarks.md and docs/benchmarks.json", flush=True)
    errors = [r[-1] for rows in [api["bare"], *api["endpoint"].values()] for r in rows]
    long = api["long"]
    return 0 if not any(errors) and long["status"] == 200 and long["complete"] and not long["probe_errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
