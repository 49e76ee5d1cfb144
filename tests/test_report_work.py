"""The report's work-truth verdicts and the split of shared GPUs, on hand-made figures (no Prometheus).

The end-to-end checks against the backfilled scenarios are in test_report.py; these pin down the
rules' edges and interactions: thresholds from the config, never a tensor-core verdict on an idle or
stalled job, and figures unchanged where a GPU is not shared.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.promql import parse_duration_seconds
from gpu_execution_pack.report import document
from gpu_execution_pack.report.figures import REQUIRED_GPU_SERIES, ExecutionFigures, GpuFigures, HostFigures
from gpu_execution_pack.report.verdicts import CODES, judge

INTERVAL = 15.0
SAMPLES = 240  # an hour at 15 s
CFG = config_from_mapping({"rule_interval": "15s", "derived_rule_interval": "15s"})
STALL_FOR = parse_duration_seconds(CFG.alerts.gpu_stalled.for_)


def gpu(index: int = 0, **figures) -> GpuFigures:
    """A busy, healthy GPU of execution x with every series; ``figures`` override."""
    base = {
        "samples": SAMPLES,
        "held_seconds": SAMPLES * INTERVAL,
        "covered_seconds": (SAMPLES - 1) * INTERVAL,
        "util_mean": 0.9,
        "worked_seconds": 0.9 * SAMPLES * INTERVAL,
        "mem_peak_ratio": 0.5,
        "mem_last_ratio": 0.5,
        "power_integral_joules": 400.0 * SAMPLES * INTERVAL,
        "engine_mean": 0.7,
        "tensor_mean": 0.3,
        "dram_mean": 0.4,
        "tensor_judged_seconds": SAMPLES * INTERVAL,
        "share_seconds": SAMPLES * INTERVAL,
        "share_min": 1.0,
        "worked_shared_seconds": 0.9 * SAMPLES * INTERVAL,
        "power_attributed_joules": 400.0 * SAMPLES * INTERVAL,
        "present": {s.name for s in REQUIRED_GPU_SERIES},
    }
    labels = {"execution_id": "x", "hostname": "h", "gpu": str(index), "UUID": f"GPU-{index}", "modelName": "m"}
    return GpuFigures(labels, **(base | figures))


def execution(*gpus: GpuFigures) -> ExecutionFigures:
    return ExecutionFigures("x", INTERVAL, INTERVAL, gpus=list(gpus), hosts=[HostFigures("h", 0.3, 1.0, 0.2, 2.0)])


def codes(f: ExecutionFigures) -> list[str]:
    return [v.code for v in judge(f, CFG, running=False, span_seconds=SAMPLES * INTERVAL)]


def test_the_new_codes_are_in_the_vocabulary_in_order_of_urgency():
    assert CODES.index("gpu_stalled") < CODES.index("gpu_idle")
    assert CODES.index("thermal_throttled") < CODES.index("tensor_cores_unused") < CODES.index("telemetry_incomplete")
    assert CODES.index("gpu_shared") < CODES.index("healthy")


@pytest.mark.parametrize(
    ("stalled_seconds", "want"), [(STALL_FOR, ["gpu_stalled"]), (STALL_FOR - INTERVAL, ["healthy"])]
)
def test_stalled_for_the_alerts_for_in_all(stalled_seconds, want):
    f = execution(gpu(0, stalled_seconds=stalled_seconds, engine_mean=0.2), gpu(1))
    assert codes(f) == want
    if want == ["gpu_stalled"]:
        v = judge(f, CFG, running=False)[0]
        assert v.severity == CFG.alerts.gpu_stalled.severity
        assert "GPU 0 on h" in v.summary and "GPU 1 on h" not in v.summary
        assert "NCCL_DEBUG=INFO" in v.advice and "py-spy dump" in v.advice


def test_tensor_cores_unused_at_the_configured_share_of_samples():
    share = CFG.report.tensor_unused_share
    at = round(share * SAMPLES) * INTERVAL
    assert codes(execution(gpu(tensor_unused_seconds=at, tensor_mean=0.0))) == ["tensor_cores_unused"]
    assert codes(execution(gpu(tensor_unused_seconds=at - INTERVAL, tensor_mean=0.0))) == ["healthy"]
    # Without a tensor-pipe series the check cannot be made: no verdict.
    assert codes(execution(gpu(tensor_unused_seconds=SAMPLES * INTERVAL, tensor_mean=None))) == ["healthy"]


def test_never_tensor_cores_unused_on_a_stalled_or_idle_job():
    unused = {"tensor_unused_seconds": SAMPLES * INTERVAL, "tensor_mean": 0.0}
    stalled = execution(gpu(0, **unused), gpu(1, stalled_seconds=STALL_FOR))
    assert codes(stalled) == ["gpu_stalled"]
    idle = execution(gpu(0, **unused, util_mean=0.01, worked_seconds=0.01 * SAMPLES * INTERVAL))
    assert codes(idle) == ["gpu_idle"]


def test_no_engine_activity_is_noted_where_the_stall_needs_it_and_is_no_gap():
    long = STALL_FOR
    blind = execution(gpu(engine_mean=None, tensor_judged_seconds=0, util_high_seconds=long))
    assert codes(blind) == ["not_judged", "healthy"]
    note = judge(blind, CFG, running=False)[0]
    assert note.severity == "info" and "gpuGraphicsEngineActivePercent" in note.summary
    assert "gpu_stalled" in note.summary and "default" in note.advice
    # A real gap keeps its severity beside the note.
    gapped = execution(replace(blind.gpus[0], covered_seconds=long))
    assert codes(gapped) == ["telemetry_incomplete", "not_judged"]
    short = execution(gpu(engine_mean=None, tensor_judged_seconds=0, util_high_seconds=long - INTERVAL))
    assert codes(short) == ["healthy"]


def test_a_gpu_never_shared_keeps_every_figure():
    plain = gpu(share_seconds=None, share_min=None, worked_shared_seconds=None, power_attributed_joules=None)
    alone = gpu()  # share 1 throughout: the shared series say nothing new
    for f in (execution(plain), execution(alone)):
        assert f.billed_seconds == SAMPLES * INTERVAL
        assert f.worked_seconds == 0.9 * SAMPLES * INTERVAL
        assert document.energy(f) == (400.0 * SAMPLES * INTERVAL, "power_integral")
    assert codes(execution(alone)) == ["healthy"]


def test_a_shared_gpu_is_split_at_each_moment():
    # Shared half of the hour with one other execution: three quarters of the GPU, at whatever power.
    half = SAMPLES // 2
    attributed = 400.0 * INTERVAL * (half + half / 2)
    shared = gpu(
        share_seconds=(half + half / 2) * INTERVAL,
        share_min=0.5,
        worked_shared_seconds=0.9 * (half + half / 2) * INTERVAL,
        power_attributed_joules=attributed,
        co_holders=["y"],
    )
    f = execution(shared)
    assert f.billed_seconds == pytest.approx(0.75 * SAMPLES * INTERVAL)
    assert f.worked_seconds == pytest.approx(0.9 * 0.75 * SAMPLES * INTERVAL)
    assert document.energy(f)[0] == pytest.approx(attributed)
    # The counter's rise is split by the same share of power.
    counted = replace(
        shared, energy_samples=SAMPLES, energy_spread=1000.0, energy_span_seconds=(SAMPLES - 1) * INTERVAL
    )
    rise = counted.energy_spread * SAMPLES / (SAMPLES - 1)  # scaled to the time held
    assert execution(counted).energy_joules(counted) == pytest.approx(rise * 0.75)
    [verdict] = judge(f, CFG, running=False)
    assert verdict.code == "gpu_shared" and verdict.severity == "info"
    assert "with y" in verdict.summary and "1/N" in verdict.summary


def test_a_shared_gpu_with_no_one_visible_says_so_without_naming():
    f = execution(gpu(share_min=0.5, share_seconds=SAMPLES * INTERVAL / 2, co_holders=[]))
    [verdict] = judge(f, CFG, running=False)
    assert "outside this report's tenant" in verdict.summary


def test_the_document_leaves_absent_activity_out():
    f = execution(gpu(0, engine_mean=None, dram_mean=None), gpu(1, engine_mean=None, tensor_mean=None, dram_mean=None))
    doc = document.summary(CFG, f, 0.0, SAMPLES * INTERVAL, False, SAMPLES)
    assert "graphicsEngineActivePercent" not in doc["utilization"]
    assert doc["utilization"]["tensorActivePercent"] == 30.0  # the mean over the GPUs that have it
    first, second = doc["gpus"]["devices"]
    assert first["tensorActivePercent"] == 30.0 and "dramActivePercent" not in first
    assert not {"graphicsEngineActivePercent", "tensorActivePercent", "dramActivePercent"} & second.keys()


def test_a_shared_gpu_with_per_process_values_says_its_split():
    # The GPU's memory in use (both holders') above the execution's own: the exporter published per-pod values.
    half = SAMPLES // 2
    own = gpu(
        share_seconds=half * INTERVAL,
        share_min=0.5,
        mem_peak_bytes=12 * 1024**3,
        device_mem_peak_bytes=18 * 1024**3,
        co_holders=["y"],
    )
    [verdict] = judge(execution(own), CFG, running=False)
    assert verdict.code == "gpu_shared" and "with y" in verdict.summary
    assert (
        "in proportion to the holders' utilisation" in verdict.summary
        and "equally" not in verdict.summary.split("(equally while all were idle)")[1]
    )
    assert "whole GPU's capacity" in verdict.summary
    # The same GPU where every pod reads the device's values: the equal split, said so.
    copied = replace(own, device_mem_peak_bytes=12 * 1024**3)
    [verdict] = judge(execution(copied), CFG, running=False)
    assert "split equally" in verdict.summary and "in proportion" not in verdict.summary


def test_gpu_oom_judges_the_devices_fill_and_names_the_co_holders():
    threshold = CFG.alerts.gpu_memory_high.threshold
    # Its own use is half the GPU; with the other holder's the GPU is full: any holder can run it out.
    full = gpu(
        share_min=0.5,
        share_seconds=SAMPLES * INTERVAL / 2,
        mem_last_ratio=0.5,
        device_mem_last_ratio=threshold,
        co_holders=["y"],
    )
    verdicts = judge(execution(full), CFG, running=False)
    assert [v.code for v in verdicts] == ["gpu_oom", "gpu_shared"]
    assert "(shared with y)" in verdicts[0].summary and f"{threshold * 100:.0f} %" in verdicts[0].summary
    # Under the threshold on the device: no OOM, whatever its own share.
    calm = replace(full, device_mem_last_ratio=threshold - 0.01, mem_last_ratio=threshold - 0.01)
    assert [v.code for v in judge(execution(calm), CFG, running=False)] == ["gpu_shared"]
