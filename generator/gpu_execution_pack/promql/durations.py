"""Prometheus durations (``1h30m``): the one parser the config, the rules and the API share.

Prometheus accepts each unit at most once, from the largest to the smallest, with ASCII digits
only; so does this module (``5s1m``, ``1d1d`` and non-ASCII digits are refused).
"""

from __future__ import annotations

import re

UNIT_SECONDS = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
_PART = {unit: rf"(?:(?P<{unit}>[0-9]+){unit})?" for unit in UNIT_SECONDS}
DURATION_RE = re.compile("".join(_PART.values()))


def parse_duration_seconds(value: str) -> float:
    """Seconds in a Prometheus duration such as ``1h30m``; ValueError if ``value`` is not one."""
    match = DURATION_RE.fullmatch(value) if value else None
    if match is None:
        raise ValueError(f"{value!r} is not a Prometheus duration such as 30s, 5m or 1h30m")
    return sum(int(n) * UNIT_SECONDS[unit] for unit, n in match.groupdict().items() if n is not None)


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
