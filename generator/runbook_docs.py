"""docs/runbook.md, rendered from its template with the configuration's thresholds and durations."""

from __future__ import annotations

from pathlib import Path

import jinja2

from generator.config import Config, parse_duration_seconds

TEMPLATES = Path(__file__).parent / "templates"


def render(cfg: Config | None = None) -> str:
    """The runbook for ``cfg`` (built-in defaults if None)."""
    cfg = cfg or Config()
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,  # a mistyped key fails the render instead of vanishing
        keep_trailing_newline=True,
        autoescape=False,  # Markdown, not HTML
    )
    env.filters["percent"] = lambda ratio: f"{ratio * 100:g} %"
    env.filters["number"] = lambda value: f"{value:g}"
    env.filters["seconds"] = lambda duration: f"{parse_duration_seconds(duration):g}"
    return env.get_template("runbook.md.j2").render(cfg=cfg, a=cfg.alerts)
