"""promtool alert tests, built from the alert scenarios and the oracle (``scenario.alerting``).

For every scenario, every alert is checked at the instants where something changes: a minute
before its ``for`` elapses (quiet), a minute after (firing, with its full labels and rendered
annotations), a minute after its condition clears (quiet again), and mid-phase. Instants where
a one-step disagreement about when a condition starts would change the outcome are skipped,
so the tests pin behaviour, not rounding at boundaries.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.promql import format_duration
from gpu_execution_pack.rules.alerts import alert_rules
from gpu_execution_pack.rules.groups import AlertRule
from gpu_execution_pack.scenario import alerting, expected, library, render
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


def _rules(cfg: Config, specs: list[AlertSpec]) -> dict[str, AlertRule]:
    rules = {r.alert: r for r in alert_rules(cfg)}
    missing = {PREFIX + s.name for s in specs} ^ set(rules)
    if missing:
        raise ValueError(f"the alert oracle and rules.alerts disagree about these alerts: {sorted(missing)}")
    return rules


def store_test(cfg: Config, timelines: list[Timelines], steps: list[list[int]] | None = None) -> dict[str, Any]:
    """One promtool test of the scenarios of ``timelines`` in one store, each checked at its own instants
    (``steps``, each scenario's; default: ``eval_steps``). An alert test lists every alert of its name firing
    at its time, so each check expects every scenario's: the instants must be robust for all of them
    (``alert_store_suite``)."""
    specs = alerting.specs(cfg)
    rules = _rules(cfg, specs)
    scenarios = [tl.world.s for tl in timelines]
    if steps is None:
        steps = [eval_steps(tl, s) for tl, s in zip(timelines, scenarios, strict=True)]
    checks = []
    for step in sorted({k for own in steps for k in own}):
        for spec in specs:
            name = PREFIX + spec.name
            alerts = [
                expected_alert(spec, rules[name], tl.world, e, step)
                for tl in timelines
                for e in tl.firing_at(spec, step)
            ]
            checks.append({"eval_time": format_duration(step * STEP_SECONDS), "alertname": name, "exp_alerts": alerts})
    return {
        "name": library.store_name(scenarios),
        "interval": f"{STEP_SECONDS}s",
        "input_series": [series for s in scenarios for series in render.input_series(s, cfg)],
        "alert_rule_test": checks,
    }


def scenario_alert_test(scenario: Scenario, cfg: Config) -> dict[str, Any]:
    return store_test(cfg, [Timelines(alerting.specs(cfg), World(scenario, cfg))])


def alert_suite(cfg: Config, scenarios: list[Scenario], together: bool = False) -> list[dict[str, Any]]:
    """The promtool alert tests of ``scenarios`` for the alerts ``cfg`` generates: a test per scenario, or
    (``together``) as few tests as ``alert_store_suite`` can hold them in."""
    if together:
        return alert_store_suite(cfg, scenarios)
    return [scenario_alert_test(s, cfg) for s in scenarios]


def alert_store_suite(cfg: Config, scenarios: list[Scenario]) -> list[dict[str, Any]]:
    """The alert tests of ``scenarios``, several scenarios to a store, each checked at the very instants its own
    test would check (``eval_steps``), with every other scenario's alerts listed beside its own.

    promtool's time is the rules' text times each test's steps, so a store of several scenarios costs about
    what its longest one does. A scenario joins the first store (the longest first) where every instant of
    each scenario there is robust for all of them (no alert of any changes within a step or two of it): else
    one scenario's boundary would decide another's check. The shorter ones run to the store's end, their
    executions over (``Scenario.minutes``). In one store, the scenarios are parted by the cluster label where
    ``cfg`` has one (``library.in_own_clusters``), else by their names (``library.apart``)."""
    specs = alerting.specs(cfg)
    parted = library.in_own_clusters(scenarios) if cluster_scope(cfg).enabled else library.apart(scenarios, cfg)
    # The instants each scenario's own test checks, and its timelines run to a store's end, by its length.
    timelines = {(i, s.window_minutes): Timelines(specs, World(s, cfg)) for i, s in enumerate(parted)}
    own_steps = [eval_steps(timelines[i, s.window_minutes], s) for i, s in enumerate(parted)]

    def at(i: int, minutes: int) -> Timelines:
        if (i, minutes) not in timelines:
            timelines[i, minutes] = Timelines(specs, World(replace(parted[i], minutes=minutes), cfg))
        return timelines[i, minutes]

    def fits(store: list[int], i: int) -> bool:
        """Whether scenario ``i`` may join ``store``: its instants robust for each member (their timelines are
        built), then every member's and its own robust for it."""
        minutes = parted[store[0]].window_minutes
        return all(at(j, minutes).robust(k) for j in store for k in own_steps[i]) and all(
            at(i, minutes).robust(k) for j in (*store, i) for k in own_steps[j]
        )

    stores: list[list[int]] = []
    for i in sorted(range(len(parted)), key=lambda i: -parted[i].window_minutes):  # stable: the library's order
        store = next((s for s in stores if fits(s, i)), None)
        if store is None:
            stores.append([i])
        else:
            store.append(i)
    tests = []
    for store in stores:
        minutes = parted[store[0]].window_minutes
        members = sorted(store)
        tests.append(store_test(cfg, [at(i, minutes) for i in members], [own_steps[i] for i in members]))
    return tests
