"""Hosts named at scrape (``node.host_identity: scrape``): the scrape config sets the target label
``hostname`` on both exporters' targets, and the rules read it instead of joining the host map.

The whole scenario library passes in this mode (the ``scrape_identity`` suite of ``gpu-execution-pack
test``); the sharded end-to-end test runs the generated relabelling on a real Prometheus. Here: what
the mode removes from the rules, and label sets as a real Prometheus stores them after the relabelling.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.promql import match, render, selector
from gpu_execution_pack.rules.files import rule_files

from .conftest import run_promtool_test

AT_SCRAPE = config_from_mapping({"node": {"host_identity": "scrape"}})
HOST_MAPS = (catalog.GPU_EXPORTER_HOST.name, catalog.NODE_EXPORTER_HOST.name)


def rules_reading(cfg: Config, names: tuple[str, ...]) -> list[str]:
    """The recorded series whose rule reads any of ``names``."""
    out = []
    for text in rule_files(cfg, Path("rules")).values():
        for rule in text.split("\n  - ")[1:]:
            head, _, body = rule.partition("\n")
            if head.startswith("record: ") and any(name in body for name in names):
                out.append(head.removeprefix("record: "))
    return out


def test_at_scrape_no_per_gpu_or_per_host_rule_joins_a_host_map():
    """The join is what the mode saves (docs/benchmarks.md); the default still joins in every such rule."""
    assert rules_reading(AT_SCRAPE, HOST_MAPS) == []
    joined = rules_reading(Config(), HOST_MAPS)
    assert catalog.GPU_MEMORY_USED.name in joined and catalog.NODE_RAM_TOTAL.name in joined


def gpu_util(hostname: str, own: str, uuid: str, execution: str, instance: str) -> str:
    """dcgm-exporter 4.8.3's GPU_UTIL as stored: its own hostname (a pod name where NODE_NAME is unset)
    renamed exported_hostname by the scrape, whose target label names the machine."""
    labels = {
        "DCGM_FI_DRIVER_VERSION": "550.90.07",
        "UUID": uuid,
        "device": "nvidia0",
        "exported_hostname": own,
        "gpu": "0",
        catalog.HOST_LABEL: hostname,
        "instance": instance,
        "job": "dcgm-exporter",
        "modelName": "NVIDIA H100 80GB HBM3",
        "pci_bus_id": "00000000:18:00.0",
        "execution_id": execution,
        "namespace": "research",
    }
    return render(catalog.SIGNALS["gpu_util"].raws[0].select(*(match(k, v) for k, v in labels.items())))


def node(metric: str, hostname: str, instance: str, **extra: str) -> str:
    labels = {catalog.HOST_LABEL: hostname, "instance": instance, "job": "node", **extra}
    return render(selector(metric, *(match(k, v) for k, v in labels.items())))


DC1, DC2 = "gpu-01.dc1.example.com", "gpu-01.dc2.example.com"
GIB = 1024**3


@pytest.mark.usefixtures("promtool_available")
def test_two_machines_with_one_short_name_keep_their_own_values(tmp_path: Path):
    """Both exporters of each machine say gpu-01 (the join would have to refuse that name); the scrape
    named them by their FQDN addresses. A node_exporter behind its container id (no host UTS namespace)
    is still named. Two machines scraped under one name (gpu-03) collide."""
    series = [
        {"series": gpu_util(DC1, "gpu-01", "GPU-aaaa", "train-a", f"{DC1}:9400"), "values": "80x10"},
        {"series": gpu_util(DC2, "gpu-01", "GPU-bbbb", "train-b", f"{DC2}:9400"), "values": "20x10"},
        {"series": node("node_uname_info", DC1, f"{DC1}:9100", nodename="gpu-01"), "values": "1x10"},
        {"series": node("node_uname_info", DC2, f"{DC2}:9100", nodename="3f2a9c1b7d4e"), "values": "1x10"},
        {"series": node("node_memory_MemTotal_bytes", DC1, f"{DC1}:9100"), "values": f"{100 * GIB}x10"},
        {"series": node("node_memory_MemTotal_bytes", DC2, f"{DC2}:9100"), "values": f"{200 * GIB}x10"},
        {"series": node("node_uname_info", "gpu-03", "10.0.3.1:9100", nodename="gpu-03.dc1"), "values": "1x10"},
        {"series": node("node_uname_info", "gpu-03", "10.0.3.2:9100", nodename="gpu-03.dc2"), "values": "1x10"},
    ]

    def gpu(execution: str, host: str, uuid: str, value: float) -> dict:
        labels = {"execution_id": execution, "namespace": "research", catalog.HOST_LABEL: host, "gpu": "0",
                  "UUID": uuid, "modelName": "NVIDIA H100 80GB HBM3"}  # fmt: skip
        return {"labels": render(catalog.GPU_UTILIZATION.select(*(match(k, v) for k, v in labels.items()))),
                "value": value}  # fmt: skip

    def ram(execution: str, host: str, value: float) -> dict:
        labels = (match("execution_id", execution), match(catalog.HOST_LABEL, host))
        return {"labels": render(catalog.NODE_RAM_TOTAL.select(*labels)), "value": value}

    collisions = render(catalog.NODE_HOST_COLLISIONS.select(match(catalog.HOST_LABEL, "gpu-03")))
    checks = [
        {"expr": catalog.GPU_UTILIZATION.name, "eval_time": "5m",
         "exp_samples": [gpu("train-a", DC1, "GPU-aaaa", 0.8), gpu("train-b", DC2, "GPU-bbbb", 0.2)]},
        {"expr": catalog.NODE_RAM_TOTAL.name, "eval_time": "5m",
         "exp_samples": [ram("train-a", DC1, 100 * GIB), ram("train-b", DC2, 200 * GIB)]},
        {"expr": catalog.NODE_HOST_COLLISIONS.name, "eval_time": "5m",
         "exp_samples": [{"labels": collisions, "value": 2}]},
    ]  # fmt: skip
    run_promtool_test(
        tmp_path,
        rule_files(AT_SCRAPE, tmp_path),
        [{"interval": "1m", "input_series": series, "promql_expr_test": checks}],
    )
