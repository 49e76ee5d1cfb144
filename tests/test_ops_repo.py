"""The example ops repo, as a user runs it: the pack installed from a wheel, their config, their folders."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gpu_execution_pack import __version__
from gpu_execution_pack.dashboards.lint import SCHEMAS_ENV

from .conftest import REPO

# The ops repo's make and promtool check: the rule semantics on Prometheus 3 are the suites' own test.
pytestmark = [pytest.mark.single_version, pytest.mark.e2e]

EXAMPLE = REPO / "examples" / "ops-repo"
CONFIG = "config/gpu-pack.yml"


def user_environment(**extra: str) -> dict[str, str]:
    """This process' environment as an ops repo's user has it: without the CI-only Grafana schemas."""
    env = {k: v for k, v in os.environ.items() if k != SCHEMAS_ENV}
    return env | extra


def make(ops: Path, *targets: str, pack: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        # With the api extra, as the example's PACK has it: report, doctor, query and serve need it.
        ["make", "-C", str(ops), *targets, f"PACK={pack}[api]", f"PYTHON={sys.executable}"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env=env or user_environment(),
    )


@pytest.fixture(scope="module")
def ops_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A copy of examples/ops-repo outside the source tree, and the pack's wheel built from this checkout."""
    root = tmp_path_factory.mktemp("ops")
    wheels = root / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(REPO)],
        check=True,
        capture_output=True,
    )
    [wheel] = wheels.glob("gpu_execution_pack-*.whl")
    ops = root / "ops-repo"
    shutil.copytree(EXAMPLE, ops, ignore=shutil.ignore_patterns(".venv", "build"))
    return ops, wheel


@pytest.mark.usefixtures("promtool_available")
def test_make_generates_checks_and_tests_the_ops_repos_own_config(ops_repo: tuple[Path, Path]):
    ops, wheel = ops_repo

    def pack_output() -> dict[Path, float]:
        return {p: p.stat().st_mtime for d in ("rules", "dashboards", "docs") for p in (REPO / d).rglob("*")}

    before = pack_output()
    done = make(ops, "all", "test", pack=wheel)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    # The pack came from the wheel, into the ops repo's own venv.
    cli = ops / ".venv" / "bin" / "gpu-execution-pack"
    version = subprocess.run([str(cli), "--version"], capture_output=True, text=True, check=True).stdout
    assert version.split() == ["gpu-execution-pack", __version__]
    # With its api extra: `query` gets as far as asking Prometheus (none listens on port 1), not an ImportError.
    asked = subprocess.run(
        [str(cli), "query", "job-1", "--prometheus", "http://127.0.0.1:1"], capture_output=True, text=True, cwd=ops
    )
    assert asked.returncode == 3 and "Traceback" not in asked.stderr, asked.stderr
    assert "127.0.0.1:1" in asked.stderr and "extra" not in asked.stderr, asked.stderr

    # Everything lands in the ops repo's folders, named as its config says.
    rules = ops / "prometheus" / "rules"
    assert {p.name for p in rules.glob("*.rules.yml")} >= {"execution-gpu.rules.yml", "alerts.rules.yml"}
    dashboards = ops / "grafana" / "dashboards"
    assert {p.name for p in dashboards.glob("*.json")} == {"execution.json", "fleet.json", "cost.json"}
    runbook = (ops / "docs" / "runbook.md").read_text()
    # The report reference, with this config's waste threshold.
    assert "under 25 % (`alerts.gpu_underutilized.threshold`)" in (ops / "docs" / "report.md").read_text()
    assert not (ops / "config" / "prometheus").exists() and not (ops / "rules").exists()

    # Headers pin the version and say how to regenerate here.
    header = (rules / "alerts.rules.yml").read_text().splitlines()[:2]
    assert f"gpu-execution-pack {__version__} " in header[0]
    assert header[1] == f"# Regenerate: gpu-execution-pack generate --config {CONFIG}"

    # The config's thresholds, in the alerts and in the runbook alike.
    alerts = yaml.safe_load((rules / "alerts.rules.yml").read_text())["groups"][0]["rules"]
    waste = next(a for a in alerts if a["alert"] == "GpuExecutionGpuUnderutilized")
    assert "< 0.25" in waste["expr"] and waste["for"] == "20m"
    assert "averaged under 25 % utilisation for 20m" in runbook
    assert (
        waste["annotations"]["runbook_url"]
        == "https://ops.example.internal/gpu/runbook.md#gpuexecutiongpuunderutilized"
    )
    assert 'label_job_id!=""' in (rules / "execution-gpu.rules.yml").read_text()  # kubernetes mode

    # Deployment settings from the config.
    rule_object = yaml.safe_load((rules / "kubernetes" / "alerts.prometheusrule.yaml").read_text())
    assert rule_object["metadata"]["name"] == "acme-gpu-alerts"
    assert rule_object["metadata"]["namespace"] == "observability"
    assert rule_object["metadata"]["labels"] == {"prometheus": "main", "role": "alert-rules"}
    configmap = yaml.safe_load((dashboards / "kubernetes" / "cost.configmap.yaml").read_text())
    assert configmap["metadata"]["name"] == "acme-gpu-dashboard-cost"
    assert configmap["metadata"]["annotations"] == {"grafana_folder": "Acme GPU"}
    provider = yaml.safe_load((dashboards / "provisioning" / "dashboards.yml").read_text())["providers"][0]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards/acme-gpu"
    assert provider["folder"] == "Acme GPU" and provider["name"] == "acme-gpu"

    # make test built the promtool suites for this config and promtool passed them.
    assert "3 generated suites in build/promtool/ pass" in done.stdout
    assert {p.name for p in (ops / "build" / "promtool").glob("*.test.yml")} == {
        "config.test.yml",
        "config-alerts.test.yml",
        "config-amd.test.yml",  # its config reads AMD GPUs too (vendors by default), in kubernetes mode
    }

    # Nothing was written into the pack's checkout.
    assert pack_output() == before
    assert not (REPO / "prometheus").exists() and not (REPO / "grafana").exists()


def test_check_asked_for_the_json_schema_check_without_jsonschema_says_what_to_install(
    ops_repo: tuple[Path, Path], tmp_path: Path
):
    """A plain install has no jsonschema: with GRAFANA_SCHEMAS_DIR set, check fails with what to do, not a traceback."""
    ops, wheel = ops_repo
    if not (ops / ".venv" / ".installed").exists():  # run alone: set the repo up first
        assert make(ops, "rules", "dashboards", "docs", pack=wheel).returncode == 0
    done = make(ops, "check", pack=wheel, env=user_environment(**{SCHEMAS_ENV: str(tmp_path)}))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert f"({SCHEMAS_ENV} is set) needs jsonschema" in done.stderr
    assert "pip install 'gpu-execution-pack[schemas]'" in done.stderr


def test_check_fails_when_the_config_changed_and_the_output_was_not_regenerated(ops_repo: tuple[Path, Path]):
    ops, wheel = ops_repo
    if not (ops / ".venv" / ".installed").exists():  # run alone: set the repo up first
        assert make(ops, "rules", "dashboards", "docs", pack=wheel).returncode == 0
    config = ops / CONFIG
    config.write_text(config.read_text().replace("threshold: 0.25", "threshold: 0.3"))
    done = make(ops, "check", pack=wheel)
    assert done.returncode != 0
    assert "stale generated files" in done.stderr
    assert "prometheus/rules/alerts.rules.yml" in done.stderr and "docs/runbook.md" in done.stderr
    assert f"--config {CONFIG}" in done.stderr


def test_a_new_pack_pin_makes_a_new_venv_and_the_same_one_keeps_it(ops_repo: tuple[Path, Path], tmp_path: Path):
    """Bumping PACK (the next release) must install it, as a fresh CI runner would; an unchanged PACK must not
    reinstall. (Last in this file: it leaves the venv on another PACK.)"""
    ops, wheel = ops_repo
    installed = ops / ".venv" / ".installed"
    if not installed.exists():  # run alone: set the repo up first
        assert make(ops, "venv", pack=wheel).returncode == 0
    before = installed.stat().st_mtime_ns
    assert make(ops, "venv", pack=wheel).returncode == 0
    assert installed.stat().st_mtime_ns == before
    bumped = tmp_path / "next" / wheel.name  # the same wheel under another name: another PACK
    bumped.parent.mkdir()
    shutil.copy(wheel, bumped)
    done = make(ops, "venv", pack=bumped)
    assert done.returncode == 0, done.stderr[-3000:]
    assert installed.stat().st_mtime_ns > before
    assert (ops / "build" / "pack-source").read_text() == f"{bumped}[api]\n"
    # PACK left as the Makefile has it (its placeholder), as ./ci.sh runs after a `make PACK=...`: the venv stays.
    after = installed.stat().st_mtime_ns
    kept = subprocess.run(
        ["make", "-C", str(ops), "venv", f"PYTHON={sys.executable}"], capture_output=True, text=True, timeout=300
    )
    assert kept.returncode == 0, kept.stderr
    assert installed.stat().st_mtime_ns == after
