"""A real Alertmanager on a loopback port, amtool, and a small loopback HTTP server for the tests.

``Alertmanager`` runs Debian's ``prometheus-alertmanager`` (upstream's ``alertmanager`` where
that is the name) with clustering off; ``Loopback`` serves GET routes (an exporter's text, a
runbook) and records every POST (webhook notifications) on one port, in a background thread.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gpu_execution_pack.demo.prometheus import stop_process

from harness.prometheus import free_port, wait_ready

INSTALL_HINT = "run 'sudo apt-get install prometheus-alertmanager' (Debian's package has amtool)"


def binary(*names: str) -> str:
    for name in names:
        if path := shutil.which(name):
            return path
    raise RuntimeError(f"none of {', '.join(names)} is on PATH: {INSTALL_HINT}")


def amtool(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``amtool <args>``, output captured, never raising on its exit code."""
    return subprocess.run([binary("amtool"), *args], capture_output=True, text=True, timeout=timeout, check=False)


@dataclass
class Alertmanager:
    """An Alertmanager on a temporary directory: ``config_text`` is written before ``start``."""

    workdir: Path
    config_text: str = ""
    port: int = 0
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.workdir / "alertmanager.log"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "alertmanager.yml"
        config.write_text(self.config_text)
        self.port = self.port or free_port()
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", self.port)) == 0:
                raise RuntimeError(f"127.0.0.1:{self.port} is taken: another server answers there")
        self.process = subprocess.Popen(
            [
                binary("prometheus-alertmanager", "alertmanager"),
                f"--config.file={config}",
                f"--storage.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",  # no gossip: a single instance, no other port
                "--log.level=debug",  # the log says which alerts were muted and why
            ],
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("ab"),
        )
        if wait_ready(self.url, self.process):
            return
        self.stop()
        raise RuntimeError(f"alertmanager did not become ready; see {self.log}:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None

    def alerts(self, **labels: str) -> list[dict[str, Any]]:
        """The alerts Alertmanager holds (API v2), active, inhibited and silenced, with these labels."""
        query = urllib.parse.urlencode([("filter", f'{k}="{v}"') for k, v in labels.items()])
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts?{query}", timeout=10) as r:
            return json.load(r)

    def log_tail(self, lines: int = 40) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Request:
    path: str
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Loopback:
    """GET ``routes`` (path -> (content type, body) callable) and every POST recorded, on 127.0.0.1."""

    routes: dict[str, Callable[[], tuple[str, bytes]]] = field(default_factory=dict)
    posts: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> Loopback:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                route = owner.routes.get(urllib.parse.urlsplit(self.path).path)
                if route is None:
                    self.send_error(404)
                    return
                content_type, body = route()
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with owner.lock:
                    owner.posts.append(Request(self.path, body, time.time()))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def received(self) -> list[Request]:
        with self.lock:
            return list(self.posts)

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
