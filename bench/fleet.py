"""A synthetic fleet on the scenario model, rendered fast enough for 10,000 GPUs.

``fleet_scenario`` lays out H hosts x 8 GPUs and up to E executions as a ``Scenario``: executions
of 1 to 64 GPUs (or MIG instances) on consecutive slots, so some span hosts and some share one;
every 16th host partitioned into two MIG instances per GPU; each execution cycling through one
of the model's phase profiles, from a different phase, for the whole window.

``FleetExposition`` renders that scenario as dcgm-exporter 4.8 (label attribution) and
node_exporter publish it at any instant: the text a live exporter serves, and OpenMetrics lines
for promtool backfill. Values come from the model's own functions; labels, metric names and
units from the renderer and the catalog. The generic ``render.Renderer`` (every generation and
attribution mode, exact values for promtool) walks every execution per GPU and sample, which is
fine for a handful of GPUs and far too slow for a fleet; here each GPU and host is given a
scenario of its own executions only, so one instant costs O(GPUs).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, replace

from gpu_execution_pack.config import Config
from gpu_execution_pack.rules import catalog
from gpu_execution_pack.scenario import model, render
from gpu_execution_pack.scenario.model import PHASES, STEP_SECONDS, Execution, Gpu, Host, Scenario
from gpu_execution_pack.scenario.render import Renderer, fmt, raw_for, to_unit

GPUS_PER_HOST = 8
MIG_EVERY = 16  # every 16th host is partitioned: two 3g.40gb instances per A100
# GPUs (or instances) per execution, drawn at random: mostly small jobs, a few large ones.
SIZES = (1, 1, 1, 2, 2, 4, 4, 8, 8, 8, 16, 64)
PROFILES = (
    ("loading", "compute", "memory_ramp", "throttled", "idle"),  # training with checkpoints
    ("loading", "compute", "compute", "idle"),
    ("loading", "stalled", "compute", "idle"),  # waits on input
    ("cpu_bound", "compute"),  # pre-processing bound
    ("loading", "capped", "compute"),  # held at its power limit
)
TENANTS = ("research", "vision", "speech", "platform")
GENERATION = "4.8"
# What the fleet's dcgm-exporter 4.8 publishes: its default counters, and the enforced power limit.
DCGM_SIGNALS = tuple(
    key
    for key in render.DCGM_SIGNALS
    if (raw := raw_for(key, GENERATION)) is not None and (raw.default_collected or key == "power_limit_enforced")
)


def host_name(index: int) -> str:
    return f"h{index:05d}"


def fleet_scenario(gpus: int, executions: int, minutes: int, seed: int = 7) -> Scenario:
    """``gpus`` GPUs on gpus/8 hosts, up to ``executions`` executions, each running the whole ``minutes``."""
    rng = random.Random(seed)
    hosts = tuple(Host(host_name(h)) for h in range(-(-gpus // GPUS_PER_HOST)))
    slots: list[Gpu] = []
    for g in range(gpus):
        host, index = host_name(g // GPUS_PER_HOST), g % GPUS_PER_HOST
        if (g // GPUS_PER_HOST) % MIG_EVERY == MIG_EVERY - 1:
            slots += [Gpu(host, index, "NVIDIA A100-SXM4-80GB", str(i), "3g.40gb", mem_total_mib=40960) for i in (1, 2)]
        else:
            slots.append(Gpu(host, index))
    placed: list[Execution] = []
    position = 0
    for e in range(executions):
        size = rng.choice(SIZES)
        if position + size > len(slots):
            break
        profile = rng.choice(PROFILES)
        cycle = sum(PHASES[p].minutes for p in profile)
        shift = rng.randrange(len(profile))  # executions start in different phases
        phases = (profile[shift:] + profile[:shift]) * (minutes // cycle + 1)
        offsets = tuple(float(rng.choice((0, -1, -2, -3))) for _ in range(size))
        placed.append(
            Execution(
                f"exec-{e:05d}",
                tuple(slots[position : position + size]),
                phases,
                util_offsets=offsets,
                namespace=TENANTS[e % len(TENANTS)],
            )
        )
        position += size + rng.choice((0, 0, 1))  # some leave a slot free, so hosts hold idle GPUs
    held = {g for e in placed for g in e.gpus}
    return Scenario(
        f"fleet of {gpus} GPUs",
        fleet_scenario.__doc__ or "",
        hosts,
        tuple(placed),
        unowned_gpus=tuple(g for g in slots if g not in held),
        minutes=minutes,
    )


ENERGY = "energy"  # the cumulative signal, which gpu_publishes (gauges only) does not give
FLEET_ENERGY_WATTS = 400


@dataclass(frozen=True)
class _Slot:
    """One GPU or MIG instance with what its series need, worked out once."""

    gpu: Gpu
    owner: Execution | None
    labels: str  # the exposition's label set
    device: Scenario  # the scenario narrowed to the executions on this physical GPU


class FleetExposition:
    """A fleet scenario as exporters publish it, with scenario minute 0 at unix time ``start``."""

    def __init__(self, scenario: Scenario, start: float, cfg: Config | None = None):
        self.s, self.start = scenario, start
        renderer = Renderer(scenario, cfg or Config())
        owners = {g: e for e in scenario.executions for g in e.gpus}
        on_device: dict[tuple[str, int], list[Execution]] = {}
        for e in scenario.executions:
            for key in {g.device_key for g in e.gpus}:
                on_device.setdefault(key, []).append(replace(e, gpus=tuple(g for g in e.gpus if g.device_key == key)))
        hosts = {h.name: h for h in scenario.hosts}
        self.slots: list[_Slot] = []
        for gpu in sorted(scenario.all_gpus(), key=lambda g: (g.host, g.index, g.mig_instance)):
            owner = owners.get(gpu)
            labels = renderer.gpu_labels(hosts[gpu.host], gpu, owner)
            text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            device = replace(scenario, executions=tuple(on_device.get(gpu.device_key, ())))
            self.slots.append(_Slot(gpu, owner, text, device))
        on_host: dict[str, list[Execution]] = {}
        for e in scenario.executions:
            for host in dict.fromkeys(g.host for g in e.gpus):
                on_host.setdefault(host, []).append(e)
        # Each host narrowed to the executions on it: its RAM and CPU are theirs and its base load.
        self.on_host = {h.name: replace(scenario, executions=tuple(on_host.get(h.name, ()))) for h in scenario.hosts}
        self.names = {key: raw_for(key, GENERATION) for key in DCGM_SIGNALS}
        self._idle: dict[str, tuple[float, float]] = {}

    def minute(self, t: float) -> float:
        """The scenario minute at unix time ``t``, on the 15 s sample grid."""
        return (int(t - self.start) // STEP_SECONDS) * STEP_SECONDS / 60

    # -- dcgm-exporter -----------------------------------------------------------------------
    def gpu_values(self, slot: _Slot, minute: float) -> dict[str, float]:
        """What one GPU entry publishes at ``minute``, in dcgm-exporter 4.8's units."""
        base = model.gpu_publishes(slot.device, slot.gpu, slot.owner, minute)
        values = {key: to_unit(base[key], self.names[key].unit) for key in DCGM_SIGNALS if key != ENERGY}
        # The energy counter (mJ) grows at a fixed rate here: the fleet prices its rule, not its figure.
        values[ENERGY] = model.ENERGY_AT_START_MILLIJOULES + FLEET_ENERGY_WATTS * 1000 * minute * 60
        return values

    def dcgm_samples(self, slots: list[_Slot], times: Iterable[float], stamp: bool) -> dict[str, list[str]]:
        """Sample lines by metric name: every slot at every unix time, timestamped for backfill."""
        lines: dict[str, list[str]] = {self.names[k].name: [] for k in DCGM_SIGNALS}
        for slot in slots:
            for t in times:
                suffix = f" {int(t)}" if stamp else ""
                for key, value in self.gpu_values(slot, self.minute(t)).items():
                    lines[self.names[key].name].append(f"{self.names[key].name}{{{slot.labels}}} {fmt(value)}{suffix}")
        return lines

    def dcgm_text(self, t: float, hosts: frozenset[str] | None = None) -> str:
        """dcgm-exporter's /metrics at unix time ``t``, of every host or of ``hosts``."""
        slots = self.slots if hosts is None else [s for s in self.slots if s.gpu.host in hosts]
        return exposition(self.dcgm_samples(slots, (t,), stamp=False))

    # -- node_exporter -----------------------------------------------------------------------
    def host_truth(self, host: Host, t: float) -> dict[str, float]:
        return model.host_truth(self.on_host[host.name], host, self.minute(t))

    def cpu_idle_seconds(self, host: Host, t: float) -> float:
        """One CPU's idle-seconds counter at unix time ``t``, counted from ``start``.

        Kept per host and carried forward, so a live exporter's scrape costs one step per host.
        """
        last, idle = self._idle.get(host.name, (self.start, 0.0))
        if t < last:
            last, idle = self.start, 0.0
        for step in range(int(last), int(t) - STEP_SECONDS + 1, STEP_SECONDS):
            idle += STEP_SECONDS * (1 - self.host_truth(host, step)[catalog.NODE_CPU_UTILIZATION])
            last = step + STEP_SECONDS
        self._idle[host.name] = (last, idle)
        return idle

    def node_samples(self, hosts: Iterable[Host], times: Iterable[float], stamp: bool) -> dict[str, list[str]]:
        """Sample lines by metric name of every host at every unix time (CPU counters count from ``start``)."""
        names = ("node_uname_info", "node_memory_MemTotal_bytes", "node_memory_MemAvailable_bytes")
        lines: dict[str, list[str]] = {n: [] for n in (*names, "node_cpu_seconds_total")}
        for host in hosts:
            target = f'instance="{host.name}:9100",job="node"'
            idle = self.cpu_idle_seconds(host, min(times))
            for t in times:
                truth, suffix = self.host_truth(host, t), f" {int(t)}" if stamp else ""
                available = truth[catalog.NODE_RAM_TOTAL] - truth[catalog.NODE_RAM_USED]
                lines[names[0]].append(f'node_uname_info{{{target},nodename="{host.name}"}} 1{suffix}')
                lines[names[1]].append(f"{names[1]}{{{target}}} {fmt(truth[catalog.NODE_RAM_TOTAL])}{suffix}")
                lines[names[2]].append(f"{names[2]}{{{target}}} {fmt(available)}{suffix}")
                for cpu in range(host.cpus):
                    lines["node_cpu_seconds_total"].append(
                        f'node_cpu_seconds_total{{{target},cpu="{cpu}",mode="idle"}} {fmt(idle)}{suffix}'
                    )
                idle += STEP_SECONDS * (1 - truth[catalog.NODE_CPU_UTILIZATION])
        return lines

    def node_text(self, t: float) -> str:
        """node_exporter's /metrics of every host at unix time ``t``."""
        return exposition(self.node_samples(self.s.hosts, (t,), stamp=False))

    # -- backfill ----------------------------------------------------------------------------
    def openmetrics(self, t_from: int, t_to: int, execution_id: str = "") -> str:
        """OpenMetrics of one execution's GPUs and hosts, or the whole fleet's: a sample every 15 s in [t_from, t_to).

        A day of 10,000 GPUs is about 0.75 billion samples, more than promtool backfills in
        minutes: a benchmark backfills the execution it measures and scrapes the rest live.
        """
        slots = [s for s in self.slots if not execution_id or (s.owner is not None and s.owner.id == execution_id)]
        if not slots:
            raise ValueError(f"no execution {execution_id!r} in {self.s.name}")
        times = range(t_from, t_to, STEP_SECONDS)
        hosts = [h for h in self.s.hosts if h.name in {s.gpu.host for s in slots}]
        samples = {**self.dcgm_samples(slots, times, stamp=True), **self.node_samples(hosts, times, stamp=True)}
        # A series' samples in time order, series after series: what promtool's parser expects.
        return "".join("\n".join(sorted(lines, key=_series_then_time)) + "\n" for lines in samples.values()) + "# EOF\n"


def _series_then_time(line: str) -> tuple[str, int]:
    series, _, stamp = line.rpartition(" ")
    return series.rpartition(" ")[0], int(stamp)


def exposition(samples: dict[str, list[str]]) -> str:
    """Prometheus text exposition: each metric family together under its TYPE line."""
    kind = {"node_cpu_seconds_total": "counter"}
    return "".join(
        f"# TYPE {name} {kind.get(name, 'gauge')}\n" + "\n".join(lines) + "\n" for name, lines in samples.items()
    )
