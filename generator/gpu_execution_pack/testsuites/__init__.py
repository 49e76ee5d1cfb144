"""promtool test suites built from the scenario library, for the built-in defaults or any config.

Suites are generated, not committed: ``build`` writes the rule files of each configuration and
a promtool test file per suite into a build folder, and ``gpu-execution-pack test`` runs them.
With the built-in defaults every attribution variant is proven on the same scenarios; with a
user's config, its own rules are tested on the scenario library with its thresholds, labels
and attribution mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_execution_pack.config import Config, cluster_scope, config_from_mapping
from gpu_execution_pack.output import command, yaml_document
from gpu_execution_pack.rules.alerts import alert_group
from gpu_execution_pack.rules.files import all_groups, rule_file_name, rule_files
from gpu_execution_pack.scenario import library
from gpu_execution_pack.scenario.model import STEP_SECONDS, Scenario
from gpu_execution_pack.testsuites import amd
from gpu_execution_pack.testsuites.alerts import alert_suite
from gpu_execution_pack.testsuites.recording import recording_suite

SOURCE = "gpu_execution_pack/testsuites/ and gpu_execution_pack/scenario/"


@dataclass(frozen=True)
class Variant:
    """A configuration whose rules are tested, and the scenarios they are tested on."""

    name: str
    config: Config
    scenarios: tuple[Scenario, ...]
    alerts: bool = False  # also test its alert rules on the alert scenarios
    alert_scenarios: tuple[Scenario, ...] = ()  # those scenarios, where not the library's (library.alert_suite())

    def alert_library(self) -> list[Scenario]:
        """The scenarios its alert rules are tested on, where ``alerts``."""
        return list(self.alert_scenarios) if self.alert_scenarios else library.alert_suite()


def default_variants() -> list[Variant]:
    """The built-in defaults and each other attribution mode, on the same scenarios."""
    attribution = tuple(library.attribution_suite())

    def variant(name: str, overrides: dict[str, Any], *extra: Scenario, **more: Any) -> Variant:
        cfg = config_from_mapping(overrides, f"variant {name}")
        # Label attribution has no execution id where dcgm-exporter maps pods through DRA or virtual GPUs.
        scenarios = tuple(s for s in attribution if cfg.attribution.mode != "label" or library.by_label(s))
        return Variant(name, cfg, scenarios + extra, **more)

    return [
        Variant("default", Config(), tuple(library.default_suite()), alerts=True),
        variant("mapping", {"attribution": {"mode": "mapping"}}),
        # The DRA install (in the attribution suite), and per-pod values under KUBERNETES_VIRTUAL_GPUS: the paths on
        # which dcgm-exporter copies no pod label, attributed through kube_pod_labels; their alerts on the pair
        # filling its GPU alone (the alert library's other scenarios are the default variant's).
        variant(
            "kubernetes",
            {"attribution": {"mode": "kubernetes"}},
            *(s for s in library.pod_mapped_suite() if s not in attribution),
            alerts=True,
            alert_scenarios=tuple(library.pod_mapped_alert_suite()),
        ),
        # dcgm-exporter's --hpc-job-mapping-dir label, with scrape selectors set.
        variant(
            "hpc_job",
            {"execution_label": "hpc_job", "selectors": {"dcgm": 'job="dcgm-exporter"', "node": 'job="node"'}},
        ),
        # The scrape config names each target's host: no host map join (the sharded snippets' relabelling).
        Variant(
            "scrape_identity",
            config_from_mapping({"node": {"host_identity": "scrape"}}, "variant scrape_identity"),
            tuple(library.default_suite()),
            alerts=True,
        ),
        # The host CPU rate in a group of its own, rate() over 4m (the fallback) averaged within 2m: the
        # steps back, the minute-scraped node_exporter and every install's host CPU on it. With rule_interval
        # named, whose seconds a series' very first sample stands for (catalog.GPU_SAMPLE_SECONDS).
        Variant(
            "cpu_rate_interval",
            config_from_mapping(
                {"node": {"cpu_rate_interval": "1m"}, "rule_interval": f"{STEP_SECONDS}s"}, "variant cpu_rate_interval"
            ),
            tuple(library.default_suite()),
        ),
        # Two clusters with the same host and execution names in one store (a central ruler).
        Variant(
            "clusters",
            config_from_mapping({"cluster_label": "cluster"}, "variant clusters"),
            tuple(library.two_clusters()),
        ),
    ]


def config_variants(cfg: Config) -> list[Variant]:
    """A user's configuration, on the scenarios its attribution mode can be rendered in: with a cluster label,
    each in a cluster of its own, as a central ruler holds its clusters (``suite_files`` holds them in one
    store). Under label attribution, not the pods holding GPUs through dcgm-exporter's DRA or virtual-GPU paths
    (their series carry no execution id); under kubernetes attribution, those too."""
    alerting = library.alert_suite()
    if cfg.attribution.mode == "label":
        scenarios = library.default_suite()
    else:
        scenarios = library.attribution_suite()
        alerting += library.pod_mapped_alert_suite()
        if cfg.attribution.mode == "kubernetes":
            scenarios += [s for s in library.pod_mapped_suite() if s not in scenarios]
    if cluster_scope(cfg).enabled:
        scenarios = library.in_own_clusters(scenarios)
    return [Variant("config", cfg, tuple(scenarios), alerts=True, alert_scenarios=tuple(alerting))]


def _test_document(variant: Variant, rule_paths: list[Path], tests: list[dict[str, Any]]) -> dict[str, Any]:
    loaded = {p.name for p in rule_paths}
    return {
        "rule_files": [str(p) for p in rule_paths],
        "evaluation_interval": f"{STEP_SECONDS}s",
        # Dependency order, as the rules are written; promtool otherwise sorts groups by name.
        "group_eval_order": [g.name for g in all_groups(variant.config) if rule_file_name(g.file) in loaded],
        "tests": tests,
    }


def _recording_rule_paths(variant: Variant, relative: list[Path]) -> list[Path]:
    """The rule files a variant's recording suite loads: all of them, less the alerts where its alert suite
    evaluates those (over the alert scenarios, with every other file). The recording checks read recorded
    series only, and promtool evaluates every group at every step, the alerts' minute-long group included:
    about a fifth of a recording store's time. A variant without an alert suite, or whose alert suite holds only
    some of the alert library, keeps them, so that its alert rules are still evaluated, without an error, over its
    scenarios."""
    if not variant.alerts or not {s.name for s in library.alert_suite()} <= {s.name for s in variant.alert_library()}:
        return relative
    alerts = rule_file_name(alert_group(variant.config).file)
    return [p for p in relative if p.name != alerts]


def suite_files(
    variants: list[Variant], build_dir: Path, only: str = "", executions: frozenset[str] = frozenset()
) -> dict[Path, str]:
    """Rule files (``<build_dir>/<variant>/``) and test files (``<build_dir>/<suite>.test.yml``), by path.

    ``only`` keeps one suite: a variant's name, ``<variant>-alerts`` or ``<variant>-amd``. ``executions``
    keeps only the scenarios holding one of these execution ids (a mutation test reads the scenario it
    breaks, not the whole library: promtool's time grows with every scenario's expression tests).
    """
    files: dict[Path, str] = {}
    for v in variants:
        rules = rule_files(v.config, build_dir / v.name, command("test"))
        relative = [p.relative_to(build_dir) for p in rules]
        scenarios = library.as_configured(_holding(list(v.scenarios), executions), v.config)
        suites = {v.name: lambda v=v, s=scenarios: recording_suite(v.config, s, together=True)}
        if v.alerts:
            alerting = library.as_configured(_holding(v.alert_library(), executions), v.config)
            suites[f"{v.name}-alerts"] = lambda v=v, s=alerting: alert_suite(v.config, s, together=True)
        if amd.renders(v.config):
            suites[f"{v.name}-amd"] = lambda v=v: amd.amd_suite(v.config)
        built = {name: tests() for name, tests in suites.items() if not only or name == only}
        for name, tests in built.items():
            if executions and not tests:
                continue  # none of this suite's scenarios holds the executions asked for
            files |= rules
            doc = _test_document(v, _recording_rule_paths(v, relative) if name == v.name else relative, tests)
            files[build_dir / f"{name}.test.yml"] = yaml_document(doc, SOURCE, command("test"))
    if executions and not files:
        raise ValueError(f"no scenario of the suites asked for holds any of the executions {sorted(executions)}")
    return files


def _holding(scenarios: list[Scenario], executions: frozenset[str]) -> list[Scenario]:
    """The scenarios holding one of ``executions`` (all of them where none is named)."""
    if not executions:
        return scenarios
    return [s for s in scenarios if executions & {e.id for e in s.executions}]


def suite_test_paths(files: dict[Path, str]) -> list[Path]:
    """The promtool test files among ``suite_files``' output."""
    return sorted(p for p in files if p.name.endswith(".test.yml"))
