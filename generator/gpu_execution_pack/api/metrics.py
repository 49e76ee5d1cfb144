"""The metrics route's answer: one execution's series (catalog.API_SERIES, or those named), in memory or streamed.

A window of at most STREAM_POINTS points per series is answered from one query per level (GPU,
host) and chunk, the document built in memory (``encode.assemble``). A longer one is streamed
(``stream.MetricsStream``), so that memory does not grow with the range. Both give the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import orjson

from gpu_execution_pack.api.encode import assemble
from gpu_execution_pack.api.stream import MetricsStream
from gpu_execution_pack.archive import reader
from gpu_execution_pack.query.execution import ExecutionMetrics
from gpu_execution_pack.query.params import RequestError
from gpu_execution_pack.query.prometheus import off_loop

STREAM_POINTS = 10_000  # windows of more points per series are streamed (read at call time: tests lower it)
OFFLOAD_SAMPLES = 20_000  # a document of more samples (some 10 ms of work) is built and encoded in a worker thread


async def respond(
    store: Any,
    metrics: ExecutionMetrics,
    execution_id: str,
    start: str | None = None,
    end: str | None = None,
    step: str | None = None,
    tenant: str | None = None,
    timeout: float = math.inf,
    series: str | None = None,
    cluster: str | None = None,
    admit: Callable[[int], None] = lambda points: None,
) -> bytes | MetricsStream:
    """What the endpoint and the ``query`` command answer: the document's JSON, or, for a window of more than
    STREAM_POINTS points, a :class:`MetricsStream` whose first piece has been fetched (the bytes are the same);
    past Prometheus' retention (its 404 for the execution), the archived series in ``store`` (``from_archive``),
    if any.

    Large documents are converted and encoded in a worker thread, off the event loop. Once a
    stream's headers are sent, each later piece must arrive within ``timeout`` seconds of the
    stream waiting for it (api.timeout_seconds; the caller bounds everything before). ``series``
    is the request's parameter as given: comma-separated API names, None for the default answer;
    ``cluster`` too (None: not given). ``admit`` is given the window's points times the series asked for,
    before any is read, and raises to refuse them (``shedding.Ticket.take``).
    """
    try:
        params, window = await metrics.request_window(execution_id, start, end, step, tenant, series, cluster)
    except RequestError as err:  # the span is where Prometheus says it holds no such execution
        kept = None if err.status != 404 else await from_archive(
            store, metrics, execution_id, start, end, step, tenant, series, cluster
        )  # fmt: skip
        if kept is None:
            raise
        return kept
    # The load shedding's weight (raises a 429 or 503 past the limits): the points held at once, all of an
    # in-memory document's; a stream holds a few pieces at a time, but keeps Prometheus busy for long, so it
    # counts as the largest in-memory document.
    admit(min(window.points, STREAM_POINTS) * len(params.series))
    if window.points > STREAM_POINTS:
        stream = MetricsStream(metrics, execution_id, params, window, tenant)
        await stream.open(await metrics.entries(execution_id, window, tenant, params.series, params.cluster))
        stream.timeout = timeout
        return stream
    answers = await metrics.answers(execution_id, window, tenant, params.series, params.cluster)
    if sum(len(r["values"]) for result in answers for r in result) <= OFFLOAD_SAMPLES:
        return orjson.dumps(assemble(execution_id, params, window, answers))
    return await off_loop(lambda: orjson.dumps(assemble(execution_id, params, window, answers)))


async def from_archive(store: Any, metrics: ExecutionMetrics, execution_id: str, *asked: str | None) -> bytes | None:
    """The metrics document of an archived execution (``archive.reader.archived_series``: start, end, step,
    tenant, series, cluster as ``respond`` takes them), with ``source``; None where the archive has none."""
    found = await reader.in_archive(reader.archived_series, metrics.cfg, store, execution_id, *asked)
    if found is None:
        return None
    params, window, answers = found
    return orjson.dumps({**assemble(execution_id, params, window, answers), "source": reader.ARCHIVE})
