"""The scenario generator: exact unit rendering, faithful promtool notation, enough coverage."""

from __future__ import annotations

import re

import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.scenario import expected, library, oracle, render


def expand(notation: str) -> list:
    """An independent reading of promtool's input_series notation (its documented rules)."""
    out: list = []
    for token in notation.split():
        if token == "stale":
            out.append("stale")
        elif m := re.fullmatch(r"_x(\d+)", token):
            out.extend([None] * int(m.group(1)))
        elif token == "_":
            out.append(None)
        elif m := re.fullmatch(r"(-?[\d.e+]+)([+-])([\d.e+]+)x(\d+)", token):
            a, sign, b, n = float(m.group(1)), m.group(2), float(m.group(3)), int(m.group(4))
            out.extend(a + (b if sign == "+" else -b) * i for i in range(n + 1))
        elif m := re.fullmatch(r"(-?[\d.e+]+)x(\d+)", token):
            out.extend([float(m.group(1))] * (int(m.group(2)) + 1))
        else:
            out.append(float(token))
    return out


@pytest.mark.parametrize(
    "samples",
    [
        (1.0, 1.0, 1.0, 2.0),
        (None, None, 5.0, 7.0, 9.0, 11.0, "stale", None),
        (0.5,),
        (10.0, 8.0, 6.0, 6.0, 6.0, None, 3.0),
        (4096.0,) * 20 + (61440.0,) * 41 + tuple(61952.0 + 512 * i for i in range(39)),
    ],
)
def test_notation_round_trips(samples):
    assert expand(render.expand_notation(samples)) == list(samples)


def test_every_rendered_series_round_trips():
    for scenario in library.default_suite():
        for series in render.Renderer(scenario, Config()).all_series():
            assert expand(render.expand_notation(series.samples)) == list(series.samples), series.selector


def test_exporter_units_are_rendered_exactly_or_refused():
    assert render.to_unit(0.57, "percent") == 57
    assert render.to_unit(64 * 1024**3, "MiB") == 65536
    assert render.to_unit(1.41e9, "MHz") == 1410
    with pytest.raises(render.ScenarioError, match="does not convert exactly to percent"):
        render.to_unit(0.1234567891234, "percent")
    with pytest.raises(render.ScenarioError, match="does not convert exactly to MHz"):
        render.to_unit(7.7, "MHz")


def test_oracle_units_are_physical_constants():
    assert oracle.BYTES_PER_MIB == 1048576 and oracle.HERTZ_PER_MHZ == 1000000 and oracle.PERCENT_PER_RATIO == 100


def test_both_generations_publish_different_names_for_the_same_truth():
    old = {s.metric for s in render.Renderer(library.training_in("4.8"), Config()).dcgm_series()}
    new = {s.metric for s in render.Renderer(library.training_in("4.9"), Config()).dcgm_series()}
    assert "DCGM_FI_DEV_FB_USED" in old and "DCGM_FI_DEV_FB_USED_BYTES" in new
    assert "DCGM_FI_DEV_SM_CLOCK_HERTZ" not in old and "DCGM_FI_DEV_SM_CLOCK" not in new


def test_each_execution_gets_host_checks_in_some_phase():
    for scenario in library.default_suite():
        checked = set()
        for minute in expected.eval_minutes(scenario):
            if expected.hosts_steady(scenario, minute):
                checked |= {e.id for e in expected.running(scenario, minute)}
        assert checked == {e.id for e in scenario.executions}, scenario.name


def test_two_executions_on_one_host_share_its_ram_and_cpu():
    scenario = library.training()
    want = expected.expected(scenario, 10)  # both running on h1
    ram = [s for s in want[catalog.NODE_RAM_USED.name] if s.labels["hostname"] == "h1"]
    assert sorted(s.labels[catalog.EXECUTION_LABEL] for s in ram) == ["train-0001", "train-0002"]
    assert ram[0].value == ram[1].value == (8 + 48 + 48) * 1024**3
