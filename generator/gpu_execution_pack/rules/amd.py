"""The AMD group: ROCm device-metrics-exporter's metrics recorded as the NVIDIA series' raw metrics are read.

Its first rule records ``catalog.AMD_IDENTITY_SERIES``: one series (value 1) per GPU or MI300 partition
that reports, with every label the exporter gave it and the names the rest of the pack reads:

- ``gpu`` from ``gpu_id``; ``UUID`` from ``gpu_uuid``, else ``serial_number``; on a partitioned GPU
  (CPX, DPX, TPX, QPX) the serial, which names the physical device, with the partition as
  ``GPU_I_ID`` and the mode as ``GPU_I_PROFILE``, as a MIG instance carries them;
- ``modelName`` from ``card_series`` (else ``card_model``), through ``amd.model_names``;
- the execution label, in label mode, from ``amd.execution_label`` where the series has none.

Then each signal AMD publishes (``catalog.Signal.amd``) is recorded as ``Signal.amd_series``, in the
signal's base unit, joined to that identity on the exporter's labels: the relabelling, a chain of
regular expressions, runs once per evaluation rather than once per signal.

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
    ignoring,
    join,
    label_copy,
    label_set,
    on,
    selector,
)
from gpu_execution_pack.rules.groups import RecordingRule


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

    def select(self, name: str, prefix: str, *matchers: Matcher) -> Selector:
        """An exporter metric under one name prefix, with ``amd.selector``."""
        return selector(prefix + name, *matchers, *self.cfg.amd.matchers)

    def read(self, metric: AmdMetric) -> Expr:
        """One exporter metric under any configured prefix (one ``or`` branch each: an equality
        matcher per name costs far less than a regular expression over ``__name__``)."""
        return any_of([self.read_prefixed(metric, prefix) for prefix in self.cfg.amd.metric_prefixes], stacked=False)

    def read_prefixed(self, metric: AmdMetric, prefix: str) -> Expr:
        """One exporter metric in its signal's base unit, its per-engine index and fixed matchers'
        labels reduced away (so it carries the labels its identity series does)."""
        raw = self.select(metric.name, prefix, *metric.matchers)
        expr: Expr = raw
        if metric.residency_of:
            ticks = self.select(metric.residency_of, prefix)
            expr = self.rate(raw) / Paren(self.rate(ticks)).gt(0)
        reduced = ((metric.per,) if metric.per else ()) + tuple(m.label for m in metric.matchers)
        if reduced:
            expr = aggregate_without(metric.reduce, reduced, expr)
        return catalog.UNITS[metric.unit].to_base(expr)

    def added_labels(self) -> tuple[str, ...]:
        """The labels the identity series adds to the exporter's."""
        added = (
            catalog.GPU_INDEX_LABEL,
            catalog.UUID_LABEL,
            catalog.MIG_INSTANCE_LABEL,
            catalog.MIG_PROFILE_LABEL,
            catalog.MODEL_LABEL,
        )
        return added + ((self.cfg.execution_label,) if self.names_execution() else ())

    def names_execution(self) -> bool:
        """Whether the identity takes the execution label from ``amd.execution_label`` (label mode)."""
        source, amd_label = self.cfg.execution_label, self.cfg.amd.execution_label
        return self.cfg.attribution.mode == "label" and bool(amd_label) and amd_label != source

    def identity_rule(self) -> RecordingRule:
        """``catalog.AMD_IDENTITY_SERIES``: each reporting GPU's labels, NVIDIA's names added."""
        metrics = [
            m
            for key in catalog.AMD_IDENTITY_SIGNALS
            for m in catalog.SIGNALS[key].amd.metrics  # type: ignore[union-attr]
            if not (m.per or m.matchers or m.residency_of)
        ]
        prefixes = self.cfg.amd.metric_prefixes
        present = Paren(any_of([self.select(m.name, p) for m in metrics for p in prefixes], stacked=False)) * 0 + 1
        return RecordingRule(catalog.AMD_IDENTITY_SERIES, self.identity(present))

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
        if not self.names_execution():
            return expr
        source, scratch = self.cfg.execution_label, catalog.AMD_PARTITION_SCRATCH
        expr = call("label_join", expr, scratch, ";", source, self.cfg.amd.execution_label)
        expr = call("label_replace", expr, source, "$1", scratch, ";(.+)")
        return label_set(expr, scratch, "")

    def named(self, value: Expr) -> Expr:
        """``value`` (exporter labels only) with its GPU's identity labels, joined from the identity series."""
        added = self.added_labels()
        return join(value, "*", ignoring(added, group_left=added), selector(catalog.AMD_IDENTITY_SERIES))

    def source(self, amd: AmdSource) -> Expr:
        """A source's metrics, first that has a series per GPU, with the NVIDIA identity labels."""
        return self.named(any_of([self.read(m) for m in amd.metrics], stacked=False))

    def device_wide(self, value: Expr) -> Expr:
        """``value`` for every partition of its GPU that reports (its identity series, value 1): the
        device's highest, so partitions publishing nothing or 0 take partition 0's."""
        device = (*catalog.TARGET_LABELS, catalog.UUID_LABEL)
        partitions = selector(catalog.AMD_IDENTITY_SERIES)
        return join(partitions, "*", on(device, group_left=()), aggregate("max", device, value))

    def rule(self, signal: Signal) -> RecordingRule:
        """The signal's series; a source an earlier signal records (GFX activity, which stands for
        both utilisation and engine activity) is read from that signal's series, not computed twice."""
        amd = signal.amd
        assert amd is not None
        first = next(s for s in amd_signals() if s.amd == amd)
        if first is not signal:
            return RecordingRule(signal.amd_series, selector(first.amd_series))
        value = self.source(amd)
        return RecordingRule(signal.amd_series, self.device_wide(value) if amd.device_wide else value)

    def rules(self) -> tuple[RecordingRule, ...]:
        """The identity series, then one rule per signal AMD publishes that the pack reads."""
        return (self.identity_rule(), *(self.rule(s) for s in amd_signals()))
