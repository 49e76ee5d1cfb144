"""Recording rules: the catalog's series, expanded into PromQL for one configuration.

Every per-GPU series is built in three steps:

1. normalise each raw metric: scrape selector, unit conversion to the base unit, host label
   copied from ``Hostname`` where an exporter still uses it, and ``max by`` the GPU's
   identity (which also drops duplicate scrapes of one GPU);
2. combine the exporter generations and the catalog's fallbacks with ``or``;
3. attribute the result to executions, as the configured attribution mode says.

Host series are computed per node_exporter target, named by ``node_uname_info``'s nodename,
and joined to the hosts each execution holds GPUs on (``execution_node:gpu_count``): the side
with one row per host is the "one" side, so several executions on one host never collide.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from generator import catalog
from generator.alerts import AlertRule
from generator.catalog import EXECUTION_LABEL, GPU_IDENTITY_LABELS, Formula, Series, Signal
from generator.config import Config
from generator.promql import aggregate, any_of, indent, join, label_copy, label_list, parens, selector

GROUP_PREFIX = "gpu-execution-pack"
MAX_RULES_PER_GROUP = 20  # Mimir's ruler default


@dataclass(frozen=True)
class RecordingRule:
    record: str
    expr: str


@dataclass(frozen=True)
class RuleGroup:
    """A rule group and the file (``<file>.rules.yml``) it is written to."""

    name: str
    file: str
    rules: tuple[RecordingRule | AlertRule, ...]
    interval: str = ""


class Attribution:
    """How one configuration ties normalised GPU series to executions."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.mode = cfg.attribution.mode
        self.source = cfg.execution_label
        if self.mode == "kubernetes":
            self.source = catalog.KUBE_POD_LABEL_PREFIX + cfg.execution_label

    @property
    def tenant(self) -> tuple[str, ...]:
        """The tenant label the endpoint scopes keys by, kept on every per-GPU series where the source has it."""
        return (self.cfg.api.tenant_label,)

    @property
    def final_labels(self) -> tuple[str, ...]:
        return (EXECUTION_LABEL, *self.tenant, *GPU_IDENTITY_LABELS)

    @property
    def keep_labels(self) -> tuple[str, ...]:
        """Labels a normalised raw series keeps: the GPU's identity and what the join needs."""
        if self.mode == "label":
            return (self.source, *self.tenant, *GPU_IDENTITY_LABELS)
        if self.mode == "kubernetes":
            keys = catalog.KUBERNETES_JOIN_LABELS
            return GPU_IDENTITY_LABELS + keys + tuple(t for t in self.tenant if t not in keys)
        return GPU_IDENTITY_LABELS

    @property
    def raw_matchers(self) -> str:
        """In label mode, a GPU without an execution label yields no series."""
        return f'{self.source}!=""' if self.mode == "label" else ""

    @property
    def label_aliases(self) -> tuple[tuple[str, str], ...]:
        aliases = catalog.DCGM_LABEL_ALIASES
        if self.mode == "kubernetes":
            aliases += catalog.KUBERNETES_LABEL_ALIASES
        return aliases

    def attribute(self, expr: str) -> str:
        """Turn a normalised per-GPU expression into one labelled with ``execution_id``."""
        final = self.final_labels
        if self.mode == "label":
            if self.source == EXECUTION_LABEL:
                return expr
            return aggregate("max", final, label_copy(parens(expr), EXECUTION_LABEL, self.source))
        if self.mode == "mapping":
            a = self.cfg.attribution
            mapping = selector(a.mapping_metric, f'{self.source}!=""', a.mapping_selector)
            if self.source != EXECUTION_LABEL:
                mapping = label_copy(mapping, EXECUTION_LABEL, self.source)
            owners = aggregate("group", (EXECUTION_LABEL, *self.tenant, *catalog.GPU_JOIN_LABELS), mapping)
            copied = [lbl for lbl in GPU_IDENTITY_LABELS if lbl not in catalog.GPU_JOIN_LABELS]
            matching = f"* on ({label_list(catalog.GPU_JOIN_LABELS)}) group_left ({label_list(copied)})"
            return join(owners, matching, parens(expr))
        # kubernetes: the pod-labels side is made unique per pod, as kubernetes-mixin does.
        a = self.cfg.attribution
        pods = label_copy(
            selector(a.kubernetes_metric, f'{self.source}!=""', a.kubernetes_selector), EXECUTION_LABEL, self.source
        )
        for target, source in catalog.KUBERNETES_LABEL_ALIASES:
            pods = label_copy(pods, target, source)
        keys = catalog.KUBERNETES_JOIN_LABELS
        owners = f"topk by ({label_list(keys)}) (1,\n{indent(aggregate('max', (*keys, EXECUTION_LABEL), pods))}\n)"
        matching = f"* on ({label_list(keys)}) group_left ({EXECUTION_LABEL})"
        return aggregate("max", final, join(parens(expr), matching, owners))


class RuleBuilder:
    """Expands catalog series into recording rules for one configuration."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.attribution = Attribution(cfg)

    # -- per-GPU ---------------------------------------------------------------------------
    def normalised(self, signal: Signal, where: str) -> str:
        """One signal in its base unit, one series per GPU identity, newest exporter name first."""
        branches = []
        for raw in signal.raws_for(self.cfg.dcgm.generations):
            expr = selector(raw.name, raw.matchers, self.cfg.selectors.dcgm, self.attribution.raw_matchers, where)
            if raw.type == "counter":
                expr = f"rate({expr}[{self.cfg.rate_window}])"
            expr = catalog.UNITS[self.unit_of(raw)].to_base(expr)
            for target, source in self.attribution.label_aliases:
                expr = label_copy(expr, target, source)
            branches.append(aggregate("max", self.attribution.keep_labels, expr))
        if not branches:
            raise ValueError(f"signal {signal.key}: no raw metric for generations {self.cfg.dcgm.generations}")
        return any_of(branches)

    def unit_of(self, raw: catalog.RawMetric) -> str:
        """The raw metric's unit; the violation counters' unit is a config choice."""
        if raw.unit == catalog.VIOLATION_UNIT:
            return catalog.VIOLATION_UNITS[self.cfg.dcgm.violation_counter_unit]
        return raw.unit

    def gpu_formula(self, formula: Formula) -> str | None:
        """A formula with its signals expanded; None if no configured generation emits one of them."""
        values = {}
        for key in catalog.signal_keys(formula.template):
            signal = catalog.SIGNALS[key]
            if not signal.raws_for(self.cfg.dcgm.generations):
                return None
            expr = self.normalised(signal, formula.where)
            values[key] = expr if formula.template == f"{{{key}}}" else parens(expr)
        return _fill(formula.template, values)

    def gpu_rule(self, series: Series) -> RecordingRule:
        """Formulas over signals are attributed together; those over recorded series follow as written."""
        from_signals = [f for f in series.formulas if catalog.signal_keys(f.template)]
        from_recorded = [f.template for f in series.formulas if not catalog.signal_keys(f.template)]
        alternatives = [e for e in (self.gpu_formula(f) for f in from_signals) if e is not None]
        if len(alternatives) > 1:
            alternatives = [parens(a) if "\n" in a else a for a in alternatives]
        attributed = [self.attribution.attribute(any_of(alternatives))] if alternatives else []
        if attributed and from_recorded and "\n" in attributed[0]:
            attributed = [parens(attributed[0])]
        return RecordingRule(series.record, any_of(attributed + from_recorded))

    # -- per-host --------------------------------------------------------------------------
    def node_target_expr(self, formula: Formula) -> str:
        values = {"rate_window": self.cfg.rate_window}
        for key in catalog.signal_keys(formula.template):
            raw = catalog.SIGNALS[key].raws[0]
            values[key] = selector(raw.name, raw.matchers, self.cfg.selectors.node)
        return _fill(formula.template, values)

    def node_rule(self, series: Series) -> RecordingRule:
        formula = series.formulas[0]
        per_target = self.node_target_expr(formula)
        if formula.template != f"{{{catalog.signal_keys(formula.template)[0]}}}":
            per_target = parens(per_target)
        targets = catalog.NODE_TARGET_LABELS
        info = aggregate(
            "max", (*targets, catalog.NODE_NAME_LABEL), selector(catalog.NODE_INFO_METRIC, self.cfg.selectors.node)
        )
        named = join(per_target, f"* on ({label_list(targets)}) group_left ({catalog.NODE_NAME_LABEL})", info)
        per_host = aggregate(
            "max",
            (catalog.HOST_LABEL,),
            label_copy(named, catalog.HOST_LABEL, catalog.NODE_NAME_LABEL, self.cfg.node.nodename_regex),
        )
        hosts = aggregate("group", (EXECUTION_LABEL, catalog.HOST_LABEL), catalog.NODE_PRESENCE_SERIES.record)
        return RecordingRule(series.record, join(hosts, f"* on ({catalog.HOST_LABEL}) group_left ()", per_host))

    # -- cost ------------------------------------------------------------------------------
    def price_rule(self) -> RecordingRule:
        """Listed models at their price, and every other model in use at the default price."""
        d = self.cfg.dashboards
        model = catalog.MODEL_LABEL
        listed = [
            f'label_replace(vector({price:g}), "{model}", "{_escape(name)}", "", "")'
            for name, price in d.price_per_gpu_hour
        ]
        others = f"group by ({model}) ({catalog.COST_SERIES[0].record}) * 0 + {d.default_price_per_gpu_hour:g}"
        return RecordingRule(catalog.PRICE_SERIES, any_of([*listed, others]))

    # -- groups ----------------------------------------------------------------------------
    def groups(self) -> list[RuleGroup]:
        """The recording rule groups, in dependency order."""
        interval, derived = self.cfg.rule_interval, self.cfg.derived_interval
        verbatim = [catalog.NODE_PRESENCE_SERIES, *list(catalog.EXECUTION_SERIES)]
        by_record = {s.record: verbatim_rule(s) for s in verbatim}
        groups = [
            RuleGroup(
                f"{GROUP_PREFIX}.execution_gpu",
                "execution-gpu",
                tuple(self.gpu_rule(s) for s in catalog.GPU_SERIES),
                interval,
            ),
            # Alert inputs, after the series they read; same file as the per-GPU series.
            RuleGroup(
                f"{GROUP_PREFIX}.execution_gpu_health",
                "execution-gpu",
                tuple(self.gpu_rule(s) for s in catalog.GPU_HEALTH_SERIES),
                derived,
            ),
            RuleGroup(
                f"{GROUP_PREFIX}.execution_node",
                "execution-node",
                (
                    by_record[catalog.NODE_PRESENCE_SERIES.record],
                    *(self.node_rule(s) for s in catalog.NODE_SERIES),
                    *(verbatim_rule(s) for s in catalog.NODE_DERIVED_SERIES),
                ),
                interval,
            ),
            RuleGroup(
                f"{GROUP_PREFIX}.execution",
                "execution",
                tuple(by_record[s.record] for s in catalog.EXECUTION_SERIES),
                derived,
            ),
        ]
        groups.append(
            RuleGroup(
                f"{GROUP_PREFIX}.cost",
                "cost",
                (*(verbatim_rule(s) for s in catalog.COST_SERIES), self.price_rule()),
                derived,
            )
        )
        for g in groups:
            if len(g.rules) > MAX_RULES_PER_GROUP:
                raise ValueError(f"group {g.name} has {len(g.rules)} rules; keep it within {MAX_RULES_PER_GROUP}")
        return groups


def verbatim_rule(series: Series) -> RecordingRule:
    """A series whose formula reads recorded series only: its expression is the template as written."""
    return RecordingRule(series.record, series.formulas[0].template)


def _escape(value: str) -> str:
    """A label value as a PromQL double-quoted string's contents."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _fill(template: str, values: dict[str, str]) -> str:
    """Substitute placeholders without touching PromQL braces elsewhere in the template."""
    out = []
    for literal, name, _, _ in string.Formatter().parse(template):
        out.append(literal)
        if name is not None:
            out.append(values[name])
    return "".join(out)


def recording_groups(cfg: Config) -> list[RuleGroup]:
    """The recording rule groups for ``cfg``."""
    return RuleBuilder(cfg).groups()
