"""The house layer on grafanalib: panels as we build them, and current-format, deterministic JSON.

grafanalib 0.7.1 emits Grafana's old dashboard format: schemaVersion 12,
string datasources, ``uid: null``, nulls for every unset option and keys Grafana no longer
reads. Dashboards here are built with grafanalib objects through the helpers below, and
``render`` turns them into what current Grafana (and its published JSON Schema) expects: a
current ``schemaVersion``, the ``${datasource}`` object on every panel, target and variable,
a ``uid`` derived from the title, ``refId``s, no nulls and no legacy keys.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grafanalib import core
from grafanalib._gen import DashboardEncoder

from gpu_execution_pack import promql
from gpu_execution_pack.promql import Expr

SCHEMA_VERSION = 39  # Grafana 10.4 and 11
DATASOURCE_VARIABLE = "datasource"
DATASOURCE = {"type": "prometheus", "uid": "${" + DATASOURCE_VARIABLE + "}"}
GRID_WIDTH = 24
BASE_STEP = "-Infinity"  # stands for the base threshold step's null value until render() writes it
UID_MAX = 40  # Grafana's limit

# Keys grafanalib 0.7.1 writes that current Grafana ignores and its schema refuses.
LEGACY_KEYS = {
    "dashboard": {"__inputs", "gnetId", "hideControls", "id", "rows", "sharedCrosshair", "style"},
    "panel": {
        "cacheTimeout",
        "color",
        "columns",
        "editable",
        "error",
        "fontSize",
        "height",
        "mappings",  # panel-level mappings are the old table's; current ones live in fieldConfig
        "minSpan",
        "span",
        "thresholds",
        "thresholdType",
    },
    "target": {"metric", "query", "step", "target", "intervalFactor"},
    "variable": {"tags", "tagsQuery", "tagValuesQuery", "useTags"},
    "timepicker": {"time_options"},
}


@dataclass(frozen=True)
class Query:
    """One PromQL target of a panel: a tree, printed when the dashboard is rendered."""

    expr: Expr
    legend: str = ""
    instant: bool = False


@dataclass
class Section:
    """A row of the dashboard: a title and panels laid out left to right, wrapping at 24 columns."""

    title: str
    panels: list[tuple[Any, int, int]] = field(default_factory=list)  # (panel, width, height)

    def add(self, panel: Any, width: int = 12, height: int = 8) -> Section:
        self.panels.append((panel, width, height))
        return self


def targets(queries: list[Query], table_format: bool = False) -> list[core.Target]:
    """The panel's targets, each holding its query's tree until ``render`` prints it."""
    return [
        core.Target(
            expr=q.expr,
            legendFormat=q.legend,
            instant=q.instant,
            refId=chr(ord("A") + i),
            format="table" if table_format else "time_series",
        )
        for i, q in enumerate(queries)
    ]


def timeseries(
    title: str,
    unit: str,
    queries: list[Query],
    description: str,
    threshold: float | None = None,
    max_value: float | None = None,
    no_data: str = "",
) -> core.TimeSeries:
    """A time series panel; ``threshold`` draws a red line at that value, ``no_data`` is shown without data."""
    defaults: dict[str, Any] = {"thresholds": _thresholds(threshold)}
    if no_data:
        defaults["noValue"] = no_data
    return core.TimeSeries(
        title=title,
        description=description,
        targets=targets(queries),
        unit=unit,
        valueMin=0,
        valueMax=max_value,
        thresholdsStyleMode="line" if threshold is not None else "off",
        extraJson={
            "fieldConfig": {"defaults": defaults},
            "options": {"legend": {"showLegend": True}},
        },
    )


def _thresholds(red_from: float | None) -> dict[str, Any]:
    """Green, and red from ``red_from`` where given. The base step's value is null, as Grafana writes it."""
    steps: list[dict[str, Any]] = [{"color": "green", "value": BASE_STEP}]
    if red_from is not None:
        steps.append({"color": "red", "value": red_from})
    return {"mode": "absolute", "steps": steps}


def stat(
    title: str,
    unit: str,
    queries: list[Query],
    description: str,
    text_mode: str = "value",
    threshold: float | None = None,
) -> core.Stat:
    """A single-value panel; red from ``threshold`` where given (an alert's)."""
    return core.Stat(
        title=title,
        description=description,
        targets=targets(queries),
        format=unit,
        textMode=text_mode,
        graphMode="none",
        reduceCalc="lastNotNull",
        noValue="-",  # grafanalib's default prints the word "none"
        extraJson={
            "fieldConfig": {"defaults": {"thresholds": _thresholds(threshold)}},
            "options": {"wideLayout": True, "showPercentChange": False, "percentChangeColorMode": "standard"},
        },
    )


def table(
    title: str,
    queries: list[Query],
    description: str,
    columns: list[str],
    link: str = "",
    sort_by: tuple[str, bool] | None = None,
) -> core.Table:
    """Instant queries merged on their labels into one table, a column per query named by ``columns``.

    Columns share the panel's unit ("none"); their names say what they hold. ``link`` makes cells
    open that URL (a data link, so it can use ``${__data.fields.<label>}``). ``sort_by`` is (column,
    descending): the rows' order when the dashboard opens.
    """
    renames = {f"Value #{chr(ord('A') + i)}": name for i, name in enumerate(columns)}
    defaults: dict[str, Any] = {
        "thresholds": _thresholds(None),
        "decimals": 2,
        "custom": {"align": "auto", "inspect": False},
    }
    if link:
        defaults["links"] = [
            {
                "title": "Open execution",
                "url": link,
                "type": "link",
                "icon": "external link",
                "tooltip": "",
                "tags": [],
                "asDropdown": False,
                "targetBlank": False,
                "includeVars": False,
                "keepTime": False,  # the URL carries the time range itself
            }
        ]
    return core.Table(
        title=title,
        description=description,
        targets=targets([Query(q.expr, q.legend, instant=True) for q in queries], table_format=True),
        unit="none",
        transformations=[
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {"excludeByName": {"Time": True}, "renameByName": renames}},
        ],
        extraJson={"fieldConfig": {"defaults": defaults}, "options": _table_options(sort_by)},
    )


def _table_options(sort_by: tuple[str, bool] | None) -> dict[str, Any]:
    options: dict[str, Any] = {"frameIndex": 0, "showHeader": True}
    if sort_by is not None:
        options["sortBy"] = [{"displayName": sort_by[0], "desc": sort_by[1]}]
    return options


def lines_of(section: Section) -> list[list[tuple[Any, int, int]]]:
    """The section's panels wrapped into lines of at most 24 columns, left to right."""
    lines: list[list[tuple[Any, int, int]]] = []
    used = GRID_WIDTH
    for panel, width, height in section.panels:
        if not 0 < width <= GRID_WIDTH:
            raise ValueError(f"panel {panel.title!r}: width {width} is not 1 to {GRID_WIDTH} columns")
        if used + width > GRID_WIDTH:
            lines.append([])
            used = 0
        lines[-1].append((panel, width, height))
        used += width
    return lines


def layout(sections: list[Section]) -> list[Any]:
    """Each section's row followed by its panels, with grid positions and ids (1, 2, ... in order).

    Each line of panels fills the grid without holes: its panels take the line's tallest height, and the
    last panel of a line that falls short of 24 columns widens to the edge (a panel added at the end of a
    row, as a new served series' is, would otherwise leave a gap beside it)."""
    out: list[Any] = []
    y = 0
    for section in sections:
        out.append(core.RowPanel(title=section.title, gridPos=core.GridPos(h=1, w=GRID_WIDTH, x=0, y=y)))
        y += 1
        for line in lines_of(section):
            line_height = max(height for _, _, height in line)
            x = 0
            for i, (panel, width, _) in enumerate(line):
                filled = GRID_WIDTH - x if i == len(line) - 1 else width
                panel.gridPos = core.GridPos(h=line_height, w=filled, x=x, y=y)
                out.append(panel)
                x += filled
            y += line_height
    for i, panel in enumerate(out, start=1):
        panel.id = i
    return out


def uid_for(title: str) -> str:
    """A stable dashboard uid from its title: lower case, dashes, at most 40 characters."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:UID_MAX].rstrip("-")


def datasource_variable(default_name: str) -> dict[str, Any]:
    return {
        "name": DATASOURCE_VARIABLE,
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {"text": default_name, "value": default_name},
        "hide": 0,
        "refresh": 1,
        "regex": "",
    }


# What a multi-value variable sends for "All": any value, an absent label too.
ALL_VALUE = ".*"


def query_variable(name: str, label: str, query: str, multi: bool = False) -> dict[str, Any]:
    """A variable over the values ``query`` finds; ``multi``: several at once, "All" (``ALL_VALUE``) by default."""
    variable: dict[str, Any] = {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": query,
        "definition": query,
        "refresh": 2,  # on time range change: new executions appear
        "sort": 1,
        "hide": 0,
        "includeAll": multi,
        "multi": multi,
    }
    if multi:
        variable |= {"allValue": ALL_VALUE, "current": {"text": ["All"], "value": ["$__all"]}}
    return variable


def render(
    title: str,
    panels: list[Any],
    variables: list[dict[str, Any]],
    description: str,
    annotations: list[dict[str, Any]] | None = None,
    tags: tuple[str, ...] = ("gpu", "dcgm"),
    time_from: str = "now-24h",
    scope: Callable[[Expr], Expr] | None = None,
) -> str:
    """The dashboard as current-format JSON text, keys sorted; every target's query passes through
    ``scope`` (where given) before it is printed."""
    for panel in panels:
        for target in getattr(panel, "targets", None) or []:
            target.expr = promql.render(scope(target.expr) if scope else target.expr)
    dashboard = core.Dashboard(
        title=title,
        description=description,
        panels=panels,
        tags=list(tags),
        time=core.Time(time_from, "now"),
        refresh="1m",
        timezone="browser",
        uid=uid_for(title),
    )
    data = json.loads(json.dumps(dashboard.to_json_data(), cls=DashboardEncoder))
    data = _clean(data, "dashboard")
    data["schemaVersion"] = SCHEMA_VERSION
    data["templating"] = {"list": variables}
    data["annotations"] = {"list": [_builtin_annotation(), *(annotations or [])]}
    data["panels"] = [_panel(p) for p in data["panels"]]
    data["timepicker"] = _clean(data.get("timepicker", {}), "timepicker")
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _panel(panel: dict[str, Any]) -> dict[str, Any]:
    panel = _clean(panel, "panel")
    if panel["type"] == "row":
        row = {k: panel[k] for k in ("gridPos", "id", "title", "type")}
        return {**row, "collapsed": False, "panels": []}
    for step in panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps", []):
        if step.get("value") == BASE_STEP:
            step["value"] = None
    panel["datasource"] = DATASOURCE
    panel["targets"] = [{**_clean(t, "target"), "datasource": DATASOURCE} for t in panel.get("targets", [])]
    return panel


def _builtin_annotation() -> dict[str, Any]:
    return {
        "builtIn": 1,
        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }


def _clean(node: Any, kind: str = "") -> Any:
    """Drop nulls everywhere, and the legacy keys of ``kind`` at this level."""
    if isinstance(node, dict):
        legacy = LEGACY_KEYS.get(kind, set())
        return {k: _clean(v) for k, v in node.items() if v is not None and k not in legacy}
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node
