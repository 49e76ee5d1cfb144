"""A synthetic fleet as live exporters: dcgm-exporter and node_exporter text for H hosts x 8 GPUs.

One HTTP server answers for the whole fleet; every series carries its host's ``instance``, so
Prometheus scrapes it with ``honor_labels: true`` and sees one target per host as the rules
expect. Executions of mixed sizes (1 to 64 GPUs, some spanning hosts, some sharing one) are
attributed with the execution label (label mode); values change with time.
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GPUS_PER_HOST = 8
SIZES = (1, 1, 1, 2, 2, 4, 4, 8, 8, 8, 16, 64)  # GPUs per execution, drawn at random (mean about 10)


@dataclass(frozen=True)
class FleetGpu:
    host: int
    index: int
    execution: str  # "" when nobody holds it


def fleet(gpus: int, executions: int, seed: int = 7) -> list[FleetGpu]:
    """``gpus`` GPUs on gpus/8 hosts; up to ``executions`` executions placed on consecutive GPUs."""
    rng = random.Random(seed)
    owners: list[str] = [""] * gpus
    position = 0
    for e in range(executions):
        size = rng.choice(SIZES)
        if position + size > gpus:
            break
        for g in range(position, position + size):
            owners[g] = f"exec-{e:05d}"
        position += size + rng.choice((0, 0, 1))  # some executions share a host with the next
    return [FleetGpu(g // GPUS_PER_HOST, g % GPUS_PER_HOST, owners[g]) for g in range(gpus)]


def dcgm_text(gpus: list[FleetGpu], now: float) -> str:
    """dcgm-exporter 4.8 exposition for every GPU (percent, MiB, MHz, W, degrees C)."""
    metrics: dict[str, list[str]] = {}
    for g in gpus:
        wave = 0.5 + 0.5 * math.sin(now / 300 + g.host)
        host = f"h{g.host:05d}"
        labels = (
            f'gpu="{g.index}",UUID="GPU-{host}-{g.index}",device="nvidia{g.index}",modelName="NVIDIA H100 80GB HBM3",'
            f'Hostname="{host}",instance="{host}:9400",DCGM_FI_DRIVER_VERSION="550.54.15"'
        )
        if g.execution:
            labels += f',execution_id="{g.execution}",namespace="research"'
        busy = 90 * wave if g.execution else 0
        values = {
            "DCGM_FI_DEV_GPU_UTIL": round(busy),
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(busy / 100, 3),
            "DCGM_FI_DEV_FB_USED": round(60000 * wave) if g.execution else 512,
            "DCGM_FI_DEV_FB_FREE": 81920 - (round(60000 * wave) if g.execution else 512),
            "DCGM_FI_DEV_FB_RESERVED": 512,
            "DCGM_FI_DEV_GPU_TEMP": round(35 + 45 * wave),
            "DCGM_FI_DEV_POWER_USAGE": round(80 + 600 * wave, 2),
            "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": 700,
            "DCGM_FI_DEV_SM_CLOCK": 1980 if wave < 0.9 else 1410,
            "DCGM_FI_DEV_MEM_CLOCK": 2619,
            "DCGM_FI_PROF_PCIE_RX_BYTES": round(4e8 * wave),
            "DCGM_FI_PROF_PCIE_TX_BYTES": round(2e8 * wave),
            "DCGM_FI_DEV_XID_ERRORS": 0,
        }
        for name, value in values.items():
            metrics.setdefault(name, []).append(f"{name}{{{labels}}} {value}")
    return "".join(f"# TYPE {name} gauge\n" + "\n".join(lines) + "\n" for name, lines in metrics.items())


def node_text(hosts: int, now: float) -> str:
    """node_exporter exposition for every host (2 CPUs each)."""
    lines = ["# TYPE node_uname_info gauge"]
    for h in range(hosts):
        lines.append(f'node_uname_info{{instance="h{h:05d}:9100",nodename="h{h:05d}"}} 1')
    lines.append("# TYPE node_memory_MemTotal_bytes gauge")
    lines += [f'node_memory_MemTotal_bytes{{instance="h{h:05d}:9100"}} {256 * 2**30}' for h in range(hosts)]
    lines.append("# TYPE node_memory_MemAvailable_bytes gauge")
    lines += [f'node_memory_MemAvailable_bytes{{instance="h{h:05d}:9100"}} {200 * 2**30}' for h in range(hosts)]
    lines.append("# TYPE node_cpu_seconds_total counter")
    for h in range(hosts):
        for cpu in range(2):
            lines.append(f'node_cpu_seconds_total{{instance="h{h:05d}:9100",cpu="{cpu}",mode="idle"}} {now * 0.6:.3f}')
    return "\n".join(lines) + "\n"


class FleetExporter:
    """Serves ``/dcgm`` and ``/node`` for a fleet on a loopback port, in a background thread."""

    def __init__(self, gpus: list[FleetGpu], port: int):
        self.gpus = gpus
        hosts = max(g.host for g in gpus) + 1
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                now = time.time()
                body = (dcgm_text(exporter.gpus, now) if self.path == "/dcgm" else node_text(hosts, now)).encode()
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
