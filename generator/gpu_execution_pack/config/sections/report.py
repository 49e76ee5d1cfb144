"""Config keys of section ``report``: the execution report's own thresholds."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack.config.loader import opt


@dataclass(frozen=True)
class Report:
    """The execution report's own thresholds; the others are the alerts' (docs/report.md says which)."""

    gpu_idle_threshold: float = opt(
        0.05,
        "Mean GPU utilisation (ratio 0-1) over the whole execution below which it did not use its GPUs "
        "(verdict gpu_idle).",
        "Jobs that only touch the GPU for a few kernels count as users for you: lower it.",
        kind="ratio",
    )
    tensor_engine_busy: float = opt(
        0.5,
        "Graphics-engine activity (ratio 0-1) at or above which a GPU counts as busy for the tensor-core check "
        "(verdict tensor_cores_unused).",
        "Only flag the busiest jobs: raise it.",
        kind="ratio",
    )
    tensor_active_threshold: float = opt(
        0.01,
        "Tensor-pipe activity (ratio 0-1) under which a busy GPU's tensor cores count as unused.",
        "Jobs with a little mixed precision still count as unused for you: raise it to 0.05.",
        kind="ratio",
    )
    tensor_unused_share: float = opt(
        0.5,
        "Share of the GPU's samples with engine activity that must be busy with the tensor pipes unused "
        "for verdict tensor_cores_unused (most of the span).",
        "Flag jobs with shorter FP32 phases too: lower it.",
        kind="ratio",
    )
    heavy_phase_memory_share: float = opt(
        0.9,
        "The heavy phase starts when the execution's GPU memory first reaches this share of its peak (the "
        "working set is loaded) and lasts to the end; its utilisation leaves out start-up.",
        "Your jobs load their working set in steps: lower it so the heavy phase starts at the first big one.",
        kind="ratio",
    )
    energy_price_per_kwh: float = opt(
        0.0,
        "Price of a kWh in `dashboards.currency`, for the report's energy cost; 0 leaves the energy cost out.",
        "You bill or account for energy.",
        kind="non_negative",
    )
    grams_co2e_per_kwh: float = opt(
        0.0,
        "Grid carbon intensity, grams CO2e per kWh, for the report's emissions; 0 leaves emissions out.",
        "You report emissions: use your site's or grid's figure.",
        kind="non_negative",
    )
