"""A generic loader for configs declared as frozen dataclasses: strict, with errors that name the key.

A key is declared with ``opt`` (its default, what it is, why one would change it, its kind) or
``section`` (a nested dataclass). ``build`` instantiates a dataclass from parsed YAML, rejecting
unknown keys, wrong types and impossible values with a message naming the key and what it
accepts. Nothing here knows the pack's keys: they live in ``sections`` and ``schema``.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import field
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml

from gpu_execution_pack.promql.durations import is_duration, parse_duration_seconds
from gpu_execution_pack.promql.matchers import parse_matchers
from gpu_execution_pack.promql.printer import render_matchers
from gpu_execution_pack.promql.tree import LABEL_NAME


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the file, the key and what is accepted."""


# --- Field helpers ------------------------------------------------------------------------

LABEL_NAME_RE = re.compile(rf"^{LABEL_NAME.pattern}$")
METRIC_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
PREFIX_RE = re.compile(r"^([a-zA-Z_][a-zA-Z0-9_]*)?$")  # device-metrics-exporter's MetricsFieldPrefix
DNS_LABEL_RE = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
# Prometheus' longest duration (Go's time.Duration, int64 nanoseconds: about 292 years), in whole years.
MAX_DURATION_SECONDS = 292 * 365 * 86400
# Label matchers (kind "selector", for PromQL and Alertmanager alike) are read by promql.parse_matchers.
SELECTOR_ACCEPTS = 'comma-separated label matchers such as job="dcgm", zone=~"eu-.*"'
HTTP_URL_RE = re.compile(r"^https?://[^/?#\s]+(/[^?#\s]*)?\Z")
URL_ACCEPTS = "an http:// or https:// URL (a path is a prefix; no query or fragment)"
HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")  # RFC 9110 token
HEADER_VALUE_RE = re.compile(r"^[\x20-\x7e]*\Z")
# A scrape target's host, to which a port is added: a DNS name or IPv4 address, or an IPv6 address in brackets.
HOST_RE = re.compile(r"^([A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]+\])\Z")

Kind = Literal[
    "text",
    "duration",
    "label",
    "dns_label",
    "metric",
    "selector",
    "regex",
    "regex_any",
    "ratio",
    "positive",
    "non_negative",
    "path",
    "prices",
    "labels",
    "url",
    "header",
    "header_value",
    "count",
    "port",
    "name",
    "prefix",
    "host",
    "model_names",
]
# Mapping keys (these kinds) are held as sorted (key, value) pairs, so the config stays
# hashable and its output does not depend on how the YAML was ordered.
MAPPING_KINDS = ("prices", "labels", "model_names")


def opt(
    default: Any,
    doc: str,
    why: str,
    kind: Kind = "text",
    choices: tuple[str, ...] = (),
    yaml_name: str = "",
    empty_ok: bool = False,
) -> Any:
    """Declare a config key: its default, what it is (doc), why one would change it (why).

    A duration key whose default is empty accepts empty; ``empty_ok`` says another one does too
    (its doc says what empty means)."""
    meta = {"doc": doc, "why": why, "kind": kind, "choices": choices, "yaml_name": yaml_name, "empty_ok": empty_ok}
    if isinstance(default, (list, dict)) or dataclasses.is_dataclass(default):
        return field(default_factory=lambda: default, metadata=meta)
    return field(default=default, metadata=meta)


def section(factory: Any, doc: str) -> Any:
    """Declare a nested section of keys."""
    return field(default_factory=factory, metadata={"doc": doc, "why": "", "kind": "section"})


# --- Loading ------------------------------------------------------------------------------


def yaml_key(f: dataclasses.Field) -> str:
    """The YAML spelling of a dataclass field (``for_`` is written ``for``)."""
    return f.metadata.get("yaml_name") or f.name


def _check_scalar(value: Any, current: Any, f: dataclasses.Field, where: str) -> Any:
    """Validate one scalar; its type is the type of the default it replaces."""
    kind, choices = f.metadata.get("kind", "text"), f.metadata.get("choices", ())
    if isinstance(current, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {yaml_text(value)}")
        return value
    if isinstance(current, int):
        return _check_int(value, kind, where)
    if isinstance(current, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            hint = ""
            number = _float_or_none(value) if isinstance(value, str) else None
            if number is not None:  # YAML 1.1 reads 1e20 (no dot, no sign) as text
                written = str(int(number)) if number.is_integer() else repr(number)
                hint = f" (YAML reads {value} as text: write {written})"
            raise ConfigError(f"{where}: expected a number, got {yaml_text(value)}{hint}")
        value = float(value)
        if kind == "ratio" and not 0 < value <= 1:
            raise ConfigError(f"{where}: {value} is not accepted; expected a ratio above 0 and at most 1")
        # YAML's .nan and .inf are floats too: NaN passes every comparison's negation (``nan <= 0`` is false),
        # and an infinity means "never" to no key (a deadline of .inf was no deadline; a budget of it, int() fails).
        finite = "" if math.isfinite(value) else "finite "
        if kind == "positive" and (finite or value <= 0):
            raise ConfigError(f"{where}: {value} is not accepted; expected a {finite}number above 0")
        if kind == "non_negative" and (finite or value < 0):
            raise ConfigError(f"{where}: {value} is not accepted; expected 0 (off) or a {finite}number above 0")
        if finite:
            raise ConfigError(f"{where}: {value} is not accepted; expected a finite number")
        return value
    if not isinstance(value, str):
        described = {"duration": "a Prometheus duration such as 30s, 5m or 1h30m", "label": "a label name"}
        raise ConfigError(f"{where}: expected {described.get(kind, 'a string')}, got {yaml_text(value)}")
    if choices and value not in choices:
        raise ConfigError(f"{where}: {yaml_text(value)} is not accepted; accepted: {', '.join(choices)}")
    if kind == "selector":
        check_selector(value, where)
    if kind == "url" and value and (problem := url_problem(value)):
        # The value is shown with its password masked: a config's URL may carry credentials.
        raise ConfigError(f"{where}: {redacted(value)!r} is not accepted; expected {URL_ACCEPTS} (here: {problem})")
    checks = {
        "duration": (
            lambda v: is_duration(v) and parse_duration_seconds(v) <= MAX_DURATION_SECONDS,
            "a Prometheus duration above zero such as 30s, 5m or 1h30m (at most 292y)",
        ),
        # Names beginning with __ are Prometheus' own (__name__, relabelling's): a rule cannot make one a label.
        "label": (
            lambda v: LABEL_NAME_RE.match(v) and not v.startswith("__"),
            f"a label name ({LABEL_NAME.pattern}) not beginning with __",
        ),
        "metric": (METRIC_NAME_RE.match, "a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"),
        "regex": (_compiles, "a regular expression with one capture group"),
        "regex_any": (_compiles_any, "a regular expression"),
        "path": (lambda v: v.strip() != "", "a non-empty path"),
        "name": (lambda v: v.strip() != "" and "\n" not in v, "a non-empty name on one line"),
        # Kubernetes object names (RFC 1123 labels), of which the value is a prefix.
        "dns_label": (DNS_LABEL_RE.match, "lower-case letters, digits and '-', starting with a letter"),
        "url": (HTTP_URL_RE.match, URL_ACCEPTS),
        "header": (HEADER_NAME_RE.match, "an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)"),
        "header_value": (HEADER_VALUE_RE.match, "printable ASCII without line breaks"),
    }
    if kind in checks:
        ok, accepted = checks[kind]
        allow_empty = f.metadata.get("empty_ok", False) or (kind == "duration" and f.default == "")
        if not (allow_empty and value == "") and not ok(value):
            also = " (or empty)" if allow_empty else ""
            raise ConfigError(f"{where}: {yaml_text(value)} is not accepted; expected {accepted}{also}")
    return value


def _check_int(value: Any, kind: str, where: str) -> int:
    """A whole number: a count (0 or more) or a TCP port."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: expected a whole number, got {yaml_text(value)}")
    if kind == "port" and not 0 < value < 65536:
        raise ConfigError(f"{where}: {value} is not accepted; expected a TCP port from 1 to 65535")
    if value < 0:
        raise ConfigError(f"{where}: {value} is not accepted; expected 0 or a whole number above 0")
    return value


def url_problem(url: str) -> str:
    """Why ``url`` is not ``http(s)://host[:port][/path]`` in words ("no host", "port 99999 is not from 1 to
    65535"), or "" where it is one. The regular expression of kind "url" passes ``http://[::1`` and ports past
    65535, which only fail (with a traceback) when a client connects."""
    if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", url):
        return "no scheme (http:// or https://)"
    if any(c.isspace() or not c.isprintable() for c in url):
        return "a space or control character in it"
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed IPv6 bracket
        return "not a valid URL"
    if parts.scheme.lower() not in ("http", "https"):
        return f"scheme {parts.scheme!r} is not http or https"
    if parts.query or parts.fragment or "?" in url or "#" in url:
        return "a query or fragment in it"
    if not parts.hostname:
        return "no host"
    written = parts.netloc.rpartition("@")[2].rpartition("]")[2]  # host:port, an IPv6 host's brackets left out
    port = written.rpartition(":")[2] if ":" in written else ""
    if port and not (port.isascii() and port.removeprefix("-").isdigit()):
        return f"port {port!r} is not a number"
    if port and not 1 <= int(port) <= 65535:
        return f"port {port} is not from 1 to 65535"
    return ""


def redacted(url: str) -> str:
    """``url`` with the password of its user info masked (``http://admin:***@host``; a user name alone, which may
    be a token, as ``***``), for messages and output that name the URL; unchanged without user info."""
    # The user info runs to the authority's last "@" (a password may hold an unencoded one), before any /?#; also
    # where the scheme was left out (``admin:s3cret@host:9090``, ``//admin:s3cret@host``), as such a URL is refused.
    found = re.match(r"^((?:[A-Za-z][A-Za-z0-9+.-]*:)?//|)([^/?#]*)@", url)
    if not found:
        return url
    user, colon, _ = found.group(2).partition(":")
    return f"{found.group(1)}{user + ':***' if colon else '***'}@{url[found.end() :]}"


def check_selector(value: str, where: str) -> None:
    """ConfigError naming ``where`` unless ``value`` is a list of PromQL label matchers whose regular expressions
    compile (else every rule reading the selector would be refused by Prometheus, not the config by us)."""
    try:
        matchers = parse_matchers(value)
    except ValueError as err:
        raise ConfigError(f"{where}: {yaml_text(value)} is not accepted; expected {SELECTOR_ACCEPTS} ({err})") from None
    for m in matchers:
        if m.op in ("=~", "!~"):
            try:
                re.compile(str(m.value))
            except re.error as err:
                raise ConfigError(f"{where}: {render_matchers((m,))} is not a regular expression ({err})") from None


def check_selectors(obj: Any, section: str) -> None:
    """Check every selector key of section ``obj``, also where it was built without the loader."""
    for f in dataclasses.fields(obj):
        if f.metadata.get("kind") == "selector":
            check_selector(getattr(obj, f.name), f"{section}.{yaml_key(f)}")


def _compiles_any(value: str) -> bool:
    try:
        re.compile(value)
    except re.error:
        return False
    return True


def _compiles(value: str) -> bool:
    try:
        return re.compile(value).groups >= 1
    except re.error:
        return False


def key_paths(cls: type, where: str = "") -> list[str]:
    """The dotted path of every key of dataclass ``cls`` and of its sections, in the order they are declared."""
    paths = []
    for f in dataclasses.fields(cls):
        path = _join(where, yaml_key(f))
        paths.append(path)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            paths += key_paths(type(default), path)
    return paths


def _misplaced_hint(root: type, key: str) -> str:
    """Where ``key``, unknown where it was written, is a key of the config: 'did you mean ...? ', or ''."""
    places = [p for p in key_paths(root) if p.rsplit(".", 1)[-1] == key]
    if len(places) == 1:
        return f"did you mean {places[0]!r}? "
    if places:
        return f"did you mean one of {', '.join(repr(p) for p in places)}? "
    return ""


def build(cls: type, data: Any, where: str = "", base: Any = None, root: type | None = None) -> Any:
    """Instantiate dataclass ``cls`` from ``data``, starting from ``base`` (its defaults); ``root`` is the
    config's own class (``cls`` at the top), where an unknown key is looked for in the other sections."""
    base = base if base is not None else cls()
    root = root or cls
    if data is None:
        return base
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or 'top level'}: expected a mapping of keys, got {type(data).__name__}")
    fields = {yaml_key(f): f for f in dataclasses.fields(cls)}
    unknown = sorted({k if isinstance(k, str) else yaml_text(k) for k in data} - set(fields))
    if unknown:
        # A key of another section (tenant_label at the top, not under api:) is named where it belongs; else a
        # look-alike of this level's keys (a typo).
        close = difflib.get_close_matches(unknown[0], fields, n=1)
        hint = _misplaced_hint(root, unknown[0]) or (f"did you mean {close[0]!r}? " if close else "")
        raise ConfigError(
            f"{_join(where, unknown[0])}: unknown key; {hint}accepted keys{' in ' + where if where else ''}: "
            + ", ".join(sorted(fields))
        )
    values = {}
    for key, f in fields.items():
        current = getattr(base, f.name)
        if key not in data:
            values[f.name] = current
            continue
        path = _join(where, key)
        if dataclasses.is_dataclass(current):
            values[f.name] = build(type(current), data[key], path, current, root)
        elif f.metadata.get("kind") in MAPPING_KINDS:
            values[f.name] = _mapping(data[key], f, path)
        elif isinstance(current, tuple):
            values[f.name] = _tuple(data[key], f, path)
        else:
            values[f.name] = _check_scalar(data[key], current, f, path)
    return cls(**values)


def _tuple(value: Any, f: dataclasses.Field, where: str) -> tuple[str, ...]:
    empty_ok = f.default == ()  # a list whose default is empty may be empty
    if isinstance(value, str) or not isinstance(value, list) or not (value or empty_ok):
        raise ConfigError(f"{where}: expected a {'' if empty_ok else 'non-empty '}list, got {yaml_text(value)}")
    choices = f.metadata.get("choices", ())
    for item in value:
        quoted = ", ".join(repr(c) for c in choices)
        if isinstance(item, float) and choices and any("." in c for c in choices):
            # YAML reads an unquoted 4.10 as the number 4.1: say to quote it, not only that 4.1 is no choice.
            raise ConfigError(
                f"{where}: {yaml_text(item)} is a number (YAML reads unquoted 4.10 as 4.1); "
                f"write each in quotes: {quoted}"
            )
        if not isinstance(item, str):
            accepted = f"one of {quoted}" if choices else "a string (quote it)"
            raise ConfigError(f"{where}: {yaml_text(item)} is not accepted; each item must be {accepted}")
        if choices and item not in choices:
            raise ConfigError(f"{where}: {yaml_text(item)} is not accepted; accepted: {', '.join(choices)}")
        if f.metadata.get("kind") == "prefix" and not PREFIX_RE.match(item):
            accepted = 'a metric-name prefix ([a-zA-Z_][a-zA-Z0-9_]*) or ""'
            raise ConfigError(f"{where}: {yaml_text(item)} is not accepted; expected {accepted}")
        if f.metadata.get("kind") == "host" and not HOST_RE.match(item):
            accepted = "a host name or IP address (an IPv6 one in brackets), without a port or path"
            raise ConfigError(f"{where}: {yaml_text(item)} is not accepted; expected {accepted}")
    if choices:  # keep the catalog's order so output does not depend on how the list was written
        return tuple(c for c in choices if c in value)
    return tuple(value)


def _mapping(value: Any, f: dataclasses.Field, where: str) -> tuple[tuple[str, Any], ...]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {yaml_text(value)}")
    pairs = []
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{where}: {yaml_text(key)} is not accepted; keys must be non-empty strings")
        if f.metadata["kind"] == "model_names":
            if not _compiles_any(key):
                raise ConfigError(f"{where}: {yaml_text(key)} is not accepted; keys are regular expressions")
            if not isinstance(item, str) or not item.strip():
                raise ConfigError(f"{where}.{key}: {yaml_text(item)} is not accepted; expected a model name")
        elif f.metadata["kind"] == "prices":
            if isinstance(item, bool) or not isinstance(item, (int, float)) or not 0 <= item < math.inf:
                raise ConfigError(f"{where}.{key}: {yaml_text(item)} is not accepted; expected a price of 0 or more")
            item = float(item)
        else:
            if not LABEL_NAME_RE.match(key):
                raise ConfigError(
                    f"{where}: {yaml_text(key)} is not accepted; expected a label name ([a-zA-Z_][a-zA-Z0-9_]*)"
                )
            if not isinstance(item, str):
                raise ConfigError(
                    f"{where}.{key}: {yaml_text(item)} is not accepted; label values are strings (quote them)"
                )
        pairs.append((key, item))
    return tuple(sorted(pairs))


def _float_or_none(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def yaml_text(value: Any) -> str:
    """A value as YAML writes it (null, true, [x]), for a message: the user wrote YAML, not Python (text quoted)."""
    if isinstance(value, str):
        return repr(value)
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 16).removesuffix("\n...\n").strip()


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
