"""``doctor`` against real Prometheus servers loaded with the scenario library: one deployment that
matches its config (nothing fails) and one that diverges from it in every way the checklist names
(several clusters without ``cluster_label``, a host name two machines claim, a scrape too slow for the
rate windows, rule groups not loaded), each found with its fix; and ``--write-config`` writing the
config the first deployment should have."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from gpu_execution_pack.build import rule_outputs
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.output import write_all
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.scenario import library
from gpu_execution_pack.scenario.render import Renderer

from harness.prometheus import Prometheus, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("promtool_available")]

REPO = Path(__file__).resolve().parent.parent
# The first deployment's config: one dcgm-exporter generation, NVIDIA only, as its fleet is.
MATCHING = {"vendors": ["nvidia"], "dcgm": {"generations": ["4.8"]}}
CLUSTERED = {"vendors": ["nvidia"], "dcgm": {"generations": ["4.8"]}, "cluster_label": "cluster"}


def serve(workdir: Path, cfg_data: dict, scenarios: list, scrape: str, rules: bool) -> Prometheus:
    """A Prometheus holding ``scenarios`` up to a minute ago (so their GPUs report now), scraping itself every
    ``scrape`` with the target label hostname, with ``cfg_data``'s rule files loaded where ``rules``."""
    cfg = config_from_mapping({**cfg_data, "output": {"rules_dir": str(workdir / "rules")}})
    end = int(time.time()) - 60
    start = end - max(s.window_minutes for s in scenarios) * 60
    series = [s for scenario in scenarios for s in Renderer(scenario, cfg).all_series()]
    server = Prometheus(workdir, port=free_port())
    server.load(series, all_groups(cfg), start, end)
    write_all({p: text for p, text in rule_outputs(cfg).items() if p.name.endswith(".rules.yml")})
    server.config_text = (
        f"global: {{scrape_interval: {scrape}, evaluation_interval: 15s}}\n"
        + (f"rule_files: ['{workdir / 'rules'}/*.rules.yml']\n" if rules else "")
        + "scrape_configs:\n- job_name: self\n  static_configs:\n"
        + f"  - targets: ['127.0.0.1:{server.port}']\n    labels: {{hostname: prometheus-host}}\n"
    )
    server.reload()
    reloaded(server, rules)
    return server


def reloaded(server: Prometheus, rules: bool, seconds: float = 30) -> None:
    """Wait until the server scrapes its target (and has loaded the rule files), as a reload is asynchronous."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        targets = server._data("targets", {"state": "active"}, 10)["activeTargets"]
        groups = server._data("rules", {}, 10)["groups"]
        if targets and (groups or not rules):
            return
        time.sleep(0.5)
    raise AssertionError("the reloaded configuration did not take effect")


def doctor(server: Prometheus, cfg_data: dict | None, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "gpu_execution_pack", "doctor", "--prometheus", server.url, *extra]
    if cfg_data is not None:
        config = tmp_path / "pack.yml"
        config.write_text(yaml.safe_dump(cfg_data))
        args += ["--config", str(config)]
    return subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=120)


def checks_of(run: subprocess.CompletedProcess) -> dict[str, dict]:
    return {c["check"]: c for c in json.loads(run.stdout)["checks"]}


@pytest.fixture(scope="module")
def matching(tmp_path_factory: pytest.TempPathFactory):
    server = serve(tmp_path_factory.mktemp("matching"), MATCHING, [library.training_in("4.8")], "15s", rules=True)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def divergent(tmp_path_factory: pytest.TempPathFactory):
    scenarios = [*library.two_clusters(), *library.name_collision_installs()[:1]]
    server = serve(tmp_path_factory.mktemp("divergent"), CLUSTERED, scenarios, "5m", rules=False)
    try:
        yield server
    finally:
        server.stop()


def test_a_deployment_that_matches_its_config_passes(matching, tmp_path: Path):
    run = doctor(matching, MATCHING, tmp_path, "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    checks = checks_of(run)
    assert {c["status"] for c in checks.values()} <= {"pass", "info"}, checks
    for name in ("vendors", "dcgm generations", "rule groups", "attribution", "clusters", "scrape intervals"):
        assert checks[name]["status"] == "pass", checks[name]
    assert checks["attribution"]["found"].startswith("4 of ")  # the training job's four GPUs


def test_the_defaults_against_a_one_generation_nvidia_fleet_say_what_to_pin(matching, tmp_path: Path):
    run = doctor(matching, None, tmp_path, "--json")
    checks = checks_of(run)
    assert checks["vendors"]["status"] == "warn" and checks["vendors"]["fix"].startswith("set vendors: [nvidia] ")
    assert checks["dcgm generations"]["status"] == "warn"
    assert checks["dcgm generations"]["fix"].startswith("set dcgm.generations: [4.8]")
    # The defaults read AMD too: their amd group is not among the loaded ones.
    assert checks["rule groups"]["status"] == "fail" and "gpu-execution-pack.amd" in checks["rule groups"]["found"]
    assert run.returncode == 1


def test_a_config_pinned_to_another_generation_fails_with_the_fix(matching, tmp_path: Path):
    checks = checks_of(doctor(matching, {"dcgm": {"generations": ["4.9", "4.10"]}}, tmp_path, "--json"))
    assert checks["dcgm generations"]["status"] == "fail"
    assert checks["dcgm generations"]["fix"] == "set dcgm.generations: [4.8]"


def test_every_divergence_is_named_with_its_fix(divergent, tmp_path: Path):
    unclustered = {key: value for key, value in CLUSTERED.items() if key != "cluster_label"}
    run = doctor(divergent, unclustered, tmp_path)
    assert run.returncode == 1
    text = run.stdout
    assert "FAIL  clusters" in text and "-> set cluster_label: cluster" in text
    assert "FAIL  scrape intervals" in text and "every 300s" in text and "rate_window_fallback" in text
    assert "FAIL  rule groups" in text and "not loaded: gpu-execution-pack.hosts" in text
    assert "WARN  host names" in text and "gpu-01" in text


def test_with_the_cluster_label_set_the_clusters_pass(divergent, tmp_path: Path):
    checks = checks_of(doctor(divergent, CLUSTERED, tmp_path, "--json"))
    assert checks["clusters"]["status"] == "pass" and "eu-1" in checks["clusters"]["found"]


def test_write_config_pins_what_the_fleet_has_and_keeps_the_users_keys(matching, tmp_path: Path):
    written = tmp_path / "suggested.yml"
    own = {"alerts": {"gpu_memory_high": {"threshold": 0.8}}}
    doctor(matching, own, tmp_path, "--write-config", str(written))
    text = written.read_text()
    data = yaml.safe_load(text)
    assert data["vendors"] == ["nvidia"] and data["dcgm"]["generations"] == ["4.8"]
    assert data["node"]["host_identity"] == "scrape"  # the self-scrape target carries hostname
    assert data["alerts"]["gpu_memory_high"]["threshold"] == 0.8
    assert "misses" in text or "goes unrecorded" in text  # the warning a pinned config needs
    cfg = config_from_mapping(data)
    assert [g.name for g in all_groups(cfg)] == [g.name for g in all_groups(config_from_mapping(MATCHING))]
