"""A real Prometheus on a loopback port, holding a scenario's raw series and the pack's recorded series.

Raw series are backfilled with ``promtool tsdb create-blocks-from openmetrics``. Recorded series
are backfilled with ``promtool tsdb create-blocks-from rules`` against the running server, in
rounds: promtool evaluates each rule by querying the server, and the server does not hold the
blocks promtool is writing, so a rule sees only the recorded series of earlier rounds. Each round
therefore evaluates the rules whose inputs the earlier rounds produced, and the server is restarted
on the new blocks between rounds.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_execution_pack import promtool
from gpu_execution_pack.config import Config
from gpu_execution_pack.output import to_yaml
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.rules.groups import RecordingRule, RuleGroup
from gpu_execution_pack.scenario.model import STEP_SECONDS, Scenario
from gpu_execution_pack.scenario.render import STALE, RenderedSeries, Renderer


def wait_ready(url: str, process: subprocess.Popen[bytes], seconds: float = 30) -> bool:
    """Whether the server at ``url`` answers ``/-/ready`` within ``seconds`` (False as soon as ``process`` exits)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        if process.poll() is not None:
            return False
        time.sleep(0.2)
    return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def openmetrics(series: list[RenderedSeries], start: int) -> str:
    """OpenMetrics text of rendered series, sample k at ``start + k * STEP_SECONDS`` (stale markers dropped)."""
    lines: list[str] = []
    by_metric: dict[str, list[RenderedSeries]] = {}
    for s in series:
        by_metric.setdefault(s.metric, []).append(s)
    for metric in sorted(by_metric):
        for s in sorted(by_metric[metric], key=lambda s: s.labels):
            labels = ",".join(f'{k}="{v}"' for k, v in s.labels)
            for k, value in enumerate(s.samples):
                if value is None or value == STALE:
                    continue
                lines.append(f"{metric}{{{labels}}} {value!r} {start + k * STEP_SECONDS}")
    return "\n".join(lines) + "\n# EOF\n"


BACKFILL_GROUP = "backfill"  # every round's rule group, named alike (see Prometheus.backfill_rules)
BACKFILL_FILE = "backfill.rules.yml"


def dependency_rounds(groups: list[RuleGroup]) -> list[list[RecordingRule]]:
    """Recording rules by the round they can be backfilled in: 1 + the latest round of a series they read."""
    rules = [r for g in groups for r in g.rules if isinstance(r, RecordingRule)]
    records = {r.record for r in rules}
    level: dict[str, int] = {}

    def level_of(rule: RecordingRule) -> int:
        if rule.record not in level:
            reads = (rule.inputs & records) - {rule.record}
            level[rule.record] = 1 + max((level_of(by_record[n]) for n in reads), default=0)
        return level[rule.record]

    by_record = {r.record: r for r in rules}
    rounds: dict[int, list[RecordingRule]] = {}
    for rule in rules:
        rounds.setdefault(level_of(rule), []).append(rule)
    return [rounds[k] for k in sorted(rounds)]


@dataclass
class Prometheus:
    """A Prometheus server on a temporary data directory."""

    workdir: Path
    port: int = 0  # 0: a free port is picked at the first start
    process: subprocess.Popen[bytes] | None = None
    route_prefix: str = ""  # --web.route-prefix: the API and /-/ready live under it, e.g. "/prom"
    config_text: str = "global:\n  scrape_interval: 15s\n"  # prometheus.yml; set scrape jobs or rule files here
    flags: tuple[str, ...] = ()  # more command-line flags, e.g. --web.enable-remote-write-receiver

    def __post_init__(self) -> None:
        self.data.mkdir(parents=True, exist_ok=True)

    @property
    def data(self) -> Path:
        """The TSDB directory: backfilled blocks are moved here."""
        return self.workdir / "data"

    @property
    def url(self) -> str:
        """Where its API paths start: the root, or the route prefix."""
        return f"http://127.0.0.1:{self.port}{self.route_prefix}"

    def start(self) -> None:
        """Write ``config_text``, start the server on ``port`` (a free one if 0) and wait until it is ready."""
        config = self.workdir / "prometheus.yml"
        config.write_text(self.config_text)
        self.port = self.port or free_port()
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", self.port)) == 0:  # its /-/ready would pass for ours
                raise RuntimeError(f"127.0.0.1:{self.port} is taken: another server answers there")
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("prometheus is not on PATH: run 'sudo apt-get install prometheus'")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.data}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=400d",  # backfilled data may be weeks old
                "--log.level=warn",
                *([f"--web.route-prefix={self.route_prefix}"] if self.route_prefix else []),
                *self.flags,
            ],
            stdout=subprocess.DEVNULL,
            stderr=(self.workdir / "prometheus.log").open("ab"),
        )
        if not wait_ready(self.url, self.process):
            raise RuntimeError(f"prometheus did not become ready; see {self.workdir / 'prometheus.log'}")
        self._check_it_is_ours()

    def _check_it_is_ours(self) -> None:
        """Fail unless the server on our port reads our data directory.

        Between a stop and the next start on the same port (the backfill rounds), another test's
        server can take the port; its /-/ready would pass for ours, and every answer would be its.
        """
        flags = self._data("status/flags", {}, timeout=10)
        if Path(flags.get("storage.tsdb.path", "")).resolve() != self.data.resolve():
            raise RuntimeError(
                f"127.0.0.1:{self.port} answers for another server (data {flags.get('storage.tsdb.path')})"
            )

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

    def stop(self) -> None:
        """Stop the server if it runs; its data directory stays for the next start."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None

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

    def _data(self, endpoint: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The ``data`` of an API answer; a RuntimeError unless Prometheus reports success."""
        url = f"{self.url}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=timeout) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError(f"{endpoint} failed: {params.get('query', '')}: {body}")
        return body["data"]

    def load_scenario(self, scenario: Scenario, cfg: Config, end: int) -> int:
        """Backfill ``scenario`` (its raw series and every recording rule of ``cfg``) to end at ``end``; its start."""
        start = end - scenario.window_minutes * 60
        self.load(Renderer(scenario, cfg).all_series(), all_groups(cfg), start, end)
        return start

    def load(self, series: list[RenderedSeries], groups: list[RuleGroup], start: int, end: int) -> None:
        """Backfill raw ``series`` from ``start``, then every recording rule of ``groups`` over [start, end]."""
        self.load_openmetrics(openmetrics(series, start), groups, start, end)

    def load_openmetrics(self, text: str, groups: list[RuleGroup], start: int, end: int, max_block: str = "2h") -> None:
        """Backfill raw samples given as OpenMetrics, then every recording rule of ``groups`` over [start, end].

        Leaves the server running. ``max_block`` longer than 2h makes promtool read a long
        history's file fewer times (it reads it once per block).
        """
        raw = self.workdir / "raw.om"
        raw.write_text(text)
        promtool.run(
            ["tsdb", "create-blocks-from", "openmetrics", f"--max-block-duration={max_block}", str(raw), str(self.data)]
        )
        raw.unlink()
        self.start()
        for i, rules in enumerate(dependency_rounds(groups)):
            self.backfill_rules(f"round-{i}", rules, start, end)

    def backfill_rules(self, name: str, rules: list[RecordingRule], start: int, end: int) -> None:
        """Record ``rules`` over [start, end] from what the running server holds, and restart it with the result."""
        self.backfill_pieces(name, rules, [(start, end, STEP_SECONDS)])

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

    def backfill_pieces(self, name: str, rules: list[RecordingRule], pieces: list[tuple[int, int, int]]) -> None:
        """Record ``rules`` over each (start, end, seconds between evaluations) of ``pieces`` from what the running
        server holds, and restart it once with the results."""
        # promtool aligns a group's evaluations to an offset within the interval hashed from the group's
        # name and file path as given. Every round's group has the same name and relative path, so every
        # round is evaluated at the same instants: a rule reads the previous round's sample of that
        # instant, as a live group evaluating its rules in order does, instead of one up to a step older
        # (and the instants do not move with the temporary directory from run to run).
        outs = []
        for j, (start, end, seconds) in enumerate(pieces):
            folder = self.workdir / (name if len(pieces) == 1 else f"{name}-{j}")
            folder.mkdir()
            doc = {"groups": [{"name": BACKFILL_GROUP, "rules": [{"record": r.record, "expr": r.expr} for r in rules]}]}
            (folder / BACKFILL_FILE).write_text(to_yaml(doc))
            outs.append(folder / "blocks")
            promtool.run(
                [
                    "tsdb",
                    "create-blocks-from",
                    "rules",
                    f"--start={start}",
                    f"--end={end}",
                    f"--url={self.url}",
                    f"--output-dir={outs[-1]}",
                    f"--eval-interval={seconds}s",
                    BACKFILL_FILE,
                ],
                cwd=folder,
            )
        self.stop()  # the server reads new blocks only at start
        for out in outs:
            for block in out.iterdir():
                if block.is_dir():
                    shutil.move(str(block), self.data / block.name)
        self.start()
