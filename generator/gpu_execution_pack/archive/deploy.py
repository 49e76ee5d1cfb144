"""How to run ``archive --follow`` next to Prometheus: a systemd unit and a Kubernetes Deployment, written by
``generate`` beside the rules (docs/archive.md). Needs no database library."""

from __future__ import annotations

from pathlib import Path

from gpu_execution_pack import __version__
from gpu_execution_pack.config import Config
from gpu_execution_pack.config.sections.archive import POSTGRES_URL_PREFIXES
from gpu_execution_pack.output import HEADER, yaml_document

SOURCE = "gpu_execution_pack/archive/deploy.py"
# Beside the rule files, apart from rules/kubernetes/: a user applies that folder whole (README), and the archiver
# is a choice of its own (an image of theirs, a ConfigMap of their config), not a part of the rules.
ARCHIVE_DIR = "archive"
UNIT = "gpu-execution-pack-archive.service"
MANIFEST = "gpu-execution-pack-archive.kubernetes.yaml"
FOLLOW = "5m"  # a pass every 5 minutes
# The first pass after a start looks back this far (later ones from the last complete pass's watermark): it
# covers ended_after and the time the service was down (a restart, an upgrade); a record already holding an
# execution's span is not rewritten, so the overlap costs queries, not writes.
SINCE = "2h"
CONFIG_PATH = "/etc/gpu-execution-pack/config.yml"
STATE_DIR = "/var/lib/gpu-execution-pack"


def systemd_unit(regenerate: str) -> str:
    """The unit: ``archive --follow`` as an unprivileged dynamic user whose state directory holds a SQLite archive."""
    header = HEADER.format(version=__version__, source=SOURCE, command=regenerate)
    return header + "\n".join(
        [
            "[Unit]",
            "Description=gpu-execution-pack archive: ended executions' records kept past Prometheus' retention",
            "After=network-online.target prometheus.service",
            "Wants=network-online.target",
            "",
            "[Service]",
            "Type=simple",
            "DynamicUser=yes",
            f"StateDirectory={Path(STATE_DIR).name}",
            f"WorkingDirectory={STATE_DIR}",
            f"ExecStart=/usr/local/bin/gpu-execution-pack archive --follow {FOLLOW} --since {SINCE} "
            f"--config {CONFIG_PATH}",
            "Restart=on-failure",
            "RestartSec=30s",
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "ProtectHome=yes",
            "PrivateTmp=yes",
            "",
            "[Install]",
            "WantedBy=multi-user.target",
            "",
        ]
    )


def kubernetes_objects(cfg: Config) -> list[dict]:
    """A Deployment of one archiver reading the config from a ConfigMap the user makes (``<prefix>-config``,
    key config.yml), and a PersistentVolumeClaim for a SQLite archive (none with a PostgreSQL URL)."""
    k, name = cfg.kubernetes, f"{cfg.kubernetes.name_prefix}-archive"
    sqlite = not cfg.archive.url.startswith(POSTGRES_URL_PREFIXES)
    mounts = [{"name": "config", "mountPath": str(Path(CONFIG_PATH).parent), "readOnly": True}]
    volumes: list[dict] = [{"name": "config", "configMap": {"name": f"{k.name_prefix}-config"}}]
    if sqlite:
        mounts.append({"name": "archive", "mountPath": STATE_DIR})
        volumes.append({"name": "archive", "persistentVolumeClaim": {"claimName": name}})
    container = {
        "name": "archive",
        "image": cfg.archive.image,
        "args": ["archive", "--follow", FOLLOW, "--since", SINCE, "--config", CONFIG_PATH],
        "workingDir": STATE_DIR,
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
        "volumeMounts": mounts,
    }
    labels = {"app.kubernetes.io/name": name}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": k.namespace, "labels": labels},
        "spec": {
            "replicas": 1,  # two would be safe (every record once) but do the work twice
            "strategy": {"type": "Recreate"},  # one writer on a SQLite file's volume at a time
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [container], "volumes": volumes},
            },
        },
    }
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": k.namespace, "labels": labels},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
    }
    return [deployment, claim] if sqlite else [deployment]


def deploy_files(cfg: Config, rules_dir: Path, regenerate: str) -> dict[Path, str]:
    """The unit and the Kubernetes objects, under ``<rules_dir>/archive/``."""
    objects = kubernetes_objects(cfg)
    manifest = "---\n".join(yaml_document(o, SOURCE, regenerate) for o in objects)
    return {
        rules_dir / ARCHIVE_DIR / UNIT: systemd_unit(regenerate),
        rules_dir / ARCHIVE_DIR / MANIFEST: manifest,
    }
