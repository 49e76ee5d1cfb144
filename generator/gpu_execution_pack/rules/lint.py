"""The alert conventions, checked on rule files as they are deployed (``make check``).

Every alert has a ``severity`` of critical, warning or info; a static ``summary``; a templated
``description``; a ``runbook_url`` whose fragment names a section of docs/runbook.md; static
labels (``$value`` or any template in a label makes each new value a new alert); a CamelCase
name with the pack's prefix, within 40 characters. Groups stay within 20 rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from gpu_execution_pack.config import SEVERITIES
from gpu_execution_pack.rules.alerts import ALERT_PREFIX
from gpu_execution_pack.rules.groups import MAX_RULES_PER_GROUP

MAX_NAME_LENGTH = 40
NAME_RE = re.compile(rf"^{ALERT_PREFIX}[A-Z][A-Za-z0-9]*$")
TEMPLATE_RE = re.compile(r"\{\{|\$value|\$labels")


def runbook_anchors(text: str) -> set[str]:
    """GitHub-style anchors of the runbook's headings (lower case, spaces to dashes, punctuation dropped)."""
    anchors = set()
    for line in text.splitlines():
        if m := re.match(r"^#{1,6}\s+(.+?)\s*$", line):
            anchors.add(re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-"))
    return anchors


def lint_alert(rule: dict[str, Any], anchors: set[str]) -> list[str]:
    """What is wrong with one alert rule, as sentences; empty when it follows the conventions."""
    name = str(rule.get("alert", ""))
    problems = []
    if not NAME_RE.match(name):
        problems.append(f"name must be CamelCase and start with {ALERT_PREFIX}")
    if len(name) > MAX_NAME_LENGTH:
        problems.append(f"name has {len(name)} characters; keep it within {MAX_NAME_LENGTH}")
    labels = rule.get("labels") or {}
    if labels.get("severity") not in SEVERITIES:
        problems.append(f"labels.severity is {labels.get('severity')!r}; accepted: {', '.join(SEVERITIES)}")
    for key, value in labels.items():
        if TEMPLATE_RE.search(str(value)):
            problems.append(f"labels.{key} is templated; labels must be static ($value belongs in the description)")
    annotations = rule.get("annotations") or {}
    summary, description = annotations.get("summary"), annotations.get("description")
    if not summary:
        problems.append("annotations.summary is missing")
    elif TEMPLATE_RE.search(summary):
        problems.append("annotations.summary is templated; it must be a static sentence (values go in the description)")
    if not description:
        problems.append("annotations.description is missing")
    elif "{{" not in description:
        problems.append("annotations.description is not templated; it should name the execution and the values")
    url = annotations.get("runbook_url")
    if not url:
        problems.append("annotations.runbook_url is missing")
    elif url.partition("#")[2] != name.lower():
        problems.append(f"annotations.runbook_url must end with #{name.lower()}, the alert's runbook section")
    elif name.lower() not in anchors:
        problems.append(f"annotations.runbook_url points at #{name.lower()}, which the runbook has no section for")
    return problems


def lint_rule_file(path: Path | str, text: str, anchors: set[str]) -> list[str]:
    """Every convention broken in one rule file, each as ``file: group/alert: problem``."""
    problems = []
    for group in (yaml.safe_load(text) or {}).get("groups", []):
        rules = group.get("rules", [])
        if len(rules) > MAX_RULES_PER_GROUP:
            problems.append(f"{path}: {group['name']}: {len(rules)} rules; keep a group within {MAX_RULES_PER_GROUP}")
        for rule in rules:
            if "alert" in rule:
                problems += [f"{path}: {group['name']}/{rule['alert']}: {p}" for p in lint_alert(rule, anchors)]
    return problems


def lint(files: Iterable[tuple[Path | str, str]], runbook: str) -> list[str]:
    """Lint rule files given as (path, text) pairs against the runbook's text (its sections are the anchors)."""
    anchors = runbook_anchors(runbook)
    return [p for path, text in files for p in lint_rule_file(path, text, anchors)]
