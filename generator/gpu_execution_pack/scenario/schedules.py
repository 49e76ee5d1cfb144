"""Scenarios whose rules ran on another schedule than the config says: the report counts time from the data.

A ``Schedule`` says when the rules evaluated over a scenario: pieces of its window, each at its own
interval, with holes where evaluations were missed. The tests backfill the recorded series piece by
piece (``promtool tsdb create-blocks-from rules --eval-interval``) and compare the report's figures
with the oracle, which reads the model only and never the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack.scenario.model import Execution, Gpu, Host, Scenario


@dataclass(frozen=True)
class Piece:
    """Rules evaluated every ``seconds`` from ``start_minute`` to ``end_minute`` of the scenario's window."""

    start_minute: float
    end_minute: float
    seconds: int


Schedule = tuple[Piece, ...]

# Two hours of work whose power changes: loading, compute, an idle stretch, compute again.
VARIED = ("loading",) + ("compute",) * 6 + ("idle",) * 3 + ("compute",) * 4
# Low power for its first hour, high for its second: counting samples at one interval cannot be right across a
# change of interval in its middle.
LOW_THEN_HIGH = ("loading",) * 6 + ("idle",) * 6 + ("compute",) * 6


def rule_intervals() -> tuple[Scenario, Schedule]:
    """Four two-hour executions, one after another on one host, under rules evaluated every 15 s, 1m, 2m, and
    15 s then 1m from the middle of the fourth (which also misses four evaluations in its first hour)."""
    host = "h40"
    executions = (
        Execution("every15s-0040", (Gpu(host, 0),), VARIED, start_minute=5),
        Execution("every1m-0041", (Gpu(host, 1),), VARIED, start_minute=135),
        Execution("every2m-0042", (Gpu(host, 2),), VARIED, start_minute=265),
        Execution("changed-0043", (Gpu(host, 3),), LOW_THEN_HIGH, start_minute=395),
    )
    schedule = (
        Piece(0, 130, 15),
        Piece(130, 260, 60),
        Piece(260, 390, 120),
        Piece(390, 420, 15),
        Piece(421, 455, 15),  # a minute of missed evaluations
        Piece(455, 520, 60),  # the interval changed, halfway through changed-0043
    )
    scenario = Scenario("rule intervals", rule_intervals.__doc__ or "", (Host(host),), executions, minutes=520)
    return scenario, schedule
