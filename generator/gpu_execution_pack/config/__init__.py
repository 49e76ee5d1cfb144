"""The pack's configuration: the keys (``schema``), and loading a YAML file into them (``loader``)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import yaml

from gpu_execution_pack.config.cluster import CLUSTER, ONE_CLUSTER, ClusterScope, cluster_scope
from gpu_execution_pack.config.loader import ConfigError, build
from gpu_execution_pack.config.schema import (
    CAUSE_SEVERITIES,
    SEVERITIES,
    Alerts,
    Config,
    PredictAlert,
    validate,
)

__all__ = [
    "CAUSE_SEVERITIES",
    "CLUSTER",
    "ONE_CLUSTER",
    "SEVERITIES",
    "Alerts",
    "ClusterScope",
    "Config",
    "ConfigError",
    "PredictAlert",
    "cluster_scope",
    "config_from_mapping",
    "load_config",
]


def config_from_mapping(data: Any, source: str = "<config>") -> Config:
    """Validate a parsed YAML document and return the Config it describes."""
    try:
        cfg = build(Config, data, "")
        validate(cfg)
    except ConfigError as err:
        raise ConfigError(f"{source}: {err}") from None
    return cfg


def load_config(path: str | Path | None) -> Config:
    """Load and validate a config file; ``None`` gives the built-in defaults."""
    if path is None:
        return Config()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the config file: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    return relative_to(config_from_mapping(data, str(path)), path.parent)


def relative_to(cfg: Config, base: Path) -> Config:
    """``cfg`` with its relative file and directory paths read from ``base`` (the config file's folder).

    Paths stay relative to the working directory where they can, so generated files name them
    the same on every machine.
    """

    def resolve(value: str) -> str:
        if not value or Path(value).is_absolute():
            return value
        path = Path(os.path.abspath(base / value))
        return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)

    out = cfg.output
    output = dataclasses.replace(
        out,
        rules_dir=resolve(out.rules_dir),
        dashboards_dir=resolve(out.dashboards_dir),
        docs_dir=resolve(out.docs_dir),
    )
    return dataclasses.replace(
        cfg, output=output, api=dataclasses.replace(cfg.api, keys_file=resolve(cfg.api.keys_file))
    )
