"""What the pack generates for a configuration, and the checks ``gpu-execution-pack check`` runs on it.

The CLI only parses arguments and prints; this module says which files each command writes
and what ``check`` verifies, so the tests and the CLI share one definition.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from gpu_execution_pack import promtool
from gpu_execution_pack.config import Config
from gpu_execution_pack.dashboards import dashboard_json, provisioning
from gpu_execution_pack.dashboards import lint as dashboard_lint
from gpu_execution_pack.docs import configuration, runbook, series
from gpu_execution_pack.rules import lint as alert_lint
from gpu_execution_pack.rules.files import RULE_FILE_SUFFIX, rule_files

# The reference docs, each rendered from its one source (config schema, catalog, runbook template).
DOCS: dict[Path, Callable[[], str]] = {
    Path("docs/configuration.md"): configuration.render,
    Path("docs/series.md"): series.render,
    Path("docs/runbook.md"): runbook.render,
}


def rule_outputs(cfg: Config) -> dict[Path, str]:
    """What ``generate`` writes: rule files and their PrometheusRule objects."""
    rules_dir = Path(cfg.output.rules_dir)
    files = rule_files(cfg)
    return files | provisioning.kubernetes_rules(cfg, files, rules_dir)


def dashboard_outputs(cfg: Config) -> dict[Path, str]:
    """What ``dashboards`` writes: the dashboards, Grafana provisioning files and ConfigMaps."""
    out = Path(cfg.output.dashboards_dir)
    files = dashboard_json(cfg)
    return files | provisioning.grafana_files(cfg, out) | provisioning.kubernetes_dashboards(cfg, files, out)


def generated_files(cfg: Config) -> dict[Path, str]:
    """Everything the pack generates for ``cfg``."""
    return rule_outputs(cfg) | dashboard_outputs(cfg)


def stale(files: dict[Path, str]) -> list[Path]:
    """The files that are missing or differ from what would be generated."""
    return [p for p, text in files.items() if not p.exists() or p.read_text(encoding="utf-8") != text]


def convention_problems(cfg: Config, files: dict[Path, str]) -> list[str]:
    """Alert and dashboard conventions broken by the generated ``files``, and queries promtool rejects."""
    rule_paths = sorted(p for p in files if p.name.endswith(RULE_FILE_SUFFIX))
    problems = alert_lint.lint((p, files[p]) for p in rule_paths)
    dashboards = {p: json.loads(files[p]) for p in dashboard_json(cfg)}
    for path, dashboard in dashboards.items():
        problems += dashboard_lint.lint(path.name, dashboard)
        problems += dashboard_lint.model_problems(path.name, dashboard)
    if dashboard_lint.configured_schemas_dir() is not None:  # an extra check where the JSON Schemas are at hand
        for path, dashboard in dashboards.items():
            problems += dashboard_lint.schema_problems(path.name, dashboard)
    variables = {"execution_id": "example"}
    problems += dashboard_lint.promql_problems(
        [
            (f"{p.name}: panel {title!r}", dashboard_lint.substitute(expr, variables))
            for p, d in dashboards.items()
            for title, expr in dashboard_lint.queries(d)
        ]
    )
    return problems


def check_rules(files: dict[Path, str]) -> str:
    """promtool check rules on the rule files among ``files``; its report."""
    return promtool.check_rules(sorted(p for p in files if p.name.endswith(RULE_FILE_SUFFIX))).output.strip()
