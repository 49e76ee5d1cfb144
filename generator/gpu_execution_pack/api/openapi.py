"""The API's OpenAPI 3.1 description: the series and units from the catalog, the routes from a table.

Each route is one :class:`Operation` in ROUTES: its parameters, its answers and the errors it
can answer with. The metrics document's schema and its ``series`` parameter list every series the
catalog serves (``catalog.SERVABLE_SERIES``; the default answer is ``catalog.API_SERIES``), so a new
served series is described without an edit here.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from gpu_execution_pack import catalog
from gpu_execution_pack.api.responses import MAX_HEADER_BYTES
from gpu_execution_pack.archive.reader import ARCHIVE, PROMETHEUS
from gpu_execution_pack.config import CLUSTER, Config, cluster_scope
from gpu_execution_pack.promql.durations import DURATION_PATTERN
from gpu_execution_pack.query.params import (
    DEFAULT_STEP,
    MAX_CLUSTER_LENGTH,
    MAX_ID_LENGTH,
    MAX_STEP,
    MIN_STEP,
    TIME_EXAMPLE,
)
from gpu_execution_pack.query.prometheus import READY_QUERY
from gpu_execution_pack.report.document import MAX_FLEET_TOP

ID = "execution_id"  # the path parameter that carries the execution id, whose pattern the config sets
SERIES = "series"  # the metrics route's query parameter that names the series to answer
TENANT = "tenant"  # the query parameter that names a tenant (only with a key to every tenant)
ONE_EXECUTION, FILTER = "execution", "filter"  # what ``cluster`` does on a route: pick the execution's, or filter
PATH = f"/api/v2/external/execution/{{{ID}}}/metrics"
SUMMARY_PATH = f"/api/v2/external/execution/{{{ID}}}/summary"
FLEET_PATH = "/api/v2/external/executions/summary"
OPENAPI_PATH = "/openapi.json"

ERRORS = {  # what each error status means, on every route that answers it
    "400": "A parameter is not accepted; the message names it",
    "401": "Missing or unknown bearer token",
    "404": "No such execution for this key's tenant",
    "429": "Busy: the points in flight would pass api.max_points_in_flight; retry after Retry-After seconds",
    "431": f"Request headers over {MAX_HEADER_BYTES} bytes",
    "502": "Prometheus unreachable, failing, answering oddly, or answering more than api.max_answer_mb",
    "503": "Busy: the process's memory is over api.max_memory_mb; retry after Retry-After seconds",
}
RETRY_AFTER = {
    "Retry-After": {"description": "Seconds to wait (api.retry_after_seconds)", "schema": {"type": "integer"}}
}
WWW_AUTHENTICATE = {"WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}}
HEADERS = {"401": WWW_AUTHENTICATE, "429": RETRY_AFTER, "503": RETRY_AFTER}  # the headers an error answers with
TENANT_PARAMETER = {
    "name": TENANT,
    "in": "query",
    "schema": {"type": "string", "maxLength": MAX_CLUSTER_LENGTH},
    "description": "With a key to every tenant: only this tenant's executions (the value of api.tenant_label; "
    "empty: the GPUs without that label); needed when an execution id is held by more than one tenant, GPUs "
    "without the label counting as one (else 409). A key scoped to one tenant may name only its own",
}
PAST_DEADLINE = "Past the request's deadline (api.timeout_seconds)"
REPORT_PAST_DEADLINE = "Prometheus too slow: api.timeout_seconds for the whole request"
DATE_TIME = {"type": "string", "format": "date-time"}
DEFAULT_NAMES = [s.api_name for s in catalog.API_SERIES]
ON_REQUEST_NAMES = [s.api_name for s in catalog.SERVABLE_SERIES if s.api_optional]
SERIES_PARAMETER = {
    "name": SERIES,
    "in": "query",
    "style": "form",  # series=a,b: one value, the names separated by commas
    "explode": False,
    "schema": {
        "type": "array",
        "items": {"type": "string", "enum": [s.api_name for s in catalog.SERVABLE_SERIES]},
        "minItems": 1,
        "uniqueItems": True,
        "default": DEFAULT_NAMES,
    },
    "description": "The series to answer, by API name, separated by commas, each at most once; the document "
    f"lists them in its own order. Default: the {len(DEFAULT_NAMES)} default series ({', '.join(DEFAULT_NAMES)}). "
    f"Served only when named: {', '.join(ON_REQUEST_NAMES)}",
}


@dataclass(frozen=True)
class Operation:
    """A GET route: its parameters, its answers (status -> description and schema), its error statuses."""

    summary: str
    answers: dict[str, tuple[str, str]]
    parameters: tuple[dict[str, Any] | str, ...] = ()  # ID: the execution id, as the config allows it
    errors: tuple[str, ...] = ()  # statuses of ERRORS, and 504 (``too_slow``)
    too_slow: str = PAST_DEADLINE
    public: bool = False  # answered without a bearer token
    cluster: str = ""  # with a cluster label configured: ONE_EXECUTION or FILTER (the ``cluster`` parameter)
    one_execution: bool = False  # a route of one execution id: 409 when two tenants (or clusters) hold it


ROUTES: dict[str, Operation] = {
    PATH: Operation(
        "An execution's GPU and system metrics",
        {
            "200": (
                "The series. A window of over 10,000 points per series is streamed (chunked): a failure after its "
                "first bytes closes the connection before the body ends",
                "Metrics",
            )
        },
        (
            ID,
            {
                "name": "start",
                "in": "query",
                "schema": DATE_TIME,
                "description": f"ISO 8601 such as {TIME_EXAMPLE}, in the years 1 to 9999 once in UTC; default: the "
                "execution's first sample (the first point of the step grid after it)",
            },
            {
                "name": "end",
                "in": "query",
                "schema": DATE_TIME,
                "description": "ISO 8601, at or after start; default: its last sample, or now while it reports",
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
                "description": f"Prometheus duration from {MIN_STEP} to {MAX_STEP}, and at most the window from start "
                "to end (when they differ); at most api.max_points points per series",
            },
            SERIES_PARAMETER,
            TENANT_PARAMETER,
        ),
        ("400", "401", "404", "429", "431", "502", "503", "504"),
        cluster=ONE_EXECUTION,
        one_execution=True,
    ),
    SUMMARY_PATH: Operation(
        "An execution's report: utilisation, memory, power, energy, cost, alerts and verdicts",
        {
            "200": (
                "The report; a client whose Accept header ranks text/html above JSON (a browser) gets it as one "
                "self-contained HTML page with charts over the span instead",
                "Summary",
            )
        },
        (
            ID,
            {
                "name": "start",
                "in": "query",
                "schema": DATE_TIME,
                "description": "ISO 8601; default: the execution's first sample",
            },
            {"name": "end", "in": "query", "schema": DATE_TIME, "description": "ISO 8601; default: its last sample"},
            TENANT_PARAMETER,
        ),
        ("400", "401", "404", "429", "431", "502", "503", "504"),
        REPORT_PAST_DEADLINE,
        cluster=ONE_EXECUTION,
        one_execution=True,
    ),
    FLEET_PATH: Operation(
        "The key's executions of the last `since`, ranked by GPU-hours wasted",
        {"200": ("The ranking", "FleetSummary")},
        (
            {"name": "since", "in": "query", "schema": {"type": "string", "default": "7d"}},
            {
                "name": "top",
                "in": "query",
                "schema": {"type": "integer", "minimum": 1, "maximum": MAX_FLEET_TOP, "default": 20},
            },
            TENANT_PARAMETER,
        ),
        ("400", "401", "429", "431", "502", "503", "504"),
        REPORT_PAST_DEADLINE,
        cluster=FILTER,
    ),
    "/healthz": Operation(
        "Liveness: the process is up (Prometheus is not asked)",
        {"200": ('{"status": "ok"}', "Status")},
        errors=("400",),  # it takes no query parameter: one given is refused, as on every route
        public=True,
    ),
    "/readyz": Operation(
        f"Readiness: Prometheus answers the instant query `{READY_QUERY}` in time, and so does the archive "
        "(archive.url) where one is open",
        {
            "200": ('{"status": "ready"}', "Status"),
            "503": ('Prometheus or the archive unreachable, failing or too slow: {"status": "not ready"}', "Status"),
        },
        errors=("400",),
        public=True,
    ),
    # Listed as the other routes are, so that it reads the parameters it takes (none) where they do.
    OPENAPI_PATH: Operation(
        "This description of the API, for the endpoint's config",
        {"200": ("The OpenAPI 3.1 document", "OpenApi")},
        errors=("400",),
        public=True,
    ),
}

# Where an answer came from (archive.reader): Prometheus, or the archive where Prometheus no longer has the run.
SOURCE = {
    "type": "string",
    "enum": [PROMETHEUS, ARCHIVE],
    "description": f"Where the answer was read: {PROMETHEUS}, or the {ARCHIVE} (docs/archive.md) where Prometheus "
    "no longer has the execution or the start of its run",
}
ARCHIVED_STEP = {
    "type": "string",
    "description": f"Only when source is {ARCHIVE}: the step the archive kept the execution's series at "
    "(archive.step), a Prometheus duration",
}
SCHEMAS: dict[str, dict[str, Any]] = {  # the schemas after the metrics document's
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
            "notes",
        ],
        "properties": {"source": SOURCE, "step": ARCHIVED_STEP},
    },
    "FleetSummary": {
        "type": "object",
        "description": "Executions ranked by GPU-hours wasted, with their verdict codes",
        "required": ["since", "end", "tenant", "executions", "top"],
        "properties": {
            "tenant": {
                "type": ["string", "null"],
                "description": "The tenant the view covers (the key's, or the tenant parameter); null: every tenant",
            },
            "top": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "source": SOURCE,
                        "tenant": {
                            "type": ["string", "null"],
                            "description": "The tenant label's value on the execution's series (null without one): "
                            "over every tenant, two tenants' executions of one id are two rows",
                        },
                    },
                },
            },
        },
    },
    "OpenApi": {"type": "object", "required": ["openapi", "info", "paths"], "description": "An OpenAPI 3.1 document"},
    "Status": {
        "type": "object",
        "required": ["status"],
        "properties": {
            "status": {"type": "string", "enum": ["ok", "ready", "not ready"]},
        },
    },
    "Ambiguous": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {"type": "string"},
            "tenants": {"type": "array", "items": {"type": "string"}, "description": "The tenants, sorted"},
            "clusters": {"type": "array", "items": {"type": "string"}, "description": "The clusters, sorted"},
        },
    },
}
ENTRY = {
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


def openapi_document(cfg: Config | None = None) -> dict[str, Any]:
    """The endpoint's OpenAPI 3.1 description for ``cfg`` (its id pattern); the series and units from the catalog."""
    cfg = cfg or Config()
    document = copy.deepcopy(  # a fresh document per call, as a literal would be: the tables stay as they are
        {
            "openapi": "3.1.0",
            "info": {"title": "gpu-execution-pack metrics", "version": "2"},
            "components": {
                "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
                "schemas": {"Entry": ENTRY, "Metrics": metrics_schema(), **SCHEMAS},
            },
            "security": [{"bearer": []}],
            "paths": {path: {"get": operation(route, cfg)} for path, route in ROUTES.items()},
        }
    )
    if cluster_scope(cfg).enabled:
        with_clusters(document["components"]["schemas"])
    return document


def with_clusters(schemas: dict[str, Any]) -> None:
    """The schemas where a cluster label is configured: the documents name the execution's cluster."""
    for name in ("Metrics", "Summary"):
        schemas[name]["required"].insert(1, CLUSTER)
    schemas["Metrics"]["properties"] = {"executionId": {"type": "string"}, CLUSTER: {"type": "string"}} | {
        k: v for k, v in schemas["Metrics"]["properties"].items() if k != "executionId"
    }


def metrics_schema() -> dict[str, Any]:
    """The metrics document: its head, and every series the catalog serves under its API name.

    None is ``required``: which are present depends on the ``series`` parameter (by default the
    default series, each present even without entries; else exactly those named).
    """
    return {
        "type": "object",
        "required": ["executionId", "start", "end", "step", "series"],
        "properties": {
            "executionId": {"type": "string"},
            "start": DATE_TIME,
            "end": DATE_TIME,
            "step": {"type": "string"},
            "source": {
                "const": ARCHIVE,
                "description": f"Only when read from the {ARCHIVE} (docs/archive.md): Prometheus no longer has the run",
            },
            "series": {
                "type": "object",
                "description": f"Without the {SERIES} parameter, each of the {len(DEFAULT_NAMES)} default series (and "
                f"no other); with it, exactly the series it names",
                "properties": {s.api_name: series_schema(s) for s in catalog.SERVABLE_SERIES},
                "additionalProperties": False,
                "minProperties": 1,
            },
        },
    }


def series_schema(series: catalog.Series) -> dict[str, Any]:
    """One API series in the metrics document: its unit, and an entry per GPU or host."""
    per = "host." if series.labels == catalog.NODE_LABELS else "GPU or MIG instance."
    when = f" Only when the {SERIES} parameter names it." if series.api_optional else ""
    return {
        "type": "object",
        "description": f"{series.doc} Unit: {series.api_unit}. One entry per {per}{when}",
        "properties": {
            "unit": {"const": series.api_unit},
            "entries": {"type": "array", "items": {"$ref": "#/components/schemas/Entry"}},
        },
    }


def operation(route: Operation, cfg: Config) -> dict[str, Any]:
    """A route's ``get`` object: its parameters (the id's pattern from ``cfg``) and its responses."""
    out: dict[str, Any] = {"summary": route.summary}
    clustered = route.cluster if cluster_scope(cfg).enabled else ""
    if route.parameters:
        out["parameters"] = [id_parameter(cfg) if p == ID else p for p in route.parameters]
    if clustered:
        out["parameters"].append(cluster_parameter(cfg, clustered))
    if route.public:
        out["security"] = []
    out["responses"] = {
        **{status: response(description, schema) for status, (description, schema) in route.answers.items()},
        **{status: response(route.too_slow if status == "504" else ERRORS[status], "Error") for status in route.errors},
    }
    for status, headers in HEADERS.items():
        if status in out["responses"]:
            out["responses"][status]["headers"] = headers
    if route.one_execution:
        clusters = f", or exists in more than one cluster and no {CLUSTER} was given" if clustered else ""
        out["responses"]["409"] = response(
            f"The execution id is held by more than one tenant (a key to every tenant, no {TENANT} given){clusters}: "
            "they are listed",
            "Ambiguous",
        )
    return out


def query_parameter_names(path: str) -> frozenset[str]:
    """The query parameters ``path``'s route takes, as the document lists them (and ``cluster`` where the route
    has one: without a cluster label its own check says why it is refused)."""
    op = ROUTES[path]
    names = {p["name"] for p in op.parameters if isinstance(p, dict) and p.get("in") == "query"}
    return frozenset(names | ({CLUSTER} if op.cluster else set()))


def cluster_parameter(cfg: Config, does: str) -> dict[str, Any]:
    """The ``cluster`` query parameter: a value of the configured cluster label."""
    clusters = cluster_scope(cfg)
    if does == ONE_EXECUTION:
        description = (
            f"{clusters.phrase('The cluster')} that holds the execution; required only when the id exists in "
            "more than one cluster this key may see (else 409), otherwise the one cluster that holds it"
        )
    else:
        description = f"Only the executions of {clusters.phrase('this cluster')}; default: every cluster"
    return {
        "name": CLUSTER,
        "in": "query",
        "schema": {"type": "string", "minLength": 1, "maxLength": MAX_CLUSTER_LENGTH},
        "description": description,
    }


def id_parameter(cfg: Config) -> dict[str, Any]:
    """The ``execution_id`` path parameter: the whole id matches the configured pattern."""
    return {
        "name": ID,
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": cfg.api.execution_id_pattern, "maxLength": MAX_ID_LENGTH},
        "description": "The whole id matches the pattern (api.execution_id_pattern)",
    }


def response(description: str, schema: str) -> dict[str, Any]:
    """A response whose JSON body is the component ``schema``."""
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
    }
