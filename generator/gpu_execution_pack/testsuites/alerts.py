"""promtool alert tests, built from the alert scenarios and the oracle (``scenario.alerting``).

For every scenario, every alert is checked at the instants where something changes: a minute
before its ``for`` elapses (quiet), a minute after (firing, with its full labels and rendered
annotations), a minute after its condition clears (quiet again), and mid-phase. Instants where
a one-step disagreement about when a condition starts would change the outcome are skipped,
so the tests pin behaviour, not rounding at boundaries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gpu_execution_pack import promql
from gpu_execution_pack.catalog import ALERTS_METRIC, EXECUTION_LABEL, HOST_LABEL
from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.promql import any_of, call, format_duration, match, selector
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


# One check of an alert test: the alert of this name, at this step.
Check = tuple[int, str]


def store_test(
    cfg: Config,
    timelines: list[Timelines],
    listed: set[Check] | None = None,
    quiet: dict[Check, list[int]] | None = None,
) -> dict[str, Any]:
    """One promtool test of the scenarios of ``timelines`` in one store.

    ``listed``: the checks (default: every alert at each scenario's ``eval_steps``) made as alert tests, which
    list every alert of the name firing at the time, each scenario's: every scenario there must be robust for
    that alert at that time (``alert_store_suite``). ``quiet``: checks of scenarios (by index) that must fire
    nothing of the alert at the time, made as expression tests of their own alerts alone (``quiet_check``)."""
    specs = alerting.specs(cfg)
    rules = _rules(cfg, specs)
    scenarios = [tl.world.s for tl in timelines]
    if listed is None:
        listed = {(k, spec.name) for tl in timelines for k in eval_steps(tl, tl.world.s) for spec in specs}
    checks = []
    for step in sorted({k for k, _ in listed}):
        for spec in specs:
            if (step, spec.name) not in listed:
                continue
            name = PREFIX + spec.name
            alerts = [
                expected_alert(spec, rules[name], tl.world, e, step)
                for tl in timelines
                for e in tl.firing_at(spec, step)
            ]
            checks.append({"eval_time": format_duration(step * STEP_SECONDS), "alertname": name, "exp_alerts": alerts})
    test: dict[str, Any] = {
        "name": library.store_name(scenarios),
        "interval": f"{STEP_SECONDS}s",
        "input_series": [series for s in scenarios for series in render.input_series(s, cfg)],
        "alert_rule_test": checks,
    }
    if quiet:
        test["promql_expr_test"] = [
            quiet_check(cfg, scenarios[i], PREFIX + name, step)
            for (step, name), members in sorted(quiet.items())
            for i in members
        ]
    return test


def quiet_check(cfg: Config, scenario: Scenario, alertname: str, step: int) -> dict[str, Any]:
    """An expression test that ``scenario`` fires no ``alertname`` at ``step``, whatever the others in its store
    fire: its alerts are told apart by its cluster, else by the prefix its executions' and hosts' names carry
    (``library.apart``; every alert names an execution or a host). An alert without them (no cluster, or
    neither an execution nor a host) could be any scenario's: it fails the check too, as it would fail the
    test of any scenario of the store alone. Prometheus writes ``ALERTS`` at every evaluation while an alert is
    active: a range shorter than a step holds only this evaluation's."""
    alert = (match("alertname", alertname), match("alertstate", "firing"))
    clusters = cluster_scope(cfg)
    if clusters.enabled:
        scopes = [clusters.matchers(scenario.cluster), (match(clusters.label, ""),)]
    else:
        scopes = [(library.own_name(scenario, label),) for label in (EXECUTION_LABEL, HOST_LABEL)]
        scopes.append((match(EXECUTION_LABEL, ""), match(HOST_LABEL, "")))
    now = format_duration(STEP_SECONDS - 1)
    expr = any_of([call("last_over_time", selector(ALERTS_METRIC, *alert, *scope).range(now)) for scope in scopes])
    return {"expr": promql.render(expr), "eval_time": format_duration(step * STEP_SECONDS), "exp_samples": []}


def scenario_alert_test(scenario: Scenario, cfg: Config) -> dict[str, Any]:
    return store_test(cfg, [Timelines(alerting.specs(cfg), World(scenario, cfg))])


def alert_suite(cfg: Config, scenarios: list[Scenario], together: bool = False) -> list[dict[str, Any]]:
    """The promtool alert tests of ``scenarios`` for the alerts ``cfg`` generates: a test per scenario, or
    (``together``) as few tests as ``alert_store_suite`` can hold them in."""
    if together:
        return alert_store_suite(cfg, scenarios)
    return [scenario_alert_test(s, cfg) for s in scenarios]


def alert_store_suite(cfg: Config, scenarios: list[Scenario]) -> list[dict[str, Any]]:
    """The alert tests of ``scenarios``: each scenario checked at the very instants its own test would check
    (``eval_steps``), for every alert, as its own test finds them.

    Each of promtool's steps costs every rule the same work whatever its series, besides the work on them, so
    one store of every scenario, run to the longest one's end (the shorter ones' executions over:
    ``Scenario.minutes``), costs far less than a test each. An alert test lists every alert of its name firing
    at its time, each scenario's, so a check is made so where every scenario is robust for that alert at that
    time (none of its alerts of the name changes within a step or two): else one scenario's boundary would
    decide another's check. Where one is not, a scenario that fires none of it is checked on its own alerts
    (``quiet_check``); one that fires some, for their labels and annotations, goes with the rest of such checks
    to stores of a few scenarios each, packed the longest first where each of their checks is robust for all
    (``_packed``). In one store, the scenarios are parted by the cluster label where ``cfg`` has one
    (``library.in_own_clusters``), else by their names (``library.apart``)."""
    specs = alerting.specs(cfg)
    by_name = {spec.name: spec for spec in specs}
    parted = library.in_own_clusters(scenarios) if cluster_scope(cfg).enabled else library.apart(scenarios, cfg)
    # The instants each scenario's own test checks, and its timelines run to a store's end, by its length.
    timelines = {(i, s.window_minutes): Timelines(specs, World(s, cfg)) for i, s in enumerate(parted)}
    wanted = [
        {(k, spec.name) for k in eval_steps(timelines[i, s.window_minutes], s) for spec in specs}
        for i, s in enumerate(parted)
    ]

    def at(i: int, minutes: int) -> Timelines:
        if (i, minutes) not in timelines:
            timelines[i, minutes] = Timelines(specs, World(replace(parted[i], minutes=minutes), cfg))
        return timelines[i, minutes]

    longest = max(s.window_minutes for s in parted)
    everyone = [at(i, longest) for i in range(len(parted))]
    listed: set[Check] = set()
    quiet: dict[Check, list[int]] = {}
    rest: list[set[Check]] = [set() for _ in parted]
    for i, checks in enumerate(wanted):
        for k, name in sorted(checks):
            spec = by_name[name]
            if all(tl.robust_for(spec, k) for tl in everyone):
                listed.add((k, name))
            elif everyone[i].robust_for(spec, k) and not everyone[i].firing_at(spec, k):
                quiet.setdefault((k, name), []).append(i)
            else:
                rest[i].add((k, name))
    tests = [store_test(cfg, everyone, listed, quiet)]
    for store in _packed(parted, rest, at, by_name):
        minutes = parted[store[0]].window_minutes
        members = sorted(store)
        tests.append(store_test(cfg, [at(i, minutes) for i in members], set().union(*(rest[i] for i in members))))
    return tests


def _packed(
    parted: list[Scenario],
    checks: list[set[Check]],
    at: Callable[[int, int], Timelines],
    by_name: dict[str, AlertSpec],
) -> list[list[int]]:
    """The scenarios with ``checks`` left, in stores (the longest first, each the first store it fits): a
    scenario joins where each check of every member is robust for each of them, run to the store's end."""

    def fits(store: list[int]) -> bool:
        minutes = parted[store[0]].window_minutes
        every = set().union(*(checks[j] for j in store))
        return all(at(j, minutes).robust_for(by_name[name], k) for j in store for k, name in every)

    stores: list[list[int]] = []
    for i in sorted((i for i in range(len(parted)) if checks[i]), key=lambda i: -parted[i].window_minutes):
        store = next((s for s in stores if fits([*s, i])), None)
        if store is None:
            stores.append([i])
        else:
            store.append(i)
    return stores
