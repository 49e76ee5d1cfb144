"""Units: how each exporter unit converts to the base unit the pack records."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from gpu_execution_pack.promql import Expr

# --- Units --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """An exporter unit and how PromQL turns it into the base unit (``value <op> factor``).

    Conversions divide where the factor is a power of ten below one, so that integer
    percent values give the exact ratio (57 / 100 == 0.57, while 57 * 0.01 does not).
    """

    name: str
    base: str
    op: Literal["*", "/", ""] = ""
    factor: int = 1

    def to_base(self, expr: Expr) -> Expr:
        """A PromQL expression in this unit, converted to the base unit."""
        if self.op == "*":
            return expr * self.factor
        if self.op == "/":
            return expr / self.factor
        return expr

    def from_base_samples(self, samples: list[list[float]]) -> list[list[float | None]]:
        """[t, base-unit value] pairs in this unit (the API's percent and MHz); NaN and infinities,
        which JSON cannot carry, as None.

        Converted values are rounded to 9 decimals, so 0.57 reads 57, not 56.99999999999999. The
        arithmetic is written out per operator, not as a call per value: the endpoint converts
        millions of samples for a long window, and a call each costs a fifth more.
        """
        isfinite = math.isfinite
        factor = self.factor
        if self.op == "*":
            return [[t, round(v / factor, 9) if isfinite(v) else None] for t, v in samples]
        if self.op == "/":
            return [[t, round(v * factor, 9) if isfinite(v) else None] for t, v in samples]
        return [[t, v if isfinite(v) else None] for t, v in samples]


UNITS: dict[str, Unit] = {
    u.name: u
    for u in (
        Unit("ratio", "ratio"),
        Unit("percent", "ratio", "/", 100),
        Unit("bytes", "bytes"),
        Unit("MiB", "bytes", "*", 1024 * 1024),
        Unit("hertz", "hertz"),
        Unit("MHz", "hertz", "*", 1_000_000),
        Unit("watts", "watts"),
        Unit("celsius", "celsius"),
        Unit("bytes_per_second", "bytes_per_second"),
        # NVML's PCIe throughput (DCGM_FI_DEV_PCIE_*_THROUGHPUT) is documented as "KB/s" without saying
        # which KB. NVML counts sizes in binary multiples elsewhere (framebuffer MiB are 1024^2 bytes),
        # so KB is read as 1024 bytes; were it 1000, these series would read 2.4 % high.
        Unit("KB_per_second", "bytes_per_second", "*", 1024),
        Unit("seconds", "seconds"),
        # DCGM's violation counters: time held down, in a unit the sources disagree on (config).
        Unit("nanoseconds", "seconds", "/", 1_000_000_000),
        Unit("microseconds", "seconds", "/", 1_000_000),
        Unit("joules", "joules"),
        Unit("millijoules", "joules", "/", 1000),
        Unit("microjoules", "joules", "/", 1_000_000),  # ROCm device-metrics-exporter's energy
        Unit("count", "count"),
        Unit("bitmask", "bitmask"),
        Unit("xid", "xid"),  # an Xid code, not a quantity
        Unit("info", "info"),  # a constant-1 identity series
    )
}
# A raw metric whose unit is this is read in the unit dcgm.violation_counter_unit names.
VIOLATION_UNIT = "violation_time"
VIOLATION_UNITS: dict[str, str] = {"ns": "nanoseconds", "us": "microseconds"}
