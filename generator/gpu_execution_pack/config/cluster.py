"""The cluster scope: what ``cluster_label`` means to everything that reads one cluster's series.

Where ``cluster_label`` is set, the store holds several clusters whose execution ids and host names
repeat, so every query, document, suite and description must say which cluster it is of. Every
reader asks :class:`ClusterScope` (``cluster_scope(cfg)``) instead of branching on the label itself:
the matcher of one cluster, the labels a cluster's series carry, the label that leads a ``by`` or
``on`` clause, and the words a parameter or description uses. ``tests/test_structure.py`` fails on
a read of ``cfg.cluster_label`` outside the config package, so a new reader cannot forget it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_execution_pack.config.schema import Config
from gpu_execution_pack.promql import Expr, Matcher, match, partitioned

# The name a reader takes one cluster by, whatever the label is called: the endpoint's and report's
# query parameter, the documents' key, and the dashboards' Grafana variable (links carry var-cluster).
CLUSTER = "cluster"


@dataclass(frozen=True)
class ClusterScope:
    """One config's clusters: ``label`` names the cluster on every series; empty, there is one cluster."""

    label: str = ""

    @property
    def enabled(self) -> bool:
        """Whether the store holds several clusters (a cluster label is configured)."""
        return bool(self.label)

    @property
    def partition(self) -> tuple[str, ...]:
        """The labels a per-cluster ``by`` or ``on`` clause leads with: the cluster label, or none."""
        return (self.label,) if self.label else ()

    def matchers(self, value: str | None) -> tuple[Matcher, ...]:
        """The matcher of the cluster ``value`` (a name, a Grafana variable, a placeholder); none without a
        cluster label or without a value (every cluster)."""
        return (match(self.label, value),) if self.label and value is not None else ()

    def labels(self, value: str) -> dict[str, str]:
        """The cluster label and ``value`` that every series of that cluster carries; none without a label."""
        return {self.label: value} if self.label else {}

    def of(self, metric: dict[str, str]) -> str:
        """The cluster a result's labels name ("" without a cluster label)."""
        return metric.get(self.label, "") if self.label else ""

    def partitioned(self, expr: Expr) -> Expr:
        """``expr`` computed apart for each cluster (``promql.partitioned``); unchanged without a label."""
        return partitioned(expr, self.label)

    def named(self, value: str) -> str:
        """Words naming the cluster ``value`` after a thing (" in cluster eu-1"); none without a label."""
        return f" in cluster {value}" if self.label else ""

    def phrase(self, what: str) -> str:
        """``what`` (a cluster, as a parameter's description or error names it) and the label it is read from:
        "a cluster's name (cluster label)"."""
        return f"{what} ({self.label} label)"


# A config without a cluster label: one cluster, nothing added.
ONE_CLUSTER = ClusterScope()


def cluster_scope(cfg: Config) -> ClusterScope:
    """The cluster scope of ``cfg``."""
    return ClusterScope(cfg.cluster_label)
