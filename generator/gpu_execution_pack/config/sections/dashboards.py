"""Config keys of section ``dashboards``: the Grafana dashboards, their provisioning, GPU-hour prices."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack.config.loader import opt


@dataclass(frozen=True)
class Dashboards:
    title_prefix: str = opt(
        "GPU executions",
        "Prefix of every dashboard title; dashboard uids are derived from the titles.",
        "Several packs (clusters, tenants) share one Grafana.",
    )
    folder: str = opt(
        "GPU executions",
        "Grafana folder of the dashboards: the file provider's folder, and the Grafana sidecar's folder "
        "annotation on the ConfigMaps.",
        "Your Grafana organises dashboards by team.",
    )
    provisioning_path: str = opt(
        "/var/lib/grafana/dashboards/gpu-execution-pack",
        "Where Grafana reads the dashboard JSON from: the file provider's `options.path` in "
        "provisioning/dashboards.yml. Mount or copy the generated dashboards there.",
        "Your Grafana image or Helm values mount dashboards at another path.",
        kind="path",
    )
    datasource_name: str = opt(
        "Prometheus",
        "Name of the Prometheus datasource the provisioning file defines and the dashboards select by default.",
        "Your Grafana already has a Prometheus datasource under another name.",
        kind="name",
    )
    datasource_url: str = opt(
        "http://prometheus:9090",
        "URL of Prometheus in the provisioned datasource.",
        "Grafana reaches Prometheus (or Thanos, Mimir) at another address.",
        kind="url",
    )
    currency: str = opt("USD", "Currency of the prices, shown in the cost panels.", "You bill in another currency.")
    default_price_per_gpu_hour: float = opt(
        2.0,
        "Price of one GPU-hour of a model not listed in price_per_gpu_hour; an hour of a MIG instance or MI300 "
        "partition is billed its share of a GPU-hour (its compute slices over those of the GPU's instances).",
        "Set your list price for models you do not list.",
        kind="positive",
    )
    price_per_gpu_hour: tuple[tuple[str, float], ...] = opt(
        (("NVIDIA A100-SXM4-80GB", 1.8), ("NVIDIA H100 80GB HBM3", 3.0)),
        "Price of one GPU-hour per GPU model, keyed by DCGM's modelName label. A model is priced under "
        "either spelling dcgm-exporter gives it: as listed, and with its blanks replaced by `-` "
        "(`--replace-blanks-in-model-name`), unless that spelling is listed too. An hour of a MIG instance or "
        "MI300 partition is billed its share of a GPU-hour (a 3g.40gb of an A100's seven slices: 3/7).",
        "These are examples: set your own prices per model.",
        kind="prices",
    )

    def model_prices(self) -> dict[str, float]:
        """The price of each modelName value: every listed model under its own spelling and under the one
        dcgm-exporter's --replace-blanks-in-model-name gives it (runs of blanks to one `-`), so a fleet with
        that flag is not billed at the default price. A spelling listed itself keeps its own price."""
        listed = dict(self.price_per_gpu_hour)
        dashed = {"-".join(name.split()): price for name, price in self.price_per_gpu_hour}
        return dict(sorted((dashed | listed).items()))
