"""The rule files as Kubernetes objects: one PrometheusRule per rule file, for the Prometheus Operator.

Each object embeds the rule file generated in the same run, so what is deployed is what the tests
checked, never a second copy to drift.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from gpu_execution_pack.config import Config
from gpu_execution_pack.output import KUBERNETES_DIR, command, yaml_document
from gpu_execution_pack.rules.files import RULE_FILE_SUFFIX

SOURCE = "gpu_execution_pack/rules/kubernetes.py"


def kubernetes_rules(
    cfg: Config, rule_files: dict[Path, str], rules_dir: Path, regenerate: str = command("generate")
) -> dict[Path, str]:
    """One PrometheusRule per rule file, with the config's namespace and selector labels."""
    k = cfg.kubernetes
    out = {}
    for path, text in sorted(rule_files.items()):
        name = path.name.removesuffix(RULE_FILE_SUFFIX)
        doc = {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": {
                "name": f"{k.name_prefix}-{name}",
                "namespace": k.namespace,
                "labels": dict(k.rule_labels),
            },
            "spec": yaml.safe_load(text),
        }
        out[rules_dir / KUBERNETES_DIR / f"{name}.prometheusrule.yaml"] = yaml_document(doc, SOURCE, regenerate)
    return out
