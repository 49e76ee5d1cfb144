"""Config keys of the generated Alertmanager routing snippet (section ``alertmanager``).

``gpu_execution_pack.rules.routing`` turns these into ``alertmanager.yml``: one route that
selects the pack's alerts, groups them per alert and execution, and optionally hands each
severity to its own receiver. Timings are Alertmanager's own defaults. Checks the loader
cannot make (label names in a list, regular expressions, empty names) are made here, with
messages that name the key.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack.catalog import EXECUTION_LABEL
from gpu_execution_pack.config.loader import LABEL_NAME_RE, ConfigError, check_selectors, opt
from gpu_execution_pack.promql import Matcher, parse_matchers

SECTION = "alertmanager"
# Alertmanager's group_by value that groups by every label.
GROUP_BY_ALL = "..."


@dataclass(frozen=True)
class Alertmanager:
    receiver: str = opt(
        "gpu-executions",
        "Receiver the pack's route sends its alerts to (and each severity without a receiver of its own). "
        "The generated file defines it without integrations: define it in your Alertmanager config.",
        "Your Alertmanager already has a receiver for the team that owns the GPU fleet.",
    )
    critical_receiver: str = opt(
        "",
        "Receiver of the pack's alerts with severity critical (a child route); empty: they go to `receiver`.",
        "You page on critical alerts and raise some alert's severity to critical (e.g. telemetry_missing).",
    )
    warning_receiver: str = opt(
        "",
        "Receiver of the pack's alerts with severity warning (a child route); empty: they go to `receiver`.",
        "Warnings go to a team chat rather than to the default receiver.",
    )
    info_receiver: str = opt(
        "",
        "Receiver of the pack's alerts with severity info (a child route); empty: they go to `receiver`.",
        "Info alerts (throttling, waste) go to a ticket queue or a receiver without integrations.",
    )
    matchers: str = opt(
        "",
        "Label matchers that select the pack's alerts into its route; empty: every alert whose name starts "
        "with the pack's alert-name prefix.",
        'Several Prometheus servers or clusters feed one Alertmanager: add e.g. cluster="gpu-eu".',
        kind="selector",  # promql.matchers reads it, and prints it for Alertmanager (one grammar for both)
    )
    group_by: tuple[str, ...] = opt(
        ("alertname", EXECUTION_LABEL),
        "Labels a notification groups by: by default one notification per alert and execution, listing "
        "each GPU or host it concerns. The tenant label (`api.tenant_label`) follows `execution_id` where "
        "that is listed and it is not: two tenants' executions of one id are two notifications. `...` groups "
        "by every label.",
        "Add hostname to split large executions per host; drop execution_id for one notification per alert.",
    )
    group_wait: str = opt(
        "30s",
        "How long Alertmanager waits after the first alert of a new group before notifying, to gather the "
        "same alert on the execution's other GPUs.",
        "Shorter to hear sooner; longer to gather more GPUs of a large execution into one notification.",
        kind="duration",
    )
    group_interval: str = opt(
        "5m",
        "How long Alertmanager waits before notifying about alerts added to (or resolved in) a group it "
        "has already notified.",
        "Shorter to hear sooner about further GPUs of the same execution.",
        kind="duration",
    )
    repeat_interval: str = opt(
        "4h",
        "How long before a notification is sent again for a group whose alerts have not changed.",
        "Match how often on-call wants to be reminded of a long-running alert.",
        kind="duration",
    )

    def __post_init__(self) -> None:
        check_selectors(self, SECTION)
        if not self.receiver.strip():
            raise ConfigError(f"{SECTION}.receiver: an empty name is not accepted; expected a receiver name")
        for item in self.group_by:
            if item != GROUP_BY_ALL and not LABEL_NAME_RE.match(item):
                raise ConfigError(
                    f"{SECTION}.group_by: {item!r} is not accepted; expected label names "
                    f"([a-zA-Z_][a-zA-Z0-9_]*) or {GROUP_BY_ALL!r} alone"
                )
        if GROUP_BY_ALL in self.group_by and len(self.group_by) > 1:
            raise ConfigError(f"{SECTION}.group_by: {GROUP_BY_ALL!r} groups by every label and stands alone")

    @property
    def route_matchers(self) -> tuple[Matcher, ...]:
        """``matchers`` as matchers (the pack's route prints them with ``promql.alertmanager_matchers``)."""
        return parse_matchers(self.matchers)

    def severity_receivers(self) -> tuple[tuple[str, str], ...]:
        """(severity, receiver) for each severity with a receiver of its own, most severe first."""
        chosen = (
            ("critical", self.critical_receiver),
            ("warning", self.warning_receiver),
            ("info", self.info_receiver),
        )
        return tuple((severity, receiver) for severity, receiver in chosen if receiver.strip())
