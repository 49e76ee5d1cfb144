"""The harness itself: a real Prometheus starts, holds the backfilled data, and is stopped."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.scenario import library
from gpu_execution_pack.scenario.render import Renderer

from harness.prometheus import Prometheus, openmetrics

from .conftest import REPO

pytestmark = pytest.mark.usefixtures("promtool_available")


def imported_modules(path: Path) -> set[str]:
    """The modules a Python file imports, relative imports resolved against the package it sits in."""
    generator = REPO / "generator"
    package = ".".join(path.relative_to(generator).parent.parts) if path.is_relative_to(generator) else ""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found |= {module} | {f"{module}.{a.name}" for a in node.names}
    return found


def test_the_harness_is_shared_from_its_own_folder_and_the_package_never_imports_it():
    """bench/ and harness/ import nothing from tests/; no module of the package imports harness/ or tests/."""
    package = list((REPO / "generator").rglob("*.py"))
    shared = [*(REPO / "bench").glob("*.py"), *(REPO / "harness").glob("*.py")]
    from_tests = [p for p in package + shared if any(m.split(".")[0] == "tests" for m in imported_modules(p))]
    assert not from_tests
    importing = [p for p in package if any(m.split(".")[0] == "harness" for m in imported_modules(p))]
    assert not importing, "the harness is for tests and bench: the installed package may not import it"
    assert any("harness.prometheus" in imported_modules(p) for p in shared)  # bench uses it


def test_openmetrics_drops_missing_and_stale_samples_and_ends_with_eof():
    series = Renderer(library.missing_optional(frozenset(), "x"), Config()).all_series()
    text = openmetrics(series, start=1_000_000)
    assert text.endswith("# EOF\n")
    assert "stale" not in text and " None " not in text
    assert "DCGM_FI_DEV_GPU_UTIL{" in text and " 1000000\n" in text


@pytest.mark.e2e
def test_the_server_starts_loads_answers_and_stops(tmp_path: Path):
    scenario = library.missing_optional(frozenset(), "harness")  # one execution, 2 GPUs, 15 minutes
    end = int(time.time()) // 60 * 60 - 15 * 60
    server = Prometheus(tmp_path)
    try:
        start = server.load_scenario(scenario, Config(), end)
        process = server.process
        assert process is not None and process.poll() is None
        raw = server.query_range('DCGM_FI_DEV_GPU_UTIL{execution_id="solo-0005"}', start, end)
        recorded = server.query_range(f'{catalog.EXECUTION_GPU_COUNT.name}{{execution_id="solo-0005"}}', start, end)
        assert len(raw) == 2 and len(recorded) == 1
        assert {float(v) for _, v in recorded[0]["values"]} == {2.0}
        # Series recorded from recorded series need the later rounds.
        assert server.query_range(f'{catalog.NODE_RAM_UTILIZATION.name}{{execution_id="solo-0005"}}', start, end)
    finally:
        server.stop()
    assert process.poll() is not None  # stopped, also when an assertion above had failed
