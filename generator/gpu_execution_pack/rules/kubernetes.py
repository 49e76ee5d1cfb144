"""The rule files as Kubernetes objects: one PrometheusRule per rule file, for the Prometheus Operator.

Each object embeds the rule file generated in the same run, so what is deployed is what the tests
checked, never a second copy to drift.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

from gpu_execution_pack.config import Config
from gpu_execution_pack.output import KUBERNETES_DIR, command, yaml_document
from gpu_execution_pack.rules.files import RULE_FILE_SUFFIX

SOURCE = "gpu_execution_pack/rules/kubernetes.py"
# Where a sharded rule file's rules run: `shard` (every shard), `shard-<i>` (shard i alone), `ruler`.
PLACEMENT_LABEL = "gpu-execution-pack/placement"


def kubernetes_rules(
    cfg: Config,
    rule_files: dict[Path, str],
    out_dir: Path,
    regenerate: str = command("generate"),
    placement: Callable[[Path], str] | None = None,
) -> dict[Path, str]:
    """One PrometheusRule per rule file under ``out_dir``/kubernetes, with the config's namespace and selector
    labels. ``placement``, if given, names where each file's rules run (``sharding``'s files): the object's
    name and file start with it and its label ``PLACEMENT_LABEL`` holds it, for a ``ruleSelector`` to pick."""
    k = cfg.kubernetes
    out = {}
    for path, text in sorted(rule_files.items()):
        name = path.name.removesuffix(RULE_FILE_SUFFIX)
        labels = dict(k.rule_labels)
        if placement is not None:
            labels[PLACEMENT_LABEL] = placement(path)
            name = f"{labels[PLACEMENT_LABEL]}-{name}"
        doc = {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": {"name": f"{k.name_prefix}-{name}", "namespace": k.namespace, "labels": labels},
            "spec": yaml.safe_load(text),
        }
        out[out_dir / KUBERNETES_DIR / f"{name}.prometheusrule.yaml"] = yaml_document(doc, SOURCE, regenerate)
    return out
