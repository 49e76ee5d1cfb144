"""How routes answer: JSON bodies (a dict, its bytes, or a stream), JSON errors, the deadline, the header limit."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from gpu_execution_pack.api.stream import MetricsStream
from gpu_execution_pack.query.params import RequestError
from gpu_execution_pack.query.prometheus import PrometheusError, deadline

MAX_HEADER_BYTES = 16 * 1024  # a request's headers, names and values: past it, 431
CLIENT_GONE = 499  # nginx's status for a client that closed its connection: logged, never read
log = logging.getLogger("gpu_execution_pack.api")


class FastJSON(JSONResponse):
    """JSON written by orjson: a long range's hundreds of thousands of floats serialise several times faster."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class EncodedJSON(Response):
    """A document already encoded (in a worker thread when it is large): sent as is."""

    media_type = "application/json"


class StreamedJSON(StreamingResponse):
    """A :class:`MetricsStream` sent as it is fetched (chunked transfer): no Content-Length, status 200.

    Whatever way it ends (done, the client gone, a failure), what is still in flight is cancelled.
    A failure after the first bytes raises ``StreamAborted`` to the server, which closes the
    connection without the chunked body's end.
    """

    media_type = "application/json"

    def __init__(self, stream: MetricsStream):
        self.stream = stream
        super().__init__(stream.body())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.stream.close()
            await self.body_iterator.aclose()  # type: ignore[attr-defined]


Document = dict[str, Any] | bytes | MetricsStream | Response  # what a route's work answers with (a Response: as is)


def error(
    status: int, message: str, headers: dict[str, str] | None = None, details: dict[str, Any] | None = None
) -> JSONResponse:
    """The JSON error every route answers with: ``{"error": message}``, and ``details``' keys where given."""
    return JSONResponse({"error": message, **(details or {})}, status_code=status, headers=headers)


async def answer(request: Request, work: Callable[[], Awaitable[Document]], timeout: float, upstream: str) -> Response:
    """``work``'s document as JSON, or its error as a JSON error; for any route that asks Prometheus.

    ``timeout`` bounds the whole request (504 past it), and the work stops as soon as the client
    goes away: either way what is in flight is cancelled, and Prometheus, its connection closed,
    stops the query. A document may come as a dict, as its JSON, or as a stream (a long range),
    whose later pieces the stream itself holds to what is left of ``timeout``.
    """
    outcome: list[Any] = []
    async with anyio.create_task_group() as group:

        async def run() -> None:
            try:
                with deadline(timeout, upstream):
                    outcome.append(await work())
            except (RequestError, PrometheusError) as err:
                outcome.append(err)
            finally:
                group.cancel_scope.cancel()

        async def watch() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            log.info("client went away: request for %s cancelled", request.url.path)
            group.cancel_scope.cancel()

        group.start_soon(run)
        group.start_soon(watch)
    if not outcome:
        return error(CLIENT_GONE, "the client closed the connection")
    return response_for(outcome[0])


def response_for(outcome: Document | RequestError | PrometheusError) -> Response:
    """The response for a route's outcome: its error as a JSON error, else its document as JSON."""
    if isinstance(outcome, PrometheusError):
        log.warning("prometheus: %s", outcome)
    if isinstance(outcome, RequestError):
        return error(outcome.status, str(outcome), outcome.headers, outcome.details)
    if isinstance(outcome, PrometheusError):
        return error(outcome.status, outcome.public)  # no URL, Prometheus' own text bounded
    if isinstance(outcome, Response):
        return outcome
    if isinstance(outcome, MetricsStream):
        return StreamedJSON(outcome)
    if isinstance(outcome, bytes):
        return EncodedJSON(outcome)
    return FastJSON(outcome)


class HeaderLimit:
    """ASGI middleware: 431 with a JSON error for headers over MAX_HEADER_BYTES, before any route runs.

    The server must read such a head to answer it: ``serve`` lets uvicorn read up to
    ``server.MAX_REQUEST_HEAD_BYTES``: past uvicorn's own limit it resets the connection instead.
    """

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            size = sum(len(name) + len(value) + 4 for name, value in scope["headers"])  # `name: value\r\n`
            if size > MAX_HEADER_BYTES:
                message = f"request headers: {size} bytes; accepted: at most {MAX_HEADER_BYTES} bytes in all"
                await error(431, message, {"Connection": "close"})(scope, receive, send)
                return
        await self.app(scope, receive, send)
