"""Config keys of section ``amd``: ROCm device-metrics-exporter facts that differ between installs."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack.config.loader import check_selectors, opt
from gpu_execution_pack.promql import Matcher, parse_matchers


@dataclass(frozen=True)
class Amd:
    selector: str = opt(
        "",
        'Label matchers added to every selector of ROCm device-metrics-exporter metrics, e.g. `job="amd-metrics"`.',
        "Another exporter publishes gpu_* metrics (AMD's names are generic), or one Prometheus holds several clusters.",
        kind="selector",
    )
    targets: str = opt(
        'job=~".*(amd|rocm|device-metrics).*"',
        "Label matchers that pick device-metrics-exporter's scrape targets out of `up`, for the exporter-down "
        "alert. The default matches the Helm chart's job (`<release>-amdgpu-metrics-exporter`).",
        'Your scrape job for it is named otherwise, e.g. `job="gpu_metrics"` as in AMD\'s Prometheus example.',
        kind="selector",
    )
    metric_prefixes: tuple[str, ...] = opt(
        ("", "amd_"),
        "Metric-name prefixes the exporter's names may carry (its `MetricsFieldPrefix`): none from the "
        "binary and the Docker image, `amd_` from the Helm chart and the Debian package (v1.3.0 on).",
        "Your exporters are configured with another prefix; or all with one, and you drop the other from "
        "the selectors.",
        kind="prefix",
    )
    execution_label: str = opt(
        "job_id",
        "Label of device-metrics-exporter's series that carries the execution id where `execution_label` is "
        "absent, in label mode: the Slurm job id, which the exporter attaches since v1.3.1.",
        "Your AMD GPUs carry the id under another label (`pod` in Kubernetes, read through kubernetes mode).",
        kind="label",
        empty_ok=True,
    )
    model_names: tuple[tuple[str, str], ...] = opt(
        (
            ("(?i).*MI210.*|102-D67305-.*", "AMD Instinct MI210"),
            ("(?i).*MI250X.*", "AMD Instinct MI250X"),
            ("(?i).*MI300X.*|102-G30211-.*", "AMD Instinct MI300X"),
            ("(?i).*MI325X.*", "AMD Instinct MI325X"),
        ),
        "The `modelName` of AMD GPUs: a regular expression over the exporter's `card_series` (the product "
        "name, where published) or else its `card_model` (a board part number), and the name it gives. The "
        "expression must match the whole value. The name is a `label_replace` replacement: `$1` is the "
        "expression's first group, and a literal `$` is written `$$`.",
        "Your boards' part numbers or product names are not listed, or your prices are keyed by other names.",
        kind="model_names",
    )

    def __post_init__(self) -> None:
        check_selectors(self, "amd")

    @property
    def matchers(self) -> tuple[Matcher, ...]:
        """``selector`` as matchers."""
        return parse_matchers(self.selector)

    @property
    def targets_matchers(self) -> tuple[Matcher, ...]:
        """``targets`` as matchers."""
        return parse_matchers(self.targets)
