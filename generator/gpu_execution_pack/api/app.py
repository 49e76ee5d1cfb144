"""The ASGI app: the metrics route, bearer auth, health probes, JSON errors, and the OpenAPI document."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gpu_execution_pack import catalog
from gpu_execution_pack.api.auth import ALL_TENANTS, INSECURE_FLAG, load_keys, no_keys_message, tenant_for
from gpu_execution_pack.api.metrics import (
    DEFAULT_STEP,
    MAX_ID_LENGTH,
    MAX_STEP,
    MIN_STEP,
    TIME_EXAMPLE,
    ExecutionMetrics,
    MetricsStream,
    RequestError,
)
from gpu_execution_pack.api.prometheus import PrometheusClient, PrometheusError, deadline
from gpu_execution_pack.config import Config, ConfigError
from gpu_execution_pack.promql.durations import DURATION_PATTERN
from gpu_execution_pack.report import document

PATH = "/api/v2/external/execution/{execution_id}/metrics"
SUMMARY_PATH = "/api/v2/external/execution/{execution_id}/summary"
FLEET_PATH = "/api/v2/external/executions/summary"
READY_TIMEOUT_SECONDS = 2.0  # /readyz: how long Prometheus may take to answer `vector(1)`
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


Document = dict[str, Any] | bytes | MetricsStream  # what a route's work answers with


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON error every route answers with: ``{"error": message}``."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)


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
    if isinstance(outcome[0], PrometheusError):
        log.warning("prometheus: %s", outcome[0])
    if isinstance(outcome[0], RequestError | PrometheusError):
        return error(outcome[0].status, str(outcome[0]))
    if isinstance(outcome[0], MetricsStream):
        return StreamedJSON(outcome[0])
    if isinstance(outcome[0], bytes):
        return EncodedJSON(outcome[0])
    return FastJSON(outcome[0])


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


def create_app(cfg: Config, keys: dict[str, str] | None = None, *, insecure_no_auth: bool = False) -> Starlette:
    """The app for ``cfg``; ``keys`` (key -> tenant) default to the configured keys file or environment.

    Without keys it refuses to start (:class:`ConfigError`) unless ``insecure_no_auth``: then every
    request, with or without a key, is served as all tenants, and a warning says so once.
    """
    keys = load_keys(cfg.api.keys_file) if keys is None else keys
    if not keys and not insecure_no_auth:
        raise ConfigError(no_keys_message(cfg.api.keys_file))
    if insecure_no_auth:
        ignored = f"; the {len(keys)} configured key(s) are ignored" if keys else ""
        log.warning("authentication is off (%s): every request sees every tenant%s", INSECURE_FLAG, ignored)
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: Starlette):
        client = PrometheusClient.for_config(cfg.api)
        # Probes get their own client: a short timeout, and no waiting behind metrics requests for a connection.
        probe = PrometheusClient.for_config(cfg.api, timeout=min(READY_TIMEOUT_SECONDS, cfg.api.timeout_seconds))
        state["metrics"] = ExecutionMetrics(cfg, client)
        state["probe"] = probe
        try:
            yield
        finally:
            await probe.close()
            await client.close()

    def authorized(request: Request) -> tuple[bool, str | None]:
        """Whether the request has a known key, and the tenant it is scoped to (None: every tenant)."""
        if insecure_no_auth:
            return True, None
        tenant = tenant_for(request.headers.get("authorization"), keys)
        return tenant is not None, None if tenant in (None, ALL_TENANTS) else tenant

    async def serve(request: Request, work: Callable[[str | None], Awaitable[Document]]) -> Response:
        """A route that asks Prometheus: 401 without a key, else ``work(tenant)`` under the deadline."""
        known, tenant = authorized(request)
        if not known:
            return error(401, "missing or unknown bearer token")
        return await answer(request, lambda: work(tenant), cfg.api.timeout_seconds, cfg.api.prometheus_url)

    async def metrics(request: Request) -> Response:
        q = request.query_params
        return await serve(
            request,
            lambda tenant: state["metrics"].respond(
                request.path_params["execution_id"],
                q.get("start"),
                q.get("end"),
                q.get("step"),
                tenant=tenant,
                timeout=cfg.api.timeout_seconds,
            ),
        )

    async def execution_summary(request: Request) -> Response:
        q = request.query_params
        return await serve(
            request,
            lambda tenant: document.execution_summary(
                cfg,
                state["metrics"].prometheus,
                request.path_params["execution_id"],
                q.get("start"),
                q.get("end"),
                tenant=tenant,
            ),
        )

    async def fleet_summary(request: Request) -> Response:
        q = request.query_params

        async def work(tenant: str | None) -> dict[str, Any]:
            top = q.get("top", "20")
            if not (top.isascii() and top.isdigit() and len(top) <= 4):
                raise RequestError(
                    400,
                    f"top: {top[:20]!r} is not accepted; accepted: a whole number from 1 to {document.MAX_FLEET_TOP}",
                )
            return await document.fleet_summary(
                cfg, state["metrics"].prometheus, q.get("since", "7d"), int(top), tenant
            )

        return await serve(request, work)

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        probe: PrometheusClient | None = state.get("probe")
        if probe is None:
            return JSONResponse({"status": "not ready", "error": "the app has not started"}, status_code=503)
        try:
            # httpx's timeout bounds each phase; this bounds the whole answer.
            with anyio.fail_after(READY_TIMEOUT_SECONDS + 1):
                await probe.instant("vector(1)")
        except PrometheusError as err:
            return JSONResponse({"status": "not ready", "error": str(err)}, status_code=503)
        except TimeoutError:
            message = f"Prometheus at {probe.url} did not answer in time"
            return JSONResponse({"status": "not ready", "error": message}, status_code=503)
        return JSONResponse({"status": "ready"})

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(openapi_document(cfg))

    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 404:
            message = f"no such route: {request.url.path}"
        elif exc.status_code == 405:
            allowed = (exc.headers or {}).get("Allow", "")
            message = f"method {request.method} not allowed on {request.url.path}" + (
                f"; allowed: {allowed}" if allowed else ""
            )
        else:
            message = exc.detail
        return error(exc.status_code, message, exc.headers)

    async def server_error(request: Request, exc: Exception) -> JSONResponse:
        return error(500, "internal server error")  # the traceback goes to the server's log, not the client

    return Starlette(
        routes=[
            Route(PATH, metrics, methods=["GET"]),
            Route(SUMMARY_PATH, execution_summary, methods=["GET"]),
            Route(FLEET_PATH, fleet_summary, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/openapi.json", openapi, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error, Exception: server_error},
        middleware=[Middleware(HeaderLimit)],
        lifespan=lifespan,
    )


def openapi_document(cfg: Config | None = None) -> dict[str, Any]:
    """The endpoint's OpenAPI 3.1 description for ``cfg`` (its id pattern); the series and units from the catalog."""
    cfg = cfg or Config()
    series_names = [s.api_name for s in catalog.API_SERIES]
    id_param = {
        "name": "execution_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": cfg.api.execution_id_pattern, "maxLength": MAX_ID_LENGTH},
        "description": "The whole id matches the pattern (api.execution_id_pattern)",
    }
    entry = {
        "type": "object",
        "required": ["labels", "values"],
        "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "values": {
                "type": "array",
                "description": "[unix seconds, value in the series' unit] pairs, on the step grid; a value "
                "Prometheus holds as NaN or an infinity is null",
                "items": {"type": "array", "prefixItems": [{"type": "number"}, {"type": ["number", "null"]}]},
            },
        },
    }
    response = {
        "type": "object",
        "required": ["executionId", "start", "end", "step", "series"],
        "properties": {
            "executionId": {"type": "string"},
            "start": {"type": "string", "format": "date-time"},
            "end": {"type": "string", "format": "date-time"},
            "step": {"type": "string"},
            "series": {
                "type": "object",
                "properties": {
                    s.api_name: {
                        "type": "object",
                        "description": f"{s.doc} Unit: {s.api_unit}. One entry per "
                        + ("host." if s.labels == catalog.NODE_LABELS else "GPU or MIG instance."),
                        "properties": {
                            "unit": {"const": s.api_unit},
                            "entries": {"type": "array", "items": {"$ref": "#/components/schemas/Entry"}},
                        },
                    }
                    for s in catalog.API_SERIES
                },
                "required": series_names,
            },
        },
    }
    err = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    status = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Status"}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "gpu-execution-pack metrics", "version": "2"},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Entry": entry,
                "Metrics": response,
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
                "Summary": {
                    "type": "object",
                    "description": "The execution report: docs/report.md describes every key and verdict",
                    "required": [
                        "executionId",
                        "start",
                        "end",
                        "durationSeconds",
                        "running",
                        "gpus",
                        "hosts",
                        "utilization",
                        "memory",
                        "power",
                        "cost",
                        "alerts",
                        "verdicts",
                    ],
                },
                "FleetSummary": {
                    "type": "object",
                    "description": "Executions ranked by GPU-hours wasted, with their verdict codes",
                    "required": ["since", "end", "executions", "top"],
                },
                "Status": {
                    "type": "object",
                    "required": ["status"],
                    "properties": {
                        "status": {"type": "string", "enum": ["ok", "ready", "not ready"]},
                        "error": {"type": "string", "description": "Why it is not ready"},
                    },
                },
            },
        },
        "security": [{"bearer": []}],
        "paths": {
            PATH: {
                "get": {
                    "summary": "An execution's GPU and system metrics",
                    "parameters": [
                        id_param,
                        {
                            "name": "start",
                            "in": "query",
                            "schema": {"type": "string", "format": "date-time"},
                            "description": f"ISO 8601 such as {TIME_EXAMPLE}, in the years 1 to 9999 once in UTC; "
                            "default: the execution's first sample (the first point of the step grid after it)",
                        },
                        {
                            "name": "end",
                            "in": "query",
                            "schema": {"type": "string", "format": "date-time"},
                            "description": "ISO 8601, at or after start; default: its last sample, or now while it "
                            "reports",
                        },
                        {
                            "name": "step",
                            "in": "query",
                            "schema": {
                                "type": "string",
                                "pattern": DURATION_PATTERN,
                                "minLength": len(MIN_STEP),  # the pattern alone accepts ""
                                "default": DEFAULT_STEP,
                            },
                            "description": f"Prometheus duration from {MIN_STEP} to {MAX_STEP}, and at most the "
                            "window from start to end (when they differ); at most api.max_points points per series",
                        },
                    ],
                    "responses": {
                        "200": {
                            "description": "The series. A window of over 10,000 points per series is streamed "
                            "(chunked): a failure after its first bytes closes the connection before the body ends",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Metrics"}}},
                        },
                        "400": {"description": "A parameter is not accepted; the message names it", **err},
                        "401": {"description": "Missing or unknown bearer token", **err},
                        "404": {"description": "No such execution for this key's tenant", **err},
                        "431": {"description": f"Request headers over {MAX_HEADER_BYTES} bytes", **err},
                        "502": {
                            "description": "Prometheus unreachable, failing, or answering oddly",
                            **err,
                        },
                        "504": {
                            "description": "Past the request's deadline (api.timeout_seconds)",
                            **err,
                        },
                    },
                }
            },
            **report_paths(err, id_param),
            "/healthz": {
                "get": {
                    "summary": "Liveness: the process is up (Prometheus is not asked)",
                    "security": [],
                    "responses": {"200": {"description": '{"status": "ok"}', **status}},
                }
            },
            "/readyz": {
                "get": {
                    "summary": "Readiness: Prometheus answers the instant query `vector(1)` in time",
                    "security": [],
                    "responses": {
                        "200": {"description": '{"status": "ready"}', **status},
                        "503": {
                            "description": 'Prometheus unreachable, failing or too slow: {"status": "not ready"}',
                            **status,
                        },
                    },
                }
            },
        },
    }


def report_paths(err: dict[str, Any], id_param: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI paths of the execution report and the fleet ranking."""
    errors = {
        "400": {"description": "A parameter is not accepted; the message names it", **err},
        "401": {"description": "Missing or unknown bearer token", **err},
        "431": {"description": f"Request headers over {MAX_HEADER_BYTES} bytes", **err},
        "502": {"description": "Prometheus unreachable, failing, or answering oddly", **err},
        "504": {"description": "Prometheus too slow: api.timeout_seconds for the whole request", **err},
    }

    def ok(schema: str, description: str) -> dict[str, Any]:
        return {
            "description": description,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
        }

    time_param = {"in": "query", "schema": {"type": "string", "format": "date-time"}}
    return {
        SUMMARY_PATH: {
            "get": {
                "summary": "An execution's report: utilisation, memory, power, energy, cost, alerts and verdicts",
                "parameters": [
                    id_param,
                    {"name": "start", **time_param, "description": "ISO 8601; default: the execution's first sample"},
                    {"name": "end", **time_param, "description": "ISO 8601; default: its last sample"},
                ],
                "responses": {
                    "200": ok("Summary", "The report"),
                    **errors,
                    "404": {"description": "No such execution for this key's tenant", **err},
                },
            }
        },
        FLEET_PATH: {
            "get": {
                "summary": "The key's executions of the last `since`, ranked by GPU-hours wasted",
                "parameters": [
                    {"name": "since", "in": "query", "schema": {"type": "string", "default": "7d"}},
                    {
                        "name": "top",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": document.MAX_FLEET_TOP, "default": 20},
                    },
                ],
                "responses": {"200": ok("FleetSummary", "The ranking"), **errors},
            }
        },
    }
