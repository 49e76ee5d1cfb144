"""Sharded scraping by host: each shard's scrape jobs, and the rule files of the shards and of the ruler.

Written under ``<rules_dir>/sharded/`` when ``sharding.shards`` is above 0. Both exporters of a host
must land on the same shard, since the per-GPU and per-host groups join a GPU with its host's
node_exporter: the jobs hash the host (the host part of the address, or the pod's node on
Kubernetes), never the whole address, whose port differs between the two exporters.

A shard that stops must leave gaps in the ruler's rollups, not a count or sum over the other shards'
GPUs: each shard records a heartbeat naming itself (``catalog.SHARD_UP``), and every recording rule on
the ruler requires a recent heartbeat from every shard (``shards_up``). The heartbeat of a stopped shard
expires (``sharding.heartbeat_freshness``) before its GPUs' last samples leave the central server's
query lookback, so the rollups keep the right value, then have none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.output import command, yaml_document
from gpu_execution_pack.promql import Expr, Paren, aggregate, call, label_set, parse_duration_seconds
from gpu_execution_pack.rules.files import RULE_FILE_SUFFIX, RULER, SHARD, group_document, rule_files
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
HEARTBEAT_GROUP, HEARTBEAT_FILE = "gpu-execution-pack.shard_heartbeat", "heartbeat"


def shard_dir(rules_dir: Path, index: int) -> Path:
    """Where shard ``index``'s scrape jobs are written."""
    return rules_dir / DIR / f"shard-{index}"


def scrape_path(rules_dir: Path, index: int, variant: str) -> Path:
    """Shard ``index``'s prometheus.yml with the scrape jobs of ``variant`` (one of VARIANTS)."""
    return shard_dir(rules_dir, index) / f"scrape-{variant}.yml"


def heartbeat_path(rules_dir: Path, index: int) -> Path:
    """Shard ``index``'s own rule file: its heartbeat."""
    return shard_dir(rules_dir, index) / f"{HEARTBEAT_FILE}{RULE_FILE_SUFFIX}"


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


def scrape_jobs(cfg: Config, index: int, variant: str) -> list[dict[str, Any]]:
    """The dcgm-exporter and node_exporter scrape jobs of shard ``index`` in discovery ``variant``."""
    s = cfg.sharding
    jobs = ((s.dcgm_job, s.dcgm_port, s.dcgm_file_sd, s.dcgm_pod_selector, s.dcgm_port_name),
            (s.node_job, s.node_port, s.node_file_sd, s.node_pod_selector, s.node_port_name))  # fmt: skip
    out = []
    for job, port, files, pod_selector, port_name in jobs:
        doc: dict[str, Any] = {"job_name": job}
        if variant == "static":
            doc["static_configs"] = [{"targets": [f"{host}:{port}" for host in s.hosts]}]
            doc["relabel_configs"] = by_address(s.shards, index)
        elif variant == "file-sd":
            doc["file_sd_configs"] = [{"files": [files]}]
            doc["relabel_configs"] = by_address(s.shards, index)
        else:
            # Pod discovery: a dcgm-exporter pod and a host-network node_exporter share no address, but
            # both run on the node; pods without a node yet are dropped by the keep (empty hashes too).
            doc["kubernetes_sd_configs"] = [{"role": "pod", "selectors": [{"role": "pod", "label": pod_selector}]}]
            doc["relabel_configs"] = [
                {"source_labels": [POD_PORT_NAME], "regex": port_name, "action": "keep"},
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
        "rule_files": [f"../{SHARD_RULES_DIR}/*{RULE_FILE_SUFFIX}", f"{HEARTBEAT_FILE}{RULE_FILE_SUFFIX}"],
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
