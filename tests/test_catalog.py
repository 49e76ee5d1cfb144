"""The catalog is consistent and says what the API contract and the exporters' own field lists say."""

from __future__ import annotations

import re

import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.promql import Aggregate, match, render, selector
from gpu_execution_pack.rules.recording import recording_groups

# The API contract (README: the per-execution metrics endpoint), written out here on purpose: each series of
# the default answer by its API name, with the series it is recorded as and its unit as the API spells it
# (0-100 is percent). A series added to the contract is one line here, checked against the catalog below,
# in the served document (tests/test_api.py) and in the OpenAPI document.
CONTRACT_SERIES = {
    "gpuUtilizationPercent": ("execution_gpu:gpu_utilization_ratio", "percent"),
    "gpuMemoryUtilizationPercent": ("execution_gpu:gpu_memory_utilization_ratio", "percent"),
    "gpuTemperatureCelsius": ("execution_gpu:gpu_temperature_celsius", "celsius"),
    "gpuPowerWatt": ("execution_gpu:gpu_power_watts", "watts"),
    "gpuPowerLimitWatt": ("execution_gpu:gpu_power_limit_watts", "watts"),
    "gpuClockSmMhz": ("execution_gpu:gpu_sm_clock_hertz", "MHz"),
    "gpuClockMemMhz": ("execution_gpu:gpu_memory_clock_hertz", "MHz"),
    "gpuPcieThroughputRxBytesPerSec": ("execution_gpu:gpu_pcie_rx_bytes_per_second", "bytes_per_second"),
    "gpuPcieThroughputTxBytesPerSec": ("execution_gpu:gpu_pcie_tx_bytes_per_second", "bytes_per_second"),
    "systemRamTotalBytes": ("execution_node:system_ram_total_bytes", "bytes"),
    "systemRamUsedBytes": ("execution_node:system_ram_used_bytes", "bytes"),
    "systemCpuUsagePercent": ("execution_node:system_cpu_utilization_ratio", "percent"),
}
CONTRACT = {api: record for api, (record, _) in CONTRACT_SERIES.items()}
CONTRACT_UNITS = {api: unit for api, (_, unit) in CONTRACT_SERIES.items()}

# Raw names and units from dcgm-exporter's counters files (default-counters.csv, dcp-metrics-included.csv) per release.
KNOWN_RAW = {
    "DCGM_FI_DEV_GPU_UTIL": "percent",
    "DCGM_FI_DEV_GPU_UTIL_RATIO": "ratio",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "ratio",
    "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO": "ratio",
    "DCGM_FI_DEV_FB_USED": "MiB",
    "DCGM_FI_DEV_FB_FREE": "MiB",
    "DCGM_FI_DEV_FB_RESERVED": "MiB",
    "DCGM_FI_DEV_FB_CAPACITY_BYTES": "bytes",
    "DCGM_FI_DEV_GPU_TEMP": "celsius",
    "DCGM_FI_DEV_GPU_TEMP_CELSIUS": "celsius",
    "DCGM_FI_DEV_POWER_USAGE": "watts",
    "DCGM_FI_DEV_BOARD_POWER_WATTS": "watts",
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": "watts",
    "DCGM_FI_DEV_BOARD_POWER_LIMIT_ENFORCED_WATTS": "watts",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "watts",
    "DCGM_FI_DEV_SM_CLOCK": "MHz",
    "DCGM_FI_DEV_MEM_CLOCK": "MHz",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "bytes_per_second",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "bytes_per_second",
    "DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND": "bytes_per_second",
    "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND": "bytes_per_second",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "bitmask",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "bitmask",
    "DCGM_FI_DEV_XID_ERRORS": "xid",
    "DCGM_FI_DEV_XID_ERROR": "xid",
    "node_memory_MemTotal_bytes": "bytes",
    "node_memory_MemAvailable_bytes": "bytes",
    "node_cpu_seconds_total": "seconds",
}


def test_every_api_series_is_recorded_under_its_contract_name():
    assert {s.api_name: s.name for s in catalog.API_SERIES} == CONTRACT


def test_every_api_series_is_served_in_its_contract_unit():
    assert {s.api_name: s.api_unit for s in catalog.API_SERIES} == CONTRACT_UNITS


def test_known_raw_metrics_have_the_documented_units():
    units = {r.name: r.unit for s in catalog.SIGNALS.values() for r in s.raws}
    assert {name: units.get(name) for name in KNOWN_RAW} == KNOWN_RAW


def test_unit_conversions_are_the_physical_ones():
    assert render(catalog.UNITS["MiB"].to_base(selector("x"))) == "x * 1048576"
    assert render(catalog.UNITS["MHz"].to_base(selector("x"))) == "x * 1000000"
    assert render(catalog.UNITS["KB_per_second"].to_base(selector("x"))) == "x * 1024"
    assert render(catalog.UNITS["nanoseconds"].to_base(selector("x"))) == "x / 1000000000"
    assert render(catalog.UNITS["percent"].to_base(selector("x"))) == "x / 100"  # exact, unlike * 0.01


def test_a_raw_metric_is_selected_with_its_fixed_matchers_first():
    idle = catalog.SIGNALS["cpu_idle_seconds"].raws[0]
    assert render(idle.select(match("job", "node"))) == 'node_cpu_seconds_total{mode="idle", job="node"}'
    whole_gpus = catalog.GPU_UTILIZATION.formulas[0].where
    assert whole_gpus == (match(catalog.MIG_INSTANCE_LABEL, ""),)  # DCGM_FI_DEV_GPU_UTIL is 0 on MIG instances


def test_every_raw_metric_has_a_unit_that_converts_to_its_signals_base_unit():
    for signal in catalog.SIGNALS.values():
        assert signal.raws, signal.key
        for raw in signal.raws:
            units = list(catalog.VIOLATION_UNITS.values()) if raw.unit == catalog.VIOLATION_UNIT else [raw.unit]
            for unit in units:
                assert unit in catalog.UNITS, raw.name
                base = catalog.UNITS[unit].base
                # A counter is read as a rate: seconds per second is a share of time.
                want = "seconds" if raw.type == "counter" and signal.base_unit == "ratio" else signal.base_unit
                assert base == want, raw.name
            assert set(raw.generations) <= set(catalog.GENERATIONS), raw.name


def test_violation_counters_are_read_in_the_configured_unit():
    for unit, per_second in (("ns", 1_000_000_000), ("us", 1_000_000)):
        cfg = config_from_mapping({"dcgm": {"violation_counter_unit": unit}})
        exprs = {r.record: r.expr for g in recording_groups(cfg) for r in g.rules}
        violation = exprs[catalog.GPU_POWER_VIOLATION.name]
        assert 'rate(DCGM_FI_DEV_POWER_VIOLATION{execution_id!=""}[1m])' in violation
        assert re.search(rf"\)\s*/ {per_second}\b", violation), violation


def test_each_generation_has_at_most_one_name_per_signal_the_api_reads():
    # Signals alerts read may list an older alias in the same generation (CLOCK_THROTTLE_REASONS).
    used = {k for s in catalog.GPU_SERIES for f in s.formulas for k in f.signals}
    assert used
    for key in used:
        for generation in catalog.GENERATIONS:
            names = [r.name for r in catalog.SIGNALS[key].raws if generation in r.generations]
            assert len(names) <= 1, (key, generation, names)


def test_formulas_name_known_signals_of_the_right_exporter():
    for series in catalog.GPU_SERIES + catalog.GPU_HEALTH_SERIES:
        for f in series.formulas:
            for key in f.signals:
                assert catalog.SIGNALS[key].exporter == "dcgm", (series.name, key)
    for series in catalog.NODE_SERIES:
        for key in series.formulas[0].signals:
            assert catalog.SIGNALS[key].exporter == "node", (series.name, key)


def test_recorded_names_follow_level_metric_operations():
    levels = "execution_gpu|execution_node|execution_model|execution|gpu_instance|gpu_model|gpu_exporter|node_exporter"
    pattern = re.compile(rf"^({levels}):[a-z_]+(:[a-z_]+)?$")
    records = [s.name for s in catalog.ALL_SERIES]
    assert len(records) == len(set(records))
    for record in records:
        assert pattern.match(record), record


def test_sums_of_device_wide_series_count_each_physical_gpu_once():
    device_wide = {
        s.name
        for s in catalog.GPU_SERIES + catalog.GPU_HEALTH_SERIES
        if all(catalog.SIGNALS[k].device_wide for f in s.formulas for k in f.signals) and s.formulas[0].signals
    }
    assert {catalog.GPU_POWER.name, catalog.GPU_TEMPERATURE.name} <= device_wide
    assert catalog.GPU_MEMORY_USED.name not in device_wide  # MIG instances have their own memory
    for series in catalog.EXECUTION_SERIES:
        expr = series.formulas[0].expr
        if isinstance(expr, Aggregate) and expr.op == "sum" and expr.metric_names() & device_wide:
            # the sum is over a max per physical GPU (UUID), not over instances
            assert isinstance(expr.expr, Aggregate) and expr.expr.op == "max", series.name
            assert expr.expr.by == (catalog.EXECUTION_LABEL, "UUID"), series.name


@pytest.mark.parametrize("generation", catalog.GENERATIONS)
def test_every_api_series_can_be_computed_from_one_generation_alone(generation):
    cfg = config_from_mapping({"dcgm": {"generations": [generation]}})
    exprs = {r.record: r.expr for g in recording_groups(cfg) for r in g.rules}
    for record in CONTRACT.values():
        assert record in exprs
    assert "DCGM_FI_DEV_GPU_UTIL_RATIO" in exprs[catalog.GPU_UTILIZATION.name] or generation in ("3.3", "4.8")
    other = [g for g in catalog.GENERATIONS if g != generation]
    only_other = {r.name for s in catalog.SIGNALS.values() for r in s.raws if not set(r.generations) & {generation}}
    assert other
    for expr in exprs.values():
        for name in only_other:
            assert not re.search(rf"\b{name}\b", expr), (generation, name)


def test_the_catalog_exports_its_own_names_only():
    """Its star imports re-export what its modules define, not what they import (match, selector, dataclass)."""
    assert {"GPU_POWER", "SIGNALS", "Series", "signal", "UNITS", "EXECUTION_LABEL"} <= set(catalog.__all__)
    for leaked in ("match", "selector", "dataclass", "Expr", "Literal", "math", "annotations"):
        assert leaked not in catalog.__all__ and not hasattr(catalog, leaked), leaked
    assert all(hasattr(catalog, name) for name in catalog.__all__)


# The fields of dcgm-exporter's etc/default-counters.csv (its uncommented lines) that the catalog names, at
# real tags of NVIDIA/dcgm-exporter (the exporter's release after the hyphen). The profiling fields became
# default counters in 4.0.0 (commit 5f9250c), FB_RESERVED in 4.4.0 (commit 6949141), GPU_UTIL in 2.6.0 (commit
# b54068a); PCIe moved from NVML's THROUGHPUT to the PROF bytes in 3.5.0 (commit 219eb08).
_DCGM3_DEFAULTS = {
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_USED",
}
_PROFILING_DEFAULTS = {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE"}
_PROF_PCIE = {"DCGM_FI_PROF_PCIE_RX_BYTES", "DCGM_FI_PROF_PCIE_TX_BYTES"}
DEFAULT_COUNTERS_AT_TAG = {
    "2.2.9-2.5.0": _DCGM3_DEFAULTS | {"DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "DCGM_FI_DEV_PCIE_TX_THROUGHPUT"},
    "2.3.1-2.6.0": _DCGM3_DEFAULTS
    | {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "DCGM_FI_DEV_PCIE_TX_THROUGHPUT"},
    "3.3.6-3.4.2": _DCGM3_DEFAULTS
    | {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "DCGM_FI_DEV_PCIE_TX_THROUGHPUT"},
    "3.3.7-3.5.0": _DCGM3_DEFAULTS | {"DCGM_FI_DEV_GPU_UTIL"} | _PROF_PCIE,
    "3.3.9-3.6.1": _DCGM3_DEFAULTS | {"DCGM_FI_DEV_GPU_UTIL"} | _PROF_PCIE,
    "4.0.0-4.0.1": _DCGM3_DEFAULTS | {"DCGM_FI_DEV_GPU_UTIL"} | _PROF_PCIE | _PROFILING_DEFAULTS,
    "4.2.3-4.2.0": _DCGM3_DEFAULTS | {"DCGM_FI_DEV_GPU_UTIL"} | _PROF_PCIE | _PROFILING_DEFAULTS,
    "4.3.1-4.4.0": _DCGM3_DEFAULTS
    | {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_RESERVED"}
    | _PROF_PCIE
    | _PROFILING_DEFAULTS,
    "4.5.3-4.8.2": _DCGM3_DEFAULTS
    | {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_RESERVED"}
    | _PROF_PCIE
    | _PROFILING_DEFAULTS,
}


@pytest.mark.parametrize("tag", DEFAULT_COUNTERS_AT_TAG)
def test_the_catalog_says_which_fields_each_release_collects_by_default(tag):
    """Every raw metric a release names (of its generation) is a default counter there exactly when its
    default-counters.csv collects it: GR_ENGINE_ACTIVE was claimed default in every release of 3.3 and 4.8."""
    release = tag.split("-")[1]
    generation = catalog.generation_of_release(release)
    raws = {
        r.name: r
        for s in catalog.SIGNALS.values()
        if s.exporter == "dcgm"
        for r in s.raws
        if generation in r.generations
    }
    assert {name for name, r in raws.items() if r.default_in_release(release)} == DEFAULT_COUNTERS_AT_TAG[tag]


def test_a_field_is_default_in_a_generation_only_where_every_release_of_it_collects_it():
    """Generation 4.8 runs from 3.5.0, which has no profiling field among its default counters; its newest
    releases have them. Generation 3.3's newest (3.4.2) has none."""
    engine = catalog.SIGNALS["gr_engine_active"].raws_for(("4.8",))[0]
    assert engine.name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    assert not engine.default_in("4.8") and engine.default_in("4.8", newest=True)
    assert not engine.default_in("3.3") and not engine.default_in("3.3", newest=True)
    assert catalog.SIGNALS["gr_engine_active"].raws_for(("4.9",))[0].default_in("4.9")
