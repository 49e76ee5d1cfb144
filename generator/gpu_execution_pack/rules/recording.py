"""Recording rules: the catalog's series, expanded into PromQL for one configuration.

First the ``hosts`` group resolves which host every dcgm-exporter and node_exporter target is on
(``rules.hosts``, with the per-target node counter rates). Then every per-GPU series is built in four steps:

1. read each raw metric: scrape selector, unit conversion to the base unit (counters as rates);
   in the mapping and kubernetes modes also ``max by`` the GPU's identity, as their joins need;
2. combine the exporter generations and the catalog's fallbacks with ``or``;
3. attribute the result to executions, as the configured attribution mode says;
4. name the host from its target's host map (``hosts.with_host``), and ``max by`` the final labels (which also drops
   duplicate scrapes of one GPU).

Host series are computed per node_exporter target, named by its host map, and joined to the
hosts each execution holds GPUs on (``catalog.NODE_GPU_COUNT``): the side
with one row per host is the "one" side, so several executions on one host never collide.
"""

from __future__ import annotations

from gpu_execution_pack import catalog
from gpu_execution_pack.catalog import (
    EXECUTION_LABEL,
    GPU_IDENTITY_LABELS,
    HOST_LABEL,
    Formula,
    Series,
    Signal,
)
from gpu_execution_pack.config import Config
from gpu_execution_pack.promql import (
    Expr,
    Matcher,
    Paren,
    Placeholder,
    Selector,
    aggregate,
    alongside,
    any_of,
    call,
    join,
    label_copy,
    label_set,
    labelled,
    match,
    on,
    parse_duration_seconds,
    partitioned,
    selector,
    substitute,
    transform,
)
from gpu_execution_pack.rules.amd import AmdRules, vendor_matchers
from gpu_execution_pack.rules.groups import RecordingRule, RuleGroup, in_dependency_order
from gpu_execution_pack.rules.hosts import HostIdentity, from_exported, with_host

# The recording groups' names, in the order they are evaluated (``RuleBuilder.groups`` says what each holds).
GROUP_PREFIX = "gpu-execution-pack"
AMD_GROUP = f"{GROUP_PREFIX}.amd"  # only where vendors has amd
HOSTS_GROUP = f"{GROUP_PREFIX}.hosts"  # the host maps, at node.host_map_interval
HOST_RATES_GROUP = f"{GROUP_PREFIX}.host_rates"  # the host CPU rate, at node.cpu_rate_interval or rule_interval
EXECUTION_GPU_GROUP = f"{GROUP_PREFIX}.execution_gpu"
ACTIVITY_GROUP = f"{GROUP_PREFIX}.execution_gpu_activity"
HEALTH_GROUP = f"{GROUP_PREFIX}.execution_gpu_health"
CONDITIONS_GROUP = f"{GROUP_PREFIX}.execution_gpu_conditions"
EXECUTION_NODE_GROUP = f"{GROUP_PREFIX}.execution_node"
EXECUTION_GROUP = f"{GROUP_PREFIX}.execution"
COST_GROUP = f"{GROUP_PREFIX}.cost"


class Attribution:
    """How one configuration ties normalised GPU series to executions, and names their host."""

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
    def identity(self) -> tuple[str, ...]:
        """A GPU's identity before its host is named: its labels less the host (unless the scrape named it),
        and the target that exports it."""
        named = (
            GPU_IDENTITY_LABELS
            if self.cfg.node.at_scrape
            else [label for label in GPU_IDENTITY_LABELS if label != HOST_LABEL]
        )
        return (*named, *catalog.TARGET_LABELS)

    @property
    def keep_labels(self) -> tuple[str, ...]:
        """Labels a normalised raw series keeps: the GPU's identity and what the join needs."""
        if self.mode == "label":
            return (self.source, *self.tenant, *self.identity)
        if self.mode == "kubernetes":
            keys = catalog.KUBERNETES_JOIN_LABELS
            return self.identity + keys + tuple(t for t in self.tenant if t not in keys)
        return self.identity

    @property
    def raw_matchers(self) -> tuple[Matcher, ...]:
        """In label mode, a GPU without an execution label yields no series."""
        return (labelled(self.source),) if self.mode == "label" else ()

    @property
    def label_aliases(self) -> tuple[tuple[str, str], ...]:
        """Workload labels read from ``exported_<label>`` where present: the tenant always, the pod join keys too."""
        if self.mode == "mapping":  # the tenant comes with the mapping metric
            return ()
        labels = dict.fromkeys(self.tenant)
        if self.mode == "kubernetes":
            labels |= dict.fromkeys(catalog.KUBERNETES_JOIN_LABELS)
        return tuple((label, catalog.EXPORTED_PREFIX + label) for label in labels)

    @property
    def per_branch(self) -> bool:
        """Whether each raw metric is reduced to the GPU's identity before formulas and joins combine them.

        The joins of mapping and kubernetes mode need one series per GPU on their side. Label mode
        joins only the host map, whose side is one series per target, so the one ``max by`` in
        ``named`` does it all: a pass over every GPU less per raw metric, at fleet scale the most
        expensive thing a rule does (docs/benchmarks.md).
        """
        return self.mode != "label"

    def attribute(self, expr: Expr) -> Expr:
        """A normalised per-GPU expression labelled with the execution label (its host still to be named)."""
        if self.mode == "label":
            if self.source == EXECUTION_LABEL:
                return expr
            return label_copy(Paren(expr), EXECUTION_LABEL, self.source)
        a = self.cfg.attribution
        if self.mode == "mapping":
            mapping: Expr = selector(a.mapping_metric, labelled(self.source), *a.mapping_matchers)
            if self.source != EXECUTION_LABEL:
                mapping = label_copy(mapping, EXECUTION_LABEL, self.source)
            mapping = from_exported(mapping, self.tenant)  # the scheduler exporter may sit behind a ServiceMonitor too
            owners = aggregate("group", (EXECUTION_LABEL, *self.tenant, *catalog.GPU_JOIN_LABELS), mapping)
            copied = [label for label in self.identity if label not in catalog.GPU_JOIN_LABELS]
            return join(owners, "*", on(catalog.GPU_JOIN_LABELS, group_left=copied), expr)
        # kubernetes: the pod-labels side is made unique per pod, as kubernetes-mixin does.
        pods: Expr = label_copy(
            selector(a.kubernetes_metric, labelled(self.source), *a.kubernetes_matchers), EXECUTION_LABEL, self.source
        )
        pods = from_exported(pods, catalog.KUBERNETES_JOIN_LABELS)
        keys = catalog.KUBERNETES_JOIN_LABELS
        owners = aggregate("topk", keys, aggregate("max", (*keys, EXECUTION_LABEL), pods), param=1)
        return join(expr, "*", on(keys, group_left=(EXECUTION_LABEL,)), owners)

    def named(self, attributed: Expr) -> Expr:
        """Attributed series with their host named from the exporter target's host map, one per GPU identity.

        The ``max by`` also drops duplicate scrapes of one GPU by two targets on the same host. Where the
        scrape named the host, the series carry it already and nothing is joined.
        """
        hosts: Expr = attributed
        if not self.cfg.node.at_scrape:
            hosts = with_host(attributed, catalog.GPU_EXPORTER_HOST)
        if not self.per_branch:  # the workload's labels, once per rule rather than per raw metric
            for target, source in self.label_aliases:
                hosts = label_copy(hosts, target, source)
        return aggregate("max", self.final_labels, hosts)


class RuleBuilder:
    """Expands catalog series into recording rules for one configuration."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.attribution = Attribution(cfg)
        self.amd = AmdRules(cfg, self.rate)
        self.hosts = HostIdentity(cfg)

    def raws(self, signal: Signal) -> tuple[catalog.RawMetric, ...]:
        """The raw metrics of ``signal`` the configured generations and vendors emit (AMD's recorded by its group)."""
        return signal.raws_for(self.cfg.dcgm.generations, self.cfg.vendors)

    def unit_of(self, raw: catalog.RawMetric) -> catalog.Unit:
        """The raw metric's unit; the violation counters' unit is a config choice."""
        if raw.unit == catalog.VIOLATION_UNIT:
            return catalog.UNITS[catalog.VIOLATION_UNITS[self.cfg.dcgm.violation_counter_unit]]
        return catalog.UNITS[raw.unit]

    def read(self, raw: catalog.RawMetric, *matchers: Matcher, cumulative: bool = False) -> Expr:
        """A raw metric selected and in its base unit; counters are read as rates (``rate``) unless
        ``cumulative`` (their running total is recorded)."""
        expr: Expr = raw.select(*matchers)
        if raw.type == "counter" and not cumulative:
            expr = self.rate(expr)
        return self.unit_of(raw).to_base(expr)

    def rate(self, counter: Selector) -> Expr:
        """A counter's per-second rate over rate_window, else over rate_window_fallback where the first
        holds fewer than two samples (a 1m scrape in a 1m window).

        A window in which the counter went down yields nothing: old node_exporters let idle-seconds
        jump back a little, which rate() reads as a reset worth the whole counter.
        """
        windows = dict.fromkeys((self.cfg.rate_window, self.cfg.rate_window_fallback))
        return any_of(
            [Paren(call("rate", counter.range(w)).unless(call("resets", counter.range(w)).gt(0))) for w in windows]
        )

    # -- per-GPU ---------------------------------------------------------------------------
    def normalised(self, signal: Signal, where: tuple[Matcher, ...]) -> Expr:
        """One signal in its base unit, one series per GPU identity, newest exporter name first."""
        branches = []
        matchers = (*self.attribution.raw_matchers, *where)
        for raw in self.raws(signal):
            expr = self.read(raw, *vendor_matchers(self.cfg, raw), *matchers, cumulative=signal.cumulative)
            if self.attribution.per_branch:
                for target, source in self.attribution.label_aliases:
                    expr = label_copy(expr, target, source)
                expr = aggregate("max", self.attribution.keep_labels, expr)
            branches.append(expr)
        if not branches:
            raise ValueError(f"signal {signal.key}: no raw metric for generations {self.cfg.dcgm.generations}")
        return any_of(branches)

    def device_wide(self, signal: Signal, where: tuple[Matcher, ...]) -> Expr:
        """A signal for the whole GPU (``catalog.device``), on each row ``normalised`` gives: the highest value
        of every series of the GPU's identity, those no execution's labels are on included (the device's
        own series beside per-pod values under KUBERNETES_VIRTUAL_GPUS)."""
        identity = self.attribution.identity
        whole = any_of(
            [
                aggregate("max", identity, self.read(raw, *vendor_matchers(self.cfg, raw), *where))
                for raw in self.raws(signal)
            ]
        )
        rows = Paren(self.normalised(signal, where)) * 0
        return join(rows, "+", on(identity, group_left=()), whole)

    def emitted(self, formula: Formula) -> bool:
        """Whether the configured generations and vendors emit every signal ``formula`` reads."""
        return all(self.raws(catalog.SIGNALS[key]) for key in formula.signals)

    def gpu_formula(self, formula: Formula) -> Expr | None:
        """A formula with its signals expanded; None if no configured generation emits one of them."""
        if not self.emitted(formula):
            return None

        def expand(node: Expr) -> Expr | None:
            if isinstance(node, catalog.DeviceSignal):
                return self.device_wide(catalog.SIGNALS[node.name], formula.where)
            if isinstance(node, Placeholder):
                return self.normalised(catalog.SIGNALS[node.name], formula.where)
            return None

        return transform(formula.expr, expand)

    def gpu_rule(self, series: Series) -> RecordingRule | None:
        """A series' formulas tried in order: consecutive formulas over signals are attributed together, those
        over recorded series follow as written.

        None where no configured exporter generation emits what the series needs (the energy
        counter on 4.9 and later)."""
        alternatives: list[tuple[Expr, bool]] = []  # each with whether it is attributed raw series
        over_signals: list[Expr] = []  # consecutive formulas over signals, not yet attributed

        def attribute_pending() -> None:
            if over_signals:
                grouped = [Paren(e) for e in over_signals] if len(over_signals) > 1 else over_signals
                alternatives.append((self.attributed(any_of(grouped)), True))
                over_signals.clear()

        for formula in series.formulas:
            if formula.over_signals:
                if (expr := self.gpu_formula(formula)) is not None:
                    over_signals.append(expr)
            elif (expr := self.recorded_formula(formula)) is not None:
                attribute_pending()
                alternatives.append((expr, False))
        attribute_pending()
        if not alternatives:
            return None
        several = len(alternatives) > 1  # then each attributed expression is grouped, for the reader
        return RecordingRule(series.name, any_of([Paren(e) if several and a else e for e, a in alternatives]))

    def attributed(self, expr: Expr) -> Expr:
        """Raw series (a formula over signals, expanded) on the executions' GPU rows, with their labels."""
        return self.attribution.named(self.attribution.attribute(expr))

    def recorded_formula(self, formula: Formula) -> Expr | None:
        """A formula over recorded series with its placeholders expanded (``instance_share()``, and each
        ``per_gpu`` signal attributed); None if no configured generation emits one of its signals."""
        if not self.emitted(formula):
            return None

        def expand(node: Expr) -> Expr | None:
            if isinstance(node, catalog.GpuSignal):
                return self.attributed(self.normalised(catalog.SIGNALS[node.name], formula.where))
            return self.expand_instance_share(node)

        return transform(formula.expr, expand)

    def expand_instance_share(self, node: Expr) -> Expr | None:
        """``catalog.instance_share()`` (``catalog.GPU_INSTANCE_SHARE``'s formula): each GPU instance's compute
        slices over those of every instance its GPU publishes, by ``catalog.INSTANCE_KEY``, read from the exporters'
        own series (a free instance's carry no execution's labels). ``group`` counts an instance whatever its value,
        NaN included; its profile gives its slices, else it weighs one."""
        if not isinstance(node, catalog.InstanceShare):
            return None
        instance, profile, uuid = catalog.MIG_INSTANCE_LABEL, catalog.MIG_PROFILE_LABEL, catalog.UUID_LABEL
        key = catalog.INSTANCE_KEY
        raws = self.raws(catalog.SIGNALS[catalog.INSTANCE_SHARE_SIGNAL])
        nvidia = [r.name for r in raws if r.vendor == "nvidia" and not r.matchers]
        weights: list[Expr] = []
        if nvidia:  # every generation's name in one selector: an exporter publishes one of them
            named = (match("__name__", "|".join(nvidia), "=~"), *self.cfg.selectors.dcgm_matchers)
            for slices in catalog.MIG_SLICES:
                of_profile = match(profile, catalog.MIG_SLICE_PROFILE.format(slices=slices), "=~")
                weights.append(aggregate("group", key, selector("", *named, of_profile)) * slices)
            weights.append(aggregate("group", key, selector("", *named, labelled(instance))))
        for raw in (r for r in raws if r.vendor != "nvidia"):  # AMD's partitions are equal: one slice each
            weights.append(aggregate("group", key, raw.select(labelled(instance))))
        per_instance = Paren(any_of(weights))
        return join(per_instance, "/", on((uuid,), group_left=()), aggregate("sum", (uuid,), per_instance))

    def instance_share_rule(self) -> RecordingRule:
        """``catalog.GPU_INSTANCE_SHARE``: each GPU instance's share of its GPU, once per instance, whoever holds it."""
        series = catalog.GPU_INSTANCE_SHARE
        expr = self.recorded_formula(series.formulas[0])
        assert expr is not None  # the share reads the exporters' own series, no signal a generation may lack
        return RecordingRule(series.name, expr)

    def gpu_rules(self, series: tuple[Series, ...]) -> tuple[RecordingRule, ...]:
        """The rules of ``series`` that the configured generations can compute."""
        return tuple(rule for rule in map(self.gpu_rule, series) if rule is not None)

    def sample_seconds_rule(self) -> RecordingRule:
        """``catalog.GPU_SAMPLE_SECONDS``: for each utilisation sample this evaluation wrote, the seconds since the
        series' previous one.

        ``offset 1s`` reads the sample before the one this evaluation wrote: live, where the utilisation rule has
        just written one at this instant, and in a backfill or promtool's tests, which hold one at every step
        alike. Only where the utilisation has a sample at this very instant (``timestamp(...) == time()``), not
        where an instant selector still reads an older one within the lookback (a backfill writes no staleness
        markers): one value per utilisation sample. Beyond the lookback (or for a series' first sample) there is
        no previous one: the sample counts the time since the group's previous evaluation, the newest of every
        GPU's previous samples (every GPU is evaluated together; a GPU whose execution ended at that evaluation
        included, its series stale only from this one), else the group's interval where the config names it
        (with none: no value, and the sample counts nothing).

        The per-GPU group's costliest rule at fleet scale (``make bench``), so each alternative reads the
        utilisation twice, no more: the previous samples' timestamps, and the current ones' (whose value is
        ``time()``, so the difference is the gap)."""
        util = catalog.GPU_UTILIZATION.select()
        current = call("timestamp", util).eq(call("time"))
        previous = call("timestamp", util.offset("1s"))
        measured = current - previous
        since_last = Paren(join(current, "-", on((), group_left=()), aggregate("max", None, previous)))
        alternatives = [measured, since_last]
        if self.cfg.rule_interval:
            alternatives.append(current * 0 + parse_duration_seconds(self.cfg.rule_interval))
        return RecordingRule(catalog.GPU_SAMPLE_SECONDS.name, any_of(alternatives))

    # -- per-host --------------------------------------------------------------------------
    def node_rule(self, series: Series) -> RecordingRule:
        formula = series.formulas[0]
        per_target = substitute(formula.expr, self.node_signal)
        if self.cfg.node.at_scrape:  # the scrape named the host: keep it
            per_target = partitioned(per_target, HOST_LABEL)
        else:
            per_target = with_host(per_target, catalog.NODE_EXPORTER_HOST)
        per_host = aggregate("max", (HOST_LABEL,), per_target)
        hosts = aggregate("group", catalog.NODE_LABELS, catalog.NODE_GPU_COUNT.select())
        return RecordingRule(series.name, join(hosts, "*", on((catalog.HOST_LABEL,), group_left=()), per_host))

    def node_signal(self, key: str) -> Expr:
        """A node signal per target in its base unit: a counter as its recorded per-target rate,
        averaged over rate_window, and nothing while an implausible rate lies within it."""
        raw = catalog.SIGNALS[key].raws[0]
        if raw.type != "counter":
            return self.read(raw, *self.cfg.selectors.node_matchers)
        rate, _ = self.counter_rate(key)
        window = rate.select().range(self.cfg.cpu_average_window)
        averaged = call("avg_over_time", window)
        return averaged.unless(self.implausible(key), on(catalog.TARGET_LABELS), True)

    def implausible(self, key: str) -> Expr:
        """The targets whose recorded rate of node counter ``key`` rose above what a CPU can do
        within the averaging window: a counter that stepped back, read by irate() or rate() as a reset."""
        rate, ceiling = self.counter_rate(key)
        return call("max_over_time", rate.select().range(self.cfg.cpu_average_window)).gt(ceiling)

    def counter_rate(self, key: str) -> tuple[Series, float]:
        """The recorded per-target rate of node counter ``key`` this config records, and its ceiling."""
        rate, ceiling = catalog.NODE_COUNTER_RATES[key]
        return (catalog.NODE_COUNTER_INTERVAL_RATES[key] if self.cfg.node.cpu_rate_interval else rate), ceiling

    def node_rate_rule(self, key: str) -> RecordingRule:
        """A node counter's per-target rate in its base unit: the average over the target's CPUs of each
        one's rate between its last two samples within rate_window_fallback or, where node.cpu_rate_interval
        records it less often, of each one's rate over the time since the last evaluation (cpu_rate_window)."""
        rate, _ = self.counter_rate(key)
        raw = catalog.SIGNALS[key].raws[0]
        counter = raw.select(*self.cfg.selectors.node_matchers)
        if self.cfg.node.cpu_rate_interval:
            per_cpu = call("rate", counter.range(self.cfg.cpu_rate_window))
        else:
            per_cpu = call("irate", counter.range(self.cfg.rate_window_fallback))
        last_rate = self.unit_of(raw).to_base(per_cpu)
        expr = substitute(rate.formulas[0].expr, lambda _: last_rate)
        # Where the scrape named the host, the per-target rate keeps it for the host series.
        return RecordingRule(rate.name, partitioned(expr, HOST_LABEL) if self.cfg.node.at_scrape else expr)

    # -- host CPU rate ---------------------------------------------------------------------
    def node_rate_rules(self) -> tuple[RecordingRule, ...]:
        """The per-target node counter rates (the host CPU rate), in the ``host_rates`` group."""
        return tuple(self.node_rate_rule(key) for key in catalog.NODE_COUNTER_RATES)

    # -- alert conditions ----------------------------------------------------------------
    def condition_rules(self) -> tuple[RecordingRule, ...]:
        """Each per-GPU alert condition the report counts: 1 where it holds, else 0 for every GPU held
        (the throttling ones) or for every GPU with engine activity (the activity ones: without it
        nothing can be told, and the report says so)."""
        from gpu_execution_pack.rules.alerts import AlertBuilder  # alerts read this module's series

        alerts = AlertBuilder(self.cfg)
        held = catalog.GPU_PRESENCE.select() * 0
        active = catalog.GPU_GRAPHICS_ENGINE_ACTIVE.select() * 0
        return tuple(
            RecordingRule(series.name, one_or_zero(condition, otherwise))
            for series, condition, otherwise in (
                (catalog.GPU_POWER_THROTTLED, alerts.power_throttling_condition(), held),
                (catalog.GPU_THERMAL_THROTTLED, alerts.thermal_throttling_condition(), held),
                (catalog.GPU_STALLED, alerts.stalled_condition(), active),
                (catalog.GPU_TENSOR_CORES_UNUSED, alerts.tensor_cores_unused_condition(), active),
                (catalog.GPU_MEMORY_HIGH, alerts.gpu_memory_high().tree, held),
            )
        )

    def execution_condition_rules(self) -> tuple[RecordingRule, ...]:
        """Per execution and tenant: whether its mean GPU utilisation is under the waste threshold (1/0 while
        it holds GPUs), and its busiest host CPU at those moments only, so the report reads a span's sums
        and means of recorded samples instead of re-evaluating the comparison at every step of the span."""
        by_tenant = (EXECUTION_LABEL, self.cfg.api.tenant_label)
        mean = aggregate("avg", by_tenant, catalog.GPU_UTILIZATION.select())
        low = mean.lt(self.cfg.alerts.gpu_underutilized.threshold)
        # The busiest CPU of the hosts the tenant's GPUs are on: host series carry no tenant, and two tenants'
        # executions of one id (Kubernetes Job names repeat across namespaces) may run on other hosts.
        hosts = aggregate("group", (*by_tenant, HOST_LABEL), catalog.GPU_PRESENCE.select())
        host_cpu = join(
            hosts, "*", on((EXECUTION_LABEL, HOST_LABEL), group_left=()), catalog.NODE_CPU_UTILIZATION.select()
        )
        cpu = aggregate("max", by_tenant, host_cpu)
        return (
            RecordingRule(catalog.EXECUTION_UNDERUTILIZED.name, one_or_zero(low, mean * 0)),
            RecordingRule(
                catalog.EXECUTION_CPU_WHILE_UNDERUTILIZED.name,
                join(Paren(low) * 0, "+", on(by_tenant, group_left=()), cpu),
            ),
        )

    # -- cost ------------------------------------------------------------------------------
    def price_rule(self) -> RecordingRule:
        """Listed models at their price, and every other model in use at the default price."""
        d = self.cfg.dashboards
        model = catalog.MODEL_LABEL
        listed = [label_set(call("vector", price), model, name) for name, price in d.model_prices().items()]
        # One price list for every cluster (shared): the models every cluster holds, at the default price.
        others = (
            aggregate("group", (model,), catalog.MODEL_GPU_COUNT.select(), shared=True) * 0
            + d.default_price_per_gpu_hour
        )
        return RecordingRule(catalog.PRICE.name, any_of([*listed, others]))

    # -- groups ----------------------------------------------------------------------------
    def groups(self) -> list[RuleGroup]:
        """The recording rule groups, in dependency order."""
        interval, derived = self.cfg.rule_interval, self.cfg.derived_interval
        return [
            # AMD's exporter in the names and units the rest reads: before everything that reads them.
            *([RuleGroup(AMD_GROUP, "execution-gpu", self.amd.rules(), interval)] if "amd" in self.cfg.vendors else []),
            # Read by every per-GPU and per-host rule: first. A target's host rarely changes, and the rules join
            # its newest entry within the lookback, so the maps may run less often (node.host_map_interval).
            RuleGroup(HOSTS_GROUP, "execution-gpu", self.hosts.rules(), self.cfg.node.host_map_interval or interval),
            # The host CPU rate: at the served interval (irate), or less often (node.cpu_rate_interval).
            RuleGroup(
                HOST_RATES_GROUP, "execution-gpu", self.node_rate_rules(), self.cfg.node.cpu_rate_interval or interval
            ),
            RuleGroup(
                EXECUTION_GPU_GROUP,
                "execution-gpu",
                # The GPU instances' shares first, in the group whose rows they weigh: a new instance's share is
                # recorded at the evaluation that records its first rows, so the attributed power beside it and
                # the cost rules that read both never see one without the other (in the host maps' group, at
                # node.host_map_interval, a new instance went unbilled until that group's next evaluation).
                # Then the seconds each utilisation sample stands for.
                in_dependency_order(
                    (
                        self.instance_share_rule(),
                        *self.gpu_rules((*catalog.GPU_SERIES, *catalog.GPU_SHARE_SERIES)),
                        self.sample_seconds_rule(),
                    )
                ),
                interval,
            ),
            # The profiling fields: how much the engines really worked.
            RuleGroup(
                ACTIVITY_GROUP,
                "execution-gpu",
                self.gpu_rules(catalog.GPU_ACTIVITY_SERIES),
                interval,
            ),
            # Alert inputs, after the series they read; same file as the per-GPU series.
            RuleGroup(
                HEALTH_GROUP,
                "execution-gpu",
                self.gpu_rules(catalog.GPU_HEALTH_SERIES),
                derived,
            ),
            # The alerts' conditions as 0/1 series, for the report; after their inputs.
            RuleGroup(
                CONDITIONS_GROUP,
                "execution-gpu",
                self.condition_rules(),
                derived,
            ),
            RuleGroup(
                EXECUTION_NODE_GROUP,
                "execution-node",
                (
                    verbatim_rule(catalog.NODE_GPU_COUNT),
                    *(self.node_rule(s) for s in catalog.NODE_SERIES),
                    *(verbatim_rule(s) for s in catalog.NODE_DERIVED_SERIES),
                ),
                interval,
            ),
            RuleGroup(
                EXECUTION_GROUP,
                "execution",
                (
                    *(per_tenant_rule(s, self.cfg.api.tenant_label) for s in catalog.EXECUTION_SERIES),
                    *self.execution_condition_rules(),
                ),
                derived,
            ),
            RuleGroup(
                COST_GROUP,
                "cost",
                (*(per_tenant_rule(s, self.cfg.api.tenant_label) for s in catalog.COST_SERIES), self.price_rule()),
                derived,
            ),
        ]


def one_or_zero(condition: Expr, otherwise: Expr) -> Expr:
    """1 where ``condition`` has a result, else ``otherwise`` (a 0 for every series that can be told)."""
    return any_of([Paren(Paren(condition) * 0 + 1), otherwise], stacked=False)


def verbatim_rule(series: Series) -> RecordingRule:
    """A series whose formula reads recorded series only: its expression is the formula as written."""
    return RecordingRule(series.name, series.formulas[0].expr)


def per_tenant_rule(series: Series, tenant_label: str) -> RecordingRule:
    """A rollup of the per-GPU series by execution (``verbatim_rule``) that keeps their tenant label beside the
    execution's: Kubernetes Job names repeat across namespaces, and one id's rollup over two tenants' GPUs
    would mix two jobs (their mean utilisation, their alert, their bill)."""
    return RecordingRule(series.name, alongside(series.formulas[0].expr, EXECUTION_LABEL, tenant_label))


def recording_groups(cfg: Config) -> list[RuleGroup]:
    """The recording rule groups for ``cfg``."""
    return RuleBuilder(cfg).groups()
