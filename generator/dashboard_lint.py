"""Checks on generated dashboards: grafana/dashboard-linter's rules, Grafana's JSON Schemas, PromQL syntax.

- lint: every panel and target uses the ``${datasource}`` variable, which exists; every panel
  has a title, a description, targets and a unit; every ``rate``-like function uses
  ``$__rate_interval``; counters (``*_total``) are read only through ``rate``-like functions.
- schema: the dashboard against ``dashboard.jsonschema.json``; each panel's options and
  custom field config, and each target, against the panel kind's and Prometheus' schemas.
- PromQL: every target, with its template variables substituted, through ``promtool check rules``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from generator import promtool
from generator.dashboards.house import DATASOURCE, DATASOURCE_VARIABLE
from generator.output import to_yaml

# Grafana's JSON Schemas (grafana-foundation-sdk, Apache-2.0): ../shared beside the checkout,
# or wherever GRAFANA_SCHEMAS_DIR points.
SCHEMAS_DIR = Path(
    os.environ.get("GRAFANA_SCHEMAS_DIR") or Path(__file__).resolve().parent.parent.parent / "shared/schemas/grafana"
)
RATE_FUNCTIONS = ("rate", "irate", "increase", "delta", "idelta", "deriv")
# What Grafana substitutes for its variables, as a query sent to Prometheus would carry them.
SUBSTITUTIONS = {
    "$__rate_interval": "1m",
    "$__interval": "1m",
    "$__range": "1h",
    "${__range}": "1h",
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


def schema_problems(name: str, dashboard: dict[str, Any], schemas_dir: Path = SCHEMAS_DIR) -> list[str]:
    """Every way ``dashboard`` departs from Grafana's published JSON Schemas."""
    import jsonschema  # a dev dependency: only checking needs it

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
