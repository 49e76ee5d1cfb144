"""The pack's configuration keys: one YAML file, validated strictly against the dataclasses below.

Each key carries its default, a line saying what it is and a line saying why one would change
it; ``gpu_execution_pack.docs.configuration`` renders those into docs/configuration.md, so the
schema here is the only place a key is described. ``loader`` does the validating.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpu_execution_pack import catalog
from gpu_execution_pack.config.alertmanager import Alertmanager
from gpu_execution_pack.config.loader import ConfigError, check_selectors, opt, section
from gpu_execution_pack.promql import Matcher, parse_matchers
from gpu_execution_pack.promql.durations import duration_text, parse_duration_seconds

SEVERITIES = ("critical", "warning", "info")
CAUSE_SEVERITIES = ("warning", "info")  # alerts about causes (throttling) must not page


def severity(default: str) -> Any:
    """An alert's severity key."""
    return opt(default, "The alert's severity label.", "Your routing pages on a different level.", choices=SEVERITIES)


def for_duration(default: str, doc: str, why: str) -> Any:
    """An alert's ``for`` key (``for_`` in Python, where ``for`` is reserved)."""
    return opt(default, doc, why, kind="duration", yaml_name="for")


@dataclass(frozen=True)
class Attribution:
    mode: str = opt(
        "label",
        "How DCGM series are tied to executions: `label` (the execution label is on the DCGM series "
        "themselves), `mapping` (a mapping metric joined on the GPU's UUID and MIG instance id), or "
        "`kubernetes` (kube-state-metrics' kube_pod_labels joined on namespace and pod).",
        "Use `mapping` when a scheduler exporter publishes which GPU runs which job (CEEMS style) and "
        "the raw series carry no job label; `kubernetes` when executions are pods labelled with their id.",
        choices=("label", "mapping", "kubernetes"),
    )
    mapping_metric: str = opt(
        "execution_gpu_info",
        "mapping mode: the metric, value 1, that says an execution holds a GPU; labels: the execution "
        "label, UUID, and GPU_I_ID on MIG instances.",
        "Your scheduler exporter publishes the mapping under another name.",
        kind="metric",
    )
    mapping_selector: str = opt(
        "",
        "mapping mode: label matchers added to the mapping metric's selector.",
        "Several exporters publish the mapping metric and only one is authoritative.",
        kind="selector",
    )
    kubernetes_metric: str = opt(
        "kube_pod_labels",
        "kubernetes mode: the kube-state-metrics series carrying pod labels as label_<name>; the "
        "execution label is read as label_<execution_label>.",
        "You record pod labels under another metric.",
        kind="metric",
    )
    pod_info_metric: str = opt(
        "kube_pod_info",
        "kube-state-metrics' series naming each pod's node (labels namespace, pod, node); where "
        "dcgm-exporter's host label is its own pod name (the upstream Helm chart without NODE_NAME), the "
        "exporter pod's node names its GPUs' host. Read in every attribution mode; absent is fine.",
        "You record kube_pod_info under another name.",
        kind="metric",
    )
    kubernetes_selector: str = opt(
        "",
        "kubernetes mode: label matchers added to the pod-labels selector.",
        "Several kube-state-metrics instances are scraped, e.g. one per shard or cluster.",
        kind="selector",
    )

    def __post_init__(self) -> None:
        check_selectors(self, "attribution")

    @property
    def mapping_matchers(self) -> tuple[Matcher, ...]:
        """``mapping_selector`` as matchers."""
        return parse_matchers(self.mapping_selector)

    @property
    def kubernetes_matchers(self) -> tuple[Matcher, ...]:
        """``kubernetes_selector`` as matchers."""
        return parse_matchers(self.kubernetes_selector)


@dataclass(frozen=True)
class Selectors:
    dcgm: str = opt(
        "",
        'Label matchers added to every DCGM selector, e.g. `job="dcgm-exporter"`. Empty by default: '
        "DCGM metric names are specific and job names differ between installs.",
        "Another exporter publishes DCGM-named metrics, or one Prometheus holds several clusters.",
        kind="selector",
    )
    node: str = opt(
        "",
        'Label matchers added to every node_exporter selector, e.g. `job="node"`.',
        "Several jobs export node_* metrics (e.g. node_exporter on hosts and in a VM image).",
        kind="selector",
    )
    dcgm_targets: str = opt(
        'job=~".*dcgm.*"',
        "Label matchers that pick dcgm-exporter's scrape targets out of `up`, for the exporter-down alert. "
        "The default matches the job names of dcgm-exporter's and the GPU operator's Helm charts.",
        'Your scrape job for dcgm-exporter is named without `dcgm`, e.g. `job="gpu-metrics"`.',
        kind="selector",
    )

    def __post_init__(self) -> None:
        check_selectors(self, "selectors")

    # The keys hold the text the user wrote (docs and the runbook quote it); rules read the matchers,
    # parsed once per text (parse_matchers keeps them).
    @property
    def dcgm_matchers(self) -> tuple[Matcher, ...]:
        """``dcgm`` as matchers."""
        return parse_matchers(self.dcgm)

    @property
    def node_matchers(self) -> tuple[Matcher, ...]:
        """``node`` as matchers."""
        return parse_matchers(self.node)

    @property
    def dcgm_targets_matchers(self) -> tuple[Matcher, ...]:
        """``dcgm_targets`` as matchers."""
        return parse_matchers(self.dcgm_targets)


@dataclass(frozen=True)
class Dcgm:
    generations: tuple[str, ...] = opt(
        catalog.GENERATIONS,
        "dcgm-exporter generations whose metric names the rules read: "
        + "; ".join(f"`{g}`: {n}" for g, n in catalog.GENERATION_NOTES.items())
        + ".",
        "Drop generations your fleet no longer runs: each one adds an `or` branch to every rule.",
        choices=catalog.GENERATIONS,
    )
    violation_counter_unit: str = opt(
        "ns",
        "Unit of DCGM_FI_DEV_POWER_VIOLATION and DCGM_FI_DEV_THERMAL_VIOLATION: `ns`, as NVML and the "
        "dcgm_fields.h of DCGM 3.3 and later say, or `us`, as older dcgm_fields.h and dcgm-exporter's "
        "counters CSV say.",
        "Your exporter's counters advance 1,000 times slower or faster than wall time while throttled.",
        choices=("ns", "us"),
    )


@dataclass(frozen=True)
class Amd:
    selector: str = opt(
        "",
        'Label matchers added to every selector of ROCm device-metrics-exporter metrics, e.g. `job="amd-metrics"`.',
        "Another exporter publishes gpu_* metrics (AMD's names are generic), or one Prometheus holds several clusters.",
        kind="selector",
    )
    targets: str = opt(
        'job=~".*(amd|rocm|device-metrics).*"',
        "Label matchers that pick device-metrics-exporter's scrape targets out of `up`, for the exporter-down "
        "alert. The default matches the Helm chart's job (`<release>-amdgpu-metrics-exporter`).",
        'Your scrape job for it is named otherwise, e.g. `job="gpu_metrics"` as in AMD\'s Prometheus example.',
        kind="selector",
    )
    metric_prefixes: tuple[str, ...] = opt(
        ("", "amd_"),
        "Metric-name prefixes the exporter's names may carry (its `MetricsFieldPrefix`): none from the "
        "binary and the Docker image, `amd_` from the Helm chart and the Debian package (v1.3.0 on).",
        "Your exporters are configured with another prefix; or all with one, and you drop the other from "
        "the selectors.",
        kind="prefix",
    )
    execution_label: str = opt(
        "job_id",
        "Label of device-metrics-exporter's series that carries the execution id where `execution_label` is "
        "absent, in label mode: the Slurm job id, which the exporter attaches since v1.3.1.",
        "Your AMD GPUs carry the id under another label (`pod` in Kubernetes, read through kubernetes mode).",
        kind="label",
        empty_ok=True,
    )
    model_names: tuple[tuple[str, str], ...] = opt(
        (
            ("(?i).*MI210.*|102-D67305-.*", "AMD Instinct MI210"),
            ("(?i).*MI250X.*", "AMD Instinct MI250X"),
            ("(?i).*MI300X.*|102-G30211-.*", "AMD Instinct MI300X"),
            ("(?i).*MI325X.*", "AMD Instinct MI325X"),
        ),
        "The `modelName` of AMD GPUs: a regular expression over the exporter's `card_series` (the product "
        "name, where published) or else its `card_model` (a board part number), and the name it gives.",
        "Your boards' part numbers or product names are not listed, or your prices are keyed by other names.",
        kind="model_names",
    )

    def __post_init__(self) -> None:
        check_selectors(self, "amd")

    @property
    def matchers(self) -> tuple[Matcher, ...]:
        """``selector`` as matchers."""
        return parse_matchers(self.selector)

    @property
    def targets_matchers(self) -> tuple[Matcher, ...]:
        """``targets`` as matchers."""
        return parse_matchers(self.targets)


@dataclass(frozen=True)
class Node:
    host_identity: str = opt(
        "join",
        "Where a GPU's and a host's `hostname` comes from: `join` (the rules find each exporter target's host "
        "from the names the exporters publish, with the exact-first host map below) or `scrape` (your scrape "
        "config sets the target label `hostname` on both exporters' targets, as the generated scrape snippets "
        "do, e.g. from a Kubernetes pod's node; the rules read it as is and skip the host map). Under `scrape` "
        "an exporter's own `hostname` arrives as `exported_hostname` and is not read; a target without the "
        "label is recorded with an empty host.",
        "Your service discovery knows each target's node and you relabel it at scrape: `scrape` costs the "
        "per-GPU rules no join (docs/benchmarks.md).",
        choices=("join", "scrape"),
    )
    host_regex: str = opt(
        "([^.]+).*",
        "Regex whose first group is a host's name where the exporters spell it differently. A GPU's host is "
        "first the node whose nodename equals its host label (hostname, Hostname, or its exporter pod's "
        "Kubernetes node) exactly, and the series name it so (an FQDN both exporters give stays an FQDN); "
        "only where no nodename matches exactly are both names read through this regex, and a GPU and a host "
        "whose names agree after it are the same machine. The default keeps the short name, so `gpu-01` and "
        "`gpu-01.cluster.local` agree, and such hosts are named by their short name. Where two machines' "
        "nodenames agree after it (`gpu-01.dc1.example.com` and `gpu-01.dc2.example.com`), no GPU is joined "
        "by that name: each node keeps its whole nodename, its GPUs find it only by an exact name or by the "
        "scrape address they share, and GpuExecutionHostNameCollision fires.",
        "Your host names differ only after the first dot (e.g. `rack1.gpu-01` and `rack2.gpu-01`): make both "
        "exporters report the same spelling (then they match exactly), or use `(.+)`.",
        kind="regex",
    )
    placeholder_nodenames: str = opt(
        "localhost|localhost[.]localdomain|[0-9a-f]{12}",
        "Regex of nodenames that name no machine: badly provisioned hosts, and node_exporter in a container "
        "without the host's UTS namespace (a 12-hex-digit container id). Such a node_exporter target is named by "
        "the dcgm-exporter scraped from the same address, or by that address.",
        "Your images ship another default hostname.",
        kind="regex_any",
    )
    cpu_rate_interval: str = opt(
        "",
        "Evaluation interval of the per-target host CPU rate, in a group of its own. Empty: the `hosts` group at "
        "`rule_interval`, each evaluation rating each CPU's last two samples (irate). Set: each evaluation "
        "records `rate()` over this interval or `rate_window_fallback`, whichever is longer, so every recorded "
        "rate covers the time since the last; the host CPU series average the rates recorded within twice this "
        "interval (or `rate_window`, if longer), so that a late evaluation leaves no gap. The host CPU series "
        "then follow a change over both windows, and a CPU counter that steps back blanks them as long.",
        "Your hosts have many CPUs: the CPU rate reads every CPU's idle counter and is the served groups' "
        "most expensive rule (on 128-CPU hosts, about 40 % of their time, docs/benchmarks.md); at 1m it costs "
        "a quarter of what it does every 15 s.",
        kind="duration",
    )

    @property
    def at_scrape(self) -> bool:
        """Whether the scrape config names each target's host (``host_identity: scrape``)."""
        return self.host_identity == "scrape"


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


@dataclass(frozen=True)
class Dashboards:
    title_prefix: str = opt(
        "GPU executions",
        "Prefix of every dashboard title; dashboard uids are derived from the titles.",
        "Several packs (clusters, tenants) share one Grafana.",
    )
    folder: str = opt(
        "GPU executions",
        "Grafana folder of the dashboards: the file provider's folder, and the Grafana sidecar's folder "
        "annotation on the ConfigMaps.",
        "Your Grafana organises dashboards by team.",
    )
    provisioning_path: str = opt(
        "/var/lib/grafana/dashboards/gpu-execution-pack",
        "Where Grafana reads the dashboard JSON from: the file provider's `options.path` in "
        "provisioning/dashboards.yml. Mount or copy the generated dashboards there.",
        "Your Grafana image or Helm values mount dashboards at another path.",
        kind="path",
    )
    datasource_name: str = opt(
        "Prometheus",
        "Name of the Prometheus datasource the provisioning file defines and the dashboards select by default.",
        "Your Grafana already has a Prometheus datasource under another name.",
    )
    datasource_url: str = opt(
        "http://prometheus:9090",
        "URL of Prometheus in the provisioned datasource.",
        "Grafana reaches Prometheus (or Thanos, Mimir) at another address.",
    )
    currency: str = opt("USD", "Currency of the prices, shown in the cost panels.", "You bill in another currency.")
    default_price_per_gpu_hour: float = opt(
        2.0,
        "Price of one GPU-hour (or MIG-instance-hour) of a model not listed in price_per_gpu_hour.",
        "Set your list price for models you do not list.",
        kind="positive",
    )
    price_per_gpu_hour: tuple[tuple[str, float], ...] = opt(
        (("NVIDIA A100-SXM4-80GB", 1.8), ("NVIDIA H100 80GB HBM3", 3.0)),
        "Price of one GPU-hour per GPU model, keyed by DCGM's modelName label.",
        "These are examples: set your own prices per model.",
        kind="prices",
    )


@dataclass(frozen=True)
class Kubernetes:
    namespace: str = opt(
        "monitoring",
        "Namespace of the generated ConfigMaps and PrometheusRule objects.",
        "Your Prometheus operator and Grafana run in another namespace.",
        kind="label",
    )
    rule_labels: tuple[tuple[str, str], ...] = opt(
        (("release", "kube-prometheus-stack"),),
        "Labels on the PrometheusRule objects; kube-prometheus-stack picks up rules whose labels match "
        "its ruleSelector (by default release: <helm release>).",
        "Your Helm release has another name, or your ruleSelector matches other labels.",
        kind="labels",
    )
    dashboard_labels: tuple[tuple[str, str], ...] = opt(
        (("grafana_dashboard", "1"),),
        "Labels on the dashboard ConfigMaps; the Grafana sidecar of kube-prometheus-stack loads "
        'ConfigMaps labelled grafana_dashboard: "1".',
        "Your sidecar watches another label.",
        kind="labels",
    )
    folder_annotation: str = opt(
        "grafana_folder",
        "Annotation on the dashboard ConfigMaps whose value (`dashboards.folder`) names the Grafana folder: the "
        "sidecar's `folderAnnotation` (kube-prometheus-stack: `sidecar.dashboards.folderAnnotation`).",
        "Your sidecar reads the folder from another annotation.",
        kind="text",
    )
    name_prefix: str = opt(
        "gpu-execution-pack",
        "Prefix of the generated object names: ConfigMaps `<prefix>-dashboard-<name>`, PrometheusRules "
        "`<prefix>-<file>`, and the Grafana dashboard provider.",
        "Several packs (clusters, tenants) are deployed into one namespace.",
        kind="dns_label",
    )


@dataclass(frozen=True)
class Api:
    prometheus_url: str = opt(
        "http://127.0.0.1:9090",
        "Prometheus (or a compatible query API) the metrics endpoint reads the recorded series from. A path is "
        "a prefix of every API path: `http://host:9090/prom` for a Prometheus run with `--web.route-prefix=/prom`, "
        "`http://mimir:8080/prometheus` for Mimir's query frontend.",
        "Your Prometheus, Thanos Query or Mimir query frontend listens elsewhere, or behind a path prefix.",
        kind="url",
    )
    keys_file: str = opt(
        "",
        "File of API keys, one `<key> <tenant>` per line (`*` as tenant: every tenant); "
        "GPU_PACK_API_KEYS holds the same, comma-separated, when no file is set. A relative path is read from the "
        "config file's folder.",
        "Keep keys out of the config and mount them as a secret file.",
    )
    tenant_label: str = opt(
        "namespace",
        "Label on the recorded per-GPU series that names an execution's tenant; a key scoped to one tenant "
        "sees only executions whose series carry its tenant.",
        "Your executions are owned by another label, e.g. `project` or `account`.",
        kind="label",
    )
    execution_id_pattern: str = opt(
        "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$",
        "Regex an execution id must match, else 400.",
        "Your scheduler's ids use other characters.",
        kind="text",
    )
    max_points: float = opt(
        250000.0,
        "Most points per series one request may ask for, else 400 (30 days at 15 s is 172,800).",
        "Longer executions, or a tighter bound on response size.",
        kind="positive",
    )
    lookback: str = opt(
        "35d",
        "How far back the endpoint looks for an execution's first sample when start is not given.",
        "Executions run longer than this, or your retention is shorter.",
        kind="duration",
    )
    timeout_seconds: float = opt(
        30.0,
        "Deadline of a whole request, every query to Prometheus included: past it the endpoint cancels what is "
        "in flight (Prometheus stops the query when its connection closes) and answers 504. A long range "
        "(over 10,000 points per series) is streamed: the deadline holds until its first bytes, then for each "
        "piece it waits for; past it the connection is closed mid-body.",
        "Your Prometheus is slow on long ranges.",
        kind="positive",
    )
    tenant_header: str = opt(
        "X-Scope-OrgID",
        "Name of the header that carries `tenant_id` on every query, when `tenant_id` is set: Mimir's and "
        "Cortex's tenant header by default.",
        "Your multi-tenant query API (or the proxy in front of it) reads the tenant from another header.",
        kind="header",
    )
    tenant_id: str = opt(
        "",
        "Value of `tenant_header` sent with every query; empty sends no header (a single-tenant Prometheus "
        "or Thanos). Mimir reads several tenants joined by `|` when tenant federation is on.",
        "Your recorded series live in a Mimir or Cortex tenant (the one its ruler writes them to).",
        kind="header_value",
    )
    partial_response: bool = opt(
        False,
        "Sent as `partial_response` with every query. Thanos Query answers with what it has when a store is "
        "down only if this is true, and otherwise fails the query (502): an execution is never served with "
        "silently missing GPUs. Prometheus and Mimir ignore the parameter.",
        "Behind Thanos you prefer an answer that may lack some series to a 502 while a store is down.",
    )
    max_points_in_flight: float = opt(
        300_000.0,
        "Points (per series, times the series asked for) all requests of one serve process may have in flight; "
        "every request that asks Prometheus holds 2,000 on arrival, a report 100,000, a metrics request its "
        "window's once known (a streamed one: 10,000 per series), at most this many. A request that does not fit "
        "is answered 429 at once with Retry-After, rather than queueing towards the deadline (docs/api-limits.md: "
        "the burst that chose the default, and how to size it).",
        "Your Prometheus answers more heavy queries in parallel (raise it), or 504s come under load (lower it); "
        "with `serve --workers N` each worker has the whole budget.",
        kind="positive",
    )
    max_memory_mb: float = opt(
        600.0,
        "Resident memory (MB) of one serve process above which new requests are answered 503 with Retry-After "
        "while others are in flight (a request alone always runs). Idle, a process holds about 100 MB.",
        "Set it below your container's memory limit, with room for one request's peak (docs/api-limits.md).",
        kind="positive",
    )
    retry_after_seconds: float = opt(
        2.0,
        "The Retry-After (seconds) of a 429 or 503 the load shedding answers.",
        "Your clients retry too eagerly, or requests are short and a shorter wait is enough.",
        kind="positive",
    )


@dataclass(frozen=True)
class Report:
    """The execution report's own thresholds; the others are the alerts' (docs/report.md says which)."""

    gpu_idle_threshold: float = opt(
        0.05,
        "Mean GPU utilisation (ratio 0-1) over the whole execution below which it did not use its GPUs "
        "(verdict gpu_idle).",
        "Jobs that only touch the GPU for a few kernels count as users for you: lower it.",
        kind="ratio",
    )
    tensor_engine_busy: float = opt(
        0.5,
        "Graphics-engine activity (ratio 0-1) at or above which a GPU counts as busy for the tensor-core check "
        "(verdict tensor_cores_unused).",
        "Only flag the busiest jobs: raise it.",
        kind="ratio",
    )
    tensor_active_threshold: float = opt(
        0.01,
        "Tensor-pipe activity (ratio 0-1) under which a busy GPU's tensor cores count as unused.",
        "Jobs with a little mixed precision still count as unused for you: raise it to 0.05.",
        kind="ratio",
    )
    tensor_unused_share: float = opt(
        0.5,
        "Share of the GPU's samples with engine activity that must be busy with the tensor pipes unused "
        "for verdict tensor_cores_unused (most of the span).",
        "Flag jobs with shorter FP32 phases too: lower it.",
        kind="ratio",
    )
    heavy_phase_memory_share: float = opt(
        0.9,
        "The heavy phase starts when the execution's GPU memory first reaches this share of its peak (the "
        "working set is loaded) and lasts to the end; its utilisation leaves out start-up.",
        "Your jobs load their working set in steps: lower it so the heavy phase starts at the first big one.",
        kind="ratio",
    )
    energy_price_per_kwh: float = opt(
        0.0,
        "Price of a kWh in `dashboards.currency`, for the report's energy cost; 0 leaves the energy cost out.",
        "You bill or account for energy.",
        kind="non_negative",
    )
    grams_co2e_per_kwh: float = opt(
        0.0,
        "Grid carbon intensity, grams CO2e per kWh, for the report's emissions; 0 leaves emissions out.",
        "You report emissions: use your site's or grid's figure.",
        kind="non_negative",
    )


@dataclass(frozen=True)
class Sharding:
    """Scrape shards split by host, and a ruler over the global view (docs/scaling.md)."""

    shards: int = opt(
        0,
        "Number of scrape shards. Above 0, `generate` also writes `<rules_dir>/sharded/`: for each shard i "
        "(0 to shards-1) its scrape jobs for node_exporter and the GPU exporters of `vendors` (dcgm-exporter, "
        "device-metrics-exporter), relabelled with `hashmod` on the host so a host's exporters land on one shard, "
        "each variant a whole prometheus.yml for the shard "
        "(`shard-<i>/scrape-static.yml`, `scrape-file-sd.yml`, `scrape-kubernetes.yml`: its `shard` external "
        "label, its rule files, the remote write to `remote_write_url`), the rule files every shard evaluates "
        "(`shards/`), those the central ruler evaluates over every shard's series (`ruler/`), and a "
        "PrometheusRule for each of these files (`kubernetes/`). 0: one Prometheus, nothing written there.",
        "One Prometheus spends too much of its time on the rules or holds too many series (docs/scaling.md).",
        kind="count",
    )
    dcgm_job: str = opt(
        "dcgm-exporter",
        "Job name of the generated dcgm-exporter scrape job; keep it matched by `selectors.dcgm_targets`, which "
        "the exporter-down alert reads.",
        "Your dashboards or other rules expect another job name.",
        kind="name",
    )
    amd_job: str = opt(
        "device-metrics-exporter",
        "Job name of the generated ROCm device-metrics-exporter scrape job (`vendors` with amd); keep it matched "
        "by `amd.targets`, which the exporter-down alert reads (the defaults match).",
        "Your dashboards or other rules expect another job name, e.g. the Helm chart's "
        "`<release>-amdgpu-metrics-exporter`.",
        kind="name",
    )
    node_job: str = opt(
        "node-exporter",
        "Job name of the generated node_exporter scrape job.",
        "Your dashboards or other rules expect another job name, e.g. `node`.",
        kind="name",
    )
    hosts: tuple[str, ...] = opt(
        (),
        "Static variant: the NVIDIA GPU hosts (`vendors` with nvidia), each scraped at `<host>:<dcgm_port>` and "
        "`<host>:<node_port>`; every shard lists them all and keeps its own share. Empty: the static dcgm-exporter "
        "job lists no target.",
        "You list targets by hand rather than through file or Kubernetes discovery.",
    )
    amd_hosts: tuple[str, ...] = opt(
        (),
        "Static variant: the AMD GPU hosts (`vendors` with amd), each scraped at `<host>:<amd_port>` and "
        "`<host>:<node_port>`, as `hosts` are; apart from them, so that no host is scraped for an exporter it "
        "does not run (each such target would be down and raise the exporter-down alert). A host in both lists "
        "has its node_exporter listed once. Empty: the static device-metrics-exporter job lists no target.",
        "Your fleet has AMD hosts and you list targets by hand.",
    )
    dcgm_port: int = opt(
        9400, "Static variant: dcgm-exporter's port on each host.", "Your exporter listens elsewhere.", kind="port"
    )
    amd_port: int = opt(
        5000,
        "Static variant: device-metrics-exporter's port on each host (5000: its own default, `AMDListenPort`, and "
        "its Helm chart's); also the Kubernetes variant's, where `amd_port_name` is empty.",
        "Your exporter listens elsewhere (its config's `ServerPort`, the chart's `service.ClusterIP.port`).",
        kind="port",
    )
    node_port: int = opt(
        9100, "Static variant: node_exporter's port on each host.", "Your exporter listens elsewhere.", kind="port"
    )
    dcgm_file_sd: str = opt(
        "/etc/prometheus/targets/dcgm-exporter/*.yml",
        "File discovery variant: the files (glob) that list dcgm-exporter targets, as `host:port`.",
        "Your discovery writes its target files elsewhere.",
        kind="path",
    )
    amd_file_sd: str = opt(
        "/etc/prometheus/targets/device-metrics-exporter/*.yml",
        "File discovery variant: the files (glob) that list device-metrics-exporter targets, as `host:port`.",
        "Your discovery writes its target files elsewhere.",
        kind="path",
    )
    node_file_sd: str = opt(
        "/etc/prometheus/targets/node-exporter/*.yml",
        "File discovery variant: the files (glob) that list node_exporter targets, as `host:port`; each host "
        "must be spelled as in the GPU exporters' files, since the host part of the address picks the shard.",
        "Your discovery writes its target files elsewhere.",
        kind="path",
    )
    dcgm_pod_selector: str = opt(
        "app.kubernetes.io/name=dcgm-exporter",
        "Kubernetes variant: the label selector of the dcgm-exporter pods (pod discovery; the shard is picked by "
        "the pod's node). The default is the label of dcgm-exporter's Helm chart.",
        "The GPU operator labels its exporter `app=nvidia-dcgm-exporter`.",
        kind="name",
    )
    amd_pod_selector: str = opt(
        "app.kubernetes.io/name=metrics-exporter",
        "Kubernetes variant: the label selector of the device-metrics-exporter pods, whose node picks the shard: "
        "the label the exporter's Helm chart gives them from v1.4.0 on, whatever the release's name (its "
        "docs select them by it).",
        "Your chart is older than v1.4.0, or the exporter's NIC chart (whose pods share the label) runs in the "
        "cluster too: `app=<release>-amdgpu-metrics-exporter`; or your exporter pods are labelled otherwise.",
        kind="name",
    )
    node_pod_selector: str = opt(
        "app.kubernetes.io/name=prometheus-node-exporter",
        "Kubernetes variant: the label selector of the node_exporter pods: kube-prometheus-stack's label.",
        "Your node_exporter DaemonSet is labelled otherwise.",
        kind="name",
    )
    dcgm_port_name: str = opt(
        "metrics",
        "Kubernetes variant: the name of dcgm-exporter's container port that serves its metrics.",
        "Your pod spec names the port otherwise.",
        kind="name",
    )
    amd_port_name: str = opt(
        "",
        "Kubernetes variant: the name of device-metrics-exporter's container port that serves its metrics. "
        "Empty: the container port numbered `amd_port` is kept instead, since the Helm chart's pod spec names "
        "its port nowhere (only its Service does, `http`).",
        "Your pod spec names the exporter's port and you would rather keep it by its name.",
        kind="name",
        empty_ok=True,
    )
    node_port_name: str = opt(
        "http-metrics",
        "Kubernetes variant: the name of node_exporter's container port that serves its metrics.",
        "Your pod spec names the port otherwise.",
        kind="name",
    )
    remote_write_url: str = opt(
        "",
        "Where every shard remote-writes its raw and recorded series for the ruler's global view: the central "
        "Prometheus' `/api/v1/write` (run with `--web.enable-remote-write-receiver`), Mimir's `/api/v1/push` or "
        "Thanos Receive's `/api/v1/receive`. Written into each shard's `shard-<i>/scrape-*.yml`. Empty: no "
        "`remote_write` there.",
        "Your shards remote-write (leave it empty where a Thanos sidecar serves each shard's own blocks).",
        kind="url",
        empty_ok=True,
    )
    heartbeat_freshness: str = opt(
        "2m",
        "How recent each shard's heartbeat (a series each shard records from `shard-<i>/heartbeat.rules.yml` at "
        "`rule_interval`, docs/series.md) must be for the ruler to record its per-execution and cost series: "
        "while any shard's newest heartbeat is older, those series have no sample (a gap), never a count or "
        "sum over the remaining shards only. It must exceed the shards' evaluation interval plus the "
        "remote-write lag, or the rollups have gaps while every shard is up, and stay under the central "
        "server's query lookback (5m by default) by more than that interval, so a stopped shard's heartbeat "
        "expires before its GPUs' last samples leave the lookback. 2m covers Prometheus' default evaluation "
        "interval (1m, where `rule_interval` is empty) and a minute of lag.",
        "Your remote write lags by more than a minute (raise it, keeping it that far under the lookback), or "
        "you run the central server with a shorter `--query.lookback-delta` (lower it accordingly).",
        kind="duration",
    )


@dataclass(frozen=True)
class Output:
    """Relative paths are read from the config file's directory (or the working directory without one)."""

    rules_dir: str = opt(
        "rules",
        "Directory the rule files (*.rules.yml) are written to; relative paths are read from the config file's folder.",
        "Your ops repo keeps Prometheus rules elsewhere.",
        kind="path",
    )
    dashboards_dir: str = opt(
        "dashboards",
        "Directory the dashboard JSON is written to; relative paths are read from the config file's folder.",
        "Your Grafana provisioning reads another directory.",
        kind="path",
    )
    docs_dir: str = opt(
        "docs",
        "Directory `gpu-execution-pack docs` writes the runbook (runbook.md, with this config's thresholds) to; "
        "relative to the config file's folder.",
        "Your ops repo serves its runbooks from another directory.",
        kind="path",
    )


@dataclass(frozen=True)
class Config:
    execution_label: str = opt(
        catalog.EXECUTION_LABEL,
        "The label that carries the execution id where it is read: on DCGM series (label mode), on the "
        "mapping metric (mapping mode), or the pod label (kubernetes mode). Recorded series always "
        "call it `execution_id`.",
        "Your exporter publishes the id under another name, e.g. `hpc_job` from dcgm-exporter's --hpc-job-mapping-dir.",
        kind="label",
    )
    cluster_label: str = opt(
        "",
        "Label that names the cluster on every raw series (an external label of each cluster's Prometheus, "
        "or one its remote write adds). When set, every per-GPU, per-host and per-execution series keeps it, "
        "every join and aggregation is computed per cluster (hosts are matched within their cluster), alerts "
        "name it, dashboards get a cluster variable, and the endpoint and report take a `cluster` parameter. "
        "Empty: one cluster, nothing added.",
        "Rules are evaluated centrally (Mimir or Thanos ruler, several Prometheus servers remote-writing to one "
        "tenant) over clusters whose host names, pods or execution ids repeat: `cluster`.",
        kind="label",
        empty_ok=True,
    )
    vendors: tuple[str, ...] = opt(
        catalog.VENDORS,
        "GPU vendors whose exporters the rules read: `nvidia` (dcgm-exporter) and `amd` (ROCm "
        "device-metrics-exporter, recorded into the same series by its own group).",
        "Pin the vendors your fleet runs: `[nvidia]` drops the AMD group and every AMD branch.",
        choices=catalog.VENDORS,
    )
    attribution: Attribution = section(Attribution, "How DCGM series are tied to executions.")
    selectors: Selectors = section(Selectors, "Scrape selectors for the exporters.")
    dcgm: Dcgm = section(Dcgm, "dcgm-exporter facts that differ between installs.")
    amd: Amd = section(Amd, "ROCm device-metrics-exporter facts that differ between installs (`vendors` with amd).")
    node: Node = section(Node, "node_exporter facts that differ between installs.")
    rate_window: str = opt(
        "1m",
        "Window of rate() over counters (DCGM violation counters; a window that holds fewer than two samples "
        "falls back to `rate_window_fallback`), and over which the host CPU series average each evaluation's "
        "recorded CPU rate (or over twice `node.cpu_rate_interval`, where that is longer).",
        "Your scrape interval is 15 s and you want the CPU series to follow changes faster: 30s.",
        kind="duration",
    )
    rate_window_fallback: str = opt(
        "4m",
        "Window of rate() where `rate_window` holds fewer than two samples, and in which the host CPU rate "
        "finds each CPU's last two samples: at 4m both answer for scrape intervals up to 1m (Prometheus' "
        "own default), where a 1m window holds one sample.",
        "You scrape node_exporter less often than every minute: keep it at least twice your scrape interval. "
        "You scrape every 15 s: 1m still finds the samples, and the host CPU rate, the served groups' most "
        "expensive rule, reads a quarter of them (docs/benchmarks.md).",
        kind="duration",
    )
    rule_interval: str = opt(
        "",
        "Evaluation interval of the groups that record the per-execution series the endpoint serves "
        "(per GPU and per host); empty uses Prometheus' global evaluation_interval.",
        "The served series should be finer or coarser than your global interval (15s gives the "
        "contract's default step).",
        kind="duration",
    )
    derived_rule_interval: str = opt(
        "1m",
        "Evaluation interval of the groups that read the recorded series: throttling inputs, "
        "per-execution rollups, cost, and the alerts; empty uses `rule_interval`.",
        "At fleet scale every rule over per-GPU series costs Prometheus time in proportion to the GPUs "
        "it reads, even a bare selector (docs/benchmarks.md); these groups feed alerts whose `for` is "
        "minutes and dashboards over hours, so 1m (Prometheus' default) costs a quarter of 15s. Set it "
        "empty for alerts that go pending within one scrape.",
        kind="duration",
        empty_ok=True,
    )
    alerts: Alerts = section(Alerts, "Thresholds, `for` durations and severities of the alert rules.")
    dashboards: Dashboards = section(Dashboards, "Grafana dashboards, their provisioning, and GPU-hour prices.")
    kubernetes: Kubernetes = section(Kubernetes, "The Kubernetes objects that wrap the rules and dashboards.")
    api: Api = section(Api, "The per-execution metrics endpoint (`gpu-execution-pack serve` and `query`).")
    alertmanager: Alertmanager = section(
        Alertmanager, "The Alertmanager routing snippet that delivers the pack's alerts."
    )
    report: Report = section(Report, "The execution report (`gpu-execution-pack report` and the summary endpoint).")
    sharding: Sharding = section(Sharding, "Scrape shards split by host and the central ruler (docs/scaling.md).")
    output: Output = section(Output, "Where generated files go.")

    @property
    def derived_interval(self) -> str:
        """The interval of the groups that read recorded series (empty: Prometheus' global one)."""
        return self.derived_rule_interval or self.rule_interval

    @property
    def cpu_rate_window(self) -> str:
        """The window each recorded host CPU rate covers where ``node.cpu_rate_interval`` is set (``rate()``
        over it): the interval, or ``rate_window_fallback`` where that is longer (it finds two samples)."""
        return _longest(self.node.cpu_rate_interval, self.rate_window_fallback)

    @property
    def cpu_average_window(self) -> str:
        """The window over which the host CPU series average the recorded per-target CPU rates: ``rate_window``,
        or twice ``node.cpu_rate_interval`` where that is longer (a late evaluation of its group leaves no gap)."""
        interval = self.node.cpu_rate_interval
        doubled = duration_text(2 * parse_duration_seconds(interval)) if interval else ""
        return _longest(self.rate_window, doubled)


def _longest(*durations: str) -> str:
    """The longest of ``durations``, as written (empty ones ignored)."""
    return max((d for d in durations if d), key=parse_duration_seconds)


def validate(cfg: Config) -> None:
    """Checks that relate several keys."""
    for name in ("gpu_memory_exhaustion", "host_memory_exhaustion"):
        a: PredictAlert = getattr(cfg.alerts, name)
        if a.min_level >= 1:
            raise ConfigError(f"alerts.{name}.min_level: must be below 1, or the prediction can never fire")
    try:
        re.compile(cfg.api.execution_id_pattern)
    except re.error as err:
        raise ConfigError(f"api.execution_id_pattern: not a regular expression ({err})") from None
    missing = cfg.alerts.telemetry_missing
    if parse_duration_seconds(missing.window) <= parse_duration_seconds(missing.for_):
        raise ConfigError(
            f"alerts.telemetry_missing.window: {missing.window} must be longer than its for ({missing.for_}), "
            "or the alert resolves before it fires"
        )
    freshness, interval = cfg.sharding.heartbeat_freshness, cfg.rule_interval
    if cfg.sharding.shards and interval and parse_duration_seconds(freshness) <= parse_duration_seconds(interval):
        raise ConfigError(
            f"sharding.heartbeat_freshness: {freshness} must be longer than rule_interval ({interval}), at which "
            "the shards record their heartbeats, or the ruler's rollups have gaps while every shard is up"
        )
    validate_scrape_jobs(cfg)


def validate_scrape_jobs(cfg: Config) -> None:
    """The sharded scrape jobs: each host list for an exporter of ``vendors``, and a job name of its own for
    each job written (Prometheus refuses two scrape configs of one name)."""
    s = cfg.sharding
    for key, hosts, vendor, exporter, hint in (
        ("hosts", s.hosts, "nvidia", "dcgm-exporter", "AMD GPU hosts go in sharding.amd_hosts"),
        ("amd_hosts", s.amd_hosts, "amd", "device-metrics-exporter", "NVIDIA GPU hosts go in sharding.hosts"),
    ):
        if hosts and vendor not in cfg.vendors:
            raise ConfigError(
                f"sharding.{key}: lists hosts to scrape for {exporter}, but vendors ({', '.join(cfg.vendors)}) "
                f"has no {vendor}; {hint}"
            )
    jobs = {"dcgm_job": "nvidia", "amd_job": "amd", "node_job": ""}
    named: dict[str, str] = {}
    for key, vendor in jobs.items():
        if vendor and vendor not in cfg.vendors:
            continue  # that job is not written
        name = getattr(s, key)
        if name in named:
            raise ConfigError(
                f"sharding.{key}: {name!r} is also sharding.{named[name]}; each scrape job needs a name of its own"
            )
        named[name] = key
