"""The one PromQL printer: parentheses by precedence, and a layout that reads like hand-written rules.

A node goes on one line while it fits in ``WIDTH`` characters and its operands do; otherwise
its operands are indented on lines of their own. Stacked binary operations (``or`` of
alternatives, joins with ``on (...) group_left (...)``) always put each operand and the operator
on lines of their own, which is how a rule's alternatives read best.
"""

from __future__ import annotations

from gpu_execution_pack.promql.tree import (
    ATOM,
    Aggregate,
    Binary,
    Call,
    Expr,
    Matching,
    Number,
    Paren,
    Placeholder,
    Range,
    Selector,
    String,
    quote,
)

WIDTH = 110  # longest line laid out on one


def render(expr: Expr) -> str:
    """``expr`` as PromQL text."""
    if isinstance(expr, Selector):
        return f"{expr.metric}{{{', '.join(expr.matchers)}}}" if expr.matchers else expr.metric
    if isinstance(expr, Number):
        return number(expr.value)
    if isinstance(expr, String):
        return quote(expr.value)
    if isinstance(expr, Paren):
        return parenthesised(render(expr.expr))
    if isinstance(expr, Call):
        return _call(expr)
    if isinstance(expr, Aggregate):
        return _aggregate(expr)
    if isinstance(expr, Binary):
        return _binary(expr)
    if isinstance(expr, Range):
        inner = render(expr.expr)
        if not isinstance(expr.expr, Selector):
            inner = parenthesised(inner) if expr.expr.precedence < ATOM else inner
        return f"{inner}[{expr.window}{':' + expr.step if expr.step is not None else ''}]"
    if isinstance(expr, Placeholder):
        raise ValueError(f"placeholder {{{expr.name}}} was not substituted before printing")
    raise TypeError(f"cannot print {type(expr).__name__}")


def number(value: float) -> str:
    """A number as PromQL reads it: integers without a fraction, others as Python's shortest repr."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def indent(text: str, spaces: int = 2) -> str:
    pad = " " * spaces
    return "\n".join(pad + line if line else line for line in text.splitlines())


def parenthesised(text: str) -> str:
    """``(text)``, or ``text`` indented between lines of their own when it is long or multi-line."""
    if "\n" in text or len(text) > WIDTH:
        return f"(\n{indent(text)}\n)"
    return f"({text})"


def _call(expr: Call) -> str:
    args = [render(a) for a in expr.args]
    one_line = f"{expr.function}({', '.join(args)})"
    if not any("\n" in a for a in args) and len(one_line) <= WIDTH:
        return one_line
    # The first argument (the vector) on its own, the rest (parameters) together on the next line.
    body = args[0] + (",\n" + ", ".join(args[1:]) if len(args) > 1 else "")
    return f"{expr.function}(\n{indent(body)}\n)"


def _aggregate(expr: Aggregate) -> str:
    head = expr.op if expr.by is None else f"{expr.op} by ({', '.join(expr.by)})"
    space = "" if expr.by is None else " "
    inner = render(expr.expr)
    param = render(expr.param) + "," if expr.param is not None else ""
    one_line = f"{head}{space}({param + ' ' if param else ''}{inner})"
    if "\n" not in inner and len(one_line) <= WIDTH:
        return one_line
    return f"{head}{space}({param}\n{indent(inner)}\n)"


def _operand(expr: Expr, parent: Binary, right: bool) -> str:
    """An operand, parenthesised where precedence (or right-hand associativity) needs it."""
    text = render(expr)
    prec, own = expr.precedence, parent.precedence
    needs = prec < own or (prec == own and (right != (parent.op == "^")) and prec < ATOM)
    if needs and not isinstance(expr, Paren):
        return parenthesised(text)
    return text


def matching(m: Matching) -> str:
    out = f"on ({', '.join(m.on)})"
    if m.group_left is not None:
        out += f" group_left ({', '.join(m.group_left)})"
    return out


def _binary(expr: Binary) -> str:
    lhs, rhs = _operand(expr.lhs, expr, right=False), _operand(expr.rhs, expr, right=True)
    op = expr.op if expr.matching is None else f"{expr.op} {matching(expr.matching)}"
    if expr.stacked:
        return f"{lhs}\n{op}\n{rhs}"
    return f"{lhs} {op} {rhs}"
