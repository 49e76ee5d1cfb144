"""Time from the data: the report's energy, GPU-hours and durations whatever intervals its config names.

One Prometheus holds ``scenario.schedules.rule_intervals``: four two-hour executions whose recorded
series were backfilled at 15 s, 1m, 2m, and 15 s then 1m (with a minute of missed evaluations), and
the underutilisation alert's ALERTS series at the same instants. The report is read with configs
naming 15 s, the defaults (1m) and 2m; every figure must be within 2 % of the oracle (the model on
its own 15 s grid, which never reads the schedule). The old way (samples counted times the config's
interval) is computed beside it and must miss. The fleet view's totals, which rank every execution
on the seconds the rules measured each sample to stand for, are held to the oracle's the same way.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.promql import aggregate, call, format_duration, match, parse_duration_seconds, render
from gpu_execution_pack.query.prometheus import PrometheusClient
from gpu_execution_pack.report import document
from gpu_execution_pack.rules.files import all_groups, rule_files
from gpu_execution_pack.scenario import alerting, model
from gpu_execution_pack.scenario.model import STEP_SECONDS
from gpu_execution_pack.scenario.render import RenderedSeries, Renderer
from gpu_execution_pack.scenario.schedules import rule_intervals

from harness.prometheus import Prometheus, openmetrics
from tests import report_oracle

pytestmark = pytest.mark.e2e

SCENARIO, SCHEDULE = rule_intervals()
DEPLOYED = {"rule_interval": "15s", "derived_rule_interval": "15s"}  # the rule files Prometheus loads
REPORT_CONFIGS = {"15s": DEPLOYED, "defaults": {}, "2m": {"rule_interval": "2m", "derived_rule_interval": "2m"}}
TOLERANCE = 0.02
LOOKBACK_SECONDS = 300  # Prometheus' default --query.lookback-delta
ALERT = alerting.PREFIX + "GpuUnderutilized"


def evaluations() -> list[int]:
    """The scenario's 15 s steps at which the rules evaluated (the schedule's pieces, each at its interval)."""
    steps = set()
    for piece in SCHEDULE:
        t = piece.start_minute * 60
        while t < piece.end_minute * 60:
            steps.add(int(t // STEP_SECONDS))
            t += piece.seconds
    return sorted(steps)


def alerts_series() -> list[RenderedSeries]:
    """ALERTS for the underutilisation alert, firing while each execution's GPU is in its idle phase, sampled at
    the rules' evaluations."""
    out = []
    on = set(evaluations())
    for e in SCENARIO.executions:
        samples = [None] * (SCENARIO.steps + 1)
        for k in on:
            phase = e.phase_at(k * STEP_SECONDS / 60)
            if phase is not None and phase.name == "idle":
                samples[k] = 1.0
        labels = {"alertname": ALERT, "alertstate": "firing", "severity": "warning", "execution_id": e.id}
        out.append(RenderedSeries("ALERTS", tuple(sorted(labels.items())), tuple(samples)))
    return out


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory):
    cfg = config_from_mapping(DEPLOYED)
    end = int(time.time()) // 60 * 60 - 15 * 60
    start = end - SCENARIO.window_minutes * 60
    workdir = tmp_path_factory.mktemp("report-time")
    rules_dir = workdir / "rules"
    rules_dir.mkdir()
    for path, text in rule_files(cfg, rules_dir).items():
        path.write_text(text)
    server = Prometheus(workdir, config_text=f"global:\n  scrape_interval: 15s\nrule_files: ['{rules_dir}/*.yml']\n")
    series = Renderer(SCENARIO, cfg).all_series() + alerts_series()
    pieces = [(start + int(p.start_minute * 60), start + int(p.end_minute * 60) - 1, p.seconds) for p in SCHEDULE]
    try:
        server.load_scheduled(openmetrics(series, start), all_groups(cfg), pieces)
        yield server, start
    finally:
        server.stop()


def last_sample(start: int, execution: model.Execution) -> float:
    """Just before the scrape after the execution's last one (see test_report.last_sample)."""
    return start + execution.end_minute * 60 - 1


def summary(server: Prometheus, report_cfg: dict, execution: model.Execution, start: int) -> dict:
    async def run() -> dict:
        client = PrometheusClient(server.url, 60)
        try:
            at = document.iso(last_sample(start, execution))
            return await document.execution_summary(config_from_mapping(report_cfg), client, execution.id, end=at)
        finally:
            await client.close()

    return asyncio.run(run())


def low_utilization_seconds(execution: model.Execution) -> float:
    """The model's time under the underutilisation threshold, on its own grid."""
    threshold = config_from_mapping(DEPLOYED).alerts.gpu_underutilized.threshold
    world = alerting.World(SCENARIO, config_from_mapping(DEPLOYED))
    minutes = model.grid(execution.start_minute, execution.end_minute - STEP_SECONDS / 60)
    return sum(
        STEP_SECONDS
        for m in minutes
        if (r := world.reporting(execution, m)) and sum(t[catalog.GPU_UTILIZATION] for _, t in r) / len(r) < threshold
    )


def idle_seconds(execution: model.Execution) -> float:
    return sum(model.PHASES[p].minutes * 60 for p in execution.phases if p == "idle")


@pytest.mark.parametrize("report_cfg", REPORT_CONFIGS, ids=list(REPORT_CONFIGS))
@pytest.mark.parametrize("execution", SCENARIO.executions, ids=[e.id for e in SCENARIO.executions])
def test_energy_gpu_hours_and_durations_match_the_oracle_whatever_the_config_says(loaded, execution, report_cfg):
    server, start = loaded
    want = report_oracle.report(SCENARIO, config_from_mapping(DEPLOYED), execution)
    got = summary(server, REPORT_CONFIGS[report_cfg], execution, start)
    assert got["power"]["energyKwh"] == pytest.approx(want.energy_kwh, rel=TOLERANCE)
    assert got["cost"]["gpuHoursBilled"] == pytest.approx(want.gpu_hours_billed, rel=TOLERANCE)
    assert got["cost"]["gpuHoursWorked"] == pytest.approx(want.gpu_hours_worked, rel=TOLERANCE)
    # A duration starts and ends at an evaluation: within one interval of the rules at its end.
    resolution = max(p.seconds for p in SCHEDULE if p.start_minute < execution.end_minute <= p.end_minute + 5)
    low = got["utilization"]["lowUtilizationSeconds"]
    assert low == pytest.approx(low_utilization_seconds(execution), rel=TOLERANCE, abs=resolution)
    [fired] = [a for a in got["alerts"] if a["alertname"] == ALERT]
    assert fired["firingSeconds"] == pytest.approx(idle_seconds(execution), rel=TOLERANCE, abs=resolution)
    # Nothing is lost where evaluations were missed for a minute: no gap, no incomplete telemetry.
    assert "telemetry_incomplete" not in [v["code"] for v in got["verdicts"]]


def old_energy_kwh(server: Prometheus, report_cfg: dict, execution: model.Execution, start: int) -> float:
    """Energy as the report counted it before: board power summed over its samples times the config's interval."""
    span = format_duration(execution.end_minute * 60 - execution.start_minute * 60)
    power = catalog.GPU_POWER.select(match(catalog.EXECUTION_LABEL, execution.id))
    [result] = server.query(render(call("sum_over_time", power.range(span))), last_sample(start, execution))
    interval = config_from_mapping(report_cfg).rule_interval or "1m"  # Prometheus' default where it is empty
    return float(result["value"][1]) * parse_duration_seconds(interval) / 3_600_000


@pytest.mark.parametrize("report_cfg", ["15s", "defaults"])
def test_samples_times_the_configs_interval_miss_where_the_rules_ran_otherwise(loaded, report_cfg):
    """The check above fails on the old computation: where the rules ran at 2m or changed interval, power summed
    over samples times the config's interval is far from the energy drawn, whichever interval the config names."""
    server, start = loaded
    for execution in SCENARIO.executions[2:]:
        want = report_oracle.report(SCENARIO, config_from_mapping(DEPLOYED), execution).energy_kwh
        assert old_energy_kwh(server, REPORT_CONFIGS[report_cfg], execution, start) != pytest.approx(want, rel=0.1)


def fleet(server: Prometheus, report_cfg: dict, start: int) -> dict:
    """The fleet view over the whole scenario, at its end."""

    async def run() -> dict:
        client = PrometheusClient(server.url, 60)
        try:
            since = format_duration(SCENARIO.window_minutes * 60)
            at = start + SCENARIO.window_minutes * 60
            return await document.fleet_summary(config_from_mapping(report_cfg), client, since, top=10, at=at)
        finally:
            await client.close()

    return asyncio.run(run())


def oracle_fleet_hours() -> tuple[float, float]:
    """The oracle's GPU-hours billed and wasted over every execution of the scenario, and what the backfill adds:
    with no staleness markers in it, each execution's recorded series run on for Prometheus' lookback after its
    raw samples end (within the window), at the utilisation of its last sample. Live data has no such tail."""
    cfg = config_from_mapping(DEPLOYED)
    reports = [report_oracle.report(SCENARIO, cfg, e) for e in SCENARIO.executions]
    billed = sum(r.gpu_hours_billed for r in reports)
    wasted = billed - sum(r.gpu_hours_worked for r in reports)
    world = alerting.World(SCENARIO, cfg)
    for e in SCENARIO.executions:
        last = e.end_minute - STEP_SECONDS / 60
        tail = min(LOOKBACK_SECONDS, (SCENARIO.window_minutes - e.end_minute) * 60) / 3600
        for _, truth in world.reporting(e, last):
            billed += tail
            wasted += tail * (1 - truth[catalog.GPU_UTILIZATION])
    return billed, wasted


@pytest.mark.parametrize("report_cfg", REPORT_CONFIGS, ids=list(REPORT_CONFIGS))
def test_the_fleet_views_gpu_hours_match_the_oracle_whatever_the_config_says(loaded, report_cfg):
    """The ranking's totals count each sample for the seconds the rules measured it to stand for: right across
    the 15 s, 1m and 2m pieces, the change of interval and the missed evaluations, whatever the config names."""
    server, start = loaded
    billed, wasted = oracle_fleet_hours()
    got = fleet(server, REPORT_CONFIGS[report_cfg], start)
    assert got["executions"] == len(SCENARIO.executions)
    assert got["gpuHoursBilled"] == pytest.approx(billed, rel=TOLERANCE)
    assert got["gpuHoursWasted"] == pytest.approx(wasted, rel=TOLERANCE)
    # The rules record the measured seconds: no total rests on an assumed interval.
    assert not [n for n in got["notes"] if "deployed per-GPU interval" in n]


def test_samples_times_the_deployed_interval_miss_the_fleets_gpu_hours(loaded):
    """The check above fails on the old ranking: every sample counted at the deployed per-GPU group's interval
    (15 s) counts the 1m and 2m pieces a fraction of their time."""
    server, start = loaded
    billed, _ = oracle_fleet_hours()
    util = catalog.GPU_UTILIZATION.select()
    window = format_duration(SCENARIO.window_minutes * 60)
    query = render(aggregate("sum", None, call("count_over_time", util.range(window))))
    [result] = server.query(query, start + SCENARIO.window_minutes * 60)
    deployed = parse_duration_seconds(DEPLOYED["rule_interval"])
    assert float(result["value"][1]) * deployed / 3600 != pytest.approx(billed, rel=0.1)


def test_a_mean_over_the_whole_window_misses_the_fleets_gpu_hours_wasted(loaded):
    """The ranking weighs the utilisation's mean piece by piece: a mean over the whole window weighs each sample
    alike, so where the interval changed with the load (changed-0043: idle at 15 s, busy at 1m) it counts the
    busy hour a quarter of its weight, and the fleet's waste is far from the oracle's."""
    server, start = loaded
    _, wasted = oracle_fleet_hours()
    window = format_duration(SCENARIO.window_minutes * 60)
    util, seconds = catalog.GPU_UTILIZATION.select(), catalog.GPU_SAMPLE_SECONDS.select()
    billed = call("sum_over_time", seconds.range(window))
    worked = call("avg_over_time", util.range(window)) * billed
    at = start + SCENARIO.window_minutes * 60
    [b], [w] = (server.query(render(aggregate("sum", None, expr)), at) for expr in (billed, worked))
    assert (float(b["value"][1]) - float(w["value"][1])) / 3600 != pytest.approx(wasted, rel=0.1)


def test_rules_without_the_measured_seconds_rank_as_before_and_say_so(loaded, monkeypatch):
    """Rules generated before the pack recorded the seconds each sample stands for: the ranking counts their
    samples at the deployed interval, as it did, and the view's notes say its totals assume it."""
    server, start = loaded
    older = dataclasses.replace(catalog.GPU_SAMPLE_SECONDS, name=catalog.GPU_SAMPLE_SECONDS.name + "_not_recorded")
    monkeypatch.setattr(catalog, "GPU_SAMPLE_SECONDS", older)
    got = fleet(server, DEPLOYED, start)
    [note] = [n for n in got["notes"] if "deployed per-GPU interval (15s)" in n]
    assert "4 of 4 executions" in note and "until the rules are upgraded" in note and "\n" not in note
    window = format_duration(SCENARIO.window_minutes * 60)
    samples = aggregate("sum", None, call("count_over_time", catalog.GPU_UTILIZATION.select().range(window)))
    [counted] = server.query(render(samples), start + SCENARIO.window_minutes * 60)
    assert got["gpuHoursBilled"] == pytest.approx(float(counted["value"][1]) * 15 / 3600, abs=1e-3)


def test_the_report_says_in_one_line_where_the_config_and_the_deployed_rules_disagree(loaded):
    server, start = loaded
    execution = SCENARIO.executions[0]
    assert summary(server, DEPLOYED, execution, start)["notes"] == []
    [note] = summary(server, {}, execution, start)["notes"]
    assert "rule_interval" in note and "every 15s (config: 1m)" in note and "\n" not in note


def test_the_text_report_writes_no_character_a_terminal_acts_on():
    """An execution id (a job's to choose) with an escape sequence that retitles the terminal and clears it, and
    line breaks that forge a row: printed escaped, one row per execution."""
    from gpu_execution_pack.report import text

    forged = "job\x1b]0;PWNED\x07\x1b[2J\n  Notes\n    * [fake] all good\r\u2028"
    row = {"executionId": forged, "gpus": 1, "gpuHoursBilled": 1.0, "gpuHoursWasted": 0.5, "efficiencyPercent": 50.0}
    doc = {
        "since": "1d",
        "executions": 1,
        "gpuHoursBilled": 1.0,
        "gpuHoursWasted": 0.5,
        "top": [{**row, "verdicts": []}],
    }
    printed = text.render_fleet(doc)
    assert not [c for c in printed if not c.isprintable() and c != "\n"], repr(printed)
    assert printed.count("\n") == 4  # the summary, a blank line, the header, one row
    assert "job\\x1b]0;PWNED\\x07\\x1b[2J\\n  Notes" in printed
