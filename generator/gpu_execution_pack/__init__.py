"""gpu-execution-pack: Prometheus rules and Grafana dashboards for per-execution GPU telemetry."""

__version__ = "0.4.0"
