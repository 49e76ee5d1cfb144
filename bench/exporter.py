"""A synthetic fleet as live exporters: dcgm-exporter and node_exporter text for H hosts x 8 GPUs.

One HTTP server on a loopback port answers for the whole fleet (``bench.fleet``):
``/dcgm/<k>`` and ``/node/<k>`` for the k-th shard of HOSTS_PER_SHARD hosts. Every
series carries its host's ``instance``, so Prometheus scrapes with ``honor_labels: true`` and
sees one target per host, as the rules expect. Shards keep each scrape a few MB, spread over
the interval as one exporter per host would be; a single 40 MB scrape of 10,000 GPUs overran
Prometheus' scrape timeout while the rules ran. Values follow the scenario's phases in time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler

from bench.fleet import FleetExposition
from harness.upstreams import QuietServer

HOSTS_PER_SHARD = 32  # 256 GPUs, about 2 MB of dcgm-exporter text; 32 hosts' node text, about 5 MB


def shards(fleet: FleetExposition) -> list[frozenset[str]]:
    """The fleet's hosts in shards of HOSTS_PER_SHARD, each one dcgm scrape target."""
    names = [h.name for h in fleet.s.hosts]
    return [frozenset(names[i : i + HOSTS_PER_SHARD]) for i in range(0, len(names), HOSTS_PER_SHARD)]


class FleetExporter:
    """Serves ``/dcgm/<k>`` and ``/node`` for a fleet on a loopback port, in a background thread."""

    def __init__(self, fleet: FleetExposition, port: int):
        self.fleet = fleet
        parts = shards(fleet)
        lock = threading.Lock()  # the CPU counters are carried forward between scrapes

        def node(t: float, hosts: frozenset[str]) -> str:
            with lock:
                return fleet.node_text(t, hosts)

        routes = {f"/dcgm/{k}": (lambda t, hosts=hosts: fleet.dcgm_text(t, hosts)) for k, hosts in enumerate(parts)}
        routes |= {f"/node/{k}": (lambda t, hosts=hosts: node(t, hosts)) for k, hosts in enumerate(parts)}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                render = routes.get(self.path)
                if render is None:
                    self.send_error(404)
                    return
                body = render(time.time()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = QuietServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FleetExporter:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def scrape_config(
    fleet: FleetExposition,
    exporter_port: int,
    self_port: int,
    rule_files: str,
    parts: Sequence[int] | None = None,
    interval: int = 15,
    host_label: bool = False,
) -> str:
    """prometheus.yml for a fleet exporter (and Prometheus itself), with ``rule_files`` (a glob) or none.

    ``parts`` keeps only those of the exporter's targets (a scrape shard's, ``shards(fleet)`` indices).
    ``host_label``: every target carries the target label ``hostname``, as a scrape config that names each
    target's host sets it (what ``doctor`` looks for before it advises ``node.host_identity: scrape``); the
    fleet's series carry their own host (a fleet built with that mode), which ``honor_labels`` keeps.
    """
    rules = f"rule_files:\n  - {rule_files}\n" if rule_files else ""
    address = f"127.0.0.1:{exporter_port}"

    def target(path: str, k: int) -> str:
        named = f", hostname: {path}-shard-{k}" if host_label else ""
        labels = f"__metrics_path__: /{path}/{k}, instance: {path}-shard-{k}{named}"
        return f'      - {{targets: ["{address}"], labels: {{{labels}}}}}\n'

    dcgm, node = (
        "".join(target(path, k) for k in (range(len(shards(fleet))) if parts is None else parts))
        for path in ("dcgm", "node")
    )
    own = ", labels: {hostname: prometheus}" if host_label else ""
    return f"""global:
  scrape_interval: {interval}s
  scrape_timeout: {interval}s
  evaluation_interval: {interval}s
{rules}scrape_configs:
  - job_name: dcgm-exporter
    honor_labels: true
    static_configs:
{dcgm}  - job_name: node
    honor_labels: true
    static_configs:
{node}  - job_name: prometheus
    static_configs: [{{targets: ["127.0.0.1:{self_port}"]{own}}}]
"""
