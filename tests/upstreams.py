"""Misbehaving upstreams on loopback for the endpoint's tests.

They know nothing of PromQL. ``Proxy`` passes every request to a real Prometheus and may replace
what comes back (a body Prometheus never sends) while it records what it was sent.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


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

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"
