"""Figures as the report writes them for people, in the text, the page and the verdicts alike: three
significant digits, and one percent style (``28 %``)."""

from __future__ import annotations

import math


def figure(value: float | None, unit: str = "") -> str:
    """A figure for people: three significant digits (whole from 100 up), trailing zeros dropped; ``n/a``
    without data. ``unit`` follows after a space: ``28 %``, ``1.5 GiB``."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if value == 0 or abs(value) >= 100:
        text = f"{value:.0f}"
    else:
        decimals = max(0, 2 - math.floor(math.log10(abs(value))))
        text = f"{round(value, decimals):.{decimals}f}"
        text = text.rstrip("0").rstrip(".") if "." in text else text
    text = "0" if text == "-0" else text
    return f"{text} {unit}" if unit else text


def percent_text(value: float | None) -> str:
    """A percentage as the report writes one everywhere: ``28 %``."""
    return figure(value, "%")
