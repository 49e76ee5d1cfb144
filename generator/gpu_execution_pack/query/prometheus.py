"""An async client for Prometheus' query API (or a compatible one), with errors the endpoint can answer with.

Compatible APIs: a Prometheus under a path prefix (``--web.route-prefix``: put it in the URL), Mimir
or Cortex (a tenant header), Thanos Query (``partial_response``). Every answer is checked for the
shape the endpoint reads before anything reads it, so an unexpected body is a 502, never a crash.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
import httpx
import orjson

# ``redacted`` is taken from here by what else prints a Prometheus URL (the doctor's header), to mask it as errors do.
from gpu_execution_pack.config.loader import redacted, url_problem
from gpu_execution_pack.config.schema import Api
from gpu_execution_pack.promql import call, render
from gpu_execution_pack.query.params import EARLIEST, LATEST

T = TypeVar("T")
# The sample times an answer may hold: those a time the endpoint prints (years 1 to 9999 in UTC) can be. A sample
# at 1e15 s (a compatible API's odd answer) made the report's printing of it a 500.
FIRST_TIME, LAST_TIME = EARLIEST.timestamp(), LATEST.timestamp()
# What a readiness probe asks: an instant query Prometheus answers without reading any series.
READY_QUERY = render(call("vector", 1))

# Answers longer than this are parsed in a worker thread, so that other requests (a 401, /healthz)
# are not held behind a long range's JSON (512 KiB: about 15,000 samples, some 10 ms to read and
# check). Shorter ones are read on the event loop: a hop to the thread costs a small request more
# than it saves, measured both one request at a time and under 50 clients. A streamed range reads
# every piece off it.
OFFLOAD_BYTES = 512 * 1024
_cpu: list[anyio.CapacityLimiter] = []  # this process's one thread for CPU work (see ``off_loop``)


async def off_loop(work: Callable[..., T], *args: Any) -> T:
    """``work(*args)`` in a worker thread, one at a time in this process, so the event loop stays free.

    One thread, not many: Python runs one thread at a time anyway, and each more thread waiting
    for the interpreter lock is one more the event loop must win it against to answer anything.
    """
    if not _cpu:
        _cpu.append(anyio.CapacityLimiter(1))
    return await anyio.to_thread.run_sync(work, *args, limiter=_cpu[0])


def parse_json(content: bytes) -> Any:
    """A body's JSON: orjson, several times faster on long ranges; what it refuses (NaN literals,
    integers past 64 bits), the standard parser reads as before, so odd bodies meet the same checks."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        try:
            return json.loads(content)
        except RecursionError:  # nesting deeper than Python's stack (200,000 "["): no answer of Prometheus'
            raise ValueError("JSON nested too deep") from None


# A longer query (the archiver's batched ones run to tens of kilobytes) goes as a POST form, which Prometheus' query
# API (and Thanos', Mimir's, VictoriaMetrics') reads as it reads a GET's: a URL that long is refused by proxies
# (nginx's limit is 8 KB), and httpx checks a URL a character at a time (2 ms for 10 KB, against 0.6 ms as a form).
POST_QUERY_CHARS = 2048

# The most characters of Prometheus' own words (an error, an odd resultType) an answer passes on: an
# upstream error can be kilobytes long (a whole query echoed back), and the client needs only its gist.
MAX_UPSTREAM_TEXT = 240
# The most of it the log and the CLI's error line get: enough for any query Prometheus echoes back, and no log line
# of megabytes (an error text is as long as an answer may be: api.max_answer_mb).
MAX_LOGGED_TEXT = 4000

# What a URL that serves no Prometheus API is told: a 404, a page that is not JSON or a redirect (to a login page,
# say) is what a web server other than Prometheus, or a Prometheus asked without its --web.route-prefix, answers.
NOT_PROMETHEUS_HINT = "is it a Prometheus base URL, e.g. http://host:9090 or http://host:9090/<route-prefix>?"
# The shape a Prometheus URL is written in, as a refused one is told.
URL_SHAPE = "http(s)://host[:port][/route-prefix]"


def bounded(text: str, limit: int = MAX_UPSTREAM_TEXT) -> str:
    """``text`` cut to ``limit`` characters, saying how much was cut."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


class PrometheusError(Exception):
    """Prometheus could not answer: ``status`` is 502 (unreachable, refused, failed) or 504 (too slow).

    ``public`` is what an HTTP answer may say: no URL (where Prometheus lives is the operator's
    business, not the client's) and at most MAX_UPSTREAM_TEXT characters of Prometheus' own text.
    ``str()`` adds the URL (its password masked) and ``hint`` (what to check), for the log and the CLI, with
    at most MAX_LOGGED_TEXT characters of Prometheus' text.
    """

    def __init__(self, status: int, message: str, url: str = "", upstream: str = "", hint: str = ""):
        self.public = f"{message}: {bounded(upstream)}" if upstream else message
        full = f"{message}: {bounded(upstream, MAX_LOGGED_TEXT)}" if upstream else message
        url = redacted(url)
        located = f"{full} (Prometheus at {url})" if url else full
        super().__init__(f"{located}; {hint}" if hint else located)
        self.status = status
        self.url = url
        self.hint = hint


class InvalidPrometheusURL(PrometheusError):
    """The URL to reach Prometheus at is not ``http(s)://host[:port][/route-prefix]``: a 400 (the request, not
    Prometheus: the CLI exits 2), whose message names where the URL came from (``source``)."""

    def __init__(self, source: str, url: str, problem: str):
        super().__init__(400, f"{source} {redacted(url)!r}: {problem}; expected {URL_SHAPE}")


class PrometheusUnreachable(PrometheusError):
    """No connection to Prometheus at all (refused, no such host): a 502 whose message says why in words."""

    def __init__(self, url: str, err: httpx.ConnectError):
        super().__init__(502, f"Prometheus is unreachable: {self.reason(err)}")
        self.url = redacted(url)
        # str() (the CLI, the log) says where, in words a reader acts on; ``public`` (an HTTP answer) does not.
        # The netloc is host and port: no user info.
        self.args = (f"{self.public} at {httpx.URL(url).netloc.decode() or self.url}",)

    @staticmethod
    def reason(err: BaseException) -> str:
        """The OS's reason in words: httpx wraps it ("All connection attempts failed") around the refusal."""
        cause: BaseException | None = err
        while cause is not None:
            if isinstance(cause, ConnectionRefusedError):
                return "connection refused"
            cause = cause.__cause__ or cause.__context__
        # "[Errno -2] Name or service not known": the errno is noise to a reader.
        text = re.sub(r"^\[Errno -?\d+\]\s*", "", str(err)).strip().rstrip(".") or "no connection"
        return text[:1].lower() + text[1:]


# How much an answer being read grows by between two calls of the client's ``growing`` (a check of the process's
# memory in the endpoint, some microseconds: a megabyte takes a millisecond or more to arrive).
GROWING_BYTES = 2**20
# The key that bounds one answer's bytes, as errors name it.
MAX_ANSWER_KEY = "api.max_answer_mb"
# The only content coding asked for (and so accepted): what Prometheus compresses with. httpx would also ask for
# deflate and, were brotli or zstandard installed, those; each is one more decoder a hostile body could aim at.
ACCEPTED_ENCODINGS = ("gzip", "x-gzip")


def answer_too_large(limit: int, url: str) -> PrometheusError:
    """The 502 for an answer of more than ``limit`` bytes: it names the limit and the key that sets it."""
    return PrometheusError(
        502,
        f"Prometheus answered more than {limit / 2**20:g} MB ({MAX_ANSWER_KEY}); ask for less (a longer step, a "
        f"shorter window, fewer series) or raise {MAX_ANSWER_KEY}",
        url,
    )


class Unpacked:
    """A body's bytes as they arrive, gzip undone where the answer says so, ``limit`` at most: past it
    ``AnswerTooLarge``, before more than ``limit`` + 1 bytes are held.

    gzip is undone a bounded piece at a time (``max_length``), never a whole chunk at once: 64 KiB of
    gzip can stand for 64 MB of zeros, and a body of it for as much as it likes.
    """

    def __init__(self, encoding: str, limit: int):
        coding = encoding.strip().lower()
        self.gzip = coding in ACCEPTED_ENCODINGS
        if coding not in ("", "identity") and not self.gzip:
            raise ValueError(f"Content-Encoding {bounded(encoding, 40)!r}; accepted: gzip or none")
        self.limit = limit
        self.size = 0
        self.parts: list[bytes] = []
        self.fed = False  # whether any byte came: an empty body (a redirect's, say) is no broken gzip
        self.inflater = zlib.decompressobj(16 + zlib.MAX_WBITS) if self.gzip else None

    def feed(self, data: bytes) -> None:
        """Take the next bytes off the wire; AnswerTooLarge once the body passes ``limit``, ValueError
        for gzip that is not gzip."""
        self.fed = self.fed or bool(data)
        while data:
            if self.inflater is None:
                out, data = data, b""
            else:
                if self.inflater.eof:  # a body of several gzip members (RFC 1952): each is read on its own
                    self.inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                try:
                    out = self.inflater.decompress(data, self.limit - self.size + 1)
                except zlib.error as err:
                    raise ValueError(f"a gzip body that is not gzip ({err})") from None
                # Input left over: either the output reached the room given (the limit is passed, below) or
                # this member ended and another begins.
                data = self.inflater.unconsumed_tail or self.inflater.unused_data
            self.size += len(out)
            if self.size > self.limit:
                raise AnswerTooLarge(self.limit)
            self.parts.append(out)

    def body(self) -> bytes:
        """The whole body, once the wire has ended; ValueError for gzip that stopped in the middle."""
        if self.inflater is not None and self.fed and not self.inflater.eof:
            raise ValueError("a gzip body that ends early")
        return b"".join(self.parts)


class AnswerTooLarge(Exception):
    """An answer passed ``limit`` bytes while it was read (``PrometheusClient`` turns it into its 502)."""

    def __init__(self, limit: int):
        super().__init__(limit)
        self.limit = limit


@contextmanager
def deadline(seconds: float, url: str) -> Iterator[None]:
    """Bound everything inside to ``seconds`` in all (not per query, not per read): past it, a 504.

    Whatever is in flight is cancelled, so its connection to Prometheus is closed and Prometheus
    stops the query.
    """
    try:
        with anyio.fail_after(seconds):
            yield
    except TimeoutError:
        raise PrometheusError(
            504, f"Prometheus did not answer in time (deadline {seconds:g} s: api.timeout_seconds)", url
        ) from None


class PrometheusClient:
    """``instant`` and ``range`` queries against one Prometheus; reuse it across requests.

    ``headers`` go with every query (e.g. Mimir's ``X-Scope-OrgID``); ``params`` too (e.g. Thanos'
    ``partial_response``). A path in ``url`` prefixes every API path; user info in it (``http://user:pass@host``)
    is sent as basic auth. ``url`` is checked here, before anything connects: InvalidPrometheusURL, whose message
    names ``source`` (the option or key the URL came from), where it is not ``http(s)://host[:port][/prefix]``.
    """

    def __init__(
        self,
        url: str,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
        source: str = "the Prometheus URL",
        max_answer_bytes: int = int(Api.max_answer_mb * 2**20),
        growing: Callable[[], None] = lambda: None,
    ):
        base = url.rstrip("/")
        problem = url_problem(url)  # as written: "http://" stripped of its slashes would read as no scheme
        if not problem:
            try:  # what the checks above pass and httpx still refuses (a host IDNA cannot encode, say)
                httpx.URL(base)
            except httpx.InvalidURL:
                problem = "not a valid URL"
        if problem:
            raise InvalidPrometheusURL(source, url, problem)
        # What messages and logs name: the URL with its password masked. The real one stays in the httpx client,
        # which sends its user info as basic auth with every request.
        self.url = redacted(base)
        self.params = dict(params or {})
        self.max_answer_bytes = max(1, max_answer_bytes)
        self.growing = growing
        headers = {"Accept-Encoding": "gzip", **(headers or {})}
        self.client = httpx.AsyncClient(base_url=base, timeout=timeout, transport=transport, headers=headers)

    @classmethod
    def for_config(
        cls, api: Api, url: str | None = None, timeout: float | None = None, growing: Callable[[], None] = lambda: None
    ) -> PrometheusClient:
        """A client as ``api`` configures it (its URL, tenant header, partial_response, answer cap); ``url`` (the
        CLI's --prometheus) overrides. ``growing`` is called each GROWING_BYTES an answer being read grows by, and
        may raise to stop reading it (the endpoint's load shedding: ``shedding.reading_more``)."""
        headers = {api.tenant_header: api.tenant_id} if api.tenant_id else {}
        params = {"partial_response": "true" if api.partial_response else "false"}
        given = url is not None  # an empty --prometheus is refused as a URL, not read as "the config's"
        return cls(
            url if given else api.prometheus_url,
            api.timeout_seconds if timeout is None else timeout,
            headers=headers,
            params=params,
            source="--prometheus" if given else "api.prometheus_url",
            max_answer_bytes=int(api.max_answer_mb * 2**20),
            growing=growing,
        )

    async def close(self) -> None:
        await self.client.aclose()

    async def instant(self, query: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's result items: ``{"metric": {...}, "values": [[t, v], ...]}``, values as floats.

        A vector's single sample comes as a one-item ``values``, so vectors and matrices read alike.
        """
        params: dict[str, Any] = {"query": query}
        if at is not None:
            params["time"] = at
        return await self._get("/api/v1/query", params)

    async def range(self, query: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """A range query's result items: ``{"metric": {...}, "values": [[t, v], ...]}``, values as floats."""
        return await self._get("/api/v1/query_range", {"query": query, "start": start, "end": end, "step": step})

    async def range_answer(self, query: str, start: float, end: float, step: float) -> httpx.Response:
        """A range query's answer as it came, for ``decode`` to read later (in a worker thread, say)."""
        return await self._answer("/api/v1/query_range", {"query": query, "start": start, "end": end, "step": step})

    async def status_config(self) -> str:
        """Prometheus' loaded configuration, as the YAML text ``/api/v1/status/config`` returns: what api_data
        says where there is no such answer (unreachable, no Prometheus API there), a 502 where it holds no YAML."""
        data = await self.api_data("/api/v1/status/config")
        if not isinstance(data, dict) or not isinstance(data.get("yaml"), str):
            raise PrometheusError(502, "Prometheus did not serve its configuration", self.url, "no yaml in its answer")
        return data["yaml"]

    async def api_data(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """Any API answer's ``data`` (rule groups, targets, label values, runtime info), of whatever JSON type
        it came as (the caller checks its shape); a 502 otherwise."""
        response = await self._answer(path, params or {})
        try:
            body, parsed = parse_json(response.content), True
        except ValueError:
            body, parsed = None, False
        if not isinstance(body, dict) or body.get("status") != "success" or "data" not in body:
            if isinstance(body, dict):
                error = str(body.get("error") or "not an API answer")
            else:  # JSON of another shape (a list, null) is no API answer either; say which it is
                error = "JSON, not an API answer" if parsed else "no JSON"
            if response.is_redirect:
                error += f", {redirected_to(response)}"
            raise PrometheusError(
                502,
                f"Prometheus did not serve {path} ({response.status_code}: {bounded(error, 200)})",
                self.url,
                hint=answer_hint(response, body),
            )
        return body["data"]

    async def rule_groups(self) -> list[dict[str, Any]]:
        """The rule groups Prometheus has loaded (``/api/v1/rules``): each with its ``name`` and ``interval`` in
        seconds. Empty where the API does not serve them (a query frontend without a ruler)."""
        try:
            data = await self.api_data("/api/v1/rules", {"type": "record"})
        except PrometheusError as err:
            if err.status == 504:
                raise
            return []
        groups = data.get("groups") if isinstance(data, dict) else None
        return [g for g in groups if isinstance(g, dict)] if isinstance(groups, list) else []

    async def _get(self, path: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        response = await self._answer(path, params)
        if len(response.content) > OFFLOAD_BYTES:  # parsing it would hold the event loop for milliseconds
            return await off_loop(self.decode, response)
        return self.decode(response)

    async def _answer(self, path: str, params: dict[str, Any]) -> httpx.Response:
        """The answer to ``path`` with its body read, at most ``max_answer_bytes`` of it (gzip undone)."""
        if len(params.get("query", "")) > POST_QUERY_CHARS:
            request = self.client.build_request("POST", path, data={**params, **self.params})
        else:
            request = self.client.build_request("GET", path, params={**params, **self.params})
        try:
            response = await self.client.send(request, stream=True)
            try:
                body = await self.read_body(response)
            finally:
                await response.aclose()  # unread: the connection is closed, and Prometheus stops sending
        except AnswerTooLarge as err:
            raise answer_too_large(err.limit, self.url) from None
        except httpx.TimeoutException:
            raise PrometheusError(504, "Prometheus did not answer in time", self.url) from None
        except httpx.ConnectError as err:
            raise PrometheusUnreachable(self.url, err) from None
        except httpx.HTTPError as err:
            raise PrometheusError(502, f"Prometheus is unreachable: {type(err).__name__}", self.url) from None
        # The body as read, without the headers that described it on the wire (its coding, its length there).
        wire = ("content-encoding", "content-length", "transfer-encoding")
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in wire]
        return httpx.Response(response.status_code, headers=headers, content=body, request=request)

    async def read_body(self, response: httpx.Response) -> bytes:
        """``response``'s body, read as it arrives and stopped past ``max_answer_bytes`` (AnswerTooLarge): a
        Content-Length over it is refused before a byte is read."""
        limit = self.max_answer_bytes
        try:
            unpacked = Unpacked(response.headers.get("content-encoding", ""), limit)
        except ValueError as err:
            raise PrometheusError(502, f"Prometheus answered {response.status_code} with {err}", self.url) from None
        declared = response.headers.get("content-length", "")
        if not unpacked.gzip and declared.isdigit() and int(declared) > limit:
            raise AnswerTooLarge(limit)
        checked = 0
        try:
            async for data in response.aiter_raw():
                unpacked.feed(data)
                if unpacked.size - checked >= GROWING_BYTES:
                    checked = unpacked.size
                    self.growing()
            return unpacked.body()
        except ValueError as err:
            raise PrometheusError(502, f"Prometheus answered {response.status_code} with {err}", self.url) from None

    def decode(self, response: httpx.Response) -> list[dict[str, Any]]:
        """The result items of ``response``, or the PrometheusError (502) its body deserves."""
        try:
            body = parse_json(response.content)
        except ValueError:
            moved = f" ({redirected_to(response)})" if response.is_redirect else ""
            raise PrometheusError(
                502,
                f"Prometheus answered {response.status_code} without JSON{moved}",
                self.url,
                hint=answer_hint(response, None),
            ) from None
        if isinstance(body, dict) and body.get("status") == "error":
            raise PrometheusError(
                502, "Prometheus refused the query", self.url, str(body.get("error", "unknown error"))
            )
        try:
            return result_of(body)
        except ValueError as err:
            raise PrometheusError(
                502, f"Prometheus answered {response.status_code} with an unexpected body", self.url, str(err)
            ) from None


# What a 401 or 403 is told: a Prometheus behind a proxy that wants credentials (or other ones).
CREDENTIALS_HINT = "check the credentials: user info in the URL (http://user:password@host) or api.tenant_header"


def answer_hint(response: httpx.Response, body: Any) -> str:
    """What to check about an answer that is no API answer: the credentials (401, 403), else the base URL where it
    looks like no Prometheus API at all; "" for a Prometheus refusing or failing."""
    if response.status_code in (401, 403):
        return CREDENTIALS_HINT
    return NOT_PROMETHEUS_HINT if not_prometheus(response, body) else ""


def redirected_to(response: httpx.Response) -> str:
    """Where a redirect sends the client, in words (the client does not follow it: a login page, say)."""
    return f"redirected to {response.headers.get('location', 'nowhere')}"


def not_prometheus(response: httpx.Response, body: Any) -> bool:
    """Whether ``response`` looks like no Prometheus API at all (a 404, a redirect, a body that is not JSON),
    rather than a Prometheus refusing or failing: where a hint about the base URL helps."""
    return response.status_code == 404 or response.is_redirect or not isinstance(body, dict)


def result_of(body: Any) -> list[dict[str, Any]]:
    """The result items of a successful query answer, checked; ValueError says what is not as expected."""
    if not isinstance(body, dict):
        raise ValueError(f"a JSON {type(body).__name__}, not an object")
    if body.get("status") != "success":
        raise ValueError(f"status {body.get('status')!r}, not 'success'")
    data = body.get("data")
    if not isinstance(data, dict):
        raise ValueError("no data object")
    kind, result = data.get("resultType"), data.get("result")
    if not isinstance(result, list):
        raise ValueError("data without a result list")
    if kind not in ("matrix", "vector"):
        raise ValueError(f"resultType {kind!r}, not a matrix or vector")
    items = []
    for item in result:
        metric = item.get("metric") if isinstance(item, dict) else None
        if not isinstance(metric, dict) or not all(isinstance(v, str) for v in metric.values()):
            raise ValueError("a result item without a metric of string labels")
        samples = item.get("values") if kind == "matrix" else [item.get("value")]
        if not isinstance(samples, list):
            raise ValueError("a series without samples")
        items.append({"metric": metric, "values": samples_of(samples)})
    return items


def samples_of(pairs: list[Any]) -> list[list[float]]:
    """``[[time, "value"], ...]`` as float pairs, checked as ``sample`` checks each one.

    A range's thousands of pairs are checked a property at a time over the whole list (several
    times faster than a call per pair); anything odd goes through ``sample``, which says what.
    """
    try:
        if (
            {type(p) for p in pairs} <= {list}
            and {len(p) for p in pairs} <= {2}
            and {type(v) for _, v in pairs} <= {str}
            and {type(t) for t, _ in pairs} <= {int, float, str}
        ):
            out = [[float(t), float(v)] for t, v in pairs]
            times = [t for t, _ in out]
            if not times or (all(map(math.isfinite, times)) and min(times) >= FIRST_TIME and max(times) <= LAST_TIME):
                return out
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer time past a float's range
        pass
    return [sample(s) for s in pairs]


def sample(pair: Any) -> list[float]:
    """``[unix seconds, "value"]`` as two floats; the value may be NaN or an infinity, the time must fall in the
    years 1 to 9999."""
    if not isinstance(pair, list) or len(pair) != 2:
        raise ValueError(f"a sample that is not a [time, value] pair: {str(pair)[:40]}")
    t, v = pair
    try:
        if isinstance(t, bool) or isinstance(v, bool) or not isinstance(v, str):
            raise TypeError
        when, value = float(t), float(v)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"a sample that is not [time, numeric string]: {str(pair)[:40]}") from None
    if not FIRST_TIME <= when <= LAST_TIME:
        raise ValueError(f"a sample at time {t!r}, outside the years 1 to 9999")
    return [when, value]
