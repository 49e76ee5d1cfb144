"""Config keys of section ``api``: the per-execution metrics endpoint (``serve`` and ``query``)."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack.config.loader import ConfigError, opt

# The coarsest step the endpoint serves (and so an archive may keep): Prometheus overflows past 292 years, and no
# execution's metrics need a coarser grid.
MAX_STEP = "1y"


@dataclass(frozen=True)
class Api:
    prometheus_url: str = opt(
        "http://127.0.0.1:9090",
        "Prometheus (or a compatible query API) the metrics endpoint reads the recorded series from. A path is "
        "a prefix of every API path: `http://host:9090/prom` for a Prometheus run with `--web.route-prefix=/prom`, "
        "`http://mimir:8080/prometheus` for Mimir's query frontend.",
        "Your Prometheus, Thanos Query or Mimir query frontend listens elsewhere, or behind a path prefix.",
        kind="url",
    )
    keys_file: str = opt(
        "",
        "File of API keys, one `<key> <tenant>` per line (`*` as tenant: every tenant); "
        "GPU_PACK_API_KEYS holds the same, comma-separated, when no file is set. A relative path is read from the "
        "config file's folder.",
        "Keep keys out of the config and mount them as a secret file.",
    )
    tenant_label: str = opt(
        "namespace",
        "Label on the recorded per-GPU series that names an execution's tenant; a key scoped to one tenant "
        "sees only executions whose series carry its tenant.",
        "Your executions are owned by another label, e.g. `project` or `account`.",
        kind="label",
    )
    execution_id_pattern: str = opt(
        "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$",
        "Regex an execution id must match, else 400.",
        "Your scheduler's ids use other characters.",
        kind="text",
    )
    max_points: float = opt(
        250000.0,
        "Most points per series one request may ask for, else 400 (30 days at 15 s is 172,800).",
        "Longer executions, or a tighter bound on response size.",
        kind="positive",
    )
    lookback: str = opt(
        "35d",
        "How far back the endpoint looks for an execution's first sample when start is not given.",
        "Executions run longer than this, or your retention is shorter.",
        kind="duration",
    )
    timeout_seconds: float = opt(
        30.0,
        "Deadline of a whole request, every query to Prometheus included: past it the endpoint cancels what is "
        "in flight (Prometheus stops the query when its connection closes) and answers 504. A long range "
        "(over 10,000 points per series) is streamed: the deadline holds until its first bytes, then for each "
        "piece it waits for; past it the connection is closed mid-body.",
        "Your Prometheus is slow on long ranges.",
        kind="positive",
    )
    tenant_header: str = opt(
        "X-Scope-OrgID",
        "Name of the header that carries `tenant_id` on every query, when `tenant_id` is set: Mimir's and "
        "Cortex's tenant header by default.",
        "Your multi-tenant query API (or the proxy in front of it) reads the tenant from another header.",
        kind="header",
    )
    tenant_id: str = opt(
        "",
        "Value of `tenant_header` sent with every query; empty sends no header (a single-tenant Prometheus "
        "or Thanos). Mimir reads several tenants joined by `|` when tenant federation is on.",
        "Your recorded series live in a Mimir or Cortex tenant (the one its ruler writes them to).",
        kind="header_value",
    )
    partial_response: bool = opt(
        False,
        "Sent as `partial_response` with every query. Thanos Query answers with what it has when a store is "
        "down only if this is true, and otherwise fails the query (502): an execution is never served with "
        "silently missing GPUs. Prometheus and Mimir ignore the parameter.",
        "Behind Thanos you prefer an answer that may lack some series to a 502 while a store is down.",
    )
    max_points_in_flight: float = opt(
        300_000.0,
        "Points (per series, times the series asked for) all requests of one serve process may have in flight; "
        "every request that asks Prometheus holds 2,000 on arrival, a report 100,000, a metrics request its "
        "window's once known (a streamed one: 10,000 per series), at most this many. A request that does not fit "
        "is answered 429 at once with Retry-After, rather than queueing towards the deadline (docs/api-limits.md: "
        "the burst that chose the default, and how to size it).",
        "Your Prometheus answers more heavy queries in parallel (raise it), or 504s come under load (lower it); "
        "with `serve --workers N` each worker has the whole budget.",
        kind="positive",
    )
    max_memory_mb: float = opt(
        600.0,
        "Resident memory (MB) of one serve process above which new requests are answered 503 with Retry-After "
        "while others are in flight (a request alone always runs), and so are requests in flight that are still "
        "reading an answer from Prometheus, but the oldest. Idle, a process holds about 100 MB.",
        "Set it below your container's memory limit, with room for one request's peak (docs/api-limits.md).",
        kind="positive",
    )
    max_answer_mb: float = opt(
        64.0,
        "Most bytes (MB) one answer of Prometheus' may hold, counted as they arrive and after gzip is undone: "
        "past it the answer is dropped unread (its connection closed, so Prometheus stops sending) and the "
        "request answers 502 naming this key. One answer is one query: a window's series of one level (GPU or "
        "host), a piece of a streamed window, one of a report's queries. Parsed, an answer takes some 8 to 13 "
        "times its size in memory, so 64 MB bounds one at about 500 to 800 MB; the burst benchmark's largest "
        "(30 days at 5 m of an 8-GPU execution) is about 20 MB, and a 16-GPU execution's 10,000-point window "
        "about 36 MB. It keeps a selector that matches far more than an execution, or a proxy answering something "
        "huge, from taking the process down.",
        "Executions of more than about 25 GPUs, served at 10,000 points per series, need more (or ask with a "
        "longer step or fewer series); lower it, with `max_memory_mb`, where the container's memory is small.",
        kind="positive",
    )
    retry_after_seconds: float = opt(
        2.0,
        "The Retry-After (seconds) of a 429 or 503 the load shedding answers.",
        "Your clients retry too eagerly, or requests are short and a shorter wait is enough.",
        kind="positive",
    )

    def __post_init__(self) -> None:
        # A window's step is its span over its points less one: one point (or a fraction) is no series.
        if self.max_points < 2 or self.max_points != int(self.max_points):
            raise ConfigError(
                f"api.max_points: {self.max_points:g} is not accepted; expected a whole number of 2 or more"
            )
