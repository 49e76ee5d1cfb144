"""Shared fixtures: the repository root, and the pack generated into a scratch directory."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from gpu_execution_pack.promtool import GO_GC_PERCENT

REPO = Path(__file__).resolve().parent.parent

# The Prometheus servers, Alertmanagers and VictoriaMetrics the tests start collect their garbage as promtool
# does under the pack (promtool.go_env), unless the environment says otherwise: a backfill's range queries
# leave as much of it as promtool's evaluations. Set here, not in the harness, which the benchmarks share:
# they measure Prometheus as it is deployed.
os.environ.setdefault("GOGC", GO_GC_PERCENT)


# The files that take minutes each under `make test` (promtool over the scenario library, servers waited on),
# longest first. Collected ahead of the rest, so that --dist loadfile, which hands files to the workers in
# collection order, starts them first: a run that meets one of them last ends with one worker busy and
# the others idle (alphabetical order left test_sharded_e2e.py, about 4 minutes of waiting, for last).
SLOW_FILES_FIRST = (
    "test_promtool_rules.py",
    "test_clusters.py",
    "test_sharded_e2e.py",
    "test_alertmanager.py",
    "test_archive.py",
    "test_demo.py",
    "test_ops_repo.py",
    "test_real_installs.py",
    "test_fleet.py",
    "test_api.py",
    "test_api_streaming.py",
    "test_doctor.py",
    "test_victoriametrics.py",
    "test_report.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's own order kept


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands resolve rules/ and docs/ against the repository, wherever pytest is started."""
    monkeypatch.chdir(REPO)


def major_version(binary: str) -> int:
    """The major version ``binary --version`` prints (prometheus and promtool: "..., version 3.5.3 ...")."""
    path = shutil.which(binary)
    assert path, f"{binary} is not on PATH"
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    found = re.search(r"version (\d+)\.", out.stdout + out.stderr)
    assert found, f"{path} --version printed no version: {out.stdout + out.stderr!r}"
    return int(found.group(1))


@pytest.fixture(scope="session", autouse=True)
def _the_prometheus_asked_for() -> None:
    """With GPU_PACK_EXPECT_PROMETHEUS=3 (make test's second pass), the servers and promtool these tests
    start are Prometheus 3: a PATH that still finds 2.x fails the run instead of testing 2.x twice."""
    expected = os.environ.get("GPU_PACK_EXPECT_PROMETHEUS")
    if expected:
        for binary in ("prometheus", "promtool"):
            assert major_version(binary) == int(expected), f"{binary} is not Prometheus {expected}"


@pytest.fixture
def promtool_available() -> None:
    from gpu_execution_pack import promtool

    promtool.find()  # raises with the install hint rather than skipping: CI must have it


def named(before: str, name: str) -> str:
    """A regex of ``name`` after ``before`` (``'hostname="'``, ``'UUID="GPU-'``) as a promtool failure prints it:
    in a store of several scenarios each one's names carry its prefix (``library.apart``), alone they do not."""
    return re.escape(before) + r"(s\d\d-)?" + re.escape(name) + '"'


def suite_failures(
    variants: list, directory: Path, only: str = "", executions: frozenset[str] = frozenset(), amd: bool = True
) -> str:
    """Build the promtool suites of ``variants`` into ``directory`` and run them; with ``executions``, only
    the scenarios holding one of them (a mutation test: the scenario it breaks); without ``amd``, not the AMD
    fleet's suite (``<variant>-amd``: the same whatever scenarios a variant has, so a test about NVIDIA
    scenarios whose config the test command's suites already cover leaves it to them).

    Returns promtool's failure text, or '' when every suite passes.
    """
    from gpu_execution_pack import promtool, testsuites
    from gpu_execution_pack.output import write_all

    files = testsuites.suite_files(variants, directory, only=only, executions=executions)
    write_all(files)
    run = [p for p in testsuites.suite_test_paths(files) if amd or not p.name.endswith("-amd.test.yml")]
    try:
        promtool.test_rules(run)
    except promtool.PromtoolError as err:
        return str(err)
    return ""


def run_promtool_test(tmp_path: Path, rules: dict[Path, str], tests: list[dict]) -> None:
    """``promtool test rules`` of ``tests`` (1 minute steps) over the rule files ``rules``, written first."""
    from gpu_execution_pack import promtool
    from gpu_execution_pack.output import to_yaml

    for path, text in rules.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    suite = tmp_path / "hand-written.test.yml"
    doc = {"rule_files": [str(p) for p in rules], "evaluation_interval": "1m", "tests": tests}
    suite.write_text(to_yaml(doc))
    promtool.run(["test", "rules", str(suite)])


def env_without_promtool() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = "/nonexistent"
    env.pop("PROMTOOL", None)
    return env


EXECUTION = "train-0001"  # of the training scenario: 4 GPUs on h1 and h2, namespace "research"


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory):
    """A real Prometheus holding the training scenario (raw and recorded series), ended 15 minutes ago.

    Backfilled series read for the 5-minute lookback after they end (no stale markers), so the
    data must end well before now for the executions to count as finished, not still reporting.

    Yields (server, start, end, window); the server is stopped at the end, also after a failure.
    """
    from gpu_execution_pack.config import Config
    from gpu_execution_pack.scenario import library

    from harness.prometheus import Prometheus

    scenario = library.training_in("4.8")
    end = int(time.time()) // 60 * 60 - 15 * 60
    server = Prometheus(tmp_path_factory.mktemp("prometheus"))
    try:
        start = server.load_scenario(scenario, Config(), end)
        yield server, start, end, f"{scenario.window_minutes}m"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def report_suite_prometheus(tmp_path_factory: pytest.TempPathFactory):
    """A real Prometheus holding the report suite (raw series, every recording rule, the ALERTS the oracle says
    fire), ended at least 15 minutes ago: test_report, test_report_html and test_archive read the same fleet.

    Its backfill takes a minute of CPU; it is made once per run and shared by the workers (pytest-xdist),
    each of which starts its own server on a copy of the blocks. Yields (server, cfg, start).
    """
    from gpu_execution_pack.config import config_from_mapping

    from harness.prometheus import Prometheus

    from . import report_oracle

    cfg = config_from_mapping(report_oracle.CONFIG)
    blocks, start = _report_suite_blocks(tmp_path_factory, cfg)
    server = Prometheus(tmp_path_factory.mktemp("report-suite"))
    shutil.copytree(blocks, server.data, ignore=shutil.ignore_patterns("lock"), dirs_exist_ok=True)
    try:
        server.start()
        yield server, cfg, start
    finally:
        server.stop()


def _report_suite_blocks(tmp_path_factory: pytest.TempPathFactory, cfg) -> tuple[Path, int]:
    """The report suite's TSDB directory (built by the first worker to ask, under a lock; the others wait for
    it) and the start of its data."""
    import fcntl

    from gpu_execution_pack.rules.files import all_groups
    from gpu_execution_pack.scenario.render import RenderedSeries, Renderer

    from harness.prometheus import Prometheus

    from . import report_oracle

    # Under xdist every worker's base folder lies in the run's own; without it, the base folder is the run's.
    run = tmp_path_factory.getbasetemp()
    shared = (run.parent if os.environ.get("PYTEST_XDIST_WORKER") else run) / "report-suite-blocks"
    shared.mkdir(exist_ok=True)
    with (shared / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = shared / "start"
        if not built.exists():
            scenario = report_oracle.report_suite()
            end = int(time.time()) // 60 * 60 - 15 * 60
            start = end - scenario.window_minutes * 60
            series = Renderer(scenario, cfg).all_series()
            for labels, firing in report_oracle.alert_series(scenario, cfg):
                samples = tuple(1.0 if f else None for f in firing)
                series.append(RenderedSeries("ALERTS", tuple(sorted(labels.items())), samples))
            server = Prometheus(shared / "server")
            try:
                server.load(series, all_groups(cfg), start, end)
            finally:
                server.stop()
            built.write_text(str(start))
    return shared / "server" / "data", int(built.read_text())
