"""docs/runbook.md, rendered from its template with the configuration's thresholds and durations."""

from __future__ import annotations

import functools

import jinja2

from gpu_execution_pack import __version__, catalog, promql
from gpu_execution_pack.config import CLUSTER, ONE_CLUSTER, ClusterScope, Config, cluster_scope
from gpu_execution_pack.output import command
from gpu_execution_pack.promql import match, parse_duration_seconds
from gpu_execution_pack.rules.alerts import AlertBuilder


def environment() -> jinja2.Environment:
    """The Jinja environment of the docs templates, with the filters they print figures with."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gpu_execution_pack", "docs/templates"),  # package data, wherever installed
        undefined=jinja2.StrictUndefined,  # a mistyped key fails the render instead of vanishing
        keep_trailing_newline=True,
        autoescape=False,  # Markdown, not HTML
    )
    env.filters["percent"] = lambda ratio: f"{ratio * 100:g} %"
    env.filters["number"] = lambda value: f"{value:g}"
    env.filters["seconds"] = lambda duration: f"{parse_duration_seconds(duration):g}"
    return env


def selected(source: catalog.Series | catalog.RawMetric, label: str, clusters: ClusterScope = ONE_CLUSTER) -> str:
    """The PromQL selector of ``source`` for one value of ``label``, left for the reader to fill in (``…``),
    within one cluster where ``cluster_label`` is set: ids and host names repeat across the clusters of
    one store, so a query without it mixes theirs."""
    return promql.render(source.select(match(label, "…"), *clusters.matchers("…")))


def render_template(template: str, cfg: Config | None, regenerate: str) -> str:
    """A docs template rendered for ``cfg`` (built-in defaults if None); its header gives ``regenerate``.

    Queries the docs show are built as the rules are, and printed by ``promql`` (or ``selected``).
    """
    cfg = cfg or Config()
    clusters = cluster_scope(cfg)
    return (
        environment()
        .get_template(template)
        .render(
            cfg=cfg,
            a=cfg.alerts,
            c=catalog,
            alerts=AlertBuilder(cfg),
            promql=promql.render,
            selected=functools.partial(selected, clusters=clusters),
            clusters=clusters,
            cluster=CLUSTER,
            version=__version__,
            regenerate=regenerate,
        )
    )


def render(cfg: Config | None = None, regenerate: str = command("docs")) -> str:
    """The runbook for ``cfg`` (built-in defaults if None); its header gives ``regenerate`` as the command."""
    return render_template("runbook.md.j2", cfg, regenerate)
