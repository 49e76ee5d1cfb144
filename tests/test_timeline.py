"""report.timeline on hand-made timestamps: what each sample stands for (no Prometheus)."""

from __future__ import annotations

import itertools

import pytest
from gpu_execution_pack.report import figures, timeline


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


@pytest.mark.parametrize(
    ("window", "at"),
    [
        (7 * 86400, 1_700_000_123.456),  # pieces before and after the whole ones
        (86400, 1_700_000_100.0),  # ends on a piece's end: no piece after
        (3600, 1_700_000_050.5),
        (120, 1_700_000_010.0),  # within one piece
        (600, 1_700_000_100.0),  # starts on a piece's end: no piece before
    ],
)
def test_the_fleet_rankings_pieces_tile_its_window_end_to_end(window: float, at: float):
    """The ranking weighs the utilisation piece by piece (``figures.piecewise``): the pieces must cover the window
    once, with no gap and no overlap, whole ones in the middle ending on multiples of a piece."""
    covered = []
    for name, end, length in figures.pieces(window, at):
        if name == "whole":
            assert end % figures.PIECE_MS == 0
            covered += [
                (end - k * figures.PIECE_MS - figures.PIECE_MS, end - k * figures.PIECE_MS) for k in range(length)
            ]
        else:
            assert length > 0 and (name == "tail" or length < figures.PIECE_MS)
            covered.append((end - length, end))
    covered.sort()
    assert covered[0][0] == round((at - window) * 1000) and covered[-1][1] == round(at * 1000)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(covered))
