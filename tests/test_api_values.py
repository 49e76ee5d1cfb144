"""The API's unit conversion (``encode.api_values``, inline for speed) is the catalog's ``Unit.from_base``."""

from __future__ import annotations

import dataclasses
import math

import orjson
import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.api.encode import api_values, encode_values

VALUES = [0.57, 1e9, 0.0, -3.5, 1_410_000_000.0, 123456.789, 1e-12, 0.1 + 0.2]
NOT_FINITE = [math.nan, math.inf, -math.inf]


def expected(unit: catalog.Unit, value: float) -> float | None:
    """A base-unit value in ``unit`` as the API answers it: the catalog's conversion, rounded to 9 decimals."""
    if not math.isfinite(value):
        return None  # JSON has no NaN or infinity
    return value if unit.op == "" else round(unit.from_base(value), 9)


# Every unit, not only those of today's API series: a new API series in another unit is covered too.
@pytest.mark.parametrize("unit", sorted(catalog.UNITS), ids=str)
def test_api_values_convert_as_the_catalogs_unit_does(unit: str):
    series = dataclasses.replace(catalog.API_SERIES[0], api_unit=unit)
    samples = [[1_700_000_000.0 + 15 * k, v] for k, v in enumerate(VALUES + NOT_FINITE)]
    converted = api_values(series, samples)
    assert converted == [[t, expected(catalog.UNITS[unit], v)] for t, v in samples]
    assert [type(v) for _, v in converted[: len(VALUES)]] == [float] * len(VALUES)


@pytest.mark.parametrize("series", catalog.API_SERIES, ids=lambda s: s.api_name)
def test_every_api_series_answers_in_its_units_values(series: catalog.Series):
    unit = catalog.UNITS[series.api_unit]
    samples = [[1_700_000_000.0 + 15 * k, v] for k, v in enumerate(VALUES)]
    assert api_values(series, samples) == [[t, expected(unit, v)] for t, v in samples]
    assert orjson.loads(b"[" + encode_values(series, samples) + b"]") == api_values(series, samples)


def test_percent_and_mhz_read_as_written():
    """0.57 reads 57 (not 56.99999999999999), 1.41 GHz reads 1410 MHz."""
    percent = next(s for s in catalog.API_SERIES if s.api_unit == "percent")
    mhz = next(s for s in catalog.API_SERIES if s.api_unit == "MHz")
    assert api_values(percent, [[0.0, 0.57]]) == [[0.0, 57.0]]
    assert api_values(mhz, [[0.0, 1.41e9]]) == [[0.0, 1410.0]]
