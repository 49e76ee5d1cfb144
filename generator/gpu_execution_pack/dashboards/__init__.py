"""Grafana dashboards (grafanalib through the house layer) and the files that provision them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpu_execution_pack.config import Config
from gpu_execution_pack.dashboards import cost, execution, fleet

# File stem -> render of every dashboard.
DASHBOARDS: dict[str, Callable[[Config], str]] = {
    "execution": execution.render,
    "fleet": fleet.render,
    "cost": cost.render,
}


def dashboard_json(cfg: Config, dashboards_dir: Path | None = None) -> dict[Path, str]:
    """``<dashboards_dir>/<name>.json`` for every dashboard."""
    out = Path(cfg.output.dashboards_dir) if dashboards_dir is None else dashboards_dir
    return {out / f"{name}.json": render(cfg) for name, render in DASHBOARDS.items()}
