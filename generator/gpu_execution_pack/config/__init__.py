"""The pack's configuration: the keys (``schema``), and loading a YAML file into them (``loader``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

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
    "SEVERITIES",
    "Alerts",
    "Config",
    "ConfigError",
    "PredictAlert",
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
    return config_from_mapping(data, str(path))
