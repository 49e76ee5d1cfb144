"""docs/benchmarks.md is what `make bench` wrote from its figures, docs/benchmarks.json."""

from __future__ import annotations

import json
import re

from bench.common import RESULTS
from bench.document import DOC, PHASE_ORDER, PLOT, report
from bench.fleet_rules import PINNED

from .conftest import REPO


def test_the_benchmark_report_is_rendered_from_its_figures():
    results = json.loads(RESULTS.read_text())
    assert DOC.read_text(encoding="utf-8") == report(results)  # hand edits are lost at the next run
    assert PLOT.exists() and PLOT.read_bytes().startswith(b"\x89PNG")
    sizes = [gpus for gpus, _ in results["fleet"]]
    assert sizes == [1000, 10000]  # the fleet sizes the issue asks figures for
    for _, run in results["fleet"]:
        # One Prometheus: the pack, the floor, the pack again (drift shows), the pack with the fleet's
        # exporter generation pinned and no rules, in that order.
        assert PHASE_ORDER == ("pack", "floor", "pack again", PINNED, "none")
        assert set(run["phases"]) == set(PHASE_ORDER)
        assert all(not p["groups"] for p in [run["phases"]["none"]])
        # The fleet publishes what default installs do: every default DCGM field (25, and the power
        # limit) per GPU entry, and node_exporter's 8 CPU modes per logical CPU beside the rest.
        assert run["series"]["per_gpu"] >= 26
        assert run["series"]["per_host"] >= 8 * run["cpus_per_host"] >= 8 * 64


def test_the_scaling_guide_quotes_figures_the_benchmark_report_holds():
    """docs/scaling.md's "When one Prometheus is no longer enough" cites the report; a rerun must not leave it stale.

    Every figure there of three or more characters (1,349; 19.9; 1.800) must appear in
    docs/benchmarks.md, or `make bench` changed it and the guide must be updated.
    """
    guide = (REPO / "docs" / "scaling.md").read_text(encoding="utf-8")
    section = guide.split("## When one Prometheus is no longer enough", 1)[1].split("\n## ", 1)[0]
    report = DOC.read_text(encoding="utf-8")
    figures = {f for f in re.findall(r"\d[\d,]*(?:\.\d+)?", section) if len(f) >= 3}
    assert len(figures) >= 10, figures  # the section still quotes the report
    assert not {f for f in figures if f not in report}, "figures in docs/scaling.md not in docs/benchmarks.md"
