"""Checks on generated dashboards: grafana/dashboard-linter's rules, Grafana's models, PromQL syntax.

- lint: every panel and target uses the ``${datasource}`` variable, which exists; every panel
  has a title, a description, targets and a unit; every ``rate``-like function uses
  ``$__rate_interval``; counters (``*_total``) are read only through ``rate``-like functions.
- model: the dashboard, each panel (its options and custom field config by panel kind) and each
  target parsed with grafana-foundation-sdk's typed models (a dependency of the pack), checked
  against the models' type annotations and round-tripped back to JSON: a value of the wrong type
  or a key the model drops is a problem.
- schema (optional, where Grafana's JSON Schemas are at hand): the dashboard against
  ``dashboard.jsonschema.json``; each panel's options and custom field config, and each target,
  against the panel kind's and Prometheus' schemas. Only ``GRAFANA_SCHEMAS_DIR`` says where they are.
- PromQL: every target, with its template variables substituted, through ``promtool check rules``.
"""

from __future__ import annotations

import copy
import enum
import functools
import inspect
import json
import os
import re
import tempfile
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpu_execution_pack import promtool
from gpu_execution_pack.dashboards.house import ALL_VALUE, DATASOURCE, DATASOURCE_VARIABLE
from gpu_execution_pack.dashboards.queries import MODEL_VARIABLE
from gpu_execution_pack.output import to_yaml

# Where Grafana's JSON Schemas (grafana-foundation-sdk's, Apache-2.0) are, if anywhere: nothing in
# the repository or the package holds them, so only this variable names them.
SCHEMAS_ENV = "GRAFANA_SCHEMAS_DIR"
RATE_FUNCTIONS = ("rate", "irate", "increase", "delta", "idelta", "deriv")
# What Grafana substitutes for its variables, as a query sent to Prometheus would carry them.
SUBSTITUTIONS = {
    "$__rate_interval": "1m",
    "$__interval": "1m",
    "$__range": "1h",
    "${__range}": "1h",
    f"${MODEL_VARIABLE}": ALL_VALUE,  # the GPU-model filter at its default, All
}


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that queries (rows excluded)."""
    for panel in dashboard.get("panels", []):
        if panel.get("type") != "row":
            yield panel


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(panel title, PromQL) of every target."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            yield panel.get("title", "?"), target.get("expr", "")


def substitute(expr: str, variables: dict[str, str]) -> str:
    """A target's PromQL as Grafana would send it: Grafana's and the dashboard's variables filled in."""
    for name, value in {**SUBSTITUTIONS, **{f"${k}": v for k, v in variables.items()}}.items():
        expr = expr.replace(name, value)
    return expr


def lint(name: str, dashboard: dict[str, Any]) -> list[str]:
    """dashboard-linter's checks, as ``<name>: <panel>: problem`` sentences."""
    problems = []
    variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
    ds = variables.get(DATASOURCE_VARIABLE)
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append(f"{name}: no `{DATASOURCE_VARIABLE}` variable of type datasource for prometheus")
    for var in variables.values():
        if var.get("type") == "query" and var.get("datasource") != DATASOURCE:
            problems.append(f"{name}: variable {var.get('name')} does not use the {DATASOURCE_VARIABLE} variable")
    ids = [p.get("id") for p in dashboard.get("panels", [])]
    if len(ids) != len(set(ids)):
        problems.append(f"{name}: panel ids are not unique")
    for panel in panels(dashboard):
        where = f"{name}: panel {panel.get('title') or panel.get('id')!r}"
        if not panel.get("title"):
            problems.append(f"{where}: no title")
        if not panel.get("description"):
            problems.append(f"{where}: no description")
        if panel.get("datasource") != DATASOURCE:
            problems.append(f"{where}: datasource is not the {DATASOURCE_VARIABLE} variable")
        if not panel.get("fieldConfig", {}).get("defaults", {}).get("unit"):
            problems.append(f"{where}: no unit")
        targets = panel.get("targets", [])
        if not targets:
            problems.append(f"{where}: no targets")
        for target in targets:
            expr = target.get("expr", "")
            if target.get("datasource") != DATASOURCE:
                problems.append(
                    f"{where}: target {target.get('refId')} does not use the {DATASOURCE_VARIABLE} variable"
                )
            for fn, window in re.findall(rf"\b({'|'.join(RATE_FUNCTIONS)})\s*\([^\[]*\[([^\]]+)\]", expr):
                if window != "$__rate_interval":
                    problems.append(f"{where}: {fn}() over [{window}]; use [$__rate_interval]")
            for counter in re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*_total\b", expr):
                if not re.search(rf"\b(?:{'|'.join(RATE_FUNCTIONS)})\s*\(\s*{re.escape(counter)}\b", expr):
                    problems.append(f"{where}: counter {counter} is read without rate()")
    return problems


class SchemasUnavailable(RuntimeError):
    """Grafana's JSON Schemas were asked for, and ``GRAFANA_SCHEMAS_DIR`` does not name them."""


def configured_schemas_dir() -> Path | None:
    """The directory ``GRAFANA_SCHEMAS_DIR`` names, or None when it is unset or empty."""
    value = os.environ.get(SCHEMAS_ENV, "").strip()
    return Path(value) if value else None


def schema_problems(name: str, dashboard: dict[str, Any], schemas_dir: Path | None = None) -> list[str]:
    """Every way ``dashboard`` departs from Grafana's published JSON Schemas.

    An extra check for where the schemas exist (CI): they are read from ``schemas_dir``, else from
    the directory ``GRAFANA_SCHEMAS_DIR`` names; with neither, or without the schemas there, this
    raises SchemasUnavailable rather than check nothing. model_problems needs no schemas.
    """
    try:
        import jsonschema  # the `schemas` extra: only this optional check needs it
    except ImportError:
        raise SchemasUnavailable(
            f"checking dashboards against Grafana's JSON Schemas ({SCHEMAS_ENV} is set) needs jsonschema: "
            "pip install 'gpu-execution-pack[schemas]', or unset " + SCHEMAS_ENV
        ) from None

    if schemas_dir is None:
        schemas_dir = configured_schemas_dir()
    if schemas_dir is None:
        raise SchemasUnavailable(
            f"{SCHEMAS_ENV} is not set: set it to a directory of Grafana's JSON Schemas "
            "(dashboard.jsonschema.json, <panel type>.jsonschema.json, prometheus.jsonschema.json) "
            "to check dashboards against them"
        )
    if not (schemas_dir / "dashboard.jsonschema.json").is_file():
        raise SchemasUnavailable(f"no dashboard.jsonschema.json in {schemas_dir} (from {SCHEMAS_ENV} or the caller)")

    def load(file: str) -> dict[str, Any]:
        return json.loads((schemas_dir / file).read_text(encoding="utf-8"))

    def errors(schema: dict[str, Any], definition: str, instance: Any, where: str) -> list[str]:
        ref = {"$ref": f"#/definitions/{definition}", "definitions": schema["definitions"]}
        return [
            f"{name}: {where}{'/' + '/'.join(map(str, e.absolute_path)) if e.absolute_path else ''}: {e.message}"
            for e in jsonschema.Draft7Validator(ref).iter_errors(instance)
        ]

    dashboard_schema = load("dashboard.jsonschema.json")
    out = [
        f"{name}: {'/'.join(map(str, e.absolute_path)) or 'dashboard'}: {e.message}"
        for e in jsonschema.Draft7Validator(dashboard_schema).iter_errors(dashboard)
    ]
    prometheus = load("prometheus.jsonschema.json")
    for panel in panels(dashboard):
        where = f"panel {panel.get('title')!r}"
        kind_file = schemas_dir / f"{panel['type']}.jsonschema.json"
        if not kind_file.exists():
            out.append(f"{name}: {where}: no schema for panel type {panel['type']!r}")
            continue
        kind = load(kind_file.name)
        if "Options" in kind["definitions"]:
            out += errors(kind, "Options", panel.get("options", {}), f"{where} options")
        if "FieldConfig" in kind["definitions"]:
            custom = panel.get("fieldConfig", {}).get("defaults", {}).get("custom", {})
            out += errors(kind, "FieldConfig", custom, f"{where} fieldConfig.defaults.custom")
        for target in panel.get("targets", []):
            out += errors(prometheus, "Dataquery", target, f"{where} target {target.get('refId')}")
    return out


# --- grafana-foundation-sdk's models --------------------------------------------------------

SDK = "grafana-foundation-sdk"
# Keys Grafana reads that the SDK's models leave out, by model, each with who reads it. Grafana's
# own dashboard JSON Schema lists each of them; nothing else a model drops is accepted.
MODEL_GAPS: dict[str, dict[str, str]] = {
    "dashboard.AnnotationQuery": {
        "step": "Grafana's Prometheus datasource: the annotation query's minimum step (target.interval)",
        "titleFormat": "Grafana's Prometheus datasource: the annotation's title template",
        "textFormat": "Grafana's Prometheus datasource: the annotation's text template",
    },
    "dashboard.VariableModel": {"definition": "Grafana's variable editor: the query as it shows it"},
}


class _Sdk:
    """grafana-foundation-sdk's pieces model_problems uses, imported once, when first needed."""

    def __init__(self) -> None:
        try:
            from grafana_foundation_sdk.cog import plugins, runtime, variants
            from grafana_foundation_sdk.cog.encoder import JSONEncoder
            from grafana_foundation_sdk.models import dashboard
        except ImportError as err:  # installed with the pack; a broken environment may lack it
            raise ModuleNotFoundError(
                f"model_problems needs {SDK}, a dependency of gpu-execution-pack: reinstall the pack", name=err.name
            ) from err
        plugins.register_default_plugins()
        self.runtime = runtime
        self.dashboard = dashboard
        self.dataquery = variants.Dataquery
        self.encoder = JSONEncoder

    def round_trip(self, model: Any) -> Any:
        """``model`` as the SDK writes it, read back as plain JSON."""
        return json.loads(json.dumps(model, cls=self.encoder))

    def panel_kind(self, panel_type: str) -> tuple[type | None, type | None] | None:
        """(Options model, custom FieldConfig model) of a panel type, None for a type the SDK lacks."""
        config = self.runtime.panelcfg_config(panel_type)
        if config is None:
            return None
        hooks = (config.options_from_json_hook, config.field_config_from_json_hook)
        options, custom = (getattr(hook, "__self__", None) for hook in hooks)
        return options, custom

    def query_model(self, datasource_type: str) -> type | None:
        """The Dataquery model of a datasource type, None for a type the SDK lacks."""
        config = self.runtime.Runtime().dataquery_variants.get(datasource_type)
        return getattr(config.from_json_hook, "__self__", None) if config else None


@functools.cache
def _sdk() -> _Sdk:
    return _Sdk()


def _is_model(hint: Any) -> bool:
    return isinstance(hint, type) and callable(getattr(hint, "from_json", None)) and hasattr(hint, "to_json")


@functools.cache
def _attributes(model: type) -> dict[str, tuple[str, Any]]:
    """JSON key -> (attribute, type hint) of an SDK model, from its from_json (generated code)."""
    source = inspect.getsource(model.from_json)
    hints = typing.get_type_hints(model)
    keys = list(re.finditer(r'if "([^"]+)" in data:', source))
    out = {}
    for i, key in enumerate(keys):
        block = source[key.end() : keys[i + 1].start() if i + 1 < len(keys) else len(source)]
        attribute = re.search(r'args\["(\w+)"\]', block)
        if attribute and attribute.group(1) in hints:
            out[key.group(1)] = (attribute.group(1), hints[attribute.group(1)])
    return out


def _name(model: type) -> str:
    """An SDK model's name with its module's, as in timeseries.Options."""
    return f"{model.__module__.rsplit('.', 1)[-1]}.{model.__name__}"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    for kind, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array")):
        if isinstance(value, kind):
            return name
    return "object"


def _describe(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin is typing.Literal or (isinstance(hint, type) and issubclass(hint, enum.Enum)):
        values = args if origin is typing.Literal else [m.value for m in hint]
        return "one of " + ", ".join(json.dumps(v) for v in values)
    if origin is list:
        return f"an array of ({_describe(args[0])})" if args else "an array"
    if origin is dict or hint is dict:
        return "an object"
    if _is_model(hint):
        return f"a {_name(hint)} object"
    names = {type(None): "null", bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))


def _shape(hint: Any) -> set[str]:
    """The JSON types a value of an SDK type hint can have."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in (Any, object):
        return {"null", "boolean", "integer", "number", "string", "array", "object"}
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_shape(a) for a in args))
    if origin is typing.Literal or (isinstance(hint, type) and issubclass(hint, enum.Enum)):
        return {_json_type(v) for v in (args if origin is typing.Literal else [m.value for m in hint])}
    if origin is list:
        return {"array"}
    names = {type(None): {"null"}, bool: {"boolean"}, int: {"integer"}, float: {"integer", "number"}, str: {"string"}}
    return names.get(hint, {"object"})


def _where(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else part
    return out


Problem = tuple[tuple[str | int, ...], str]


def _check(data: Any, hint: Any, path: tuple[str | int, ...] = ()) -> list[Problem]:
    """Every way JSON ``data`` departs from an SDK type hint: (path, problem) pairs."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)

    def wrong() -> list[Problem]:
        return [(path, f"{_json_type(data)} {json.dumps(data)[:60]} is not {_describe(hint)}")]

    if hint in (Any, object):
        return []
    if origin in (typing.Union, types.UnionType):
        if data is None:
            return [] if type(None) in args else wrong()
        arms = [a for a in args if a is not type(None)]
        results = [_check(data, arm, path) for arm in arms]
        if any(not r for r in results):
            return []
        # Several arms: the problems of the one arm the value's JSON type fits, if only one does.
        fitting = [r for arm, r in zip(arms, results, strict=True) if _json_type(data) in _shape(arm)]
        return fitting[0] if len(fitting) == 1 else wrong()
    if origin is typing.Literal:
        return [] if any(data == a and type(data) is type(a) for a in args) else wrong()
    if origin is list:
        if not isinstance(data, list):
            return wrong()
        return [p for i, item in enumerate(data) for p in _check(item, args[0] if args else Any, (*path, i))]
    if origin is dict or hint is dict:
        if not isinstance(data, dict):
            return wrong()
        return [p for k, v in data.items() for p in _check(v, args[1] if args else Any, (*path, k))]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        ok = any(data == m.value and type(data) is type(m.value) for m in hint)
        return [] if ok else wrong()
    if hint is bool:
        return [] if isinstance(data, bool) else wrong()
    if hint is int:
        return [] if isinstance(data, int) and not isinstance(data, bool) else wrong()
    if hint is float:
        return [] if isinstance(data, (int, float)) and not isinstance(data, bool) else wrong()
    if hint is str:
        return [] if isinstance(data, str) else wrong()
    if _is_model(hint):
        return _check_model(data, hint, path) if isinstance(data, dict) else wrong()
    if isinstance(hint, type) and issubclass(hint, _sdk().dataquery):  # any datasource's query
        if not isinstance(data, dict):
            return wrong()
        ds = data.get("datasource")
        ds_type = ds.get("type", "") if isinstance(ds, dict) else ""
        model = _sdk().query_model(ds_type)
        return _check_model(data, model, path) if model else [(path, f"no {SDK} query model for {ds_type!r}")]
    return [(path, f"{SDK} declares {hint!r}, which this check cannot read")]


def _check_model(data: dict[str, Any], model: type, path: tuple[str | int, ...]) -> list[Problem]:
    """``data`` parsed with ``model``, its keys' values against the model's hints, and its round trip."""
    try:
        written = _sdk().round_trip(model.from_json(data))
        failure = None
    except Exception as err:  # the SDK's parsers raise whatever the data makes them raise
        # Still look at the keys one by one: the problem below is more precise, if one is found.
        written = _sdk().round_trip(model())
        failure = (path, f"{SDK}'s {_name(model)} cannot read it: {type(err).__name__}: {err}")
    known = _attributes(model)
    gaps = MODEL_GAPS.get(_name(model), {})
    problems: list[Problem] = []
    for key, value in data.items():
        if key in gaps:
            continue
        if key not in known:  # unknown, unless a constant the model always writes (a row's type)
            if key not in written:
                problems.append(((*path, key), f"not in {SDK}'s {_name(model)} model (dropped on a round trip)"))
            elif written[key] != value:
                problems.append(((*path, key), f"{SDK}'s {_name(model)} always writes {json.dumps(written[key])}"))
            continue
        found = _check(value, known[key][1], (*path, key))
        if failure is None and not found:
            if key not in written and value is not None:  # a null stands for an unset key
                found = [((*path, key), f"{SDK}'s {_name(model)} reads it but drops it on a round trip")]
            elif not isinstance(value, (dict, list)) and _json_type(written[key]) != _json_type(value):
                found = [
                    ((*path, key), f"{SDK} writes {_json_type(value)} {value!r} back as {_json_type(written[key])}")
                ]
        problems += found
    return problems or ([failure] if failure else [])


def model_problems(name: str, dashboard: dict[str, Any]) -> list[str]:
    """Every way ``dashboard`` departs from grafana-foundation-sdk's typed models.

    The dashboard, each panel (as its kind: options and ``fieldConfig.defaults.custom`` by panel
    type) and each target (as its datasource's query) are parsed with the SDK's ``from_json``
    and written back with ``to_json``: a parser that fails, a value not of the type the model
    declares, and a key of ours the model drops (does not know) are problems. Keys the model only
    adds defaults for are not. Needs the SDK (a dependency of the pack); raises ModuleNotFoundError without it.
    """
    sdk = _sdk()
    out: list[str] = []

    def report(where: str, problems: list[Problem]) -> None:
        out.extend(f"{name}: {where}{': ' + _where(p) if p else ''}: {message}" for p, message in problems)

    report("dashboard", _check({k: v for k, v in dashboard.items() if k != "panels"}, sdk.dashboard.Dashboard))
    if not isinstance(dashboard.get("panels", []), list):
        report("dashboard", [(("panels",), f"{_json_type(dashboard['panels'])} is not an array")])
        return out

    def panel_problems(panel: Any, where: str) -> None:
        if not isinstance(panel, dict):
            report(where, [((), f"{_json_type(panel)} is not a panel object")])
            return
        where = f"panel {panel.get('title') or panel.get('id')!r}"
        if panel.get("type") == "row":
            report(where, _check({k: v for k, v in panel.items() if k != "panels"}, sdk.dashboard.RowPanel))
            children = panel.get("panels") or []
            for i, child in enumerate(children if isinstance(children, list) else []):
                panel_problems(child, f"{where} panels[{i}]")
            return
        found = len(out)
        kind = sdk.panel_kind(panel.get("type", ""))
        if kind is None:
            report(where, [(("type",), f"no {SDK} model for panel type {panel.get('type')!r}")])
            return
        options_model, custom_model = kind
        # The panel itself, then what its kind and its datasource define: options, custom field config, targets.
        envelope = {k: v for k, v in panel.items() if k not in ("options", "targets")}
        field_config = panel.get("fieldConfig")
        custom: Any = {}
        if isinstance(field_config, dict) and isinstance(field_config.get("defaults"), dict):
            custom = field_config["defaults"].get("custom", {})
            defaults = {k: v for k, v in field_config["defaults"].items() if k != "custom"}
            envelope["fieldConfig"] = {**field_config, "defaults": defaults}
        report(where, _check(envelope, sdk.dashboard.Panel))
        if "options" in panel and options_model:
            report(f"{where} options", _check(panel["options"], options_model))
        if custom_model:
            report(f"{where} fieldConfig.defaults.custom", _check(custom, custom_model))
        elif custom:
            unmodelled = f"{SDK} models no custom field config for {panel['type']}"
            report(f"{where} fieldConfig.defaults.custom", [((), unmodelled)])
        targets = panel.get("targets", [])
        if not isinstance(targets, list):
            report(where, [(("targets",), f"{_json_type(targets)} is not an array")])
        panel_ds = panel.get("datasource") if isinstance(panel.get("datasource"), dict) else {}
        for i, target in enumerate(targets if isinstance(targets, list) else []):
            label = f"{where} target {target.get('refId', i) if isinstance(target, dict) else i}"
            ds = target.get("datasource") if isinstance(target, dict) else None
            ds_type = (ds if isinstance(ds, dict) else panel_ds).get("type", "")
            model = sdk.query_model(ds_type)
            if model is None:
                report(label, [((), f"no {SDK} query model for datasource type {ds_type!r}")])
            else:
                report(label, _check(target, model))
        if len(out) == found:
            # Nothing found piece by piece: the whole panel through the SDK's own parser, which
            # picks the targets' model by the panel's datasource.
            try:
                sdk.round_trip(sdk.dashboard.Panel.from_json(copy.deepcopy(panel)))
            except Exception as err:  # the SDK's parsers raise whatever the data makes them raise
                out.append(f"{name}: {where}: {SDK}'s Panel cannot read it: {type(err).__name__}: {err}")

    for i, panel in enumerate(dashboard.get("panels", [])):
        panel_problems(panel, f"panels[{i}]")
    return out


def promql_problems(exprs: list[tuple[str, str]]) -> list[str]:
    """Queries (label, PromQL) that promtool's parser rejects, each with promtool's reason."""
    if not exprs:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        problems = []
        for i, (label, expr) in enumerate(exprs):
            # One file per query, so promtool's error names the query that fails.
            path = Path(tmp) / f"query-{i}.rules.yml"
            path.write_text(
                to_yaml({"groups": [{"name": "q", "rules": [{"record": "dashboard:query", "expr": expr}]}]})
            )
            try:
                promtool.check_rules([path])
            except promtool.PromtoolError as err:
                problems.append(f"{label}: {str(err).splitlines()[-1].strip()}")
        return problems
