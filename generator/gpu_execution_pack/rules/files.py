"""Rule groups rendered as Prometheus rule files (``<rules_dir>/<name>.rules.yml``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from gpu_execution_pack import __version__, catalog
from gpu_execution_pack.config import Config, cluster_scope
from gpu_execution_pack.output import command, to_yaml, yaml_document
from gpu_execution_pack.promql import Expr, call
from gpu_execution_pack.rules import recording
from gpu_execution_pack.rules.alerts import GROUP_NAME as ALERT_GROUP
from gpu_execution_pack.rules.alerts import alert_group
from gpu_execution_pack.rules.groups import MAX_RULES_PER_GROUP, AlertRule, RecordingRule, RuleGroup
from gpu_execution_pack.rules.recording import recording_groups

RULE_FILE_SUFFIX = ".rules.yml"
SOURCE = "gpu_execution_pack/rules/"

# Where each group runs when scraping is sharded by host (sharding.shards > 0). On every shard: the
# groups that read one host's own exporters and the series recorded from them, all on the shard since
# both exporters of a host are scraped there. On the ruler, over every shard's series: the groups that
# aggregate across hosts (an execution's GPUs may sit on several shards; cost per model spans the
# fleet; the alerts read per-execution series and every dcgm-exporter's `up`).
SHARD, RULER = "shard", "ruler"
PLACEMENT: dict[str, str] = {
    recording.AMD_GROUP: SHARD,
    recording.HOSTS_GROUP: SHARD,
    recording.HOST_RATES_GROUP: SHARD,
    recording.EXECUTION_GPU_GROUP: SHARD,
    recording.ACTIVITY_GROUP: SHARD,
    recording.HEALTH_GROUP: SHARD,
    recording.CONDITIONS_GROUP: SHARD,
    recording.EXECUTION_NODE_GROUP: SHARD,
    recording.EXECUTION_GROUP: RULER,
    recording.COST_GROUP: RULER,
    ALERT_GROUP: RULER,
}


def rule_file_name(name: str) -> str:
    """The file a group's ``file`` (or any rule file's name) is written to: ``<name>.rules.yml``."""
    return f"{name}{RULE_FILE_SUFFIX}"


def rule_document(rule: RecordingRule | AlertRule) -> dict:
    if isinstance(rule, RecordingRule):
        return {"record": rule.record, "expr": rule.expr} | ({"labels": dict(rule.labels)} if rule.labels else {})
    doc: dict = {"alert": rule.alert, "expr": rule.expr}
    if rule.for_:
        doc["for"] = rule.for_
    doc["labels"] = {"severity": rule.severity}
    doc["annotations"] = {"summary": rule.summary, "description": rule.description, "runbook_url": rule.runbook_url}
    return doc


def group_document(group: RuleGroup) -> dict:
    doc: dict = {"name": group.name}
    if group.interval:
        doc["interval"] = group.interval
    doc["rules"] = [rule_document(r) for r in group.rules]
    return doc


def rule_files(
    cfg: Config,
    rules_dir: Path | None = None,
    regenerate: str = command("generate"),
    placement: str = "",
    guard: Expr | None = None,
) -> dict[Path, str]:
    """Every rule file for ``cfg``, keyed by path; groups sharing a file name share the file.

    ``regenerate`` is the command the files' header gives for producing them again; ``placement``
    (SHARD or RULER), if given, keeps only the groups that run there; ``guard``, if given, is required
    by every recording rule (``RuleGroup.guarded``).
    """
    rules_dir = Path(cfg.output.rules_dir) if rules_dir is None else rules_dir
    by_file: dict[str, list[RuleGroup]] = {}
    for group in all_groups(cfg):
        if not placement or placement_of(group) == placement:
            by_file.setdefault(group.file, []).append(group)
    # The guard is partitioned like the rule it guards (partitioning twice changes nothing).
    guarded = {
        name: [g if guard is None else g.guarded(guard).partitioned(cluster_scope(cfg).label) for g in groups]
        for name, groups in (
            (name, with_version(name, groups, rules_digest(groups))) for name, groups in by_file.items()
        )
    }
    return {
        rules_dir / rule_file_name(name): yaml_document(
            {"groups": [group_document(g) for g in groups]}, SOURCE, regenerate
        )
        for name, groups in guarded.items()
    }


def rules_digest(groups: Sequence[RuleGroup]) -> str:
    """A short digest of ``groups`` as their file writes them (names, intervals, every rule), the version rule
    aside: what ``doctor`` compares with the groups of the same names its config generates, to tell rules
    generated from another config (other thresholds, generations, selectors) at the same pack version."""
    return hashlib.sha256(to_yaml([group_document(g) for g in groups]).encode()).hexdigest()[:16]


def with_version(file: str, groups: list[RuleGroup], digest: str) -> list[RuleGroup]:
    """``groups`` with the file's version rule (``catalog.PACK_RULES_INFO``) at the end of its last recording
    group: the header's version where Prometheus shows it (a rule's labels), and ``digest`` (``rules_digest`` of
    ``groups``), for ``doctor`` to compare with the pack and the config. A file of alerts only carries none (its
    groups stay alerts only, as routing and the lint read them: doctor compares its alerts one by one), nor one
    whose recording groups are full (MAX_RULES_PER_GROUP): doctor then says its version is unknown."""
    labels = (("version", __version__), ("rule_file", file), ("digest", digest))
    info = RecordingRule(catalog.PACK_RULES_INFO.name, call("vector", 1), labels)
    recording = [
        i
        for i, g in enumerate(groups)
        if any(isinstance(r, RecordingRule) for r in g.rules) and len(g.rules) < MAX_RULES_PER_GROUP
    ]
    if not recording:
        return groups
    last = recording[-1]
    return [*groups[:last], replace(groups[last], rules=(*groups[last].rules, info)), *groups[last + 1 :]]


def all_groups(cfg: Config) -> list[RuleGroup]:
    """Recording groups first (alerts read them), in evaluation order; computed per cluster where
    ``cluster_label`` is set."""
    return [g.partitioned(cluster_scope(cfg).label) for g in (*recording_groups(cfg), alert_group(cfg))]


def placement_of(group: RuleGroup) -> str:
    """SHARD or RULER: where ``group`` runs when scraping is sharded (PLACEMENT)."""
    try:
        return PLACEMENT[group.name]
    except KeyError:
        raise ValueError(f"group {group.name} has no placement in rules.files.PLACEMENT (shard or ruler)") from None
