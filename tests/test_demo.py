"""``gpu-execution-pack demo`` as a user runs it: ready within a bounded time, a fleet whose report holds every
verdict, the endpoint answering with the demo's key, live exporters scraped, and nothing left running after
Ctrl-C or SIGTERM."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.config import load_config
from gpu_execution_pack.demo import fleet
from gpu_execution_pack.demo.run import EXAMPLE_ID
from gpu_execution_pack.report.verdicts import CODES
from gpu_execution_pack.scenario.model import STEP_SECONDS

from harness import browser
from harness.prometheus import free_port

from . import report_oracle
from .conftest import REPO

# The issue asks for the ready line within 2 minutes on 2 cores; a test machine shared with other suites
# gets more, and a bound all the same.
READY_SECONDS = 300
STOP_SECONDS = 60
READY = re.compile(r"^ready: prometheus=(?P<prometheus>\S+) api=(?P<api>\S+) key=(?P<key>\S+)$")
LIVE_ID = "live-0035"  # the demo's running job, named in its printed curl command


class RunningDemo:
    """A ``demo`` subprocess on free ports in its own folder, its stdout read line by line in a thread."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.ports = (free_port(), free_port())
        command = [sys.executable, "-m", "gpu_execution_pack", "demo", "--dir", str(folder)]
        command += ["--prometheus-port", str(self.ports[0]), "--api-port", str(self.ports[1])]
        self.started = time.monotonic()
        self.process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_ready(self) -> dict[str, str]:
        """The ready line's URLs and key; fails when the demo exits or READY_SECONDS pass first."""
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                assert self.process.poll() is None, f"demo exited {self.process.returncode}: {self.output}"
                continue
            self.output.append(line)
            if found := READY.match(line):
                self.ready_seconds = time.monotonic() - self.started
                return found.groupdict()
        pytest.fail(f"no ready line within {READY_SECONDS} s: {self.output}")

    def children(self) -> set[int]:
        """Processes other than the demo whose command line names its folder (its Prometheus, its endpoint)."""
        return {pid for pid, cmd in processes().items() if str(self.folder) in cmd and pid != self.process.pid}

    def stop(self, signum: int) -> int:
        self.process.send_signal(signum)
        return self.process.wait(timeout=STOP_SECONDS)


def processes() -> dict[int, str]:
    """Every running (not zombie) process' command line, by PID, from /proc."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if state != "Z":
            out[int(entry.name)] = cmd
    return out


def port_open(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def assert_left_nothing(demo: RunningDemo, children: set[int]) -> None:
    running = processes()
    assert not children & running.keys(), {pid: running[pid] for pid in children & running.keys()}
    assert not demo.children()
    assert not any(port_open(p) for p in demo.ports)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory):
    """A demo that is ready; stopped with SIGINT (Ctrl-C) by the last test, or at the end whatever happened."""
    running = RunningDemo(tmp_path_factory.mktemp("demo"))
    try:
        ready = running.wait_ready()
        yield running, ready
    finally:
        if running.process.poll() is None:
            running.process.kill()
            running.process.wait(timeout=STOP_SECONDS)
        for pid in running.children():  # what a failed stop left behind; the test has failed already
            os.kill(pid, signal.SIGKILL)


pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("promtool_available")]


def test_the_demo_prints_the_ready_line_and_three_commands_that_name_its_servers(demo):
    running, ready = demo
    assert ready["prometheus"] == f"http://127.0.0.1:{running.ports[0]}"
    assert ready["api"] == f"http://127.0.0.1:{running.ports[1]}"
    print(f"ready after {running.ready_seconds:.0f} s")
    commands = []
    while len(commands) < 4:
        line = running.lines.get(timeout=10)
        if line.startswith("  "):
            commands.append(line.strip())
    assert "--since 1d" in commands[0] and ready["prometheus"] in commands[0]
    assert commands[2].startswith("curl") and ready["key"] in commands[2] and ready["api"] in commands[2]
    # doctor on the demo's own deployment, with its config: nothing fails, and the loaded rules are the config's.
    _, doctor = commands[3].split(" doctor ")
    assert doctor == f"--config {running.folder / 'demo.yml'}"
    run = subprocess.run(
        [sys.executable, "-m", "gpu_execution_pack", "doctor", *doctor.split(), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    checks = {c["check"]: c for c in json.loads(run.stdout)["checks"]}
    assert checks["rules version"]["status"] == "pass" and checks["rule groups"]["status"] == "pass", checks


def test_the_fleet_report_over_the_last_day_holds_every_verdict_and_the_running_job(demo):
    running, ready = demo
    config = running.folder / "demo.yml"
    command = [sys.executable, "-m", "gpu_execution_pack", "report", "--config", str(config)]
    out = subprocess.run(
        [*command, "--prometheus", ready["prometheus"], "--since", "1d", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    rows = json.loads(out.stdout)["top"]
    assert len(rows) == json.loads(out.stdout)["executions"]  # the default 20 rows hold the whole fleet
    assert {code for row in rows for code in row["verdicts"]} == set(CODES)
    assert LIVE_ID in {row["executionId"] for row in rows}
    text = subprocess.run(
        [*command, "--since", "1d"], capture_output=True, text=True, timeout=120, check=True
    ).stdout  # the config names the demo's Prometheus
    assert all(code in text for code in CODES)


def test_the_days_executions_are_billed_for_the_time_they_ran_not_the_lookback_after(demo):
    # The history is backfilled, which writes no stale marker: with Prometheus' 5-minute lookback the rules read
    # each ended execution's series on and billed every GPU 5 minutes more (the MPS pair's shared GPU at half).
    running, _ = demo
    command = [sys.executable, "-m", "gpu_execution_pack", "report", "--config", str(running.folder / "demo.yml")]
    out = subprocess.run([*command, "--since", "1d", "--json"], capture_output=True, text=True, timeout=120, check=True)
    billed = {row["executionId"]: row["gpuHoursBilled"] for row in json.loads(out.stdout)["top"]}
    cfg = load_config(running.folder / "demo.yml")
    checked = 0
    for scenario, _ in fleet.nvidia_history():
        for execution in scenario.executions:
            want = report_oracle.report(scenario, cfg, execution).gpu_hours_billed
            one_sample = len(execution.gpus) * STEP_SECONDS / 3600
            assert billed[execution.id] == pytest.approx(want, abs=one_sample), execution.id
            checked += 1
    assert checked >= len(fleet.nvidia_history())


@pytest.mark.single_version
def test_the_example_executions_page_opens_in_chromium_with_every_chart_drawn(demo, tmp_path: Path):
    # The second command the ready line gives, with --html: the page a new user opens.
    running, ready = demo
    page = tmp_path / "report.html"
    command = [sys.executable, "-m", "gpu_execution_pack", "report", "--config", str(running.folder / "demo.yml")]
    subprocess.run(
        [*command, "--prometheus", ready["prometheus"], EXAMPLE_ID, "--html", str(page)],
        capture_output=True,
        timeout=120,
        check=True,
    )
    drawn = browser.open_page(page)
    assert drawn.errors == 0, drawn.error_text
    assert drawn.charts == drawn.drawn == len(drawn.each) > 0
    assert [c.title for c in drawn.each if not (c.lines and c.points)] == []


def test_the_running_job_is_scraped_live_and_served_with_the_demo_key(demo):
    _, ready = demo
    prometheus = httpx.Client(base_url=ready["prometheus"], timeout=30)

    def query(expr: str) -> list[dict]:
        return prometheus.get("/api/v1/query", params={"query": expr}).json()["data"]["result"]

    # Both live exporters answer (each is first scraped within a scrape interval of the start), and the
    # running job's recorded series move on: a sample within the last scrapes.
    newest = f'timestamp({catalog.GPU_UTILIZATION.name}{{execution_id="{LIVE_ID}"}})'
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        up, found = query("up == 1"), query(newest)
        scraped = {r["metric"]["job"] for r in up} >= {"dcgm-exporter", "node"}
        if scraped and found and time.time() - max(float(r["value"][1]) for r in found) < 45:
            break
        time.sleep(2)
    else:
        pytest.fail(f"the live exporters are not scraped ({up}) or {LIVE_ID} has no recent sample ({found})")
    assert len(found) == 2  # its two GPUs

    path = f"/api/v2/external/execution/{LIVE_ID}/metrics"
    api = httpx.Client(base_url=ready["api"], timeout=60)
    assert api.get(path).status_code == 401
    answer = api.get(path, headers={"Authorization": f"Bearer {ready['key']}"})
    assert answer.status_code == 200, answer.text
    utilization = answer.json()["series"][catalog.GPU_UTILIZATION.api_name]["entries"]
    assert len(utilization) == 2 and all(entry["values"] for entry in utilization)


def test_a_second_demo_in_a_running_demos_folder_is_refused_and_empties_nothing(demo):
    running, _ = demo
    before = sorted(p.name for p in running.folder.iterdir())
    command = [sys.executable, "-m", "gpu_execution_pack", "demo", "--dir", str(running.folder)]
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == f"error: --dir: a running demo uses {running.folder}; stop it or give another folder"
    assert sorted(p.name for p in running.folder.iterdir()) == before and "prometheus" in before


@pytest.mark.single_version
def test_a_folder_that_cannot_be_made_is_named_in_one_line(tmp_path: Path):
    (tmp_path / "file").write_text("")
    command = [sys.executable, "-m", "gpu_execution_pack", "demo", "--dir", str(tmp_path / "file" / "demo")]
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == f"error: --dir: cannot use {tmp_path / 'file' / 'demo'}: Not a directory"


def test_ctrl_c_stops_the_demo_and_every_process_it_started(demo):
    running, _ = demo
    children = running.children()
    assert len(children) >= 2, processes()  # its Prometheus and its endpoint
    assert running.stop(signal.SIGINT) == 0
    assert_left_nothing(running, children)


@pytest.mark.single_version
def test_sigterm_stops_the_demo_and_every_process_it_started(tmp_path: Path):
    running = RunningDemo(tmp_path / "demo")
    try:
        running.wait_ready()
        children = running.children()
        assert len(children) >= 2, processes()
        assert running.stop(signal.SIGTERM) == 0
        assert_left_nothing(running, children)
    finally:
        if running.process.poll() is None:
            running.process.kill()
        for pid in running.children():
            os.kill(pid, signal.SIGKILL)


@pytest.mark.single_version
def test_without_prometheus_the_demo_says_what_to_install_and_starts_nothing(tmp_path: Path):
    env = dict(os.environ, PATH="/nonexistent")
    command = [sys.executable, "-m", "gpu_execution_pack", "demo", "--dir", str(tmp_path / "demo")]
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "apt-get install prometheus" in out.stderr, out.stderr
    assert not (tmp_path / "demo").exists()


@pytest.mark.single_version
def test_a_folder_holding_other_files_is_refused_and_left_as_it_was(tmp_path: Path):
    (tmp_path / "rules").mkdir()
    (tmp_path / "notes.txt").write_text("mine")
    command = [sys.executable, "-m", "gpu_execution_pack", "demo", "--dir", str(tmp_path)]
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--dir" in out.stderr and "not empty" in out.stderr, out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "rules"]
