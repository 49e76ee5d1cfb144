"""A synthetic fleet as live exporters: dcgm-exporter and node_exporter text for H hosts x 8 GPUs.

One HTTP server on a loopback port answers for the whole fleet (``generator.scenario.fleet``);
every series carries its host's ``instance``, so Prometheus scrapes it with ``honor_labels: true``
and sees one target per host, as the rules expect. Values follow the scenario's phases in time.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from generator.scenario.fleet import FleetExposition


class FleetExporter:
    """Serves ``/dcgm`` and ``/node`` for a fleet on a loopback port, in a background thread."""

    def __init__(self, fleet: FleetExposition, port: int):
        self.fleet = fleet
        lock = threading.Lock()  # the CPU counters are carried forward between scrapes

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                render = {"/dcgm": fleet.dcgm_text, "/node": fleet.node_text}.get(self.path)
                if render is None:
                    self.send_error(404)
                    return
                with lock:
                    body = render(time.time()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FleetExporter:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def scrape_config(exporter_port: int, self_port: int, rule_files: str, interval: int = 15) -> str:
    """prometheus.yml for a fleet exporter (and Prometheus itself), with ``rule_files`` (a glob) or none."""
    rules = f"rule_files:\n  - {rule_files}\n" if rule_files else ""
    return f"""global:
  scrape_interval: {interval}s
  evaluation_interval: {interval}s
{rules}scrape_configs:
  - job_name: dcgm-exporter
    honor_labels: true
    metrics_path: /dcgm
    static_configs: [{{targets: ["127.0.0.1:{exporter_port}"]}}]
  - job_name: node
    honor_labels: true
    metrics_path: /node
    static_configs: [{{targets: ["127.0.0.1:{exporter_port}"]}}]
  - job_name: prometheus
    static_configs: [{{targets: ["127.0.0.1:{self_port}"]}}]
"""
