"""``gpu-execution-pack demo``: the demo fleet in a Prometheus on 127.0.0.1, live exporters, and ``serve``.

Everything it starts is stopped on Ctrl-C, SIGTERM or any failure: Prometheus and the endpoint run in
process groups of their own (a Ctrl-C at the terminal reaches the demo, which stops them in order), and
the exporters are threads of the demo itself.
"""

from __future__ import annotations

import fcntl
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TextIO

from gpu_execution_pack import extras, promtool
from gpu_execution_pack.config import Config, ConfigError, load_config
from gpu_execution_pack.demo import fleet
from gpu_execution_pack.demo.exporters import Cycle, Exporter, targets
from gpu_execution_pack.demo.prometheus import (
    PROMETHEUS_MISSING,
    Prometheus,
    free_port,
    placed_openmetrics,
    port_taken,
    stop_process,
)
from gpu_execution_pack.output import to_yaml, write_all
from gpu_execution_pack.rules.files import all_groups, rule_files
from gpu_execution_pack.scenario.model import STEP_SECONDS
from gpu_execution_pack.scenario.render import Renderer

CONFIG_FILE = "demo.yml"
KEYS_FILE = "keys.txt"
READY_SECONDS = 30  # for the endpoint to answer /healthz once started
EXAMPLE_ID = "leak-0006"  # memory climbing to 100 % just before the crash


class DemoError(RuntimeError):
    """The demo cannot start: a missing tool, a port in use, a server that did not come up."""


def check_tools() -> None:
    """Fail with the install hint before anything starts when prometheus, promtool or the api extra is missing."""
    if shutil.which("prometheus") is None:
        raise DemoError(PROMETHEUS_MISSING)
    try:
        promtool.find()
    except promtool.PromtoolError as err:
        raise DemoError(str(err)) from None
    if hint := extras.extra_hint("api", "demo"):  # it runs the metrics endpoint
        raise DemoError(hint)


def write_config(directory: Path, prometheus_url: str) -> tuple[Config, str]:
    """The demo's config (rules and host maps evaluated every 15 s, as the backfill does; its Prometheus; a keys
    file with one key for every tenant) in ``directory``; the config and the key."""
    key = "demo-" + secrets.token_hex(12)
    (directory / KEYS_FILE).write_text(f"{key} *\n")
    mapping = {
        "rule_interval": f"{STEP_SECONDS}s",
        "derived_rule_interval": f"{STEP_SECONDS}s",
        # The host maps with the served series: the live exporters' first minute is what a new user looks at.
        "node": {"host_map_interval": ""},
        "api": {"prometheus_url": prometheus_url, "keys_file": KEYS_FILE},
    }
    (directory / CONFIG_FILE).write_text(to_yaml(mapping))
    return load_config(directory / CONFIG_FILE), key


def scrape_config(rules_dir: Path, exporters: dict[tuple[str, str], Exporter]) -> str:
    """prometheus.yml: the pack's rule files, and each live exporter as the target its series name."""
    jobs: dict[str, list[dict]] = {}
    for (job, instance), exporter in sorted(exporters.items()):
        jobs.setdefault(job, []).append({"targets": [exporter.address], "labels": {"instance": instance}})
    doc = {
        "global": {"scrape_interval": f"{STEP_SECONDS}s", "evaluation_interval": f"{STEP_SECONDS}s"},
        "rule_files": [f"{rules_dir}/*.rules.yml"],
        "scrape_configs": [{"job_name": job, "static_configs": static} for job, static in jobs.items()],
    }
    return to_yaml(doc)


@dataclass
class Demo:
    """What the demo started, to be stopped in reverse order."""

    directory: Path
    prometheus: Prometheus
    exporters: dict[tuple[str, str], Exporter] = field(default_factory=dict)
    serve: subprocess.Popen[bytes] | None = None

    def backfill(self, cfg: Config, now: int) -> list:
        """The day's history and the running job's first half hour, with every recording rule; the running
        job's rendering (its exporters serve the rest)."""
        live = Renderer(fleet.live(), cfg).all_series()
        placed = [*fleet.history(cfg, now), fleet.live_backfill(live, now)]
        first = min(p.start for p in placed)
        text = placed_openmetrics((p.series, p.start) for p in placed)
        # Backfilled samples carry no stale markers: a series that ended reads on for Prometheus' lookback (5
        # minutes), and the rules evaluated over it would hold every ended execution's GPUs 5 minutes longer
        # (billed, and halving a co-holder's share meanwhile). A live Prometheus ends them at once; over the
        # backfill, a lookback of one scrape interval comes closest. go_live restarts it with the default.
        live_flags = self.prometheus.flags
        self.prometheus.flags = (*live_flags, f"--query.lookback-delta={STEP_SECONDS}s")
        try:
            # A day in few blocks: promtool reads the file once per block.
            self.prometheus.load_openmetrics(text, all_groups(cfg), first, now, max_block="24h")
        finally:
            self.prometheus.flags = live_flags
        return live

    def go_live(self, cfg: Config, live: list, now: int) -> None:
        """Restart Prometheus on the pack's rule files, scraping the running job's exporters."""
        rules_dir = self.directory / "rules"
        write_all(rule_files(cfg, rules_dir))
        job = fleet.live().executions[0]
        last = job.end_minute * 60 // STEP_SECONDS - 1
        cycle = Cycle(fleet.live_start(now), fleet.LIVE_BACKFILLED_MINUTES * 60 // STEP_SECONDS, last)
        self.exporters = {target: Exporter(series, cycle) for target, series in targets(live).items()}
        self.prometheus.stop()
        self.prometheus.config_text = scrape_config(rules_dir, self.exporters)
        self.prometheus.start()

    def start_serve(self, api_port: int) -> str:
        """``serve`` with the demo's config on ``api_port``, once it answers; its URL."""
        url = f"http://127.0.0.1:{api_port}"
        command = [sys.executable, "-m", "gpu_execution_pack", "serve", "--config", str(self.directory / CONFIG_FILE)]
        log = (self.directory / "serve.log").open("ab")
        self.serve = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", str(api_port)],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline and self.serve.poll() is None:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=1):
                    return url
            except OSError:
                time.sleep(0.2)
        raise DemoError(f"the endpoint did not start on {url}; see {self.directory / 'serve.log'}")

    def alive(self) -> str:
        """'' while every server runs; else which one stopped."""
        if self.serve is not None and self.serve.poll() is not None:
            return f"the endpoint stopped (exit {self.serve.returncode}); see {self.directory / 'serve.log'}"
        process = self.prometheus.process
        if process is not None and process.poll() is not None:
            return f"prometheus stopped (exit {process.returncode}); see {self.prometheus.workdir / 'prometheus.log'}"
        return ""

    def stop(self) -> None:
        """Stop the endpoint, Prometheus and the exporters; each is waited for (killed if it will not stop)."""
        if self.serve is not None:
            stop_process(self.serve, grace=15)
            self.serve = None
        self.prometheus.stop()
        for exporter in self.exporters.values():
            exporter.stop()
        self.exporters = {}


def program() -> str:
    """How to run this command again: ``gpu-execution-pack`` where PATH finds this installation's (an activated
    venv), else its script's path (``make demo`` runs .venv/bin/python), else ``python -m``."""
    beside = Path(sys.executable).parent / "gpu-execution-pack"
    found = shutil.which("gpu-execution-pack")
    if found and beside.exists() and Path(found).resolve() == beside.resolve():
        return "gpu-execution-pack"
    return str(beside) if beside.exists() else f"{sys.executable} -m gpu_execution_pack"


def ready_text(prometheus_url: str, api_url: str, key: str, config: Path) -> str:
    """The ready line and four commands to try: the fleet report, one execution's, the endpoint, and doctor on
    the demo's own deployment (with its config: without one, doctor judges it against the defaults)."""
    report = f"{program()} report --config {config} --prometheus {prometheus_url}"
    metrics = f"{api_url}/api/v2/external/execution/{fleet.LIVE_ID}/metrics"
    return (
        f"ready: prometheus={prometheus_url} api={api_url} key={key}\n"
        "try:\n"
        f"  {report} --since 1d\n"
        f"  {report} {EXAMPLE_ID}\n"
        f"  curl -s -H 'Authorization: Bearer {key}' {metrics}\n"
        f"  {program()} doctor --config {config}\n"
        "Ctrl-C stops it.\n"
    )


def interrupted(*_: object) -> None:
    """SIGTERM as Ctrl-C: unwind, stopping what was started."""
    raise KeyboardInterrupt


def run(directory: str | None, prometheus_port: int, api_port: int, out: TextIO = sys.stdout) -> int:
    """Set the demo up in ``directory`` (a temporary one, removed at the end, if None), print the ready line,
    and run until Ctrl-C or SIGTERM; then stop everything. 0 on a signal, 1 if a server stopped by itself."""
    check_tools()
    for option, port in (("--prometheus-port", prometheus_port), ("--api-port", api_port)):
        # Before a minute of loading, and since another server's /healthz or /-/ready would pass for ours.
        if port and port_taken(port):
            raise DemoError(f"{option}: 127.0.0.1:{port} is taken: another server answers there")
    # Ctrl-C's SIGINT too: a process started in the background (or by a tool) may inherit it ignored.
    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    folder = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="gpu-pack-demo-"))
    in_use = prepare(folder)  # held open (and locked) while this demo runs: another demo will not empty the folder
    began = time.monotonic()
    prometheus = Prometheus(folder / "prometheus", prometheus_port or free_port())
    demo = Demo(folder, prometheus)
    try:
        cfg, key = write_config(folder, prometheus.url)
        now = int(time.time()) // 60 * 60
        print(f"loading a day of executions into Prometheus in {folder} ...", file=out, flush=True)
        live = demo.backfill(cfg, now)
        demo.go_live(cfg, live, now)
        api_url = demo.start_serve(api_port or free_port())
        print(f"(set up in {time.monotonic() - began:.0f} s)", file=out)
        out.write(ready_text(prometheus.url, api_url, key, folder / CONFIG_FILE))
        out.flush()
        while not (stopped := demo.alive()):
            time.sleep(0.5)
        print(f"error: {stopped}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopping ...", file=out, flush=True)
        return 0
    except (ConfigError, promtool.PromtoolError, RuntimeError) as err:
        raise DemoError(str(err)) from None
    finally:
        # A second Ctrl-C must not cut the stopping short and leave a server behind.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        demo.stop()
        in_use.close()
        if not directory:
            shutil.rmtree(folder, ignore_errors=True)


MARKER = ".gpu-execution-pack-demo"  # in a folder the demo made: another demo may empty it


def prepare(folder: Path) -> IO[str]:
    """An empty folder for the demo: a new one, an empty one, or an earlier demo's (emptied: its data is of
    another day). Any other folder is refused rather than emptied, and so is one a running demo uses.

    Returns the folder's marker file, open and locked (flock): the lock goes with the process however it ends,
    so a demo that still runs is told from one that has stopped."""
    if folder.exists() and not folder.is_dir():
        raise DemoError(f"--dir: {folder} is a file; give a new or empty folder")
    try:
        if folder.is_dir() and any(folder.iterdir()):
            if not (folder / MARKER).exists():
                raise DemoError(
                    f"--dir: {folder} is not empty and no earlier demo's folder; give a new or empty folder"
                )
            with (folder / MARKER).open("a") as earlier:
                if not locked(earlier):
                    raise DemoError(f"--dir: a running demo uses {folder}; stop it or give another folder")
            shutil.rmtree(folder)
        folder.mkdir(parents=True, exist_ok=True)
        marker = (folder / MARKER).open("w")
    except OSError as err:
        raise DemoError(f"--dir: cannot use {folder}: {err.strerror}") from None
    marker.write("made by gpu-execution-pack demo; the next demo in this folder empties it\n")
    marker.flush()
    locked(marker)
    return marker


def locked(marker: IO[str]) -> bool:
    """Take the demo folder's lock on ``marker``; False where another process holds it (a running demo)."""
    try:
        fcntl.flock(marker.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
