"""promtool alert tests (``rules/tests/alerts.test.yml``), built from the alert scenarios and the oracle.

For every scenario, every alert is checked at the instants where something changes: a minute
before its ``for`` elapses (quiet), a minute after (firing, with its full labels and rendered
annotations), a minute after its condition clears (quiet again), and mid-phase. Instants where
a one-step disagreement about when a condition starts would change the outcome are skipped,
so the tests pin behaviour, not rounding at boundaries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from generator.alerts import AlertRule, alert_rules
from generator.config import Config
from generator.output import yaml_document
from generator.promql import duration
from generator.rulefiles import all_groups, rule_files
from generator.scenario import alerting, expected, library, render
from generator.scenario.alerting import PREFIX, AlertSpec, Timelines, World
from generator.scenario.model import STEP_SECONDS, Scenario

SOURCE = "generator/alerttests.py and generator/scenario/"
TEST_FILE = "alerts.test.yml"
ONE_MINUTE = 60 // STEP_SECONDS  # steps
SEARCH = 12  # steps an instant may move to get clear of a boundary


def eval_steps(timelines: Timelines, scenario: Scenario) -> list[int]:
    """The instants to check: around every transition and in the middle of every phase."""
    wanted = {k + d for k in timelines.transitions() for d in (-ONE_MINUTE, ONE_MINUTE)}
    wanted |= {round(m * 60 / STEP_SECONDS) for m in expected.eval_minutes(scenario)}
    chosen = set()
    for k in sorted(wanted):
        for d in sorted(range(-SEARCH, SEARCH + 1), key=abs):
            if 0 <= k + d <= timelines.steps and timelines.robust(k + d):
                chosen.add(k + d)
                break
    return sorted(chosen)


def expected_alert(spec: AlertSpec, rule: AlertRule, world: World, entity: alerting.Entity, step: int) -> dict:
    minute = step * STEP_SECONDS / 60
    return {
        "exp_labels": {**dict(entity.labels), "severity": spec.severity},
        "exp_annotations": {
            "summary": rule.summary,
            "description": spec.describe(world, entity, minute),
            "runbook_url": rule.runbook_url,
        },
    }


def scenario_alert_test(scenario: Scenario, cfg: Config) -> dict[str, Any]:
    world = World(scenario, cfg)
    specs = alerting.specs(cfg)
    rules = {r.alert: r for r in alert_rules(cfg)}
    missing = {PREFIX + s.name for s in specs} ^ set(rules)
    if missing:
        raise ValueError(f"the alert oracle and generator.alerts disagree about these alerts: {sorted(missing)}")
    timelines = Timelines(specs, world)
    checks = []
    for step in eval_steps(timelines, scenario):
        for spec in specs:
            name = PREFIX + spec.name
            alerts = [expected_alert(spec, rules[name], world, e, step) for e in timelines.firing_at(spec, step)]
            checks.append({"eval_time": duration(step * STEP_SECONDS), "alertname": name, "exp_alerts": alerts})
    return {
        "name": scenario.name,
        "interval": f"{STEP_SECONDS}s",
        "input_series": render.input_series(scenario, cfg),
        "alert_rule_test": checks,
    }


def alert_test_file(cfg: Config, rules_dir: Path) -> dict[Path, str]:
    """The alert test file for the rules in ``rules_dir`` (built-in defaults)."""
    tests_dir = rules_dir / "tests"
    doc = {
        "rule_files": [str(Path("..") / p.relative_to(rules_dir)) for p in rule_files(cfg, rules_dir)],
        "evaluation_interval": f"{STEP_SECONDS}s",
        "group_eval_order": [g.name for g in all_groups(cfg)],
        "tests": [scenario_alert_test(s, cfg) for s in library.alert_suite()],
    }
    return {tests_dir / TEST_FILE: yaml_document(doc, SOURCE)}
