"""Sharded scraping by host: each shard's scrape jobs, and the rule files of the shards and of the ruler.

Written under ``<rules_dir>/sharded/`` when ``sharding.shards`` is above 0. A host's exporters (its GPU
exporter, dcgm-exporter or device-metrics-exporter, and its node_exporter) must land on the same shard,
since the per-GPU and per-host groups join a GPU with its host's node_exporter: the jobs hash the host
(the host part of the address, or the pod's node on Kubernetes), never the whole address, whose port
differs between the exporters.

No job sets ``honor_labels``: the jobs add no ``pod``, ``namespace`` or ``container`` target label, so the
workload labels the GPU exporters publish arrive as they are without it (device-metrics-exporter's Helm
chart honours labels because the Prometheus Operator's ServiceMonitor adds those three); and under
``node.host_identity: scrape`` the ``hostname`` the job sets must win over the one each GPU exporter
publishes, which arrives as ``exported_hostname``.

A shard that stops must leave gaps in the ruler's rollups, not a count or sum over the other shards'
GPUs: each shard records a heartbeat naming itself (``catalog.SHARD_UP``), and every recording rule on
the ruler requires a recent heartbeat from every shard (``shards_up``). The heartbeat of a stopped shard
expires (``sharding.heartbeat_freshness``) before its GPUs' last samples leave the central server's
query lookback, so the rollups keep the right value, then have none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.output import command, yaml_document
from gpu_execution_pack.promql import Expr, Paren, aggregate, call, label_set, parse_duration_seconds
from gpu_execution_pack.rules.files import RULE_FILE_SUFFIX, RULER, SHARD, group_document, rule_file_name, rule_files
from gpu_execution_pack.rules.groups import RecordingRule, RuleGroup
from gpu_execution_pack.rules.kubernetes import kubernetes_rules

SOURCE = "gpu_execution_pack/rules/sharding.py"
DIR = "sharded"
SHARD_RULES_DIR = "shards"
RULER_RULES_DIR = "ruler"
VARIANTS = ("static", "file-sd", "kubernetes")
# The host part of an address (IPv6 in brackets too): both exporters of a host hash alike whatever their ports.
HOST_OF_ADDRESS = "(.+?)(?::[0-9]+)?"
HOST_LABEL, SHARD_LABEL = "__tmp_host", "__tmp_shard"
POD_NODE = "__meta_kubernetes_pod_node_name"
POD_PORT_NAME = "__meta_kubernetes_pod_container_port_name"
POD_PORT_NUMBER = "__meta_kubernetes_pod_container_port_number"
HEARTBEAT_GROUP, HEARTBEAT_FILE = "gpu-execution-pack.shard_heartbeat", "heartbeat"


def shard_dir(rules_dir: Path, index: int) -> Path:
    """Where shard ``index``'s scrape jobs are written."""
    return rules_dir / DIR / f"shard-{index}"


def scrape_path(rules_dir: Path, index: int, variant: str) -> Path:
    """Shard ``index``'s prometheus.yml with the scrape jobs of ``variant`` (one of VARIANTS)."""
    return shard_dir(rules_dir, index) / f"scrape-{variant}.yml"


def heartbeat_path(rules_dir: Path, index: int) -> Path:
    """Shard ``index``'s own rule file: its heartbeat."""
    return shard_dir(rules_dir, index) / rule_file_name(HEARTBEAT_FILE)


def heartbeat_group(cfg: Config, index: int) -> RuleGroup:
    """Shard ``index``'s heartbeat, 1 labelled with the shard, at the served groups' interval."""
    tree = label_set(call("vector", 1), catalog.SHARD_LABEL, str(index))
    return RuleGroup(HEARTBEAT_GROUP, HEARTBEAT_FILE, (RecordingRule(catalog.SHARD_UP.name, tree),), cfg.rule_interval)


def shards_up(cfg: Config) -> Expr:
    """A sample while every shard's newest heartbeat is within ``sharding.heartbeat_freshness``, else none.

    Shards are counted by their label, so the two replicas of an HA pair count once. Under ``cluster_label``
    the rule files partition it like every rule: each cluster's shards are counted apart (a shard's external
    labels name its cluster), so a shard down in one cluster is not hidden by its namesake in another.
    """
    freshness = parse_duration_seconds(cfg.sharding.heartbeat_freshness)
    fresh = call("timestamp", catalog.SHARD_UP.select()).gt(call("time") - freshness)
    shards = aggregate("count", None, aggregate("count", (catalog.SHARD_LABEL,), fresh))
    return Paren(shards.ge(cfg.sharding.shards))


def keep_shard(source: str, shards: int, index: int) -> list[dict[str, Any]]:
    """Relabelling that keeps the targets whose ``source`` label hashes to shard ``index`` of ``shards``."""
    return [
        {"source_labels": [source], "modulus": shards, "target_label": SHARD_LABEL, "action": "hashmod"},
        {"source_labels": [SHARD_LABEL], "regex": str(index), "action": "keep"},
    ]


def by_address(shards: int, index: int) -> list[dict[str, Any]]:
    """Static and file discovery: the shard is picked by the host part of ``__address__``."""
    host = {"source_labels": ["__address__"], "regex": HOST_OF_ADDRESS, "target_label": HOST_LABEL}
    return [host, *keep_shard(HOST_LABEL, shards, index)]


def name_host(source: str) -> list[dict[str, Any]]:
    """``node.host_identity: scrape``: the target label ``hostname`` from ``source``, unless the target has one
    (a file_sd target group's own ``hostname`` label, say). The rules read it instead of joining a host map."""
    return [
        {
            "source_labels": [catalog.HOST_LABEL, source],
            "separator": ";",
            "regex": ";(.+)",
            "target_label": catalog.HOST_LABEL,
        }
    ]


class Exporter(NamedTuple):
    """One exporter's scrape job, as the ``sharding`` keys give it."""

    job: str
    port: int  # static targets' port; on Kubernetes the container port kept where port_name is empty
    file_sd: str
    pod_selector: str
    port_name: str
    hosts: tuple[str, ...]  # static targets' hosts


def exporters(cfg: Config) -> list[Exporter]:
    """The exporters each shard scrapes: the GPU exporters of ``vendors`` (dcgm-exporter for nvidia,
    device-metrics-exporter for amd, each at its own hosts in the static variant), then node_exporter at
    every GPU host."""
    s = cfg.sharding
    gpu = {
        "nvidia": Exporter(s.dcgm_job, s.dcgm_port, s.dcgm_file_sd, s.dcgm_pod_selector, s.dcgm_port_name, s.hosts),
        "amd": Exporter(s.amd_job, s.amd_port, s.amd_file_sd, s.amd_pod_selector, s.amd_port_name, s.amd_hosts),
    }
    every_host = tuple(dict.fromkeys(s.hosts + s.amd_hosts))
    node = Exporter(s.node_job, s.node_port, s.node_file_sd, s.node_pod_selector, s.node_port_name, every_host)
    return [gpu[vendor] for vendor in catalog.VENDORS if vendor in cfg.vendors] + [node]


def keep_port(exporter: Exporter) -> dict[str, Any]:
    """Pod discovery: keep the exporter's container port, by its name, or by its number where it has none
    configured (device-metrics-exporter's Helm chart names its container port nowhere)."""
    if exporter.port_name:
        return {"source_labels": [POD_PORT_NAME], "regex": exporter.port_name, "action": "keep"}
    return {"source_labels": [POD_PORT_NUMBER], "regex": str(exporter.port), "action": "keep"}


def scrape_jobs(cfg: Config, index: int, variant: str) -> list[dict[str, Any]]:
    """The scrape jobs of shard ``index`` in discovery ``variant``: ``exporters(cfg)``, in that order."""
    s = cfg.sharding
    out = []
    for exporter in exporters(cfg):
        doc: dict[str, Any] = {"job_name": exporter.job}
        if variant == "static":
            doc["static_configs"] = [{"targets": [f"{host}:{exporter.port}" for host in exporter.hosts]}]
            doc["relabel_configs"] = by_address(s.shards, index)
        elif variant == "file-sd":
            doc["file_sd_configs"] = [{"files": [exporter.file_sd]}]
            doc["relabel_configs"] = by_address(s.shards, index)
        else:
            # Pod discovery: a GPU exporter's pod and a host-network node_exporter share no address, but
            # both run on the node; pods without a node yet are dropped by the keep (empty hashes too).
            selectors = [{"role": "pod", "label": exporter.pod_selector}]
            doc["kubernetes_sd_configs"] = [{"role": "pod", "selectors": selectors}]
            doc["relabel_configs"] = [
                keep_port(exporter),
                {"source_labels": [POD_NODE], "regex": ".+", "action": "keep"},
                *keep_shard(POD_NODE, s.shards, index),
            ]
        if cfg.node.at_scrape:  # the host the shard was picked by names the target
            doc["relabel_configs"] += name_host(POD_NODE if variant == "kubernetes" else HOST_LABEL)
        out.append(doc)
    return out


def shard_config(cfg: Config, index: int, variant: str) -> dict[str, Any]:
    """Shard ``index``'s whole prometheus.yml in discovery ``variant``: its ``shard`` external label (the
    global view tells the shards' series apart by it), its rule files (the shared ``shards/`` files and its
    heartbeat, relative to the file, as Prometheus reads them), the remote write to the ruler's global view
    (``sharding.remote_write_url``) and its scrape jobs."""
    doc: dict[str, Any] = {
        "global": {"external_labels": {catalog.SHARD_LABEL: str(index)}},
        "rule_files": [f"../{SHARD_RULES_DIR}/*{RULE_FILE_SUFFIX}", rule_file_name(HEARTBEAT_FILE)],
    }
    if cfg.sharding.remote_write_url:
        doc["remote_write"] = [{"url": cfg.sharding.remote_write_url}]
    return doc | {"scrape_configs": scrape_jobs(cfg, index, variant)}


def sharding_files(cfg: Config, rules_dir: Path, regenerate: str = command("generate")) -> dict[Path, str]:
    """Everything ``generate`` writes under ``<rules_dir>/sharded/``; nothing when ``sharding.shards`` is 0."""
    shards = cfg.sharding.shards
    if not shards:
        return {}
    files = {
        scrape_path(rules_dir, i, v): yaml_document(shard_config(cfg, i, v), SOURCE, regenerate)
        for i in range(shards)
        for v in VARIANTS
    }
    files |= {
        heartbeat_path(rules_dir, i): yaml_document(
            {"groups": [group_document(heartbeat_group(cfg, i))]}, SOURCE, regenerate
        )
        for i in range(shards)
    }
    files |= rule_files(cfg, rules_dir / DIR / SHARD_RULES_DIR, regenerate, placement=SHARD)
    ruler = rules_dir / DIR / RULER_RULES_DIR
    files |= rule_files(cfg, ruler, regenerate, placement=RULER, guard=shards_up(cfg))
    rules = {path: text for path, text in files.items() if path.name.endswith(RULE_FILE_SUFFIX)}
    return files | kubernetes_rules(cfg, rules, rules_dir / DIR, regenerate, placement_of)


def placement_of(path: Path) -> str:
    """Where a sharded rule file's rules run, from its folder: ``shard`` (``shards/``: every shard),
    ``shard-<i>`` (that shard's heartbeat) or ``ruler``."""
    return {SHARD_RULES_DIR: SHARD, RULER_RULES_DIR: RULER}.get(path.parent.name, path.parent.name)
