"""Deployment wrappers of the dashboards: Grafana file provisioning, and Kubernetes ConfigMaps.

Every ConfigMap embeds the dashboard generated in the same run, so what is deployed is what the
tests checked, never a second copy to drift. The rules' own wrappers are in ``rules.kubernetes``.
"""

from __future__ import annotations

from pathlib import Path

from gpu_execution_pack.config import Config
from gpu_execution_pack.output import KUBERNETES_DIR, command, yaml_document

SOURCE = "gpu_execution_pack/dashboards/provisioning.py"
GRAFANA_DIR = "provisioning"


def grafana_files(cfg: Config, dashboards_dir: Path, regenerate: str = command("dashboards")) -> dict[Path, str]:
    """A dashboard provider and a Prometheus datasource for Grafana's file provisioning."""
    d = cfg.dashboards
    provider = {
        "apiVersion": 1,
        "providers": [
            {
                "name": cfg.kubernetes.name_prefix,
                "type": "file",
                "folder": d.folder,
                "disableDeletion": False,
                "allowUiUpdates": False,  # the files are the source: UI edits would be lost on restart
                "updateIntervalSeconds": 60,
                "options": {"path": d.provisioning_path, "foldersFromFilesStructure": False},
            }
        ],
    }
    datasource = {
        "apiVersion": 1,
        "datasources": [
            {
                "name": d.datasource_name,
                "type": "prometheus",
                "access": "proxy",
                "url": d.datasource_url,
                "isDefault": False,
                "jsonData": {"timeInterval": "15s"},  # the scrape interval: $__rate_interval is at least 4x it
            }
        ],
    }
    out = dashboards_dir / GRAFANA_DIR
    return {
        out / "dashboards.yml": yaml_document(provider, SOURCE, regenerate),
        out / "datasources.yml": yaml_document(datasource, SOURCE, regenerate),
    }


def kubernetes_dashboards(
    cfg: Config, dashboards: dict[Path, str], dashboards_dir: Path, regenerate: str = command("dashboards")
) -> dict[Path, str]:
    """One ConfigMap per dashboard, labelled for the Grafana sidecar of kube-prometheus-stack."""
    k = cfg.kubernetes
    out = {}
    for path, text in sorted(dashboards.items()):
        doc = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"{k.name_prefix}-dashboard-{path.stem}",
                "namespace": k.namespace,
                "labels": dict(k.dashboard_labels),
                "annotations": {k.folder_annotation: cfg.dashboards.folder},
            },
            "data": {path.name: text},
        }
        out[dashboards_dir / KUBERNETES_DIR / f"{path.stem}.configmap.yaml"] = yaml_document(doc, SOURCE, regenerate)
    return out
