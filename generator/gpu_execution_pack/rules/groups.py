"""Rules and rule groups as the pack builds them, before they are written to files.

A rule's expression is a PromQL tree (``tree``; ``tree.metric_names()`` the metrics it reads); ``expr`` is its text.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpu_execution_pack.promql import Expr, join, on, partitioned, render

# Mimir's ruler refuses larger groups by default (ruler_max_rules_per_rule_group; Thanos Ruler sets no such limit).
MAX_RULES_PER_GROUP = 20


class _Expression:
    """What every rule has: its expression as a tree."""

    tree: Expr

    @property
    def expr(self) -> str:
        """The expression as written to the rule file."""
        return render(self.tree)


@dataclass(frozen=True)
class RecordingRule(_Expression):
    """A recording rule: the series it records, its expression and the labels the rule sets on it."""

    record: str
    tree: Expr
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class AlertRule(_Expression):
    """An alert rule with the pack's conventions: severity, static summary, templated description, runbook."""

    alert: str
    tree: Expr
    severity: str
    summary: str
    description: str
    runbook_url: str
    for_: str = ""


def recorded_reads(rule: RecordingRule, records: set[str]) -> set[str]:
    """Which of ``records`` (recorded series' names) ``rule`` reads, its own aside (a rule may read its earlier
    samples)."""
    return (rule.tree.metric_names() & records) - {rule.record}


def in_dependency_order(rules: tuple[RecordingRule, ...]) -> tuple[RecordingRule, ...]:
    """``rules`` in their order but for each moved after those of them whose series it reads.

    A group evaluates its rules one after another at the same instant, so a rule reads what an earlier one
    recorded at this evaluation, and a later one's sample of the evaluation before."""
    recorded = {r.record for r in rules}
    placed: set[str] = set()
    ordered: list[RecordingRule] = []
    waiting = list(rules)
    while waiting:
        ready = next((r for r in waiting if recorded_reads(r, recorded) <= placed), None)
        if ready is None:
            raise ValueError(f"rules that read each other's series: {', '.join(r.record for r in waiting)}")
        ordered.append(ready)
        placed.add(ready.record)
        waiting.remove(ready)
    return tuple(ordered)


@dataclass(frozen=True)
class RuleGroup:
    """A rule group and the file (``<file>.rules.yml``) it is written to."""

    name: str
    file: str
    rules: tuple[RecordingRule | AlertRule, ...]
    interval: str = ""

    def __post_init__(self) -> None:
        if len(self.rules) > MAX_RULES_PER_GROUP:
            raise ValueError(f"group {self.name} has {len(self.rules)} rules; keep it within {MAX_RULES_PER_GROUP}")

    def partitioned(self, label: str) -> RuleGroup:
        """The group with every rule computed apart for each value of ``label`` (itself where it is empty)."""
        if not label:
            return self
        return replace(self, rules=tuple(replace(r, tree=partitioned(r.tree, label)) for r in self.rules))

    def guarded(self, condition: Expr) -> RuleGroup:
        """The group with each recording rule recorded only while ``condition`` has a sample
        (``<expr> and on () <condition>``); alerts unchanged."""
        return replace(
            self,
            rules=tuple(
                replace(r, tree=join(r.tree, "and", on(()), condition)) if isinstance(r, RecordingRule) else r
                for r in self.rules
            ),
        )
