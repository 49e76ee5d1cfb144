"""``make bench``, endpoint part: the metrics endpoint under concurrent clients.

A real Prometheus holds the training scenario (as the tests load it); ``gpu-execution-pack
serve`` runs as its own process on a loopback port; clients send requests at a fixed
concurrency. Figures are medians and percentiles of one run on this machine.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpu_execution_pack.api.app import PATH  # noqa: E402
from gpu_execution_pack.config import Config  # noqa: E402
from gpu_execution_pack.scenario import library  # noqa: E402

from tests.prometheus_harness import Prometheus, free_port  # noqa: E402

KEY = "bench-key-0123456789"
# (case, step, requests, clients at once): one client shows a request's own latency, 16 the
# throughput when Prometheus, the endpoint and the clients share the machine's cores.
CASES = (
    ("one client, whole execution at 15 s (40 min, 165 points per series)", "15s", 200, 1),
    ("16 clients, whole execution at 15 s", "15s", 1000, 16),
    ("16 clients, whole execution at 5 m", "5m", 1000, 16),
)


async def load(url: str, step: str, requests: int, concurrency: int) -> tuple[list[float], float, int]:
    latencies: list[float] = []
    errors = 0
    limit = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:

        async def one(i: int) -> None:
            nonlocal errors
            async with limit:
                t = time.perf_counter()
                r = await client.get(
                    PATH.format(execution_id="train-0001" if i % 2 else "train-0002"),
                    params={"step": step},
                    headers={"Authorization": f"Bearer {KEY}"},
                )
                latencies.append(time.perf_counter() - t)
                errors += r.status_code != 200

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(requests)))
        return latencies, time.perf_counter() - t0, errors


def measure() -> list[tuple]:
    """One row per case: (case, requests, median, p95, p99, requests/s, errors)."""
    cfg = Config()
    scenario = library.training_in("4.8")
    end = int(time.time()) // 60 * 60 - 15 * 60  # finished: its window is fixed (see tests/conftest.py)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        server = Prometheus(Path(tmp))
        api = None
        try:
            print("bench: loading the training scenario into a real Prometheus", flush=True)
            server.load_scenario(scenario, cfg, end)
            config = Path(tmp) / "pack.yml"
            config.write_text(f"api: {{prometheus_url: '{server.url}'}}\n")
            port = free_port()
            env = {**os.environ, "GPU_PACK_API_KEYS": f"{KEY}:*"}
            api = subprocess.Popen(
                [sys.executable, "-m", "gpu_execution_pack", "serve", "--config", str(config), "--port", str(port)],
                cwd=REPO,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            url = f"http://127.0.0.1:{port}"
            for _ in range(100):
                try:
                    httpx.get(f"{url}/openapi.json", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            for name, step, requests, concurrency in CASES:
                print(f"bench: {requests} requests: {name}", flush=True)
                latencies, wall, errors = asyncio.run(load(url, step, requests, concurrency))
                q = statistics.quantiles(latencies, n=100)
                rows.append((name, requests, statistics.median(latencies), q[94], q[98], requests / wall, errors))
        finally:
            if api is not None:
                api.terminate()
                api.wait(timeout=30)
            server.stop()
    return rows
