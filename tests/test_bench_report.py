"""docs/benchmarks.md is what `make bench` wrote from its figures, docs/benchmarks.json."""

from __future__ import annotations

import json

from bench.run import DOC, PLOT, RESULTS, report


def test_the_benchmark_report_is_rendered_from_its_figures():
    results = json.loads(RESULTS.read_text())
    assert DOC.read_text(encoding="utf-8") == report(results)  # hand edits are lost at the next run
    assert PLOT.exists() and PLOT.read_bytes().startswith(b"\x89PNG")
    sizes = [gpus for gpus, _, _ in results["fleet"]]
    assert sizes == [1000, 10000]  # the fleet sizes the issue asks figures for
