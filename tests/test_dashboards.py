"""Dashboards: Grafana's schemas, dashboard-linter's checks, PromQL syntax, deployment wrappers,
and every panel query answered by a real Prometheus holding scenario data."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml
from gpu_execution_pack import catalog, promql
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.dashboards import DASHBOARDS, dashboard_json, execution, house
from gpu_execution_pack.dashboards import lint as dashboard_lint
from gpu_execution_pack.rules.files import all_groups, rule_files
from gpu_execution_pack.rules.kubernetes import kubernetes_rules

from harness.prometheus import Prometheus, dependency_rounds

from .conftest import EXECUTION, REPO


def committed() -> dict[str, dict]:
    return {name: json.loads((REPO / "dashboards" / f"{name}.json").read_text()) for name in DASHBOARDS}


# --- Static checks ------------------------------------------------------------------------


def test_the_three_dashboards_are_generated_with_stable_uids():
    dashboards = committed()
    assert set(dashboards) == {"execution", "fleet", "cost"}
    uids = {d["uid"] for d in dashboards.values()}
    assert uids == {"gpu-executions-execution", "gpu-executions-fleet", "gpu-executions-cost"}
    for d in dashboards.values():
        assert d["schemaVersion"] == house.SCHEMA_VERSION >= 36  # datasource objects since Grafana 8.3


def test_dashboards_pass_the_linter():
    for name, dashboard in committed().items():
        assert dashboard_lint.lint(name, dashboard) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda p: p["fieldConfig"]["defaults"].pop("unit"), "no unit"),
        (lambda p: p.pop("description"), "no description"),
        (lambda p: p.update(targets=[]), "no targets"),
        (lambda p: p["targets"][0].update(expr="rate(node_cpu_seconds_total[5m])"), "rate() over [5m]"),
        (lambda p: p["targets"][0].update(expr="node_cpu_seconds_total"), "counter node_cpu_seconds_total"),
        (lambda p: p["targets"][0].update(datasource={"type": "prometheus", "uid": "abc"}), "target A does not use"),
    ],
)
def test_the_linter_reports_each_broken_rule(change, problem):
    dashboard = copy.deepcopy(committed()["fleet"])
    change(next(dashboard_lint.panels(dashboard)))
    assert any(problem in p for p in dashboard_lint.lint("fleet", dashboard)), dashboard_lint.lint("fleet", dashboard)


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_every_panel_query_parses_once_variables_are_substituted():
    exprs = [
        (f"{name}: {title}", dashboard_lint.substitute(expr, {execution.VARIABLE: EXECUTION}))
        for name, d in committed().items()
        for title, expr in dashboard_lint.queries(d)
    ]
    assert len(exprs) > 40
    assert all("$" not in e for _, e in exprs)
    assert dashboard_lint.promql_problems(exprs) == []
    broken = dashboard_lint.promql_problems([("broken", f"sum by (execution_id ({catalog.EXECUTION_GPU_COUNT.name})")])
    assert len(broken) == 1 and broken[0].startswith("broken: ")


def test_dashboards_read_recorded_series_only():
    recorded = {s.name for s in catalog.ALL_SERIES}
    functions = {"sum", "avg", "max", "min", "count", "topk", "by", "on", "group_left", "and", "group"}
    for name, d in committed().items():
        for title, expr in dashboard_lint.queries(d):
            names = set(re.findall(r"\b[a-z_]+:[a-z_:]+\b", expr))
            assert names and names <= recorded, (name, title, names - recorded)
            bare = {w for w in re.findall(r"(?<![:\w])([a-zA-Z_][a-zA-Z0-9_]*)\s*\{", expr)} - functions
            assert not bare, (name, title, bare)  # no raw exporter metric


def test_thresholds_drawn_on_panels_come_from_the_alert_config():
    cfg = config_from_mapping({"alerts": {"gpu_memory_high": {"threshold": 0.9}}})
    dashboard = json.loads(DASHBOARDS["execution"](cfg))
    panel = next(p for p in dashboard_lint.panels(dashboard) if p["title"] == "GPU memory used")
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps == [{"color": "green", "value": None}, {"color": "red", "value": 0.9}]


def test_every_served_series_is_plotted_on_the_execution_dashboard_in_its_unit():
    dashboard = committed()["execution"]
    exprs = {expr: p for p in dashboard_lint.panels(dashboard) for expr in (t["expr"] for t in p["targets"])}
    for series in catalog.API_SERIES:
        panel = exprs[promql.render(execution.selected(series))]
        assert panel["fieldConfig"]["defaults"]["unit"] == execution.unit_of(series) != "none", series.name


def test_a_new_served_series_gets_a_panel_with_its_unit_and_legend_by_itself(monkeypatch: pytest.MonkeyPatch):
    fan = dataclasses.replace(
        catalog.GPU_TEMPERATURE,
        name="execution_gpu:gpu_fan_speed_ratio",
        unit="ratio",
        doc="Fan speed, 0-1.",
        api_name="gpuFanSpeedPercent",
        api_unit="percent",
        panel="Fan speed",
    )
    swap = dataclasses.replace(
        catalog.NODE_RAM_USED, name="execution_node:system_swap_used_bytes", doc="Swap in use. Per host.", api_name="x"
    )
    monkeypatch.setattr(catalog, "API_SERIES", (*catalog.API_SERIES, fan, swap))
    dashboard = json.loads(DASHBOARDS["execution"](Config()))
    assert [p["title"] for p in dashboard["panels"] if p["type"] == "row"][-1] == execution.OTHER_ROW
    panels = {p["title"]: p for p in dashboard_lint.panels(dashboard)}
    for title, series, unit, legend in (
        ("Fan speed", fan, "percentunit", execution.GPU_LEGEND),  # titled by its panel hint
        ("Swap in use", swap, "bytes", execution.HOST_LEGEND),  # else by its doc's first sentence
    ):
        [target] = panels[title]["targets"]
        assert target["expr"] == promql.render(execution.selected(series))
        assert target["legendFormat"] == legend and panels[title]["fieldConfig"]["defaults"]["unit"] == unit
        assert panels[title]["description"] == series.doc
    assert dashboard_lint.lint("execution", dashboard) == []


def test_a_panel_of_series_in_different_units_is_refused():
    mixed = execution.Plot("Power and clock", "Not one unit.", (("", catalog.GPU_POWER), ("", catalog.GPU_SM_CLOCK)))
    with pytest.raises(ValueError, match="different units"):
        mixed.panel(Config().alerts)


def test_rate_intervals_in_dashboards_use_the_rate_interval_variable():
    for d in committed().values():
        for _, expr in dashboard_lint.queries(d):
            for window in re.findall(r"\brate\([^\[]*\[([^\]]+)\]", expr):
                assert window == "$__rate_interval"


# --- Deployment wrappers --------------------------------------------------------------------


def test_prometheusrule_objects_wrap_the_committed_rule_files():
    for path in sorted((REPO / "rules").glob("*.rules.yml")):
        name = path.name.removesuffix(".rules.yml")
        obj = yaml.safe_load((REPO / "rules/kubernetes" / f"{name}.prometheusrule.yaml").read_text())
        assert obj["apiVersion"] == "monitoring.coreos.com/v1" and obj["kind"] == "PrometheusRule"
        assert obj["metadata"]["namespace"] == "monitoring"
        assert obj["metadata"]["labels"] == {"release": "kube-prometheus-stack"}
        assert obj["spec"] == yaml.safe_load(path.read_text())


def test_configmaps_wrap_the_committed_dashboards_for_the_grafana_sidecar():
    for name in DASHBOARDS:
        obj = yaml.safe_load((REPO / "dashboards/kubernetes" / f"{name}.configmap.yaml").read_text())
        assert obj["kind"] == "ConfigMap" and obj["metadata"]["labels"] == {"grafana_dashboard": "1"}
        assert obj["data"] == {f"{name}.json": (REPO / "dashboards" / f"{name}.json").read_text()}


def test_namespace_and_labels_of_kubernetes_objects_come_from_the_config(tmp_path: Path):
    cfg = config_from_mapping({"kubernetes": {"namespace": "gpu", "rule_labels": {"release": "prom", "team": "ml"}}})
    objs = kubernetes_rules(cfg, rule_files(cfg, tmp_path), tmp_path)
    meta = yaml.safe_load(next(iter(objs.values())))["metadata"]
    assert meta["namespace"] == "gpu" and meta["labels"] == {"release": "prom", "team": "ml"}


def test_grafana_provisioning_files():
    provider = yaml.safe_load((REPO / "dashboards/provisioning/dashboards.yml").read_text())
    assert provider["apiVersion"] == 1
    [p] = provider["providers"]
    assert p["type"] == "file" and p["options"]["path"] and p["folder"] == "GPU executions"
    datasources = yaml.safe_load((REPO / "dashboards/provisioning/datasources.yml").read_text())
    [ds] = datasources["datasources"]
    assert ds["type"] == "prometheus" and ds["url"] == "http://prometheus:9090"
    assert ds["name"] == committed()["execution"]["templating"]["list"][0]["current"]["value"]


# --- End to end against a real Prometheus -------------------------------------------------


def test_backfill_rounds_follow_the_rules_dependencies():
    rounds = [{r.record for r in rules} for rules in dependency_rounds(all_groups(Config()))]
    first = next(i for i, r in enumerate(rounds) if catalog.GPU_UTILIZATION.name in r)
    later = next(i for i, r in enumerate(rounds) if catalog.NODE_GPU_COUNT.name in r)
    last = next(i for i, r in enumerate(rounds) if catalog.NODE_RAM_UTILIZATION.name in r)
    hosts = next(i for i, r in enumerate(rounds) if catalog.GPU_EXPORTER_HOST.name in r)
    assert hosts < first < later < last


def panel_queries(cfg: Config, window: str) -> list[tuple[str, str, str]]:
    """(dashboard, panel, PromQL as Grafana would send it over the scenario's window) of every target."""
    out = []
    for path, text in dashboard_json(cfg).items():
        for title, expr in dashboard_lint.queries(json.loads(text)):
            sent = dashboard_lint.substitute(expr.replace("$__range", window), {execution.VARIABLE: EXECUTION})
            out.append((path.stem, title, sent))
    return out


def empty_queries(server: Prometheus, queries: list[tuple[str, str, str]], start: int, end: int) -> list[str]:
    return [f"{d}: {t}: {q}" for d, t, q in queries if not server.query_range(q, start, end)]


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_every_panel_query_returns_data_from_a_real_prometheus(prometheus):
    server, start, end, window = prometheus
    queries = panel_queries(Config(), window)
    assert len(queries) > 40
    assert empty_queries(server, queries, start, end) == []


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_a_metric_name_typo_in_a_panel_fails_the_end_to_end_check(prometheus):
    server, start, end, window = prometheus
    queries = panel_queries(Config(), window)
    typo = [(d, t, q.replace(catalog.GPU_POWER.name, catalog.GPU_POWER.name[:-1])) for d, t, q in queries]
    assert [e for e in empty_queries(server, typo, start, end) if "Power against power limit" in e]


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_execution_overview_reports_the_scenarios_truth(prometheus):
    server, _, end, window = prometheus
    by_title = {t: q for d, t, q in panel_queries(Config(), window) if d == "execution"}

    def last(title: str) -> float:
        [series] = server.query_range(by_title[title], end, end)
        return float(series["values"][-1][1])

    assert last("GPUs") == 4
    assert last("Hosts") == 2
    # 4 GPUs for 40 minutes. Backfilled samples carry no stale markers, so the series linger for
    # Prometheus' 5-minute lookback after the job ends: up to 4 GPUs x 45 minutes.
    assert 4 * 40 / 60 <= last("GPU-hours billed") <= 4 * 45 / 60
    # Work per GPU-hour billed: the panel divides one by the other, nothing more (it once divided by 3600 too).
    assert last("Efficiency") == pytest.approx(last("GPU-hours of work") / last("GPU-hours billed"))
    assert 0.3 < last("Efficiency") < 1
    assert last("Cost (USD)") == pytest.approx(last("GPU-hours billed") * 3.0)  # H100 at the configured price


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_count_panels_answer_zero_not_no_data_on_a_fleet_with_nothing_to_count(prometheus):
    """Hours before the scenario nothing runs, throttles or risks OOM: counts read 0, not "No data"."""
    server, start, _, window = prometheus
    counts = ("Executions", "GPUs held", "Hosts")
    fleet = {t: q for d, t, q in panel_queries(Config(), window) if d == "fleet" and t in counts}
    assert set(fleet) == set(counts)
    throttling = [q for d, t, q in panel_queries(Config(), window) if d == "fleet" and t.startswith("GPUs throttling")]
    assert len(throttling) == 3
    for query in [*fleet.values(), *throttling]:
        result = server.query(query, start - 3 * 3600)
        assert [float(r["value"][1]) for r in result] == [0.0], query
