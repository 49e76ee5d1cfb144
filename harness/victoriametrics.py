"""A real VictoriaMetrics on a loopback port, and vmalert replaying the pack's rules over what it holds.

Debian's ``victoria-metrics`` package (1.79.5) ships both binaries. Raw samples go in through VictoriaMetrics'
Prometheus text import; ``vmalert -replay.*`` evaluates the rules over that history as a live vmalert would
have and writes the recorded series back through remote write. Replay needs (docs/scaling.md):

- ``-datasource.queryStep=0s``: each query's step is the group's interval, so a selector reads the samples
  of one interval, as Prometheus' evaluation does, not the last five minutes;
- the groups in dependency order (a group reads only what earlier groups recorded), and a delay between
  rules long enough for what one wrote to be searchable by the next (``-replay.rulesDelay``, at least the
  remote write's flush interval; VictoriaMetrics makes new samples searchable within about a second);
- no ``query`` template in an alert's annotations: replay has no ``query`` function and stops at one once the
  alert's condition holds, so only recording groups are replayed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gpu_execution_pack.demo.prometheus import free_port, stop_process, wait_ready
from gpu_execution_pack.scenario.render import STALE, RenderedSeries

VM_MISSING = "{binary} is not on PATH: run 'sudo apt-get install victoria-metrics' (Debian's package)"
# How often vmalert's remote write flushes in replay, and the delay between rules that lets a rule read the
# previous one's output (flushed, then searchable within VictoriaMetrics' second).
FLUSH_INTERVAL = "200ms"
RULES_DELAY = "2s"


def binary(name: str) -> str:
    """The path of one of the package's binaries; an AssertionError with the install hint where it is missing
    (CI installs the package: a missing binary fails the test rather than skipping it)."""
    path = shutil.which(name)
    assert path, VM_MISSING.format(binary=name)
    return path


def prometheus_text(series: list[RenderedSeries], start: int, step: int) -> str:
    """Prometheus exposition text of rendered series with millisecond timestamps, sample k at ``start + k *
    step`` (stale markers and missing samples dropped): what ``/api/v1/import/prometheus`` reads."""
    lines = []
    for s in series:
        labels = ",".join(f'{k}="{v}"' for k, v in s.labels)
        lines += [
            f"{s.metric}{{{labels}}} {value!r} {(start + k * step) * 1000}"
            for k, value in enumerate(s.samples)
            if value is not None and value != STALE
        ]
    return "\n".join(lines) + "\n"


@dataclass
class VictoriaMetrics:
    """A single-node VictoriaMetrics on a data directory of its own under ``workdir``."""

    workdir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.port = self.port or free_port()
        self.process = subprocess.Popen(
            [
                binary("victoria-metrics"),
                f"-storageDataPath={self.workdir / 'vm-data'}",
                f"-httpListenAddr=127.0.0.1:{self.port}",
                "-retentionPeriod=100y",  # replayed data is minutes to days old
                "-search.disableCache",  # a rule must see what the previous rule just wrote
                "-search.latencyOffset=0s",
                "-loggerLevel=ERROR",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(self.workdir / "victoria-metrics.log").open("ab"),
            start_new_session=True,
        )
        if not wait_ready(self.url, self.process):  # VictoriaMetrics answers /-/ready too
            self.stop()
            raise RuntimeError(f"victoria-metrics did not start; see {self.workdir / 'victoria-metrics.log'}")

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None

    def import_text(self, text: str) -> None:
        """Import Prometheus text with timestamps, and make it searchable now."""
        request = urllib.request.Request(f"{self.url}/api/v1/import/prometheus", data=text.encode(), method="POST")
        with urllib.request.urlopen(request, timeout=60) as r:
            assert r.status == 204, r.status
        self.flush()

    def flush(self) -> None:
        with urllib.request.urlopen(f"{self.url}/internal/force_flush", timeout=30) as r:
            assert r.status == 200, r.status

    def export(self, metric: str, start: int, end: int) -> dict[tuple[tuple[str, str], ...], list[tuple[int, float]]]:
        """Every raw sample of ``metric`` in [start, end] (unix seconds): labels -> [(seconds, value)]."""
        params = urllib.parse.urlencode({"match[]": metric, "start": start, "end": end})
        with urllib.request.urlopen(f"{self.url}/api/v1/export?{params}", timeout=60) as r:
            lines = r.read().decode().splitlines()
        out = {}
        for line in lines:
            item = json.loads(line)
            labels = tuple(sorted((k, v) for k, v in item["metric"].items() if k != "__name__"))
            out[labels] = [(t // 1000, v) for t, v in zip(item["timestamps"], item["values"], strict=True)]
        return out

    def replay(self, rule_files: list[Path], start: int, end: int, interval: str) -> subprocess.CompletedProcess:
        """``vmalert`` in replay mode over [start, end]: ``rule_files`` (in dependency order) evaluated every
        ``interval`` where a group sets none, read from and written back to this server."""

        def rfc3339(t: int) -> str:
            return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        done = subprocess.run(
            [
                binary("vmalert"),
                *(f"-rule={path}" for path in rule_files),
                f"-datasource.url={self.url}",
                f"-remoteWrite.url={self.url}",
                "-datasource.queryStep=0s",
                f"-evaluationInterval={interval}",
                f"-replay.timeFrom={rfc3339(start)}",
                f"-replay.timeTo={rfc3339(end)}",
                f"-replay.rulesDelay={RULES_DELAY}",
                f"-remoteWrite.flushInterval={FLUSH_INTERVAL}",
                "-replay.disableProgressBar",
                "-loggerLevel=ERROR",
                f"-httpListenAddr=127.0.0.1:{free_port()}",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        self.flush()
        return done


def dry_run(rule_file: Path) -> subprocess.CompletedProcess:
    """``vmalert -dryRun``: whether vmalert accepts ``rule_file`` (parsed and its expressions checked)."""
    return subprocess.run(
        [binary("vmalert"), "-dryRun", f"-rule={rule_file}", "-loggerLevel=ERROR"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
