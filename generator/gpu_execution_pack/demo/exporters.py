"""The running job's exporters: one small HTTP server on a loopback port per scrape target of its scenario
(its dcgm-exporter and node_exporter), answering with the rendered sample of the moment.

Sample k of the rendering is served from ``start + k * STEP_SECONDS`` on. Past the job's last running
sample the rendering starts again at ``first_step`` (its counters then reset, as an exporter's do when it
restarts), so the job runs for as long as the demo does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gpu_execution_pack.scenario.model import STEP_SECONDS
from gpu_execution_pack.scenario.render import STALE, RenderedSeries

TARGET_LABELS = ("job", "instance")


def targets(series: list[RenderedSeries]) -> dict[tuple[str, str], list[RenderedSeries]]:
    """The series by the scrape target (job, instance) that publishes them; ``up`` is Prometheus' own."""
    out: dict[tuple[str, str], list[RenderedSeries]] = {}
    for s in series:
        labels = dict(s.labels)
        if s.metric != "up":
            out.setdefault((labels["job"], labels["instance"]), []).append(s)
    return out


def exposition(series: list[RenderedSeries], step: int) -> str:
    """Prometheus' text format of the series' samples at ``step``, without the target's own labels (the
    scrape config sets them) and without series that have no sample then."""
    lines = []
    for s in series:
        value = s.samples[step]
        if value is None or value == STALE:
            continue
        labels = ",".join(f'{k}="{v}"' for k, v in s.labels if k not in TARGET_LABELS)
        lines.append(f"{s.metric}{{{labels}}} {value!r}" if labels else f"{s.metric} {value!r}")
    return "\n".join(lines) + "\n"


class Cycle:
    """Which step of the rendering is served at a time: from ``first_step`` to ``last_step``, round and round."""

    def __init__(self, start: float, first_step: int, last_step: int):
        self.start, self.first, self.last = start, first_step, last_step

    def step(self, at: float) -> int:
        k = max(int((at - self.start) // STEP_SECONDS), self.first)
        return self.first + (k - self.first) % (self.last - self.first + 1)


class ScrapeHandler(BaseHTTPRequestHandler):
    """Answers GET /metrics with the server's exposition of the moment."""

    server: ExporterServer

    def do_GET(self) -> None:
        if self.path != "/metrics":
            self.send_error(404)
            return
        body = self.server.render().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Quiet: Prometheus scrapes every 15 s."""


class ExporterServer(ThreadingHTTPServer):
    """An HTTP server on a free loopback port whose scrapes answer with ``render()``."""

    daemon_threads = True  # a scrape in progress does not hold the demo's exit

    def __init__(self, render: Callable[[], str]):
        super().__init__(("127.0.0.1", 0), ScrapeHandler)
        self.render = render


class Exporter:
    """One target's series on 127.0.0.1:<port> (a free one), served from a background thread."""

    def __init__(self, series: list[RenderedSeries], cycle: Cycle):
        self.server = ExporterServer(lambda: exposition(series, cycle.step(time.time())))
        self.thread = threading.Thread(target=self.server.serve_forever, name="demo-exporter", daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host}:{port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
