"""report.timeline on hand-made timestamps: what each sample stands for (no Prometheus)."""

from __future__ import annotations

import pytest
from gpu_execution_pack.report import timeline


def grid(start: float, end: float, every: float) -> list[float]:
    return [start + k * every for k in range(int((end - start) // every))]


def test_an_interval_change_counts_each_sample_at_its_own_interval():
    times = grid(0, 3600, 15) + grid(3600, 7200, 60)
    assert timeline.seconds([[t, 1.0] for t in times], fallback=999) == pytest.approx(7200)
    # Power low in the first hour, high in the second: the integral weighs each hour alike.
    watts = [[t, 100.0 if t < 3600 else 600.0] for t in times]
    assert timeline.integral(watts, fallback=999) == pytest.approx(100 * 3600 + 600 * 3600)


def test_missed_evaluations_within_the_lookback_are_held_and_a_longer_gap_is_lost():
    missed = [t for t in grid(0, 3600, 15) if not 600 <= t < 660]
    assert timeline.seconds([[t, 1.0] for t in missed], fallback=15) == pytest.approx(3600)
    gap = [t for t in grid(0, 3600, 15) if not 600 <= t < 1200]  # ten minutes: telemetry lost
    assert timeline.seconds([[t, 1.0] for t in gap], fallback=15) == pytest.approx(3600 - 600)
    assert timeline.covered([[t, 1.0] for t in gap], fallback=15) == pytest.approx(3600 - 600 - 15)


def test_no_sample_stands_for_time_past_the_end_and_a_lone_one_for_the_fallback():
    times = grid(0, 600, 120)
    assert timeline.seconds([[t, 1.0] for t in times], fallback=15, end=600) == pytest.approx(600)
    assert timeline.seconds([[t, 1.0] for t in times], fallback=15, end=500) == pytest.approx(500)
    assert timeline.seconds([[0.0, 1.0]], fallback=15) == 15


def test_rules_slower_than_the_lookback_are_counted_at_their_interval():
    times = grid(0, 7200, 600)
    assert timeline.seconds([[t, 1.0] for t in times], fallback=60) == pytest.approx(7200)


def test_an_alert_counts_at_most_the_groups_interval_at_each_sample():
    clock = timeline.Clock(grid(0, 7200, 60), fallback=60)
    episodes = grid(600, 900, 60) + grid(3000, 3060, 60)  # five minutes, then one lone sample
    assert clock.firing_seconds([[t, 1.0] for t in episodes]) == pytest.approx(300 + 60)
    faster = timeline.Clock(grid(0, 3600, 15) + grid(3600, 7200, 60), fallback=60)
    firing = grid(3300, 3600, 15) + grid(3600, 3900, 60)
    assert faster.firing_seconds([[t, 1.0] for t in firing]) == pytest.approx(600)
