"""docs/report.md: the execution report's figures and verdicts, with the configuration's thresholds."""

from __future__ import annotations

from gpu_execution_pack.config import Config
from gpu_execution_pack.docs.runbook import render_template
from gpu_execution_pack.output import command


def render(cfg: Config | None = None, regenerate: str = command("docs")) -> str:
    """The report reference for ``cfg`` (built-in defaults if None)."""
    return render_template("report.md.j2", cfg, regenerate)
