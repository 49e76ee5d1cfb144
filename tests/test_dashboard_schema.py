"""The generated dashboards' structure, checked with grafana-foundation-sdk's typed models (a dev
dependency from PyPI, so a fresh clone checks it with nothing outside the repository), and with
Grafana's JSON Schemas where GRAFANA_SCHEMAS_DIR names them."""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from gpu_execution_pack.config import Config
from gpu_execution_pack.dashboards import DASHBOARDS as RENDERERS
from gpu_execution_pack.dashboards import dashboard_json
from gpu_execution_pack.dashboards import lint as dashboard_lint


@functools.cache
def _generated() -> dict[str, str]:
    return {path.name: text for path, text in dashboard_json(Config()).items()}


def generated() -> dict[str, dict[str, Any]]:
    """File name -> dashboard (a fresh copy), as the pack renders them for the default configuration."""
    return {name: json.loads(text) for name, text in _generated().items()}


NAMES = sorted(f"{stem}.json" for stem in RENDERERS)


def panel(dashboard: dict[str, Any], kind: str) -> dict[str, Any]:
    """The first panel of a kind."""
    return next(p for p in dashboard["panels"] if p["type"] == kind)


def problems_after(change, dashboard_name: str = "execution.json") -> list[str]:
    """model_problems of a generated dashboard after ``change(dashboard)``."""
    dashboard = generated()[dashboard_name]
    change(dashboard)
    return dashboard_lint.model_problems(dashboard_name, dashboard)


# --- 1. The generated dashboards fit the SDK's models ------------------------------------------


def test_the_dashboards_exercise_every_panel_kind_the_pack_uses():
    # So that "no problems" below means every kind's options, custom field config and targets were read.
    dashboards = generated()
    assert set(dashboards) == set(NAMES) == {"execution.json", "fleet.json", "cost.json"}
    kinds = {p["type"] for d in dashboards.values() for p in d["panels"]}
    assert kinds == {"row", "stat", "timeseries", "table"}
    for kind in kinds - {"row"}:
        options, _ = dashboard_lint._sdk().panel_kind(kind)
        assert options is not None, kind


@pytest.mark.parametrize("name", NAMES)
def test_generated_dashboards_have_no_model_problems(name):
    assert dashboard_lint.model_problems(name, generated()[name]) == []


def test_keys_the_model_only_adds_defaults_for_are_not_problems():
    # Leaving out optional keys is fine: the round trip adds the model's defaults, and those are not ours.
    def strip(d):
        stat = panel(d, "stat")
        for key in ("colorMode", "graphMode", "justifyMode", "wideLayout"):
            del stat["options"][key]
        del stat["transparent"]
        del panel(d, "timeseries")["options"]["tooltip"]

    assert problems_after(strip) == []


# --- 2. A legacy string datasource ------------------------------------------------------------


def test_a_string_datasource_on_a_panel_is_a_model_problem():
    def legacy(d):
        panel(d, "timeseries")["datasource"] = "Prometheus"

    title = panel(generated()["execution.json"], "timeseries")["title"]
    problems = problems_after(legacy)
    assert problems == [
        f'execution.json: panel {title!r}: datasource: string "Prometheus" is not a dashboard.DataSourceRef object'
        " or null"
    ]


def test_the_sdk_itself_does_not_accept_a_string_datasource():
    # Which check must catch it: the SDK neither keeps nor refuses cleanly a string datasource; its
    # Panel parser fails on a panel with targets and silently drops the string on one without.
    from grafana_foundation_sdk.models import dashboard as models

    sdk = dashboard_lint._sdk()
    with_targets = panel(generated()["execution.json"], "timeseries")
    with_targets["datasource"] = "Prometheus"
    with pytest.raises(AttributeError):
        models.Panel.from_json(with_targets)
    without_targets = {k: v for k, v in with_targets.items() if k != "targets"}
    assert sdk.round_trip(models.Panel.from_json(without_targets))["datasource"] != "Prometheus"


def test_a_string_datasource_on_a_target_is_a_model_problem():
    def legacy(d):
        panel(d, "stat")["targets"][0]["datasource"] = "Prometheus"

    problems = problems_after(legacy)
    assert len(problems) == 1
    assert " target A: datasource: string " in problems[0]


# --- 3. Keys the models do not know ----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"), [("execution.json", "timeseries"), ("execution.json", "stat"), ("fleet.json", "table")]
)
def test_an_unknown_option_is_reported_for_every_panel_kind(name, kind):
    def inject(d):
        panel(d, kind)["options"]["noSuchOption"] = 1

    title = panel(generated()[name], kind)["title"]
    assert problems_after(inject, name) == [
        f"{name}: panel {title!r} options: noSuchOption: "
        f"not in grafana-foundation-sdk's {kind}.Options model (dropped on a round trip)"
    ]


@pytest.mark.parametrize(
    ("where", "change"),
    [
        ("options: legend.noSuchKey", lambda p: p["options"]["legend"].__setitem__("noSuchKey", True)),
        (
            "fieldConfig.defaults.custom: lineWidthh",
            lambda p: p["fieldConfig"]["defaults"]["custom"].update(lineWidthh=1),
        ),
        ("target A: exprr", lambda p: p["targets"][0].update(exprr="up")),
        ("': fieldConfig.defaults.noSuchField", lambda p: p["fieldConfig"]["defaults"].update(noSuchField=1)),
        ("': gridPos.depth", lambda p: p["gridPos"].update(depth=1)),
        ("': span", lambda p: p.update(span=12)),  # a legacy key grafanalib writes
    ],
)
def test_unknown_keys_anywhere_in_a_panel_are_reported(where, change):
    problems = problems_after(lambda d: change(panel(d, "timeseries")))
    assert len(problems) == 1, problems
    assert where in problems[0]
    assert "(dropped on a round trip)" in problems[0]


def test_unknown_keys_outside_panels_are_reported():
    def inject(d):
        d["rows"] = []  # grafanalib's old layout
        d["annotations"]["list"][0]["noSuchKey"] = 1
        d["templating"]["list"][0]["current"]["noSuchKey"] = 1

    assert sorted(problems_after(inject)) == sorted(
        [
            "execution.json: dashboard: rows: not in grafana-foundation-sdk's dashboard.Dashboard model"
            " (dropped on a round trip)",
            "execution.json: dashboard: annotations.list[0].noSuchKey: not in grafana-foundation-sdk's"
            " dashboard.AnnotationQuery model (dropped on a round trip)",
            "execution.json: dashboard: templating.list[0].current.noSuchKey: not in grafana-foundation-sdk's"
            " dashboard.VariableOption model (dropped on a round trip)",
        ]
    )


def test_only_the_listed_keys_the_sdk_lacks_are_let_through():
    # The dashboards use keys Grafana reads that the SDK's models lack (MODEL_GAPS); each must
    # really be absent from the model (else the exception is stale), and nothing else is let through.
    for model_name, keys in dashboard_lint.MODEL_GAPS.items():
        module, cls = model_name.split(".")
        model = getattr(__import__(f"grafana_foundation_sdk.models.{module}", fromlist=[cls]), cls)
        assert not set(keys) & set(dashboard_lint._attributes(model)), model_name
    assert dashboard_lint.MODEL_GAPS.keys() == {"dashboard.AnnotationQuery", "dashboard.VariableModel"}


# --- 4. Values of the wrong type ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "change", "expected"),
    [
        (
            "stat",
            lambda p: p["options"]["reduceOptions"].update(calcs="lastNotNull"),
            'options: reduceOptions.calcs: string "lastNotNull" is not an array of (a string)',
        ),
        ("stat", lambda p: p["gridPos"].update(h="tall"), ': gridPos.h: string "tall" is not an integer'),
        (
            "stat",
            lambda p: p["options"].update(graphMode="sparkline"),
            'options: graphMode: string "sparkline" is not one of "none", "line", "area"',
        ),
        (
            "timeseries",
            lambda p: p["fieldConfig"]["defaults"]["custom"].update(fillOpacity="10"),
            'fieldConfig.defaults.custom: fillOpacity: string "10" is not a number or null',
        ),
        (
            "timeseries",
            lambda p: p["targets"][0].update(instant="yes"),
            'target A: instant: string "yes" is not a boolean or null',
        ),
        (
            "timeseries",
            lambda p: p["fieldConfig"]["defaults"]["thresholds"].update(
                steps=[{"color": "green", "value": None}, {"color": "red", "value": "80"}]
            ),
            ': fieldConfig.defaults.thresholds.steps[1].value: string "80" is not a number or null',
        ),
        ("timeseries", lambda p: p.update(id="7"), ': id: string "7" is not an integer or null'),
    ],
)
def test_a_value_of_the_wrong_type_is_reported(kind, change, expected):
    problems = problems_after(lambda d: change(panel(d, kind)))
    assert len(problems) == 1, problems
    assert problems[0].endswith(expected), problems


def test_a_variable_refresh_outside_the_enum_is_reported():
    def change(d):
        d["templating"]["list"][1]["refresh"] = 7

    assert problems_after(change) == [
        "execution.json: dashboard: templating.list[1].refresh: integer 7 is not one of 0, 1, 2"
    ]


def test_an_unparseable_value_mapping_is_reported_where_it_is():
    def change(d):
        panel(d, "stat")["fieldConfig"]["defaults"]["mappings"].append({"options": {}})  # no type

    problems = problems_after(change)
    assert len(problems) == 1
    assert (
        "fieldConfig.defaults: grafana-foundation-sdk's dashboard.FieldConfig cannot read it: KeyError" in problems[0]
    )


def test_a_panel_kind_the_sdk_lacks_is_reported():
    def change(d):
        panel(d, "timeseries")["type"] = "graph"  # grafanalib's old graph panel

    problems = problems_after(change)
    assert len(problems) == 1
    assert problems[0].endswith(": type: no grafana-foundation-sdk model for panel type 'graph'")


def test_without_the_sdk_model_problems_says_what_to_install(monkeypatch):
    dashboard_lint._sdk.cache_clear()
    try:
        for module in [m for m in sys.modules if m.split(".")[0] == "grafana_foundation_sdk"] or [
            "grafana_foundation_sdk"
        ]:
            monkeypatch.setitem(sys.modules, module, None)  # importing it fails as if it were not installed
        with pytest.raises(ModuleNotFoundError, match="grafana-foundation-sdk"):
            dashboard_lint.model_problems("execution.json", generated()["execution.json"])
    finally:
        monkeypatch.undo()
        dashboard_lint._sdk.cache_clear()
    assert dashboard_lint.model_problems("execution.json", generated()["execution.json"]) == []


# --- 5. Grafana's JSON Schemas, an extra check where GRAFANA_SCHEMAS_DIR names them -----------


def test_schema_problems_checks_where_grafana_schemas_dir_is_set_and_refuses_where_not():
    schemas = os.environ.get("GRAFANA_SCHEMAS_DIR", "").strip()
    if schemas:
        # CI sets it: the schemas must be there, and the dashboards must validate against them.
        assert Path(schemas, "dashboard.jsonschema.json").is_file(), schemas
        for name, dashboard in generated().items():
            assert dashboard_lint.schema_problems(name, dashboard) == [], name
    else:
        # A fresh clone has no schemas: the check refuses, naming the variable, rather than pass.
        for name, dashboard in generated().items():
            with pytest.raises(dashboard_lint.SchemasUnavailable, match="GRAFANA_SCHEMAS_DIR"):
                dashboard_lint.schema_problems(name, dashboard)


def test_schema_problems_has_no_default_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("GRAFANA_SCHEMAS_DIR", raising=False)
    assert dashboard_lint.configured_schemas_dir() is None
    with pytest.raises(dashboard_lint.SchemasUnavailable, match="GRAFANA_SCHEMAS_DIR is not set"):
        dashboard_lint.schema_problems("execution.json", generated()["execution.json"])
    monkeypatch.setenv("GRAFANA_SCHEMAS_DIR", str(tmp_path))  # set, but holding no schemas
    assert dashboard_lint.configured_schemas_dir() == tmp_path
    with pytest.raises(dashboard_lint.SchemasUnavailable, match=r"no dashboard\.jsonschema\.json"):
        dashboard_lint.schema_problems("execution.json", generated()["execution.json"])
