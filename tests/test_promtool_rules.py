"""The real promtool accepts the rules, passes the generated tests, and fails them on broken rules."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from generator import catalog, promtool
from generator.catalog import Formula, Unit
from generator.config import Config
from generator.output import write_all
from generator.rulefiles import rule_files
from generator.ruletests import recording_test_files

from .conftest import REPO, env_without_promtool

pytestmark = pytest.mark.usefixtures("promtool_available")


def test_promtool_version_is_read():
    assert promtool.version() >= (2, 42, 0)


def test_committed_rule_files_pass_promtool_check():
    files = sorted((REPO / "rules").glob("*.rules.yml")) + sorted((REPO / "rules/tests/variants").rglob("*.rules.yml"))
    assert len(files) >= 16
    result = promtool.check_rules(files)
    assert result.output.count("SUCCESS") == len(files)


def test_committed_promtool_tests_pass():
    tests = sorted((REPO / "rules/tests").glob("*.test.yml"))
    assert {p.stem for p in tests} == {
        "alerts.test",
        "contract.test",
        "default.test",
        "mapping.test",
        "kubernetes.test",
        "hpc_job.test",
    }
    result = promtool.test_rules(tests)
    assert result.output.count("SUCCESS") == len(tests)


def _run_default_suite(tmp_path: Path) -> str:
    """Generate rules and the default test file into tmp_path and return promtool's failure text."""
    rules = tmp_path / "rules"
    write_all(rule_files(Config(), rules) | recording_test_files(rules, only="default"))
    with pytest.raises(promtool.PromtoolError) as err:
        promtool.test_rules([rules / "tests" / "default.test.yml"])
    return str(err.value)


def _replace_gpu_series(monkeypatch: pytest.MonkeyPatch, record: str, **changes) -> None:
    series = tuple(dataclasses.replace(s, **changes) if s.record == record else s for s in catalog.GPU_SERIES)
    monkeypatch.setattr(catalog, "GPU_SERIES", series)


def test_a_wrong_unit_conversion_fails_the_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(catalog.UNITS, "MiB", Unit("MiB", "bytes", "*", 1_000_000))
    out = _run_default_suite(tmp_path)
    assert 'expr: "execution_gpu:gpu_memory_used_bytes"' in out


def test_reading_gpu_util_on_mig_instances_fails_the_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Without GPU_I_ID="" the 0 that MIG instances report for GPU_UTIL wins over engine activity.
    _replace_gpu_series(
        monkeypatch,
        "execution_gpu:gpu_utilization_ratio",
        formulas=(Formula("{gpu_util}"), Formula("{gr_engine_active}")),
    )
    out = _run_default_suite(tmp_path)
    assert 'execution_id="mig-0003"' in out


def test_counting_mig_power_per_instance_fails_the_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    rollups = tuple(
        dataclasses.replace(s, formulas=(Formula("sum by (execution_id) (execution_gpu:gpu_power_watts)"),))
        if s.record == "execution:gpu_power_watts:sum"
        else s
        for s in catalog.EXECUTION_SERIES
    )
    monkeypatch.setattr(catalog, "EXECUTION_SERIES", rollups)
    monkeypatch.setattr(
        catalog, "ALL_SERIES", (*catalog.GPU_SERIES, catalog.NODE_PRESENCE_SERIES, *catalog.NODE_SERIES, *rollups)
    )
    out = _run_default_suite(tmp_path)
    assert 'expr: "execution:gpu_power_watts:sum"' in out and "mig-0003" in out


def test_missing_promtool_says_how_to_install_it():
    code = "from generator import promtool; promtool.find()"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env_without_promtool(), cwd=REPO, check=False
    )
    assert proc.returncode != 0
    assert "apt-get install prometheus" in proc.stderr


def test_promtool_failures_are_reported_with_promtools_findings(tmp_path: Path):
    broken = tmp_path / "broken.rules.yml"
    broken.write_text("groups:\n- name: x\n  rules:\n  - record: bad name\n    expr: up\n")
    with pytest.raises(promtool.PromtoolError) as err:
        promtool.check_rules([broken])
    assert "promtool check rules failed" in str(err.value)
    assert "bad name" in str(err.value)
