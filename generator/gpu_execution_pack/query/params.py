"""A request's time and parameter parsing: ids, ISO 8601 times, steps, the series asked for, and the step grid.

Every refusal is a :class:`RequestError` whose message names the parameter first and says what is
accepted, so the API answers it as a 400 and the CLI prints it as is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gpu_execution_pack import catalog
from gpu_execution_pack.config import ONE_CLUSTER, ClusterScope
from gpu_execution_pack.config.sections.api import MAX_STEP
from gpu_execution_pack.promql import parse_duration_seconds
from gpu_execution_pack.promql.durations import DURATION_RE

MAX_ID_LENGTH = 256  # an execution id's most characters, whatever api.execution_id_pattern allows
DEFAULT_STEP = "15s"
MIN_STEP = "1s"
TIME_EXAMPLE = "2026-12-02T10:00:00Z"
EARLIEST = datetime(1, 1, 1, tzinfo=UTC)  # times must fall in years 1 to 9999 once converted to UTC
LATEST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
SERIES_SEPARATOR = ","  # between the API names of the ``series`` parameter
MAX_CLUSTER_LENGTH = 256  # a cluster name's most characters (any string is a label value: only its length is held)


class RequestError(Exception):
    """The request cannot be answered: ``status`` is the HTTP status, the message says why."""

    def __init__(
        self,
        status: int,
        message: str,
        details: dict[str, object] | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.details = details or {}  # more keys of the JSON error body, beside ``error``
        self.headers = headers  # HTTP headers of the answer (``Retry-After`` on a 429)


def bad(message: str) -> RequestError:
    """A 400 whose message names the parameter first and says what is accepted."""
    return RequestError(400, message)


def shown(value: str, limit: int = 40) -> str:
    """A client's value quoted for an error message, cut short: a 5,000-digit step is not echoed back."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"... ({len(value)} characters)"


@dataclass(frozen=True)
class Window:
    """The step grid a request is answered on: ``start + k * step`` up to ``end``."""

    start: float  # unix seconds, on the step grid
    end: float
    step: float

    @property
    def points(self) -> int:
        """How many grid points the window holds, both ends included."""
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
class Params:
    """A request's ``start``, ``end`` (None: not given), ``step`` and ``series``, parsed and checked on their own.

    ``series`` are the served series asked for, in the catalog's order: the default answer's
    (``catalog.API_SERIES``) unless the request names others.
    """

    start: float | None
    end: float | None
    step: float
    step_text: str
    series: tuple[catalog.Series, ...] = catalog.API_SERIES
    # The cluster asked for (None: not given, or no cluster label configured); once the execution is
    # found, the cluster that holds it.
    cluster: str | None = field(default=None)


def check_execution_id(execution_id: str, pattern: re.Pattern[str]) -> None:
    """400 unless the whole id matches ``pattern`` (``$`` would let a final newline through) within MAX_ID_LENGTH."""
    if len(execution_id) > MAX_ID_LENGTH:  # said on its own: the pattern may well match it
        raise bad(f"execution_id: {len(execution_id)} characters; accepted: at most {MAX_ID_LENGTH}")
    if not pattern.fullmatch(execution_id):
        raise bad(f"execution_id: not accepted; it must match {pattern.pattern}")


def parse_time(name: str, value: str | None) -> float | None:
    """ISO 8601 (offset optional, ``Z`` accepted; naive times are UTC) to unix seconds; None when not given.

    An empty value is refused rather than read as "not given", and only ASCII digits are read:
    Python's parser would take other scripts' digits, which no client means. A time that its
    offset moves out of the years 1 to 9999 in UTC is refused too.
    """
    if value is None:
        return None
    # A "+" of an offset sent unencoded in a URL arrives as a space: say so, or the message puzzles.
    plus = " (a + in a URL must be sent as %2B)" if re.search(r"\d \d\d(:?\d\d)?$", value) else ""
    refused = bad(f"{name}: {shown(value)} is not an ISO 8601 time such as {TIME_EXAMPLE}{plus}")
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
    if not step:
        raise bad(f"step: empty; {accepted}, or no step parameter for {DEFAULT_STEP}")
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


def parse_series(value: str | None) -> tuple[catalog.Series, ...]:
    """The served series ``series`` names (API names, comma-separated), in the catalog's order.

    Not given: the default answer's (``catalog.API_SERIES``). Any served series may be named,
    those only served on request (``api_optional``) included; an unknown name, an empty one
    (``series=``, a stray comma) or a name given twice is refused with the accepted names.
    """
    if value is None:
        return catalog.API_SERIES
    servable = {s.api_name: s for s in catalog.SERVABLE_SERIES}
    accepted = f"accepted: one or more of {', '.join(servable)}, separated by commas"
    names = value.split(SERIES_SEPARATOR)
    for i, name in enumerate(names):
        if not name:
            raise bad(f"series: {shown(value)} has an empty name; {accepted}")
        if name not in servable:
            raise bad(f"series: {shown(name)} is not a served series; {accepted}")
        if name in names[:i]:
            raise bad(f"series: {shown(name)} is named twice; {accepted}")
    return tuple(s for s in catalog.SERVABLE_SERIES if s.api_name in names)


def parse_cluster(value: str | None, clusters: ClusterScope) -> str | None:
    """The ``cluster`` parameter: None when not given; refused when the pack has no cluster label, and
    when empty or longer than MAX_CLUSTER_LENGTH (any other string may be a label's value)."""
    if value is None:
        return None
    if not clusters.enabled:
        raise bad("cluster: the pack has no cluster label configured (cluster_label is empty); accepted: no cluster")
    name = clusters.phrase("a cluster's name")
    accepted = f"accepted: {name}, 1 to {MAX_CLUSTER_LENGTH} characters"
    if not value:
        raise bad(f"cluster: empty; {accepted}")
    if len(value) > MAX_CLUSTER_LENGTH:
        raise bad(f"cluster: {shown(value)} is too long; {accepted}")
    return value


def parse_params(
    start: str | None,
    end: str | None,
    step: str | None,
    series: str | None = None,
    cluster: str | None = None,
    clusters: ClusterScope = ONE_CLUSTER,
) -> Params:
    """The request's parameters as far as they can be checked without the execution: syntax, range, order."""
    step_s = parse_step(step)
    start_s, end_s = parse_time("start", start), parse_time("end", end)
    if start_s is not None and end_s is not None and end_s < start_s:
        raise bad(f"end: before start ({iso(end_s)} < {iso(start_s)}); accepted: an end at or after start")
    step_text = DEFAULT_STEP if step is None else step
    return Params(start_s, end_s, step_s, step_text, parse_series(series), parse_cluster(cluster, clusters))


def iso(ts: float) -> str:
    """A unix time as ISO 8601 in UTC: whole seconds, or milliseconds (Prometheus' own precision)."""
    spec = "seconds" if float(ts).is_integer() else "milliseconds"
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec=spec).replace("+00:00", "Z")
