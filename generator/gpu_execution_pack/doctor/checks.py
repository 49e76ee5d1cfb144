"""The doctor's checklist: each check reads the deployment's facts beside the config and says pass,
info, warn or fail, with what it found and what to do.

A fail is a figure or alert that is wrong or missing as deployed (series the rules do not read, groups
not loaded, clusters merged); a warn costs time or hides a finding; info says what is so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from gpu_execution_pack import __version__, catalog
from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.config.loader import MAX_DURATION_SECONDS
from gpu_execution_pack.promql import render
from gpu_execution_pack.promql.durations import duration_text, parse_duration_seconds
from gpu_execution_pack.rules.alerts import DCGM_EXPORTER_DOWN
from gpu_execution_pack.rules.files import all_groups, rule_document, rules_digest
from gpu_execution_pack.rules.groups import AlertRule

from . import probe
from .probe import HOST_TARGET_LABEL, Deployment, Target

STATUSES: tuple[str, ...] = ("pass", "info", "warn", "fail")  # in rising order of concern
GROUP_PREFIX = "gpu-execution-pack."
# A group that takes this share of its interval has no room for a slow evaluation: the next is missed.
EVALUATION_WARN_SHARE = 0.5


@dataclass(frozen=True)
class Item:
    """One line of the checklist."""

    check: str
    status: str
    found: str
    fix: str = ""


def nvidia_generations_of(names: frozenset[str]) -> dict[str, frozenset[str]]:
    """For each dcgm-exporter raw metric present, the catalog's generations that publish it (node_exporter's
    metrics carry every generation too, as the rules read them alike: they are no sign of dcgm-exporter)."""
    generations: dict[str, set[str]] = {}
    for signal in catalog.SIGNALS.values():
        if signal.exporter != "dcgm":
            continue
        for raw in signal.raws:
            if raw.vendor == "nvidia" and raw.generations and raw.name in names:
                generations.setdefault(raw.name, set()).update(raw.generations)
    return {name: frozenset(g) for name, g in generations.items()}


def generations_found(names: frozenset[str]) -> tuple[str, ...]:
    """The fewest generations whose names cover every dcgm-exporter metric present, newest first on a tie
    (3.3 and 4.8 read the same names but for PCIe: a fleet without PCIe fields is read alike by both)."""
    uncovered = nvidia_generations_of(names)
    chosen: list[str] = []
    while uncovered:
        best = max(reversed(catalog.GENERATIONS), key=lambda g: sum(g in gs for gs in uncovered.values()))
        chosen.append(best)
        uncovered = {name: gs for name, gs in uncovered.items() if best not in gs}
    return tuple(g for g in catalog.GENERATIONS if g in chosen)


def amd_names(cfg: Config) -> frozenset[str]:
    """Every name device-metrics-exporter may publish a field under, with each configured prefix."""
    return frozenset(
        f"{prefix}{metric.name}"
        for signal in catalog.SIGNALS.values()
        if signal.amd is not None
        for metric in signal.amd.metrics
        for prefix in {*cfg.amd.metric_prefixes, "", "amd_"}
    )


def vendors_found(cfg: Config, d: Deployment) -> tuple[str, ...]:
    nvidia = bool(nvidia_generations_of(d.metric_names))
    amd = bool(d.metric_names & amd_names(cfg))
    return tuple(v for v, present in (("nvidia", nvidia), ("amd", amd)) if present)


def check_vendors(cfg: Config, d: Deployment) -> Item:
    found = vendors_found(cfg, d)
    unread = [v for v in found if v not in cfg.vendors]
    if unread:
        return Item(
            "vendors",
            "fail",
            f"exporters of {', '.join(unread)} publish, and the rules read no such GPU",
            f"set vendors: [{', '.join(found)}]",
        )
    if not found:
        return Item(
            "vendors",
            "fail",
            "no GPU exporter's metrics in this Prometheus",
            "scrape dcgm-exporter (or device-metrics-exporter) here, or point --prometheus at the one that does",
        )
    idle = [v for v in cfg.vendors if v not in found]
    if idle:
        return Item(
            "vendors",
            "warn",
            f"the rules read {', '.join(idle)} GPUs, and none publish",
            f"set vendors: [{', '.join(found)}] (each vendor read costs every per-GPU rule an `or` branch)",
        )
    return Item("vendors", "pass", f"GPU exporters found: {', '.join(found)}")


def check_generations(cfg: Config, d: Deployment) -> Item:
    if "nvidia" not in cfg.vendors or not nvidia_generations_of(d.metric_names):
        return Item("dcgm generations", "info", "no dcgm-exporter metrics read: nothing to check")
    found = generations_found(d.metric_names)
    unread = sorted(n for n, gs in nvidia_generations_of(d.metric_names).items() if not gs & set(cfg.dcgm.generations))
    if unread:
        return Item(
            "dcgm generations",
            "fail",
            f"{len(unread)} dcgm-exporter metrics are named as no generation of dcgm.generations names them "
            f"(e.g. {unread[0]}); their series are not recorded",
            f"set dcgm.generations: [{', '.join(repr(g) for g in found)}]",
        )
    extra = [g for g in cfg.dcgm.generations if g not in found]
    if extra:
        return Item(
            "dcgm generations",
            "warn",
            f"the fleet's names are those of generation(s) {', '.join(found)}; the rules also read {', '.join(extra)}",
            f"set dcgm.generations: [{', '.join(repr(g) for g in found)}] (fewer `or` branches per rule)",
        )
    return Item("dcgm generations", "pass", f"the rules read exactly the generation(s) found: {', '.join(found)}")


def check_optional_fields(cfg: Config, d: Deployment) -> Item:
    """The fields dcgm-exporter does not collect by default: which are there, and what the missing ones feed."""
    if "nvidia" not in cfg.vendors or not nvidia_generations_of(d.metric_names):
        return Item("optional fields", "info", "no dcgm-exporter metrics read: nothing to check")
    missing = []
    # Named as the fleet's exporters would publish them: the generations found (of those the config reads).
    found = tuple(g for g in generations_found(d.metric_names) if g in cfg.dcgm.generations) or cfg.dcgm.generations
    for signal in catalog.SIGNALS.values():
        raws = [r for r in signal.raws_for(cfg.dcgm.generations) if r.vendor == "nvidia"]
        # Collected by default only where every release of a generation found collects it: an exporter before
        # the release that made it a default counter (RawMetric.default_from) publishes it with a counters file only.
        default = any(r.default_in(g) for r in raws for g in found if g in r.generations)
        if raws and not default and not any(r.name in d.metric_names for r in raws):
            readers = [s.name for s in catalog.ALL_SERIES if any(signal.key in f.signals for f in s.formulas)]
            names = " or ".join(r.name for r in signal.raws_for(found) if r.vendor == "nvidia") or raws[0].name
            missing.append(f"{names} (feeds {', '.join(readers[:2]) or 'no served series'})")
    if not missing:
        return Item("optional fields", "pass", "every field beyond dcgm-exporter's default counters is collected")
    return Item(
        "optional fields",
        "info",
        f"not collected: {'; '.join(missing)}",
        "add them to dcgm-exporter's counters file (-f) where you want the series, verdicts and alerts they feed",
    )


def recording_group(cfg: Config, series: catalog.Series) -> str:
    """The name of the pack's group that records ``series`` for ``cfg``."""
    return next(g.name for g in all_groups(cfg) if any(getattr(r, "record", None) == series.name for r in g.rules))


def not_loaded(cfg: Config, d: Deployment, series: catalog.Series) -> str:
    """Where the group recording ``series`` is not loaded, what to say instead of judging what it records ("")."""
    group = recording_group(cfg, series)
    if any(g.name == group for g in d.groups):
        return ""
    return f"{group}, which records {series.name}, is not loaded here (see rule groups)"


def expected_groups(cfg: Config) -> dict[str, float]:
    """The pack's groups for ``cfg`` and each one's interval in seconds (0: the global evaluation interval)."""
    return {g.name: parse_duration_seconds(g.interval) if g.interval else 0.0 for g in all_groups(cfg)}


def check_groups(cfg: Config, d: Deployment) -> Item:
    expected = expected_groups(cfg)
    loaded = {g.name: g for g in d.groups if g.name.startswith(GROUP_PREFIX)}
    missing = [name for name in expected if name not in loaded]
    if missing:
        return Item(
            "rule groups",
            "fail",
            f"not loaded: {', '.join(missing)}",
            "add the generated rules/*.rules.yml to rule_files (or apply rules/kubernetes/) and reload",
        )
    extra = sorted(set(loaded) - set(expected))
    differ = [
        f"{n} every {loaded[n].interval_seconds:g}s (config: {expected[n]:g}s)"
        for n in expected
        if expected[n] and loaded[n].interval_seconds != expected[n]
    ]
    if extra or differ:
        found = "; ".join(([f"loaded but not in this config: {', '.join(extra)}"] if extra else []) + differ)
        return Item(
            "rule groups",
            "warn",
            found,
            "generate the rules from this config and deploy them, or point -c at the config they came from",
        )
    return Item("rule groups", "pass", f"all {len(expected)} groups loaded at the config's intervals")


def written_alert(rule: AlertRule) -> probe.AlertShape:
    """An alert as its file writes it, in the shape doctor reads a loaded one (``probe.alert_shape``)."""
    doc = rule_document(rule)
    for_seconds = parse_duration_seconds(rule.for_) if rule.for_ else 0.0
    return rule.alert, for_seconds, rule.severity, tuple(sorted(doc["annotations"].items()))


def alerts_differ(cfg: Config, d: Deployment) -> str:
    """Where the loaded alert group's alerts are not those this pack writes for ``cfg``, which; else "". A file of
    alerts only carries no version rule (its groups stay alerts only), so its alerts tell an old one: by their
    names, and one of another config (a threshold, a `for`, a severity, the runbook) by their annotations, whose
    words name the threshold and the duration. A key that changes only an alert's expression is not seen: the
    API shows the expression as Prometheus' printer writes it, which is not the pack's text."""
    written = {g.name: [r for r in g.rules if isinstance(r, AlertRule)] for g in all_groups(cfg)}
    out = []
    for g in d.groups:
        if g.name not in written or not (g.alerts or written[g.name]):
            continue
        names = sorted(r.alert for r in written[g.name])
        missing = sorted(set(names) - set(g.alerts))
        unknown = sorted(set(g.alerts) - set(names))
        if missing or unknown:
            parts = ([f"without {', '.join(missing)}"] if missing else []) + (
                [f"with {', '.join(unknown)}, which this pack does not write"] if unknown else []
            )
            out.append(f"{g.file or g.name} holds other alerts than this pack writes: {'; '.join(parts)}")
        elif g.alert_rules:
            expected = set(map(written_alert, written[g.name]))
            other = sorted({shape[0] for shape in g.alert_rules if shape not in expected})
            if other:
                out.append(
                    f"{g.file or g.name} holds {', '.join(other)} as another config writes them (their threshold, "
                    "for, severity or runbook differ)"
                )
    return "; ".join(out)


def other_config_files(cfg: Config, d: Deployment) -> list[str]:
    """The loaded pack rule files whose digest (their rules_info rule's) is not that of the groups of the same
    names ``cfg`` generates: rules of another config at this version. A file whose groups ``cfg`` does not all
    generate is left to the rule groups check; one written before the digest, to the version check."""
    generated = {g.name: g for g in all_groups(cfg)}
    by_file: dict[str, list[probe.LoadedGroup]] = {}
    for g in d.groups:
        if g.name.startswith(GROUP_PREFIX):
            by_file.setdefault(g.file, []).append(g)
    out = []
    for file, groups in sorted(by_file.items()):
        digests = {digest for g in groups for digest in g.digests if digest}
        names = {g.name for g in groups}
        if not digests or not names <= generated.keys():
            continue
        expected = rules_digest([g for name, g in generated.items() if name in names])
        if digests != {expected}:
            out.append(file)
    return out


def check_rules_version(cfg: Config, d: Deployment) -> Item:
    """The version each loaded rule file came from (its rules_info rule), against the installed pack; a file of
    alerts only carries none, and is judged by its alerts (``alerts_differ``). At this version, whether the loaded
    files are those the config generates (their digests: ``other_config_files``): a config that matches the
    fleet says nothing of rules deployed from another one."""
    files: dict[str, set[str]] = {}
    for g in d.groups:
        if g.name.startswith(GROUP_PREFIX) and g.records:
            files.setdefault(g.file, set()).update(g.versions)
    if not files:
        return Item("rules version", "info", "no pack rule file loaded: nothing to compare")
    fix = f"generate the rules with this pack ({__version__}) and the config, deploy them and reload"
    unversioned = sorted(file for file, versions in files.items() if not versions)
    other = sorted(f"{file} ({', '.join(sorted(v))})" for file, v in files.items() if v and v != {__version__})
    alerts = alerts_differ(cfg, d)
    configured = [] if other or unversioned else other_config_files(cfg, d)
    if other or unversioned or alerts or configured:
        found = "; ".join(
            ([f"rule files from another version: {', '.join(other)}"] if other else [])
            + ([f"rule files of a version before they carried theirs: {', '.join(unversioned)}"] if unversioned else [])
            + ([f"rule files generated from another config: {', '.join(configured)}"] if configured else [])
            + ([alerts] if alerts else [])
        )
        if configured or (alerts and not other and not unversioned):
            fix += ", or point -c at the config they came from"
        return Item("rules version", "warn", f"installed pack {__version__}; {found}", fix)
    return Item(
        "rules version",
        "pass",
        f"all {len(files)} versioned rule files from gpu-execution-pack {__version__}, as installed, and as the "
        "config generates them"
        + (
            " (the alerts as it writes them)"
            if any(g.alerts for g in d.groups if g.name.startswith(GROUP_PREFIX))
            else ""
        ),
    )


def check_evaluation(cfg: Config, d: Deployment) -> Item:
    shares = sorted(
        (
            (g.evaluation_seconds / g.interval_seconds, g.name)
            for g in d.groups
            if g.name.startswith(GROUP_PREFIX) and g.interval_seconds
        ),
        reverse=True,
    )
    if not any(g.name.startswith(GROUP_PREFIX) for g in d.groups):
        return Item("evaluation time", "info", "no pack group is loaded here (see rule groups)")
    if not shares:
        return Item("evaluation time", "info", "no pack group has been evaluated yet")
    share, name = shares[0]
    found = f"slowest group {name}: {share * 100:.0f} % of its interval"
    if share >= 1:
        return Item(
            "evaluation time",
            "fail",
            found + ": evaluations are missed",
            "doctor --write-config pins what the fleet has; or shard (docs/scaling.md)",
        )
    if share >= EVALUATION_WARN_SHARE:
        return Item("evaluation time", "warn", found, "doctor --write-config pins what the fleet has")
    return Item("evaluation time", "pass", found)


def first_few(names: list[str] | tuple[str, ...], most: int = 4) -> str:
    """``names`` joined by commas, the first ``most`` of them and ", ..." where there are more."""
    return ", ".join(names[:most]) + (", ..." if len(names) > most else "")


def targets_named(targets: tuple[str, ...]) -> str:
    """How many ``targets`` there are and the first few of them: "2 targets (a:9400, b:9400)"."""
    return f"{len(targets)} target{'s' * (len(targets) != 1)} ({first_few(targets)})"


def returned(value: float) -> str:
    """A figure Prometheus answered that is no number (NaN, an infinity), as said: "unknown (Prometheus returned
    NaN)", never a bare ``nan``."""
    return f"unknown (Prometheus returned {'NaN' if math.isnan(value) else f'{value:+}'.replace('inf', 'Inf')})"


def check_missed_iterations(cfg: Config, d: Deployment) -> Item:
    counted = {name: pair for name, pair in d.iterations.items() if name.startswith(GROUP_PREFIX) and pair[1]}
    if not counted:
        return Item("missed iterations", "info", "no pack group's iteration counters found (not evaluated yet?)")
    # Counters Prometheus answered as NaN (or an infinity) say nothing of what was missed: named as unknown.
    unknown = {name: pair for name, pair in counted.items() if not all(math.isfinite(v) for v in pair)}
    known = {name: pair for name, pair in counted.items() if name not in unknown}
    bad = next(v for pair in unknown.values() for v in pair if not math.isfinite(v)) if unknown else 0.0
    told = f"; missed iterations {returned(bad)} for {first_few(sorted(unknown), 3)}" if unknown else ""
    missed = sorted(((m, name, scheduled) for name, (m, scheduled) in known.items() if m), reverse=True)
    if missed:
        shares = {g.name: g.evaluation_seconds / g.interval_seconds for g in d.groups if g.interval_seconds}
        listed = ", ".join(
            f"{name} {m:g} of {scheduled:g}"
            + (f" (evaluation {shares[name] * 100:.0f} % of its interval)" if name in shares else "")
            for m, name, scheduled in missed[:3]
        )
        return Item(
            "missed iterations",
            "fail",
            f"evaluations missed: {listed} (their series have gaps; alerts and reports read them){told}",
            "doctor --write-config pins what the fleet has; or lengthen the group's interval, or shard "
            "(docs/scaling.md)",
        )
    if unknown:
        clear = f"no missed iteration in {len(known)} pack groups" if known else "no pack group's counters read"
        return Item("missed iterations", "info", clear + told)
    return Item("missed iterations", "pass", f"no missed iteration in {len(counted)} pack groups")


def check_scrape_intervals(cfg: Config, d: Deployment) -> Item:
    """The slowest scrape of a target the rules read (a job publishing GPU presence or host CPU counters: another
    job's interval, Prometheus scraping itself every 5m say, empties no rate of theirs) against the windows."""
    if not any(t.interval_seconds for t in d.targets):
        return Item("scrape intervals", "info", "no active scrape targets in this Prometheus (remote-written data?)")
    target = slowest_read_target(d)
    if target is None:
        return Item(
            "scrape intervals",
            "info",
            "no active target of a job that publishes what the rules read (federated or remote-written "
            "series?): their scrape intervals cannot be told here",
        )
    slowest = target.interval_seconds
    fallback, window = parse_duration_seconds(cfg.rate_window_fallback), parse_duration_seconds(cfg.rate_window)
    if fallback < 2 * slowest:
        named = f"{target.job} ({target.labels.get('instance', '?')})"
        return Item(
            "scrape intervals",
            "fail",
            f"{named} is scraped every {duration_text(slowest)}: rate_window_fallback {cfg.rate_window_fallback} "
            "holds fewer than two of its samples, so its rates and host CPU are empty",
            f"set rate_window_fallback to at least {duration_text(2 * slowest)}"
            if 2 * slowest <= MAX_DURATION_SECONDS
            # No window the config accepts holds two of its samples: the scrape is what to change.
            else f"scrape {named} more often: rate_window_fallback is at most {duration_text(MAX_DURATION_SECONDS)}",
        )
    if window < 2 * slowest:
        return Item(
            "scrape intervals",
            "info",
            f"slowest scrape every {slowest:g}s: rates use rate_window_fallback "
            f"({cfg.rate_window_fallback}) where rate_window ({cfg.rate_window}) holds one sample",
        )
    return Item("scrape intervals", "pass", f"slowest scrape every {slowest:g}s, within rate_window {cfg.rate_window}")


def check_attribution(cfg: Config, d: Deployment) -> Item:
    if not d.gpus:
        return Item("attribution", "info", "no GPU reports now")
    if unread := not_loaded(cfg, d, catalog.GPU_PRESENCE):
        return Item("attribution", "info", f"{d.gpus} GPUs report; which an execution holds cannot be told: {unread}")
    share = d.attributed_gpus / d.gpus
    found = f"{d.attributed_gpus} of {d.gpus} GPUs ({share * 100:.0f} %) are held by an execution now"
    if not d.attributed_gpus:
        return Item(
            "attribution",
            "warn",
            found,
            f"check attribution.mode ({cfg.attribution.mode}) and the label "
            "it reads: with jobs running, no GPU carrying an execution id means the series go unattributed",
        )
    return Item("attribution", "pass", found)


def check_attributed_gpu_time(cfg: Config, d: Deployment) -> Item:
    """The share of GPU-time over the last day that an execution held, per cluster: a cluster whose GPUs
    report and never carry an execution id is one whose attribution does not reach the rules."""
    if unread := not_loaded(cfg, d, catalog.GPU_PRESENCE):
        return Item("attributed GPU-time", "info", f"cannot be told: {unread}")
    if not any(total for total, _ in d.gpu_time.values()):
        if d.gpus:  # GPUs report now, yet no step of the span holds one: a server younger than one step
            return Item(
                "attributed GPU-time",
                "info",
                f"no GPU-time counted yet: the last day is read in {probe.COVERAGE_STEP} steps and none holds a "
                f"GPU sample (this Prometheus has under {probe.COVERAGE_STEP} of data?); run doctor again later",
            )
        return Item("attributed GPU-time", "info", "no GPU reported over the last day")
    # A count Prometheus answered as NaN (or an infinity) is no share: named as unknown, never "nan %".
    shares = {
        cluster or "the store": held / total if math.isfinite(total) and math.isfinite(held) else math.nan
        for cluster, (total, held) in sorted(d.gpu_time.items())
        if total
    }
    unknown = {
        cluster or "the store": next(v for v in pair if not math.isfinite(v))
        for cluster, pair in d.gpu_time.items()
        if not all(math.isfinite(v) for v in pair)
    }
    found = "over the last day, GPU-time held by an execution: " + ", ".join(
        f"{cluster} {returned(unknown[cluster])}" if cluster in unknown else f"{cluster} {share * 100:.0f} %"
        for cluster, share in shares.items()
    )
    unattributed = [cluster for cluster, share in shares.items() if not share]
    if unattributed:
        return Item(
            "attributed GPU-time",
            "warn",
            found,
            f"in {', '.join(unattributed)}: check that its exporters carry what attribution.mode "
            f"({cfg.attribution.mode}) reads; its GPU-time is counted to no execution",
        )
    return Item("attributed GPU-time", "info" if unknown else "pass", found)


def check_shared_gpus(cfg: Config, d: Deployment) -> Item:
    """GPUs the device plugin shares (time-slicing, MPS) that dcgm-exporter publishes with one pod each: without
    KUBERNETES_VIRTUAL_GPUS its pod mapping keeps one pod per GPU, the last the kubelet lists, so that pod is
    billed the whole GPU and the others nothing, and no series shows it."""
    if d.shared_gpu_nodes is None:
        return Item(
            "shared GPUs",
            "info",
            f"cannot be told: no {render(probe.advertised_gpus())} (kube-state-metrics) to compare the GPUs reported "
            "with",
        )
    if not d.shared_gpu_nodes:
        return Item("shared GPUs", "pass", "no node advertises more nvidia.com/gpu than the GPUs it reports")
    shared = f"{len(d.shared_gpu_nodes)} nodes share their GPUs (nvidia.com/gpu advertised over the GPUs reported)"
    if cfg.attribution.mode == "mapping" or not d.unlabelled_shared_nodes:
        how = "a mapping metric names" if cfg.attribution.mode == "mapping" else "their series carry vgpu: they name"
        return Item("shared GPUs", "pass", f"{shared}; {how} every holder")
    nodes = d.unlabelled_shared_nodes
    return Item(
        "shared GPUs",
        "warn",
        f"{shared}, and on {len(nodes)} ({first_few(nodes)}) no GPU series "
        f"carries {catalog.VGPU_LABEL}: dcgm-exporter then labels each GPU with one pod only, which is billed the "
        "whole GPU while the others sharing it are billed nothing",
        "set KUBERNETES_VIRTUAL_GPUS=true on dcgm-exporter, and attribution.mode: kubernetes (its pod series carry "
        "no pod labels): docs/report.md, Shared GPUs",
    )


def check_mig_utilization(cfg: Config, d: Deployment) -> Item:
    """MIG instances without engine activity: DCGM publishes no GPU_UTIL for an instance, so engine activity is its
    only utilisation, and what the rules count an instance held by. Without it an execution on MIG instances holds
    no GPU in the pack's series: no GPU-hours, no report, no alert, while its memory and power are recorded."""
    if not d.mig_instances:
        return Item("MIG utilisation", "info", "no MIG instance reports now")
    if not d.unmeasured_mig_instances:
        return Item("MIG utilisation", "pass", f"all {d.mig_instances} MIG instances publish engine activity")
    targets = d.unmeasured_mig_targets
    activity = " or ".join(r.name for r in catalog.SIGNALS["gr_engine_active"].raws if r.vendor == "nvidia")
    engine = next(r for r in catalog.SIGNALS["gr_engine_active"].raws if r.default_from)  # the DCGM 3 name
    return Item(
        "MIG utilisation",
        "warn",
        f"{d.unmeasured_mig_instances} of {d.mig_instances} MIG instances report without engine activity ({activity}"
        f"; targets {first_few(targets)}): a MIG instance has no GPU_UTIL, "
        "so the executions on them hold no GPU in the recorded series (no GPU-hours, report or alerts)",
        f"collect {engine.name}: dcgm-exporter's dcp-metrics-included.csv has it (its default-counters.csv only from "
        f"{engine.default_from} on), or add it to your -f counters file; it needs DCGM's profiling module, "
        "which a profiler holding the GPU (Nsight, CUPTI) blocks",
    )


def check_mig_job_mapping(cfg: Config, d: Deployment) -> Item:
    """MIG instances that each carry several jobs' ids: dcgm-exporter's HPC job mapping (Slurm) read one file per GPU
    index before it read one per instance, so every instance of GPU N carried every job of file N. Each job is then
    counted a holder of every instance of the GPU (billed a share of each, its work split with jobs it never ran
    beside), which reads as time-slicing and no other check tells apart."""
    if d.crowded_mig_instances is None:
        return Item("MIG job mapping", "info", f"attribution.mode {cfg.attribution.mode}: no job id on the raw series")
    if not d.crowded_mig_instances:
        return Item("MIG job mapping", "pass", "no MIG instance carries several jobs' ids at once")
    return Item(
        "MIG job mapping",
        "warn",
        f"{d.crowded_mig_instances} MIG instances carry several {cfg.execution_label} ids at once without "
        f"{catalog.VGPU_LABEL} (targets {first_few(d.crowded_mig_targets)}): a job mapping file per GPU gives every "
        "instance of the GPU every job in it, so each job holds, and is billed a share of, instances it never ran on",
        "write one job mapping file per MIG instance, named <gpu>.<GPU_I_ID> (or its MIG UUID), in "
        "--hpc-job-mapping-dir, and run a dcgm-exporter that reads them (an older one reads one file per GPU index)",
    )


def check_pod_labels(cfg: Config, d: Deployment) -> Item:
    """dcgm-exporter under --use-old-namespace spells each GPU's UUID label uuid, and the workload's pod labels
    pod_name, pod_namespace and container_name. The rules tell GPUs apart by UUID (a GPU shared by executions, a MIG
    instance's GPU), and read pod and namespace: kubernetes attribution joins kube_pod_labels on them, and the tenant
    is api.tenant_label. Without UUID every GPU of a host reads as one device, held by every execution on the host;
    without the pod labels a GPU is held by no execution, or by one without its tenant; no other check says why."""
    old = ", ".join((catalog.OLD_UUID_LABEL, *catalog.OLD_POD_LABELS.values()))
    if not d.old_pod_label_targets:
        return Item("pod labels", "pass", f"no GPU series carries dcgm-exporter's old labels ({old})")
    some = targets_named(d.old_pod_label_targets)
    lost = (
        f"their GPUs have no {catalog.UUID_LABEL}, so every GPU of a host reads as one device, shared by every "
        "execution on the host"
    )
    if cfg.attribution.mode == "kubernetes":  # joined to kube_pod_labels on namespace and pod: no match
        lost += ", and are held by no execution (kubernetes attribution joins pod labels on namespace and pod)"
    elif cfg.api.tenant_label in catalog.OLD_POD_LABELS:
        lost += f", and their executions have no tenant ({cfg.api.tenant_label})"
    renamed = {catalog.UUID_LABEL: catalog.OLD_UUID_LABEL, **catalog.OLD_POD_LABELS}
    return Item(
        "pod labels",
        "warn",
        f"the GPU series of {some} carry {old}: dcgm-exporter's spelling under --use-old-namespace, which the "
        f"rules do not read (they read {', '.join(renamed)}): " + lost,
        "run dcgm-exporter without --use-old-namespace (DCGM_EXPORTER_USE_OLD_NAMESPACE), or rename them at "
        "scrape: a metric_relabel_configs entry per label copying "
        + ", ".join(f"{spelt} to {label}" for label, spelt in renamed.items()),
    )


def check_claimed_gpus(cfg: Config, d: Deployment) -> Item:
    """GPUs a pod holds through a DRA claim (dra_claim_name) or as a virtual GPU (vgpu) whose series carry no
    execution id under label attribution: dcgm-exporter copies the pod's own labels (--kubernetes-enable-pod-labels,
    how label attribution gets its id on Kubernetes) on its device-plugin path only, not on the DRA path nor under
    KUBERNETES_VIRTUAL_GPUS (``Process`` in its transformation/kubernetes.go). No flag of the exporter adds them
    there, so these GPUs are held by no execution; only the attribution check's share says something is off."""
    name, labels = "claimed GPUs", f"{catalog.DRA_CLAIM_LABEL} or {catalog.VGPU_LABEL}"
    if d.podless_claim_targets is None:
        return Item(name, "info", f"attribution.mode {cfg.attribution.mode}: the execution id is not read off these")
    if not d.podless_claim_targets:
        return Item(name, "pass", f"no GPU series with {labels} lacks {cfg.execution_label}")
    return Item(
        name,
        "warn",
        f"the GPU series of {targets_named(d.podless_claim_targets)} carry {labels} "
        f"(a pod's DRA claim or virtual GPU) and no {cfg.execution_label}: dcgm-exporter copies pod labels "
        "(--kubernetes-enable-pod-labels) onto a GPU held through the device plugin only, so under label "
        "attribution these GPUs are held by no execution",
        "set attribution.mode: kubernetes: it reads the execution id from kube-state-metrics' kube_pod_labels "
        f"(label_{cfg.execution_label}, in its --metric-labels-allowlist) joined on the namespace and pod these "
        "series carry",
    )


@dataclass(frozen=True)
class WatchedJobs:
    """One GPU exporter's jobs against the selector of its `up` series that the exporter-down alert reads."""

    exporter: str
    setting: str  # the config key of the selector
    selected: str  # its value
    jobs: tuple[str, ...]  # the jobs publishing the exporter's series now
    watched: tuple[str, ...]  # the jobs of the `up` series the selector picks

    def unwatched(self) -> list[str]:
        return [job for job in self.jobs if job not in self.watched]


def check_exporter_targets(cfg: Config, d: Deployment) -> Item:
    """The GPU exporter targets the exporter-down alert watches: selectors.dcgm_targets picks dcgm-exporter's `up`
    series, amd.targets device-metrics-exporter's (where vendors has amd). A job that publishes an exporter's series
    and none of whose `up` series its selector selects (the prometheus-community chart's
    kubernetes-service-endpoints or kubernetes-pods job, a static job named after the hosts, AMD's example job
    gpu_metrics) holds exporters that can go down without the alert firing, and no other check says so."""
    name = "exporter targets"
    asked = []  # None: not asked, the config reading no GPU of that vendor
    if d.dcgm_target_jobs is not None:
        dcgm = cfg.selectors.dcgm_targets
        asked.append(WatchedJobs("dcgm-exporter", "selectors.dcgm_targets", dcgm, d.dcgm_jobs, d.dcgm_target_jobs))
    if d.amd_target_jobs is not None:
        amd = cfg.amd.targets
        asked.append(WatchedJobs("device-metrics-exporter", "amd.targets", amd, d.amd_jobs, d.amd_target_jobs))
    if not asked:
        return Item(name, "info", "no GPU exporter's targets asked (vendors without nvidia or amd)")
    reporting = [e for e in asked if e.jobs]
    if not reporting:
        return Item(name, "info", f"no {' or '.join(e.exporter for e in asked)} series reports now")
    found, fixes = [], []
    for e in reporting:
        if unwatched := e.unwatched():
            some = f"job{'s' * (len(unwatched) != 1)} {first_few(unwatched)}"
            found.append(
                f"no up series of {some}, which publish{'es' * (len(unwatched) == 1)} {e.exporter}'s series, "
                f"matches {e.setting} ({e.selected})"
            )
            fixes.append(f'set {e.setting} to select them, e.g. job="{unwatched[0]}"')
    if not found:
        selects = (f"{e.setting} ({e.selected}) selects the targets of {first_few(e.jobs)}" for e in reporting)
        return Item(name, "pass", "; ".join(selects))
    return Item(
        name,
        "warn",
        "; ".join(found) + f": {DCGM_EXPORTER_DOWN.name} cannot fire when one of its targets goes down",
        "; ".join(fixes) + "; where other exporters share the job, add a label only the GPU exporter's targets carry "
        "(its service or app label)",
    )


def check_host_identity(cfg: Config, d: Deployment) -> Item:
    """Under node.host_identity: scrape the rules take a GPU's and a host's name from the target label hostname, as
    is: a target without it is recorded with an empty host, so its GPUs are joined to no host's RAM and CPU (and
    the GPUs of every such target share one host name), and nothing else says so."""
    name, label = "host identity", HOST_TARGET_LABEL
    if not cfg.node.at_scrape:
        return Item(name, "pass", "node.host_identity: join: the rules find each target's host from what it publishes")
    if not d.unnamed_host_targets:
        return Item(name, "pass", f"every GPU and host CPU series reporting carries the target label {label}")
    return Item(
        name,
        "fail",
        f"node.host_identity is scrape, but the GPU or host CPU series of {targets_named(d.unnamed_host_targets)} "
        f"carry no {label}: the rules record them with an empty host, "
        "joined to no host's RAM and CPU",
        f"set the target label {label} on every dcgm-exporter and node_exporter target in your scrape config (from "
        "the node's name, as the generated scrape snippets do), or set node.host_identity: join",
    )


def check_host_names(cfg: Config, d: Deployment) -> Item:
    if unread := not_loaded(cfg, d, catalog.NODE_HOST_COLLISIONS):
        return Item("host names", "info", f"collisions cannot be told: {unread}")
    if d.collisions:
        return Item(
            "host names",
            "warn",
            f"two machines claim: {', '.join(d.collisions)}",
            "make both exporters publish one spelling, or set node.host_regex (docs/runbook.md)",
        )
    return Item("host names", "pass", "no host name is claimed by two machines")


def check_clusters(cfg: Config, d: Deployment) -> Item:
    several = {label: values for label, values in d.cluster_values.items() if len(values) > 1}
    scope = cluster_scope(cfg)
    if scope.enabled and scope.label not in d.cluster_values and d.gpus:
        return Item(
            "clusters",
            "fail",
            f"cluster_label is {scope.label!r} and no GPU series carries it",
            "set cluster_label to the label your Prometheus servers' external_labels add, or empty",
        )
    if not scope.enabled and several:
        label, values = sorted(several.items())[0]
        return Item(
            "clusters",
            "fail",
            f"{len(values)} clusters in one store ({label}: {', '.join(values[:4])}) "
            "and no cluster_label: their executions and hosts are merged",
            f"set cluster_label: {label}",
        )
    return Item("clusters", "pass", f"clusters: {', '.join(d.cluster_values.get(scope.label, ())) or 'one'}")


def check_retention(cfg: Config, d: Deployment) -> Item:
    if not d.retention:
        return Item("retention", "info", "this server states no retention (Thanos, Mimir?)")
    return Item("retention", "info", f"{d.retention}: a report or the endpoint cannot reach further back")


CHECKS: tuple[Callable[[Config, Deployment], Item], ...] = (
    check_vendors,
    check_generations,
    check_optional_fields,
    check_groups,
    check_rules_version,
    check_evaluation,
    check_missed_iterations,
    check_scrape_intervals,
    check_attribution,
    check_attributed_gpu_time,
    check_shared_gpus,
    check_mig_utilization,
    check_mig_job_mapping,
    check_pod_labels,
    check_claimed_gpus,
    check_exporter_targets,
    check_host_identity,
    check_host_names,
    check_clusters,
    check_retention,
)


def checklist(cfg: Config, d: Deployment) -> list[Item]:
    return [check(cfg, d) for check in CHECKS]


def worst(items: list[Item]) -> str:
    return max((i.status for i in items), key=STATUSES.index, default="pass")


def slowest_read_target(d: Deployment) -> Target | None:
    """The active target scraped least often among the jobs that publish what the rules read (every job where
    those could not be told); None where there is none."""
    targets = [t for t in d.targets if t.interval_seconds and (d.read_jobs is None or t.job in d.read_jobs)]
    return max(targets, key=lambda t: t.interval_seconds, default=None)


def hosts_named_at_scrape(d: Deployment) -> bool:
    """Whether every target carries a host target label (what node.host_identity: scrape reads), and so does every
    GPU and host CPU series reporting (the targets listed are this server's own: remote-written or federated
    series, or another shard's, are named by theirs)."""
    return bool(d.targets) and all(HOST_TARGET_LABEL in t.labels for t in d.targets) and not d.unnamed_host_targets
