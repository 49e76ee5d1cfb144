"""The one PromQL printer: parentheses by precedence, and a layout that reads like hand-written rules.

A node goes on one line while it fits in ``WIDTH`` characters and its operands do; otherwise
its operands are indented on lines of their own. Stacked binary operations (``or`` of
alternatives, joins with ``on (...) group_left (...)``) always put each operand and the operator
on lines of their own, which is how a rule's alternatives read best.

``template_query`` prints a tree whose matchers take values from an alert's labels (``LabelRef``)
as the Go template ``printf`` an alert description passes to ``query``.
"""

from __future__ import annotations

from gpu_execution_pack.promql.tree import (
    ATOM,
    Aggregate,
    At,
    Binary,
    Call,
    Expr,
    LabelRef,
    Matcher,
    Matching,
    Number,
    Offset,
    Paren,
    Placeholder,
    Range,
    Selector,
    String,
    quote,
)

WIDTH = 110  # longest line laid out on one
# Stands for a template query's label reference while it is printed; ``quote`` prints it escaped in
# a string value, so one found raw is always a reference (template_query checks the count anyway).
_REF = "\x00"


def render(expr: Expr) -> str:
    """``expr`` as PromQL text."""
    return _Printer().render(expr)


def template_query(expr: Expr) -> str:
    """``expr`` as the argument of an alert template's ``query``: ``printf "<PromQL>" $labels.a ...``.

    Each ``LabelRef`` matcher value prints as ``%q``, filled by Go's ``printf`` with the alerting
    series' label, quoted as a PromQL string. The PromQL is a Go string in a printf format: its
    ``%`` are doubled, its ``"`` and ``\\`` escaped, and the line breaks of a query laid out on several
    lines written ``\\n`` (a Go string literal holds none raw; PromQL reads them as spaces).
    """
    printer = _Printer(refs=[])
    parts = printer.render(expr).split(_REF)
    if len(parts) != len(printer.refs) + 1:
        raise ValueError(f"a template query cannot hold the character {_REF!r}")
    escaped = (p.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("\n", "\\n") for p in parts)
    return " ".join([f'printf "{"%q".join(escaped)}"', *(f"$labels.{label}" for label in printer.refs)])


def render_matchers(matchers: tuple[Matcher, ...]) -> str:
    """Matchers as they print between a selector's braces: ``job="node", mode="idle"``."""
    return _Printer().matchers(matchers)


def number(value: float) -> str:
    """A number as PromQL reads it: integers without a fraction, others as Python's shortest repr."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def indent(text: str, spaces: int = 2) -> str:
    """``text`` indented; split on ``\\n`` only, the one line end the printer writes (``str.splitlines`` also
    splits on ``\\r``, U+2028 and others, which must never break a line: ``quote`` escapes them anyway)."""
    pad = " " * spaces
    return "\n".join(pad + line if line else line for line in text.split("\n"))


def parenthesised(text: str) -> str:
    """``(text)``, or ``text`` indented between lines of their own when it is long or multi-line."""
    if "\n" in text or len(text) > WIDTH:
        return f"(\n{indent(text)}\n)"
    return f"({text})"


def matching(m: Matching) -> str:
    """``on (labels)`` or ``ignoring (labels)``, with its ``group_left`` clause."""
    out = f"{'ignoring' if m.ignoring else 'on'} ({', '.join(m.on)})"
    if m.group_left is not None:
        out += f" group_left ({', '.join(m.group_left)})"
    return out


class _Printer:
    """One printing: ``refs`` collects the labels of a template query's ``LabelRef`` values, in
    the order they print; a plain printing (``refs`` None) refuses them."""

    def __init__(self, refs: list[str] | None = None):
        self.refs = refs

    def render(self, expr: Expr) -> str:
        if isinstance(expr, Selector):
            return self._selector(expr)
        if isinstance(expr, Number):
            return number(expr.value)
        if isinstance(expr, String):
            return quote(expr.value)
        if isinstance(expr, Paren):
            return parenthesised(self.render(expr.expr))
        if isinstance(expr, Call):
            return self._call(expr)
        if isinstance(expr, Aggregate):
            return self._aggregate(expr)
        if isinstance(expr, Binary):
            return self._binary(expr)
        if isinstance(expr, Range):
            inner = self.render(expr.expr)
            if isinstance(expr.expr, Offset | At):
                if expr.step is None:
                    raise ValueError("a range of an offset or @ is not PromQL: put the range inside (x[5m] offset 1s)")
                inner = parenthesised(inner)  # a subquery over one: its modifier stays inside
            elif not isinstance(expr.expr, Selector):
                inner = parenthesised(inner) if expr.expr.precedence < ATOM else inner
            return f"{inner}[{expr.window}{':' + expr.step if expr.step is not None else ''}]"
        if isinstance(expr, Offset):
            return f"{self.render(expr.expr)} offset {expr.by}"
        if isinstance(expr, At):
            return f"{self.render(expr.expr)} @ {number(expr.at)}"
        if isinstance(expr, Placeholder):
            raise ValueError(f"placeholder {{{expr.name}}} was not substituted before printing")
        raise TypeError(f"cannot print {type(expr).__name__}")

    def _selector(self, expr: Selector) -> str:
        return f"{expr.metric}{{{self.matchers(expr.matchers)}}}" if expr.matchers else expr.metric

    def matchers(self, matchers: tuple[Matcher, ...]) -> str:
        return ", ".join(self._matcher(m) for m in matchers)

    def _matcher(self, m: Matcher) -> str:
        if not isinstance(m.value, LabelRef):
            return f"{m.label}{m.op}{quote(m.value)}"
        if self.refs is None:
            raise ValueError(
                f"{m.label}{m.op}$labels.{m.value.label}: a label reference is filled in by an alert template; "
                "print it with template_query"
            )
        self.refs.append(m.value.label)
        return f"{m.label}{m.op}{_REF}"

    def _call(self, expr: Call) -> str:
        args = [self.render(a) for a in expr.args]
        one_line = f"{expr.function}({', '.join(args)})"
        if not any("\n" in a for a in args) and len(one_line) <= WIDTH:
            return one_line
        # The first argument (the vector) on its own, the rest (parameters) together on the next line.
        body = args[0] + (",\n" + ", ".join(args[1:]) if len(args) > 1 else "")
        return f"{expr.function}(\n{indent(body)}\n)"

    def _aggregate(self, expr: Aggregate) -> str:
        head = expr.op if expr.by is None else f"{expr.op} {'without' if expr.without else 'by'} ({', '.join(expr.by)})"
        space = "" if expr.by is None else " "
        inner = self.render(expr.expr)
        param = self.render(expr.param) + "," if expr.param is not None else ""
        one_line = f"{head}{space}({param + ' ' if param else ''}{inner})"
        if "\n" not in inner and len(one_line) <= WIDTH:
            return one_line
        return f"{head}{space}({param}\n{indent(inner)}\n)"

    def _operand(self, expr: Expr, parent: Binary, right: bool) -> str:
        """An operand, parenthesised where precedence (or right-hand associativity) needs it."""
        text = self.render(expr)
        prec, own = expr.precedence, parent.precedence
        needs = prec < own or (prec == own and (right != (parent.op == "^")) and prec < ATOM)
        if needs and not isinstance(expr, Paren):
            return parenthesised(text)
        return text

    def _binary(self, expr: Binary) -> str:
        lhs, rhs = self._operand(expr.lhs, expr, right=False), self._operand(expr.rhs, expr, right=True)
        op = expr.op if expr.matching is None else f"{expr.op} {matching(expr.matching)}"
        if expr.stacked:
            return f"{lhs}\n{op}\n{rhs}"
        return f"{lhs} {op} {rhs}"
