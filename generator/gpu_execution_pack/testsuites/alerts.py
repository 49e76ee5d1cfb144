"""promtool alert tests, built from the alert scenarios and the oracle (``scenario.alerting``).

For every scenario, every alert is checked at the instants where something changes: a minute
before its ``for`` elapses (quiet), a minute after (firing, with its full labels and rendered
annotations), a minute after its condition clears (quiet again), and mid-phase. Instants where
a one-step disagreement about when a condition starts would change the outcome are skipped,
so the tests pin behaviour, not rounding at boundaries.
"""

from __future__ import annotations

from typing import Any

from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.promql import format_duration
from gpu_execution_pack.rules.alerts import alert_rules
from gpu_execution_pack.rules.groups import AlertRule
from gpu_execution_pack.scenario import alerting, expected, render
from gpu_execution_pack.scenario.alerting import PREFIX, AlertSpec, Timelines, World
from gpu_execution_pack.scenario.model import STEP_SECONDS, Scenario

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
        "exp_labels": {
            **dict(entity.labels),
            **cluster_scope(world.cfg).labels(world.s.cluster),
            "severity": spec.severity,
        },
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
        raise ValueError(f"the alert oracle and rules.alerts disagree about these alerts: {sorted(missing)}")
    timelines = Timelines(specs, world)
    checks = []
    for step in eval_steps(timelines, scenario):
        for spec in specs:
            name = PREFIX + spec.name
            alerts = [expected_alert(spec, rules[name], world, e, step) for e in timelines.firing_at(spec, step)]
            checks.append({"eval_time": format_duration(step * STEP_SECONDS), "alertname": name, "exp_alerts": alerts})
    return {
        "name": scenario.name,
        "interval": f"{STEP_SECONDS}s",
        "input_series": render.input_series(scenario, cfg),
        "alert_rule_test": checks,
    }


def alert_suite(cfg: Config, scenarios: list[Scenario]) -> list[dict[str, Any]]:
    """The promtool alert tests of ``scenarios`` for the alerts ``cfg`` generates."""
    return [scenario_alert_test(s, cfg) for s in scenarios]
