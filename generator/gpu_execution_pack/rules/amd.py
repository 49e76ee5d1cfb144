"""The AMD group: ROCm device-metrics-exporter's metrics recorded as the NVIDIA series' raw metrics are read.

Each signal AMD publishes (``catalog.Signal.amd``) is recorded once per evaluation as
``Signal.amd_series``: in the signal's base unit, one series per GPU (or MI300 partition) with every
label the exporter gave it, and the names the rest of the pack reads:

- ``gpu`` from ``gpu_id``; ``UUID`` from ``gpu_uuid``, else ``serial_number``; on a partitioned GPU
  (CPX, DPX, TPX, QPX) the serial, which names the physical device, with the partition as
  ``GPU_I_ID`` and the mode as ``GPU_I_PROFILE``, as a MIG instance carries them;
- ``modelName`` from ``card_series`` (else ``card_model``), through ``amd.model_names``;
- the execution label, in label mode, from ``amd.execution_label`` where the series has none.

Device-wide values (power, temperature, clocks, energy, residencies), which only partition 0 publishes,
are given to every partition of the GPU (its highest, so partitions publishing 0 do not count). The
per-GPU rules then read these series as one more exporter generation (``RawMetric.vendor == "amd"``).
"""

from __future__ import annotations

from collections.abc import Callable

from gpu_execution_pack import catalog
from gpu_execution_pack.catalog import AmdMetric, AmdSource, Signal
from gpu_execution_pack.config import Config
from gpu_execution_pack.promql import (
    Expr,
    Matcher,
    Paren,
    Selector,
    aggregate,
    aggregate_without,
    any_of,
    call,
    join,
    label_copy,
    label_set,
    match,
    on,
    selector,
)
from gpu_execution_pack.rules.groups import RecordingRule

# The metric every partition of a GPU publishes: the partitions a device-wide value is given to.
PARTITION_PRESENCE = "fb_used"


def amd_signals() -> tuple[Signal, ...]:
    """The signals the AMD group records, in catalog order: those a recorded series reads and AMD publishes."""
    return tuple(s for k, s in catalog.SIGNALS.items() if s.amd is not None and k in catalog.READ_SIGNALS)


def vendor_matchers(cfg: Config, raw: catalog.RawMetric) -> tuple[Matcher, ...]:
    """``selectors.dcgm`` for dcgm-exporter's metrics; the AMD group applied ``amd.selector`` to AMD's."""
    return cfg.selectors.dcgm_matchers if raw.vendor == "nvidia" else ()


def gpu_presence(cfg: Config) -> Expr:
    """Every GPU series that says a GPU exporter target reports a GPU (catalog.PRESENCE_SIGNALS), of every vendor."""
    raws = catalog.presence_raws(cfg.dcgm.generations, cfg.vendors)
    return any_of([r.select(*vendor_matchers(cfg, r)) for r in raws], stacked=False)


class AmdRules:
    """The AMD group's rules for one configuration."""

    def __init__(self, cfg: Config, rate: Callable[[Selector], Expr]):
        self.cfg = cfg
        self.rate = rate  # RuleBuilder.rate: a counter's rate over rate_window, with its fallback

    def select(self, name: str, *matchers: Matcher) -> Selector:
        """An exporter metric under every configured prefix, with ``amd.selector``."""
        names = [prefix + name for prefix in self.cfg.amd.metric_prefixes]
        fixed = (*matchers, *self.cfg.amd.matchers)
        if len(names) == 1:
            return selector(names[0], *fixed)
        return selector("", match("__name__", "|".join(names), "=~"), *fixed)

    def read(self, metric: AmdMetric) -> Expr:
        """One exporter metric in its signal's base unit, its per-engine index reduced away."""
        raw = self.select(metric.name, *metric.matchers)
        expr: Expr = raw
        if metric.residency_of:
            ticks = self.select(metric.residency_of)
            expr = self.rate(raw) / Paren(self.rate(ticks)).gt(0)
        if metric.per:
            expr = aggregate_without(metric.reduce, (metric.per,), expr)
        return catalog.UNITS[metric.unit].to_base(expr)

    def identity(self, expr: Expr) -> Expr:
        """``expr`` with the NVIDIA names of its GPU's identity (see the module's docstring)."""
        scratch, modes = catalog.AMD_PARTITION_SCRATCH, "|".join(catalog.AMD_PARTITIONED_MODES)
        expr = label_copy(expr, catalog.GPU_INDEX_LABEL, catalog.AMD_GPU_INDEX_LABEL)
        expr = label_copy(expr, catalog.UUID_LABEL, catalog.AMD_SERIAL_LABEL)
        expr = label_copy(expr, catalog.UUID_LABEL, catalog.AMD_UUID_LABEL)
        parts = (catalog.AMD_PARTITION_TYPE_LABEL, catalog.AMD_PARTITION_LABEL, catalog.AMD_SERIAL_LABEL)
        expr = call("label_join", expr, scratch, ";", *parts)
        partitioned = f"(?i)({modes});([^;]*);(.+)"
        for target, group in (
            (catalog.MIG_INSTANCE_LABEL, 2),
            (catalog.MIG_PROFILE_LABEL, 1),
            (catalog.UUID_LABEL, 3),
        ):
            expr = call("label_replace", expr, target, f"${group}", scratch, partitioned)
        expr = label_set(expr, scratch, "")
        expr = label_copy(expr, catalog.MODEL_LABEL, catalog.AMD_MODEL_LABEL)
        expr = label_copy(expr, catalog.MODEL_LABEL, catalog.AMD_SERIES_LABEL)
        for pattern, name in self.cfg.amd.model_names:
            expr = call("label_replace", expr, catalog.MODEL_LABEL, name, catalog.MODEL_LABEL, pattern)
        return self.execution(expr)

    def execution(self, expr: Expr) -> Expr:
        """In label mode, the execution label from ``amd.execution_label`` where the series has none."""
        source, amd_label = self.cfg.execution_label, self.cfg.amd.execution_label
        if self.cfg.attribution.mode != "label" or not amd_label or amd_label == source:
            return expr
        scratch = catalog.AMD_PARTITION_SCRATCH
        expr = call("label_join", expr, scratch, ";", source, amd_label)
        expr = call("label_replace", expr, source, "$1", scratch, ";(.+)")
        return label_set(expr, scratch, "")

    def source(self, amd: AmdSource) -> Expr:
        """A source's metrics, first that has a series per GPU, with the NVIDIA identity labels."""
        return self.identity(any_of([self.read(m) for m in amd.metrics], stacked=False))

    def device_wide(self, value: Expr) -> Expr:
        """``value`` for every partition of its GPU: the device's highest, where the partition reports VRAM."""
        device = (*catalog.TARGET_LABELS, catalog.UUID_LABEL)
        partitions = self.source(catalog.SIGNALS[PARTITION_PRESENCE].amd) * 0  # type: ignore[arg-type]
        spread = join(partitions, "+", on(device, group_left=()), aggregate("max", device, value))
        return any_of([Paren(spread), value])

    def rule(self, signal: Signal) -> RecordingRule:
        amd = signal.amd
        assert amd is not None
        value = self.source(amd)
        return RecordingRule(signal.amd_series, self.device_wide(value) if amd.device_wide else value)

    def rules(self) -> tuple[RecordingRule, ...]:
        """One rule per signal AMD publishes that the pack reads."""
        return tuple(self.rule(s) for s in amd_signals())
