"""Recording rules: the catalog's series, expanded into PromQL for one configuration.

Every per-GPU series is built in three steps:

1. normalise each raw metric: scrape selector, unit conversion to the base unit, host label
   copied from ``Hostname`` where an exporter still uses it, and ``max by`` the GPU's
   identity (which also drops duplicate scrapes of one GPU);
2. combine the exporter generations and the catalog's fallbacks with ``or``;
3. attribute the result to executions, as the configured attribution mode says.

Host series are computed per node_exporter target, named by ``node_uname_info``'s nodename,
and joined to the hosts each execution holds GPUs on (``catalog.NODE_GPU_COUNT``): the side
with one row per host is the "one" side, so several executions on one host never collide.
"""

from __future__ import annotations

from gpu_execution_pack.config import Config
from gpu_execution_pack.promql import (
    Expr,
    Paren,
    aggregate,
    any_of,
    call,
    join,
    label_copy,
    label_set,
    on,
    selector,
    substitute,
)
from gpu_execution_pack.rules import catalog
from gpu_execution_pack.rules.catalog import EXECUTION_LABEL, GPU_IDENTITY_LABELS, Formula, Series, Signal
from gpu_execution_pack.rules.groups import RecordingRule, RuleGroup

GROUP_PREFIX = "gpu-execution-pack"


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

    def attribute(self, expr: Expr) -> Expr:
        """Turn a normalised per-GPU expression into one labelled with ``execution_id``."""
        final = self.final_labels
        if self.mode == "label":
            if self.source == EXECUTION_LABEL:
                return expr
            return aggregate("max", final, label_copy(Paren(expr), EXECUTION_LABEL, self.source))
        a = self.cfg.attribution
        if self.mode == "mapping":
            mapping: Expr = selector(a.mapping_metric, f'{self.source}!=""', a.mapping_selector)
            if self.source != EXECUTION_LABEL:
                mapping = label_copy(mapping, EXECUTION_LABEL, self.source)
            owners = aggregate("group", (EXECUTION_LABEL, *self.tenant, *catalog.GPU_JOIN_LABELS), mapping)
            copied = [lbl for lbl in GPU_IDENTITY_LABELS if lbl not in catalog.GPU_JOIN_LABELS]
            return join(owners, "*", on(catalog.GPU_JOIN_LABELS, group_left=copied), expr)
        # kubernetes: the pod-labels side is made unique per pod, as kubernetes-mixin does.
        pods: Expr = label_copy(
            selector(a.kubernetes_metric, f'{self.source}!=""', a.kubernetes_selector), EXECUTION_LABEL, self.source
        )
        for target, source in catalog.KUBERNETES_LABEL_ALIASES:
            pods = label_copy(pods, target, source)
        keys = catalog.KUBERNETES_JOIN_LABELS
        owners = aggregate("topk", keys, aggregate("max", (*keys, EXECUTION_LABEL), pods), param=1)
        return aggregate("max", final, join(expr, "*", on(keys, group_left=(EXECUTION_LABEL,)), owners))


class RuleBuilder:
    """Expands catalog series into recording rules for one configuration."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.attribution = Attribution(cfg)

    def unit_of(self, raw: catalog.RawMetric) -> catalog.Unit:
        """The raw metric's unit; the violation counters' unit is a config choice."""
        if raw.unit == catalog.VIOLATION_UNIT:
            return catalog.UNITS[catalog.VIOLATION_UNITS[self.cfg.dcgm.violation_counter_unit]]
        return catalog.UNITS[raw.unit]

    def read(self, raw: catalog.RawMetric, *matchers: str) -> Expr:
        """A raw metric selected and in its base unit; counters are read as rates over rate_window."""
        expr: Expr = selector(raw.name, raw.matchers, *matchers)
        if raw.type == "counter":
            expr = expr.range(self.cfg.rate_window)
            expr = call("rate", expr)
        return self.unit_of(raw).to_base(expr)

    # -- per-GPU ---------------------------------------------------------------------------
    def normalised(self, signal: Signal, where: str) -> Expr:
        """One signal in its base unit, one series per GPU identity, newest exporter name first."""
        branches = []
        for raw in signal.raws_for(self.cfg.dcgm.generations):
            expr = self.read(raw, self.cfg.selectors.dcgm, self.attribution.raw_matchers, where)
            for target, source in self.attribution.label_aliases:
                expr = label_copy(expr, target, source)
            branches.append(aggregate("max", self.attribution.keep_labels, expr))
        if not branches:
            raise ValueError(f"signal {signal.key}: no raw metric for generations {self.cfg.dcgm.generations}")
        return any_of(branches)

    def gpu_formula(self, formula: Formula) -> Expr | None:
        """A formula with its signals expanded; None if no configured generation emits one of them."""
        signals = [catalog.SIGNALS[key] for key in formula.signals]
        if any(not s.raws_for(self.cfg.dcgm.generations) for s in signals):
            return None
        return substitute(formula.expr, lambda key: self.normalised(catalog.SIGNALS[key], formula.where))

    def gpu_rule(self, series: Series) -> RecordingRule:
        """Formulas over signals are attributed together; those over recorded series follow as written."""
        from_signals = [f for f in series.formulas if f.signals]
        from_recorded = [f.expr for f in series.formulas if not f.signals]
        alternatives = [e for e in (self.gpu_formula(f) for f in from_signals) if e is not None]
        if len(alternatives) > 1:  # each formula's generations grouped, for the reader
            alternatives = [Paren(a) for a in alternatives]
        attributed = [self.attribution.attribute(any_of(alternatives))] if alternatives else []
        if attributed and from_recorded:
            attributed = [Paren(attributed[0])]
        return RecordingRule(series.name, any_of(attributed + from_recorded))

    # -- per-host --------------------------------------------------------------------------
    def node_rule(self, series: Series) -> RecordingRule:
        formula = series.formulas[0]
        per_target = substitute(
            formula.expr, lambda key: self.read(catalog.SIGNALS[key].raws[0], self.cfg.selectors.node)
        )
        targets = catalog.NODE_TARGET_LABELS
        info = aggregate(
            "max", (*targets, catalog.NODE_NAME_LABEL), selector(catalog.NODE_INFO_METRIC, self.cfg.selectors.node)
        )
        named = join(per_target, "*", on(targets, group_left=(catalog.NODE_NAME_LABEL,)), info)
        per_host = aggregate(
            "max",
            (catalog.HOST_LABEL,),
            label_copy(named, catalog.HOST_LABEL, catalog.NODE_NAME_LABEL, self.cfg.node.nodename_regex),
        )
        hosts = aggregate("group", catalog.NODE_LABELS, catalog.NODE_GPU_COUNT.select())
        return RecordingRule(series.name, join(hosts, "*", on((catalog.HOST_LABEL,), group_left=()), per_host))

    # -- cost ------------------------------------------------------------------------------
    def price_rule(self) -> RecordingRule:
        """Listed models at their price, and every other model in use at the default price."""
        d = self.cfg.dashboards
        model = catalog.MODEL_LABEL
        listed = [label_set(call("vector", price), model, name) for name, price in d.price_per_gpu_hour]
        others = aggregate("group", (model,), catalog.MODEL_GPU_COUNT.select()) * 0 + d.default_price_per_gpu_hour
        return RecordingRule(catalog.PRICE.name, any_of([*listed, others]))

    # -- groups ----------------------------------------------------------------------------
    def groups(self) -> list[RuleGroup]:
        """The recording rule groups, in dependency order."""
        interval, derived = self.cfg.rule_interval, self.cfg.derived_interval
        return [
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
                    verbatim_rule(catalog.NODE_GPU_COUNT),
                    *(self.node_rule(s) for s in catalog.NODE_SERIES),
                    *(verbatim_rule(s) for s in catalog.NODE_DERIVED_SERIES),
                ),
                interval,
            ),
            RuleGroup(
                f"{GROUP_PREFIX}.execution",
                "execution",
                tuple(verbatim_rule(s) for s in catalog.EXECUTION_SERIES),
                derived,
            ),
            RuleGroup(
                f"{GROUP_PREFIX}.cost",
                "cost",
                (*(verbatim_rule(s) for s in catalog.COST_SERIES), self.price_rule()),
                derived,
            ),
        ]


def verbatim_rule(series: Series) -> RecordingRule:
    """A series whose formula reads recorded series only: its expression is the formula as written."""
    return RecordingRule(series.name, series.formulas[0].expr)


def recording_groups(cfg: Config) -> list[RuleGroup]:
    """The recording rule groups for ``cfg``."""
    return RuleBuilder(cfg).groups()
