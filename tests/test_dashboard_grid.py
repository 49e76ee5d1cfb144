"""Dashboards on Grafana's grid: each row's panels tile its 24 columns with no hole and no overlap, and the
Execution dashboard's overview starts with what identifies the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.dashboards import execution, house

from .conftest import REPO

COLUMNS = 24  # Grafana's grid, written out here rather than read from the code under test
GENERATED = sorted((REPO / "dashboards").glob("*.json"))


def rows_of(panels: list[dict]) -> list[tuple[dict, list[dict]]]:
    """Each row panel with the panels under it, in the dashboard's order."""
    rows: list[tuple[dict, list[dict]]] = []
    for panel in panels:
        if panel["type"] == "row":
            rows.append((panel, []))
        else:
            assert rows, f"panel {panel['title']!r} comes before any row"
            rows[-1][1].append(panel)
    return rows


def grid_problems(panels: list[dict]) -> list[str]:
    """What keeps each row's panels from tiling the grid: a panel past the edge, two panels on one cell,
    a cell no panel covers between the row's title and the next row, or a row not starting where the last ended."""
    problems: list[str] = []
    top = 0
    for row, members in rows_of(panels):
        if row["gridPos"]["y"] != top:
            problems.append(f"row {row['title']!r} starts at y={row['gridPos']['y']}, not {top}")
        start = row["gridPos"]["y"] + row["gridPos"]["h"]
        owner: dict[tuple[int, int], str] = {}
        for panel in members:
            pos = panel["gridPos"]
            if pos["x"] < 0 or pos["x"] + pos["w"] > COLUMNS or pos["y"] < start:
                problems.append(f"{row['title']}: {panel['title']!r} at {pos} is outside its row")
            for y in range(pos["y"], pos["y"] + pos["h"]):
                for x in range(pos["x"], pos["x"] + pos["w"]):
                    if (x, y) in owner:
                        problems.append(f"{row['title']}: {panel['title']!r} overlaps {owner[x, y]!r} at x={x} y={y}")
                    owner[x, y] = panel["title"]
        bottom = max((y + 1 for _, y in owner), default=start)
        holes = [(x, y) for y in range(start, bottom) for x in range(COLUMNS) if (x, y) not in owner]
        if holes:
            problems.append(f"{row['title']}: {len(holes)} empty cells, the first at x={holes[0][0]} y={holes[0][1]}")
        top = bottom
    return problems


def test_the_dashboards_are_all_checked():
    assert {p.name for p in GENERATED} >= {"execution.json", "fleet.json", "cost.json"}


@pytest.mark.parametrize("path", GENERATED, ids=lambda p: p.name)
def test_each_rows_panels_fill_the_24_columns_without_holes_or_overlaps(path: Path):
    board = json.loads(path.read_text(encoding="utf-8"))
    assert grid_problems(board["panels"]) == []


def test_the_check_finds_a_hole_and_an_overlap():
    row = {"type": "row", "title": "r", "gridPos": {"x": 0, "y": 0, "w": 24, "h": 1}}
    left = {"type": "stat", "title": "left", "gridPos": {"x": 0, "y": 1, "w": 12, "h": 4}}
    assert grid_problems([row, left]) == ["r: 48 empty cells, the first at x=12 y=1"]
    over = {"type": "stat", "title": "over", "gridPos": {"x": 8, "y": 1, "w": 16, "h": 4}}
    assert any("overlaps 'left'" in p for p in grid_problems([row, left, over]))


def test_a_panel_added_at_the_end_of_a_full_row_still_tiles_it():
    # A new served series' panel lands at the end of its row (12 columns after a full-width one, as in PCIe).
    plots = [execution.Plot("wide", "a", (("", catalog.GPU_PCIE_RX),), width=24), execution.own_plot(catalog.GPU_POWER)]
    section = house.Section("PCIe")
    for plot in plots:
        section.add(plot.panel(Config()), width=plot.width)
    panels = json.loads(house.render("t", house.layout([section]), [], "d"))["panels"]
    assert grid_problems(panels) == []
    assert [p["gridPos"]["y"] for p in panels[1:]] == [1, 9]  # the new one on a line of its own, full width


def test_the_execution_overview_starts_with_duration_gpus_hosts_and_model():
    board = json.loads((REPO / "dashboards" / "execution.json").read_text(encoding="utf-8"))
    row, overview = rows_of(board["panels"])[0]
    assert row["title"] == "Overview"
    first_line = sorted(
        (p for p in overview if p["gridPos"]["y"] == row["gridPos"]["y"] + 1), key=lambda p: p["gridPos"]["x"]
    )
    assert [p["title"] for p in first_line] == ["Duration", "GPUs", "Hosts", "GPU model"]
    model = first_line[-1]
    # The model is dcgm-exporter's modelName label, shown as the value's name.
    assert "modelName" in model["targets"][0]["expr"] and model["options"]["textMode"] == "name"
    assert "{{modelName}}" in model["targets"][0]["legendFormat"]
