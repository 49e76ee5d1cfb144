"""Prometheus durations (``1h30m``): the one parser the config, the rules and the API share.

Prometheus accepts each unit at most once, from the largest to the smallest, with ASCII digits
only, and at most 2^63-1 milliseconds in all (about 292 million years); so does this module
(``5s1m``, ``1d1d``, non-ASCII digits and ``99999999999999999999y`` are refused).
"""

from __future__ import annotations

import re

MAX_MILLISECONDS = 2**63 - 1  # Prometheus holds a duration as int64 milliseconds ("duration out of range")
UNIT_SECONDS = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
_PART = {unit: rf"(?:(?P<{unit}>[0-9]+){unit})?" for unit in UNIT_SECONDS}
DURATION_RE = re.compile("".join(_PART.values()))
# The same grammar as an ECMA 262 regular expression, as OpenAPI and JSON Schema read it.
DURATION_PATTERN = "^" + "".join(rf"([0-9]+{unit})?" for unit in UNIT_SECONDS) + "$"


def parse_duration_seconds(value: str) -> float:
    """Seconds in a Prometheus duration such as ``1h30m``; ValueError if ``value`` is not one."""
    match = DURATION_RE.fullmatch(value) if value else None
    if match is None:
        raise ValueError(f"{value!r} is not a Prometheus duration such as 30s, 5m or 1h30m")
    parts = {unit: n for unit, n in match.groupdict().items() if n is not None}
    if any(len(n) > len(str(MAX_MILLISECONDS)) for n in parts.values()):  # before int() reads thousands of digits
        raise ValueError(f"{value!r} is out of range: Prometheus durations end at 2^63-1 milliseconds")
    milliseconds = sum(int(n) * round(UNIT_SECONDS[unit] * 1000) for unit, n in parts.items())
    if milliseconds > MAX_MILLISECONDS:
        raise ValueError(f"{value!r} is out of range: Prometheus durations end at 2^63-1 milliseconds")
    return sum(int(n) * UNIT_SECONDS[unit] for unit, n in parts.items())


def is_duration(value: str) -> bool:
    """Whether ``value`` is a Prometheus duration above zero."""
    try:
        return parse_duration_seconds(value) > 0
    except ValueError:
        return False


def format_duration(seconds: float) -> str:
    """A whole number of seconds as a Prometheus duration (``90`` -> ``1m30s``)."""
    m, s = divmod(int(seconds), 60)
    return (f"{m}m" if m else "") + (f"{s}s" if s or not m else "")


def duration_text(seconds: float) -> str:
    """Whole seconds as a Prometheus duration in its largest units (``4800`` -> ``1h20m``, ``0`` -> ``0s``)."""
    rest, parts = int(seconds), []
    for unit in ("y", "w", "d", "h", "m", "s"):
        n, rest = divmod(rest, int(UNIT_SECONDS[unit]))
        if n:
            parts.append(f"{n}{unit}")
    return "".join(parts) or "0s"
