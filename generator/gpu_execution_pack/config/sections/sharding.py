"""Config keys of section ``sharding``: scrape shards split by host and the central ruler."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack.config.loader import ConfigError, opt

# Each shard is a Prometheus server of its own, with five files written for it: far more is a typo (shards: 1000
# wrote 5,000 files; 10**9 never ended), and a fleet past this many servers wants another store, not more shards.
MAX_SHARDS = 128


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
        kind="host",
    )
    amd_hosts: tuple[str, ...] = opt(
        (),
        "Static variant: the AMD GPU hosts (`vendors` with amd), each scraped at `<host>:<amd_port>` and "
        "`<host>:<node_port>`, as `hosts` are; apart from them, so that no host is scraped for an exporter it "
        "does not run (each such target would be down and raise the exporter-down alert). A host in both lists "
        "has its node_exporter listed once. Empty: the static device-metrics-exporter job lists no target.",
        "Your fleet has AMD hosts and you list targets by hand.",
        kind="host",
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

    def __post_init__(self) -> None:
        if self.shards > MAX_SHARDS:
            raise ConfigError(
                f"sharding.shards: {self.shards} is not accepted; expected 0 (one Prometheus) to {MAX_SHARDS}"
            )
