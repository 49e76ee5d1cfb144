"""The Alertmanager routing snippet that delivers the pack's alerts: ``<rules_dir>/alertmanager.yml``.

The file is a whole Alertmanager config, so ``amtool check-config`` checks it as generated:

- ``route``: a root route (Alertmanager allows no matchers on the root) whose one child is the
  pack's route. That child is what you copy under your own root route: it selects the pack's
  alerts (``alertmanager.matchers``, by default ``alertname=~"<ALERT_PREFIX>.*"``), groups them
  per alert and execution (``alertmanager.group_by``) with the configured timings, and has one
  child route per severity that has a receiver of its own (``alertmanager.<severity>_receiver``).
- ``receivers``: every receiver the routes name, without integrations; replace them with (or
  merge them into) your own.
- ``inhibit_rules``: an alert that explains another silences it. Each rule's ``equal`` labels
  are ones both alerts carry with the same meaning (Alertmanager reads a missing label as the
  empty value, so a label only one side carries never matches, and one neither carries always
  does). A rule is left out for a target whose severity is above its source's: an inhibition
  never hides a page behind a warning.

  1. ``TelemetryMissing`` silences the alerts computed from the same GPU's measurements (memory,
     filling up, power and thermal throttling, stalled), ``equal: [UUID]``: the alert fires per held GPU
     or MIG instance once no DCGM series of its UUID reports (``unless on (UUID)``), so every
     instance and every execution on that UUID is affected. ``XidError`` is not silenced: an
     Xid (79, fallen off the bus) is usually why a GPU goes silent. Note that a GPU that goes
     silent altogether takes its other alerts with it (their series go stale and they resolve);
     this rule matters while the GPU still publishes some fields, e.g. temperature without the
     framebuffer fields the presence check reads.
  2. ``GpuMemoryHigh`` silences its ``GpuMemoryFillingUp`` twin, ``equal: [execution_id, UUID,
     GPU_I_ID]``: a GPU already nearly full needs no forecast. GPU_I_ID is absent on whole GPUs,
     on both sides, which Alertmanager reads as equal.
  3. ``HostMemoryHigh`` silences ``HostMemoryFillingUp``, ``equal: [execution_id, hostname]``.

  4. ``DcgmExporterDown`` silences the GPU alerts of rule 1 and ``TelemetryMissing`` of the host
     its target was last seen on, ``equal: [hostname]``. The alert reads that host from the host
     map of dcgm-exporter targets over ``telemetry_missing.window``, as the map comes from the
     target's own series and ends when it goes down. The source also matches ``hostname=~".+"``:
     a target never seen up alerts without a host and must not match GPU alerts whose hostname
     would be empty too.
  5. ``GpuStalled`` silences ``GpuUnderutilized`` of the same execution, ``equal: [execution_id]``.
     A stalled GPU reads at least ``gpu_stalled.util_threshold`` utilisation, so a job whose GPUs
     all stall never looks underused; the two meet only when a hang leaves a few ranks spinning
     in a collective and the rest idle (their processes gone, say), enough to pull the mean
     utilisation under ``gpu_underutilized.threshold``. Then the stall is the news and the
     underuse its consequence, whose description would guess at I/O or CPU. Where the
     utilisation is the engine activity (MIG instances, GPUs without GPU_UTIL) a hung job is
     never stalled and reads as idle: GpuUnderutilized is then the only alert, and nothing
     silences it. The stall never silences its GPU's other alerts: a GPU that is both stalled
     and full, hot or throttled says something about each.

Alertmanager checks an inhibition when it flushes the target's group: a source that starts firing
after that is too late for the first notification. Where a target can start firing together
with its source, the defaults give the source the shorter ``for`` (a stall at 15m, the underuse
at 30m; missing telemetry at 10m, power throttling at 15m).
"""

from __future__ import annotations

from pathlib import Path

from gpu_execution_pack import catalog
from gpu_execution_pack.config import SEVERITIES, Config, cluster_scope
from gpu_execution_pack.config.sections.alertmanager import GROUP_BY_ALL
from gpu_execution_pack.output import command, yaml_document
from gpu_execution_pack.promql import Matcher, alertmanager_matchers, match
from gpu_execution_pack.rules import alerts
from gpu_execution_pack.rules.alerts import ALERT_PREFIX, GPU_OF_EXECUTION, Alert
from gpu_execution_pack.rules.files import SOURCE

ALERTMANAGER_FILE = "alertmanager.yml"
SEVERITY_LABEL = "severity"  # the label every pack alert carries (rules.files writes it)
ALERT_NAME_LABEL = "alertname"  # the label Alertmanager names an alert by
# TelemetryMissing asks whether anything reports on a physical GPU: its `unless on (UUID)`.
PHYSICAL_GPU_LABEL = catalog.UUID_LABEL
HOST_OF_EXECUTION: tuple[str, ...] = catalog.NODE_LABELS


def names_matcher(alerts: list[Alert]) -> Matcher:
    """A matcher of exactly these alerts (Alertmanager anchors the regex)."""
    if len(alerts) == 1:
        return match(ALERT_NAME_LABEL, alerts[0].name)
    return match(ALERT_NAME_LABEL, "|".join(a.name for a in alerts), "=~")


def pack_matchers(cfg: Config) -> list[str]:
    """The matchers of the pack's route: the configured ones, or the pack's alert-name prefix."""
    return alertmanager_matchers(
        cfg.alertmanager.route_matchers or (match(ALERT_NAME_LABEL, f"{ALERT_PREFIX}.*", "=~"),)
    )


def at_most_as_severe(cfg: Config, target: Alert, source: Alert) -> bool:
    """SEVERITIES runs from the most severe: a source may silence a target ranked at or after it."""
    return SEVERITIES.index(target.severity(cfg)) >= SEVERITIES.index(source.severity(cfg))


# The alerts on one GPU's own measurements (they carry its UUID), which silence makes unreliable:
# not TelemetryMissing (the absence itself) nor XidError (a cause).
GPU_MEASUREMENT_ALERTS = [a for a in alerts.ALERTS if a.gpu_measurement]


def inhibition(
    cfg: Config, source: Alert, targets: list[Alert], equal: tuple[str, ...], source_matchers: tuple[Matcher, ...] = ()
) -> list[dict]:
    """One inhibit rule, as a list: empty where no target may be silenced by ``source`` at the severities
    ``cfg`` gives them.

    ``source_matchers`` narrow the source further (e.g. to alerts that carry an ``equal`` label).
    """
    allowed = [t for t in targets if at_most_as_severe(cfg, t, source)]
    if not allowed:
        return []
    return [
        {
            "source_matchers": alertmanager_matchers([names_matcher([source]), *source_matchers]),
            "target_matchers": alertmanager_matchers([names_matcher(allowed)]),
            "equal": list(equal),
        }
    ]


def inhibit_rules(cfg: Config) -> list[dict]:
    """The inhibitions the module docstring explains, in its order."""
    rules = [
        # 1. A silent GPU: its measurement alerts say nothing reliable.
        *inhibition(cfg, alerts.TELEMETRY_MISSING, GPU_MEASUREMENT_ALERTS, (PHYSICAL_GPU_LABEL,)),
        # 2. Nearly full GPU memory makes the forecast of it running out redundant.
        *inhibition(cfg, alerts.GPU_MEMORY_HIGH, [alerts.GPU_MEMORY_EXHAUSTION], GPU_OF_EXECUTION),
        # 3. The same for host RAM.
        *inhibition(cfg, alerts.HOST_MEMORY_HIGH, [alerts.HOST_MEMORY_EXHAUSTION], HOST_OF_EXECUTION),
        # 4. A dcgm-exporter down: the GPU alerts of the host it was last seen on say nothing reliable.
        #    Only where the alert names that host: a target never seen up must not match GPU alerts.
        *inhibition(
            cfg,
            alerts.DCGM_EXPORTER_DOWN,
            [*GPU_MEASUREMENT_ALERTS, alerts.TELEMETRY_MISSING],
            (catalog.HOST_LABEL,),
            (match(catalog.HOST_LABEL, ".+", "=~"),),
        ),
        # 5. A stalled GPU explains its execution's underuse: the hang is the news.
        #    Of the same tenant's execution: an id may be two tenants' (both alerts carry the tenant label).
        *inhibition(
            cfg, alerts.GPU_STALLED, [alerts.GPU_UNDERUTILIZED], (catalog.EXECUTION_LABEL, cfg.api.tenant_label)
        ),
    ]
    # An alert silences only alerts of its own cluster: names repeat from one cluster to the next.
    cluster = cluster_scope(cfg).partition
    return [{**r, "equal": [*cluster, *r["equal"]]} for r in rules]


def group_by(cfg: Config) -> list[str]:
    """``alertmanager.group_by``, led by the cluster label where one is set: no notification mixes clusters; and
    the tenant label after the execution's, where that is grouped by: no notification mixes two tenants'
    executions of one id (Kubernetes Job names repeat across namespaces)."""
    labels, scope, tenant = list(cfg.alertmanager.group_by), cluster_scope(cfg), cfg.api.tenant_label
    if GROUP_BY_ALL in labels:
        return labels
    if catalog.EXECUTION_LABEL in labels and tenant not in labels:
        labels.insert(labels.index(catalog.EXECUTION_LABEL) + 1, tenant)
    if not scope.enabled or scope.label in labels:
        return labels
    return [scope.label, *labels]


def pack_route(cfg: Config) -> dict:
    """The route you copy under your root route: the pack's alerts, grouped, per-severity children."""
    a = cfg.alertmanager
    route: dict = {
        "receiver": a.receiver,
        "matchers": pack_matchers(cfg),
        "group_by": group_by(cfg),
        "group_wait": a.group_wait,
        "group_interval": a.group_interval,
        "repeat_interval": a.repeat_interval,
    }
    children = [
        {"receiver": receiver, "matchers": alertmanager_matchers([match(SEVERITY_LABEL, severity)])}
        for severity, receiver in a.severity_receivers()
    ]
    if children:  # they inherit grouping and timings from the pack's route
        route["routes"] = children
    return route


def alertmanager_config(cfg: Config) -> dict:
    """The whole snippet as an Alertmanager config: route, receivers, inhibit_rules."""
    a = cfg.alertmanager
    names = [a.receiver, *(receiver for _, receiver in a.severity_receivers())]
    return {
        # The root only gives the default receiver: Alertmanager allows no matchers on it.
        "route": {"receiver": a.receiver, "routes": [pack_route(cfg)]},
        "receivers": [{"name": name} for name in dict.fromkeys(names)],
        "inhibit_rules": inhibit_rules(cfg),
    }


def alertmanager_files(cfg: Config, rules_dir: Path, regenerate: str = command("generate")) -> dict[Path, str]:
    """``rules_dir / alertmanager.yml``; ``regenerate`` is the command its header gives."""
    return {rules_dir / ALERTMANAGER_FILE: yaml_document(alertmanager_config(cfg), SOURCE, regenerate)}
