"""Long windows are streamed: the same bytes as the document built in memory, and what a failure does.

The training scenario is 40 minutes (165 points per series); the tests lower the window length
past which the endpoint streams (``metrics.STREAM_POINTS``) and the chunk length
(``execution.CHUNK_POINTS``) so that it is streamed in many pieces, against the real Prometheus,
or through a proxy in front of it that fails or stalls some of the pieces' queries.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable

import httpx
import pytest
from gpu_execution_pack import cli
from gpu_execution_pack.api import metrics, stream
from gpu_execution_pack.api.app import create_app
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.query import execution
from gpu_execution_pack.query import prometheus as client_module
from gpu_execution_pack.query.params import iso

from harness.upstreams import Proxy, Seen, served

from .conftest import EXECUTION
from .test_api import ADMIN, KEYS, RESEARCH, client_for, get
from .test_serve import metrics_path

# Each test sets our streamed answer against our in-memory one over the same Prometheus, or our handling of
# a proxy that fails, stalls or loses its client: the Prometheus version changes neither side.
pytestmark = [pytest.mark.e2e, pytest.mark.single_version, pytest.mark.usefixtures("promtool_available")]
PIECE_CHUNK_POINTS = 7  # 165 points: 24 pieces per entry


@pytest.fixture
def streamed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every window is streamed, in pieces of PIECE_CHUNK_POINTS points."""
    monkeypatch.setattr(metrics, "STREAM_POINTS", 0)
    monkeypatch.setattr(execution, "CHUNK_POINTS", PIECE_CHUNK_POINTS)


def is_piece(seen: Seen) -> bool:
    """Whether an upstream request is a streamed entry's range query (not the span, not the entries' list)."""
    query = seen.params.get("query", [""])[0]
    return seen.path.endswith("/query_range") and "over_time" not in query


Rewrite = Callable[[Seen, int, bytes], tuple[int, bytes]]


def after_pieces(after: int, later: Callable[[int, bytes], tuple[int, bytes]]) -> Rewrite:
    """A rewrite that passes the first ``after`` pieces' answers (and every other request's) as they are, and gives
    each later piece's status and body to ``later``."""
    count = 0
    lock = threading.Lock()

    def rewrite(seen: Seen, got: int, body: bytes) -> tuple[int, bytes]:
        nonlocal count
        if not is_piece(seen):
            return got, body
        with lock:
            count += 1
            mine = count
        return (got, body) if mine <= after else later(got, body)

    return rewrite


def failing_pieces(after: int, status: int = 503, delay: float = 0.0) -> Rewrite:
    """A rewrite that passes the first ``after`` pieces' answers, then, ``delay`` seconds late, fails the rest."""

    def fail(got: int, body: bytes) -> tuple[int, bytes]:
        time.sleep(delay)
        return status, json.dumps({"status": "error", "errorType": "internal", "error": "injected"}).encode()

    return after_pieces(after, fail)


@pytest.mark.parametrize("key", [ADMIN, RESEARCH], ids=["every tenant", "one tenant"])
@pytest.mark.parametrize(
    "window",
    [{}, {"step": "1m"}, {"start": 300, "end": 1500, "step": "30s"}],
    ids=["whole execution", "1m", "part of it at 30s"],
)
@pytest.mark.parametrize("offload", [False, True], ids=["small answers on the loop", "all in the worker thread"])
def test_a_streamed_window_is_byte_for_byte_the_document_built_in_memory(prometheus, monkeypatch, key, window, offload):
    server, start, _, _ = prometheus
    params = {k: iso(start + v) if k in ("start", "end") else v for k, v in window.items()}
    if offload:  # every answer parsed, and the in-memory document built and encoded, in the worker thread
        monkeypatch.setattr(metrics, "OFFLOAD_SAMPLES", 0)
        monkeypatch.setattr(client_module, "OFFLOAD_BYTES", 0)
    with client_for(server.url) as client:
        whole = get(client, EXECUTION, key, **params)
        monkeypatch.setattr(metrics, "STREAM_POINTS", 0)
        monkeypatch.setattr(execution, "CHUNK_POINTS", PIECE_CHUNK_POINTS)
        chunked = get(client, EXECUTION, key, **params)
    assert whole.status_code == chunked.status_code == 200, chunked.text
    assert "content-length" in whole.headers and "content-length" not in chunked.headers  # it was streamed
    assert chunked.headers["content-type"] == "application/json"
    assert chunked.content == whole.content
    body = whole.json()
    assert all(body["series"][name]["entries"] for name in body["series"]), "a series without entries proves little"


def test_the_in_memory_path_encodes_large_documents_in_a_worker_thread_with_the_same_bytes(prometheus, monkeypatch):
    server, _, _, _ = prometheus
    with client_for(server.url) as client:
        inline = get(client, EXECUTION)
        monkeypatch.setattr(metrics, "OFFLOAD_SAMPLES", 0)
        offloaded = get(client, EXECUTION)
    assert inline.status_code == offloaded.status_code == 200
    assert offloaded.content == inline.content


@pytest.mark.parametrize(
    "fails",
    ["the entries' list", "the first piece"],
)
def test_a_failure_before_the_first_byte_is_still_a_json_502(prometheus, streamed, fails):
    server, _, _, _ = prometheus

    def rewrite(seen: Seen, status: int, body: bytes) -> tuple[int, bytes]:
        query = seen.params.get("query", [""])[0]
        failing = "last_over_time" in query if fails == "the entries' list" else is_piece(seen)
        if failing:
            return 503, json.dumps({"status": "error", "errorType": "internal", "error": "injected"}).encode()
        return status, body

    with Proxy(server.url, rewrite) as upstream, client_for(upstream.url) as client:
        response = get(client, EXECUTION)
    assert response.status_code == 502, response.text
    assert response.json() == {"error": "Prometheus refused the query: injected"}


def read_streamed(url: str, timeout: float = 30) -> tuple[int, bytes, Exception | None, float]:
    """Status, the bytes received and how the transfer ended (None: whole) of a metrics request over HTTP."""
    received = b""
    began = time.monotonic()
    headers = {"Authorization": f"Bearer {ADMIN}"}
    with (
        httpx.Client(base_url=url, timeout=timeout) as http,
        http.stream("GET", metrics_path(EXECUTION), headers=headers) as response,
    ):
        try:
            for part in response.iter_raw():
                received += part
        except httpx.HTTPError as err:
            return response.status_code, received, err, time.monotonic() - began
    return response.status_code, received, None, time.monotonic() - began


def test_a_failure_after_the_first_bytes_aborts_the_connection_never_a_whole_looking_document(
    prometheus, streamed, caplog
):
    """Past the headers the status cannot change: the chunked body is cut, so no client takes it for whole.

    The server logs why, once, as a warning: no traceback from uvicorn, which would read as a crash.
    """
    server, _, _, _ = prometheus
    with Proxy(server.url, failing_pieces(after=3 * execution.CONCURRENCY)) as upstream:
        app = create_app(config_from_mapping({"api": {"prometheus_url": upstream.url}}), KEYS)
        with served(app) as url:
            uvicorn_errors = logging.getLogger("uvicorn.error")  # uvicorn's loggers do not reach the root's
            uvicorn_errors.addHandler(caplog.handler)
            try:
                status, received, ended, _ = read_streamed(url)
                time.sleep(0.5)  # uvicorn logs once the connection is closed
            finally:
                uvicorn_errors.removeHandler(caplog.handler)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "was aborted after" in r.getMessage()]
    assert len(warnings) == 1, caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert status == 200
    assert isinstance(ended, httpx.RemoteProtocolError), ended  # "incomplete chunked read"
    assert received.startswith(b'{"executionId":"train-0001"')
    with pytest.raises(json.JSONDecodeError):
        json.loads(received)


def test_a_piece_past_the_answer_cap_aborts_the_stream_naming_the_cap(prometheus, streamed, caplog):
    """A piece's answer is held to api.max_answer_mb as any answer is: past the headers the stream is cut (its
    first pieces were sent), the warning names the cap. Padded with whitespace, the piece is the real answer: read
    whole, as before the cap, the document came out complete."""
    server, _, _, _ = prometheus
    padding = b" " * (2 * 2**20)
    # The first pieces pass: the headers and some bytes are sent.
    padded_pieces = after_pieces(3 * execution.CONCURRENCY, lambda got, body: (got, body + padding))
    with Proxy(server.url, padded_pieces) as upstream:
        cfg = config_from_mapping({"api": {"prometheus_url": upstream.url, "max_answer_mb": 1}})
        with served(create_app(cfg, KEYS)) as url:
            status, received, ended, _ = read_streamed(url)
    warnings = [r.getMessage() for r in caplog.records if "was aborted after" in r.getMessage()]
    assert len(warnings) == 1 and "more than 1 MB (api.max_answer_mb)" in warnings[0], warnings
    assert status == 200 and received.startswith(b'{"executionId":"train-0001"')
    assert isinstance(ended, httpx.RemoteProtocolError), ended  # "incomplete chunked read"


def test_a_stalled_upstream_after_the_first_bytes_aborts_at_the_deadline(prometheus, streamed):
    """timeout_seconds still bounds the time spent waiting for Prometheus once the stream has begun."""
    server, _, _, _ = prometheus
    with Proxy(server.url, failing_pieces(after=3 * execution.CONCURRENCY, delay=10)) as upstream:
        cfg = config_from_mapping({"api": {"prometheus_url": upstream.url, "timeout_seconds": 2}})
        with served(create_app(cfg, KEYS)) as url:
            status, received, ended, took = read_streamed(url)
    assert status == 200 and received
    assert isinstance(ended, httpx.RemoteProtocolError), ended
    assert took < 6, took  # the deadline and slack on a busy machine, not the upstream's 10 s per piece


def test_the_query_command_writes_a_long_window_as_the_endpoint_streams_it(prometheus, streamed, capsysbinary):
    """`gpu-execution-pack query` on a window the endpoint streams writes it piece by piece: its bytes."""
    server, _, _, _ = prometheus
    with client_for(server.url) as client:
        streamed_answer = get(client, EXECUTION)
    assert "content-length" not in streamed_answer.headers  # the endpoint streamed it too
    assert cli.main(["query", EXECUTION, "--prometheus", server.url]) == 0
    out = capsysbinary.readouterr().out
    assert out == streamed_answer.content + b"\n"


def test_the_query_command_cut_short_by_prometheus_exits_3_saying_so(prometheus, streamed, capsysbinary):
    server, _, _, _ = prometheus
    with Proxy(server.url, failing_pieces(after=3 * execution.CONCURRENCY)) as upstream:
        code = cli.main(["query", EXECUTION, "--prometheus", upstream.url])
    captured = capsysbinary.readouterr()
    assert code == 3
    assert b"cut short" in captured.err and b"injected" in captured.err
    assert captured.out.startswith(b'{"executionId":"train-0001"')
    with pytest.raises(json.JSONDecodeError):
        json.loads(captured.out)


def test_a_client_leaving_mid_stream_stops_the_pieces_queries(prometheus, streamed):
    server, _, _, _ = prometheus
    pieces: list[float] = []

    def slow(seen: Seen, status: int, body: bytes) -> tuple[int, bytes]:
        if is_piece(seen):
            pieces.append(time.monotonic())
            time.sleep(0.02)
        return status, body

    with Proxy(server.url, slow) as upstream:
        app = create_app(config_from_mapping({"api": {"prometheus_url": upstream.url}}), KEYS)
        with served(app) as url, httpx.Client(base_url=url, timeout=30) as http:
            with http.stream("GET", metrics_path(EXECUTION), headers={"Authorization": f"Bearer {ADMIN}"}) as r:
                assert r.status_code == 200
                next(r.iter_raw())
            left = time.monotonic()  # the connection is closed
            time.sleep(1.5)
    after = [t for t in pieces if t > left + 0.5]
    assert not after, f"{len(after)} pieces were still asked for after the client left"
    with client_for(server.url) as client:
        body = get(client, EXECUTION).json()
    entries = sum(len(s["entries"]) for s in body["series"].values())
    assert len(pieces) < entries * (165 // PIECE_CHUNK_POINTS) / 4, len(pieces)  # far from the whole document


ODD_SAMPLES = [
    [[1, "NaN"], [2.5, "+Inf"], ["3", "-Inf"]],
    [[1, 2]],
    [[True, "1"]],
    [[1, True]],
    [[float("inf"), "1"]],
    [[1]],
    [["x", "1"]],
    [[1, "x"]],
    ["ab"],
    [[1, "1", 2]],
    [[None, "1"]],
    [{"a": 1, "b": 2}],
    [[1, "1"], [2, None]],
    [[10**400, "1"]],  # an integer time past a float's range: OverflowError, which went uncaught (a 500)
]


@pytest.mark.parametrize("pairs", ODD_SAMPLES, ids=repr)
def test_a_ranges_samples_checked_at_once_answer_as_each_checked_alone(pairs):
    """``samples_of``'s list-wide checks accept and refuse exactly what ``sample`` does, with its message."""

    def outcome(read: Callable[[list], list]) -> tuple[str, str]:
        try:
            return "ok", repr(read(pairs))
        except ValueError as err:
            return "refused", str(err)

    assert outcome(client_module.samples_of) == outcome(lambda p: [client_module.sample(s) for s in p])


def test_an_answer_nested_past_pythons_stack_is_no_json_not_a_recursion_error():
    """200,000 "[" from a misbehaving upstream: json.loads's RecursionError reached the route as a 500."""
    with pytest.raises(ValueError, match="nested too deep"):
        client_module.parse_json(b"[" * 200_000)
    assert client_module.parse_json(b'{"status": "success"}') == {"status": "success"}


def test_the_cpu_work_of_long_answers_runs_off_the_event_loops_thread(prometheus, monkeypatch):
    """Reading, converting and encoding a stream's pieces, and a large in-memory document, happen in the
    worker thread: the event loop's thread, which answers everything else, only waits for them."""
    server, _, _, _ = prometheus
    loop_threads: set[int] = set()
    work_threads: set[int] = set()
    ask = client_module.PrometheusClient._answer

    async def asking(self, path, params):  # on the event loop
        loop_threads.add(threading.get_ident())
        return await ask(self, path, params)

    def on_thread(work: Callable) -> Callable:
        def run(*args):
            work_threads.add(threading.get_ident())
            return work(*args)

        return run

    monkeypatch.setattr(client_module.PrometheusClient, "_answer", asking)
    monkeypatch.setattr(stream, "encode_values", on_thread(stream.encode_values))
    monkeypatch.setattr(metrics, "assemble", on_thread(metrics.assemble))
    monkeypatch.setattr(metrics, "OFFLOAD_SAMPLES", 1000)  # the 40-minute document counts as large
    with client_for(server.url) as client:
        in_memory = get(client, EXECUTION)
        monkeypatch.setattr(metrics, "STREAM_POINTS", 0)
        monkeypatch.setattr(execution, "CHUNK_POINTS", PIECE_CHUNK_POINTS)
        streamed = get(client, EXECUTION)
    assert in_memory.status_code == streamed.status_code == 200
    assert len(loop_threads) == 1 and work_threads, (loop_threads, work_threads)
    assert not loop_threads & work_threads


def test_entries_found_near_the_window_but_without_a_point_in_it_are_left_out_as_in_memory(prometheus, monkeypatch):
    """The entries' list reads an hour before the window: minutes after the execution's last sample
    (past Prometheus' 5-minute lookback) it finds every entry, and none has a point to write."""
    server, _, end, _ = prometheus
    params = {"start": iso(end + 420), "end": iso(end + 780)}
    found: list[dict] = []
    listed = execution.ExecutionMetrics.entries

    async def entries(self, *args):
        found.append(await listed(self, *args))
        return found[-1]

    monkeypatch.setattr(execution.ExecutionMetrics, "entries", entries)
    with client_for(server.url) as client:
        whole = get(client, EXECUTION, **params)
        monkeypatch.setattr(metrics, "STREAM_POINTS", 0)
        monkeypatch.setattr(execution, "CHUNK_POINTS", PIECE_CHUNK_POINTS)
        chunked = get(client, EXECUTION, **params)
    assert whole.status_code == chunked.status_code == 200, chunked.text
    assert "content-length" not in chunked.headers
    assert chunked.content == whole.content
    assert all(not s["entries"] for s in whole.json()["series"].values())
    [listing] = found
    assert all(listing[name] for name in listing), "every series' entries were found, to be left out"
