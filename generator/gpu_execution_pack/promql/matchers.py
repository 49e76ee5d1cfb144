"""Label matchers as a user writes them in the config (``job="dcgm", zone=~"eu-.*"``), read into nodes, and
printed for Alertmanager: one grammar for PromQL selectors and Alertmanager's routes and inhibit rules.

The grammar is PromQL's for the inside of a selector's braces, kept strict: label names, the
operators ``=``, ``!=``, ``=~`` and ``!~``, and values in double quotes with PromQL's (Go's)
escapes (``\\n``, ``\\"``, ``\\\\``, ``\\t``, ``\\x41``, ``\\u00e9``, ...). An unknown escape such as
``\\d``, which Prometheus would refuse when it loads the rules, is refused here, where the
message can name the config key.

Alertmanager reads the same text: its UTF-8 matcher parser (0.27 on) unquotes a double-quoted value
with Go's ``strconv.Unquote``, PromQL's escapes; its classic parser (before 0.27, and the fallback
after) knows only ``\\"``, ``\\n`` and ``\\\\`` and reads any other backslash as itself. The printer
writes a value with just those three escapes and every other character as it is (``tree.quote``), so a
matcher read here and printed by ``alertmanager_matchers`` means the same value to Prometheus and to
both of Alertmanager's parsers; and an escape the parsers would read apart (``\\d``) never reaches them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from gpu_execution_pack.promql.tree import LABEL_NAME, Matcher

_SPACE = re.compile(r"\s*")
_OPERATOR = re.compile(r"=~|!~|!=|=")
# One character of a double-quoted string: an escape, or anything but a quote, backslash or newline.
_ESCAPE = re.compile(r"\\(?:[abfnrtv\\\"]|x[0-9a-fA-F]{2}|[0-7]{3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})")
_PLAIN = re.compile(r'[^"\\\n]+')
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"'}


@lru_cache(maxsize=256)
def parse_matchers(text: str) -> tuple[Matcher, ...]:
    """The matchers of a comma-separated list (empty text: none); ValueError saying where it goes wrong."""
    matchers: list[Matcher] = []
    pos = _skip(text, 0)
    while pos < len(text):
        if matchers:
            if text[pos] != ",":
                raise ValueError(f"expected a comma before the next matcher at {_rest(text, pos)}")
            pos = _skip(text, pos + 1)
        matcher, pos = _matcher(text, pos)
        matchers.append(matcher)
        pos = _skip(text, pos)
    return tuple(matchers)


def alertmanager_matchers(matchers: Iterable[Matcher]) -> list[str]:
    """Matchers as an Alertmanager route's or inhibit rule's ``matchers`` list them, one string each
    (``alertname=~"GpuExecution.*"``), each value quoted by ``alertmanager_quote``."""
    return [f"{m.label}{m.op}{alertmanager_quote(str(m.value))}" for m in matchers]


def alertmanager_quote(value: str) -> str:
    """``value`` double-quoted so that both of Alertmanager's matcher parsers read it back: the classic one
    knows only the ``\\``, ``\"`` and ``\n`` escapes (any other backslash stands for itself), so only those
    are written, and every other character as it is, which the UTF-8 parser (Go's ``strconv.Unquote``) reads
    alike. PromQL's printer escapes more (``\t``, ``\u2028``): the classic parser would keep those as written."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _rest(text: str, pos: int) -> str:
    """Where parsing stopped, for a message."""
    return repr(text[pos:]) if pos < len(text) else "the end"


def _skip(text: str, pos: int) -> int:
    return _SPACE.match(text, pos).end()  # type: ignore[union-attr]  # \s* always matches


def _matcher(text: str, pos: int) -> tuple[Matcher, int]:
    label = LABEL_NAME.match(text, pos)
    if label is None:
        raise ValueError(f"expected a label name ({LABEL_NAME.pattern}) at {_rest(text, pos)}")
    pos = _skip(text, label.end())
    op = _OPERATOR.match(text, pos)
    if op is None:
        raise ValueError(f"expected =, !=, =~ or !~ after {label.group()} at {_rest(text, pos)}")
    value, pos = _string(text, _skip(text, op.end()))
    return Matcher(label.group(), op.group(), value), pos


def _string(text: str, pos: int) -> tuple[str, int]:
    """The value of the double-quoted string at ``pos``, and the position after its closing quote."""
    if not text.startswith('"', pos):
        raise ValueError(f"expected a value in double quotes at {_rest(text, pos)}")
    start, pos, out = pos, pos + 1, []
    while pos < len(text) and text[pos] != '"':
        if plain := _PLAIN.match(text, pos):
            out.append(plain.group())
            pos = plain.end()
        elif escape := _ESCAPE.match(text, pos):
            out.append(_unescape(escape.group()))
            pos = escape.end()
        elif text[pos] == "\\":
            raise ValueError(f"unknown escape {text[pos : pos + 2]!r} in {text[start:]!r}; write \\\\ for a backslash")
        else:
            raise ValueError(f"a line break in the value {text[start:pos]!r}; write \\n")
    if pos == len(text):
        raise ValueError(f"the value {text[start:]!r} has no closing quote")
    return "".join(out), pos + 1


def _unescape(escape: str) -> str:
    kind = escape[1]
    if kind in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[kind]
    code = int(escape[1:], 8) if kind.isdigit() else int(escape[2:], 16)
    if kind in "uU":
        if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
            raise ValueError(f"the escape {escape!r} is not a character")
    elif code > 0x7F:  # a byte, which alone is no UTF-8 character
        raise ValueError(f"the escape {escape!r} is a byte above ASCII; write the character or \\u{code:04x}")
    return chr(code)
