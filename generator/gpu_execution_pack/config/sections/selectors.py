"""Config keys of section ``selectors``: the label matchers added to the exporters' selectors."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack.config.loader import check_selectors, opt
from gpu_execution_pack.promql import Matcher, parse_matchers


@dataclass(frozen=True)
class Selectors:
    dcgm: str = opt(
        "",
        'Label matchers added to every DCGM selector, e.g. `job="dcgm-exporter"`. Empty by default: '
        "DCGM metric names are specific and job names differ between installs.",
        "Another exporter publishes DCGM-named metrics, or one Prometheus holds several clusters.",
        kind="selector",
    )
    node: str = opt(
        "",
        'Label matchers added to every node_exporter selector, e.g. `job="node"`.',
        "Several jobs export node_* metrics (e.g. node_exporter on hosts and in a VM image).",
        kind="selector",
    )
    dcgm_targets: str = opt(
        'job=~".*dcgm.*"',
        "Label matchers that pick dcgm-exporter's scrape targets out of `up`, for the exporter-down alert. "
        "The default matches the job names of dcgm-exporter's and the GPU operator's Helm charts.",
        'Your scrape job for dcgm-exporter is named without `dcgm`, e.g. `job="gpu-metrics"`.',
        kind="selector",
    )

    def __post_init__(self) -> None:
        check_selectors(self, "selectors")

    # The keys hold the text the user wrote (docs and the runbook quote it); rules read the matchers,
    # parsed once per text (parse_matchers keeps them).
    @property
    def dcgm_matchers(self) -> tuple[Matcher, ...]:
        """``dcgm`` as matchers."""
        return parse_matchers(self.dcgm)

    @property
    def node_matchers(self) -> tuple[Matcher, ...]:
        """``node`` as matchers."""
        return parse_matchers(self.node)

    @property
    def dcgm_targets_matchers(self) -> tuple[Matcher, ...]:
        """``dcgm_targets`` as matchers."""
        return parse_matchers(self.dcgm_targets)
