"""A long window's metrics document, written as it is fetched (chunked transfer).

The document is written in its own order, series by series, entry by entry, each entry's values
chunk by chunk, so only the chunks in flight are held, whatever the range; the bytes are those
of the document built in memory (``orjson.dumps(encode.assemble(...))``).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import httpx
import orjson

from gpu_execution_pack import catalog
from gpu_execution_pack.api.encode import encode_values, head
from gpu_execution_pack.promql import match
from gpu_execution_pack.query import execution
from gpu_execution_pack.query.execution import ExecutionMetrics
from gpu_execution_pack.query.params import Params, RequestError, Window
from gpu_execution_pack.query.prometheus import PrometheusError, deadline, off_loop

# A stream's pieces in flight ahead of the one being written: one worker thread converts them, so
# more only make Prometheus answer in bursts that take the machine's cores from the event loop.
STREAM_CONCURRENCY = 2
log = logging.getLogger("gpu_execution_pack.api")


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
    chunk by chunk (one range query for one entry, at most ``execution.CHUNK_POINTS`` points),
    STREAM_CONCURRENCY of them in flight ahead of the one being written; only those are held,
    whatever the range. Which entries there are comes first, from ``ExecutionMetrics.entries``.

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
        # The cluster is matched through the execution's own matchers, not again from an entry's labels.
        self.own_labels = (catalog.EXECUTION_LABEL, *owner.clusters.partition)
        self.timeout = math.inf  # once the headers are sent, how long the stream waits for any one piece
        self.pending: deque[asyncio.Task[tuple[dict[str, str] | None, bytes]]] = deque()
        self.entries: dict[str, list[dict[str, str]]] = {}  # set by ``open``
        self.pieces: Iterator[Piece] = iter(())
        self.sent = 0  # bytes handed to the server so far

    def plan(self, entries: dict[str, list[dict[str, str]]]) -> Iterator[Piece]:
        """The pieces in the document's order."""
        chunks = self.window.chunks(execution.CHUNK_POINTS)
        for series in self.params.series:
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
            *(match(k, v) for k, v in piece.labels.items() if k not in self.own_labels),
            cluster=self.params.cluster,
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
        chunks = self.window.chunks(execution.CHUNK_POINTS)
        out = [orjson.dumps(head(self.execution_id, self.params, self.window))[:-1], b',"series":{']
        for i, series in enumerate(self.params.series):
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
