"""Config keys of section ``dcgm``: dcgm-exporter facts that differ between installs."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack import catalog
from gpu_execution_pack.config.loader import opt


@dataclass(frozen=True)
class Dcgm:
    generations: tuple[str, ...] = opt(
        catalog.GENERATIONS,
        "dcgm-exporter generations whose metric names the rules read: "
        + "; ".join(f"`{g}`: {n}" for g, n in catalog.GENERATION_NOTES.items())
        + ".",
        "Drop generations your fleet no longer runs: each one adds an `or` branch to every rule.",
        choices=catalog.GENERATIONS,
    )
    violation_counter_unit: str = opt(
        "ns",
        "Unit of DCGM_FI_DEV_POWER_VIOLATION and DCGM_FI_DEV_THERMAL_VIOLATION: `ns`, as NVML, the "
        "dcgm_fields.h of DCGM 3.3 and later and dcgm-exporter's counters CSV since 4.4.2-4.7.1 (its PR 589) "
        "say, or `us`, as older dcgm_fields.h and older counters CSVs say.",
        "Your exporter's counters advance 1,000 times slower or faster than wall time while throttled.",
        choices=("ns", "us"),
    )
