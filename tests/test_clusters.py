"""Several clusters in one store (a Mimir or Thanos ruler over all of them): ``cluster_label``.

With the label set, the scenario library must pass with it on every series, and two clusters whose
hosts, GPUs, pods and execution ids have the same names must never read each other's values.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from gpu_execution_pack import catalog, testsuites
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.rules.files import rule_files
from gpu_execution_pack.rules.groups import RuleGroup
from gpu_execution_pack.rules.routing import alertmanager_config
from gpu_execution_pack.scenario import library
from gpu_execution_pack.testsuites.recording import recording_suite

from .conftest import suite_failures

CLUSTERED = {"cluster_label": "cluster"}
# A by or on clause as the rule files print it, and the one table every cluster shares (prices).
CLAUSE = re.compile(r"\b(by|on) \(([^)]*)\)")
SHARED_TABLE = catalog.PRICE.name


def clauses(text: str) -> list[tuple[str, str]]:
    return CLAUSE.findall(text)


def test_every_by_and_on_clause_of_the_rules_names_the_cluster_but_the_price_lists():
    files = rule_files(config_from_mapping(CLUSTERED), Path("rules"))
    checked = 0
    for path, text in files.items():
        for rule in re.split(r"\n  - (?=record:|alert:)", text):
            if rule.startswith(f"record: {SHARED_TABLE}"):
                assert all("cluster" not in labels for _, labels in clauses(rule)), rule
                continue
            for kind, labels in clauses(rule.split("annotations:")[0]):
                checked += 1
                assert "cluster" in [x.strip() for x in labels.split(",")], f"{path}: {kind} ({labels}) in\n{rule}"
    assert checked > 100


def test_without_a_cluster_label_no_rule_names_one():
    for text in rule_files(Config(), Path("rules")).values():
        assert "cluster" not in text


@pytest.mark.single_version
@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_the_scenario_library_passes_with_a_cluster_label_on_every_series(tmp_path: Path):
    """The recording suite holds every scenario at once, each in a cluster of its own (``config_variants``)."""
    [variant] = testsuites.config_variants(config_from_mapping(CLUSTERED))
    assert len({s.cluster for s in variant.scenarios}) == len(variant.scenarios) > 20
    # Its AMD suite is the test command's clusters-amd (the same config).
    assert suite_failures([variant], tmp_path, amd=False) == ""


@pytest.mark.single_version
@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
@pytest.mark.parametrize("mode", ["mapping", "kubernetes"])
def test_each_attribution_mode_passes_with_a_cluster_label(tmp_path: Path, mode: str):
    """The mapping metric and kube-state-metrics' pod labels carry the cluster too: joined per cluster.

    The recording suites only: the alert rules read recorded series (and ``up``), never the mode's joins, so
    what a mode changes in them shows in the recorded series; the alert suite with a cluster label runs in
    the label mode above (a minute of promtool per mode saved)."""
    cfg = config_from_mapping({**CLUSTERED, "attribution": {"mode": mode}})
    recording = [dataclasses.replace(v, alerts=False) for v in testsuites.config_variants(cfg)]
    assert suite_failures(recording, tmp_path) == ""


def test_one_store_lists_the_prices_of_every_scenarios_running_models():
    """One price list for every cluster: each scenario's check would miss the others' models, so the suite of
    one store checks the union, where no execution of any scenario starts or ends. Under kubernetes attribution,
    whose suite holds the virtual-GPU pairs' A10 (label attribution's has no model the price list leaves out)."""
    [variant] = testsuites.config_variants(config_from_mapping({**CLUSTERED, "attribution": {"mode": "kubernetes"}}))
    [test] = recording_suite(variant.config, list(variant.scenarios), True)
    lists = [
        {s["labels"] for s in c["exp_samples"]} for c in test["promql_expr_test"] if c["expr"] == catalog.PRICE.name
    ]
    unlisted = f'{catalog.PRICE.name}{{modelName="NVIDIA A10"}}'  # not in the price list: the default price
    assert len(lists) > 3 and any(unlisted in x for x in lists) and any(unlisted not in x for x in lists)
    assert all(f'{catalog.PRICE.name}{{modelName="NVIDIA H100 80GB HBM3"}}' in x for x in lists)  # listed


def two_clusters(tmp_path: Path) -> str:
    variant = testsuites.Variant("clusters", config_from_mapping(CLUSTERED), tuple(library.two_clusters()))
    return suite_failures([variant], tmp_path, amd=False)  # its AMD suite: the test command's clusters-amd


@pytest.mark.single_version
@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_two_clusters_with_the_same_names_keep_their_own_values(tmp_path: Path):
    eu, us = library.two_clusters()
    assert {h.name for h in eu.hosts} == {h.name for h in us.hosts}
    assert {e.id for e in eu.executions} == {e.id for e in us.executions}
    assert two_clusters(tmp_path) == ""


@pytest.mark.single_version
@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_rules_not_computed_per_cluster_mix_the_two_clusters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(RuleGroup, "partitioned", lambda self, label: self)
    out = two_clusters(tmp_path)
    assert catalog.NODE_EXPORTER_HOST.name in out or "execution_node:" in out, out[:2000]


def test_alertmanager_groups_and_inhibits_within_one_cluster():
    config = alertmanager_config(config_from_mapping(CLUSTERED))
    [route] = config["route"]["routes"]
    assert route["group_by"][0] == "cluster"
    assert config["inhibit_rules"]
    for rule in config["inhibit_rules"]:
        assert rule["equal"][0] == "cluster", rule
    everything = config_from_mapping({**CLUSTERED, "alertmanager": {"group_by": ["..."]}})
    assert alertmanager_config(everything)["route"]["routes"][0]["group_by"] == ["..."]
    plain = alertmanager_config(Config())
    assert all("cluster" not in r["equal"] for r in plain["inhibit_rules"])
