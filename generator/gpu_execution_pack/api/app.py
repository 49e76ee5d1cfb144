"""The ASGI app: the metrics route, bearer auth, health probes, JSON errors, and the OpenAPI document."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gpu_execution_pack.api.auth import ALL_TENANTS, INSECURE_FLAG, load_keys, no_keys_message, tenant_for
from gpu_execution_pack.api.metrics import (
    DEFAULT_STEP,
    MAX_ID_LENGTH,
    MAX_STEP,
    MIN_STEP,
    TIME_EXAMPLE,
    ExecutionMetrics,
    RequestError,
)
from gpu_execution_pack.api.prometheus import PrometheusClient, PrometheusError, deadline
from gpu_execution_pack.config import Config, ConfigError
from gpu_execution_pack.promql.durations import DURATION_PATTERN
from gpu_execution_pack.rules import catalog

PATH = "/api/v2/external/execution/{execution_id}/metrics"
READY_TIMEOUT_SECONDS = 2.0  # /readyz: how long Prometheus may take to answer `vector(1)`
MAX_HEADER_BYTES = 16 * 1024  # a request's headers, names and values: past it, 431
CLIENT_GONE = 499  # nginx's status for a client that closed its connection: logged, never read
log = logging.getLogger("gpu_execution_pack.api")


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON error every route answers with: ``{"error": message}``."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def answer(
    request: Request, work: Callable[[], Awaitable[dict[str, Any]]], timeout: float, upstream: str
) -> JSONResponse:
    """``work``'s document as JSON, or its error as a JSON error; for any route that asks Prometheus.

    ``timeout`` bounds the whole request (504 past it), and the work stops as soon as the client
    goes away: either way what is in flight is cancelled, and Prometheus, its connection closed,
    stops the query.
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
    return JSONResponse(outcome[0])


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

    async def metrics(request: Request) -> JSONResponse:
        if insecure_no_auth:
            tenant: str | None = ALL_TENANTS
        else:
            tenant = tenant_for(request.headers.get("authorization"), keys)
        if tenant is None:
            return error(401, "missing or unknown bearer token")
        q = request.query_params
        return await answer(
            request,
            lambda: state["metrics"].fetch(
                request.path_params["execution_id"],
                q.get("start"),
                q.get("end"),
                q.get("step"),
                tenant=None if tenant == ALL_TENANTS else tenant,
            ),
            cfg.api.timeout_seconds,
            cfg.api.prometheus_url,
        )

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
                        {
                            "name": "execution_id",
                            "in": "path",
                            "required": True,
                            "schema": {
                                "type": "string",
                                "pattern": cfg.api.execution_id_pattern,
                                "maxLength": MAX_ID_LENGTH,
                            },
                            "description": "The whole id matches the pattern (api.execution_id_pattern)",
                        },
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
                            "description": "The series",
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
