"""``make bench``, fleet part: what the recorded series buy and what they cost, at 1,000 and 10,000 GPUs.

For each fleet size a real Prometheus on loopback
1. holds an hour and ten minutes of one 8-GPU execution of the fleet (its GPUs and host, raw series backfilled
   from OpenMetrics, recorded series backfilled by promtool from the pack's rules);
2. then scrapes the whole fleet live (``bench/exporter.py``) every 15 s and evaluates the
   generated rules, so its head holds every GPU's raw and recorded series;
3. reports rule evaluation cost as Prometheus itself does
   (``prometheus_rule_group_last_duration_seconds``, ``..._iterations_missed_total``) and its own
   CPU use, with the pack's rules, then the floor's, then none; the raw and recorded series it
   holds, and memory; and the per-execution fetch of the 12 served series over the last hour
   (``FETCH_WINDOW_S``) at a 15 s step, three ways: the recorded series, the equivalent raw
   expressions evaluated at query time, and bare selectors reading the same number of samples
   (the floor).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config
from gpu_execution_pack.promql import Expr, Paren, Selector, match, render, transform
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.rules.groups import RecordingRule
from gpu_execution_pack.rules.recording import Attribution, RuleBuilder
from gpu_execution_pack.scenario.model import STEP_SECONDS, Execution, Scenario
from gpu_execution_pack.scenario.oracle import raw_for

from bench.common import REPO, log, scaled
from bench.exporter import FleetExporter, scrape_config
from bench.fleet import GENERATION, FleetExposition, fleet_scenario
from harness.prometheus import Prometheus, free_port

SIZES = scaled(((1000, 100), (10000, 1000)), ((64, 8), (128, 16)))  # (GPUs, executions)
# The fetch's window, the same for the recorded, raw and floor paths. It was 24 hours; since the host-map
# rules a raw fetch over 24 hours took minutes per series (hours for the part), so `make bench` could
# not finish: an hour's window (241 points a series) keeps the three comparable and the part bounded.
FETCH_WINDOW_S = scaled(3600, 1800)
# What is backfilled of the measured execution before the live scrape: the window, and the 10 minutes
# before it that the rules' longest lookback (rate_window_fallback, the host map's) reads at its start.
HISTORY_S = FETCH_WINDOW_S + 600
WARMUP_S = scaled(60, 15)  # rule cost is steady once every group has run a few times
MEASURE_S = scaled(60, 30)
# The floor's CPU rate window: four of the fleet's 15 s scrapes, the shortest Prometheus' own guidance
# allows for a rate (the pack's rate_window_fallback at 1m reads the same).
FLOOR_CPU_RATE_WINDOW = "1m"
# The floor's per-GPU rules, one bare selector each: their names begin with this. Its host CPU rate's name.
FLOOR_GPU_RULE_PREFIX = "bench_floor:series_"
FLOOR_CPU_RULE = "bench_floor:node_cpu_idle_seconds:avg_irate"
FETCHES = {"recorded": 7, "floor": 7, "raw": 3}  # fetches per path (the raw one is slow)
# No new fetch starts once a path's fetches have taken this long (one always runs): bounds the raw path.
FETCH_BUDGET_S = scaled(120, 30)


def measured_execution(scenario: Scenario) -> Execution:
    """The fleet's first execution of 8 whole GPUs on one host."""
    return next(
        e
        for e in scenario.executions
        if len(e.gpus) == 8 and len({g.host for g in e.gpus}) == 1 and not e.gpus[0].mig_instance
    )


@dataclass(frozen=True)
class Fetch:
    """The 12 queries of one per-execution fetch, one per served series."""

    recorded: tuple[str, ...]
    raw: tuple[str, ...]
    floor: tuple[str, ...]


def inline(record: str, trees: dict[str, Expr]) -> Expr:
    """A recorded series' expression with every recorded series it reads replaced by its own expression."""

    def swap(node: Expr) -> Expr | None:
        if isinstance(node, Selector) and node.metric in trees and node.metric != record:
            return Paren(inline(node.metric, trees))
        return None

    return transform(trees[record], swap)


class QueryTimeRules(RuleBuilder):
    """The rules as one would write them to evaluate at query time: a node counter rated per CPU.

    The pack rates a per-target average it records once per scrape; without recording rules
    there is nothing to rate but each CPU's counter.
    """

    def node_signal(self, key: str) -> Expr:
        return self.read(catalog.SIGNALS[key].raws[0], *self.cfg.selectors.node_matchers)


def first_raw_metric(series: catalog.Series) -> str:
    """The fleet's raw metric behind a per-GPU series' first formula (FB_USED for the memory ratio)."""
    keys = series.formulas[0].signals or ("fb_used",)
    raw = raw_for(keys[0], GENERATION)
    assert raw is not None
    return raw.name


def fetch_queries(cfg: Config, execution: Execution) -> Fetch:
    """The recorded, raw and floor queries for ``execution``'s 12 served series."""
    matcher = f'{cfg.execution_label}="{execution.id}"'
    host = execution.gpus[0].host
    # The rules built for this one execution, as a user without recording rules would write them:
    # every DCGM selector carries its id, every node selector its host's target (node series have
    # no execution label; rating each CPU of every host over 24 hours would take minutes a fetch).
    selectors = dataclasses.replace(cfg.selectors, dcgm=matcher, node=f'instance="{host}:9100"')
    # The fleet is NVIDIA's: a user writing its queries reads dcgm-exporter alone (the AMD group's series
    # inlined would be AMD's whole relabelling, a query too long for a URL).
    only = dataclasses.replace(cfg, selectors=selectors, vendors=("nvidia",))
    groups = QueryTimeRules(only).groups()
    trees = {r.record: r.tree for g in groups for r in g.rules if isinstance(r, RecordingRule)}
    recorded, raw, floor = [], [], []
    for series in catalog.API_SERIES:
        recorded.append(render(series.select(match(catalog.EXECUTION_LABEL, execution.id))))
        raw.append(render(inline(series.name, trees)))
        if series.labels == catalog.GPU_LABELS:
            floor.append(f"{first_raw_metric(series)}{{{matcher}}}")  # the same 8 GPUs' samples
        else:
            floor.append(f'node_memory_MemTotal_bytes{{instance="{host}:9100"}}')  # the host's
    return Fetch(tuple(recorded), tuple(raw), tuple(floor))


def time_fetches(
    server: Prometheus, queries: tuple[str, ...], start: int, end: int, times: int
) -> tuple[float, int, int]:
    """Median seconds of one whole fetch (the queries one after another), the samples it returns, and how
    many fetches ran: ``times``, or fewer where they took FETCH_BUDGET_S before the last."""
    seconds: list[float] = []
    samples = 0
    began = time.monotonic()
    for _ in range(times):
        if seconds and time.monotonic() - began >= FETCH_BUDGET_S:
            break
        t = time.perf_counter()
        results = [server.query_range(q, start, end, STEP_SECONDS, timeout=600) for q in queries]
        seconds.append(time.perf_counter() - t)
        empty = [q for q, r in zip(queries, results, strict=True) if not r]
        if empty:
            raise RuntimeError(f"no data for {empty[0]}")
        samples = sum(len(s["values"]) for r in results for s in r)
    return statistics.median(seconds), samples, len(seconds)


def floor_rules(path: Path) -> dict[str, str]:
    """A rule file that records, at the served series' interval, the least any rules reading their inputs pay.

    One bare selector per raw input: per per-GPU rule its raw metric, per host its memory gauges; and
    one CPU rate per host (node_exporter target), the idle counters' rate averaged over its CPUs (a
    bare selector would record every CPU's counter, series no pack records), over the shortest window
    the fleet's 15 s scrape allows (FLOOR_CPU_RATE_WINDOW): no unit conversion, label work, joins or
    fallbacks. Returns its rules' expressions by recorded name.
    """
    rules = []
    for i, series in enumerate(catalog.GPU_SERIES):
        expr = f'{first_raw_metric(series)}{{execution_id!=""}}'
        rules.append({"record": f"{FLOOR_GPU_RULE_PREFIX}{i:02d}", "expr": expr})
    for key in ("mem_total", "mem_available"):
        rules.append({"record": f"bench_floor:node_{key}", "expr": render(catalog.SIGNALS[key].raws[0].select())})
    idle = render(catalog.SIGNALS["cpu_idle_seconds"].raws[0].select())
    expr = f"avg by (job, instance) (irate({idle}[{FLOOR_CPU_RATE_WINDOW}]))"
    rules.append({"record": FLOOR_CPU_RULE, "expr": expr})
    path.write_text(json.dumps({"groups": [{"name": "bench-floor", "rules": rules}]}))
    return {rule["record"]: rule["expr"] for rule in rules}


def rule_cost(server: Prometheus, rule_files: str) -> dict:
    """One phase: each group's median evaluation time and interval, their sum as a share of the time,
    missed iterations, failed scrapes and Prometheus' own CPU use over MEASURE_S.

    Only the groups of ``rule_files`` (a glob, "" for none) count: those a reload removed may
    linger in Prometheus' own metrics.
    """
    before, t0 = server.own_metrics(), time.monotonic()
    per_group: dict[str, list[float]] = {}
    intervals: dict[str, float] = {}
    deadline = t0 + MEASURE_S
    while time.monotonic() < deadline:
        time.sleep(STEP_SECONDS)
        metrics = server.own_metrics("rule_group")
        for key, value in metrics.items():
            name, _, rule_group = key.partition("/")
            file, _, group = rule_group.rpartition(";")
            if not rule_files or not fnmatch.fnmatch(file, rule_files):
                continue
            if name == "prometheus_rule_group_last_duration_seconds":
                # A group of a longer interval than the settling time (the host map's minute) may not have run
                # since the reload: its 0 is no evaluation, not a free one.
                if not metrics.get(f"prometheus_rule_group_last_evaluation_timestamp_seconds/{rule_group}"):
                    continue
                per_group.setdefault(group, []).append(value)
            elif name == "prometheus_rule_group_interval_seconds":
                intervals[group] = value
    after, wall = server.own_metrics(), time.monotonic() - t0
    window = f"[{MEASURE_S}s]"
    scrapes = server.query(f"sum(count_over_time(up{window}))", time.time())
    answered = server.query(f"sum(sum_over_time(up{window}))", time.time())
    medians = {g: statistics.median(v) for g, v in sorted(per_group.items())}
    missed = "prometheus_rule_group_iterations_missed_total"
    cpu = "process_cpu_seconds_total"
    return {
        "groups": {g: (s, intervals[g]) for g, s in medians.items()},
        "share": sum(s / intervals[g] for g, s in medians.items()),
        "missed": after.get(missed, 0.0) - before.get(missed, 0.0),
        # A failed scrape leaves the rules without its series: a cheaper evaluation, not a real one.
        "failed_scrapes": float(scrapes[0]["value"][1]) - float(answered[0]["value"][1]),
        "cpu_cores": (after.get(cpu, 0.0) - before.get(cpu, 0.0)) / wall,  # Prometheus' CPU seconds per second
        "head_series": after.get("prometheus_tsdb_head_series", 0.0),
        "rss_bytes": after.get("process_resident_memory_bytes", 0.0),
    }


def scalar(server: Prometheus, expr: str) -> float:
    """An instant query's single value now, 0 when it answers nothing."""
    result = server.query(expr, time.time())
    return float(result[0]["value"][1]) if result else 0.0


def series_counts(server: Prometheus, fleet: FleetExposition) -> dict:
    """Raw series per GPU entry and per host, from the samples each scrape took (Prometheus' own
    ``scrape_samples_scraped``: a count over 2 million series by name takes longer than a query may),
    and the recorded series: the head's series less those scraped. Each target's largest count over
    the last 5 minutes: a scrape that failed (over its timeout) took none, but its series are there."""
    dcgm = scalar(server, 'sum(max_over_time(scrape_samples_scraped{job="dcgm-exporter"}[5m]))')
    node = scalar(server, 'sum(max_over_time(scrape_samples_scraped{job="node"}[5m]))')
    scraped = scalar(server, "sum(max_over_time(scrape_samples_scraped[5m]))")
    head = scalar(server, "prometheus_tsdb_head_series")
    return {
        "dcgm_series": dcgm,
        "node_series": node,
        "recorded_series": head - scraped,
        "per_gpu": dcgm / len(fleet.slots),
        "per_host": node / len(fleet.s.hosts),
    }


# What one per-GPU rule's steps cost, each alone over the fleet's GPUs (the temperature's rule).
OPERATION_ROUNDS = 9
# The steps the report's notes compare, by the names operation_steps gives them.
RAW_READ_STEP = "the raw read alone (the floor's rule)"
RULE_STEP = "the pack's rule: all of these"
IDENTITY_STEP = "instead: joined on the UUID to a recorded per-GPU series (an identity per GPU)"


def operation_steps(cfg: Config) -> tuple[tuple[str, str], ...]:
    """The temperature rule taken apart: its raw read alone, each step the pack adds to it alone, the rule.

    Each is wrapped in ``count()`` so the answer is one number, not 10,000 series to serialise.
    """
    signal = catalog.SIGNALS["gpu_temp"]
    raw = raw_for("gpu_temp", GENERATION)
    assert raw is not None
    read = f'{raw.name}{{{cfg.execution_label}!=""}}'
    other = next(r.name for r in signal.raws_for(cfg.dcgm.generations) if r.name != raw.name)
    (tenant, exported), *_ = Attribution(cfg).label_aliases
    host_map = catalog.GPU_EXPORTER_HOST.name
    labels = ", ".join((catalog.EXECUTION_LABEL, tenant, *catalog.GPU_IDENTITY_LABELS))
    rules = (r for g in all_groups(cfg) for r in g.rules if isinstance(r, RecordingRule))
    rule = next(r for r in rules if r.record == catalog.GPU_TEMPERATURE.name)
    # The alternative to the host-map join, tenant copy and max by in every rule: one recorded series
    # per GPU holding its final labels, joined on the GPU's UUID. Any recorded per-GPU series of the
    # pack has that shape; its own dedupe (a max by the UUID) is left out, in its favour.
    identity = catalog.GPU_MEMORY_TOTAL.name
    uuid = ", ".join(catalog.GPU_JOIN_LABELS)
    steps = (
        (RAW_READ_STEP, read),
        ("or the other generation's name", f'{other}{{{cfg.execution_label}!=""}} or {read}'),
        ("joined to the host map", f"{read} * on (job, instance) group_left ({catalog.HOST_LABEL}) {host_map}"),
        ("tenant copied (label_replace)", f'label_replace({read}, "{tenant}", "$1", "{exported}", "(.+)")'),
        ("label set fixed (max by)", f"max by ({labels}) ({read})"),
        (RULE_STEP, rule.expr),
        (
            IDENTITY_STEP,
            f'{identity} * on ({uuid}) group_left () ({other}{{{cfg.execution_label}!=""}} or {read})',
        ),
    )
    return tuple((name, f"count({expr})") for name, expr in steps)


def operation_costs(server: Prometheus, cfg: Config) -> list[tuple[str, float]]:
    """Each step's median evaluation time (Prometheus' own ``evalTotalTime``), the steps interleaved,
    in the order of ``operation_steps`` (a list: the figures' file sorts the keys of a dict)."""
    steps = operation_steps(cfg)
    seconds: dict[str, list[float]] = {name: [] for name, _ in steps}
    for _ in range(OPERATION_ROUNDS):
        for name, expr in steps:
            seconds[name].append(server.eval_seconds(expr, time.time()))
    return [(name, statistics.median(v)) for name, v in seconds.items()]


# The pack's rules with dcgm.generations pinned: a rule set of runs before 2026-12-06 (the report shows their
# figures); bench/shapes.py now measures the config doctor writes, which pins them, against the floor.
PINNED = "pack, generations pinned"

# The order in which one Prometheus evaluates each rule set (``None``: no rules), and how long each
# settles after a reload before it is measured: groups at 1m need a minute to run once. The pack ran a
# second time and pinned too until 2026-12-06: bench/shapes.py measures the defaults against the floor,
# interleaved after a 5-minute warm-up, and doctor's config, on this fleet; those 8 minutes keep
# `make bench` within the hour.
PHASES = (
    ("pack", WARMUP_S),
    ("floor", 2 * STEP_SECONDS),
    ("none", STEP_SECONDS),
)


def with_rules(gpus: int, executions: int, cfg: Config) -> dict:
    """History loaded, the fleet live; rule cost under the pack, the floor and no rules, in that order in one
    Prometheus; the three fetch paths and one per-GPU rule's steps after the pack phase."""
    now = int(time.time()) // STEP_SECONDS * STEP_SECONDS
    start = now - HISTORY_S
    scenario = fleet_scenario(gpus, executions, minutes=HISTORY_S // 60 + 120)
    fleet = FleetExposition(scenario, start)
    execution = measured_execution(scenario)
    queries = fetch_queries(cfg, execution)
    out: dict = {"phases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        # The raw fetch is what is measured: it may run past Prometheus' 2m default.
        server = Prometheus(Path(tmp), flags=("--query.timeout=1h",))
        floor = Path(tmp) / "floor.rules.yml"
        out["floor_rules"] = floor_rules(floor)
        files_of = {"pack": f"{REPO / 'rules'}/*.rules.yml", "floor": str(floor), "none": ""}
        try:
            log(f"{gpus} GPUs: backfilling {HISTORY_S} s of {execution.id} (8 GPUs on {execution.gpus[0].host})")
            server.load_openmetrics(fleet.openmetrics(start, now, execution.id), all_groups(cfg), start, now, "24h")
            server.stop()
            exporter_port = free_port()
            with FleetExporter(fleet, exporter_port):
                for phase, settle in PHASES:
                    files = files_of[phase]
                    server.config_text = scrape_config(fleet, exporter_port, server.port, files)
                    if server.process is None:
                        server.start()
                    else:
                        server.reload()
                    log(f"{gpus} GPUs, rules: {phase}; {settle} s to settle, then {MEASURE_S} s measured")
                    time.sleep(settle)
                    out["phases"][phase] = rule_cost(server, files)
                    if phase == "pack":
                        out["series"] = series_counts(server, fleet)
                        end = int(time.time()) // STEP_SECONDS * STEP_SECONDS
                        for path, times in FETCHES.items():
                            log(f"{gpus} GPUs: up to {times} fetches of 12 series over {FETCH_WINDOW_S} s, {path}")
                            out[path] = time_fetches(server, getattr(queries, path), end - FETCH_WINDOW_S, end, times)
                        # The pack's host map is live; its rules run alongside.
                        log(f"{gpus} GPUs: the steps of one per-GPU rule, {OPERATION_ROUNDS} rounds")
                        out["operations"] = operation_costs(server, cfg)
        finally:
            server.stop()
    held = [g for e in scenario.executions for g in e.gpus]
    out |= {
        "executions": len(scenario.executions),
        "held": len(held),
        "slots": len(scenario.all_gpus()),
        "hosts": len(scenario.hosts),
        "cpus_per_host": scenario.hosts[0].cpus,
        "fetch_window_s": FETCH_WINDOW_S,
        "history_s": HISTORY_S,
    }
    return out


def measure() -> list[tuple[int, dict]]:
    """Each fleet size's figures (``with_rules``), with the built-in defaults."""
    cfg = Config()
    return [(gpus, with_rules(gpus, n, cfg)) for gpus, n in SIZES]
