"""The pack's configuration keys: one YAML file, validated strictly against ``Config`` below and its sections.

Each key carries its default, a line saying what it is and a line saying why one would change
it; ``gpu_execution_pack.docs.configuration`` renders those into docs/configuration.md, so the
schema is the only place a key is described. ``Config`` here holds the top-level keys and one
``section`` per top-level section, each declared in its own module of ``config.sections``
(``sections/alerts.py`` for ``alerts:``); ``validate`` checks what relates several sections.
``loader`` does the validating.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpu_execution_pack import catalog
from gpu_execution_pack.config.loader import ConfigError, opt, section
from gpu_execution_pack.config.sections.alertmanager import Alertmanager
from gpu_execution_pack.config.sections.alerts import CAUSE_SEVERITIES, SEVERITIES, Alerts, PredictAlert, ThrottleAlert
from gpu_execution_pack.config.sections.amd import Amd
from gpu_execution_pack.config.sections.api import Api
from gpu_execution_pack.config.sections.archive import Archive
from gpu_execution_pack.config.sections.attribution import Attribution
from gpu_execution_pack.config.sections.dashboards import Dashboards
from gpu_execution_pack.config.sections.dcgm import Dcgm
from gpu_execution_pack.config.sections.kubernetes import Kubernetes
from gpu_execution_pack.config.sections.node import Node
from gpu_execution_pack.config.sections.output import Output
from gpu_execution_pack.config.sections.report import Report
from gpu_execution_pack.config.sections.selectors import Selectors
from gpu_execution_pack.config.sections.sharding import Sharding
from gpu_execution_pack.promql.durations import duration_text, parse_duration_seconds

# The names other modules import from here (the sections' own modules hold them).
__all__ = [
    "CAUSE_SEVERITIES",
    "SEVERITIES",
    "Alerts",
    "Amd",
    "Api",
    "Config",
    "PredictAlert",
    "Selectors",
    "ThrottleAlert",
    "validate",
]


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
        "Window of rate() where `rate_window` holds fewer than two samples (so at least `rate_window`), and in "
        "which the host CPU rate "
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
    archive: Archive = section(Archive, "Ended executions' records, kept past Prometheus' retention (docs/archive.md).")
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


# The longest node.host_map_interval: two evaluations and a late one still within the 5-minute lookback.
HOST_MAP_INTERVAL_MAX_S = 120


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
    if parse_duration_seconds(cfg.rate_window_fallback) < parse_duration_seconds(cfg.rate_window):
        raise ConfigError(
            f"rate_window_fallback: {cfg.rate_window_fallback} is shorter than rate_window ({cfg.rate_window}); it is "
            "the longer window a rate falls back to where rate_window holds fewer than two samples"
        )
    host_map = cfg.node.host_map_interval
    if host_map and parse_duration_seconds(host_map) > HOST_MAP_INTERVAL_MAX_S:
        raise ConfigError(
            f"node.host_map_interval: {host_map} is longer than {duration_text(HOST_MAP_INTERVAL_MAX_S)}; the per-GPU "
            "and per-host rules read the host map within Prometheus' 5-minute lookback, and a late evaluation past "
            "it leaves them no host to join"
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
