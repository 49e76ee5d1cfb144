"""Host identity: which host every dcgm-exporter and node_exporter target is on, and naming a series' host.

The ``hosts`` recording group (``HostIdentity.rules``) resolves each scrape target's host once: the host
maps of dcgm-exporter and node_exporter targets (``catalog.GPU_EXPORTER_HOST``, ``catalog.NODE_EXPORTER_HOST``)
and the names two machines claim (``catalog.NODE_HOST_COLLISIONS``). Under ``node.host_identity: scrape`` the
scrape config names every target's host and the maps read it as is (``scraped_hosts``). Every per-GPU and
per-host rule then names its host by joining its target's map (``with_host``).
"""

from __future__ import annotations

from collections.abc import Iterable

from gpu_execution_pack import catalog
from gpu_execution_pack.catalog import HOST_LABEL, LEGACY_HOST_LABEL, Series
from gpu_execution_pack.config import Config
from gpu_execution_pack.promql import (
    Expr,
    Paren,
    Selector,
    aggregate,
    any_of,
    call,
    join,
    label_copy,
    labelled,
    match,
    on,
    selector,
)
from gpu_execution_pack.rules.amd import gpu_presence
from gpu_execution_pack.rules.groups import RecordingRule

ADDRESS = "address"  # a scratch label: the host part of a target's instance
EXACT = "(.*)"  # a name copied as it is


def from_exported(expr: Expr, labels: Iterable[str]) -> Expr:
    """``expr`` with each of ``labels`` read from ``exported_<label>`` where that is present: a series scraped
    without honor_labels (behind a ServiceMonitor) keeps its own value of a label the target also sets there."""
    for label in labels:
        expr = label_copy(expr, label, catalog.EXPORTED_PREFIX + label)
    return expr


class HostIdentity:
    """The host maps of one configuration: each scrape target's host, and the names two machines claim."""

    def __init__(self, cfg: Config):
        self.cfg = cfg

    def rules(self) -> tuple[RecordingRule, ...]:
        """Which host every dcgm-exporter and node_exporter target is on, resolved once per target.

        A node named exactly by a dcgm-exporter (its ``hostname`` or ``Hostname`` label, or its exporter
        pod's Kubernetes node) keeps that name; any other is named by node.host_regex (the short name),
        unless that name collides: two machines claim it, and each keeps its whole nodename. A GPU's host
        is the first of these that names a known host: its labels exactly, then after node.host_regex
        (never a colliding name), or the host of the node_exporter scraped from the same address. Where
        none does, its own label (else its address) still names a host. Under ``node.host_identity: scrape``
        each target's own ``hostname`` label names its host (``scraped_hosts``).
        """
        raw = gpu_presence(self.cfg)
        labels = catalog.DCGM_TARGET_LABELS
        if self.cfg.node.at_scrape:
            collisions, node_hosts, gpu_hosts = self.scraped_hosts()
        else:
            collisions, node_hosts, gpu_hosts = self.host_name_collisions(), self.node_hosts(), self.gpu_hosts()
        return (
            RecordingRule(labels.name, aggregate("group", labels.labels, raw)),
            RecordingRule(catalog.NODE_HOST_COLLISIONS.name, collisions),
            RecordingRule(catalog.NODE_EXPORTER_HOST.name, node_hosts),
            RecordingRule(catalog.GPU_EXPORTER_HOST.name, gpu_hosts),
        )

    def scraped_hosts(self) -> tuple[Expr, Expr, Expr]:
        """The collisions and both host maps where the scrape names every target's host: two machines
        (nodenames) given one name collide; each target's host is its own label (the exporter-down alert
        still reads the dcgm-exporter map)."""
        named, targets = (labelled(HOST_LABEL),), (*catalog.TARGET_LABELS, HOST_LABEL)
        real = self.real_nodenames().where(*named)  # a placeholder nodename tells no machines apart
        machines = aggregate("count", (HOST_LABEL,), aggregate("group", (HOST_LABEL, catalog.NODE_NAME_LABEL), real))
        uname = selector(catalog.NODE_INFO_METRIC, *self.cfg.selectors.node_matchers, *named)
        return (
            machines.gt(1),
            aggregate("group", targets, uname),
            aggregate("group", targets, catalog.DCGM_TARGET_LABELS.select(*named)),
        )

    def _named(self, source: str, expr: Expr, pattern: str = "") -> Expr:
        """One series per target, its host named from ``source`` (normalised by host_regex unless ``pattern``)."""
        copied = label_copy(expr, HOST_LABEL, source, pattern or self.cfg.node.host_regex)
        return aggregate("group", (*catalog.TARGET_LABELS, HOST_LABEL), copied)

    @staticmethod
    def _address(expr: Expr) -> Expr:
        return label_copy(expr, ADDRESS, catalog.INSTANCE_LABEL, catalog.ADDRESS_REGEX)

    def own_names(self, pattern: str = "") -> Expr:
        """What each dcgm-exporter target calls its host: hostname, else Hostname, else its address."""
        labels, placeholder = catalog.DCGM_TARGET_LABELS, self.cfg.node.placeholder_nodenames
        return self.firsts(
            [
                *(
                    self._named(label, labels.select(labelled(label), match(label, placeholder, "!~")), pattern)
                    for label in catalog.DCGM_HOST_LABELS
                ),
                self._named(catalog.INSTANCE_LABEL, labels.select(), catalog.ADDRESS_REGEX),
            ]
        )

    def pod_nodes(self) -> Expr:
        """Each dcgm-exporter target with its pod's Kubernetes node (kube_pod_info), where it runs in a pod.

        kube-state-metrics scraped without honor_labels (a ServiceMonitor without honorLabels) publishes each
        pod's namespace, pod and node as exported_<label>, its own pod's in the plain ones: read from
        exported_<label> where present, else every pod would share kube-state-metrics' own name and the
        join would fail at every evaluation (many-to-many), leaving no host map and no per-GPU series."""
        a, targets = self.cfg.attribution, catalog.TARGET_LABELS
        pod_labels = (*catalog.KUBERNETES_JOIN_LABELS, catalog.POD_NODE_LABEL)
        pod_info = from_exported(selector(a.pod_info_metric, *a.kubernetes_matchers), pod_labels)
        pods = aggregate("group", pod_labels, pod_info)
        exporter_pods = aggregate(
            "group", (*targets, *catalog.KUBERNETES_JOIN_LABELS), catalog.DCGM_TARGET_LABELS.select()
        )
        return join(exporter_pods, "*", on(catalog.KUBERNETES_JOIN_LABELS, group_left=(catalog.POD_NODE_LABEL,)), pods)

    def gpu_label_names(self, pattern: str = "") -> dict[str, Expr]:
        """Each dcgm-exporter target's host as its hostname label, its Hostname label and its pod's node name it
        (after host_regex unless ``pattern``)."""
        labels = catalog.DCGM_TARGET_LABELS
        return {
            "hostname label": self._named(HOST_LABEL, labels.select(labelled(HOST_LABEL)), pattern),
            "Hostname label": self._named(LEGACY_HOST_LABEL, labels.select(labelled(LEGACY_HOST_LABEL)), pattern),
            "exporter pod's node": self._named(catalog.POD_NODE_LABEL, self.pod_nodes(), pattern),
        }

    def exact_nodenames(self) -> Expr:
        """Every name a dcgm-exporter gives its host exactly, as a ``nodename`` (a placeholder matches no real one)."""
        names = label_copy(any_of(self.gpu_label_names(EXACT).values()), catalog.NODE_NAME_LABEL, HOST_LABEL, EXACT)
        return aggregate("group", (catalog.NODE_NAME_LABEL,), names)

    def real_nodenames(self) -> Selector:
        """node_exporter's uname series whose nodename is a real name, not a placeholder."""
        uname = selector(catalog.NODE_INFO_METRIC, *self.cfg.selectors.node_matchers)
        return uname.where(match(catalog.NODE_NAME_LABEL, self.cfg.node.placeholder_nodenames, "!~"))

    def host_name_collisions(self) -> Expr:
        """Names two or more machines (distinct nodenames) claim, with their count, where a GPU could be joined by
        it: a node named exactly by a dcgm-exporter claims its nodename, any other its name after host_regex."""
        real, by_name = self.real_nodenames(), on((catalog.NODE_NAME_LABEL,))
        claims = any_of(
            [
                label_copy(
                    real.unless(self.exact_nodenames(), by_name),
                    HOST_LABEL,
                    catalog.NODE_NAME_LABEL,
                    self.cfg.node.host_regex,
                ),
                label_copy(real.and_(self.exact_nodenames(), by_name), HOST_LABEL, catalog.NODE_NAME_LABEL, EXACT),
            ]
        )
        machines = aggregate("count", (HOST_LABEL,), aggregate("group", (HOST_LABEL, catalog.NODE_NAME_LABEL), claims))
        gpu_names = aggregate("group", (HOST_LABEL,), any_of(self.gpu_label_names().values()))
        return Paren(machines.gt(1)).and_(gpu_names, on((HOST_LABEL,)), stacked=True)

    def node_hosts(self) -> Expr:
        """Each node_exporter target's host: its nodename where a dcgm-exporter spells it exactly so, else after
        host_regex (its whole nodename where that name collides); for a placeholder nodename the name of the
        dcgm-exporter at the same address, else that address."""
        targets, placeholder = catalog.TARGET_LABELS, self.cfg.node.placeholder_nodenames
        uname = selector(catalog.NODE_INFO_METRIC, *self.cfg.selectors.node_matchers)
        real, nodename = self.real_nodenames(), catalog.NODE_NAME_LABEL
        exact = self._named(nodename, real.and_(self.exact_nodenames(), on((nodename,))), EXACT)
        short = label_copy(real, HOST_LABEL, nodename, self.cfg.node.host_regex)
        collided = self._named(
            nodename, short.and_(catalog.NODE_HOST_COLLISIONS.select(), on((HOST_LABEL,)), stacked=True), EXACT
        )
        unnamed = self._address(
            aggregate("group", targets, uname.where(match(catalog.NODE_NAME_LABEL, placeholder, "=~")))
        )
        dcgm_by_address = aggregate("topk", (ADDRESS,), self._address(self.own_names()), param=1)
        by_dcgm = join(unnamed, "*", on((ADDRESS,), group_left=(HOST_LABEL,)), dcgm_by_address)
        by_dcgm = aggregate("group", (*targets, HOST_LABEL), by_dcgm)
        candidates = {
            "nodename exactly": exact,
            "whole nodename of a colliding name": collided,
            "nodename": self._named(nodename, real),
            "dcgm-exporter at the same address": by_dcgm,
            "address": self._named(ADDRESS, unnamed, EXACT),
        }
        return aggregate("topk", targets, self.firsts(self.node_host_candidates(candidates)), param=1)

    def node_host_candidates(self, candidates: dict[str, Expr]) -> list[Expr]:
        """A node_exporter target's host candidates, in the order they are tried (a seam for the mutation tests)."""
        return list(candidates.values())

    def gpu_hosts(self) -> Expr:
        """Each dcgm-exporter target's host: the first candidate that names a known host, else its own name."""
        targets, labels = catalog.TARGET_LABELS, catalog.DCGM_TARGET_LABELS
        # A node's name can change (a dcgm-exporter spelling it exactly appears or goes): only its newest counts.
        hosts = aggregate("group", (HOST_LABEL,), current(catalog.NODE_EXPORTER_HOST))
        collisions = catalog.NODE_HOST_COLLISIONS.select()

        def if_known(expr: Expr, known: Expr) -> Expr:
            return Paren(expr.and_(known, on((HOST_LABEL,)), stacked=True))

        unique = Paren(hosts.unless(collisions, on((HOST_LABEL,))))
        nodes_by_address = aggregate("topk", (ADDRESS,), self._address(current(catalog.NODE_EXPORTER_HOST)), param=1)
        at_address = join(
            self._address(aggregate("group", targets, labels.select())),
            "*",
            on((ADDRESS,), group_left=(HOST_LABEL,)),
            nodes_by_address,
        )
        candidates = {
            **{f"{k} exactly": if_known(v, hosts) for k, v in self.gpu_label_names(EXACT).items()},
            **{k: if_known(v, unique) for k, v in self.gpu_label_names().items()},
            "node_exporter at the same address": aggregate("group", (*targets, HOST_LABEL), at_address),
            "own label": Paren(self.own_names().unless(collisions, on((HOST_LABEL,)), stacked=True)),
            "own label exactly": self.own_names(EXACT),
        }
        return aggregate("topk", targets, self.firsts(self.host_candidates(candidates)), param=1)

    def host_candidates(self, candidates: dict[str, Expr]) -> list[Expr]:
        """A GPU exporter target's host candidates, in the order they are tried (a seam for the mutation tests)."""
        return list(candidates.values())

    @staticmethod
    def firsts(candidates: list[Expr]) -> Expr:
        """Per scrape target, the first candidate that has a series for it (``or on (job, instance)``)."""
        return any_of(candidates, matching=on(catalog.TARGET_LABELS))


def with_host(expr: Expr, host_map: Series) -> Expr:
    """``expr``, one series per scrape target, with the host its target's newest entry in ``host_map`` names."""
    return join(expr, "*", on(catalog.TARGET_LABELS, group_left=(HOST_LABEL,)), current(host_map))


def current(host_map: Series) -> Expr:
    """Each target's newest host, valued 1 for a join. Where a target's host changed and no stale
    marker ended the old entry (a Prometheus restart, a backfill), both lie within the lookback for
    5 minutes, and a join on two would fail for every GPU of the rule."""
    newest = aggregate("topk", catalog.TARGET_LABELS, call("timestamp", host_map.select()), param=1)
    return newest * 0 + 1
