"""PromQL as a small expression tree: the nodes the rules, alerts and dashboards are built from.

Rules are built as trees, not strings, so that parentheses come from operator precedence (the
printer places them) and each rule knows which series it reads (``metric_names``). Only what
the pack uses is modelled; Grafana's promql-builder (Go) does the same for the full language.

Arithmetic operators build binary nodes (``a / b``, ``a * 100``); comparisons and set
operators are methods (``a.ge(0.9)``, ``a.unless(b)``), because ``==`` and ``>`` on a node
must keep their Python meaning.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields, replace
from typing import Union

from gpu_execution_pack.promql.durations import is_duration

Operand = Union["Expr", float, int]

# Binary operator precedence, lowest first (prometheus/promql/parser/lex.go).
PRECEDENCE: dict[str, int] = {
    "or": 1,
    "and": 2,
    "unless": 2,
    "==": 3,
    "!=": 3,
    "<=": 3,
    "<": 3,
    ">=": 3,
    ">": 3,
    "+": 4,
    "-": 4,
    "*": 5,
    "/": 5,
    "%": 5,
    "atan2": 5,
    "^": 6,
}
ATOM = 10  # selectors, calls, aggregations, literals, parentheses, ranges
MATCH_OPERATORS = ("=", "!=", "=~", "!~")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")  # PromQL's label names; the config and parser read it


def lift(value: Operand) -> Expr:
    """A Python number as a PromQL number; a node as itself."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"not a PromQL operand: {value!r}")
    return Number(float(value))


class Expr:
    """A PromQL expression."""

    precedence: int = ATOM

    def __add__(self, other: Operand) -> Binary:
        return Binary("+", self, lift(other))

    def __radd__(self, other: Operand) -> Binary:
        return Binary("+", lift(other), self)

    def __sub__(self, other: Operand) -> Binary:
        return Binary("-", self, lift(other))

    def __rsub__(self, other: Operand) -> Binary:
        return Binary("-", lift(other), self)

    def __mul__(self, other: Operand) -> Binary:
        return Binary("*", self, lift(other))

    def __rmul__(self, other: Operand) -> Binary:
        return Binary("*", lift(other), self)

    def __truediv__(self, other: Operand) -> Binary:
        return Binary("/", self, lift(other))

    def __rtruediv__(self, other: Operand) -> Binary:
        return Binary("/", lift(other), self)

    def __mod__(self, other: Operand) -> Binary:
        return Binary("%", self, lift(other))

    def ge(self, other: Operand) -> Binary:
        return Binary(">=", self, lift(other))

    def gt(self, other: Operand) -> Binary:
        return Binary(">", self, lift(other))

    def lt(self, other: Operand) -> Binary:
        return Binary("<", self, lift(other))

    def eq(self, other: Operand) -> Binary:
        return Binary("==", self, lift(other))

    def and_(self, other: Expr, matching: Matching | None = None, stacked: bool = False) -> Binary:
        return Binary("and", self, other, matching, stacked)

    def unless(self, other: Expr, matching: Matching | None = None, stacked: bool = False) -> Binary:
        return Binary("unless", self, other, matching, stacked)

    def range(self, window: str) -> Range:
        """``self[window]``: a range selector, or a subquery ``self[window:step]`` with ``Range.step``."""
        return Range(self, window)

    def offset(self, by: str) -> Offset:
        """``self offset by``: a selector or range read ``by`` (a duration) before the query's time."""
        if not isinstance(self, Selector | Range):
            raise TypeError(f"offset applies to a selector or a range, not {type(self).__name__}")
        return Offset(self, by)

    def children(self) -> Iterator[Expr]:
        """The node's operands."""
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if isinstance(value, Expr):
                yield value
            elif isinstance(value, tuple):
                yield from (v for v in value if isinstance(v, Expr))

    def walk(self) -> Iterator[Expr]:
        """Every node of the tree, this one first."""
        yield self
        for child in self.children():
            yield from child.walk()

    def metric_names(self) -> frozenset[str]:
        """The metric names this expression selects: what a rule built from it reads."""
        return frozenset(n.metric for n in self.walk() if isinstance(n, Selector))


@dataclass(frozen=True, eq=True)
class Number(Expr):
    value: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", float(self.value))


@dataclass(frozen=True)
class String(Expr):
    """A double-quoted string literal; the printer escapes it."""

    value: str


@dataclass(frozen=True)
class LabelRef:
    """A matcher value an alert template fills in: the alerting series' value of ``label``.

    Only ``printer.template_query`` prints it (as ``%q``, with ``$labels.<label>`` as its argument).
    """

    label: str


@dataclass(frozen=True)
class Matcher:
    """A label matcher ``label op "value"``; the printer quotes and escapes the value."""

    label: str
    op: str
    value: str | LabelRef

    def __post_init__(self) -> None:
        if self.op not in MATCH_OPERATORS:
            raise ValueError(f"not a label matcher operator: {self.op!r}; accepted: {', '.join(MATCH_OPERATORS)}")
        if not LABEL_NAME.fullmatch(self.label):
            raise ValueError(f"not a label name: {self.label!r}")


@dataclass(frozen=True)
class Selector(Expr):
    """``metric{matchers}``; ``metric`` may be empty where a matcher names the metric (``__name__``)."""

    metric: str
    matchers: tuple[Matcher, ...] = ()

    def __post_init__(self) -> None:
        for m in self.matchers:
            if not isinstance(m, Matcher):
                raise TypeError(f"a selector's matchers are Matcher nodes (see match), not {m!r}")

    def where(self, *matchers: Matcher) -> Selector:
        """The selector with further matchers."""
        return replace(self, matchers=self.matchers + matchers)


@dataclass(frozen=True)
class Call(Expr):
    """``function(args)``."""

    function: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Aggregate(Expr):
    """``op by (labels) ([param, ]expr)``; no ``by`` clause when ``by`` is None, and ``op without (labels)``
    where ``without``. ``shared`` keeps it across a partition label (``partitioned``): a table every
    partition reads, such as prices."""

    op: str
    by: tuple[str, ...] | None
    expr: Expr
    param: Expr | None = None
    shared: bool = False
    without: bool = False


@dataclass(frozen=True)
class Matching:
    """Vector matching of a binary operation: ``on (labels)`` or, with ``ignoring``, ``ignoring (labels)``;
    then ``group_left (labels)`` for a many-to-one match (the rules put the "many" side on the left, so
    nothing needs ``group_right``). ``shared`` keeps ``on`` as it is under a partition label
    (``partitioned``): a join with a shared table."""

    on: tuple[str, ...]
    group_left: tuple[str, ...] | None = None
    ignoring: bool = False
    shared: bool = False


@dataclass(frozen=True)
class Binary(Expr):
    """``lhs op rhs``. ``stacked`` lays it out as three lines (left, operator, right)."""

    op: str
    lhs: Expr
    rhs: Expr
    matching: Matching | None = None
    stacked: bool = False

    @property
    def precedence(self) -> int:  # type: ignore[override]
        return PRECEDENCE[self.op]


@dataclass(frozen=True)
class Paren(Expr):
    """Parentheses a builder wants for grouping; the printer adds those precedence needs by itself."""

    expr: Expr


@dataclass(frozen=True)
class Range(Expr):
    """``expr[window]``, or the subquery ``expr[window:step]``."""

    expr: Expr
    window: str
    step: str | None = None


@dataclass(frozen=True)
class Offset(Expr):
    """``expr offset by``: a selector or range read ``by`` (a Prometheus duration) before the query's time, e.g.
    ``timestamp(x offset 1s)``, the time of the sample before the one an evaluation just wrote. A range of it is
    ``Offset(Range)`` (``x[5m] offset 1s``): PromQL takes no range after an offset."""

    expr: Selector | Range
    by: str

    def __post_init__(self) -> None:
        if not isinstance(self.expr, Selector | Range):
            raise TypeError(f"offset applies to a selector or a range, not {type(self.expr).__name__}")
        if not is_duration(self.by):
            raise ValueError(f"offset: {self.by!r} is not a Prometheus duration above zero, such as 1s or 5m")


@dataclass(frozen=True)
class At(Expr):
    """``expr @ at``: a selector, range or offset evaluated at unix time ``at`` whatever the query's time
    (``pinned``)."""

    expr: Selector | Range | Offset
    at: float


@dataclass(frozen=True)
class Placeholder(Expr):
    """A name a builder substitutes before printing, e.g. a catalog signal in a formula."""

    name: str


# --- Builders ---------------------------------------------------------------------------------


def selector(metric: str, *matchers: Matcher) -> Selector:
    """``metric{m1, m2}``."""
    return Selector(metric, matchers)


def match(label: str, value: str | LabelRef, op: str = "=") -> Matcher:
    """A label matcher, e.g. ``match("job", "node")`` or ``match("hostname", "", "!=")``."""
    return Matcher(label, op, value)


def labelled(label: str) -> Matcher:
    """``label!=""``: the series that carry ``label``."""
    return Matcher(label, "!=", "")


# Go's one-letter escapes, which PromQL's lexer reads (prometheus/promql/parser/lex.go, lexEscape).
_NAMED_ESCAPES = {"\\": "\\\\", '"': '\\"', "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
_NAMED_ESCAPES |= {"\t": "\\t", "\v": "\\v"}
# Characters printed as an escape: every control (C0, DEL, C1), line and paragraph separator, format
# character (zero-width, bidi overrides), and U+FFFD, which Prometheus' lexer takes for an invalid
# byte ("invalid UTF-8 rune") when it comes raw. Nothing left raw can end a literal or a line.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def _escape(char: str) -> str:
    if char in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[char]
    code = ord(char)
    if 0xD800 <= code < 0xE000:  # a lone surrogate: no UTF-8 spelling, and Go refuses its escape
        raise ValueError(f"a PromQL string cannot hold the lone surrogate U+{code:04X}")
    if code == 0xFFFD or unicodedata.category(char) in _ESCAPED_CATEGORIES:
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    return char


def quote(value: str) -> str:
    """``value`` as a PromQL double-quoted string: nothing in it can end the string or the line.

    ``\\`` and ``"`` are escaped, and so is every character Python's ``str.splitlines`` or Go's
    lexer could take for a line's or a string's end, or refuses raw (see ``_escape``), as Go's
    ``\\n``-style or ``\\uXXXX`` escapes; Prometheus reads the same value back.
    """
    if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
        return f'"{value}"'  # the common case, label values of letters and digits, at no cost
    return '"' + "".join(map(_escape, value)) + '"'


def call(function: str, *args: Operand | str) -> Call:
    """``function(args)``; str arguments are string literals."""
    return Call(function, tuple(String(a) if isinstance(a, str) else lift(a) for a in args))


def aggregate(
    op: str, by: Iterable[str] | None, expr: Expr, param: Operand | None = None, shared: bool = False
) -> Aggregate:
    return Aggregate(op, None if by is None else tuple(by), expr, None if param is None else lift(param), shared)


def aggregate_without(op: str, labels: Iterable[str], expr: Expr) -> Aggregate:
    """``op without (labels) (expr)``: every other label kept, whatever the series carry."""
    return Aggregate(op, tuple(labels), expr, without=True)


def label_copy(expr: Expr, target: str, source: str, regex: str = "(.+)") -> Call:
    """Copy ``source`` into ``target`` where ``source`` matches ``regex`` (non-empty by default)."""
    return call("label_replace", expr, target, "$1", source, regex)


def label_set(expr: Expr, label: str, value: str) -> Call:
    """``expr`` with ``label`` set to ``value``, as written: label_replace expands ``$`` in its replacement (``$1``,
    ``${name}``), so a literal ``$`` is doubled."""
    return call("label_replace", expr, label, value.replace("$", "$$"), "", "")


def on(labels: Iterable[str], group_left: Iterable[str] | None = None, shared: bool = False) -> Matching:
    """``on (labels)``, then ``group_left (labels)`` where given."""
    return Matching(tuple(labels), _labels(group_left), shared=shared)


def ignoring(labels: Iterable[str], group_left: Iterable[str] | None = None) -> Matching:
    """``ignoring (labels)``, then ``group_left (labels)`` where given."""
    return Matching(tuple(labels), _labels(group_left), ignoring=True)


def _labels(labels: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if labels is None else tuple(labels)


def join(lhs: Expr, op: str, matching: Matching, rhs: Expr) -> Binary:
    """``lhs`` and ``rhs`` on their own lines around the operator and its matching."""
    return Binary(op, lhs, rhs, matching, stacked=True)


def any_of(alternatives: Iterable[Expr], stacked: bool = True, matching: Matching | None = None) -> Expr:
    """Alternatives joined with ``or``: the first that has a series for a label set (or for the
    ``matching`` labels, ``or on (...)``) wins."""
    return _chain("or", list(alternatives), stacked, matching)


def all_of(conditions: Iterable[Expr], stacked: bool = True) -> Expr:
    """Conditions joined with ``and``: series of the first for which every other has a match."""
    return _chain("and", list(conditions), stacked)


def _chain(op: str, operands: list[Expr], stacked: bool, matching: Matching | None = None) -> Expr:
    """Operands joined with ``op`` from the left; a nested chain of the same ``op`` is spliced in
    (``or`` and ``and`` are associative), so it prints as one list, not in parentheses."""
    flat: list[Expr] = []
    for operand in operands:
        flat.extend(_links(operand, op) if isinstance(operand, Binary) and matching is None else [operand])
    if not flat:
        raise ValueError(f"{op}: no operands")
    out = flat[0]
    for operand in flat[1:]:
        out = Binary(op, out, operand, matching, stacked)
    return out


def _links(expr: Binary, op: str) -> list[Expr]:
    if expr.op != op or expr.matching is not None:
        return [expr]
    left = _links(expr.lhs, op) if isinstance(expr.lhs, Binary) else [expr.lhs]
    return [*left, expr.rhs]


def transform(expr: Expr, change: Callable[[Expr], Expr | None]) -> Expr:
    """``expr`` with every node for which ``change`` returns a node replaced by it (outermost first)."""
    new = change(expr)
    if new is not None:
        return new
    changes = {}
    for f in fields(expr):  # type: ignore[arg-type]
        value = getattr(expr, f.name)
        if isinstance(value, Expr):
            changes[f.name] = transform(value, change)
        elif isinstance(value, tuple) and any(isinstance(v, Expr) for v in value):
            changes[f.name] = tuple(transform(v, change) if isinstance(v, Expr) else v for v in value)
    return replace(expr, **changes) if changes else expr  # type: ignore[type-var]


def pinned(expr: Expr, at: float) -> Expr:
    """``expr`` with every selector and range evaluated at ``at`` (the ``@`` modifier): it answers at any query
    time as it would at ``at``, so several such expressions, each at its own time, can be asked in one query."""

    def change(node: Expr) -> Expr | None:
        return At(node, float(at)) if isinstance(node, Selector | Range | Offset) else None

    return transform(expr, change)


def partitioned(expr: Expr, label: str) -> Expr:
    """``expr`` computed apart for each value of ``label`` (a cluster, say), as if each value's series
    were alone: ``label`` leads every aggregation's ``by`` clause (a bare aggregation gets one) and every
    ``on`` match; an ``ignoring`` match, a match of all labels, and a function keep it anyway. Nodes
    marked ``shared`` are left as they are, and so is everything when ``label`` is empty."""
    if not label:
        return expr

    def scoped(labels: tuple[str, ...] | None) -> tuple[str, ...]:
        return labels if labels and label in labels else (label, *(labels or ()))

    return _regrouped(expr, scoped)


def alongside(expr: Expr, anchor: str, label: str) -> Expr:
    """``expr`` with ``label`` kept wherever ``anchor`` is: after ``anchor`` in every aggregation's ``by`` clause
    and every ``on`` match that holds it (nodes marked ``shared`` aside). Series without ``label`` aggregate and
    match as before (an absent label is one value), so this splits a result only where ``label`` tells series of
    one ``anchor`` apart."""

    def kept(labels: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if labels is None or anchor not in labels or label in labels:
            return labels
        at = labels.index(anchor) + 1
        return (*labels[:at], label, *labels[at:])

    return _regrouped(expr, kept)


def _regrouped(expr: Expr, grouping: Callable[[tuple[str, ...] | None], tuple[str, ...] | None]) -> Expr:
    """``expr`` with ``grouping`` applied to every aggregation's ``by`` labels (None: no ``by`` clause) and every
    ``on`` match's; ``ignoring`` matches, ``without`` aggregations and nodes marked ``shared`` left as they are."""

    def change(node: Expr) -> Expr:
        changes = {}
        for f in fields(node):  # type: ignore[arg-type]
            value = getattr(node, f.name)
            if isinstance(value, Expr):
                changes[f.name] = change(value)
            elif isinstance(value, tuple) and any(isinstance(v, Expr) for v in value):
                changes[f.name] = tuple(change(v) if isinstance(v, Expr) else v for v in value)
            elif isinstance(value, Matching) and not value.ignoring and not value.shared:
                changes[f.name] = replace(value, on=grouping(value.on) or ())
        if isinstance(node, Aggregate) and not node.shared and not node.without:  # without keeps every label
            changes["by"] = grouping(node.by)
        return replace(node, **changes) if changes else node  # type: ignore[type-var]

    return change(expr)


def substitute(expr: Expr, values: Callable[[str], Expr]) -> Expr:
    """``expr`` with every placeholder replaced by ``values(name)``."""
    return transform(expr, lambda node: values(node.name) if isinstance(node, Placeholder) else None)


def placeholders(expr: Expr) -> tuple[str, ...]:
    """The placeholder names of ``expr``, in order of first use."""
    return tuple(dict.fromkeys(n.name for n in expr.walk() if isinstance(n, Placeholder)))
