"""What every recorded series should hold at an instant of a scenario: the tests' oracle.

Computed from the scenario's own model, never from the rules, so the promtool tests built
from it can fail.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from gpu_execution_pack import catalog
from gpu_execution_pack.catalog import EXECUTION_LABEL, HOST_LABEL
from gpu_execution_pack.config import Config
from gpu_execution_pack.promql.durations import parse_duration_seconds
from gpu_execution_pack.scenario import model, oracle, phases
from gpu_execution_pack.scenario.model import STEP_SECONDS, Execution, Gpu, Host, Scenario

TENANT_LABEL = "namespace"  # the default api.tenant_label


@dataclass(frozen=True)
class Sample:
    labels: dict[str, str]
    value: float


def gpu_labels(execution: Execution, gpu: Gpu, tenant: str = TENANT_LABEL) -> dict[str, str]:
    """A GPU's labels on the recorded per-GPU series; ``tenant`` is the config's ``api.tenant_label``."""
    labels = {
        EXECUTION_LABEL: execution.id,
        tenant: execution.namespace,  # every attribution mode carries the tenant (api.tenant_label)
        HOST_LABEL: gpu.host,
        "gpu": str(gpu.index),
        "UUID": gpu.uuid,
        "modelName": gpu.model,
    }
    if gpu.mig_instance:
        labels |= {"GPU_I_ID": gpu.mig_instance, "GPU_I_PROFILE": gpu.mig_profile}
    return labels


def attributable(scenario: Scenario, cfg: Config) -> Scenario:
    """``scenario``, refused where ``cfg``'s attribution cannot attribute its executions: under label attribution,
    a host whose dcgm-exporter maps pods through DRA or KUBERNETES_VIRTUAL_GPUS (``Host.copies_no_pod_labels``)
    publishes no execution id, so none of its executions is recorded; the oracle predicts only executions the
    exporters can name (such a scenario is tested under kubernetes attribution)."""
    if cfg.attribution.mode == "label" and (hosts := [h.name for h in scenario.hosts if h.copies_no_pod_labels]):
        raise ValueError(
            f"{scenario.name}: under label attribution the GPU series of {', '.join(hosts)} (DRA or virtual GPUs) "
            "carry no execution id; test it under attribution.mode: kubernetes"
        )
    return scenario


def running(scenario: Scenario, minute: float) -> list[Execution]:
    return [e for e in scenario.executions if e.phase_at(minute) is not None]


def _minutes(duration: str) -> float:
    return parse_duration_seconds(duration) / 60


def hosts_steady(scenario: Scenario, minute: float, cfg: Config | None = None) -> bool:
    """Whether every host's RAM and CPU are constant over the window the host CPU series reads.

    They average over the averaging window (``rate_window``, or twice ``node.cpu_rate_interval``) rates
    that each reach back one scrape interval (irate) or, where ``node.cpu_rate_interval`` is set, the
    rate's own window (``rate()`` over the interval or ``rate_window_fallback``).
    """
    cfg = cfg or Config()
    for host in scenario.hosts:
        reach = _minutes(cfg.cpu_rate_window) if cfg.node.cpu_rate_interval else host.node_scrape_seconds / 60
        window = _minutes(cfg.cpu_average_window) + reach
        steps = int(window * 60 // STEP_SECONDS)
        values = [oracle.host_truth(scenario, host, minute - k * STEP_SECONDS / 60) for k in range(steps + 1)]
        if any(v != values[0] for v in values):
            return False
    return True


def cpu_stepped_back(host: Host, minute: float, cfg: Config | None = None) -> bool:
    """Whether a CPU idle counter's step back is still seen: the host CPU series has no value then.

    The evaluation at the step back (minute J) rates it as a reset (irate: only there; ``rate()`` over its
    window, where ``node.cpu_rate_interval`` is set: until J plus that window); the host series average
    the recorded rates over their averaging window and have no value while such a rate lies within it
    (to the end where the window includes its start, as in Prometheus 2; a step sooner in Prometheus 3).
    """
    jump = host.node_cpu_backjump
    if jump is None:
        return False
    cfg = cfg or Config()
    seen = _minutes(cfg.cpu_rate_window) if cfg.node.cpu_rate_interval else 0.0
    return jump <= minute <= jump + seen + _minutes(cfg.cpu_average_window)


def sample_seconds(scenario: Scenario, minute: float, cfg: Config, store: tuple[Scenario, ...] = ()) -> float | None:
    """The seconds the GPU samples at ``minute`` stand for, on the scenario's grid (every group evaluated at
    every step): a step where any execution of the scenario held GPUs a step before (whether the sample's own
    execution, or one that ended then, its series not stale until this evaluation, for a first sample), else
    the config's ``rule_interval`` (None: no sample). ``store``: the scenarios one store holds with it, no
    cluster label parting them (``library.apart``), whose GPUs' previous samples a first sample reads too."""
    before = minute - STEP_SECONDS / 60
    if any(e.phase_at(before) is not None for s in (scenario, *store) for e in s.executions):
        return float(STEP_SECONDS)
    return parse_duration_seconds(cfg.rule_interval) if cfg.rule_interval else None


def expected(
    scenario: Scenario, minute: float, cfg: Config | None = None, store: tuple[Scenario, ...] = ()
) -> dict[str, list[Sample]]:
    """Expected samples of every recorded series at ``minute``, keyed by series name (the host CPU series
    read by ``cfg``'s windows; the built-in defaults' if None); ``store`` as ``sample_seconds`` reads it."""
    out: dict[str, list[Sample]] = defaultdict(list)
    # Each exporter target is on its host, whichever way its labels spell the host's name.
    for host in scenario.hosts:
        node = {"job": "node", "instance": host.node_instance, HOST_LABEL: host.name}
        out[catalog.NODE_EXPORTER_HOST.name].append(Sample(node, 1.0))
        outage = host.dcgm_outage
        if any(g.host == host.name for g in scenario.all_gpus()) and not (outage and outage[0] <= minute < outage[1]):
            dcgm = {"job": "dcgm-exporter", "instance": host.dcgm_instance, HOST_LABEL: host.name}
            out[catalog.GPU_EXPORTER_HOST.name].append(Sample(dcgm, 1.0))
    # Each MIG instance the exporter publishes, held or free, has its share of its GPU (no execution's labels).
    for gpu in scenario.all_gpus():
        outage = scenario.host(gpu.host).dcgm_outage
        if gpu.mig_instance and not (outage and outage[0] <= minute < outage[1]):
            instance = {"UUID": gpu.uuid, "GPU_I_ID": gpu.mig_instance, "GPU_I_PROFILE": gpu.mig_profile}
            out[catalog.GPU_INSTANCE_SHARE.name].append(Sample(instance, oracle.instance_share(scenario, gpu)))
    for collision in scenario.host_name_collisions:
        if collision.at(minute):
            out[catalog.NODE_HOST_COLLISIONS.name].append(Sample({HOST_LABEL: collision.name}, collision.machines))
    cfg = cfg or Config()
    attributable(scenario, cfg)
    tenant = cfg.api.tenant_label
    seconds = sample_seconds(scenario, minute, cfg, store)  # the same for every execution sampled now
    for e in running(scenario, minute):
        per_gpu = [(g, oracle.gpu_truth(scenario, e, g, minute)) for g in e.gpus]
        for gpu, truth in per_gpu:
            assert truth is not None
            for key, value in truth.items():
                out[key.name].append(Sample(gpu_labels(e, gpu, tenant), value))
            if seconds is not None:
                out[catalog.GPU_SAMPLE_SECONDS.name].append(Sample(gpu_labels(e, gpu, tenant), seconds))
        hosts = sorted({g.host for g in e.gpus})
        for host in hosts:
            labels = {EXECUTION_LABEL: e.id, HOST_LABEL: host}
            out[catalog.NODE_GPU_COUNT.name].append(Sample(labels, float(sum(g.host == host for g in e.gpus))))
            for key, value in oracle.host_truth(scenario, scenario.host(host), minute).items():
                if key is catalog.NODE_CPU_UTILIZATION and cpu_stepped_back(scenario.host(host), minute, cfg):
                    continue
                out[key.name].append(Sample(labels, value))
        truths = [t for _, t in per_gpu if t]
        ex = {EXECUTION_LABEL: e.id, tenant: e.namespace}  # the rollups keep the tenant beside the id
        utils = [t[catalog.GPU_UTILIZATION] for t in truths]
        out[catalog.EXECUTION_GPU_COUNT.name].append(Sample(ex, float(len(e.gpus))))
        out[catalog.EXECUTION_HOST_COUNT.name].append(Sample(ex, float(len(hosts))))
        out[catalog.EXECUTION_GPU_UTILIZATION_AVG.name].append(Sample(ex, sum(utils) / len(utils)))
        if memory := [t for t in truths if catalog.GPU_MEMORY_USED in t]:  # none where no GPU reports it
            out[catalog.EXECUTION_GPU_MEMORY_UTILIZATION_MAX.name].append(
                Sample(ex, max(t[catalog.GPU_MEMORY_UTILIZATION] for t in memory))
            )
            out[catalog.EXECUTION_GPU_MEMORY_USED_SUM.name].append(
                Sample(ex, sum(t[catalog.GPU_MEMORY_USED] for t in memory))
            )
        # Each GPU, or MIG instance, in the execution's share of it: a GPU it shares with other executions at
        # this minute in its share of the work, a MIG instance in its share of the GPU (oracle.instance_share).
        attributed = sum(t[catalog.GPU_POWER_ATTRIBUTED] for t in truths)
        out[catalog.EXECUTION_GPU_POWER_SUM.name].append(Sample(ex, float(attributed)))
        for gpu_series, execution_series in zip(
            catalog.GPU_ACTIVITY_SERIES, catalog.EXECUTION_ACTIVITY_SERIES, strict=True
        ):
            if active := [t[gpu_series] for t in truths if gpu_series in t]:
                out[execution_series.name].append(Sample(ex, sum(active) / len(active)))
        out[catalog.EXECUTION_GPU_TEMPERATURE_MAX.name].append(
            Sample(ex, max(t[catalog.GPU_TEMPERATURE] for t in truths))
        )
        for gpu_model in sorted({g.model for g in e.gpus}):
            of_model = [(g, t) for g, t in per_gpu if g.model == gpu_model and t]
            labels = {EXECUTION_LABEL: e.id, tenant: e.namespace, "modelName": gpu_model}
            # A GPU held by N executions at once is billed 1/N to each; a MIG instance in its share of the GPU
            # (its slices over those of every instance of the GPU: a 3g beside a free 4g bills 3/7 of a GPU).
            of_gpu = {g: oracle.instance_share(scenario, g) for g in e.gpus if g.model == gpu_model}
            shares = [instance / len(model.holders(scenario, g, minute)) for g, instance in of_gpu.items()]
            out[catalog.MODEL_GPU_COUNT.name].append(Sample(labels, float(sum(shares))))
            out[catalog.MODEL_GPU_UTILIZATION_SUM.name].append(
                Sample(labels, sum(t[catalog.GPU_WORKED] * of_gpu[g] for g, t in of_model))
            )
    return out


def conditions(scenario: Scenario, cfg: Config, minute: float) -> dict[str, list[Sample]]:
    """Expected samples of the report's recorded conditions at ``minute``: per GPU, memory at or above the
    GpuMemoryHigh threshold; per execution and tenant, mean utilisation under the GpuUnderutilized threshold,
    and meanwhile the busiest host CPU of the execution (where a host has one)."""
    attributable(scenario, cfg)
    out: dict[str, list[Sample]] = defaultdict(list)
    memory_high, underutilized = cfg.alerts.gpu_memory_high.threshold, cfg.alerts.gpu_underutilized.threshold
    tenant = cfg.api.tenant_label
    for e in running(scenario, minute):
        utils = []
        for gpu in e.gpus:
            truth = oracle.gpu_truth(scenario, e, gpu, minute)
            assert truth is not None
            utils.append(truth[catalog.GPU_UTILIZATION])
            # The device's fill, every holder's use counted; a GPU without memory fields is never high.
            memory = truth.get(catalog.GPU_DEVICE_MEMORY_UTILIZATION)
            high = memory is not None and memory >= memory_high
            out[catalog.GPU_MEMORY_HIGH.name].append(Sample(gpu_labels(e, gpu, tenant), float(high)))
        ex = {EXECUTION_LABEL: e.id, tenant: e.namespace}
        low = sum(utils) / len(utils) < underutilized
        out[catalog.EXECUTION_UNDERUTILIZED.name].append(Sample(ex, float(low)))
        cpus = [
            oracle.host_truth(scenario, scenario.host(host), minute)[catalog.NODE_CPU_UTILIZATION]
            for host in sorted({g.host for g in e.gpus})
            if not cpu_stepped_back(scenario.host(host), minute, cfg)
        ]
        if low and cpus:
            out[catalog.EXECUTION_CPU_WHILE_UNDERUTILIZED.name].append(Sample(ex, max(cpus)))
    return out


def prices(scenario: Scenario, minute: float, listed: dict[str, float], default: float) -> list[Sample]:
    """The price series: every listed model, and each other model some running execution holds."""
    in_use = {g.model for e in running(scenario, minute) for g in e.gpus}
    models = {**listed, **{m: default for m in in_use if m not in listed}}
    return [Sample({"modelName": m}, float(p)) for m, p in sorted(models.items())]


def eval_minutes(scenario: Scenario) -> list[float]:
    """The middle of every phase of every execution: where each phase's values are checked."""
    minutes = set()
    for e in scenario.executions:
        t = e.start_minute
        for name in e.phases:
            length = phases.PHASES[name].minutes
            minutes.add(t + length / 2)
            t += length
    return sorted(minutes)
