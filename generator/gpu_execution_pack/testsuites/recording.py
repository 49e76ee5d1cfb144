"""promtool unit tests of the recording rules, built from the scenario library and its oracle.

Each scenario's raw series are rendered for the configuration, and every recorded series is checked
against the oracle (``scenario.expected``) mid-phase: in a test of its own, or (``recording_suite``'s
``together``, as ``gpu-execution-pack test`` builds them) beside every other scenario in one store.
"""

from __future__ import annotations

import math
from typing import Any

from gpu_execution_pack import catalog
from gpu_execution_pack.catalog import EXECUTION_LABEL
from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.promql import Matcher, call, format_duration, match, render, selector
from gpu_execution_pack.scenario import expected, library, model
from gpu_execution_pack.scenario import render as scenario_render
from gpu_execution_pack.scenario.model import STEP_SECONDS, Scenario

# Series whose value is a mean or sum of fractions: Prometheus 2.x accumulates means
# incrementally and 3.x uses compensated sums, and the order of a sum is its own, so the last
# bit differs between versions and from Python's. They are compared rounded to ROUND_TO,
# which still tells any real error apart.
# The host CPU is a mean of rates, which rate()'s extrapolation leaves a bit off where scrapes are sparse.
AVERAGED = frozenset(
    s.name
    for s in (
        catalog.EXECUTION_GPU_UTILIZATION_AVG,
        catalog.MODEL_GPU_UTILIZATION_SUM,
        catalog.NODE_CPU_UTILIZATION,
        catalog.EXECUTION_CPU_WHILE_UNDERUTILIZED,
        *catalog.EXECUTION_ACTIVITY_SERIES,
    )
)
ROUND_TO = 1e-9
# Host series read RAM and a CPU rate: checked only where the host's load is steady over the rate window.
HOST_SERIES = frozenset(
    s.name for s in (*catalog.NODE_SERIES, *catalog.NODE_DERIVED_SERIES, catalog.EXECUTION_CPU_WHILE_UNDERUTILIZED)
)
# The conditions the report sums: checked here against the oracle's thresholds from the config. The
# other alert conditions are checked by the alert suites (as alerts) and the report tests (as series).
REPORT_CONDITIONS = (catalog.GPU_MEMORY_HIGH, *catalog.EXECUTION_CONDITION_SERIES)


def rounded(value: float) -> float:
    """``value`` as PromQL's round(value, ROUND_TO) computes it."""
    inverse = 1.0 / ROUND_TO
    return math.floor(value * inverse + 0.5) / inverse


# Every per-GPU recorded series, by name: a GPU nobody holds must have none.
PER_GPU_NAMES = "execution_gpu:.+"


def label_matchers(labels: dict[str, str]) -> tuple[Matcher, ...]:
    """``label="value"`` for each of ``labels``, in label order."""
    return tuple(match(k, v) for k, v in sorted(labels.items()))


def sample_labels(name: str, labels: dict[str, str]) -> str:
    """A sample's series as promtool's ``exp_samples`` spell it, ``name{label="value", ...}``."""
    return render(selector(name, *label_matchers(labels)))


def per_gpu_series(*matchers: Matcher) -> str:
    """A selector of every per-GPU recorded series that ``matchers`` select."""
    return render(selector("", match("__name__", PER_GPU_NAMES, "=~"), *matchers))


def unowned(gpu: model.Gpu, cluster: tuple[Matcher, ...]) -> str:
    """A selector of every per-GPU recorded series of ``gpu`` (its MIG instance, if it is one)."""
    instance = [match(catalog.MIG_INSTANCE_LABEL, gpu.mig_instance)] if gpu.mig_instance else []
    return per_gpu_series(match(catalog.UUID_LABEL, gpu.uuid), *instance, *cluster)


def own_names(series: catalog.Series, scenario: Scenario) -> tuple[Matcher, ...]:
    """The matcher that selects ``scenario``'s own ``series`` where it shares a store without a cluster label
    (``library.apart``): by its execution, else its host, else its GPU, whose names carry its prefix. None where it
    is alone."""
    if not scenario.name_prefix:
        return ()
    label = next((k for k in (EXECUTION_LABEL, catalog.HOST_LABEL, catalog.UUID_LABEL) if k in series.labels), None)
    if label is None:
        raise ValueError(f"{series.name} names no execution, host or GPU: a shared store cannot part it")
    return (library.own_name(scenario, label),)


def scenario_test(scenario: Scenario, cfg: Config, store: tuple[Scenario, ...] = ()) -> dict[str, Any]:
    """One promtool test: the scenario's raw series, and every recorded series checked mid-phase (``store``:
    the other scenarios it shares a store with, whose GPUs' samples the first-sample fallback reads)."""
    checks = []
    # The price has its own check below; the raw host labels a target publishes are not a result; the
    # other alert conditions are checked elsewhere (REPORT_CONDITIONS); the per-target counter rates
    # through the host series that read them.
    unchecked = (
        catalog.PRICE,
        catalog.DCGM_TARGET_LABELS,
        *(s for s in catalog.GPU_CONDITION_SERIES if s not in REPORT_CONDITIONS),
        *(series for series, _ in catalog.NODE_COUNTER_RATES.values()),
        *catalog.NODE_COUNTER_INTERVAL_RATES.values(),
    )
    records = [s for s in catalog.ALL_SERIES if s not in unchecked]
    # Checks read the scenario's own cluster: beside another cluster's series, they must see the same.
    clusters = cluster_scope(cfg)
    own, cluster = clusters.labels(scenario.cluster), clusters.matchers(scenario.cluster)
    scopes = {s.name: (*own_names(s, scenario), *cluster) for s in records}
    for minute in expected.eval_minutes(scenario):
        want = expected.expected(scenario, minute, cfg, store) | expected.conditions(scenario, cfg, minute)
        steady = expected.hosts_steady(scenario, minute, cfg)
        for series in records:
            record, scope = series.name, scopes[series.name]
            if record in HOST_SERIES and not steady:
                continue  # host load changes within the rate window: not a clean check
            samples = sorted(want.get(record, []), key=lambda s: sorted(s.labels.items()))
            if record in AVERAGED:
                exp = [{"labels": sample_labels("", s.labels | own), "value": rounded(s.value)} for s in samples]
                checks.append(
                    {
                        "expr": render(call("round", selector(record, *scope), ROUND_TO)),
                        "eval_time": format_duration(minute * 60),
                        "exp_samples": exp,
                    }
                )
                continue
            checks.append(
                {
                    "expr": render(selector(record, *scope)),
                    "eval_time": format_duration(minute * 60),
                    "exp_samples": [
                        {"labels": sample_labels(record, s.labels | own), "value": s.value} for s in samples
                    ],
                }
            )
        checks.append(price_check(cfg, [scenario], minute))
        for gpu in scenario.unowned_gpus:  # a GPU nobody holds has no execution_gpu: series
            checks.append(
                {
                    "expr": unowned(gpu, cluster),
                    "eval_time": format_duration(minute * 60),
                    "exp_samples": [],
                }
            )
    checks += first_samples(scenario, cfg, store)
    return {
        "name": scenario.name,
        "interval": f"{STEP_SECONDS}s",
        "input_series": scenario_render.input_series(scenario, cfg),
        "promql_expr_test": checks,
    }


def first_samples(scenario: Scenario, cfg: Config, store: tuple[Scenario, ...] = ()) -> list[dict[str, Any]]:
    """At each execution's first sample, the seconds it stands for (``catalog.GPU_SAMPLE_SECONDS``): with no
    sample of its own before, the time since the group's previous evaluation, or the config's interval."""
    clusters = cluster_scope(cfg)
    own, cluster = clusters.labels(scenario.cluster), clusters.matchers(scenario.cluster)
    name = catalog.GPU_SAMPLE_SECONDS.name
    checks = []
    for e in scenario.executions:
        want = [
            s
            for s in expected.expected(scenario, e.start_minute, cfg, store).get(name, [])
            if s.labels[EXECUTION_LABEL] == e.id
        ]
        checks.append(
            {
                "expr": render(selector(name, match(EXECUTION_LABEL, e.id), *cluster)),
                "eval_time": format_duration(e.start_minute * 60),
                "exp_samples": [
                    {"labels": sample_labels(name, s.labels | own), "value": s.value}
                    for s in sorted(want, key=lambda s: sorted(s.labels.items()))
                ],
            }
        )
    return checks


def recording_suite(cfg: Config, scenarios: list[Scenario], together: bool = False) -> list[dict[str, Any]]:
    """The promtool tests of ``scenarios`` for the rules ``cfg`` generates; ``together``: one test
    holding every scenario's series at once, as one store holds them: in their own clusters where ``cfg``
    has a cluster label (``scenarios`` as given), else under names of their own (``library.apart``).

    promtool evaluates every rule at every step of each test, and each evaluation costs the same work whatever
    its series (printing and parsing the rule, and its operations) besides the work on them: one test of every
    scenario pays that once per step, not once per scenario, and takes a fraction of a test each."""
    if not together or not scenarios:
        return [scenario_test(s, cfg) for s in scenarios]
    if not cluster_scope(cfg).enabled:
        scenarios = library.apart(scenarios, cfg)
        tests = [scenario_test(s, cfg, tuple(o for o in scenarios if o is not s)) for s in scenarios]
    else:
        tests = [scenario_test(s, cfg) for s in scenarios]
    # The price list is one for every cluster: it lists the models of every scenario's running executions.
    price = catalog.PRICE.name
    minutes = sorted({m for s in scenarios for m in expected.eval_minutes(s)})
    return [
        {
            "name": library.store_name(scenarios),
            "interval": f"{STEP_SECONDS}s",
            "input_series": [series for t in tests for series in t["input_series"]],
            "promql_expr_test": [c for t in tests for c in t["promql_expr_test"] if c["expr"] != price]
            + [price_check(cfg, scenarios, m) for m in minutes if not any(_starts_or_ends(s, m) for s in scenarios)],
        }
    ]


def price_check(cfg: Config, scenarios: list[Scenario], minute: float) -> dict[str, Any]:
    """The price list at ``minute`` of a store holding ``scenarios``: every listed model, and each other model
    an execution of any of them holds."""
    d = cfg.dashboards
    prices = {
        tuple(sorted(s.labels.items())): s.value
        for scenario in scenarios
        for s in expected.prices(scenario, minute, d.model_prices(), d.default_price_per_gpu_hour)
    }
    return {
        "expr": catalog.PRICE.name,
        "eval_time": format_duration(minute * 60),
        "exp_samples": [
            {"labels": sample_labels(catalog.PRICE.name, dict(labels)), "value": value}
            for labels, value in sorted(prices.items())
        ],
    }


def _starts_or_ends(scenario: Scenario, minute: float) -> bool:
    """Whether an execution of ``scenario`` starts or ends within a minute of ``minute``: another scenario's
    mid-phase instant may be one, where the price list's models change within a step."""
    return any(abs(e.start_minute - minute) <= 1 or abs(e.end_minute - minute) <= 1 for e in scenario.executions)
