"""The dashboards' query library: their variables, the cluster and GPU-model scope every query is put in,
and the figures several dashboards show (GPU-hours, energy, prices).

Queries are trees over catalog series; ``house.render`` prints them through a dashboard's scope
(``in_cluster`` or ``of_models``), so a panel's query is written once for every cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gpu_execution_pack import catalog, promql
from gpu_execution_pack.catalog import Series
from gpu_execution_pack.config import CLUSTER, Config, cluster_scope
from gpu_execution_pack.dashboards import house
from gpu_execution_pack.dashboards.house import Query
from gpu_execution_pack.promql import (
    Binary,
    Expr,
    Matcher,
    Paren,
    Range,
    Selector,
    aggregate,
    any_of,
    call,
    join,
    match,
    on,
)

# The Execution dashboard's Grafana variable (the Fleet and Cost dashboards link to it by name). Its
# name is also the URL parameter (var-execution_id) that links from outside (bookmarks, a scheduler's
# job page) carry, so it stays fixed even were the recorded series' label (catalog.EXECUTION_LABEL,
# which SEL matches) renamed.
VARIABLE = "execution_id"
# The dashboard's execution: Grafana substitutes the variable before the query is sent.
SEL = match(catalog.EXECUTION_LABEL, f"${VARIABLE}")
GPU_LEGEND = "{{hostname}} GPU {{gpu}} {{GPU_I_ID}}"
HOST_LEGEND = "{{hostname}}"
MODEL_LEGEND = "{{modelName}}"
RANGE = "$__range"  # the dashboard's time range


def selected(series: Series) -> Selector:
    """``series`` of the dashboard's execution."""
    return series.select(SEL)


def query(expr: Expr, legend: str = "") -> Query:
    """A panel target: ``expr``, printed as PromQL (within the dashboard's cluster) by ``house.render``."""
    return Query(expr, legend)


# The cluster variable, where ``cluster_label`` is set: fixed like VARIABLE (links carry var-cluster),
# whatever the label is named.
CLUSTER_VARIABLE = CLUSTER
# Recorded once for every cluster, without the cluster label: no cluster matcher on it.
SHARED_SERIES = frozenset({catalog.PRICE.name})


# The Execution dashboard's tenant: the tenant label's value on the chosen execution's series (one of them where
# two tenants' executions share the id, as Kubernetes Job names repeat across namespaces; none without the label).
TENANT_VARIABLE = "tenant"
# The series that carry the tenant beside the execution (the per-GPU series and their rollups; not the hosts').
TENANT_SERIES = frozenset(
    s.name for s in catalog.ALL_SERIES if catalog.EXECUTION_LABEL in s.labels and s.labels != catalog.NODE_LABELS
)
# The execution's host series: no tenant (a host is shared), kept to the hosts of the tenant's GPUs.
HOST_SERIES = frozenset(s.name for s in catalog.ALL_SERIES if s.labels == catalog.NODE_LABELS)


def tenant_variable(cfg: Config) -> dict[str, object]:
    """The chosen execution's tenants, the first chosen when the execution is (an id held by one tenant: that one;
    an id without the tenant label: none, and ``label="$tenant"`` matches its series, which have no such label)."""
    execution = catalog.EXECUTION_GPU_COUNT.select(SEL, *cluster_matchers(cfg))
    return house.query_variable(TENANT_VARIABLE, "Tenant", label_values(execution, cfg.api.tenant_label))


def of_tenant(cfg: Config) -> Callable[[Expr], Expr]:
    """What puts a query of the Execution dashboard within its cluster (``in_cluster``) and its tenant: every
    selector of the chosen execution's series that carry the tenant gets the tenant's matcher, and an instant
    selector of its host series is kept to the hosts of the tenant's GPUs, as the report and the endpoint keep
    them: two namespaces' Jobs of one name on other hosts are not this one's hosts."""
    chosen = match(cfg.api.tenant_label, f"${TENANT_VARIABLE}")
    tenants_gpus = catalog.GPU_PRESENCE.select(SEL, *cluster_matchers(cfg), chosen)
    tenants_hosts = aggregate("group", catalog.NODE_LABELS, tenants_gpus)

    def tenanted(node: Expr) -> Expr | None:
        if isinstance(node, Selector) and node.metric in TENANT_SERIES and SEL in node.matchers:
            return Selector(node.metric, (*node.matchers, chosen))
        return None

    def scoped(node: Expr) -> Expr | None:
        if isinstance(node, Range):  # a range's selector takes matchers only (no join inside a range)
            return promql.transform(node, tenanted)
        if isinstance(node, Selector) and node.metric in HOST_SERIES and SEL in node.matchers:
            # Applied after ``in_cluster``: its ``alongside`` would put the tenant, which host series lack, in ``on``.
            return node.and_(tenants_hosts, on(catalog.NODE_LABELS))
        return tenanted(node)

    cluster = in_cluster(cfg)
    return lambda expr: promql.transform(cluster(expr), scoped)


def cluster_matchers(cfg: Config) -> tuple[Matcher, ...]:
    """The matcher of the dashboard's cluster, where ``cluster_label`` is set; none otherwise."""
    return cluster_scope(cfg).matchers(f"${CLUSTER_VARIABLE}")


def label_values(source: Selector, label: str) -> str:
    """Grafana's variable query for the values of ``label`` on the series ``source`` selects: not PromQL,
    but a selector (printed by ``promql``) and a label."""
    return f"label_values({promql.render(source)}, {label})"


def in_cluster(cfg: Config) -> Callable[[Expr], Expr]:
    """What puts a query within the dashboard's cluster: every selector but a shared series' gets the
    cluster matcher (both sides of a join are then of that cluster). Unchanged without ``cluster_label``.
    Every grouping or match by the execution keeps the tenant beside it too, as the rollups do (``alongside``):
    two namespaces' Jobs of one name are two rows of a table, not one."""
    matchers = cluster_matchers(cfg)

    def scoped(node: Expr) -> Expr | None:
        if isinstance(node, Selector) and node.metric not in SHARED_SERIES:
            return Selector(node.metric, (*matchers, *node.matchers))
        return None

    def within(expr: Expr) -> Expr:
        expr = promql.transform(expr, scoped) if matchers else expr
        return promql.alongside(expr, catalog.EXECUTION_LABEL, cfg.api.tenant_label)

    return within


# The GPU-model filter of the Fleet and Cost dashboards (a mixed fleet: NVIDIA and AMD models side by side):
# every series that carries modelName is kept to the chosen models; execution-wide ones stay whole.
MODEL_VARIABLE = "model"
MODEL_SERIES = frozenset(s.name for s in catalog.ALL_SERIES if catalog.MODEL_LABEL in s.labels)


def model_variable(cfg: Config) -> dict[str, object]:
    """The GPU-model variable: several models at once, every model by default (within the cluster)."""
    values = label_values(catalog.MODEL_GPU_COUNT.select(*cluster_matchers(cfg)), catalog.MODEL_LABEL)
    return house.query_variable(MODEL_VARIABLE, "GPU model", values, multi=True)


def of_models(cfg: Config) -> Callable[[Expr], Expr]:
    """What puts a query within the dashboard's cluster and GPU models: ``in_cluster``, then the model matcher
    on every selector of a series that carries ``modelName``."""
    chosen = match(catalog.MODEL_LABEL, f"${MODEL_VARIABLE}", "=~")

    def scoped(node: Expr) -> Expr | None:
        if isinstance(node, Selector) and node.metric in MODEL_SERIES:
            return Selector(node.metric, (*node.matchers, chosen))
        return None

    cluster = in_cluster(cfg)
    return lambda expr: promql.transform(cluster(expr), scoped)


def variables(cfg: Config, *queried: tuple[str, str, Series, str]) -> list[dict[str, object]]:
    """The data source, the cluster where ``cluster_label`` is set, then each (name, label, series, label
    of its values) of ``queried``: a query variable over that label's values, within the cluster."""
    clusters = cluster_scope(cfg)
    matchers = cluster_matchers(cfg)
    out = [house.datasource_variable(cfg.dashboards.datasource_name)]
    if clusters.enabled:
        values = label_values(catalog.EXECUTION_GPU_COUNT.select(), clusters.label)
        out.append(house.query_variable(CLUSTER_VARIABLE, "Cluster", values))
    for name, label, series, of in queried:
        out.append(house.query_variable(name, label, label_values(series.select(*matchers), of)))
    return out


def over_range(function: str, expr: Expr) -> Expr:
    """``function`` (a ``*_over_time``) of ``expr`` over the dashboard's time range."""
    return call(function, expr.range(RANGE))


def per_minute(expr: Expr) -> Range:
    """``expr`` over the time range as a subquery sampled every minute: summing it counts minutes,
    whatever the rule interval."""
    return Range(expr, RANGE, "1m")


def gpu_minutes(expr: Expr) -> Expr:
    """Minutes of ``expr`` (GPUs held, or busy GPU-equivalents) over the time range, per series."""
    return call("sum_over_time", per_minute(expr))


def gpu_hours(expr: Expr, by: Iterable[str] | None = None) -> Expr:
    """GPU-hours of ``expr`` over the time range, summed ``by`` the labels given (over all without)."""
    return aggregate("sum", by, gpu_minutes(expr)) / 60


JOULES_PER_KWH = 3_600_000


def energy_kwh(by: Iterable[str] | None, *matchers: Matcher) -> Expr:
    """kWh over the time range, summed ``by`` the labels given: each physical GPU in the execution's share of it,
    from the energy counter's rise where it is recorded, else board power integrated per minute.
    docs/report.md defines the same figure for the report.

    The rise is scaled by the execution's attributed power over the GPU's power, both integrated per minute:
    a GPU several executions hold at once (time-slicing, MPS) is split by their work at each moment, and the
    MIG instances of one GPU, which repeat its counter and power, each by its share of the GPU, summed over
    the instances the execution holds. So sums over executions count a GPU's energy once at most (an
    unshared whole GPU's scale is exactly 1)."""
    device = (catalog.EXECUTION_LABEL, catalog.UUID_LABEL, catalog.MODEL_LABEL)
    counter = catalog.GPU_ENERGY.select(*matchers)
    rise = call("max_over_time", counter.range(RANGE)) - call("min_over_time", counter.range(RANGE))
    attributed = aggregate("sum", device, gpu_minutes(catalog.GPU_POWER_ATTRIBUTED.select(*matchers)))
    drawn = aggregate("max", device, gpu_minutes(catalog.GPU_POWER.select(*matchers)))
    share = Paren(attributed / drawn.gt(0))
    per_device = any_of([aggregate("max", device, rise) * share, attributed * 60])
    return aggregate("sum", by, per_device) / JOULES_PER_KWH


def priced(expr: Expr) -> Expr:
    """``expr``, per execution and GPU model, times the price of a GPU-hour of that model."""
    return join(expr, "*", on([catalog.MODEL_LABEL], group_left=(), shared=True), catalog.PRICE.select())


def billed_cost(by: Iterable[str] | None, *matchers: Matcher) -> Expr:
    """What the GPUs held over the time range cost, at each model's price, summed ``by`` the labels given."""
    return aggregate("sum", by, priced(gpu_minutes(catalog.MODEL_GPU_COUNT.select(*matchers)) / 60))


def stacked(lhs: Expr, op: str, rhs: Expr) -> Binary:
    """``lhs op rhs`` with each on a line of its own."""
    return Binary(op, lhs, rhs, stacked=True)
