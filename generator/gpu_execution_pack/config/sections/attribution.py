"""Config keys of section ``attribution``: how DCGM series are tied to executions."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack.config.loader import check_selectors, opt
from gpu_execution_pack.promql import Matcher, parse_matchers


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
        "exporter pod's node names its GPUs' host. Read in every attribution mode; absent is fine. Behind a "
        "ServiceMonitor without honorLabels, each pod's labels are read from exported_namespace, exported_pod "
        "and exported_node where present.",
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
