"""The demo's parts that start nothing: its fleet's layout, the OpenMetrics of several renderings, and what
the live exporters serve when."""

from __future__ import annotations

from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.demo import exporters, fleet
from gpu_execution_pack.demo.prometheus import placed_openmetrics
from gpu_execution_pack.scenario.model import STEP_SECONDS
from gpu_execution_pack.scenario.render import STALE, RenderedSeries

CFG = config_from_mapping({"rule_interval": "15s", "derived_rule_interval": "15s"})
NOW = 1_800_000_000 // 60 * 60
FLEET_VIEW_ROWS = 20  # report --since's default --top
ALERT_LOOKBACK_SECONDS = 3600  # TelemetryMissing and DcgmExporterDown read the last hour


def test_the_fleet_fits_the_fleet_views_default_rows_and_no_two_scenarios_share_a_host_or_an_id():
    history = fleet.nvidia_history()
    amd = fleet.amd_fleet(CFG)
    ids = [e.id for s, _ in history for e in s.executions] + [e.id for e in amd.executions] + [fleet.LIVE_ID]
    assert len(ids) == len(set(ids)) and len(ids) <= FLEET_VIEW_ROWS
    hosts = [h.name for s, _ in history for h in s.hosts] + [h.name for h in amd.hosts]
    hosts += [h.name for h in fleet.live().hosts]
    assert len(hosts) == len(set(hosts))


def test_every_finished_scenario_ends_over_an_hour_before_the_demo_starts_and_within_the_day():
    for placed in fleet.history(CFG, NOW):
        samples = max(len(s.samples) for s in placed.series)
        last = placed.start + (samples - 1) * STEP_SECONDS
        assert last < NOW - ALERT_LOOKBACK_SECONDS
        assert placed.start > NOW - 24 * 3600


def test_the_running_jobs_backfill_ends_just_before_the_demo_starts():
    live = fleet.live_backfill([RenderedSeries("m", (("a", "1"),), tuple(float(k) for k in range(1000)))], NOW)
    (series,) = live.series
    assert live.start + len(series.samples) * STEP_SECONDS == NOW


def test_openmetrics_of_several_renderings_keeps_a_metrics_lines_together_and_each_series_in_time_order():
    a = [RenderedSeries("up", (("job", "x"),), (1.0, None, STALE)), RenderedSeries("m", (("job", "x"),), (5.0,))]
    b = [RenderedSeries("up", (("job", "x"),), (0.0, 2.0))]
    text = placed_openmetrics([(a, 1000), (b, 900)])
    assert text.endswith("# EOF\n")
    lines = text.splitlines()[:-1]
    assert lines == ['m{job="x"} 5.0 1000', 'up{job="x"} 0.0 900', 'up{job="x"} 2.0 915', 'up{job="x"} 1.0 1000']


def test_the_exporters_serve_the_sample_of_the_moment_without_target_labels_and_start_again_past_the_last():
    series = [
        RenderedSeries("m", (("gpu", "0"), ("instance", "h:9400"), ("job", "dcgm")), (0.0, 1.0, 2.0, None, 4.0)),
        RenderedSeries("n", (("gpu", "0"), ("instance", "h:9400"), ("job", "dcgm")), (0.0, STALE, 2.0, 3.0, 4.0)),
        RenderedSeries("up", (("instance", "h:9400"), ("job", "dcgm")), (1.0,) * 5),
    ]
    assert list(exporters.targets(series)) == [("dcgm", "h:9400")]
    assert exporters.exposition(series[:2], 1) == 'm{gpu="0"} 1.0\n'
    cycle = exporters.Cycle(start=1000, first_step=1, last_step=3)
    steps = [cycle.step(1000 + k * STEP_SECONDS) for k in range(7)]
    assert steps == [1, 1, 2, 3, 1, 2, 3]
