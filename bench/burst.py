"""``make bench-burst``: the endpoint's load shedding under issue 37's burst, against a real Prometheus.

A real Prometheus holds bench/api.py's 30-day, 8-GPU execution (backfilled: about a minute).
``gpu-execution-pack serve`` runs as its own process with the config's limits (the defaults unless
``--max-points-in-flight`` / ``--max-memory-mb`` say otherwise). Then, as the issue's probe did:

1. 30 concurrent requests for 6 hours of it at ``step=1s`` (21,600 points per series, streamed);
2. 200 concurrent requests of a heavy mix: 7 days at 15 s (40,320 points per series, streamed), the
   whole 30 days at 5 m, the execution's summary and the fleet view, in turn.

It prints, per phase, the answers by status, the slowest answer, whether every answer was JSON (a
streamed 200 is read to its end and parsed), and the serve process's RSS: idle before, its peak
(sampled every 20 ms), and 5 s after the burst. It exits 1 if any answer waited for the deadline
(api.timeout_seconds) for its head or was a 504, was not JSON, or the peak passed ``--rss-bound-mb``. docs/api-limits.md
gives the figures of a run and how the defaults were chosen from them.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import tempfile
import threading
import time
from pathlib import Path

import httpx
from gpu_execution_pack.api.app import FLEET_PATH, PATH, SUMMARY_PATH
from gpu_execution_pack.query.params import iso

from bench.api import KEY, LONG_DAYS, LONG_ID, backfill_long, proc_status_kib, serving
from harness.prometheus import Prometheus

DEADLINE_SECONDS = 30.0  # api.timeout_seconds' default: no answer may take this long
AUTH = {"Authorization": f"Bearer {KEY}"}


class RssSampler:
    """The largest VmRSS of process ``pid`` while it runs (a thread samples it every 20 ms)."""

    def __init__(self, pid: int):
        self.pid, self.peak_kib, self.done = pid, 0, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.done.wait(0.02):
            self.peak_kib = max(self.peak_kib, proc_status_kib(self.pid, "VmRSS"))

    def __enter__(self) -> RssSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


Result = tuple[int, float, float, bool]  # status, seconds to the answer's head, to its body's end, JSON or not


async def one(client: httpx.AsyncClient, path: str, params: dict[str, str]) -> Result:
    """One request: its status, its seconds to the head and to the end of the body, whether the body is JSON.

    The head is when the client has its answer (a 429 at once, a stream's first bytes); a stream's body
    may take longer than the deadline, piece by piece, as a download does.
    """
    began, head = time.monotonic(), 0.0
    try:
        async with client.stream("GET", path, params=params, headers=AUTH) as response:
            head = time.monotonic() - began
            body = await response.aread()
        json.loads(body)
        is_json = response.headers.get("content-type", "").startswith("application/json")
        return response.status_code, head, time.monotonic() - began, is_json
    except (httpx.HTTPError, ValueError):  # a cut stream or a body that is not JSON
        return 0, head, time.monotonic() - began, False


def kind(path: str, params: dict[str, str]) -> str:
    """A request's kind for the figures: its route's last word and its step."""
    route = "fleet" if path == FLEET_PATH else path.rsplit("/", 1)[-1]
    return route + (f" step={params['step']}" if "step" in params else "")


async def alone(url: str, requests: list[tuple[str, dict[str, str]]]) -> dict[str, float]:
    """Each kind of request once, one after another: its seconds to the end of its body, with nothing beside it."""
    kinds = {kind(path, params): (path, params) for path, params in requests}
    async with httpx.AsyncClient(base_url=url, timeout=DEADLINE_SECONDS * 3) as client:
        return {name: round((await one(client, *request))[2], 2) for name, request in kinds.items()}


async def phase(url: str, requests: list[tuple[str, dict[str, str]]]) -> dict:
    """``requests`` sent all at once; the answers by status (and by kind), the slowest, how many were not JSON."""
    limits = httpx.Limits(max_connections=len(requests))
    async with httpx.AsyncClient(base_url=url, timeout=DEADLINE_SECONDS * 3, limits=limits) as client:
        began = time.monotonic()
        results = await asyncio.gather(*(one(client, path, params) for path, params in requests))
    by_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for (path, params), result in zip(requests, results, strict=True):
        by_kind[kind(path, params)][result[0]] += 1
    return {
        "statuses": dict(sorted(collections.Counter(r[0] for r in results).items())),
        "by_kind": {name: dict(sorted(counts.items())) for name, counts in by_kind.items()},
        "slowest_answer_seconds": round(max(r[1] for r in results), 2),
        "slowest_body_seconds": round(max(r[2] for r in results), 2),
        "wall_seconds": round(time.monotonic() - began, 2),
        "not_json": sum(not r[3] for r in results),
    }


def burst_requests(end: int) -> tuple[list, list]:
    """The two phases' requests: 30 at step=1s over 6 hours, then 200 of the heavy mix."""
    metrics = PATH.format(execution_id=LONG_ID)
    fine = [(metrics, {"start": iso(end - 6 * 3600), "end": iso(end), "step": "1s"})] * 30
    mix = [
        (metrics, {"start": iso(end - 7 * 86400), "end": iso(end), "step": "15s"}),
        (metrics, {"step": "5m"}),
        (SUMMARY_PATH.format(execution_id=LONG_ID), {}),
        (FLEET_PATH, {"since": "31d"}),
    ]
    return fine, [mix[i % len(mix)] for i in range(200)]


def measure(workdir: Path, limits: list[str]) -> dict:
    end = int(time.time()) // 60 * 60 - 3600
    start = end - LONG_DAYS * 86400
    server = Prometheus(workdir)
    try:
        print(f"burst: backfilling the {LONG_DAYS}-day, 8-GPU execution", flush=True)
        backfill_long(server, start)
        config = workdir / "pack.yml"
        config.write_text(f"api: {{prometheus_url: '{server.url}', lookback: 40d{''.join(limits)}}}\n")
        with serving(config) as (url, api):
            httpx.get(f"{url}{PATH.format(execution_id=LONG_ID)}", params={"step": "1h"}, headers=AUTH, timeout=60)
            time.sleep(1)
            figures: dict = {"rss_idle_mb": proc_status_kib(api.pid, "VmRSS") // 1024}
            fine, mix = burst_requests(end)
            figures["alone_seconds"] = asyncio.run(alone(url, fine[:1] + mix[:4]))  # every kind once
            time.sleep(1)
            with RssSampler(api.pid) as rss:
                print("burst: 30 concurrent step=1s requests over 6 hours", flush=True)
                figures["fine"] = asyncio.run(phase(url, fine))
                print("burst: 200 concurrent requests of the heavy mix", flush=True)
                figures["mix"] = asyncio.run(phase(url, mix))
            figures["rss_peak_mb"] = rss.peak_kib // 1024
            time.sleep(5)
            figures["rss_after_mb"] = proc_status_kib(api.pid, "VmRSS") // 1024
    finally:
        server.stop()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-points-in-flight", type=float, help="api.max_points_in_flight (default: the config's)")
    parser.add_argument("--max-memory-mb", type=float, help="api.max_memory_mb (default: the config's)")
    parser.add_argument("--rss-bound-mb", type=float, default=800, help="the RSS the peak must stay under")
    args = parser.parse_args(argv)
    limits = [f", max_points_in_flight: {args.max_points_in_flight}"] if args.max_points_in_flight else []
    limits += [f", max_memory_mb: {args.max_memory_mb}"] if args.max_memory_mb else []
    with tempfile.TemporaryDirectory(prefix="burst-") as workdir:
        figures = measure(Path(workdir), limits)
    print(json.dumps(figures, indent=2))
    slow = max(figures[p]["slowest_answer_seconds"] for p in ("fine", "mix")) >= DEADLINE_SECONDS
    slow = slow or any(504 in figures[p]["statuses"] for p in ("fine", "mix"))
    not_json = figures["fine"]["not_json"] + figures["mix"]["not_json"]
    over = figures["rss_peak_mb"] >= args.rss_bound_mb
    for failed, why in ((slow, "an answer waited for the deadline"), (not_json, "answers not JSON"), (over, "RSS")):
        if failed:
            print(f"burst: FAILED: {why}")
    return 1 if slow or not_json or over else 0


if __name__ == "__main__":
    raise SystemExit(main())
