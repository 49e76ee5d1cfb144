"""A served series is at most four hand-edited files (docs/architecture.md, "A served (API) series").

The walk done for real: a copy of the package gets NVLink TX bytes (``DCGM_FI_PROF_NVLINK_TX_BYTES``, a
profiling field of the DCP counters file) in exactly three of its files: its ``Signal`` in
catalog/signals.py, its ``Series`` (served, in ``GPU_SERIES``, naming its dashboard row) in
catalog/series.py and its load field in scenario/phases.py. The fourth file is the contract line in
tests/test_catalog.py, whose test fails on the new API name until it is written (checked here too). A
Python run on the copy then checks that everything else follows: what the scenario's GPUs publish and
the oracle's truth, the raw series rendered for promtool, the recording suites' expectations, the
recording rules, docs/series.md, the API's default series and its OpenAPI document, the AMD suite's list
of series AMD leaves absent, and the Execution dashboard's panel for it at the end of its row.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import REPO
from .test_catalog import CONTRACT

PACKAGE = REPO / "generator" / "gpu_execution_pack"
NVLINK_TX_BYTES_PER_SECOND = 25_000_000_000  # the load field's default below: every phase's NVLink traffic

# Each hand edit as (file, text that stands there once, what goes before it, what goes after it): the walk
# of docs/architecture.md.
EDITS = (
    (
        "catalog/signals.py",
        "SIGNALS: dict[str, Signal] = {\n    s.key: s\n    for s in (\n",
        "",
        '        _dcgm(\n            "nvlink_tx",\n            "bytes_per_second",\n'
        '            "NVLink transmit throughput, protocol headers excluded.",\n'
        '            RawMetric("DCGM_FI_PROF_NVLINK_TX_BYTES", "bytes_per_second", default_collected=False),\n'
        "        ),\n",
    ),
    (
        "catalog/series.py",
        "GPU_SERIES: tuple[Series, ...] = (\n",
        'GPU_NVLINK_TX = _gpu(\n    "execution_gpu:gpu_nvlink_tx_bytes_per_second",\n    "bytes_per_second",\n'
        '    "NVLink transmit throughput.",\n    Formula(signal("nvlink_tx")),\n'
        '    api=("gpuNvlinkTxBytesPerSec", "bytes_per_second"),\n    row="PCIe",\n)\n',
        "    GPU_NVLINK_TX,\n",
    ),
    (
        "scenario/phases.py",
        "    pcie_tx_bytes_per_second: int\n",
        "",
        f"    nvlink_tx_bytes_per_second: int = {NVLINK_TX_BYTES_PER_SECOND}\n",
    ),
)

# Run on the copy: everything the walk says follows from the catalog, checked by what it must hold.
CHECKS = f"""
import json
from gpu_execution_pack import catalog
from gpu_execution_pack.api.openapi import openapi_document
from gpu_execution_pack.config import Config
from gpu_execution_pack.dashboards import execution as execution_dashboard
from gpu_execution_pack.docs import series as series_doc
from gpu_execution_pack.rules.recording import recording_groups
from gpu_execution_pack.scenario import amd, expected, library, oracle
from gpu_execution_pack.scenario.render import Renderer
from gpu_execution_pack.testsuites.recording import scenario_test

new, want, raw = catalog.GPU_NVLINK_TX, float({NVLINK_TX_BYTES_PER_SECOND}), "DCGM_FI_PROF_NVLINK_TX_BYTES"
assert new in catalog.API_SERIES and new.api_name == "gpuNvlinkTxBytesPerSec", "not in the default answer"
# test_catalog's contract test fails on it until its line is added there: the fourth file.
assert {{s.api_name for s in catalog.API_SERIES}} == set({sorted(CONTRACT)!r}) | {{"gpuNvlinkTxBytesPerSec"}}
# The FP32 job exports the DCP counters file's fields: its GPU publishes the field, and the series holds it.
fp32, minute = library.fp32_job(), 20
execution = fp32.executions[0]
gpu = execution.gpus[0]
assert oracle.gpu_publishes(fp32, gpu, execution, minute)["nvlink_tx"] == want, "not published"
assert oracle.gpu_truth(fp32, execution, gpu, minute)[new] == want, "no truth"
rendered = [s for s in Renderer(fp32, Config()).all_series() if s.metric == raw]
assert rendered and want in rendered[0].samples, "not rendered for promtool"
assert [s.value for s in expected.expected(fp32, minute)[new.name]] == [want], "not in the recording oracle"
suite = json.dumps(scenario_test(fp32, Config()))
assert new.name in suite and raw in suite, "not in the recording suite"
# Where the field is not exported (the default counters), the series is expected absent.
training = library.training()
assert new not in oracle.gpu_truth(training, training.executions[0], training.executions[0].gpus[0], minute)
assert not [s for s in Renderer(training, Config()).all_series() if s.metric == raw]
assert new.name in {{r.record for g in recording_groups(Config()) for r in g.rules}}, "not recorded"
assert new.name in series_doc.render() and raw in series_doc.render(), "not in docs/series.md"
assert new.api_name in json.dumps(openapi_document()), "not in the OpenAPI document"
assert new in amd.unpublished(library.amd_fleet(), Config(), library.AMD_MID_RUN_MINUTE), "not absent on AMD"
# The Execution dashboard gives it a panel of its own at the end of the row its catalog entry names.
board = json.loads(execution_dashboard.render(Config()))
panels = board["panels"]
row_at = [i for i, p in enumerate(panels) if p["type"] == "row" and p["title"] == new.row]
assert row_at, "no row " + new.row
after = panels[row_at[0] + 1 :]
in_row = after[: next((i for i, p in enumerate(after) if p["type"] == "row"), len(after))]
assert any(new.name in t.get("expr", "") for p in in_row for t in p.get("targets", [])), "no panel in its row"
print("followed")
"""


def with_edits(copy: Path) -> None:
    """The package copied to ``copy`` with EDITS applied, each where its anchor text stands once."""
    shutil.copytree(PACKAGE, copy / "gpu_execution_pack", ignore=shutil.ignore_patterns("__pycache__"))
    for relative, anchor, before, after in EDITS:
        path = copy / "gpu_execution_pack" / relative
        text = path.read_text(encoding="utf-8")
        assert text.count(anchor) == 1, f"{relative}: {anchor!r} is no longer there once: update the walk"
        path.write_text(text.replace(anchor, before + anchor + after), encoding="utf-8")


def test_a_new_served_series_follows_from_three_package_files_and_the_contract_line(tmp_path: Path):
    with_edits(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", CHECKS],
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "followed", proc.stderr[-3000:]
