"""Config keys of section ``output``: where generated files go."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack.config.loader import opt


@dataclass(frozen=True)
class Output:
    """Relative paths are read from the config file's directory (or the working directory without one)."""

    rules_dir: str = opt(
        "rules",
        "Directory the rule files (*.rules.yml) are written to; relative paths are read from the config file's folder.",
        "Your ops repo keeps Prometheus rules elsewhere.",
        kind="path",
    )
    dashboards_dir: str = opt(
        "dashboards",
        "Directory the dashboard JSON is written to; relative paths are read from the config file's folder.",
        "Your Grafana provisioning reads another directory.",
        kind="path",
    )
    docs_dir: str = opt(
        "docs",
        "Directory `gpu-execution-pack docs` writes the runbook (runbook.md, with this config's thresholds) to; "
        "relative to the config file's folder.",
        "Your ops repo serves its runbooks from another directory.",
        kind="path",
    )
