"""Small HTTP servers on loopback for the endpoint's tests: uvicorn serving the app, and misbehaving upstreams.

The upstreams know nothing of PromQL. ``Proxy`` passes every request to a real Prometheus and may
replace what comes back (a body Prometheus never sends) while it records what it was sent;
``Trickle`` answers every request with a body that never ends, a byte at a time, and records when
the endpoint gives up on it and closes the connection.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import uvicorn
from gpu_execution_pack.api.server import uvicorn_config
from starlette.types import ASGIApp

from harness.prometheus import free_port


@contextmanager
def served(app: ASGIApp) -> Iterator[str]:
    """``app`` served by uvicorn on a loopback port with ``serve``'s settings; yields its base URL."""
    port = free_port()
    web = uvicorn.Server(uvicorn_config(app, "127.0.0.1", port, log_level="warning"))
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not web.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        web.should_exit = True
        thread.join(timeout=10)
    assert not thread.is_alive(), "uvicorn did not stop"


@dataclass
class Seen:
    """One request an upstream received."""

    path: str
    params: dict[str, list[str]]
    headers: dict[str, str]


Rewrite = Callable[[Seen, int, bytes], tuple[int, bytes]]


@dataclass
class Proxy:
    """Forwards GETs to ``target`` (None: nowhere) and answers what ``rewrite`` makes of the answer.

    ``rewrite(seen, status, body)`` gets the request and the target's answer (0 and b"" without a
    target) and returns the status and JSON body to send back. Every request is kept in ``seen``.
    """

    target: str | None
    rewrite: Rewrite = lambda seen, status, body: (status, body)
    seen: list[Seen] = field(default_factory=list)

    def __enter__(self) -> Proxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                seen = Seen(parts.path, parse_qs(parts.query), {k.lower(): v for k, v in self.headers.items()})
                proxy.seen.append(seen)
                status, body = 0, b""
                if proxy.target is not None:
                    hop = ("host", "connection", "accept-encoding")  # plain JSON back, for rewrite to read
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in hop}
                    request = urllib.request.Request(proxy.target + self.path, headers=headers)
                    try:
                        with urllib.request.urlopen(request, timeout=30) as r:
                            status, body = r.status, r.read()
                    except urllib.error.HTTPError as err:
                        status, body = err.code, err.read()
                status, body = proxy.rewrite(seen, status, body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                if not isinstance(sys.exc_info()[1], ConnectionError):  # the endpoint hung up: it may
                    super().handle_error(request, client_address)  # type: ignore[arg-type]

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@dataclass
class Trickle:
    """Answers every request with headers at once, then its body a byte every ``interval`` seconds, forever.

    ``closed`` gets the monotonic time at which each connection was found closed by the other side.
    """

    interval: float = 0.1
    closed: list[float] = field(default_factory=list)
    accepted: int = 0

    def __enter__(self) -> Trickle:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.stopping = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.listener.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)  # the request: a GET, no body
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
            try:
                conn.sendall(head + b'{"status": "success", "data": {"resultType": "matrix", "result": [')
                while not self.stopping.is_set():
                    time.sleep(self.interval)
                    conn.sendall(b" ")
            except OSError:  # reset or broken pipe: the endpoint closed the connection
                self.closed.append(time.monotonic())
