"""Rule groups rendered as Prometheus rule files (``<rules_dir>/<name>.rules.yml``)."""

from __future__ import annotations

from pathlib import Path

from generator import alerts
from generator.alerts import AlertRule
from generator.config import Config
from generator.output import yaml_document
from generator.recording import MAX_RULES_PER_GROUP, RecordingRule, RuleGroup, recording_groups

RULE_FILE_SUFFIX = ".rules.yml"
SOURCE = "generator/recording.py, generator/alerts.py and generator/catalog.py"


def rule_document(rule: RecordingRule | AlertRule) -> dict:
    if isinstance(rule, RecordingRule):
        return {"record": rule.record, "expr": rule.expr}
    doc: dict = {"alert": rule.alert, "expr": rule.expr}
    if rule.for_:
        doc["for"] = rule.for_
    doc["labels"] = {"severity": rule.severity, **rule.labels}
    doc["annotations"] = {"summary": rule.summary, "description": rule.description, "runbook_url": rule.runbook_url}
    return doc


def group_document(group: RuleGroup) -> dict:
    doc: dict = {"name": group.name}
    if group.interval:
        doc["interval"] = group.interval
    doc["rules"] = [rule_document(r) for r in group.rules]
    return doc


def rule_files(cfg: Config, rules_dir: Path | None = None) -> dict[Path, str]:
    """Every rule file for ``cfg``, keyed by path; groups sharing a file name share the file."""
    rules_dir = Path(cfg.output.rules_dir) if rules_dir is None else rules_dir
    by_file: dict[str, list[RuleGroup]] = {}
    for group in all_groups(cfg):
        by_file.setdefault(group.file, []).append(group)
    return {
        rules_dir / f"{name}{RULE_FILE_SUFFIX}": yaml_document({"groups": [group_document(g) for g in groups]}, SOURCE)
        for name, groups in by_file.items()
    }


def alert_group(cfg: Config) -> RuleGroup:
    rules = alerts.alert_rules(cfg)
    if len(rules) > MAX_RULES_PER_GROUP:
        raise ValueError(f"group {alerts.GROUP_NAME} has {len(rules)} rules; keep it within {MAX_RULES_PER_GROUP}")
    return RuleGroup(alerts.GROUP_NAME, alerts.GROUP_FILE, rules, cfg.derived_interval)


def all_groups(cfg: Config) -> list[RuleGroup]:
    """Recording groups first (alerts read them), in evaluation order."""
    return [*recording_groups(cfg), alert_group(cfg)]
