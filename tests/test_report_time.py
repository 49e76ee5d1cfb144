"""Time from the data: the report's energy, GPU-hours and durations whatever intervals its config names.

One Prometheus holds ``scenario.schedules.rule_intervals``: four two-hour executions whose recorded
series were backfilled at 15 s, 1m, 2m, and 15 s then 1m (with a minute of missed evaluations), and
the underutilisation alert's ALERTS series at the same instants. The report is read with configs
naming 15 s, the defaults (1m) and 2m; every figure must be within 2 % of the oracle (the model on
its own 15 s grid, which never reads the schedule). The old way (samples counted times the config's
interval) is computed beside it and must miss.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.promql import call, format_duration, match, parse_duration_seconds, render
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


def test_the_report_says_in_one_line_where_the_config_and_the_deployed_rules_disagree(loaded):
    server, start = loaded
    execution = SCENARIO.executions[0]
    assert summary(server, DEPLOYED, execution, start)["notes"] == []
    [note] = summary(server, {}, execution, start)["notes"]
    assert "rule_interval" in note and "every 15s (config: 1m)" in note and "\n" not in note
