"""Verdicts: what an execution's figures say, each with a code, a severity, a summary and advice.

Each rule reads figures the report computed from recorded series, with the alerts' thresholds
where the meaning is the same (docs/report.md lists them). A verdict never rests on data that is
not there: where a rule's input is missing, ``telemetry_incomplete`` says which, and the rule is
not given.

A verdict is one rule function below, listed in ``RULES``, with its code in ``CODES`` and its row in
docs/report.md (written from generator/gpu_execution_pack/docs/templates/report.md.j2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.config.schema import ThrottleAlert
from gpu_execution_pack.promql import parse_duration_seconds
from gpu_execution_pack.report.figures import REQUIRED_GPU_SERIES, ExecutionFigures, GpuFigures
from gpu_execution_pack.report.numbers import percent_text

# The vocabulary, in the order verdicts are listed.
CODES: tuple[str, ...] = (
    "gpu_oom",
    "host_oom",
    "xid_errors",
    "gpu_stalled",
    "gpu_idle",
    "gpu_underutilized_input_bound",
    "gpu_underutilized_io_bound",
    "power_throttled",
    "thermal_throttled",
    "tensor_cores_unused",
    "gpu_shared",
    "telemetry_incomplete",
    "not_judged",
    "healthy",
)
# Verdicts that say what the report could not judge, not what it found: ``healthy`` is given beside them.
NOT_FINDINGS = ("not_judged",)
# Alerts that say an execution's GPUs stopped reporting (rules.alerts): fired, they make telemetry incomplete.
TELEMETRY_ALERTS = ("GpuExecutionTelemetryMissing", "GpuExecutionDcgmExporterDown")
# Time without samples counts as a gap from Prometheus' lookback on: shorter ones (missed rule evaluations)
# every query bridges anyway, and the figures count them as held (report.timeline).
GAP_SECONDS = 300
MIN_SHARE = 1e-6  # the smallest GPU share said as "up to n executions at once" (a million holders)


@dataclass(frozen=True)
class Verdict:
    """One finding: its code (of ``CODES``), the severity of the alert with the same meaning, what was
    found and what to do about it."""

    code: str
    severity: str
    summary: str
    advice: str

    def as_json(self) -> dict[str, str]:
        """The verdict as the report document lists it."""
        return {"code": self.code, "severity": self.severity, "summary": self.summary, "advice": self.advice}


def gpu_name(gpu: GpuFigures) -> str:
    """``GPU n on host`` (with its MIG profile and instance on MIG), as verdicts name a GPU."""
    labels = gpu.labels
    mig = f" MIG {labels['GPU_I_PROFILE']} instance {labels['GPU_I_ID']}" if labels.get("GPU_I_ID") else ""
    return f"GPU {labels.get('gpu', '?')}{mig} on {labels.get(catalog.HOST_LABEL, '?')}"


def percent(ratio: float) -> str:
    """A ratio as the report writes a percentage: ``0.4236`` is ``42.4 %``."""
    return percent_text(ratio * 100)


def minutes(seconds: float) -> str:
    """Seconds as whole minutes: ``90`` is ``2 min``."""
    return f"{seconds / 60:.0f} min"


def missing_inputs(f: ExecutionFigures, span_seconds: float | None) -> list[str]:
    """What the report lacks: series never recorded for a GPU or host, and gaps in a GPU's samples."""
    out = []
    api_names = {s.name: s.api_name or s.name for s in REQUIRED_GPU_SERIES}
    for gpu in f.gpus:
        absent = [api_names[s.name] for s in REQUIRED_GPU_SERIES if s.name not in gpu.present]
        if absent:
            out.append(f"{gpu_name(gpu)} has no {', '.join(absent)}")
        # The time its samples cover, counted from their timestamps (report.timeline), against the span.
        lost = 0 if span_seconds is None else span_seconds - gpu.covered_seconds
        if span_seconds is not None and lost >= GAP_SECONDS:
            out.append(
                f"{gpu_name(gpu)} reported for {minutes(gpu.covered_seconds)} of {minutes(span_seconds)} "
                f"({minutes(lost)} missing)"
            )
    for alert in f.alerts:
        if alert.alertname in TELEMETRY_ALERTS:
            out.append(f"{alert.alertname} fired for it (its GPUs stopped reporting before it ended)")
    if not f.hosts or all(h.cpu_mean is None for h in f.hosts):
        out.append("no host CPU or RAM series (node_exporter) for its hosts")
    return out


def missing_activity(f: ExecutionFigures, cfg: Config) -> list[str]:
    """GPUs that publish no engine activity over the whole span (the exporter does not collect the profiling
    fields, or the GPU has no DCP) whose utilisation was high for the stall's ``for``: whether they stalled
    cannot be told. That is a field the GPU never publishes, not a gap (``not_judged``); elsewhere a missing
    activity field matters to no verdict."""
    stall = cfg.alerts.gpu_stalled
    engine = catalog.GPU_GRAPHICS_ENGINE_ACTIVE.api_name
    return [
        f"{gpu_name(g)} has no {engine} while its utilisation was at or above {percent(stall.util_threshold)} "
        f"for {minutes(high)}: whether it stalled cannot be told"
        for g in f.gpus
        if g.engine_mean is None and (high := g.util_high_seconds) >= seconds(stall.for_)
    ]


@dataclass(frozen=True)
class Case:
    """What the rules judge: one execution's figures, whether it still runs, and the seconds of the span
    each GPU's samples should cover (None: gaps are not judged, as in the fleet view, which has no
    per-execution span)."""

    figures: ExecutionFigures
    running: bool
    span_seconds: float | None


# A rule reads a case with the configuration's thresholds and gives its one verdict, or None.
Rule = Callable[[Case, Config], Verdict | None]


def mean_utilization(f: ExecutionFigures) -> float | None:
    """The GPUs' mean utilisation over the run; None where no GPU has a utilisation series."""
    utils = [g.util_mean for g in f.gpus if g.util_mean is not None]
    return sum(utils) / len(utils) if utils else None


def low_utilization_seconds(f: ExecutionFigures, cfg: Config) -> float | None:
    """How long the GPUs were underutilised, where that is long enough for a verdict (not idle, and at
    least the underutilisation alert's ``for``); None otherwise. Input or I/O bound then tells which."""
    mean = mean_utilization(f)
    if mean is None or mean < cfg.report.gpu_idle_threshold:
        return None
    low_seconds = f.low_util_seconds
    return low_seconds if low_seconds >= seconds(cfg.alerts.gpu_underutilized.for_) else None


def cpu_bound(cpu: float, cfg: Config) -> bool:
    """Whether the host CPU was busy enough, while utilisation was low, that the GPUs waited on it;
    otherwise (whatever the CPU figure, not a number too) they waited on I/O."""
    return cpu >= cfg.alerts.gpu_underutilized.cpu_saturated


def gpu_oom(case: Case, cfg: Config) -> Verdict | None:
    """GPU memory at the OOM threshold when the series ended: the job died of an out-of-memory error.
    Not given while it runs: memory high now is no crash."""
    f, alert = case.figures, cfg.alerts.gpu_memory_high
    # The device's fill, every holder's use counted: on a shared GPU any holder can run it out.
    oom = [g for g in f.gpus if (fill := g.device_fill) is not None and fill >= alert.threshold]
    if not oom or case.running:
        return None

    def where(g: GpuFigures) -> str:
        return f"{gpu_name(g)} (shared with {', '.join(g.co_holders)})" if g.shared and g.co_holders else gpu_name(g)

    shared = (
        " Every execution holding a shared GPU counts: any of them can run it out."
        if any(g.shared for g in oom)
        else ""
    )
    return Verdict(
        "gpu_oom",
        alert.severity,
        f"GPU memory reached {percent(max(g.device_fill or 0 for g in oom))} of capacity on "
        f"{', '.join(where(g) for g in oom)} just before its series ended: the job most likely "
        f"died of a CUDA out-of-memory error.{shared}",
        "Lower the batch size or sequence length, enable activation checkpointing or mixed precision, "
        "or request a GPU with more memory. A steady climb before the end is a leak: check for tensors "
        "kept across iterations.",
    )


def host_oom(case: Case, cfg: Config) -> Verdict | None:
    """Host RAM at its alert's threshold on any of the execution's hosts."""
    alert = cfg.alerts.host_memory_high
    hosts = [h for h in case.figures.hosts if h.ram_peak_ratio is not None and h.ram_peak_ratio >= alert.threshold]
    if not hosts:
        return None
    return Verdict(
        "host_oom",
        alert.severity,
        f"Host RAM reached {percent(max(h.ram_peak_ratio or 0 for h in hosts))} on "
        f"{', '.join(h.hostname for h in hosts)}: the kernel's OOM killer may have ended processes.",
        "Use fewer data-loader workers or smaller prefetch buffers, memory-map data sets instead of "
        "loading them, or request hosts with more RAM. Other executions on the host count too.",
    )


def xid_errors(case: Case, cfg: Config) -> Verdict | None:
    """A GPU's last Xid changed during the span to a non-zero code."""
    xid = [g for g in case.figures.gpus if g.xid_changes > 0 and (g.xid_last or 0) > 0]
    if not xid:
        return None
    codes = ", ".join(f"{gpu_name(g)}: Xid {g.xid_last:.0f}" for g in xid)
    return Verdict(
        "xid_errors",
        cfg.alerts.xid_errors.severity,
        f"The GPU driver reported Xid errors during the run ({codes}).",
        "Look the code up in NVIDIA's Xid catalogue: 13, 31 and 43 usually point at the application, "
        "48, 63, 64, 74, 79 and 94/95 at the hardware. Rerun elsewhere and report the GPU if it repeats.",
    )


def gpu_stalled(case: Case, cfg: Config) -> Verdict | None:
    """A GPU with kernels resident while its graphics engine idled (the GpuStalled condition) for at least
    the alert's ``for`` in all."""
    f, stall = case.figures, cfg.alerts.gpu_stalled
    held = [(g, g.stalled_seconds) for g in f.gpus]
    stalled = [(g, s) for g, s in held if s >= seconds(stall.for_)]
    if not stalled:
        return None
    means = ", ".join(
        f"{gpu_name(g)}: {percent(g.util_mean or 0)} utilisation, {percent(g.engine_mean or 0)} engine activity"
        for g, _ in stalled
    )
    return Verdict(
        "gpu_stalled",
        stall.severity,
        f"{', '.join(gpu_name(g) for g, _ in stalled)} looked busy but did no work for up to "
        f"{minutes(max(s for _, s in stalled))}: GPU_UTIL at or above {percent(stall.util_threshold)} while "
        f"the graphics engine was active under {percent(stall.engine_threshold)} of the time (over the run: "
        f"{means}). Kernels were resident but not working: typical of a hung collective or a spin-wait.",
        "Confirm while it runs: dump the ranks' stacks (py-spy dump --pid PID, or the framework's stack dump) "
        "and look for ranks waiting in the same collective; rerun with NCCL_DEBUG=INFO to see which one; "
        "check for a dead or restarted peer rank. Set TORCH_NCCL_ASYNC_ERROR_HANDLING=1 and a NCCL timeout "
        "(init_process_group(timeout=...)) so a hang ends the job instead of holding its GPUs.",
    )


def gpu_idle(case: Case, cfg: Config) -> Verdict | None:
    """Mean utilisation over the run under ``report.gpu_idle_threshold``."""
    mean = mean_utilization(case.figures)
    if mean is None or mean >= cfg.report.gpu_idle_threshold:
        return None
    return Verdict(
        "gpu_idle",
        cfg.alerts.gpu_underutilized.severity,
        f"The job did not use its GPUs: {percent(mean)} mean utilisation over the run.",
        "Check that the code runs on the GPU (device placement, CUDA_VISIBLE_DEVICES, a CPU-only "
        "build of the framework). If it does not need a GPU, submit it without one.",
    )


def gpu_underutilized(case: Case, cfg: Config) -> Verdict | None:
    """Underutilised long enough: input bound while the host CPU was saturated (the GPUs waited on the
    CPU), else I/O bound (they waited on data); neither without a host CPU figure."""
    f, waste = case.figures, cfg.alerts.gpu_underutilized
    low_seconds = low_utilization_seconds(f, cfg)
    cpu = f.cpu_during_low_util
    if low_seconds is None or cpu is None:
        return None
    if cpu_bound(cpu, cfg):
        return Verdict(
            "gpu_underutilized_input_bound",
            waste.severity,
            f"GPUs waited on the host CPU: {low_phrase(low_seconds, cfg)}, while the host CPU was {percent(cpu)} busy.",
            "Pre-processing on the CPU starves the GPUs: use more data-loader workers or CPUs, move "
            "augmentation to the GPU (DALI), or pre-process the data set once, offline.",
        )
    return Verdict(
        "gpu_underutilized_io_bound",
        waste.severity,
        f"GPUs waited on data: {low_phrase(low_seconds, cfg)}, while the host CPU was only {percent(cpu)} busy.",
        "The job waits on data loading or I/O: stage the data set on local disk, use larger "
        "files or a streaming format, raise the prefetch depth, or check the shared filesystem.",
    )


def low_phrase(low_seconds: float, cfg: Config) -> str:
    """How low and for how long utilisation was, as both underutilisation verdicts say it."""
    return f"utilisation under {percent(cfg.alerts.gpu_underutilized.threshold)} for {minutes(low_seconds)}"


def throttled(case: Case, code: str, seconds_of: str, alert: ThrottleAlert, what: str, advice: str) -> Verdict | None:
    """A GPU held by a clock-event reason (``seconds_of``: its figure) for at least ``alert``'s ``for``."""
    f = case.figures
    held = {gpu_name(g): getattr(g, seconds_of) for g in f.gpus}
    long = {name: s for name, s in held.items() if s >= seconds(alert.for_)}
    if not long:
        return None
    summary = f"{', '.join(long)} {what} for up to {minutes(max(long.values()))}."
    return Verdict(code, alert.severity, summary, advice)


def power_throttled(case: Case, cfg: Config) -> Verdict | None:
    """A GPU power-capped with its clocks held down for the power-throttling alert's ``for``."""
    return throttled(
        case,
        "power_throttled",
        "power_throttled_seconds",
        cfg.alerts.power_throttling,
        "ran at the power limit with clocks held down",
        "The job was slowed by the power cap, not by its code: ask whether the cap is intended "
        "(nvidia-smi -q -d POWER), or expect lower throughput on capped nodes.",
    )


def thermal_throttled(case: Case, cfg: Config) -> Verdict | None:
    """A GPU slowed by heat for the thermal-throttling alert's ``for``."""
    return throttled(
        case,
        "thermal_throttled",
        "thermal_throttled_seconds",
        cfg.alerts.thermal_throttling,
        "ran hot enough to slow down",
        "A cooling problem of the node, not of the job: report the host to its operators; "
        "rerunning elsewhere gives the job its full speed.",
    )


def tensor_cores_unused(case: Case, cfg: Config) -> Verdict | None:
    """A GPU publishing tensor-pipe activity whose engines were busy with the tensor pipes idle for at
    least ``report.tensor_unused_share`` of the time; never on an idle or stalled job."""
    f, r = case.figures, cfg.report
    if gpu_idle(case, cfg) is not None or gpu_stalled(case, cfg) is not None:
        return None
    unused = [
        g
        for g in f.gpus
        if g.tensor_mean is not None
        and g.tensor_judged_seconds
        and g.tensor_unused_seconds / g.tensor_judged_seconds >= r.tensor_unused_share
    ]
    if not unused:
        return None
    shares = ", ".join(f"{gpu_name(g)}: {percent(g.tensor_unused_seconds / g.tensor_judged_seconds)}" for g in unused)
    return Verdict(
        "tensor_cores_unused",
        "info",
        f"The engines were busy (at least {percent(r.tensor_engine_busy)} active) with the tensor pipes under "
        f"{percent(r.tensor_active_threshold)} for most of the run ({shares} of the time): the maths ran "
        "without the tensor cores, in FP32.",
        "Train in mixed precision (torch.autocast with bfloat16 or float16, and a GradScaler for float16), "
        "or at least let FP32 matrix products use TF32 (torch.backends.cuda.matmul.allow_tf32 = True, "
        "torch.set_float32_matmul_precision('high'), and NVIDIA_TF32_OVERRIDE not set to 0): on tensor-core "
        "GPUs that is several times the throughput.",
    )


def gpu_shared(case: Case, cfg: Config) -> Verdict | None:
    """A GPU held by more than one execution at the same moment at some sample (time-slicing, MPS)."""
    shared = [g for g in case.figures.gpus if g.shared]
    if not shared:
        return None

    def whom(g: GpuFigures) -> str:
        share = g.share_min or 1
        # A share is 1/n of the GPU for n holders; one too small to invert (5e-324 makes an infinity, which round()
        # refuses) is no count of holders anyone recorded.
        most = round(1 / share) if share >= MIN_SHARE else "many"
        if g.co_holders is None:
            return f"{gpu_name(g)} (up to {most} executions at once)"
        if not g.co_holders:
            return f"{gpu_name(g)} with executions outside this report's tenant"
        return f"{gpu_name(g)} with {', '.join(g.co_holders)}"

    own = [g for g in shared if g.own_values]
    equal = [g for g in shared if not g.own_values]
    split = []
    if own:
        split.append(
            f"On {', '.join(gpu_name(g) for g in own)} the exporter published each execution's own utilisation "
            "and memory use (KUBERNETES_VIRTUAL_GPUS): GPU-hours worked and energy were split in proportion to "
            "the holders' utilisation at each moment (equally while all were idle), GPU-hours billed 1/N to each "
            "of the N holders, and memory is counted against the whole GPU's capacity."
        )
    if equal:
        split.append(
            f"On {', '.join(gpu_name(g) for g in equal)} the exporter published the GPU's figures once per pod and "
            "cannot tell whose work they are, so GPU-hours billed and worked, energy and cost were split equally: "
            "1/N to each of the N executions holding it, at each moment."
        )
    whole = (
        "Utilisation and activity are the whole GPU's, the other executions' work included; "
        if equal
        else "Activity, power and temperature are the whole GPU's; "
    )
    return Verdict(
        "gpu_shared",
        "info",
        f"GPUs were shared with other executions at the same time: {'; '.join(whom(g) for g in shared)}. "
        + " ".join(split),
        f"Nothing to do if sharing was intended (time-slicing or MPS). {whole}for figures of this job alone, "
        "run it on a GPU of its own.",
    )


def telemetry_incomplete(case: Case, cfg: Config) -> Verdict | None:
    """Inputs missing (``missing_inputs``), no host CPU while utilisation was low enough for the
    underutilisation rule, which then cannot tell input from I/O bound, or no engine activity while
    utilisation was high enough for the stall rule (``missing_activity``)."""
    f = case.figures
    missing = missing_inputs(f, case.span_seconds)
    if low_utilization_seconds(f, cfg) is not None and f.cpu_during_low_util is None:
        missing.append("no host CPU series while utilisation was low: input or I/O bound cannot be told")
    if not missing:
        return None
    return Verdict(
        "telemetry_incomplete",
        cfg.alerts.telemetry_missing.severity,
        "Telemetry is incomplete: " + "; ".join(missing) + ".",
        "Verdicts that need the missing data are not given. Check that the GPU exporter (dcgm-exporter, or ROCm's "
        "device-metrics-exporter on AMD hosts) and node_exporter run and are scraped on these hosts, and that the "
        "optional fields are collected (an MI250X publishes power for one of its two GPUs only).",
    )


def not_judged(case: Case, cfg: Config) -> Verdict | None:
    """Verdicts not given because the execution's GPUs never publish a field they need (``missing_activity``):
    an info note naming them and the exporter setting that enables the field. Not a gap: nothing stopped."""
    missing = missing_activity(case.figures, cfg)
    if not missing:
        return None
    return Verdict(
        "not_judged",
        "info",
        "gpu_stalled and tensor_cores_unused were not judged: " + "; ".join(missing) + ".",
        "Collect the profiling fields: dcgm-exporter 4.0 and later collect DCGM_FI_PROF_GR_ENGINE_ACTIVE, "
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE and DCGM_FI_PROF_DRAM_ACTIVE by default; on 3.x add them to the "
        "counters file (-f, as in etc/dcp-metrics-included.csv). GPUs without DCP (before datacenter Volta, "
        "e.g. M60) cannot publish them, and a profiler holding the lock (Nsight, dcgmi profile --pause) hides "
        "them while it runs.",
    )


HEALTHY = Verdict(
    "healthy",
    "info",
    "No problem found: the GPUs were used, memory stayed under its limits and nothing throttled.",
    "Nothing to do.",
)
# The rules, in the order of CODES (``healthy`` is what none of them finding anything says); one rule
# gives either underutilisation verdict, since the host CPU decides which.
RULES: tuple[Rule, ...] = (
    gpu_oom,
    host_oom,
    xid_errors,
    gpu_stalled,
    gpu_idle,
    gpu_underutilized,
    power_throttled,
    thermal_throttled,
    tensor_cores_unused,
    gpu_shared,
    telemetry_incomplete,
    not_judged,
)


def judge(f: ExecutionFigures, cfg: Config, *, running: bool, span_seconds: float | None = None) -> list[Verdict]:
    """The verdicts for one execution's figures, most urgent first; ``healthy`` when nothing is found.

    ``span_seconds`` is how long the span is, which each GPU's samples should cover (None: gaps are
    not judged, as in the fleet view, which has no per-execution span).
    """
    case = Case(f, running, span_seconds)
    found = [v for rule in RULES if (v := rule(case, cfg)) is not None]
    if all(v.code in NOT_FINDINGS for v in found):
        found.append(HEALTHY)
    return sorted(found, key=lambda v: CODES.index(v.code))


def seconds(duration: str) -> float:
    """A Prometheus duration (an alert's ``for``) in seconds."""
    return parse_duration_seconds(duration)
