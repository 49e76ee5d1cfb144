"""The rules on VictoriaMetrics and vmalert (Debian's ``victoria-metrics`` 1.79.5), end to end, as on Prometheus:
vmalert accepts every generated rule file, and replayed over the training scenario's raw samples held by
VictoriaMetrics it records the same per-GPU series as Prometheus does over the same samples (the session's
backfilled server), within 1e-6.

Only the recording groups a few per-GPU series need are replayed (the host map, then the per-GPU group), to keep
the test short: vmalert waits ``-replay.rulesDelay`` between rules (docs/scaling.md says why)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.output import to_yaml
from gpu_execution_pack.promql import Range, render
from gpu_execution_pack.rules.files import rule_files
from gpu_execution_pack.scenario import library
from gpu_execution_pack.scenario.model import STEP_SECONDS
from gpu_execution_pack.scenario.render import Renderer

from harness.victoriametrics import VictoriaMetrics, dry_run, prometheus_text

# vmalert against Prometheus 2.x's recorded series: VictoriaMetrics follows 2.x's range semantics.
pytestmark = [pytest.mark.single_version, pytest.mark.e2e]

REPO = Path(__file__).resolve().parent.parent
# The groups replayed, in dependency order: the per-GPU series join their host through the host map (and the
# host CPU rate, compared below, has a group of its own).
REPLAYED = ("gpu-execution-pack.hosts", "gpu-execution-pack.host_rates", "gpu-execution-pack.execution_gpu")
# Prometheus' lookback (5 minutes) in steps: how much longer it records after the raw samples end.
LOOKBACK_STEPS = 5 * 60 // STEP_SECONDS
# Series read from raw samples, and one read from another recorded series (two lookbacks deep in Prometheus).
READ_RECORDED = (catalog.GPU_SHARE,)
COMPARED = (
    catalog.GPU_UTILIZATION,
    catalog.GPU_MEMORY_USED,
    catalog.GPU_POWER,
    catalog.GPU_PCIE_RX,
    catalog.NODE_CPU_IDLE_RATE,
    *READ_RECORDED,
)


def test_vmalert_accepts_every_generated_rule_file():
    files = sorted((REPO / "rules").glob("*.rules.yml"))
    assert len(files) == 5
    for path in files:
        done = dry_run(path)
        assert done.returncode == 0, f"vmalert refused {path.name}: {done.stdout[-2000:]}{done.stderr[-2000:]}"


@pytest.fixture(scope="module")
def replayed(prometheus, tmp_path_factory: pytest.TempPathFactory):
    """VictoriaMetrics holding the scenario the session's Prometheus holds (the same raw samples at the same
    times), with vmalert's replay of REPLAYED over it; yields (vm, start, end)."""
    _, start, end, _ = prometheus
    workdir = tmp_path_factory.mktemp("victoriametrics")
    cfg = Config()
    groups = [
        g for text in rule_files(cfg, workdir).values() for g in yaml.safe_load(text)["groups"] if g["name"] in REPLAYED
    ]
    groups.sort(key=lambda g: REPLAYED.index(g["name"]))
    paths = []
    for i, group in enumerate(groups):  # one file per group: vmalert replays files in the order given
        paths.append(workdir / f"{i}.rules.yml")
        paths[-1].write_text(to_yaml({"groups": [group]}))
    vm = VictoriaMetrics(workdir)
    vm.start()
    try:
        vm.import_text(prometheus_text(Renderer(library.training_in("4.8"), cfg).all_series(), start, STEP_SECONDS))
        done = vm.replay(paths, start, end, f"{STEP_SECONDS}s")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        yield vm, start, end
    finally:
        vm.stop()


def by_step(samples: list[tuple[float, float]]) -> dict[int, float]:
    """Samples keyed by the raw sample they were computed from: the evaluations' own offsets within a step
    differ (promtool hashes one from the group; vmalert aligns to the step), the samples they read do not."""
    return {int(t) // STEP_SECONDS: v for t, v in samples}


@pytest.mark.parametrize("series", COMPARED, ids=lambda s: s.name)
def test_vmalert_records_what_prometheus_records(prometheus, replayed, series: catalog.Series):
    server, start, end, window = prometheus
    vm, _, _ = replayed
    expected = {
        tuple(sorted((k, v) for k, v in item["metric"].items() if k != "__name__")): by_step(
            [(t, float(v)) for t, v in item["values"]]
        )
        for item in server.query(render(Range(series.select(), window)), end)
    }
    # promtool's evaluations sit at an offset into each step and its last before ``end``; vmalert's on the steps,
    # its last at ``end``: compared on the steps before it.
    got = {labels: by_step(samples) for labels, samples in vm.export(series.name, start, end - 1).items()}
    assert expected, f"Prometheus recorded no {series.name}"
    assert set(got) == set(expected), f"series only in one store: {set(got) ^ set(expected)}"
    for labels, values in expected.items():
        recorded = got[labels]
        assert set(recorded) <= set(values), (labels, sorted(set(recorded) - set(values))[:5])
        assert min(values) == min(recorded), (labels, "vmalert started late")
        # A backfilled raw series ends without a stale marker: Prometheus reads its last sample for the 5-minute
        # lookback, vmalert (a step of one interval) for one interval, and a series recorded from a recorded one
        # (the share reads the utilisation) adds a lookback of its own. Prometheus' extra steps follow one that
        # vmalert recorded, within those lookbacks.
        reach = LOOKBACK_STEPS * (2 if series in READ_RECORDED else 1)
        late = [k for k in set(values) - set(recorded) if not any(k - j <= reach for j in recorded if j < k)]
        assert not late, (labels, sorted(late)[:5], "steps Prometheus recorded and vmalert did not")
        differ = [(k, values[k], v) for k, v in sorted(recorded.items())]
        differ = [d for d in differ if not math.isclose(d[1], d[2], rel_tol=1e-6, abs_tol=1e-6)]
        assert not differ, (labels, differ[:5])
