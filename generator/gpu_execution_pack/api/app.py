"""The ASGI app: the metrics and report routes, bearer auth, health probes, JSON errors, the OpenAPI document."""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from gpu_execution_pack.api.auth import ALL_TENANTS, INSECURE_FLAG, load_keys, no_keys_message, tenant_for
from gpu_execution_pack.api.inputs import query_of
from gpu_execution_pack.api.metrics import respond
from gpu_execution_pack.api.openapi import (
    CLUSTER,
    FLEET_PATH,
    ID,
    OPENAPI_PATH,
    PATH,
    SERIES,
    SUMMARY_PATH,
    TENANT,
    openapi_document,
    query_parameter_names,
)
from gpu_execution_pack.api.responses import Document, HeaderLimit, answer, error
from gpu_execution_pack.api.shedding import BASE_WEIGHT, CURRENT, REPORT_WEIGHT, Shedder, Ticket, reading_more
from gpu_execution_pack.archive import reader
from gpu_execution_pack.config import Config, ConfigError
from gpu_execution_pack.query.execution import ExecutionMetrics
from gpu_execution_pack.query.params import MAX_CLUSTER_LENGTH, RequestError, shown
from gpu_execution_pack.query.prometheus import READY_QUERY, PrometheusClient, PrometheusError
from gpu_execution_pack.report import document

if TYPE_CHECKING:  # the store needs SQLAlchemy (the archive extra); the endpoint runs without it
    from gpu_execution_pack.archive.store import Store

READY_TIMEOUT_SECONDS = 2.0  # /readyz: how long Prometheus may take to answer READY_QUERY
log = logging.getLogger("gpu_execution_pack.api")
# What a route that asks Prometheus does: (the tenant served, the query parameters, its load ticket) -> its document.
Work = Callable[[str | None, dict[str, str], Ticket], Awaitable[Document]]


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
    app = Starlette(
        routes=[
            Route(PATH, routes.metrics, methods=["GET"]),
            Route(SUMMARY_PATH, routes.execution_summary, methods=["GET"]),
            Route(FLEET_PATH, routes.fleet_summary, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", routes.readyz, methods=["GET"]),
            Route(OPENAPI_PATH, routes.openapi, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error, Exception: server_error},
        middleware=[Middleware(HeaderLimit)],
        lifespan=routes.lifespan,
    )
    # No trailing-slash redirects: Starlette's point at http://<the request's Host header>/..., a host the
    # client chose (an open redirect). ``.../metrics/`` is a 404 like any other unknown path.
    app.router.redirect_slashes = False
    return app


class Routes:
    """The routes' handlers for one config: its keys, and the Prometheus clients open while the app runs.

    ``keys`` None: authentication is off, every request is served as all tenants.
    """

    def __init__(self, cfg: Config, keys: dict[str, str] | None):
        self.cfg = cfg
        self.keys = keys
        self.execution: ExecutionMetrics | None = None  # set while the app runs (``lifespan``)
        self.probe: PrometheusClient | None = None
        api = cfg.api
        self.archive: reader.ServedArchive | None = None  # the archive while the app runs (``archived``)
        self.shedder = Shedder(
            int(api.max_points_in_flight), int(api.max_memory_mb * 2**20), math.ceil(api.retry_after_seconds)
        )

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """The Prometheus clients, open from the app's start to its end."""
        client = PrometheusClient.for_config(self.cfg.api, growing=reading_more)
        # Probes get their own client: a short timeout, and no waiting behind metrics requests for a connection.
        probe = PrometheusClient.for_config(
            self.cfg.api, timeout=min(READY_TIMEOUT_SECONDS, self.cfg.api.timeout_seconds)
        )
        self.execution, self.probe = ExecutionMetrics(self.cfg, client), probe
        self.archive = reader.ServedArchive(self.cfg.archive.url)
        try:
            yield
        finally:
            self.archive.close()
            await probe.close()
            await client.close()

    def authorized(self, request: Request) -> tuple[bool, str | None]:
        """Whether the request has a known key, and the tenant it is scoped to (None: every tenant)."""
        if self.keys is None:
            return True, None
        tenant = tenant_for(request.headers.get("authorization"), self.keys)
        return tenant is not None, None if tenant in (None, ALL_TENANTS) else tenant

    async def serve(self, request: Request, work: Work, path: str) -> Response:
        """A route (``path``) that asks Prometheus: 401 without a key, else ``work(tenant, params, ticket)`` under
        the deadline, its parameters each its own and given once (``inputs.query_of``) and its load admitted
        (``ticket``)."""
        if len(request.headers.getlist("authorization")) > 1:
            # Which one counts would be ours to choose, or a proxy's before us: refused, as a parameter given twice.
            return error(400, "Authorization: given more than once; send one Bearer key")
        known, tenant = self.authorized(request)
        if not known:
            return error(401, "missing or unknown bearer token", {"WWW-Authenticate": "Bearer"})
        ticket = Ticket(self.shedder)

        async def run() -> Document:
            q = query_of(request, query_parameter_names(path))
            CURRENT.set(ticket)  # for this task and those it starts: the answers they read are checked against it
            ticket.take(BASE_WEIGHT)
            return await work(tenant_asked(tenant, tenant is None, q), q, ticket)

        try:
            response = await answer(request, run, self.cfg.api.timeout_seconds, self.cfg.api.prometheus_url)
        except BaseException:
            ticket.release()
            raise
        # A tenant's data, for the key that asked: no shared cache keeps it (nor one proxy's answer for another's
        # key); the summary is a page or JSON by the Accept header, which a cache must key on.
        response.headers["Cache-Control"] = "private, no-store"
        if path == SUMMARY_PATH:
            response.headers["Vary"] = "Accept"
        return Released(response, ticket.release)

    async def archived(self) -> Store | None:
        """The archive's open store (None: none configured, or its SQLite file not there yet: looked for again
        now and then, ``reader.ServedArchive``)."""
        return None if self.archive is None else await self.archive.current()

    def started(self) -> ExecutionMetrics:
        """The app's execution reader (the app has started: routes run only then)."""
        if self.execution is None:
            raise RuntimeError("the app has not started")  # a 500, as any route before its lifespan
        return self.execution

    async def metrics(self, request: Request) -> Response:
        """GET PATH: the execution's series (``metrics.respond``: a document, or a stream for a long window; the
        archived series past Prometheus' retention)."""
        execution_id, timeout = request.path_params[ID], self.cfg.api.timeout_seconds

        async def work(tenant: str | None, q: dict[str, str], ticket: Ticket) -> Document:
            series, cluster, asked = q.get(SERIES), q.get(CLUSTER), (q.get("start"), q.get("end"), q.get("step"))
            store = await self.archived()
            return await respond(
                store, self.started(), execution_id, *asked, tenant, timeout, series, cluster, ticket.take
            )

        return await self.serve(request, work, PATH)

    async def execution_summary(self, request: Request) -> Response:
        """GET SUMMARY_PATH: the execution's report; as the report's page (``report.html``) where the client
        prefers text/html (a browser). Errors are JSON either way."""
        execution_id = request.path_params[ID]
        as_page = prefers_html(request.headers.get("accept", ""))

        async def work(tenant: str | None, q: dict[str, str], ticket: Ticket) -> dict[str, Any] | HTMLResponse:
            ticket.take(REPORT_WEIGHT)
            prometheus, cluster, store = self.started().prometheus, q.get(CLUSTER), await self.archived()
            if as_page:  # from Prometheus, or from the archive where Prometheus no longer has the run
                return HTMLResponse(
                    await reader.execution_page(
                        self.cfg, prometheus, store, execution_id, q.get("start"), q.get("end"), tenant, cluster
                    )
                )
            return await reader.execution_summary(
                self.cfg, prometheus, store, execution_id, q.get("start"), q.get("end"), tenant, cluster
            )

        return await self.serve(request, work, SUMMARY_PATH)

    async def fleet_summary(self, request: Request) -> Response:
        """GET FLEET_PATH: the tenant's executions ranked by GPU-hours wasted."""

        async def work(tenant: str | None, q: dict[str, str], ticket: Ticket) -> dict[str, Any]:
            ticket.take(REPORT_WEIGHT)
            top = q.get("top", "20")
            if not (top.isascii() and top.isdigit() and len(top) <= 4):
                raise RequestError(
                    400,
                    f"top: {top[:20]!r} is not accepted; accepted: a whole number from 1 to {document.MAX_FLEET_TOP}",
                )
            return await reader.fleet_summary(
                self.cfg,
                self.started().prometheus,
                await self.archived(),
                q.get("since", "7d"),
                int(top),
                tenant,
                q.get(CLUSTER),
            )

        return await self.serve(request, work, FLEET_PATH)

    async def readyz(self, request: Request) -> JSONResponse:
        """GET /readyz: 200 while Prometheus answers ``vector(1)`` in time and the archive, where one is open,
        answers ``SELECT 1``; else 503. It needs no key, so it says only ready or not ready; why not goes to the
        log."""
        if (refused := no_parameters(request, "/readyz")) is not None:
            return refused
        not_ready = JSONResponse({"status": "not ready"}, status_code=503)
        probe = self.probe
        if probe is None:
            return not_ready
        try:
            # httpx's timeout bounds each phase; this bounds the whole answer.
            with anyio.fail_after(READY_TIMEOUT_SECONDS + 1):
                await probe.instant(READY_QUERY)
        except PrometheusError as err:
            log.warning("not ready: %s", err)
            return not_ready
        except TimeoutError:
            log.warning("not ready: Prometheus at %s did not answer in %g s", probe.url, READY_TIMEOUT_SECONDS + 1)
            return not_ready
        store = await self.archived()
        if store is not None and (why := await archive_unready(store)):
            log.warning("not ready: the archive (archive.url) %s", why)
            return not_ready
        if self.archive is not None and self.archive.unopened:  # its file exists, and the routes cannot read it
            log.warning("not ready: %s", self.archive.unopened)
            return not_ready
        return JSONResponse({"status": "ready"})

    async def openapi(self, request: Request) -> JSONResponse:
        """GET /openapi.json: the API's description for this config."""
        if (refused := no_parameters(request, OPENAPI_PATH)) is not None:
            return refused
        return JSONResponse(openapi_document(self.cfg))


async def archive_unready(store: Any) -> str:
    """Why the open archive cannot answer the routes that read it ("" where it answers ``SELECT 1`` within
    READY_TIMEOUT_SECONDS): they would answer 503 (``reader.in_archive``), so the process is not ready either."""
    from gpu_execution_pack.archive.store import DATABASE_ERRORS, one_line  # open: the extra is there

    try:
        with anyio.fail_after(READY_TIMEOUT_SECONDS):
            # A database that never answers leaves its thread waiting, not the probe.
            await anyio.to_thread.run_sync(store.ping, abandon_on_cancel=True)
    except DATABASE_ERRORS as err:
        return f"does not answer ({one_line(err)[:200]})"
    except TimeoutError:
        return f"did not answer in {READY_TIMEOUT_SECONDS:g} s"
    return ""


def tenant_asked(tenant: str | None, every_tenant: bool, q: dict[str, str]) -> str | None:
    """The tenant a request is served as: its key's, or with a key to every tenant the ``tenant`` parameter's
    (None: every tenant; "", ``tenant=``: the GPUs without the tenant label). A key scoped to one tenant may name
    only its own."""
    asked = q.get(TENANT)
    if asked is None:
        return tenant
    if not every_tenant:
        if asked != tenant:
            raise RequestError(400, f"{TENANT}: accepted only from a key to every tenant, or naming the key's own")
        return tenant
    if asked == ALL_TENANTS:  # the keys file's word for every tenant, not a tenant's name (it found nothing)
        raise RequestError(400, f"{TENANT}: {shown(asked)}; leave {TENANT} out for every tenant the key reads")
    if len(asked) > MAX_CLUSTER_LENGTH:
        raise RequestError(
            400,
            f"{TENANT}: {shown(asked)}; accepted: a tenant's name, up to {MAX_CLUSTER_LENGTH} characters "
            "(empty: the GPUs without the tenant label)",
        )
    return asked


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


class Released(Response):
    """A route's response that gives back its request's share of the load (``release``) once it has been sent
    (a stream: once it ends, however it ends)."""

    def __init__(self, inner: Response, release: Callable[[], None]):
        self.inner, self.release = inner, release
        self.status_code, self.raw_headers = inner.status_code, inner.raw_headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.inner(scope, receive, send)
        finally:
            self.release()


def cut(path: str, limit: int = 200) -> str:
    """A request's path as an error message echoes it: at most ``limit`` characters."""
    return path if len(path) <= limit else f"{path[:limit]}... ({len(path)} characters)"


def no_parameters(request: Request, path: str) -> JSONResponse | None:
    """The query parameters of a route that takes none (the probes, the OpenAPI document), read as every route
    reads its own (``inputs.query_of``): any is the 400 naming it that another route answers for one it does not
    take; None where there is none."""
    try:
        query_of(request, query_parameter_names(path))
    except RequestError as err:
        return error(err.status, str(err))
    return None


async def healthz(request: Request) -> JSONResponse:
    """GET /healthz: the process is up (Prometheus is not asked)."""
    if (refused := no_parameters(request, "/healthz")) is not None:
        return refused
    return JSONResponse({"status": "ok"})


async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
    """Starlette's 404 and 405 (and any other HTTP error) as JSON errors that say what was asked."""
    if exc.status_code == 404:
        message = f"no such route: {cut(request.url.path)}"
    elif exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        message = f"method {request.method} not allowed on {cut(request.url.path)}" + (
            f"; allowed: {allowed}" if allowed else ""
        )
    else:
        message = exc.detail
    return error(exc.status_code, message, exc.headers)


async def server_error(request: Request, exc: Exception) -> JSONResponse:
    """Any other exception: a bare 500 (the traceback goes to the server's log, not the client)."""
    return error(500, "internal server error")
