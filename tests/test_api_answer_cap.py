"""What one answer of Prometheus' may make the endpoint hold: at most api.max_answer_mb, read as it arrives.

Each test runs the endpoint as ``serve`` runs it (its own process) in front of a misbehaving upstream
(harness.upstreams.Flood) that answers far more than the cap allows, as fast as it is read: without a
length, with a Content-Length over the cap, or as a gzip bomb. The endpoint must answer a JSON 502 that
names the cap and its key, within moments (not at the deadline), after reading no more than the cap (the
flood stops once its connection is closed), and with its peak resident memory (VmHWM) far under the flood.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml
from gpu_execution_pack.api.app import FLEET_PATH, PATH, SUMMARY_PATH
from gpu_execution_pack.api.auth import ENV_KEYS

from harness.prometheus import free_port
from harness.upstreams import Flood

from .conftest import REPO

# What it checks does not change with the Prometheus version:
# our client's reading of a misbehaving upstream, not Prometheus'.
pytestmark = [pytest.mark.e2e, pytest.mark.single_version]

KEY = "answer-cap-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
MB = 2**20
CAP_MB = 4
FLOOD = 512 * MB  # what the upstream offers: 128 times the cap
DEADLINE = 20  # api.timeout_seconds: a flood read to the end would take the deadline, not be cut at the cap
# What the endpoint's peak memory may grow by while it refuses one flood: the cap, a copy of it, and room for
# the allocator (reading the whole flood would add more than FLOOD).
PEAK_GROWTH = 96 * MB
# What the loopback sockets' buffers may hold beyond what the endpoint read (net.ipv4.tcp_rmem's maximum is
# 32 MB here, tcp_wmem's 4 MB): what the flood put on the wire before its connection closed is at most this more.
IN_FLIGHT = 48 * MB


class Endpoint:
    """``gpu-execution-pack serve`` in its own process, with ``api`` as its config's api section (and ``sections``
    beside it)."""

    def __init__(self, tmp_path: Path, api: dict, **sections: dict):
        config = tmp_path / "pack.yml"
        config.write_text(yaml.safe_dump({"api": api, **sections}))
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log_file = tmp_path / "serve.log"
        command = [sys.executable, "-m", "gpu_execution_pack", "serve", "-c", str(config)]
        with self.log_file.open("w") as log:
            self.process = subprocess.Popen(
                [*command, "--port", self.url.rsplit(":", 1)[1]],
                env={**os.environ, ENV_KEYS: f"{KEY}:*"},
                cwd=REPO,
                stderr=log,
            )
        began = time.monotonic()
        while True:
            assert self.process.poll() is None, self.log()
            assert time.monotonic() - began < 30, "serve did not start"
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)

    def status(self, field: str) -> int:
        """A size from the process's /proc status (VmRSS, VmHWM), in bytes."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no {field} in /proc/{self.process.pid}/status")

    def reset_peak(self) -> None:
        """VmHWM from now on (Linux: writing 5 to clear_refs resets the peak to the current RSS)."""
        Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")

    def log(self) -> str:
        """What the process has written to its standard error (uvicorn's log and the app's) so far."""
        return self.log_file.read_text()

    def stop(self) -> str:
        """Stop the process; its whole log."""
        self.process.terminate()
        self.process.wait(timeout=30)
        return self.log()


@contextmanager
def endpoint(tmp_path: Path, upstream: str, **api) -> Iterator[Endpoint]:
    served = Endpoint(tmp_path, {"prometheus_url": upstream, "timeout_seconds": DEADLINE, **api})
    try:
        yield served
    finally:
        log = served.stop()
        assert "Traceback" not in log, log[-3000:]


def refused_by_the_cap(served: Endpoint, path: str, **params: str) -> tuple[httpx.Response, float, int]:
    """``path`` asked once: the answer, how long it took, and how far the process's peak memory grew meanwhile."""
    httpx.get(f"{served.url}/openapi.json", timeout=10)  # warm: the app's first answer's allocations
    served.reset_peak()
    before = served.status("VmHWM")
    began = time.monotonic()
    response = httpx.get(f"{served.url}{path}", params=params, headers=AUTH, timeout=DEADLINE + 30)
    took = time.monotonic() - began
    return response, took, served.status("VmHWM") - before


def assert_names_the_cap(response: httpx.Response) -> None:
    assert response.status_code == 502, response.text[:500]
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert f"more than {CAP_MB} MB (api.max_answer_mb)" in error and "raise api.max_answer_mb" in error, error
    assert "127.0.0.1" not in error  # where Prometheus lives is not the client's business


METRICS = PATH.format(execution_id="train-0001")


@pytest.mark.parametrize("framing", ["chunked", "length"])
def test_an_answer_past_the_cap_is_a_502_naming_it_and_read_no_further(tmp_path: Path, framing: str):
    with Flood(FLOOD, framing) as upstream, endpoint(tmp_path, upstream.url, max_answer_mb=CAP_MB) as served:
        response, took, growth = refused_by_the_cap(served, METRICS)
        time.sleep(0.5)  # the flood notices its closed connection at its next write
        sent = list(upstream.sent)
    assert_names_the_cap(response)
    assert took < DEADLINE / 2, took  # cut at the cap, not read until the deadline
    assert upstream.accepted == len(sent) == 1, sent  # the first query (the span's) was the one refused
    assert sent[0] < CAP_MB * MB + IN_FLIGHT, sent  # its connection closed: the upstream stopped sending
    assert growth < PEAK_GROWTH, growth / MB


def test_a_gzip_bomb_is_inflated_no_further_than_the_cap(tmp_path: Path):
    # 512 MB of answer in about half a megabyte of gzip: what arrives is small, what it inflates to is not.
    with Flood(FLOOD, "gzip") as upstream, endpoint(tmp_path, upstream.url, max_answer_mb=CAP_MB) as served:
        response, took, growth = refused_by_the_cap(served, METRICS)
    assert_names_the_cap(response)
    assert took < DEADLINE / 2, took
    assert growth < PEAK_GROWTH, growth / MB


@pytest.mark.parametrize(
    ("path", "params"),
    [(SUMMARY_PATH.format(execution_id="train-0001"), {}), (FLEET_PATH, {"since": "1d"})],
    ids=["summary", "fleet"],
)
def test_every_route_that_asks_prometheus_is_held_to_the_cap(tmp_path: Path, path: str, params: dict):
    with Flood(FLOOD) as upstream, endpoint(tmp_path, upstream.url, max_answer_mb=CAP_MB) as served:
        response, took, growth = refused_by_the_cap(served, path, **params)
    assert_names_the_cap(response)
    assert took < DEADLINE / 2 and growth < PEAK_GROWTH, (took, growth / MB)


def test_an_answer_under_the_cap_is_read_whole_also_gzipped(tmp_path: Path):
    """The control: the same well-formed answers, under the cap, gzip-compressed or not, are read and parsed
    (an empty result: the execution is not found)."""
    for framing in ("chunked", "gzip"):
        with Flood(CAP_MB * MB - 1, framing) as upstream, endpoint(tmp_path, upstream.url, max_answer_mb=CAP_MB) as s:
            response = httpx.get(f"{s.url}{METRICS}", headers=AUTH, timeout=DEADLINE + 30)
        assert response.status_code == 404, (framing, response.text[:500])
        assert response.json()["error"] == "execution 'train-0001' not found"


def test_a_content_encoding_not_asked_for_is_a_502_naming_it(tmp_path: Path):
    """The client asks for gzip alone; a body in another coding is refused, not parsed as it came."""
    with Flood(MB, "br") as upstream, endpoint(tmp_path, upstream.url) as served:
        response = httpx.get(f"{served.url}{METRICS}", headers=AUTH, timeout=DEADLINE + 30)
    assert response.status_code == 502, response.text[:500]
    assert "Content-Encoding 'br'; accepted: gzip or none" in response.json()["error"]


def test_the_query_command_says_the_cap_in_one_line(tmp_path: Path):
    config = tmp_path / "pack.yml"
    config.write_text(yaml.safe_dump({"api": {"max_answer_mb": CAP_MB}}))
    command = [sys.executable, "-m", "gpu_execution_pack", "query", "train-0001", "-c", str(config)]
    with Flood(FLOOD, "gzip") as upstream:
        done = subprocess.run(
            [*command, "--prometheus", upstream.url],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
        )
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"more than {CAP_MB} MB (api.max_answer_mb)" in done.stderr, done.stderr


def test_answers_read_at_once_stop_at_the_memory_bound_but_the_oldest(tmp_path: Path):
    """Admitted together, ten requests each read a flood up to the cap at once (some 750 MB at the default cap):
    past api.max_memory_mb all but the oldest stop reading (503, as new work is refused past it), and the oldest
    goes on to its own limit (the cap's 502)."""
    bound, requests = 200, 10

    async def together(url: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=DEADLINE + 30) as http:
            return await asyncio.gather(*(http.get(METRICS, headers=AUTH) for _ in range(requests)))

    with Flood(FLOOD) as upstream, endpoint(tmp_path, upstream.url, max_memory_mb=bound) as served:
        httpx.get(f"{served.url}/openapi.json", timeout=10)
        served.reset_peak()
        answers = asyncio.run(together(served.url))
        peak = served.status("VmHWM")
    statuses = sorted(a.status_code for a in answers)
    # The oldest goes on; the others stop once the bound is passed (a few may have read to the cap before it).
    assert statuses[0] == 502 and statuses.count(503) >= requests - 3, statuses
    for refused in answers:
        if refused.status_code == 503:
            assert refused.json()["error"].startswith(f"busy: memory over {bound} MB (api.max_memory_mb)")
            assert refused.headers["retry-after"] == "2"
    # The bound, the oldest answer's cap (64 MB, the default) read past it, and a copy of it as it is refused.
    assert peak < (bound + 2 * 64 + 16) * MB, peak / MB
