"""Small HTTP servers on loopback for the endpoint's tests: uvicorn serving the app, and misbehaving upstreams.

The upstreams know nothing of PromQL. ``Proxy`` passes every request to a real Prometheus and may
replace what comes back (a body Prometheus never sends) while it records what it was sent;
``FaultServer`` answers every request as a function of it says (a body of the wrong shape, a page that is no
API); ``Trickle`` answers every request with a body that never ends, a byte at a time, and records when
the endpoint gives up on it and closes the connection; ``Flood`` answers with a huge body as fast as it is
read, and records how much of it went out before the endpoint closed the connection.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import parse_qs, urlencode, urlsplit

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


Answer = tuple[int, dict[str, str], bytes]


class QuietServer(ThreadingHTTPServer):
    """Says nothing when the client hangs up mid-answer: the doctor drops its other requests at the first error,
    and Prometheus a scrape past its timeout (which the benchmark counts instead)."""

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


@dataclass
class FaultServer:
    """Answers every GET and POST with ``answer(seen)`` (status, headers, body) and keeps each request in
    ``seen``."""

    answer: Callable[[Seen], Answer]
    seen: list[Seen] = field(default_factory=list)

    def __enter__(self) -> FaultServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.reply(parse_qs(urlsplit(self.path).query))

            def do_POST(self) -> None:  # a long query comes as a form
                length = int(self.headers.get("Content-Length", 0))
                self.reply(parse_qs(self.rfile.read(length).decode()))

            def reply(self, params: dict[str, list[str]]) -> None:
                seen = Seen(urlsplit(self.path).path, params, {k.lower(): v for k, v in self.headers.items()})
                owner.seen.append(seen)
                status, headers, body = owner.answer(seen)
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = QuietServer(("127.0.0.1", 0), Handler)
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
class Proxy:
    """Forwards requests to ``target`` (None: nowhere) and answers what ``rewrite`` makes of the answer.

    ``rewrite(seen, status, body)`` gets the request and the target's answer (0 and b"" without a
    target) and returns the status and JSON body to send back. Every request is kept in ``seen``.
    """

    target: str | None
    rewrite: Rewrite = lambda seen, status, body: (status, body)
    seen: list[Seen] = field(default_factory=list)

    def __enter__(self) -> Proxy:
        self.server = FaultServer(self.forward, self.seen).__enter__()
        return self

    def forward(self, seen: Seen) -> Answer:
        status, body = 0, b""
        if self.target is not None:  # as a GET: a POST's form is the same parameters
            hop = ("host", "connection", "accept-encoding", "content-length", "content-type")  # plain JSON back
            headers = {k: v for k, v in seen.headers.items() if k not in hop}
            query = f"?{urlencode(seen.params, doseq=True)}" if seen.params else ""
            request = urllib.request.Request(self.target + seen.path + query, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=30) as r:
                    status, body = r.status, r.read()
            except urllib.error.HTTPError as err:
                status, body = err.code, err.read()
        status, body = self.rewrite(seen, status, body)
        return status, {}, body

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)

    @property
    def url(self) -> str:
        return self.server.url


class RawServer:
    """A loopback listener that hands each connection to ``answer`` in a thread of its own, counting them in
    ``accepted``: for upstreams that misbehave below HTTP's level (a body that never ends, one too large)."""

    accepted: int

    def __enter__(self) -> Self:
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
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def answer(self, conn: socket.socket) -> None:
        raise NotImplementedError


@dataclass
class Trickle(RawServer):
    """Answers every request with headers at once, then its body a byte every ``interval`` seconds, forever.

    ``closed`` gets the monotonic time at which each connection was found closed by the other side.
    """

    interval: float = 0.1
    closed: list[float] = field(default_factory=list)
    accepted: int = 0

    def answer(self, conn: socket.socket) -> None:
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


# What ``Flood`` answers with, padded to its size with JSON whitespace: a well-formed query answer, which an
# endpoint that read it all would take for an empty result.
FLOOD_HEAD = b'{"status":"success","data":{"resultType":"matrix","result":['
FLOOD_TAIL = b"]}}"
FLOOD_BLOCK = 2**20


@dataclass
class Flood(RawServer):
    """Answers every request at once with a body of ``size`` bytes, sent as fast as the endpoint reads it: a
    selector matching a whole fleet, or a proxy answering something huge.

    ``framing``: "chunked" (no length said, as a proxy streams), "length" (Content-Length said up front),
    "gzip" (chunked, gzip-compressed: ``size`` is what it inflates to, some 1,000 times its bytes on the wire:
    a gzip bomb) or another Content-Encoding's name (sent as is, uncompressed). ``sent`` gets each
    connection's body bytes on the wire when it ended: the endpoint closed it, or all of it went out.
    """

    size: int
    framing: str = "chunked"
    sent: list[int] = field(default_factory=list)
    accepted: int = 0

    def blocks(self) -> Iterator[bytes]:
        """The body's bytes as they go on the wire, FLOOD_BLOCK of the answer at a time."""
        deflater = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS) if self.framing == "gzip" else None
        spaces = b" " * FLOOD_BLOCK
        left = self.size - len(FLOOD_HEAD) - len(FLOOD_TAIL)
        pieces = [FLOOD_HEAD]
        while left > 0 or pieces:
            if left > 0:
                pieces.append(spaces[: min(left, FLOOD_BLOCK)])
                left -= len(pieces[-1])
            if left <= 0:
                pieces.append(FLOOD_TAIL)
            block = b"".join(pieces)
            pieces = []
            yield block if deflater is None else deflater.compress(block)
        if deflater is not None:
            yield deflater.flush()

    def answer(self, conn: socket.socket) -> None:
        sent = 0
        with conn:
            received = b""
            while b"\r\n\r\n" not in received:  # the request's head: a GET, or a POST's (its form unread)
                part = conn.recv(65536)
                if not part:
                    return
                received += part
            chunked = self.framing != "length"
            head = ["HTTP/1.1 200 OK", "Content-Type: application/json", "Connection: close"]
            head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {self.size}")
            if self.framing not in ("chunked", "length"):
                head.append(f"Content-Encoding: {self.framing}")
            try:
                conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
                for block in self.blocks():
                    if self.stopping.is_set():
                        return
                    if block:
                        conn.sendall(b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)
                        sent += len(block)
                if chunked:
                    conn.sendall(b"0\r\n\r\n")
            except OSError:  # reset or broken pipe: the endpoint closed the connection
                pass
            finally:
                self.sent.append(sent)
