"""A real Prometheus on a loopback port, holding raw series and the pack's recorded series.

Raw series are backfilled with ``promtool tsdb create-blocks-from openmetrics``. Recorded series
are backfilled with ``promtool tsdb create-blocks-from rules`` against the running server, in
rounds: promtool evaluates each rule by querying the server, and the server does not hold the
blocks promtool is writing, so a rule sees only the recorded series of earlier rounds. Each round
therefore evaluates the rules whose inputs the earlier rounds produced, and the server is restarted
on the new blocks between rounds.

The tests' and bench's harness (harness/prometheus.py) is this class with their query helpers.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_execution_pack import promtool
from gpu_execution_pack.output import to_yaml
from gpu_execution_pack.rules.groups import RecordingRule, RuleGroup, recorded_reads
from gpu_execution_pack.scenario.model import STEP_SECONDS
from gpu_execution_pack.scenario.render import STALE, RenderedSeries

PROMETHEUS_MISSING = "prometheus is not on PATH: run 'sudo apt-get install prometheus' (Debian's package)"


class PrometheusFailed(RuntimeError):
    """The server did not start, or another server answers on its port."""


def stop_process(process: subprocess.Popen[bytes], grace: float = 30) -> None:
    """Stop ``process``: terminated, and killed if it has not exited within ``grace`` seconds."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


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


def port_taken(port: int) -> bool:
    """Whether something answers on 127.0.0.1:``port``."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def placed_openmetrics(placed: Iterable[tuple[list[RenderedSeries], int]]) -> str:
    """OpenMetrics text of several renderings, each ``(series, start)``: sample k of a series at ``start + k *
    STEP_SECONDS`` (stale markers and missing samples dropped). A metric's lines stay together, and each
    series' samples in time order, however the renderings interleave."""
    by_metric: dict[str, dict[tuple[tuple[str, str], ...], list[tuple[int, float]]]] = {}
    for series, start in placed:
        for s in series:
            samples = by_metric.setdefault(s.metric, {}).setdefault(s.labels, [])
            samples += [(start + k * STEP_SECONDS, v) for k, v in enumerate(s.samples) if v is not None and v != STALE]
    lines: list[str] = []
    for metric in sorted(by_metric):
        for labels, samples in sorted(by_metric[metric].items()):
            text = ",".join(f'{k}="{v}"' for k, v in labels)
            lines += [f"{metric}{{{text}}} {value!r} {t}" for t, value in sorted(samples)]
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
            level[rule.record] = 1 + max((level_of(by_record[n]) for n in recorded_reads(rule, records)), default=0)
        return level[rule.record]

    by_record = {r.record: r for r in rules}
    rounds: dict[int, list[RecordingRule]] = {}
    for rule in rules:
        rounds.setdefault(level_of(rule), []).append(rule)
    return [rounds[k] for k in sorted(rounds)]


@dataclass
class Prometheus:
    """A Prometheus server on a data directory of its own, in a process group of its own (a Ctrl-C at the
    terminal reaches its owner, which stops it)."""

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
        if port_taken(self.port):  # its /-/ready would pass for ours
            raise PrometheusFailed(f"127.0.0.1:{self.port} is taken: another server answers there")
        binary = shutil.which("prometheus")
        if binary is None:
            raise PrometheusFailed(PROMETHEUS_MISSING)
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
            start_new_session=True,
        )
        if not wait_ready(self.url, self.process):
            self.stop()
            raise PrometheusFailed(f"prometheus did not become ready; see {self.workdir / 'prometheus.log'}")
        self._check_it_is_ours()

    def _check_it_is_ours(self) -> None:
        """Fail unless the server on our port reads our data directory.

        Between a stop and the next start on the same port (the backfill rounds), another server can take
        the port; its /-/ready would pass for ours, and every answer would be its.
        """
        flags = self._data("status/flags", {}, timeout=10)
        if Path(flags.get("storage.tsdb.path", "")).resolve() != self.data.resolve():
            self.stop()
            raise PrometheusFailed(
                f"127.0.0.1:{self.port} answers for another server (data {flags.get('storage.tsdb.path')})"
            )

    def stop(self) -> None:
        """Stop the server if it runs (killed if it has not stopped within 30 s); its data directory stays."""
        if self.process is not None:
            stop_process(self.process)
            self.process = None

    def _data(self, endpoint: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The ``data`` of an API answer; a RuntimeError unless Prometheus reports success."""
        url = f"{self.url}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=timeout) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError(f"{endpoint} failed: {params.get('query', '')}: {body}")
        return body["data"]

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
