"""The ASGI app: the metrics and report routes, bearer auth, health probes, JSON errors, the OpenAPI document."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from gpu_execution_pack.api.auth import ALL_TENANTS, INSECURE_FLAG, load_keys, no_keys_message, tenant_for
from gpu_execution_pack.api.metrics import from_archive, respond
from gpu_execution_pack.api.openapi import CLUSTER, FLEET_PATH, ID, PATH, SERIES, SUMMARY_PATH, openapi_document
from gpu_execution_pack.api.responses import Document, HeaderLimit, answer, error
from gpu_execution_pack.archive import reader
from gpu_execution_pack.config import Config, ConfigError
from gpu_execution_pack.query.execution import ExecutionMetrics
from gpu_execution_pack.query.params import RequestError
from gpu_execution_pack.query.prometheus import READY_QUERY, PrometheusClient, PrometheusError
from gpu_execution_pack.report import document, html

READY_TIMEOUT_SECONDS = 2.0  # /readyz: how long Prometheus may take to answer READY_QUERY
log = logging.getLogger("gpu_execution_pack.api")


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
    routes = Routes(cfg, None if insecure_no_auth else keys)
    return Starlette(
        routes=[
            Route(PATH, routes.metrics, methods=["GET"]),
            Route(SUMMARY_PATH, routes.execution_summary, methods=["GET"]),
            Route(FLEET_PATH, routes.fleet_summary, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", routes.readyz, methods=["GET"]),
            Route("/openapi.json", routes.openapi, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error, Exception: server_error},
        middleware=[Middleware(HeaderLimit)],
        lifespan=routes.lifespan,
    )


class Routes:
    """The routes' handlers for one config: its keys, and the Prometheus clients open while the app runs.

    ``keys`` None: authentication is off, every request is served as all tenants.
    """

    def __init__(self, cfg: Config, keys: dict[str, str] | None):
        self.cfg = cfg
        self.keys = keys
        self.execution: ExecutionMetrics | None = None  # set while the app runs (``lifespan``)
        self.probe: PrometheusClient | None = None
        self.archive: Any = None  # the archive's store while the app runs, where one is configured

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """The Prometheus clients, open from the app's start to its end."""
        client = PrometheusClient.for_config(self.cfg.api)
        # Probes get their own client: a short timeout, and no waiting behind metrics requests for a connection.
        probe = PrometheusClient.for_config(
            self.cfg.api, timeout=min(READY_TIMEOUT_SECONDS, self.cfg.api.timeout_seconds)
        )
        self.execution, self.probe = ExecutionMetrics(self.cfg, client), probe
        self.archive = reader.open_store(self.cfg.archive.url)
        try:
            yield
        finally:
            if self.archive is not None:
                self.archive.close()
            await probe.close()
            await client.close()

    def authorized(self, request: Request) -> tuple[bool, str | None]:
        """Whether the request has a known key, and the tenant it is scoped to (None: every tenant)."""
        if self.keys is None:
            return True, None
        tenant = tenant_for(request.headers.get("authorization"), self.keys)
        return tenant is not None, None if tenant in (None, ALL_TENANTS) else tenant

    async def serve(self, request: Request, work: Callable[[str | None], Awaitable[Document]]) -> Response:
        """A route that asks Prometheus: 401 without a key, else ``work(tenant)`` under the deadline."""
        known, tenant = self.authorized(request)
        if not known:
            return error(401, "missing or unknown bearer token")
        return await answer(request, lambda: work(tenant), self.cfg.api.timeout_seconds, self.cfg.api.prometheus_url)

    def started(self) -> ExecutionMetrics:
        """The app's execution reader (the app has started: routes run only then)."""
        if self.execution is None:
            raise RuntimeError("the app has not started")  # a 500, as any route before its lifespan
        return self.execution

    async def metrics(self, request: Request) -> Response:
        """GET PATH: the execution's series (``metrics.respond``: a document, or a stream for a long window)."""
        q, execution_id = request.query_params, request.path_params[ID]
        timeout = self.cfg.api.timeout_seconds

        async def work(tenant: str | None) -> Document:
            series, cluster = once(q, SERIES), once(q, CLUSTER)
            asked = (q.get("start"), q.get("end"), q.get("step"))
            try:
                return await respond(self.started(), execution_id, *asked, tenant, timeout, series, cluster)
            except RequestError as err:  # past Prometheus' retention: the archived series, if any
                kept = (
                    None
                    if err.status != 404
                    else await from_archive(self.archive, self.started(), execution_id, *asked, tenant, series, cluster)
                )
                if kept is None:
                    raise
                return kept

        return await self.serve(request, work)

    async def execution_summary(self, request: Request) -> Response:
        """GET SUMMARY_PATH: the execution's report; as the report's page (``report.html``) where the client
        prefers text/html (a browser). Errors are JSON either way."""
        q, execution_id = request.query_params, request.path_params[ID]
        as_page = prefers_html(request.headers.get("accept", ""))

        async def work(tenant: str | None) -> dict[str, Any] | HTMLResponse:
            prometheus, cluster = self.started().prometheus, once(q, CLUSTER)
            if as_page:  # the page reads Prometheus; an archived run is served as its JSON document
                return HTMLResponse(
                    await html.execution_page(
                        self.cfg, prometheus, execution_id, q.get("start"), q.get("end"), tenant, cluster
                    )
                )
            return await reader.execution_summary(
                self.cfg, prometheus, self.archive, execution_id, q.get("start"), q.get("end"), tenant, cluster
            )

        return await self.serve(request, work)

    async def fleet_summary(self, request: Request) -> Response:
        """GET FLEET_PATH: the tenant's executions ranked by GPU-hours wasted."""
        q = request.query_params

        async def work(tenant: str | None) -> dict[str, Any]:
            top = q.get("top", "20")
            if not (top.isascii() and top.isdigit() and len(top) <= 4):
                raise RequestError(
                    400,
                    f"top: {top[:20]!r} is not accepted; accepted: a whole number from 1 to {document.MAX_FLEET_TOP}",
                )
            return await reader.fleet_summary(
                self.cfg,
                self.started().prometheus,
                self.archive,
                q.get("since", "7d"),
                int(top),
                tenant,
                once(q, CLUSTER),
            )

        return await self.serve(request, work)

    async def readyz(self, request: Request) -> JSONResponse:
        """GET /readyz: 200 while Prometheus answers ``vector(1)`` in time, else 503 and why."""
        probe = self.probe
        if probe is None:
            return JSONResponse({"status": "not ready", "error": "the app has not started"}, status_code=503)
        try:
            # httpx's timeout bounds each phase; this bounds the whole answer.
            with anyio.fail_after(READY_TIMEOUT_SECONDS + 1):
                await probe.instant(READY_QUERY)
        except PrometheusError as err:
            return JSONResponse({"status": "not ready", "error": str(err)}, status_code=503)
        except TimeoutError:
            message = f"Prometheus at {probe.url} did not answer in time"
            return JSONResponse({"status": "not ready", "error": message}, status_code=503)
        return JSONResponse({"status": "ready"})

    async def openapi(self, request: Request) -> JSONResponse:
        """GET /openapi.json: the API's description for this config."""
        return JSONResponse(openapi_document(self.cfg))


def once(q: QueryParams, name: str) -> str | None:
    """Query parameter ``name``'s value, None if absent; a 400 if it is given more than once, since which
    one would count is a guess (``series``' names go in one value, separated by commas)."""
    values = q.getlist(name)
    if len(values) > 1:
        accepted = "once, the names in one value separated by commas" if name == SERIES else "once"
        raise RequestError(400, f"{name}: given {len(values)} times; accepted: {accepted}")
    return values[0] if values else None


def prefers_html(accept: str) -> bool:
    """Whether an Accept header ranks text/html above JSON (a browser's does); JSON on a tie or without one."""
    ranks = {"text/html": 0.0, "application/json": 0.0, "application/*": 0.0, "*/*": 0.0}
    for item in accept.split(","):
        media, *params = (part.strip().lower() for part in item.split(";"))
        weights = [value for key, _, value in (p.partition("=") for p in params) if key.strip() == "q"]
        try:
            weight = float(weights[0]) if weights else 1.0
        except ValueError:
            weight = 0.0
        if media in ranks:
            ranks[media] = max(ranks[media], weight)
    return ranks["text/html"] > max(ranks["application/json"], ranks["application/*"], ranks["*/*"])


async def healthz(request: Request) -> JSONResponse:
    """GET /healthz: the process is up (Prometheus is not asked)."""
    return JSONResponse({"status": "ok"})


async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
    """Starlette's 404 and 405 (and any other HTTP error) as JSON errors that say what was asked."""
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
    """Any other exception: a bare 500 (the traceback goes to the server's log, not the client)."""
    return error(500, "internal server error")
