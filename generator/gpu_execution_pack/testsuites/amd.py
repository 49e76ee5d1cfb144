"""promtool unit tests of the recording rules on AMD hosts: the scenario library's AMD fleet.

The fleet (``library.amd_fleet``) is rendered as the configuration's Prometheus stores it, beside
node_exporter (and kube-state-metrics' pod labels in kubernetes mode), and every per-GPU series of
each execution is checked mid-run against the fleet's oracle (``scenario.amd.served``): its
identity labels and values, the series AMD does not publish absent, and the execution's power with
each partition in its share of the GPU. Mapping attribution is not rendered: the fleet's executions arrive
as its exporter attaches them (Slurm's job id or the workload's pod).
"""

from __future__ import annotations

from typing import Any

from gpu_execution_pack import catalog
from gpu_execution_pack.catalog import Series
from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.promql import call, format_duration, render, selector
from gpu_execution_pack.scenario import amd, library
from gpu_execution_pack.scenario.model import CLUSTER, STEP_SECONDS
from gpu_execution_pack.scenario.render import expand_notation
from gpu_execution_pack.testsuites.recording import (
    ROUND_TO,
    label_matchers,
    per_gpu_series,
    rounded,
    sample_labels,
)

# Residencies are ratios of two rates, and a mean's last bit differs between Prometheus versions: compared
# rounded, as the averaged series of the other suites are (recording.ROUND_TO).
ROUNDED = frozenset({catalog.GPU_POWER_VIOLATION, catalog.GPU_THERMAL_VIOLATION, catalog.EXECUTION_GPU_UTILIZATION_AVG})
ATTRIBUTION_MODES = ("label", "kubernetes")  # how the fleet's executions can arrive (see the docstring)


def renders(cfg: Config) -> bool:
    """Whether ``cfg``'s rules are tested on the AMD fleet: it reads AMD's exporter in a mode the fleet has."""
    return "amd" in cfg.vendors and cfg.attribution.mode in ATTRIBUTION_MODES


def check(series: Series, of: dict[str, str], samples: list[tuple[dict[str, str], float]], at: str) -> dict[str, Any]:
    """A promtool check that ``series`` (its samples with the labels ``of``) holds ``samples`` exactly;
    ratios of rates and means rounded to ROUND_TO."""
    picked = selector(series.name, *label_matchers(of))
    if series in ROUNDED:
        exp = [{"labels": sample_labels("", labels), "value": rounded(v)} for labels, v in samples]
        return {"expr": render(call("round", picked, ROUND_TO)), "eval_time": at, "exp_samples": exp}
    exp = [{"labels": sample_labels(series.name, labels), "value": v} for labels, v in samples]
    return {"expr": render(picked), "eval_time": at, "exp_samples": exp}


def amd_suite(cfg: Config) -> list[dict[str, Any]]:
    """One promtool test: the AMD fleet under ``cfg``, each execution's per-GPU series checked mid-run."""
    cluster = cluster_scope(cfg).labels(CLUSTER)
    fleet = amd.as_configured(library.amd_fleet(), cfg, CLUSTER)
    series = [*fleet.series(), *amd.fleet_node_series(fleet)]
    if cfg.attribution.mode == "kubernetes":
        series += amd.pod_label_series(fleet, cfg)
    minute = library.AMD_MID_RUN_MINUTE
    at = format_duration(minute * 60)
    checks: list[dict[str, Any]] = []
    unpublished = amd.unpublished(fleet, cfg, minute)
    for e in fleet.executions:
        execution = {catalog.EXECUTION_LABEL: e.id} | cluster  # the execution's own series carry these
        # The per-GPU series also carry the workload's namespace, the tenant, where it runs in a pod.
        owner = execution | ({cfg.api.tenant_label: e.namespace} if e.pod else {})
        rows = amd.served(fleet, e, cfg, minute)
        by_series: dict[Series, list[tuple[dict[str, str], float]]] = {}
        for row in rows:
            for s, value in row.values.items():
                by_series.setdefault(s, []).append((row.labels | owner, value))
        for s in unpublished:
            by_series[s] = []
        for s, samples in sorted(by_series.items(), key=lambda item: item[0].name):
            checks.append(check(s, owner, samples, at))
        for s, value in amd.execution_served(fleet, e, cfg, minute).items():  # the rollups keep the tenant
            checks.append(check(s, execution, [(owner, value)], at))
        # Billed per model: an MI300 partition in its share of the GPU, as a MIG instance is.
        for model_name, gpus in amd.billed_gpus(fleet, e, cfg, minute).items():
            of_model = {catalog.MODEL_LABEL: model_name}
            checks.append(check(catalog.MODEL_GPU_COUNT, execution | of_model, [(owner | of_model, gpus)], at))
    # A GPU or partition nobody holds (mi300b's partitions 2 to 7) reports, and has no per-GPU series.
    held = {g for e in fleet.executions for g in e.gpus}
    for host in fleet.hosts:
        for gpu in (g for g in host.gpus if g not in held):
            of_gpu = {catalog.HOST_LABEL: host.name, catalog.GPU_INDEX_LABEL: str(gpu.gpu_id)} | cluster
            checks.append({"expr": per_gpu_series(*label_matchers(of_gpu)), "eval_time": at, "exp_samples": []})
    return [
        {
            "name": "AMD Instinct fleet: MI300X whole and in CPX partitions, MI250X GCDs, three exporter releases",
            "interval": f"{STEP_SECONDS}s",
            "input_series": [{"series": s.selector, "values": expand_notation(s.samples)} for s in series],
            "promql_expr_test": checks,
        }
    ]
