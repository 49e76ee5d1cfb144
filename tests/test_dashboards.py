"""Dashboards: Grafana's schemas, dashboard-linter's checks, PromQL syntax, deployment wrappers,
and every panel query answered by a real Prometheus holding scenario data."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import time
from pathlib import Path

import pytest
import yaml
from gpu_execution_pack import catalog, promql
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.dashboards import DASHBOARDS, dashboard_json, execution, house, queries
from gpu_execution_pack.dashboards import lint as dashboard_lint
from gpu_execution_pack.rules.files import all_groups, rule_files
from gpu_execution_pack.rules.kubernetes import kubernetes_rules
from gpu_execution_pack.scenario import library, model, oracle, render

from harness.prometheus import Prometheus, dependency_rounds

from .conftest import EXECUTION, REPO, run_promtool_test
from .report_oracle import merged
from .test_api_defects import SHARED_ID, two_tenants  # noqa: F401 (a fixture)

# The Execution dashboard's tenant, as Grafana picks it for the scenarios' executions (all in "research").
TENANT = {queries.TENANT_VARIABLE: "research"}


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
        (f"{name}: {title}", dashboard_lint.substitute(expr, {queries.VARIABLE: EXECUTION, **TENANT}))
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


def rows_of(dashboard: dict) -> dict[str, list[dict]]:
    """Row title -> the panels under it, in the dashboard's order."""
    rows: dict[str, list[dict]] = {}
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            rows[panel["title"]] = []
        else:
            rows[list(rows)[-1]].append(panel)
    return rows


def test_every_servable_series_is_plotted_in_the_row_its_catalog_entry_names_in_its_unit():
    # The default answer's series and those served on request (the activity series) alike.
    dashboard = committed()["execution"]
    assert set(catalog.GPU_ACTIVITY_SERIES) <= set(catalog.SERVABLE_SERIES)
    for row, row_panels in rows_of(dashboard).items():
        exprs = {expr: p for p in row_panels for expr in (t["expr"] for t in p["targets"])}
        for series in (s for s in catalog.SERVABLE_SERIES if s.row == row):
            expr = plotted(series)
            assert expr in exprs, f"{series.name}: not plotted in the row its catalog entry names, {row!r}"
            panel = exprs[expr]
            assert panel["fieldConfig"]["defaults"]["unit"] == execution.unit_of(series) != "none", series.name
    assert {s.row for s in catalog.SERVABLE_SERIES} <= set(rows_of(dashboard))


def plotted(series: catalog.Series) -> str:
    """``series`` of the Execution dashboard's execution as its panels read it: of the chosen tenant where the
    series carries the tenant."""
    return promql.render(queries.of_tenant(Config())(queries.selected(series)))


def execution_panels(cfg: Config | None = None) -> dict[str, dict]:
    """Title -> panel of the Execution dashboard (committed, or rendered for ``cfg``)."""
    dashboard = committed()["execution"] if cfg is None else json.loads(DASHBOARDS["execution"](cfg))
    return {p["title"]: p for p in dashboard_lint.panels(dashboard)}


def panel_of(panels: dict[str, dict], series: catalog.Series) -> dict:
    """The one panel plotting ``series`` of the dashboard's execution."""
    expr = plotted(series)
    [panel] = [p for p in panels.values() if expr in [t["expr"] for t in p["targets"]]]
    return panel


def test_engine_activity_is_plotted_with_utilisation_and_its_line_is_the_stalled_alerts():
    cfg = config_from_mapping({"alerts": {"gpu_stalled": {"engine_threshold": 0.15}}})
    panels = execution_panels(cfg)
    panel = panel_of(panels, catalog.GPU_UTILIZATION)
    assert panel is panel_of(panels, catalog.GPU_GRAPHICS_ENGINE_ACTIVE)  # "100 % util, 2 % engine" in one place
    assert [t["legendFormat"] for t in panel["targets"]] == [
        f"util {queries.GPU_LEGEND}",
        f"engine {queries.GPU_LEGEND}",
    ]
    assert panel["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]["value"] == 0.15
    assert panel["fieldConfig"]["defaults"]["unit"] == execution.unit_of(catalog.GPU_UTILIZATION)


def test_the_overview_shows_mean_engine_activity_right_of_mean_utilisation():
    panels = execution_panels()
    util, engine = panels["Mean utilisation"], panels["Mean engine activity"]
    assert engine["gridPos"]["y"] == util["gridPos"]["y"]
    assert engine["gridPos"]["x"] == util["gridPos"]["x"] + util["gridPos"]["w"]
    [target] = engine["targets"]
    mean = next(s for s in catalog.EXECUTION_ACTIVITY_SERIES if "graphics_engine" in s.name)
    assert mean.name in target["expr"] and catalog.EXECUTION_LABEL in target["expr"]
    assert engine["fieldConfig"]["defaults"]["unit"] == util["fieldConfig"]["defaults"]["unit"] == "percentunit"


def test_activity_panels_name_the_exporter_fields_they_need_when_empty():
    panels = execution_panels()
    # Engine activity shares the utilisation panel, which has data wherever the execution does.
    for series in set(catalog.GPU_ACTIVITY_SERIES) - {catalog.GPU_GRAPHICS_ENGINE_ACTIVE}:
        no_value = panel_of(panels, series)["fieldConfig"]["defaults"].get("noValue", "")
        fields = [raw.name for key in series.formulas[0].signals for raw in catalog.SIGNALS[key].raws]
        assert fields and all(f in no_value for f in fields), (series.name, no_value)
    # Fields every install collects keep Grafana's plain "No data".
    assert "noValue" not in panel_of(panels, catalog.GPU_MEMORY_USED)["fieldConfig"]["defaults"]


def test_the_stalled_figure_reads_the_stalled_condition_and_says_its_thresholds():
    cfg = config_from_mapping({"alerts": {"gpu_stalled": {"util_threshold": 0.7, "engine_threshold": 0.05}}})
    panel = execution_panels(cfg)["Stalled"]
    assert catalog.GPU_STALLED.name in panel["targets"][0]["expr"]
    assert "70%" in panel["description"] and "5%" in panel["description"]


def fleet_panels() -> dict[str, dict]:
    return {p["title"]: p for p in dashboard_lint.panels(committed()["fleet"])}


DISAGREEMENT = "GPUs by utilisation over engine activity"
SHARED_TABLE = "Executions on shared GPUs"


def test_the_fleet_ranks_gpus_by_utilisation_over_engine_activity():
    panel = fleet_panels()[DISAGREEMENT]
    assert panel["type"] == "table"
    gap = panel["targets"][0]["expr"]
    assert gap.startswith("topk(")
    assert catalog.GPU_UTILIZATION.name in gap and catalog.GPU_GRAPHICS_ENGINE_ACTIVE.name in gap
    # Every other column keeps the ranked rows only, so the table has no half-empty rows.
    assert all(gap in t["expr"] for t in panel["targets"][1:])
    assert catalog.GPU_STALLED.name in panel["targets"][3]["expr"]
    assert panel["options"]["sortBy"] == [{"displayName": "Gap (points)", "desc": True}]
    assert f"var-{queries.VARIABLE}=" in panel["fieldConfig"]["defaults"]["links"][0]["url"]


def test_the_fleet_lists_shared_gpus():
    panels = fleet_panels()
    table, count = panels[SHARED_TABLE], panels["GPUs shared"]
    assert all(catalog.GPU_SHARE.name in t["expr"] for t in [*table["targets"], *count["targets"]])
    assert all(" < 1" in t["expr"] for t in table["targets"])
    assert "1/N" in table["description"] and "1/N" in count["description"]


def test_fleet_counts_of_gpus_take_each_shared_gpu_once():
    panels = fleet_panels()
    for title in ("GPUs held", "Fleet utilisation", "Utilisation by GPU model"):
        [target] = panels[title]["targets"]
        by_device = f"by ({', '.join(catalog.DEVICE_LABELS)}"
        assert by_device in target["expr"], (title, target["expr"])


def test_cost_tables_count_a_shared_gpu_once_and_say_how():
    # GPU-hours are read from the share-weighted series, energy from the attributed power.
    assert catalog.GPU_SHARE.name in catalog.MODEL_GPU_COUNT.formulas[0].expr.metric_names()
    assert catalog.GPU_WORKED.name in catalog.MODEL_GPU_UTILIZATION_SUM.formulas[0].expr.metric_names()
    tables = [p for p in dashboard_lint.panels(committed()["cost"]) if p["type"] == "table"]
    assert len(tables) == 2
    for table in tables:
        billed, work, *_, energy = (t["expr"] for t in table["targets"])
        assert catalog.MODEL_GPU_COUNT.name in billed and catalog.MODEL_GPU_UTILIZATION_SUM.name in work
        assert catalog.GPU_POWER_ATTRIBUTED.name in energy
        assert "1/N" in table["description"]
    assert all(
        catalog.GPU_POWER_ATTRIBUTED.name in expr
        for d in committed().values()
        for _, expr in dashboard_lint.queries(d)
        if catalog.GPU_POWER.name + "[" in expr  # an energy figure
    )


def test_a_series_added_to_the_catalog_gets_a_panel_in_the_row_it_names(monkeypatch: pytest.MonkeyPatch):
    """A served series is shown by its catalog entry alone: no edit of the dashboards."""
    fan = dataclasses.replace(
        catalog.GPU_TEMPERATURE,
        name="execution_gpu:gpu_fan_speed_ratio",
        unit="ratio",
        doc="Fan speed, 0-1. Per GPU.",
        api_name="gpuFanSpeedPercent",
        api_unit="percent",
        row="Power and temperature",
    )
    swap = dataclasses.replace(
        catalog.NODE_RAM_USED,
        name="execution_node:system_swap_used_bytes",
        doc="Swap in use. Per host.",
        api_name="x",
        row="Swap",
    )
    monkeypatch.setattr(catalog, "SERVABLE_SERIES", (*catalog.SERVABLE_SERIES, fan, swap))
    dashboard = json.loads(DASHBOARDS["execution"](Config()))
    rows = rows_of(dashboard)
    before = rows_of(committed()["execution"])
    assert list(rows) == [*before, "Swap"]  # a row the dashboard does not lay out comes last
    assert [p["title"] for p in rows["Power and temperature"]] == [
        *(p["title"] for p in before["Power and temperature"]),
        "Fan speed, 0-1",  # at the end of the row it names, titled by its doc's first sentence
    ]
    assert [p["title"] for p in rows["Swap"]] == ["Swap in use"]
    panels = {p["title"]: p for p in dashboard_lint.panels(dashboard)}
    for title, series, unit, legend in (
        ("Fan speed, 0-1", fan, "percentunit", queries.GPU_LEGEND),
        ("Swap in use", swap, "bytes", queries.HOST_LEGEND),
    ):
        [target] = panels[title]["targets"]
        assert target["expr"] == plotted(series)
        assert target["legendFormat"] == legend and panels[title]["fieldConfig"]["defaults"]["unit"] == unit
        assert panels[title]["description"] == series.doc
    assert dashboard_lint.lint("execution", dashboard) == []


def test_a_served_series_that_names_no_row_is_refused(monkeypatch: pytest.MonkeyPatch):
    rowless = dataclasses.replace(catalog.GPU_TEMPERATURE, name="execution_gpu:gpu_fan_speed_ratio", row="")
    monkeypatch.setattr(catalog, "SERVABLE_SERIES", (*catalog.SERVABLE_SERIES, rowless))
    with pytest.raises(ValueError, match=r"gpu_fan_speed_ratio: a served series names its .*row \(Series.row\)"):
        DASHBOARDS["execution"](Config())


def test_a_panel_of_series_in_different_units_is_refused():
    mixed = execution.Plot("Power and clock", "Not one unit.", (("", catalog.GPU_POWER), ("", catalog.GPU_SM_CLOCK)))
    with pytest.raises(ValueError, match="different units"):
        mixed.panel(Config())


def test_rate_intervals_in_dashboards_use_the_rate_interval_variable():
    for d in committed().values():
        for _, expr in dashboard_lint.queries(d):
            for window in re.findall(r"\brate\([^\[]*\[([^\]]+)\]", expr):
                assert window == "$__rate_interval"


# --- Clusters (cluster_label) -----------------------------------------------------------------

CLUSTERED = {"cluster_label": "k8s_cluster"}  # a label not named like the variable: the two must not be confused
# `name{matchers}` or a bare `name` of a recorded series (they all hold a colon), read from the printed query.
SELECTOR = re.compile(r'(?<![\w:$])([a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_:]*)(\{(?:[^}"]|"(?:[^"\\]|\\.)*")*\})?')


def clustered() -> dict[str, dict]:
    cfg = config_from_mapping(CLUSTERED)
    return {name: json.loads(render(cfg)) for name, render in DASHBOARDS.items()}


def test_the_execution_dashboard_reads_the_chosen_tenants_series_and_hosts():
    """Kubernetes Job names repeat across namespaces: the rollups keep the tenant, so the dashboard's figures are
    of one tenant's execution (``$tenant``, the tenants of ``$execution_id``). Host series carry no tenant: each is
    kept to the hosts of the tenant's GPUs."""
    board = json.loads(execution.render(Config()))
    names = [v["name"] for v in board["templating"]["list"]]
    assert names == [house.DATASOURCE_VARIABLE, queries.VARIABLE, queries.TENANT_VARIABLE]
    [tenant] = [v for v in board["templating"]["list"] if v["name"] == queries.TENANT_VARIABLE]
    counted = catalog.EXECUTION_GPU_COUNT.name
    assert tenant["query"] == f'label_values({counted}{{execution_id="$execution_id"}}, namespace)'
    for title, expr in dashboard_lint.queries(board):
        for metric, matchers in re.findall(r"([a-z_:]+)\{([^}]*)\}", expr):
            if 'execution_id="$execution_id"' not in matchers or metric == catalog.ALERTS_METRIC:
                continue
            carries = metric.startswith(("execution:", "execution_gpu:", "execution_model:"))
            assert ('namespace="$tenant"' in matchers) == carries, (title, metric, matchers)
            if metric.startswith("execution_node:"):
                hosts = r"and on \(execution_id, hostname\) group by \(execution_id, hostname\) \(\s*"
                tenants = f'{catalog.GPU_PRESENCE.name}{{execution_id="$execution_id", namespace="$tenant"}}'
                assert re.search(re.escape(metric) + r"\{[^}]*\} " + hosts + re.escape(tenants), expr), (title, expr)


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_the_execution_dashboard_counts_the_chosen_tenants_gpus_of_an_id_two_tenants_hold(two_tenants):  # noqa: F811
    """research holds the id on one GPU, physics on two: the GPUs figure is each one's, not the larger of the two
    (the rollups are per tenant) nor their sum."""
    by_title = {t: q for t, q in dashboard_lint.queries(json.loads(execution.render(Config())))}
    gpus = by_title["GPUs"].replace("$__range", "2h")
    for tenant, count in (("research", 1), ("physics", 2)):
        sent = dashboard_lint.substitute(gpus, {queries.VARIABLE: SHARED_ID, queries.TENANT_VARIABLE: tenant})
        [result] = two_tenants.query(sent, time.time())
        assert float(result["value"][1]) == count, (tenant, sent)


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_the_execution_dashboard_plots_the_chosen_tenants_hosts_of_an_id_two_tenants_hold(two_tenants):  # noqa: F811
    """research's Job is on host ha, physics' of the same name on hb: the host panels plotted both hosts for either
    tenant (host series carry no tenant). Each tenant's are its own GPUs' hosts now."""
    board = json.loads(execution.render(Config()))
    host_panels = [(t, q) for t, q in dashboard_lint.queries(board) if t in ("Host CPU", "Host RAM")]
    assert len(host_panels) == 3, host_panels  # CPU; RAM used and total
    start, end = two_tenants_window(two_tenants)
    for tenant, host in (("research", "ha"), ("physics", "hb")):
        for title, expr in host_panels:
            sent = dashboard_lint.substitute(expr, {queries.VARIABLE: SHARED_ID, queries.TENANT_VARIABLE: tenant})
            plotted = {r["metric"]["hostname"] for r in two_tenants.query_range(sent, start, end)}
            assert plotted == {host}, (tenant, title, plotted, sent)


def two_tenants_window(server) -> tuple[int, int]:
    """The span of ``two_tenants``' data: its GPU series' first and last minute."""
    [found] = server.query(f"count(last_over_time({catalog.GPU_PRESENCE.name}[1d]))", time.time())
    assert float(found["value"][1]) == 3
    [first] = server.query(f"min(min_over_time(timestamp({catalog.GPU_PRESENCE.name})[1d:1m]))", time.time())
    [last] = server.query(f"max(timestamp(last_over_time({catalog.GPU_PRESENCE.name}[1d])))", time.time())
    return int(float(first["value"][1])), int(float(last["value"][1]))


def test_with_a_cluster_label_every_dashboard_chooses_a_cluster_before_anything_else():
    for name, d in clustered().items():
        variables = d["templating"]["list"]
        # The data source comes first: the cluster variable's query is sent to it.
        assert [v["name"] for v in variables[:2]] == [house.DATASOURCE_VARIABLE, "cluster"], name
        cluster = variables[1]
        assert cluster["type"] == "query" and cluster["multi"] is False and cluster["includeAll"] is False
        assert re.fullmatch(r"label_values\([a-z_:]+, k8s_cluster\)", cluster["query"]), cluster["query"]
        for other in variables[2:]:
            assert 'k8s_cluster="$cluster"' in other["query"], (name, other["query"])
    execution_id, tenant = clustered()["execution"]["templating"]["list"][2:]
    assert (execution_id["name"], tenant["name"]) == (queries.VARIABLE, queries.TENANT_VARIABLE)


def test_with_a_cluster_label_every_recorded_series_a_panel_reads_is_of_the_chosen_cluster():
    read = 0
    for name, d in clustered().items():
        exprs = [(title, expr) for title, expr in dashboard_lint.queries(d)]
        exprs += [("annotation " + a["name"], a["expr"]) for a in d["annotations"]["list"] if "expr" in a]
        for title, expr in exprs:
            selectors = SELECTOR.findall(expr)
            assert len(selectors) == len(re.findall(r"\b[a-z_]+:[a-z_:]+\b", expr)), (name, title)  # none missed
            for metric, matchers in selectors:
                read += 1
                if metric == catalog.PRICE.name:  # one price list for every cluster
                    assert "k8s_cluster" not in matchers, (name, title, expr)
                else:
                    assert 'k8s_cluster="$cluster"' in matchers, (name, title, metric, expr)
            if "ALERTS" in expr:
                assert re.search(r'\bALERTS\{[^}]*k8s_cluster="\$cluster"', expr), expr
    assert read >= 100


def links(dashboard: dict) -> list[str]:
    """The URLs of the dashboard's data links."""
    defaults = [p.get("fieldConfig", {}).get("defaults", {}) for p in dashboard_lint.panels(dashboard)]
    return [link["url"] for d in defaults for link in d.get("links", [])]


def test_with_a_cluster_label_fleet_and_cost_rows_open_the_execution_in_its_cluster():
    urls = [url for d in clustered().values() for url in links(d)]
    assert len(urls) >= 4
    assert all("var-cluster=${cluster}" in url for url in urls), urls
    assert not any("var-cluster" in url for d in committed().values() for url in links(d))


def test_with_a_cluster_label_the_dashboards_pass_the_linter_and_the_sdk_model():
    for name, d in clustered().items():
        assert dashboard_lint.lint(name, d) == []
        assert dashboard_lint.model_problems(name, d) == []


def test_without_a_cluster_label_no_dashboard_has_a_cluster_variable_or_matcher():
    for name, d in committed().items():
        assert "cluster" not in [v["name"] for v in d["templating"]["list"]], name
        assert all("$cluster" not in expr for _, expr in dashboard_lint.queries(d)), name
    assert {path.stem: json.loads(text) for path, text in dashboard_json(Config()).items()} == committed()


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


def panel_queries(cfg: Config, window: str, cluster: str = "") -> list[tuple[str, str, str]]:
    """(dashboard, panel, PromQL as Grafana would send it over the scenario's window, in ``cluster`` where
    given) of every target."""
    variables = {queries.VARIABLE: EXECUTION, **TENANT, **({"cluster": cluster} if cluster else {})}
    out = []
    for path, text in dashboard_json(cfg).items():
        for title, expr in dashboard_lint.queries(json.loads(text)):
            sent = dashboard_lint.substitute(expr.replace("$__range", window), variables)
            out.append((path.stem, title, sent))
    return out


def empty_queries(server: Prometheus, queries: list[tuple[str, str, str]], start: int, end: int) -> list[str]:
    return [f"{d}: {t}: {q}" for d, t, q in queries if not server.query_range(q, start, end)]


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_every_panel_query_returns_data_from_a_real_prometheus(prometheus):
    """Except, answering no data rather than an error, the panels of fields neither dcgm-exporter's defaults nor
    the README's custom counters collect (the training scenario's exporters do not) and the table of shared
    GPUs (it shares none)."""
    server, start, end, window = prometheus
    queries = panel_queries(Config(), window)
    assert len(queries) > 40
    not_default = {
        s.name
        for s in catalog.ALL_SERIES
        if s.formulas
        and all(f.signals for f in s.formulas)
        and all(
            not raw.default_collected and k not in oracle.CUSTOM_COUNTERS
            for f in s.formulas
            for k in f.signals
            for raw in catalog.SIGNALS[k].raws
        )
    }
    assert catalog.GPU_SM_ACTIVE.name in not_default and catalog.GPU_TENSOR_ACTIVE.name not in not_default
    training = library.training_in("4.8")
    gpus = training.all_gpus()
    assert all(len(model.holders(training, g, m)) <= 1 for g in gpus for m in model.grid(0, training.window_minutes))
    expected = [
        f"{d}: {t}: {q}"
        for d, t, q in queries
        if set(re.findall(r"\b[a-z_]+:[a-z_:]+\b", q)) <= not_default or t == SHARED_TABLE
    ]
    assert {e.split(": ")[1] for e in expected} == {"SM activity and occupancy", SHARED_TABLE}
    assert empty_queries(server, queries, start, end) == expected


def other_cluster() -> model.Scenario:
    """The training's first execution id again, in another cluster whose hosts have the training's names: on
    two GPUs, busier and for less time, so any of its series read with the first cluster's changes an answer."""
    e = model.Execution(EXECUTION, (model.Gpu("h1", 0), model.Gpu("h2", 1)), ("compute", "throttled"))
    return model.Scenario("the training's id in another cluster", "", (model.Host("h1"), model.Host("h2")), (e,))


@pytest.fixture(scope="module")
def two_clusters(prometheus, tmp_path_factory: pytest.TempPathFactory):
    """A real Prometheus holding the training scenario as cluster "a" and ``other_cluster`` as "b", each
    series labelled with its cluster, over the window of ``prometheus`` (the training alone, no cluster)."""
    _, start, end, _ = prometheus
    cfg = config_from_mapping({"cluster_label": "cluster"})
    # The renderer puts each scenario's cluster on every raw series, as its Prometheus' external label would.
    clusters = (
        dataclasses.replace(library.training_in("4.8"), cluster="a"),
        dataclasses.replace(other_cluster(), cluster="b"),
    )
    series = [s for scenario in clusters for s in render.Renderer(scenario, cfg).all_series()]
    server = Prometheus(tmp_path_factory.mktemp("prometheus-clusters"))
    try:
        server.load(series, all_groups(cfg), start, end)
        yield server, cfg
    finally:
        server.stop()


def answers(result: list[dict], cluster: str) -> dict[frozenset, list[tuple[float, float]]]:
    """Each series' points keyed by its labels but the cluster's, which, where a series has it, is ``cluster``."""
    assert {r["metric"].get("cluster", cluster) for r in result} <= {cluster}, result
    out = {}
    for r in result:
        labels = frozenset((k, v) for k, v in r["metric"].items() if k != "cluster")
        out[labels] = [(t, float(v)) for t, v in r["values"]]
    return out


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_with_a_cluster_label_every_panel_answers_for_the_chosen_cluster_alone(prometheus, two_clusters):
    """Two clusters hold execution train-0001 on hosts of the same names: each panel's answer for cluster a
    is its answer where the training is alone, and cluster b's GPUs are b's own."""
    alone, start, end, window = prometheus
    server, cfg = two_clusters
    single = panel_queries(Config(), window)
    in_a = panel_queries(cfg, window, "a")
    assert [(d, t) for d, t, _ in in_a] == [(d, t) for d, t, _ in single] and len(single) > 40
    for (d, t, want), (_, _, got) in zip(single, in_a, strict=True):
        expected = answers(alone.query_range(want, start, end), "a")
        actual = answers(server.query_range(got, start, end), "a")
        assert actual.keys() == expected.keys(), (d, t, got)
        for labels, points in expected.items():
            assert [p[0] for p in actual[labels]] == [p[0] for p in points], (d, t, labels)
            assert [p[1] for p in actual[labels]] == pytest.approx([p[1] for p in points], rel=1e-9), (d, t, got)
    gpus = {c: dict(((d, t), q) for d, t, q in panel_queries(cfg, window, c))[("execution", "GPUs")] for c in "ab"}
    assert [max(v for _, v in p) for p in answers(server.query_range(gpus["b"], start, end), "b").values()] == [2]
    assert [max(v for _, v in p) for p in answers(server.query_range(gpus["a"], start, end), "a").values()] == [4]


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


# --- End to end: work truth and shared GPUs ---------------------------------------------------
# Oracles are computed from the scenario model (oracle.gpu_truth, model.holders), not from the rules.
# Backfilled series carry no stale markers, so an execution's series read their last value for
# Prometheus' 5-minute lookback after it ends, and each round of recorded series read from the one
# before lingers again: a mean over the range lies between the model's mean over the run and its last
# value, and durations are read at the execution's end, give or take a sample.


def work_scenario() -> model.Scenario:
    """A hung collective beside a healthy job, a time-sliced pair, and an FP32 job with the SM fields."""
    return merged("work truth", [library.hung_collective(), library.time_sliced(), library.fp32_job()])


@pytest.fixture(scope="module")
def work_prometheus(tmp_path_factory: pytest.TempPathFactory):
    """A real Prometheus holding ``work_scenario`` (raw and recorded series), ended 15 minutes ago."""
    scenario = work_scenario()
    end = int(time.time()) // 60 * 60 - 15 * 60
    server = Prometheus(tmp_path_factory.mktemp("prometheus-work"))
    try:
        start = server.load_scenario(scenario, Config(), end)
        yield server, start, end, f"{scenario.window_minutes}m"
    finally:
        server.stop()


def sent(dashboard: str, title: str, window: str, execution_id: str = EXECUTION) -> list[str]:
    """The queries of panel ``title``, as Grafana sends them over ``window`` for ``execution_id``."""
    panels = {p["title"]: p for p in dashboard_lint.panels(json.loads(DASHBOARDS[dashboard](Config())))}
    return [
        dashboard_lint.substitute(t["expr"].replace("$__range", window), {queries.VARIABLE: execution_id, **TENANT})
        for t in panels[title]["targets"]
    ]


def at_end(server: Prometheus, expr: str, end: int) -> dict[tuple[str, str, str], float]:
    """(execution, host, GPU index) -> value of an instant query's result at ``end``."""
    out = {}
    for r in server.query(expr, end):
        m = r["metric"]
        out[(m[catalog.EXECUTION_LABEL], m[catalog.HOST_LABEL], m[catalog.GPU_INDEX_LABEL])] = float(r["value"][1])
    return out


def running(e: model.Execution) -> list[float]:
    return [m for m in model.grid(e.start_minute, e.end_minute) if e.phase_at(m) is not None]


def truth_range(scenario: model.Scenario, e: model.Execution, gpu: model.Gpu, value) -> tuple[float, float]:
    """(mean over the run, last value) of ``value(truth)`` for one GPU of ``e``; None values are left out."""
    values = [value(t) for t in (oracle.gpu_truth(scenario, e, gpu, m) for m in running(e)) if t is not None]
    values = [v for v in values if v is not None]
    return sum(values) / len(values), values[-1]


def between(value: float, bounds: tuple[float, float], slack: float) -> bool:
    return min(bounds) - slack <= value <= max(bounds) + slack


def minute(start: int, minutes: float) -> int:
    """Unix time ``minutes`` into the scenario."""
    return start + int(minutes * 60)


def stalled_minutes(scenario: model.Scenario, e: model.Execution, gpu: model.Gpu) -> float:
    """Minutes the model has the GPU at or over the stalled alert's utilisation and under its engine threshold."""
    stall = Config().alerts.gpu_stalled
    truths = [oracle.gpu_truth(scenario, e, gpu, m) for m in running(e)]
    return (
        model.STEP_SECONDS
        / 60
        * sum(
            t[catalog.GPU_UTILIZATION] >= stall.util_threshold
            and t.get(catalog.GPU_GRAPHICS_ENGINE_ACTIVE, 1) < stall.engine_threshold
            for t in truths
            if t is not None
        )
    )


def gap_points(truth: dict) -> float | None:
    """Utilisation over engine activity in percentage points, where the engine activity is published."""
    engine = truth.get(catalog.GPU_GRAPHICS_ENGINE_ACTIVE)
    return None if engine is None else 100 * (truth[catalog.GPU_UTILIZATION] - engine)


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_the_disagreement_table_ranks_the_hung_collectives_gpus_first(work_prometheus):
    server, start, end, window = work_prometheus
    scenario = work_scenario()
    oracle = {
        (e.id, g.host, str(g.index)): truth_range(scenario, e, g, gap_points)
        for e in scenario.executions
        for g in e.gpus
    }
    ranked_truth = sorted(oracle, key=lambda k: -oracle[k][0])
    hung = {k for k in oracle if k[0] == "hung-0024"}
    assert set(ranked_truth[:2]) == hung  # the scenario is what the test says it is

    gap, util, engine, stalled = (at_end(server, q, end) for q in sent("fleet", DISAGREEMENT, window))
    ranked = sorted(gap, key=lambda k: -gap[k])
    assert set(ranked[:2]) == hung, ranked
    assert set(gap) == set(util) == set(engine) == set(stalled) == set(oracle)  # 6 GPUs, all under the topk
    for key, value in gap.items():
        assert between(value, oracle[key], 0.5), (key, value, oracle[key])
        assert util[key] - engine[key] == pytest.approx(value)
    # The hung phase (util 98 %, engine 2 %) meets the stalled condition; no other GPU's load does.
    assert {k: v for k, v in stalled.items() if v}.keys() == hung
    [e] = [e for e in scenario.executions if e.id == "hung-0024"]
    stalled_by_its_end = at_end(server, sent("fleet", DISAGREEMENT, window)[3], minute(start, e.end_minute))
    truth = {k: stalled_minutes(scenario, e, g) for g in e.gpus for k in [(e.id, g.host, str(g.index))]}
    assert set(truth.values()) == {30}
    for key in hung:
        assert truth[key] - 1 <= stalled_by_its_end[key] <= truth[key] + 1, key


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_the_shared_gpu_table_lists_the_time_sliced_pair_and_nothing_else(work_prometheus):
    server, start, end, window = work_prometheus
    scenario = work_scenario()
    most_holders = {
        (e.id, g.host, str(g.index)): max(len(model.holders(scenario, g, m)) for m in running(e))
        for e in scenario.executions
        for g in e.gpus
    }
    shared = {k: n for k, n in most_holders.items() if n > 1}
    assert {k[0] for k in shared} == {"slice-0029", "slice-0030"}

    # Read when the pair ends, so the minutes shared are theirs and not the series' lingering.
    pair = [e for e in scenario.executions if e.id in {k[0] for k in shared}]
    when = minute(start, max(e.end_minute for e in pair))
    lowest, minutes, billed = (at_end(server, q, when) for q in sent("fleet", SHARED_TABLE, window))
    assert lowest == {k: 1 / n for k, n in shared.items()}
    assert at_end(server, sent("fleet", SHARED_TABLE, window)[0], end) == lowest  # and at the end of the range
    assert set(minutes) == set(billed) == set(shared)
    for e in pair:
        together = len([m for m in running(e) if len(model.holders(scenario, e.gpus[0], m)) > 1])
        key = (e.id, e.gpus[0].host, str(e.gpus[0].index))
        assert together * model.STEP_SECONDS / 60 == 30
        assert 30 - 1 <= minutes[key] <= 30 + 1, (key, minutes[key])
        assert billed[key] == pytest.approx(minutes[key] / 60 * lowest[key], abs=1 / 60)
    [count] = sent("fleet", "GPUs shared", window)
    devices = {(h, i) for _, h, i in shared}
    assert [float(r["value"][1]) for r in server.query(count, end)] == [len(devices)]


# Two executions time-slicing each GPU of the test below, 30 one-minute samples each from minute 1 (none at 0, so
# the 30-minute range holds the same 30 on Prometheus 2 and 3): each is billed half of each minute.
HALF, SHARED_MINUTES = 0.5, 30


def label_set(labels: dict[str, str]) -> str:
    """``labels`` as promtool's test files spell a series' labels; an empty value is no label."""
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if v) + "}"


@pytest.mark.usefixtures("promtool_available")
@pytest.mark.parametrize("cluster", ["", "eu-1"])
def test_the_shared_gpu_table_bills_an_instance_without_a_recorded_share_as_a_whole_gpu(tmp_path: Path, cluster: str):
    """Rules before 0.4.0 recorded no instance share (``catalog.GPU_INSTANCE_SHARE``): over that history, what
    the Prometheus of an upgraded fleet holds for weeks, the table's GPU-hours billed left a shared MIG instance
    out, though its rows are listed, and counted a range across the upgrade only from it on, where the Cost
    dashboard (the model rollups as they were recorded) and the report count it a whole GPU. An instance with a
    recorded share is billed in it."""
    gpus = {  # UUID -> (GPU_I_ID, GPU_I_PROFILE, its share of the GPU as the rules record it, or None)
        "GPU-whole": ("", "", None),
        "GPU-before-upgrade": ("1", "3g.40gb", None),
        "GPU-after-upgrade": ("2", "3g.40gb", 3 / 6),  # a 3g beside another 3g: three of six slices
    }
    later = f"_ {{}}x{SHARED_MINUTES - 1}"  # the samples from minute 1
    series, expected = [], []
    for uuid, (instance, profile, share) in gpus.items():
        device = {catalog.UUID_LABEL: uuid, catalog.MIG_INSTANCE_LABEL: instance, catalog.MIG_PROFILE_LABEL: profile}
        device |= {"cluster": cluster}  # every series, the recorded shares too, where the config names a cluster
        for holder in ("a", "b"):
            labels = {**device, "modelName": "NVIDIA H100 80GB HBM3", catalog.EXECUTION_LABEL: f"{uuid}-{holder}"}
            series.append({"series": catalog.GPU_SHARE.name + label_set(labels), "values": later.format(HALF)})
            # Half of each minute, of a whole GPU, or of the instance's share of it where the rules recorded one.
            hours = HALF * SHARED_MINUTES / 60 * (1 if share is None else share)
            expected.append({"labels": label_set(labels), "value": hours})
        if share is not None:
            own = catalog.GPU_INSTANCE_SHARE.name + label_set(device)
            series.append({"series": own, "values": later.format(share)})
    cfg = config_from_mapping({"cluster_label": "cluster"} if cluster else {})
    table = {p["title"]: p for p in dashboard_lint.panels(json.loads(DASHBOARDS["fleet"](cfg)))}[SHARED_TABLE]
    at = f"{SHARED_MINUTES}m"
    billed = table["targets"][-1]["expr"].replace("$__range", at)
    billed = dashboard_lint.substitute(billed, {queries.CLUSTER_VARIABLE: cluster})
    test = {"interval": "1m", "input_series": series}
    test["promql_expr_test"] = [{"expr": billed, "eval_time": at, "exp_samples": expected}]
    run_promtool_test(tmp_path, {}, [test])


def device_query(series: catalog.Series, host: str, figure) -> str:
    """``figure`` of each GPU on ``host`` read once, whoever holds it (a query of this test, not of a panel)."""
    held = promql.aggregate("group", catalog.DEVICE_LABELS, series.select(promql.match(catalog.HOST_LABEL, host)))
    return promql.render(figure(held))


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_the_cost_dashboard_bills_a_time_sliced_gpu_once(work_prometheus):
    server, start, _, window = work_prometheus
    scenario = work_scenario()
    pair = [e for e in scenario.executions if e.id.startswith("slice-")]
    [gpu] = {g for e in pair for g in e.gpus}
    end = minute(start, max(e.end_minute for e in pair))  # the pair's end: their hours, not the lingering
    billed, *_, energy = (
        {k: float(r["value"][1]) for r in server.query(q, end) for k in [r["metric"][catalog.EXECUTION_LABEL]]}
        for q in sent("cost", "GPU-hours and cost per execution", window)
    )
    # The GPU's own hours: a minute counts once whatever holds the GPU (the series, not the share).
    own = device_query(
        catalog.GPU_UTILIZATION,
        gpu.host,
        lambda held: promql.aggregate("sum", None, promql.call("sum_over_time", promql.Range(held, window, "1m"))) / 60,
    )
    [gpu_hours] = [float(r["value"][1]) for r in server.query(own, end)]
    held_minutes = len({m for e in pair for m in running(e)}) * model.STEP_SECONDS / 60
    assert held_minutes - 1 <= gpu_hours * 60 <= held_minutes + 1
    assert billed["slice-0029"] + billed["slice-0030"] == pytest.approx(gpu_hours)
    assert billed["slice-0029"] == pytest.approx(gpu_hours / 2)
    # Energy: the pair's halves add up to the GPU's counter's rise, which is the model's within 2 %.
    first, last = running(pair[0])[0], max(m for e in pair for m in running(e))
    joules = (oracle.energy_millijoules(scenario, gpu, last) - oracle.energy_millijoules(scenario, gpu, first)) / 1000
    assert energy["slice-0029"] == pytest.approx(energy["slice-0030"])
    assert (energy["slice-0029"] + energy["slice-0030"]) * queries.JOULES_PER_KWH == pytest.approx(joules, rel=0.02)


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_the_execution_overview_shows_a_hung_job_busy_but_not_working(work_prometheus):
    server, start, _, window = work_prometheus
    scenario = work_scenario()
    [hung] = [e for e in scenario.executions if e.id == "hung-0024"]
    end = minute(start, hung.end_minute)

    def figure(title: str) -> float:
        [query] = sent("execution", title, window, hung.id)
        [result] = server.query(query, end)
        return float(result["value"][1])

    def mean_over_gpus(series: catalog.Series) -> tuple[float, float]:
        ranges = [truth_range(scenario, hung, g, lambda t: t.get(series)) for g in hung.gpus]
        return sum(r[0] for r in ranges) / len(ranges), sum(r[1] for r in ranges) / len(ranges)

    assert between(figure("Mean utilisation"), mean_over_gpus(catalog.GPU_UTILIZATION), 0.005)
    assert between(figure("Mean engine activity"), mean_over_gpus(catalog.GPU_GRAPHICS_ENGINE_ACTIVE), 0.005)
    assert figure("Mean utilisation") > 0.7 > 0.3 > figure("Mean engine activity")
    stalled = max(stalled_minutes(scenario, hung, g) for g in hung.gpus)
    assert (stalled - 1) * 60 <= figure("Stalled") <= (stalled + 1) * 60


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_every_panel_query_returns_data_where_every_field_is_collected(work_prometheus):
    """fp32-0026's exporter collects the SM fields too: every panel has data for it."""
    server, start, end, window = work_prometheus
    queries = [(d, t, q.replace(EXECUTION, "fp32-0026")) for d, t, q in panel_queries(Config(), window)]
    assert empty_queries(server, queries, start, end) == []
