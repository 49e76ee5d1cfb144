"""A real Prometheus on a loopback port, holding a scenario's raw series and the pack's recorded series.

The server, its backfill (raw series, then the recording rules in rounds) and the OpenMetrics text live in
the package (``gpu_execution_pack.demo.prometheus``, which ``gpu-execution-pack demo`` runs); this adds what
the tests and bench ask of it: queries, reloads, its own metrics, a scenario loaded in one call.
"""

from __future__ import annotations

import re
import signal
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from gpu_execution_pack import promtool
from gpu_execution_pack.config import Config
from gpu_execution_pack.demo import prometheus as base
from gpu_execution_pack.demo.prometheus import (  # noqa: F401  (the tests import them from here)
    BACKFILL_FILE,
    BACKFILL_GROUP,
    dependency_rounds,
    free_port,
    wait_ready,
)
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.rules.groups import RuleGroup
from gpu_execution_pack.scenario.model import Scenario
from gpu_execution_pack.scenario.render import RenderedSeries, Renderer


def loopback_scrape_config(
    address: str, hosts: Iterable[str], rules_dir: Path, alertmanager_port: int | None = None
) -> str:
    """A Prometheus config scraping one loopback server that answers for every host's exporters, every second:
    a dcgm-exporter and a node_exporter target per host, each named as that host's own exporter would be
    (``instance`` <host>:9400 and <host>:9100, paths /dcgm/<host> and /node/<host>); the pack's rule files in
    ``rules_dir``, evaluated every second; and an Alertmanager on ``alertmanager_port`` where given."""
    names = list(hosts)

    def targets(exporter: str, port: int) -> list[dict[str, Any]]:
        return [
            {"targets": [address], "labels": {"__metrics_path__": f"/{exporter}/{h}", "instance": f"{h}:{port}"}}
            for h in names
        ]

    config: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules_dir / "*.rules.yml")],
    }
    if alertmanager_port is not None:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{alertmanager_port}"]}]}]}
    config["scrape_configs"] = [
        {"job_name": "dcgm-exporter", "static_configs": targets("dcgm", 9400)},
        {"job_name": "node", "static_configs": targets("node", 9100)},
    ]
    return yaml.safe_dump(config, sort_keys=False)


def openmetrics(series: list[RenderedSeries], start: int) -> str:
    """OpenMetrics text of rendered series, sample k at ``start + k * STEP_SECONDS`` (stale markers dropped)."""
    return base.placed_openmetrics([(series, start)])


class Prometheus(base.Prometheus):
    """A Prometheus server on a temporary data directory."""

    def reload(self) -> None:
        """Write ``config_text`` and have the running server read it again (and its rule files)."""
        assert self.process is not None
        (self.workdir / "prometheus.yml").write_text(self.config_text)
        self.process.send_signal(signal.SIGHUP)

    def own_metrics(self, by_label: str = "") -> dict[str, float]:
        """Prometheus' own /metrics, summed per metric name (and per ``by_label`` value, as ``name/value``)."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=30) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name = re.split(r"[{ ]", line, maxsplit=1)[0]
                if by_label and (m := re.search(rf'{by_label}="([^"]*)"', line)):
                    name = f"{name}/{m.group(1)}"
                out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        return out

    def rule_seconds(self) -> dict[str, float]:
        """Each recording and alerting rule's last evaluation time in seconds (``/api/v1/rules``), by name."""
        groups = self._data("rules", {}, 30)["groups"]
        return {r["name"]: r["evaluationTime"] for g in groups for r in g["rules"]}

    def query(self, expr: str, at: float) -> list[dict[str, Any]]:
        """An instant query's result at unix time ``at``."""
        return self._api("query", {"query": expr, "time": at})

    def query_range(self, expr: str, start: int, end: int, step: int = 60, timeout: float = 30) -> list[dict[str, Any]]:
        """A range query's result over [start, end] (unix seconds) at ``step`` seconds."""
        return self._api("query_range", {"query": expr, "start": start, "end": end, "step": step}, timeout)

    def eval_seconds(self, expr: str, at: float, timeout: float = 120) -> float:
        """How long an instant query at ``at`` took Prometheus to evaluate (its own ``evalTotalTime``)."""
        data = self._data("query", {"query": expr, "time": at, "stats": "all"}, timeout)
        return data["stats"]["timings"]["evalTotalTime"]

    def _api(self, endpoint: str, params: dict[str, Any], timeout: float = 30) -> list[dict[str, Any]]:
        """The ``result`` of an API answer."""
        return self._data(endpoint, params, timeout)["result"]

    def load_scenario(self, scenario: Scenario, cfg: Config, end: int) -> int:
        """Backfill ``scenario`` (its raw series and every recording rule of ``cfg``) to end at ``end``; its start."""
        start = end - scenario.window_minutes * 60
        self.load(Renderer(scenario, cfg).all_series(), all_groups(cfg), start, end)
        return start

    def load(self, series: list[RenderedSeries], groups: list[RuleGroup], start: int, end: int) -> None:
        """Backfill raw ``series`` from ``start``, then every recording rule of ``groups`` over [start, end]."""
        self.load_openmetrics(openmetrics(series, start), groups, start, end)

    def load_scheduled(self, text: str, groups: list[RuleGroup], pieces: list[tuple[int, int, int]]) -> None:
        """Backfill raw samples given as OpenMetrics, then every recording rule of ``groups`` over each piece
        (start, end, seconds between evaluations): rules that ran at other intervals, or missed evaluations."""
        raw = self.workdir / "raw.om"
        raw.write_text(text)
        promtool.run(["tsdb", "create-blocks-from", "openmetrics", str(raw), str(self.data)])
        raw.unlink()
        self.start()
        for i, rules in enumerate(dependency_rounds(groups)):
            self.backfill_pieces(f"round-{i}", rules, pieces)
