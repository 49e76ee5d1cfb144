"""One execution's 12 API series from the recorded series: the implementation behind the endpoint and ``query``.

The contract is domain-notes section 1: series under their API names, in the API's units, one
entry per GPU (GPU series) or per host (system series), over ``start``..``end`` at ``step``.
Prometheus answers at most 11,000 points per series per query, so long ranges are fetched in
chunks on one grid (``start + k * step``) and stitched, which leaves no gap and no duplicate.

A window of one chunk is answered from one query per level (GPU, host), the document built in
memory. A longer one is streamed (:class:`MetricsStream`): the document is written in its own
order, series by series, entry by entry, each entry's values chunk by chunk, so only the chunks
in flight are held, whatever the range. Both give the same bytes.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson

from gpu_execution_pack import catalog
from gpu_execution_pack.api.prometheus import PrometheusClient, PrometheusError, deadline, off_loop
from gpu_execution_pack.config import Config
from gpu_execution_pack.promql import Expr, aggregate, call, match, on, parse_duration_seconds, render, selector
from gpu_execution_pack.promql.durations import DURATION_RE, duration_text

MAX_POINTS_PER_QUERY = 11_000  # Prometheus refuses more per series
CHUNK_POINTS = 10_000
STREAM_POINTS = CHUNK_POINTS  # windows of more points per series are streamed (read at call time: tests lower it)
OFFLOAD_SAMPLES = 20_000  # a document of more samples (some 10 ms of work) is built and encoded in a worker thread
DISCOVERY_STEPS = 50  # evaluation points of the query that lists a streamed window's entries
DISCOVERY_MARGIN_SECONDS = 3600  # how far before the window an entry's samples may count (>= any lookback)
CONCURRENCY = 8  # queries in flight per request
# A stream's pieces in flight ahead of the one being written: one worker thread converts them, so
# more only make Prometheus answer in bursts that take the machine's cores from the event loop.
STREAM_CONCURRENCY = 2
LOOKBACK_SECONDS = 300  # Prometheus' default lookback (staleness) window
SPAN_CACHE_SECONDS = 300  # how long a finished execution's span is reused
SPAN_CACHE_ENTRIES = 4096
MAX_ID_LENGTH = 256  # an execution id's most characters, whatever api.execution_id_pattern allows
DEFAULT_STEP = "15s"
MIN_STEP = "1s"
MAX_STEP = "1y"  # Prometheus overflows past 292 years; no execution's metrics need a coarser grid
TIME_EXAMPLE = "2026-12-02T10:00:00Z"
EARLIEST = datetime(1, 1, 1, tzinfo=UTC)  # times must fall in years 1 to 9999 once converted to UTC
LATEST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
log = logging.getLogger("gpu_execution_pack.api")


class RequestError(Exception):
    """The request cannot be answered: ``status`` is the HTTP status, the message says why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def bad(message: str) -> RequestError:
    """A 400 whose message names the parameter first and says what is accepted."""
    return RequestError(400, message)


def shown(value: str, limit: int = 40) -> str:
    """A client's value quoted for an error message, cut short: a 5,000-digit step is not echoed back."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"... ({len(value)} characters)"


@dataclass(frozen=True)
class Window:
    start: float  # unix seconds, on the step grid
    end: float
    step: float

    @property
    def points(self) -> int:
        return int((self.end - self.start) // self.step) + 1

    def chunks(self, points: int) -> list[tuple[float, float]]:
        """[start, end] pairs covering the grid, each at most ``points`` points, none overlapping."""
        out, k = [], 0
        while k < self.points:
            last = min(k + points, self.points) - 1
            out.append((self.start + k * self.step, self.start + last * self.step))
            k = last + 1
        return out


@dataclass(frozen=True)
class Span:
    """An execution's first and last sample (unix seconds), and whether it still reports."""

    first: float
    last: float
    running: bool


@dataclass(frozen=True)
class Params:
    """A request's ``start``, ``end`` (None: not given) and ``step``, parsed and checked on their own."""

    start: float | None
    end: float | None
    step: float
    step_text: str


def check_execution_id(execution_id: str, pattern: re.Pattern[str]) -> None:
    """400 unless the whole id matches ``pattern`` (``$`` would let a final newline through) within MAX_ID_LENGTH."""
    if len(execution_id) > MAX_ID_LENGTH or not pattern.fullmatch(execution_id):
        raise bad(f"execution_id: not accepted; it must match {pattern.pattern} (at most {MAX_ID_LENGTH} characters)")


def parse_time(name: str, value: str | None) -> float | None:
    """ISO 8601 (offset optional, ``Z`` accepted; naive times are UTC) to unix seconds; None when not given.

    An empty value is refused rather than read as "not given", and only ASCII digits are read:
    Python's parser would take other scripts' digits, which no client means. A time that its
    offset moves out of the years 1 to 9999 in UTC is refused too.
    """
    if value is None:
        return None
    refused = bad(f"{name}: {shown(value)} is not an ISO 8601 time such as {TIME_EXAMPLE}")
    if not value.isascii() or not value.strip():
        raise refused
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise refused from None
    try:
        utc = parsed.replace(tzinfo=parsed.tzinfo or UTC).astimezone(UTC)
    except OverflowError:
        raise bad(
            f"{name}: {shown(value)} is outside the years 1 to 9999 in UTC; accepted: times from "
            f"{iso(EARLIEST.timestamp())} to {iso(LATEST.timestamp())}"
        ) from None
    return utc.timestamp()


def parse_step(value: str | None) -> float:
    """A ``step`` in seconds: a Prometheus duration from MIN_STEP to MAX_STEP (default DEFAULT_STEP)."""
    step = DEFAULT_STEP if value is None else value
    accepted = f"accepted: {MIN_STEP} to {MAX_STEP}"
    try:
        seconds = parse_duration_seconds(step)
    except ValueError:
        if DURATION_RE.fullmatch(step):  # a duration, past the int64 milliseconds Prometheus holds
            raise bad(f"step: {shown(step)} is longer than {MAX_STEP}; {accepted}") from None
        raise bad(f"step: {shown(step)} is not a Prometheus duration such as 15s, 1m or 1h; {accepted}") from None
    if seconds < parse_duration_seconds(MIN_STEP):
        raise bad(f"step: {shown(step)} is under {MIN_STEP}; {accepted}")
    if seconds > parse_duration_seconds(MAX_STEP):
        raise bad(f"step: {shown(step)} is longer than {MAX_STEP}; {accepted}")
    return seconds


def parse_params(start: str | None, end: str | None, step: str | None) -> Params:
    """The window parameters as far as they can be checked without the execution: syntax, range, order."""
    step_s = parse_step(step)
    start_s, end_s = parse_time("start", start), parse_time("end", end)
    if start_s is not None and end_s is not None and end_s < start_s:
        raise bad(f"end: before start ({iso(end_s)} < {iso(start_s)}); accepted: an end at or after start")
    return Params(start_s, end_s, step_s, DEFAULT_STEP if step is None else step)


def resolve_window(params: Params, span: Span, max_points: float, now: float) -> Window:
    """The step grid a request is answered on, from its parameters and the execution's span.

    Not given, ``start`` is the execution's first sample, moved to the first point of the step grid
    (multiples of ``step``) at or after it, and ``end`` its last sample, or ``now`` while it still
    reports. The window must run forward, and ``step`` must be at most its length (else there may
    be no grid point in it), or any step when start and end are the same instant: one point.
    """
    start = span.first if params.start is None else params.start
    execution_end = now if span.running else span.last
    end = execution_end if params.end is None else params.end
    if end < start:
        if params.start is not None:  # and end is the execution's (both given was checked before)
            still = ", now: it still reports" if span.running else ""
            raise bad(
                f"start: {iso(start)} is after the execution's end ({iso(execution_end)}{still}); "
                "accepted: a start at or before it"
            )
        raise bad(
            f"end: {iso(end)} is before the execution's first sample ({iso(span.first)}); "
            "accepted: an end at or after it"
        )
    length = end - start
    if 0 < length < params.step:
        what = (
            "the execution's length" if params.start is None and params.end is None else "the window from start to end"
        )
        raise bad(
            f"step: {shown(params.step_text)} is longer than {what} ({duration_text(length)}); "
            f"accepted: at most {duration_text(length)}"
        )
    if params.start is None and length > 0:  # step <= length: a grid point lies in the window
        start = math.ceil(start / params.step) * params.step
    window = Window(start, start + ((end - start) // params.step) * params.step, params.step)
    if window.points > max_points:
        raise too_many_points(params, window.points, start, end, max_points)
    return window


def too_many_points(params: Params, points: int, start: float, end: float, max_points: float) -> RequestError:
    """The 400 for a window of more than ``max_points`` points, naming the parameter the client set."""
    most = int(max_points)
    span = f"{points} points per series from {iso(start)} to {iso(end)} at step {shown(params.step_text)}"
    if params.start is not None:
        return bad(
            f"start: {iso(start)} is too early: {span}; the most accepted is {most}; "
            f"accepted: a start from {iso(end - (most - 1) * params.step)}, or a longer step"
        )
    if params.end is not None:
        return bad(
            f"end: {iso(end)} is too late: {span}; the most accepted is {most}; "
            f"accepted: an end up to {iso(start + (most - 1) * params.step)}, or a longer step"
        )
    return bad(
        f"step: {span} (the whole execution); the most accepted is {most}; "
        f"accepted: a step of at least {duration_text(math.ceil((end - start) / (most - 1)))}"
    )


def iso(ts: float) -> str:
    """A unix time as ISO 8601 in UTC: whole seconds, or milliseconds (Prometheus' own precision)."""
    spec = "seconds" if float(ts).is_integer() else "milliseconds"
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec=spec).replace("+00:00", "Z")


class ExecutionMetrics:
    """Answers metrics requests for one configuration, through one Prometheus client."""

    def __init__(self, cfg: Config, prometheus: PrometheusClient):
        self.cfg = cfg
        self.api = cfg.api
        self.prometheus = prometheus
        self.id_pattern = re.compile(cfg.api.execution_id_pattern)
        # Spans of finished executions, by (id, tenant): 3 round trips saved per repeated request.
        self.finished: OrderedDict[tuple[str, str | None], tuple[Span, float]] = OrderedDict()

    def selector(self, series: catalog.Series, execution_id: str, tenant: str | None, *matchers: str) -> str:
        """The query for one series of the execution, scoped to ``tenant`` (None: every tenant).

        Per-GPU series carry the tenant label. Host series do not (a host is shared): they are
        kept only for the hosts where this tenant's GPUs of the execution are, so a tenant never
        sees the hosts of another tenant's execution under the same id. ``matchers`` narrow it
        further (to one entry, for a streamed window).
        """
        return render(self.scoped(series, execution_id, tenant, lambda e: e, *matchers))

    def scoped(
        self,
        series: catalog.Series,
        execution_id: str,
        tenant: str | None,
        read: Callable[[Expr], Expr],
        *matchers: str,
    ) -> Expr:
        """``read(selector)`` of one series of the execution, scoped to ``tenant`` as ``selector`` says.

        ``read`` maps a plain selector to what is asked of it (itself, or ``last_over_time`` of it); for
        host series under a tenant, the hosts of the tenant's GPUs are read the same way.
        """
        execution = match(catalog.EXECUTION_LABEL, execution_id)
        if tenant is None:
            return read(series.select(execution, *matchers))
        scoped = match(self.api.tenant_label, tenant)
        if series.labels == catalog.GPU_LABELS:
            return read(series.select(execution, scoped, *matchers))
        hosts = aggregate("group", catalog.NODE_LABELS, read(catalog.GPU_PRESENCE.select(execution, scoped)))
        return read(series.select(execution, *matchers)).and_(hosts, on(catalog.NODE_LABELS))

    def by_name(self, level: tuple[str, ...], execution_id: str, tenant: str | None) -> str:
        """One query for every API series of a level (``catalog.GPU_LABELS`` or ``NODE_LABELS``), by name."""
        names = [s.name for s in catalog.API_SERIES if s.labels == level]
        execution = match(catalog.EXECUTION_LABEL, execution_id)
        picked = selector("", match("__name__", "|".join(re.escape(n) for n in names), "=~"), execution)
        if tenant is None:
            return render(picked)
        scoped = match(self.api.tenant_label, tenant)
        if level == catalog.GPU_LABELS:
            return render(picked.where(scoped))
        hosts = aggregate("group", catalog.NODE_LABELS, catalog.GPU_PRESENCE.select(execution, scoped))
        return render(picked.and_(hosts, on(catalog.NODE_LABELS)))

    async def span(self, execution_id: str, tenant: str | None) -> Span:
        """First and last sample of the execution's GPU series, and whether it still reports; 404 if none.

        Samples are counted per hour over the lookback (one cheap pass over the data; a
        ``timestamp()`` subquery is far slower), then the first and last hour with samples are
        read whole for the exact times.
        """
        presence = self.selector(catalog.GPU_PRESENCE, execution_id, tenant)
        now = time.time()
        lookback = parse_duration_seconds(self.api.lookback)
        bucket = max(3600, math.ceil(lookback / CHUNK_POINTS))
        counts = await self.prometheus.range(
            f"sum(count_over_time({presence}[{bucket}s]))", now - lookback, now, bucket
        )
        hours = [t for c in counts for t, _ in c["values"]]
        not_found = RequestError(404, f"execution {execution_id!r} not found")
        if not hours:
            raise not_found
        first = await self.prometheus.instant(f"{presence}[{bucket}s]", at=min(hours))
        last = await self.prometheus.instant(f"{presence}[{bucket}s]", at=max(hours))
        firsts = [t for r in first for t, _ in r["values"]]
        lasts = [t for r in last for t, _ in r["values"]]
        if not firsts or not lasts:  # its samples left the retention between the queries
            raise not_found
        end = max(lasts)
        return Span(min(firsts), end, now - end < LOOKBACK_SECONDS)  # within Prometheus' lookback: it reports

    async def window(self, execution_id: str, params: Params, tenant: str | None) -> Window:
        """The grid a request for ``execution_id`` is answered on (its span read from Prometheus)."""
        check_execution_id(execution_id, self.id_pattern)
        span = await self.cached_span(execution_id, tenant)
        return resolve_window(params, span, self.api.max_points, time.time())

    async def cached_span(self, execution_id: str, tenant: str | None) -> Span:
        """``span``, kept SPAN_CACHE_SECONDS for an execution that has finished: its span does not change
        (unless its id is reused, which the expiry bounds). Running executions are always read anew."""
        key, now = (execution_id, tenant), time.monotonic()
        kept = self.finished.get(key)
        if kept is not None and kept[1] > now:
            self.finished.move_to_end(key)
            return kept[0]
        span = await self.span(execution_id, tenant)
        if not span.running:
            self.finished[key] = (span, now + SPAN_CACHE_SECONDS)
            self.finished.move_to_end(key)
            while len(self.finished) > SPAN_CACHE_ENTRIES:
                self.finished.popitem(last=False)
        return span

    async def request_window(
        self, execution_id: str, start: str | None, end: str | None, step: str | None, tenant: str | None
    ) -> tuple[Params, Window]:
        """A request's id and parameters checked, and the window they ask for (400s name what is wrong)."""
        check_execution_id(execution_id, self.id_pattern)
        params = parse_params(start, end, step)
        return params, await self.window(execution_id, params, tenant)

    async def respond(
        self,
        execution_id: str,
        start: str | None = None,
        end: str | None = None,
        step: str | None = None,
        tenant: str | None = None,
        timeout: float = math.inf,
    ) -> bytes | MetricsStream:
        """What the endpoint answers: the document's JSON, or, for a window of more than STREAM_POINTS
        points, a :class:`MetricsStream` whose first piece has been fetched (the bytes are the same).

        Large documents are converted and encoded in a worker thread, off the event loop. Once a
        stream's headers are sent, each later piece must arrive within ``timeout`` seconds of the
        stream waiting for it (api.timeout_seconds; the caller bounds everything before).
        """
        params, window = await self.request_window(execution_id, start, end, step, tenant)
        if window.points > STREAM_POINTS:
            stream = MetricsStream(self, execution_id, params, window, tenant)
            await stream.open(await self.entries(execution_id, window, tenant))
            stream.timeout = timeout
            return stream
        answers = await self.answers(execution_id, window, tenant)
        if sum(len(r["values"]) for result in answers for r in result) <= OFFLOAD_SAMPLES:
            return orjson.dumps(assemble(execution_id, params, window, answers))
        return await off_loop(lambda: orjson.dumps(assemble(execution_id, params, window, answers)))

    async def answers(self, execution_id: str, window: Window, tenant: str | None) -> list[list[dict[str, Any]]]:
        """Prometheus' answers for the window: one range query per level (GPU, host) and chunk, in order."""
        limit = asyncio.Semaphore(CONCURRENCY)

        async def chunk(query: str, chunk_start: float, chunk_end: float) -> list[dict[str, Any]]:
            async with limit:
                return await self.prometheus.range(query, chunk_start, chunk_end, window.step)

        # One range query per level (GPU, host) and chunk, the series picked by name: a round trip per
        # series cost more than the data (issue 15). Chunks come back in order, so values stay sorted.
        queries = [self.by_name(level, execution_id, tenant) for level in (catalog.GPU_LABELS, catalog.NODE_LABELS)]
        return await asyncio.gather(*(chunk(q, a, b) for q in queries for a, b in window.chunks(CHUNK_POINTS)))

    async def entries(self, execution_id: str, window: Window, tenant: str | None) -> dict[str, list[dict[str, str]]]:
        """The label sets each API series may have an entry for in the window, in the document's order.

        One cheap range query per series: ``last_over_time`` at DISCOVERY_STEPS points, each reading
        back to the one before and DISCOVERY_MARGIN_SECONDS more, so it finds every series with a
        sample from before the window's lookback to its end: at least those the range query answers
        (an entry found here that has no point in the window is left out of the document).
        """
        length = window.end - window.start
        every = max(math.ceil(length / DISCOVERY_STEPS), 60)
        reach = f"{every + DISCOVERY_MARGIN_SECONDS}s"
        limit = asyncio.Semaphore(CONCURRENCY)

        def last(e: Expr) -> Expr:
            return call("last_over_time", e.range(reach))

        async def found(series: catalog.Series) -> list[dict[str, str]]:
            query = render(self.scoped(series, execution_id, tenant, last))
            async with limit:
                result = await self.prometheus.range(query, window.start, window.end + every, every)
            labels = {}
            for r in result:
                entry = {k: v for k, v in r["metric"].items() if k != "__name__"}
                labels[tuple(sorted(entry.items()))] = entry
            return [labels[k] for k in sorted(labels)]

        sets = await asyncio.gather(*(found(s) for s in catalog.API_SERIES))
        return {s.api_name: found_sets for s, found_sets in zip(catalog.API_SERIES, sets, strict=True)}


def assemble(execution_id: str, params: Params, window: Window, answers: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """The response document from Prometheus' answers (``ExecutionMetrics.answers``), in the API's units."""
    by_name = {s.name: s for s in catalog.API_SERIES}
    entries: dict[str, dict[tuple, dict[str, Any]]] = {s.api_name: {} for s in catalog.API_SERIES}
    for result in answers:
        for r in result:
            series = by_name[r["metric"]["__name__"]]
            labels = {k: v for k, v in r["metric"].items() if k != "__name__"}
            entry = entries[series.api_name].setdefault(tuple(sorted(labels.items())), {"labels": labels, "values": []})
            entry["values"] += api_values(series, r["values"])
    return {
        **head(execution_id, params, window),
        "series": {
            s.api_name: {"unit": s.api_unit, "entries": [entries[s.api_name][k] for k in sorted(entries[s.api_name])]}
            for s in catalog.API_SERIES
        },
    }


def head(execution_id: str, params: Params, window: Window) -> dict[str, Any]:
    """The document's keys before ``series``."""
    return {"executionId": execution_id, "start": iso(window.start), "end": iso(window.end), "step": params.step_text}


class StreamAborted(Exception):
    """A streamed response failed after its first bytes were sent: the connection is closed mid-body."""


@dataclass(frozen=True)
class Piece:
    """One entry's values over one chunk of the window: the unit of a streamed response."""

    series: catalog.Series
    labels: dict[str, str]
    start: float
    end: float


class MetricsStream:
    """A long window's document, written as it is fetched: the same bytes as ``orjson.dumps(assemble(...))``.

    The document's order is series, then entry, then time, so each entry's values are fetched
    chunk by chunk (one range query for one entry, at most CHUNK_POINTS points), STREAM_CONCURRENCY of them
    in flight ahead of the one being written; only those are held, whatever the range. Which
    entries there are comes first, from ``ExecutionMetrics.entries``.

    ``open`` fetches the first piece, so a failing Prometheus still gets its 502 or 504 before any
    byte is sent, within the request's deadline. Past that, the deadline applies to each piece
    (``timeout``, from when the stream waits for it): a long range that keeps coming is not cut
    at api.timeout_seconds, a stalled upstream is. A failure there (Prometheus' error, a piece past
    its deadline) can no longer change the status: the stream raises :class:`StreamAborted`, and the
    server closes the connection without ending the chunked body, which a client sees as a broken
    transfer, never as a whole document.
    """

    def __init__(self, owner: ExecutionMetrics, execution_id: str, params: Params, window: Window, tenant: str | None):
        self.owner = owner
        self.execution_id = execution_id
        self.params = params
        self.window = window
        self.tenant = tenant
        self.timeout = math.inf  # once the headers are sent, how long the stream waits for any one piece
        self.pending: deque[asyncio.Task[tuple[dict[str, str] | None, bytes]]] = deque()
        self.entries: dict[str, list[dict[str, str]]] = {}  # set by ``open``
        self.pieces: Iterator[Piece] = iter(())
        self.sent = 0  # bytes handed to the server so far

    def plan(self, entries: dict[str, list[dict[str, str]]]) -> Iterator[Piece]:
        """The pieces in the document's order."""
        chunks = self.window.chunks(CHUNK_POINTS)
        for series in catalog.API_SERIES:
            for labels in entries[series.api_name]:
                for a, b in chunks:
                    yield Piece(series, labels, a, b)

    async def open(self, entries: dict[str, list[dict[str, str]]]) -> None:
        """Start fetching, and wait for the first piece: its errors are still the request's status."""
        self.entries = entries
        self.pieces = self.plan(entries)
        self.refill()
        if not self.pending:
            return
        first = self.pending[0]
        try:
            await asyncio.wait([first])
        except BaseException:  # cancelled: the deadline, or the client left
            self.close()
            raise
        failure = first.exception()
        if failure is not None:
            self.close()
            raise failure

    def refill(self) -> None:
        """Start the next pieces in order, up to STREAM_CONCURRENCY in flight."""
        while len(self.pending) < STREAM_CONCURRENCY and (piece := next(self.pieces, None)) is not None:
            task = asyncio.ensure_future(self.fetch(piece))
            task.add_done_callback(lambda t: t.cancelled() or t.exception())  # never "exception never retrieved"
            self.pending.append(task)

    def close(self) -> None:
        """Cancel what is in flight (a client that left, a failure): Prometheus stops those queries."""
        while self.pending:
            self.pending.popleft().cancel()

    async def fetch(self, piece: Piece) -> tuple[dict[str, str] | None, bytes]:
        """A piece's labels as Prometheus names them and its values' JSON without brackets; (None, b"") if none.

        Its answer is read, converted and encoded in the worker thread, in one go: a piece is up to
        CHUNK_POINTS samples, and a stream is many of them.
        """
        query = self.owner.selector(
            piece.series,
            self.execution_id,
            self.tenant,
            *(match(k, v) for k, v in piece.labels.items() if k != catalog.EXECUTION_LABEL),
        )
        answer = await self.owner.prometheus.range_answer(query, piece.start, piece.end, self.window.step)
        return await off_loop(self.encode, piece, answer)

    def encode(self, piece: Piece, answer: httpx.Response) -> tuple[dict[str, str] | None, bytes]:
        """``fetch``'s result from Prometheus' answer (PrometheusError if it is not a query result)."""
        for r in self.owner.prometheus.decode(answer):  # the selector may match more labels: only this entry's
            labels = {k: v for k, v in r["metric"].items() if k != "__name__"}
            if labels == piece.labels and r["values"]:
                return labels, encode_values(piece.series, r["values"])
        return None, b""

    async def next_piece(self) -> tuple[dict[str, str] | None, bytes]:
        """The next piece in order, within ``timeout``; the one after the in-flight ones is started."""
        with deadline(self.timeout, self.owner.prometheus.url):
            result = await self.pending[0]
        self.pending.popleft()
        self.refill()
        return result

    async def body(self) -> AsyncIterator[bytes]:
        """The document's bytes, a piece (and the JSON around it) at a time."""
        try:
            async for part in self.parts():
                self.sent += len(part)
                yield part
        except (PrometheusError, RequestError) as err:
            log.warning(
                "prometheus: %s; the response for %s was aborted after %d bytes", err, self.execution_id, self.sent
            )
            raise StreamAborted(str(err)) from err
        finally:
            self.close()

    async def parts(self) -> AsyncIterator[bytes]:
        """The document in its order; an entry's head is written with its first values, so an entry
        found by ``ExecutionMetrics.entries`` but without a point in the window is left out, as
        ``assemble`` leaves it out."""
        chunks = self.window.chunks(CHUNK_POINTS)
        out = [orjson.dumps(head(self.execution_id, self.params, self.window))[:-1], b',"series":{']
        for i, series in enumerate(catalog.API_SERIES):
            out += [b"," if i else b"", orjson.dumps(series.api_name), b':{"unit":', orjson.dumps(series.api_unit)]
            out.append(b',"entries":[')
            written = 0
            for _ in self.entries[series.api_name]:
                opened = False
                for _ in chunks:
                    labels, values = await self.next_piece()
                    if labels is None:
                        continue
                    if not opened:
                        out += [b"," if written else b"", b'{"labels":', orjson.dumps(labels), b',"values":[']
                        opened, written = True, written + 1
                    else:
                        out.append(b",")
                    out.append(values)
                    yield b"".join(out)
                    out = []
                if opened:
                    out.append(b"]}")
            out.append(b"]}")
        out.append(b"}}")
        yield b"".join(out)


def encode_values(series: catalog.Series, samples: list[list[float]]) -> bytes:
    """Samples in the API's unit as JSON pairs, without the list's brackets: a piece of an entry's values."""
    return orjson.dumps(api_values(series, samples))[1:-1]


def api_values(series: catalog.Series, samples: list[list[float]]) -> list[list[float | None]]:
    """[t, value] pairs in the API's unit; NaN and infinities as null. Base-unit series skip the conversion.

    The conversion is ``Series.to_api`` (``Unit.from_base``, rounded to 9 decimals) written out
    inline: a call per value cost more than the value.
    """
    unit = catalog.UNITS[series.api_unit]
    isfinite = math.isfinite
    if unit.op == "":
        return [[t, v if isfinite(v) else None] for t, v in samples]
    factor = unit.factor
    if unit.op == "*":
        return [[t, round(v / factor, 9) if isfinite(v) else None] for t, v in samples]
    return [[t, round(v * factor, 9) if isfinite(v) else None] for t, v in samples]


def api_value(series: catalog.Series, value: float) -> float | None:
    """A sample value in the API's unit; NaN and infinities (which JSON cannot carry) as null."""
    return series.to_api(value) if math.isfinite(value) else None
