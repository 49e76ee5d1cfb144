"""Units: how each exporter unit converts to the base unit the pack records."""

from __future__ import annotations

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

    def from_base(self, value: float) -> float:
        """A base-unit value in this unit (the API's percent and MHz)."""
        if self.op == "*":
            return value / self.factor
        if self.op == "/":
            return value * self.factor
        return value

    def apply(self, value: float) -> float:
        """Convert a value in this unit to the base unit, as the PromQL of to_base does."""
        if self.op == "*":
            return value * self.factor
        if self.op == "/":
            return value / self.factor
        return value


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
        Unit("count", "count"),
        Unit("bitmask", "bitmask"),
        Unit("xid", "xid"),  # an Xid code, not a quantity
        Unit("info", "info"),  # a constant-1 identity series
    )
}
# A raw metric whose unit is this is read in the unit dcgm.violation_counter_unit names.
VIOLATION_UNIT = "violation_time"
VIOLATION_UNITS: dict[str, str] = {"ns": "nanoseconds", "us": "microseconds"}
