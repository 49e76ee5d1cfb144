"""Config keys of section ``archive``: ended executions' records, kept past Prometheus' retention."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack.config.loader import ConfigError, opt
from gpu_execution_pack.config.sections.api import MAX_STEP
from gpu_execution_pack.promql.durations import parse_duration_seconds

# An archive.url beginning so names a PostgreSQL database; anything else without "://" is a SQLite file's path.
POSTGRES_URL_PREFIXES = ("postgresql://", "postgres://", "postgresql+psycopg://")


@dataclass(frozen=True)
class Archive:
    """The archive of ended executions' records (`gpu-execution-pack archive`; docs/archive.md)."""

    url: str = opt(
        "gpu-execution-pack-archive.sqlite",
        "Where records are kept: a SQLite file path (embedded, nothing to run), or a `postgresql://user@host/db` "
        "URL. Empty: no archive; the report and the endpoint read Prometheus only. A relative path (the default) "
        "is resolved against the working directory of each command that opens it (`archive`, `serve`, `report`), "
        "not the config file's directory: the generated systemd unit and Kubernetes Deployment run in their state "
        "directory (docs/archive.md), so the file lands there; give an absolute path where `serve` or `report` run "
        "from another directory.",
        "Several `serve` replicas share one archive, or it should live on a database you back up: use PostgreSQL.",
        empty_ok=True,
    )
    step: str = opt(
        "1m",
        "Step of the served series kept in each record (the endpoint answers an archived execution at this step).",
        "Finer plots of old runs (smaller step, a bigger archive) or a smaller archive (larger step).",
        kind="duration",
    )
    ended_after: str = opt(
        "15m",
        "An execution with no sample for this long has ended and is archived; one still reporting is not.",
        "Your scrapes or rule evaluations lag more (a slow remote-write pipeline): raise it.",
        kind="duration",
    )
    image: str = opt(
        "gpu-execution-pack:latest",
        "Container image of the generated Kubernetes Deployment that runs `archive --follow` "
        "(`<rules_dir>/archive/gpu-execution-pack-archive.kubernetes.yaml`): an image with "
        "`pip install 'gpu-execution-pack[api,archive]'`.",
        "You build and push the image to your registry under another name.",
        kind="name",
    )

    def __post_init__(self) -> None:
        # Anything else with a scheme would be taken for a SQLite file's path by generate and serve, and refused by
        # the archiver: refused here, where validate names it.
        if "://" in self.url and not self.url.startswith(POSTGRES_URL_PREFIXES):
            raise ConfigError(
                f"archive.url: {self.url!r} is not accepted; accepted: a SQLite file path or a postgresql:// URL "
                "(or empty: no archive)"
            )
        # The endpoint answers an archived execution at this step: one it would refuse is no archive to keep.
        if parse_duration_seconds(self.step) > parse_duration_seconds(MAX_STEP):
            raise ConfigError(f"archive.step: {self.step!r} is not accepted; expected a duration of at most {MAX_STEP}")
