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
    "load_config_document",
    "read_yaml",
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
    return load_config_document(path)[0]


def load_config_document(path: str | Path) -> tuple[Config, Any]:
    """A config file's Config and the YAML document it was read from, the file read once (a pipe, such as
    ``-c /dev/stdin``, can be read only once)."""
    path = Path(path)
    document = read_yaml(path)
    return relative_to(config_from_mapping(document, str(path)), path.parent), document


# A config file is a few kilobytes; one far larger is another file given by mistake.
MAX_CONFIG_BYTES = 2**20


def read_yaml(path: Path) -> Any:
    """The YAML document of the config file ``path``; ConfigError naming the file and the first problem on one line
    (where the file cannot be read, is not UTF-8, is not YAML, or writes one key twice in a mapping)."""
    try:
        with path.open("rb") as file:  # at most MAX_CONFIG_BYTES and one more: /dev/zero would never end
            raw = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the config file: {err.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES // 2**20} MiB: not a config file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise ConfigError(
            f"{path}: not UTF-8 text (byte 0x{raw[err.start]:02x} on line {line}); save the file as UTF-8"
        ) from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: no Python objects
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = " ".join(str(err.problem or err.context or "unreadable").split())
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(err).split())}") from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, refusing a key written twice in one mapping: PyYAML keeps the last one silently, so a
    second ``vendors:`` further down would quietly replace the first."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    first: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<:` merges: an explicit key may override a merged one
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            line = first.get(key)
        except TypeError:  # an unhashable key: construct_mapping says so itself
            continue
        if line is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is written twice (first on line {line + 1})", key_node.start_mark
            )
        first[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


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
