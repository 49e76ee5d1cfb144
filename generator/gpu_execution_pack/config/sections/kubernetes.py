"""Config keys of section ``kubernetes``: the objects that wrap the rules and dashboards."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack.config.loader import opt


@dataclass(frozen=True)
class Kubernetes:
    namespace: str = opt(
        "monitoring",
        "Namespace of the generated ConfigMaps and PrometheusRule objects.",
        "Your Prometheus operator and Grafana run in another namespace.",
        kind="dns_label",
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
