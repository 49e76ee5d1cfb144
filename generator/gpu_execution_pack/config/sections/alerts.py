"""Config keys of section ``alerts``: each alert's thresholds, ``for`` and severity, one section per alert
(the kinds of alert share a dataclass: ``RatioAlert``, ``PredictAlert``, ...)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpu_execution_pack.config.loader import opt, section

SEVERITIES = ("critical", "warning", "info")
CAUSE_SEVERITIES = ("warning", "info")  # alerts about causes (throttling) must not page


def severity(default: str) -> Any:
    """An alert's severity key."""
    return opt(default, "The alert's severity label.", "Your routing pages on a different level.", choices=SEVERITIES)


def for_duration(default: str, doc: str, why: str) -> Any:
    """An alert's ``for`` key (``for_`` in Python, where ``for`` is reserved)."""
    return opt(default, doc, why, kind="duration", yaml_name="for")


@dataclass(frozen=True)
class RatioAlert:
    threshold: float = opt(
        0.9, "Level (ratio 0-1) at or beyond which the alert condition holds.", "See the alert's note.", kind="ratio"
    )
    for_: str = for_duration(
        "5m",
        "How long the condition must hold before the alert fires.",
        "Longer for fewer short blips, shorter for earlier warning.",
    )
    severity: str = severity("warning")


@dataclass(frozen=True)
class PredictAlert:
    lookback: str = opt(
        "15m",
        "Trend window that predict_linear fits.",
        "Longer ignores short allocation spikes; shorter reacts to fast ramps.",
        kind="duration",
    )
    horizon: str = opt(
        "30m",
        "Fire when exhaustion is predicted within this time.",
        "Match the time your users need to checkpoint or resize.",
        kind="duration",
    )
    min_level: float = opt(
        0.5,
        "Fire only once the level has stayed at or above this for the whole trend window, so the step of "
        "a fresh job loading its data or model does not read as a trend.",
        "Lower it to catch leaks that start from a small footprint; raise it to hear only about nearly full ones.",
        kind="ratio",
    )
    for_: str = for_duration(
        "10m",
        "How long the prediction must hold before the alert fires.",
        "Shorter for earlier warning on fast leaks.",
    )
    severity: str = severity("warning")


@dataclass(frozen=True)
class ThrottleAlert:
    threshold: float = opt(
        0.98,
        "Power draw, as a ratio of the enforced power limit, at or above which the GPU counts as capped.",
        "GPUs that regulate a few percent under their limit: lower it to 0.95.",
        kind="ratio",
    )
    min_throttled_share: float = opt(
        0.5,
        "Where the violation counters are exported: share of the rate window the GPU was held down by its "
        "power limit, at or above which that alone counts as throttling.",
        "Raise it to hear only about GPUs that are capped nearly all the time.",
        kind="ratio",
    )
    for_: str = for_duration(
        "15m",
        "How long the GPU must stay capped before the alert fires.",
        "Short caps during power-hungry kernels are normal; shorten it only for short jobs.",
    )
    severity: str = opt(
        "info",
        "The alert's severity label. Throttling is a cause, not a symptom: it never pages, so critical is refused.",
        "Your routing sends info alerts nowhere and you want throttling seen: warning.",
        choices=CAUSE_SEVERITIES,
    )


@dataclass(frozen=True)
class TemperatureAlert:
    threshold_celsius: float = opt(
        85.0,
        "GPU temperature at or above which the alert condition holds.",
        "Set it a few degrees under your models' slowdown temperature (DCGM_FI_DEV_SLOWDOWN_TEMP).",
        kind="positive",
    )
    min_throttled_share: float = opt(
        0.5,
        "Where the violation counters are exported: share of the rate window the GPU was held down by "
        "temperature, at or above which that alone counts as throttling.",
        "Raise it to hear only about GPUs that are held down nearly all the time.",
        kind="ratio",
    )
    for_: str = for_duration(
        "5m",
        "How long the condition must hold before the alert fires.",
        "Longer to ignore short bursts.",
    )
    severity: str = opt(
        "warning",
        "The alert's severity label. Throttling is a cause, not a symptom: it never pages, so critical is refused.",
        "Your routing shows info alerts where warnings are noise: info.",
        choices=CAUSE_SEVERITIES,
    )


@dataclass(frozen=True)
class UnderuseAlert:
    threshold: float = opt(
        0.15,
        "Mean GPU utilisation (ratio 0-1) over the execution's GPUs below which the GPUs count as wasted.",
        "Princeton jobstats flags 15 % and 25 %: raise it to 0.25 to be stricter.",
        kind="ratio",
    )
    cpu_saturated: float = opt(
        0.9,
        "Host CPU busy share (0-1) at or above which the description calls the execution CPU-bound.",
        "Hosts with many more cores than the job uses: lower it.",
        kind="ratio",
    )
    for_: str = for_duration(
        "30m",
        "How long utilisation must stay low before the alert fires; it also covers start-up and "
        "checkpoint pauses, so jobs that idle in their first minutes stay quiet.",
        "Longer for jobs with long data-loading phases.",
    )
    severity: str = severity("info")


@dataclass(frozen=True)
class StallAlert:
    util_threshold: float = opt(
        0.8,
        "GPU utilisation (DCGM_FI_DEV_GPU_UTIL, ratio 0-1) at or above which kernels count as resident.",
        "Jobs that stall with a lower GPU_UTIL (several processes on one GPU): lower it.",
        kind="ratio",
    )
    engine_threshold: float = opt(
        0.1,
        "Graphics-engine activity (DCGM_FI_PROF_GR_ENGINE_ACTIVE, ratio 0-1) below which the engines count as "
        "idle while kernels are resident: a hung collective or a spin-wait.",
        "Latency-bound jobs (small kernels, batch 1 inference) run this low when healthy: lower it.",
        kind="ratio",
    )
    for_: str = for_duration(
        "15m",
        "How long the GPU must stay stalled before the alert fires (and, in total, before the report says so); "
        "NCCL's own watchdog times out after 10 minutes by default.",
        "Jobs with long synchronous checkpoints or barriers: make it longer.",
    )
    severity: str = severity("warning")


@dataclass(frozen=True)
class MissingAlert:
    window: str = opt(
        "1h",
        "How long after a GPU of an execution last reported the alert keeps looking for it; "
        "it resolves once this has passed.",
        "Longer to keep lost GPUs visible longer; each hour more costs a longer range read per GPU.",
        kind="duration",
    )
    for_: str = for_duration(
        "10m",
        "How long the GPU must stay silent before the alert fires.",
        "Longer on fleets whose exporters restart often.",
    )
    severity: str = severity("warning")


@dataclass(frozen=True)
class DurationAlert:
    for_: str = for_duration(
        "10m",
        "How long the condition must hold before the alert fires.",
        "Longer on fleets whose exporters restart often.",
    )
    severity: str = severity("warning")


@dataclass(frozen=True)
class WindowAlert:
    window: str = opt(
        "15m",
        "A change within this window counts as a new event.",
        "Longer keeps the alert visible longer after a single event.",
        kind="duration",
    )
    severity: str = severity("warning")


@dataclass(frozen=True)
class Alerts:
    runbook_url: str = opt(
        "docs/runbook.md",
        "Where the runbook is read; each alert's runbook_url is this plus `#<its section>`.",
        "Point it at the URL your ops repo serves docs/runbook.md from, so the link opens from Alertmanager.",
    )
    gpu_memory_high: RatioAlert = section(
        lambda: RatioAlert(0.95, "2m", "warning"),
        "GPU memory capacity used is high. Raise the threshold where frameworks pre-allocate "
        "nearly all memory by design (TensorFlow grows to near 100 %; JAX takes 75 % up front).",
    )
    gpu_memory_exhaustion: PredictAlert = section(
        lambda: PredictAlert("10m", "30m", 0.5, "5m", "warning"),
        "GPU memory is predicted to run out (predict_linear over the recent trend).",
    )
    host_memory_high: RatioAlert = section(
        lambda: RatioAlert(0.95, "5m", "warning"),
        "Host RAM used on a host the execution runs on is high.",
    )
    host_memory_exhaustion: PredictAlert = section(
        lambda: PredictAlert("20m", "1h", 0.5, "10m", "warning"),
        "Host RAM is predicted to run out.",
    )
    power_throttling: ThrottleAlert = section(
        ThrottleAlert,
        "GPU held at its power limit with its SM clock pulled down. A cause, not a page: info.",
    )
    thermal_throttling: TemperatureAlert = section(
        TemperatureAlert,
        "GPU temperature high, or thermal clock event reasons set.",
    )
    gpu_underutilized: UnderuseAlert = section(
        UnderuseAlert,
        "Execution holds GPUs it barely uses (Princeton jobstats flags 15 % and 25 %).",
    )
    gpu_stalled: StallAlert = section(
        StallAlert,
        "Kernels resident (GPU_UTIL high) while the graphics engine idles: a hung collective or a spin-wait "
        "that GPU_UTIL alone reports as a busy GPU.",
    )
    telemetry_missing: MissingAlert = section(
        MissingAlert,
        "A GPU an execution held stopped reporting to DCGM while the execution was running.",
    )
    dcgm_exporter_down: DurationAlert = section(
        lambda: DurationAlert("10m", "warning"),
        "A dcgm-exporter scrape target is down: none of its GPUs can be attributed or billed.",
    )
    xid_errors: WindowAlert = section(
        lambda: WindowAlert("15m", "warning"),
        "An Xid error was reported on an execution's GPU.",
    )
    host_name_collision: DurationAlert = section(
        lambda: DurationAlert("10m", "warning"),
        "Two machines' node_exporters claim one host name (after node.host_regex) that a dcgm-exporter gives: "
        "no GPU is joined to a host by that name.",
    )
