"""Small PromQL string builders, so rule code reads as the query it produces."""

from __future__ import annotations

from collections.abc import Iterable


def selector(metric: str, *matchers: str) -> str:
    """``metric{m1, m2}`` from matcher strings; empty ones are skipped."""
    parts = [m.strip() for m in matchers if m and m.strip()]
    return f"{metric}{{{', '.join(parts)}}}" if parts else metric


def label_list(labels: Iterable[str]) -> str:
    return ", ".join(labels)


WIDTH = 110  # longest line we lay out on one


def label_copy(expr: str, target: str, source: str, regex: str = "(.+)") -> str:
    """Copy ``source`` into ``target`` where ``source`` matches ``regex`` (non-empty by default)."""
    args = f'"{target}", "$1", "{source}", "{regex}"'
    one_line = f"label_replace({expr}, {args})"
    if "\n" not in expr and len(one_line) <= WIDTH:
        return one_line
    return f"label_replace(\n{indent(expr.strip())},\n{indent(args)}\n)"


def indent(text: str, spaces: int = 2) -> str:
    pad = " " * spaces
    return "\n".join(pad + line if line else line for line in text.splitlines())


def aggregate(op: str, labels: Iterable[str], inner: str) -> str:
    """``op by (labels) (inner)``, laid out on several lines when ``inner`` is."""
    head = f"{op} by ({label_list(labels)})"
    if "\n" not in inner and len(head) + len(inner) + 3 <= WIDTH:
        return f"{head} ({inner})"
    return f"{head} (\n{indent(inner)}\n)"


def parens(expr: str) -> str:
    """Parenthesise a multi-line or compound expression."""
    if "\n" in expr or len(expr) > WIDTH:
        return f"(\n{indent(expr)}\n)"
    return f"({expr})"


def any_of(alternatives: list[str]) -> str:
    """Alternatives joined with ``or``: the first that has a series for a label set wins."""
    if len(alternatives) == 1:
        return alternatives[0]
    return "\nor\n".join(alternatives)


def join(left: str, matching: str, right: str) -> str:
    """``left`` and ``right`` on their own lines around ``matching``, e.g. ``* on (x) group_left (y)``."""
    return f"{left}\n{matching}\n{right}"


def duration(seconds: float) -> str:
    """A whole number of seconds as a Prometheus duration (``90`` -> ``1m30s``)."""
    m, s = divmod(int(seconds), 60)
    return (f"{m}m" if m else "") + (f"{s}s" if s or not m else "")
