"""The ASGI app: the metrics route, bearer auth, JSON errors, and the OpenAPI document."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gpu_execution_pack.api.auth import ALL_TENANTS, load_keys, tenant_for
from gpu_execution_pack.api.metrics import ExecutionMetrics, RequestError
from gpu_execution_pack.api.prometheus import PrometheusClient, PrometheusError
from gpu_execution_pack.config import Config
from gpu_execution_pack.rules import catalog

PATH = "/api/v2/external/execution/{execution_id}/metrics"
log = logging.getLogger("gpu_execution_pack.api")


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def create_app(cfg: Config, keys: dict[str, str] | None = None) -> Starlette:
    """The app for ``cfg``; ``keys`` (key -> tenant) default to the configured keys file or environment."""
    keys = load_keys(cfg.api.keys_file) if keys is None else keys
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: Starlette):
        client = PrometheusClient(cfg.api.prometheus_url, cfg.api.timeout_seconds)
        state["metrics"] = ExecutionMetrics(cfg, client)
        yield
        await client.close()

    async def metrics(request: Request) -> JSONResponse:
        tenant = tenant_for(request.headers.get("authorization"), keys)
        if tenant is None:
            return error(401, "missing or unknown bearer token")
        q = request.query_params
        try:
            body = await state["metrics"].fetch(
                request.path_params["execution_id"],
                q.get("start"),
                q.get("end"),
                q.get("step"),
                tenant=None if tenant == ALL_TENANTS else tenant,
            )
        except RequestError as err:
            return error(err.status, str(err))
        except PrometheusError as err:
            log.warning("prometheus: %s", err)
            return error(err.status, str(err))
        return JSONResponse(body)

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(openapi_document())

    return Starlette(
        routes=[Route(PATH, metrics, methods=["GET"]), Route("/openapi.json", openapi, methods=["GET"])],
        lifespan=lifespan,
    )


def openapi_document() -> dict[str, Any]:
    """The endpoint's OpenAPI 3.1 description; the series and units come from the catalog."""
    series_names = [s.api_name for s in catalog.API_SERIES]
    entry = {
        "type": "object",
        "required": ["labels", "values"],
        "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "values": {
                "type": "array",
                "description": "[unix seconds, value in the series' unit] pairs, on the step grid",
                "items": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}]},
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
    return {
        "openapi": "3.1.0",
        "info": {"title": "gpu-execution-pack metrics", "version": "2"},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Entry": entry,
                "Metrics": response,
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
            },
        },
        "security": [{"bearer": []}],
        "paths": {
            PATH: {
                "get": {
                    "summary": "An execution's GPU and system metrics",
                    "parameters": [
                        {"name": "execution_id", "in": "path", "required": True, "schema": {"type": "string"}},
                        {
                            "name": "start",
                            "in": "query",
                            "schema": {"type": "string", "format": "date-time"},
                            "description": "ISO 8601; default: the execution's first sample",
                        },
                        {
                            "name": "end",
                            "in": "query",
                            "schema": {"type": "string", "format": "date-time"},
                            "description": "ISO 8601; default: its last sample, or now while it reports",
                        },
                        {
                            "name": "step",
                            "in": "query",
                            "schema": {"type": "string", "default": "15s"},
                            "description": "Prometheus duration, at least 1s",
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
                        "502": {"description": "Prometheus unreachable or failing", **err},
                        "504": {"description": "Prometheus too slow", **err},
                    },
                }
            }
        },
    }
