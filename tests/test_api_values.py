"""The API answers in its units: base-unit values converted by the catalog's unit table, as the contract says."""

from __future__ import annotations

import dataclasses
import math

import orjson
import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.api.encode import api_values, encode_values

VALUES = [0.57, 1e9, 0.0, -3.5, 1_410_000_000.0, 123456.789, 1e-12, 0.1 + 0.2]
NOT_FINITE = [math.nan, math.inf, -math.inf]

# How many of each unit one base unit is, written out here on purpose (not read from the catalog):
# 1 ratio is 100 percent, 1 Hz is 1e-6 MHz, 1 byte is 1/1024^2 MiB, 1 s is 1e9 ns, 1 J is 1000 mJ or 1e6 µJ.
PER_BASE_UNIT: dict[str, float] = {
    "percent": 100,
    "MiB": 1 / 1024**2,
    "MHz": 1e-6,
    "KB_per_second": 1 / 1024,
    "nanoseconds": 1e9,
    "microseconds": 1e6,
    "millijoules": 1000,
    "microjoules": 1e6,
}


def close_to(want: float | None) -> object:
    """``want``, compared to 12 significant digits (the code divides where the table multiplies); None as is."""
    return None if want is None else pytest.approx(want, rel=1e-12)


def expected(unit: str, value: float) -> float | None:
    """A base-unit value in ``unit`` as the API answers it: rounded to 9 decimals, null where not finite."""
    if not math.isfinite(value):
        return None  # JSON has no NaN or infinity
    return round(value * PER_BASE_UNIT[unit], 9) if unit in PER_BASE_UNIT else value


def test_the_table_names_every_converted_unit_of_the_catalog():
    assert {name for name, unit in catalog.UNITS.items() if unit.op} == set(PER_BASE_UNIT)


# Every unit, not only those of today's API series: a new API series in another unit is covered too.
@pytest.mark.parametrize("unit", sorted(catalog.UNITS), ids=str)
def test_api_values_convert_as_the_catalogs_unit_does(unit: str):
    series = dataclasses.replace(catalog.API_SERIES[0], api_unit=unit)
    samples = [[1_700_000_000.0 + 15 * k, v] for k, v in enumerate(VALUES + NOT_FINITE)]
    converted = api_values(series, samples)
    assert converted == [[t, close_to(expected(unit, v))] for t, v in samples]
    assert [type(v) for _, v in converted[: len(VALUES)]] == [float] * len(VALUES)


@pytest.mark.parametrize("series", catalog.API_SERIES, ids=lambda s: s.api_name)
def test_every_api_series_answers_in_its_units_values(series: catalog.Series):
    samples = [[1_700_000_000.0 + 15 * k, v] for k, v in enumerate(VALUES)]
    want = [[t, close_to(expected(series.api_unit, v))] for t, v in samples]
    assert api_values(series, samples) == want
    assert orjson.loads(b"[" + encode_values(series, samples) + b"]") == api_values(series, samples)


def test_percent_and_mhz_read_as_written():
    """0.57 reads 57 (not 56.99999999999999), 1.41 GHz reads 1410 MHz."""
    percent = next(s for s in catalog.API_SERIES if s.api_unit == "percent")
    mhz = next(s for s in catalog.API_SERIES if s.api_unit == "MHz")
    assert api_values(percent, [[0.0, 0.57]]) == [[0.0, 57.0]]
    assert api_values(mhz, [[0.0, 1.41e9]]) == [[0.0, 1410.0]]
