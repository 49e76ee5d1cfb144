"""Python ports of the Prometheus template functions the alert descriptions use.

The alert tests compare rendered descriptions exactly, so the oracle must print numbers the
way Prometheus' Go templates do (prometheus/template/template.go; Go's fmt for ``{{ $value }}``).
"""

from __future__ import annotations


def go_value(v: float) -> str:
    """``{{ $value }}``: Go's %v of a float64, for the magnitudes descriptions print (1e-4 up to 1e6).

    Go switches to exponent form from 1e6 (``1e+06``); outside that range this port refuses
    rather than guess.
    """
    if v == 0 or 1e-4 <= abs(v) < 1e6:
        text = repr(float(v))
        return text[:-2] if text.endswith(".0") else text
    raise ValueError(f"go_value: {v} is outside the range this port renders like Go")


def humanize(v: float) -> str:
    """``humanize``: SI prefixes, four significant digits."""
    if abs(v) >= 1:
        prefix = ""
        for p in ("k", "M", "G", "T", "P", "E", "Z", "Y"):
            if abs(v) < 1000:
                break
            prefix = p
            v /= 1000
        return f"{v:.4g}{prefix}"
    if v != 0:
        prefix = ""
        for p in ("m", "u", "n", "p", "f", "a", "z", "y"):
            if abs(v) >= 1:
                break
            prefix = p
            v *= 1000
        return f"{v:.4g}{prefix}"
    return f"{v:.4g}"


def humanize_percentage(v: float) -> str:
    """``humanizePercentage``: a ratio as a percentage, four significant digits."""
    return f"{v * 100:.4g}%"
