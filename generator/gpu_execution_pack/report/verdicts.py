"""Verdicts: what an execution's figures say, each with a code, a severity, a summary and advice.

Each rule reads figures the report computed from recorded series, with the alerts' thresholds
where the meaning is the same (docs/report.md lists them). A verdict never rests on data that is
not there: where a rule's input is missing, ``telemetry_incomplete`` says which, and the rule is
not given.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.promql import parse_duration_seconds
from gpu_execution_pack.report.figures import REQUIRED_GPU_SERIES, ExecutionFigures, GpuFigures

# The vocabulary, in the order verdicts are listed.
CODES: tuple[str, ...] = (
    "gpu_oom",
    "host_oom",
    "xid_errors",
    "gpu_idle",
    "gpu_underutilized_input_bound",
    "gpu_underutilized_io_bound",
    "power_throttled",
    "thermal_throttled",
    "telemetry_incomplete",
    "healthy",
)
# Alerts that say an execution's GPUs stopped reporting (rules.alerts): fired, they make telemetry incomplete.
TELEMETRY_ALERTS = ("GpuExecutionTelemetryMissing", "GpuExecutionDcgmExporterDown")
# Missing samples count as a gap from Prometheus' lookback on: shorter ones (a missed rule evaluation)
# every query bridges anyway, and the figures count the samples there are.
GAP_SECONDS = 300


@dataclass(frozen=True)
class Verdict:
    code: str
    severity: str
    summary: str
    advice: str

    def as_json(self) -> dict[str, str]:
        return {"code": self.code, "severity": self.severity, "summary": self.summary, "advice": self.advice}


def gpu_name(gpu: GpuFigures) -> str:
    labels = gpu.labels
    mig = f" MIG {labels['GPU_I_PROFILE']} instance {labels['GPU_I_ID']}" if labels.get("GPU_I_ID") else ""
    return f"GPU {labels.get('gpu', '?')}{mig} on {labels.get(catalog.HOST_LABEL, '?')}"


def percent(ratio: float) -> str:
    return f"{ratio * 100:.0f} %"


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"


def missing_inputs(f: ExecutionFigures, expected_samples: int | None) -> list[str]:
    """What the report lacks: series never recorded for a GPU or host, and gaps in a GPU's samples."""
    out = []
    api_names = {s.name: s.api_name or s.name for s in REQUIRED_GPU_SERIES}
    for gpu in f.gpus:
        absent = [api_names[s.name] for s in REQUIRED_GPU_SERIES if s.name not in gpu.present]
        if absent:
            out.append(f"{gpu_name(gpu)} has no {', '.join(absent)}")
        lost = 0 if expected_samples is None else (expected_samples - gpu.samples) * f.gpu_interval
        if lost >= GAP_SECONDS:
            out.append(
                f"{gpu_name(gpu)} reported {gpu.samples} of {expected_samples} samples ({minutes(lost)} missing)"
            )
    for alert in f.alerts:
        if alert.alertname in TELEMETRY_ALERTS:
            out.append(f"{alert.alertname} fired for it (its GPUs stopped reporting before it ended)")
    if not f.hosts or all(h.cpu_mean is None for h in f.hosts):
        out.append("no host CPU or RAM series (node_exporter) for its hosts")
    return out


def judge(f: ExecutionFigures, cfg: Config, *, running: bool, expected_samples: int | None = None) -> list[Verdict]:
    """The verdicts for one execution's figures, most urgent first; ``healthy`` when nothing is found.

    ``expected_samples`` is how many samples each GPU should have over the span (None: gaps are
    not judged, as in the fleet view, which has no per-execution span).
    """
    a, r = cfg.alerts, cfg.report
    out: list[Verdict] = []
    gpus_with_util = [g for g in f.gpus if g.util_mean is not None]
    missing = missing_inputs(f, expected_samples)

    oom = [g for g in f.gpus if g.mem_last_ratio is not None and g.mem_last_ratio >= a.gpu_memory_high.threshold]
    if oom and not running:
        out.append(
            Verdict(
                "gpu_oom",
                a.gpu_memory_high.severity,
                f"GPU memory reached {percent(max(g.mem_last_ratio or 0 for g in oom))} of capacity on "
                f"{', '.join(gpu_name(g) for g in oom)} just before its series ended: the job most likely "
                "died of a CUDA out-of-memory error.",
                "Lower the batch size or sequence length, enable activation checkpointing or mixed precision, "
                "or request a GPU with more memory. A steady climb before the end is a leak: check for tensors "
                "kept across iterations.",
            )
        )
    host_oom = [h for h in f.hosts if h.ram_peak_ratio is not None and h.ram_peak_ratio >= a.host_memory_high.threshold]
    if host_oom:
        out.append(
            Verdict(
                "host_oom",
                a.host_memory_high.severity,
                f"Host RAM reached {percent(max(h.ram_peak_ratio or 0 for h in host_oom))} on "
                f"{', '.join(h.hostname for h in host_oom)}: the kernel's OOM killer may have ended processes.",
                "Use fewer data-loader workers or smaller prefetch buffers, memory-map data sets instead of "
                "loading them, or request hosts with more RAM. Other executions on the host count too.",
            )
        )
    xid = [g for g in f.gpus if g.xid_changes > 0 and (g.xid_last or 0) > 0]
    if xid:
        codes = ", ".join(f"{gpu_name(g)}: Xid {g.xid_last:.0f}" for g in xid)
        out.append(
            Verdict(
                "xid_errors",
                a.xid_errors.severity,
                f"The GPU driver reported Xid errors during the run ({codes}).",
                "Look the code up in NVIDIA's Xid catalogue: 13, 31 and 43 usually point at the application, "
                "48, 63, 64, 74, 79 and 94/95 at the hardware. Rerun elsewhere and report the GPU if it repeats.",
            )
        )
    if gpus_with_util:
        mean = sum(g.util_mean or 0 for g in gpus_with_util) / len(gpus_with_util)
        low_seconds = f.low_util_samples * f.gpu_interval
        if mean < r.gpu_idle_threshold:
            out.append(
                Verdict(
                    "gpu_idle",
                    a.gpu_underutilized.severity,
                    f"The job did not use its GPUs: {percent(mean)} mean utilisation over the run.",
                    "Check that the code runs on the GPU (device placement, CUDA_VISIBLE_DEVICES, a CPU-only "
                    "build of the framework). If it does not need a GPU, submit it without one.",
                )
            )
        elif low_seconds >= parse_duration_seconds(a.gpu_underutilized.for_):
            waste = a.gpu_underutilized
            low = f"utilisation under {percent(waste.threshold)} for {minutes(low_seconds)}"
            if f.cpu_during_low_util is None:
                missing.append("no host CPU series while utilisation was low: input or I/O bound cannot be told")
            elif f.cpu_during_low_util >= waste.cpu_saturated:
                out.append(
                    Verdict(
                        "gpu_underutilized_input_bound",
                        waste.severity,
                        f"GPUs waited on the host CPU: {low}, while the host CPU was "
                        f"{percent(f.cpu_during_low_util)} busy.",
                        "Pre-processing on the CPU starves the GPUs: use more data-loader workers or CPUs, move "
                        "augmentation to the GPU (DALI), or pre-process the data set once, offline.",
                    )
                )
            else:
                out.append(
                    Verdict(
                        "gpu_underutilized_io_bound",
                        waste.severity,
                        f"GPUs waited on data: {low}, while the host CPU was only "
                        f"{percent(f.cpu_during_low_util)} busy.",
                        "The job waits on data loading or I/O: stage the data set on local disk, use larger "
                        "files or a streaming format, raise the prefetch depth, or check the shared filesystem.",
                    )
                )
    throttles = (
        (
            "power_throttled",
            "power_throttled_samples",
            a.power_throttling,
            "ran at the power limit with clocks held down",
            "The job was slowed by the power cap, not by its code: ask whether the cap is intended "
            "(nvidia-smi -q -d POWER), or expect lower throughput on capped nodes.",
        ),
        (
            "thermal_throttled",
            "thermal_throttled_samples",
            a.thermal_throttling,
            "ran hot enough to slow down",
            "A cooling problem of the node, not of the job: report the host to its operators; "
            "rerunning elsewhere gives the job its full speed.",
        ),
    )
    for code, samples, alert, what, advice in throttles:
        held = {gpu_name(g): getattr(g, samples) * f.derived_interval for g in f.gpus}
        throttled = {name: s for name, s in held.items() if s >= seconds(alert.for_)}
        if throttled:
            summary = f"{', '.join(throttled)} {what} for up to {minutes(max(throttled.values()))}."
            out.append(Verdict(code, alert.severity, summary, advice))
    if missing:
        out.append(
            Verdict(
                "telemetry_incomplete",
                a.telemetry_missing.severity,
                "Telemetry is incomplete: " + "; ".join(missing) + ".",
                "Verdicts that need the missing data are not given. Check that dcgm-exporter and "
                "node_exporter run and are scraped on these hosts, and that the optional DCGM fields are collected.",
            )
        )
    if not out:
        out.append(
            Verdict(
                "healthy",
                "info",
                "No problem found: the GPUs were used, memory stayed under its limits and nothing throttled.",
                "Nothing to do.",
            )
        )
    return sorted(out, key=lambda v: CODES.index(v.code))


def seconds(duration: str) -> float:
    return parse_duration_seconds(duration)
