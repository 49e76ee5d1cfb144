"""The demo's fleet: a day of the scenario library's executions, one of each verdict, and a running job.

Each scenario keeps its own hosts and sits at its own time of the day (``nvidia_history``: when it ends,
counted back from the demo's start). Its companion executions (a healthy job beside the faulty one) are left
out where the day has one like it, so the fleet view's default 20 rows hold every execution. The newest
ends well over an hour before the demo starts: the live alert rules look back an hour for GPUs that stopped
reporting, and a finished scenario's exporter stops with it.

The running job (``live``) is backfilled for its first half hour and then served by live exporters
(``demo.exporters``) from that sample on, so its report has a history and its newest values move.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpu_execution_pack.config import Config
from gpu_execution_pack.scenario import alerting, amd, library
from gpu_execution_pack.scenario.model import STEP_SECONDS, Execution, Gpu, Host, Scenario
from gpu_execution_pack.scenario.render import RenderedSeries, Renderer

HOUR_MINUTES = 60


def only(scenario: Scenario, *execution_ids: str) -> Scenario:
    """``scenario`` with only the executions named (their hosts stay; the others' GPUs are not published)."""
    return replace(scenario, executions=tuple(e for e in scenario.executions if e.id in execution_ids))


def nvidia_history() -> list[tuple[Scenario, int]]:
    """The NVIDIA scenarios of the day and the minute, before the demo starts, each ends: one per verdict."""
    scenarios = [
        only(library.training(), "train-0001"),  # two hosts, thermal throttling
        only(library.waste(), "stall-0016", "cpubound-0017"),  # input-bound, I/O-bound
        # A busy job on a GPU without profiling fields: healthy, and its stall not judged (nothing to judge by).
        only(library.no_profiling_fleet(), "nodcp-0045"),
        only(library.oom_crash(), "leak-0006"),  # memory climbing to 100 % just before the crash
        only(library.host_oom(), "hostleak-0008"),
        # Power against the limit, with the clock reasons and violation counters a current exporter gives.
        replace(only(library.power_capped(), "capped-0010"), exported=COUNTERS_EXPORTED),
        library.xid(),
        only(library.dcgm_lost(), "lost-0019"),  # its exporter down mid-run: telemetry incomplete
        library.idle_job(),
        only(library.hung_collective(), "hung-0024"),  # stalled: GPU_UTIL high, the engines idle
        library.fp32_job(),  # tensor cores unused
        library.mps_shared(),  # a GPU two executions share through MPS
    ]
    # Spread over a working day, from OLDEST_END_MINUTES before the start to NEWEST_END_MINUTES before it.
    spacing = (OLDEST_END_MINUTES - NEWEST_END_MINUTES) // (len(scenarios) - 1)
    return [(s, OLDEST_END_MINUTES - i * spacing) for i, s in enumerate(scenarios)]


COUNTERS_EXPORTED = frozenset({"clocks_event_reasons", "thermal_violation", "power_violation"})
# The backfill's cost grows with the span it covers (promtool evaluates every rule over every 2 hours of it),
# so the day's executions overlap on their own hosts within a few hours rather than spread over 24.
OLDEST_END_MINUTES = 6 * HOUR_MINUTES
NEWEST_END_MINUTES = 90  # the alert rules read the last hour; a finished scenario's data ends before it
AMD_END_MINUTES = 3 * HOUR_MINUTES


def amd_fleet(cfg: Config) -> amd.AmdFleet:
    """The scenario library's AMD hosts as ``cfg``'s Prometheus stores them: one execution of each AMD verdict."""
    return amd.as_configured(library.amd_fleet(), cfg)


LIVE_ID = "live-0035"
LIVE_BACKFILLED_MINUTES = 30  # the running job's history before the demo starts


def live() -> Scenario:
    """The running job: 2 of live1's 3 GPUs, loading and then compute and tensor phases for hours."""
    host = "live1"
    job = Execution(
        LIVE_ID,
        (Gpu(host, 0), Gpu(host, 1)),
        ("loading", *("compute", "tensor") * 6),
        util_offsets=(0, -3),
    )
    return Scenario("a running job", live.__doc__ or "", (Host(host, "4.10"),), (job,), unowned_gpus=(Gpu(host, 2),))


@dataclass(frozen=True)
class Placed:
    """Rendered series and the unix time of their first sample."""

    series: list[RenderedSeries]
    start: int


def alerts_of(scenario: Scenario, cfg: Config) -> list[RenderedSeries]:
    """The ALERTS series of ``scenario`` as the alert oracle says they fire: promtool backfills no alerts."""
    return [
        RenderedSeries("ALERTS", tuple(sorted(labels.items())), tuple(1.0 if f else None for f in firing))
        for labels, firing in alerting.alert_series(scenario, cfg)
    ]


def placed(scenario: Scenario, ends_before: int, cfg: Config, now: int) -> Placed:
    """``scenario``'s series and alerts, ending ``ends_before`` minutes before ``now``."""
    start = now - (ends_before + scenario.window_minutes) * 60
    return Placed(Renderer(scenario, cfg).all_series() + alerts_of(scenario, cfg), start)


def history(cfg: Config, now: int) -> list[Placed]:
    """Every backfilled rendering, each placed in the day before ``now`` (a whole minute)."""
    out = [placed(scenario, ends_before, cfg, now) for scenario, ends_before in nvidia_history()]
    fleet = amd_fleet(cfg)
    amd_start = now - (AMD_END_MINUTES + fleet.minutes) * 60
    out.append(Placed(fleet.series() + amd.fleet_node_series(fleet), amd_start))
    return out


def live_start(now: int) -> int:
    """When the running job's first sample is: its backfilled part ends at ``now``."""
    return now - LIVE_BACKFILLED_MINUTES * 60


def live_backfill(series: list[RenderedSeries], now: int) -> Placed:
    """The running job's first LIVE_BACKFILLED_MINUTES, up to ``now``."""
    steps = LIVE_BACKFILLED_MINUTES * 60 // STEP_SECONDS
    return Placed([replace(s, samples=s.samples[:steps]) for s in series], live_start(now))
