"""What the pack generates for a configuration, and the checks ``gpu-execution-pack check`` runs on it.

The CLI only parses arguments and prints; this module says which files each command writes
and what ``check`` verifies, so the tests and the CLI share one definition. ``config`` is the
config file as the user named it (None: the built-in defaults); generated headers give it in
the command that regenerates them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from gpu_execution_pack import promtool
from gpu_execution_pack.archive.deploy import deploy_files
from gpu_execution_pack.config import Config
from gpu_execution_pack.dashboards import dashboard_json, provisioning, queries
from gpu_execution_pack.dashboards import lint as dashboard_lint
from gpu_execution_pack.docs import configuration, runbook, series
from gpu_execution_pack.docs import report as report_doc
from gpu_execution_pack.output import command, without_config_path
from gpu_execution_pack.rules import lint as alert_lint
from gpu_execution_pack.rules.files import RULE_FILE_SUFFIX, rule_files
from gpu_execution_pack.rules.kubernetes import kubernetes_rules
from gpu_execution_pack.rules.routing import alertmanager_files
from gpu_execution_pack.rules.sharding import sharding_files

RUNBOOK = "runbook.md"
REPORT_DOC = "report.md"


def rule_outputs(cfg: Config, config: str | None = None) -> dict[Path, str]:
    """What ``generate`` writes: rule files, their PrometheusRule objects, the Alertmanager routing snippet,
    and with ``sharding.shards`` set, each shard's scrape jobs and the shards' and the ruler's rule files."""
    rules_dir, regenerate = Path(cfg.output.rules_dir), command("generate", config)
    files = rule_files(cfg, rules_dir, regenerate)
    routing = alertmanager_files(cfg, rules_dir, regenerate)  # not a rule file: no PrometheusRule for it
    sharded = sharding_files(cfg, rules_dir, regenerate)
    return files | kubernetes_rules(cfg, files, rules_dir, regenerate) | routing | sharded


def archive_outputs(cfg: Config, config: str | None = None) -> dict[Path, str]:
    """What ``generate`` writes beside the rules to run ``archive --follow`` next to Prometheus: a systemd unit
    and a Kubernetes Deployment."""
    return deploy_files(cfg, Path(cfg.output.rules_dir), command("generate", config))


def dashboard_outputs(cfg: Config, config: str | None = None) -> dict[Path, str]:
    """What ``dashboards`` writes: the dashboards, Grafana provisioning files and ConfigMaps."""
    out, regenerate = Path(cfg.output.dashboards_dir), command("dashboards", config)
    files = dashboard_json(cfg)
    return (
        files
        | provisioning.grafana_files(cfg, out, regenerate)
        | provisioning.kubernetes_dashboards(cfg, files, out, regenerate)
    )


def docs_outputs(cfg: Config, config: str | None = None) -> dict[Path, str]:
    """What ``docs`` writes: the runbook with the config's figures; with the defaults, the pack's reference too."""
    docs_dir = Path(cfg.output.docs_dir)
    files = {
        docs_dir / RUNBOOK: runbook.render(cfg, command("docs", config)),
        docs_dir / REPORT_DOC: report_doc.render(cfg, command("docs", config)),
    }
    if config is None:  # the pack's own reference, rendered from its schema and catalog
        files |= {docs_dir / "configuration.md": configuration.render(), docs_dir / "series.md": series.render()}
    return files


def generated_files(cfg: Config, config: str | None = None) -> dict[Path, str]:
    """Everything the pack generates for ``cfg``: what ``check`` compares."""
    return (
        rule_outputs(cfg, config)
        | archive_outputs(cfg, config)
        | dashboard_outputs(cfg, config)
        | docs_outputs(cfg, config)
    )


def stale(files: dict[Path, str]) -> list[Path]:
    """The files that are missing or differ from what would be generated, the config's path in their headers
    aside (``output.without_config_path``)."""
    return [
        p
        for p, text in files.items()
        if not p.exists() or without_config_path(p.read_text(encoding="utf-8")) != without_config_path(text)
    ]


def convention_problems(cfg: Config, files: dict[Path, str], config: str | None = None) -> list[str]:
    """Alert and dashboard conventions broken by the generated ``files``, and queries promtool rejects.

    With a user's config the runbook link must be absolute: Alertmanager and Grafana open it from
    elsewhere. The pack's defaults keep a link relative to its own repository.
    """
    rule_paths = sorted(p for p in files if p.name.endswith(RULE_FILE_SUFFIX))
    problems = alert_lint.lint(((p, files[p]) for p in rule_paths), runbook.render(cfg))
    if config is not None and not re.match(r"^https?://", cfg.alerts.runbook_url):
        problems.append(
            f"{config}: alerts.runbook_url {cfg.alerts.runbook_url!r} is not an absolute http(s) URL; set the URL "
            f"your repository serves {Path(cfg.output.docs_dir) / RUNBOOK} from, so the link opens from Alertmanager"
        )
    dashboards = {p: json.loads(files[p]) for p in dashboard_json(cfg)}
    for path, dashboard in dashboards.items():
        problems += dashboard_lint.lint(path.name, dashboard)
        problems += dashboard_lint.model_problems(path.name, dashboard)
    if dashboard_lint.configured_schemas_dir() is not None:  # an extra check where the JSON Schemas are at hand
        try:
            for path, dashboard in dashboards.items():
                problems += dashboard_lint.schema_problems(path.name, dashboard)
        except dashboard_lint.SchemasUnavailable as missing:
            problems.append(str(missing))
    variables = {queries.VARIABLE: "example", queries.CLUSTER_VARIABLE: "example"}
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
