"""docs/report.md: the execution report's figures and verdicts, with the configuration's thresholds."""

from __future__ import annotations

from gpu_execution_pack import __version__
from gpu_execution_pack.config import Config
from gpu_execution_pack.docs.runbook import environment
from gpu_execution_pack.output import command
from gpu_execution_pack.rules import catalog


def render(cfg: Config | None = None, regenerate: str = command("docs")) -> str:
    """The report reference for ``cfg`` (built-in defaults if None)."""
    cfg = cfg or Config()
    return (
        environment()
        .get_template("report.md.j2")
        .render(cfg=cfg, a=cfg.alerts, c=catalog, version=__version__, regenerate=regenerate)
    )
