"""``make bench``, fleet part: what the recorded series buy and what they cost, at 1,000 and 10,000 GPUs.

For each fleet size a real Prometheus on loopback
1. holds 24 hours of one 8-GPU execution of the fleet (its GPUs and host, raw series backfilled
   from OpenMetrics, recorded series backfilled by promtool from the pack's rules);
2. then scrapes the whole fleet live (``bench/exporter.py``) every 15 s and evaluates the
   generated rules, so its head holds every GPU's raw and recorded series;
3. reports rule evaluation cost as Prometheus itself does
   (``prometheus_rule_group_last_duration_seconds``, ``..._iterations_missed_total``), head series
   and memory; and the per-execution fetch of the 12 served series over the last 24 hours at a
   15 s step, three ways: the recorded series, the equivalent raw expressions evaluated at query
   time, and bare selectors reading the same number of samples (the floor).
The same live fleet without the rules is the baseline for series and memory.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpu_execution_pack.config import Config  # noqa: E402
from gpu_execution_pack.promql import Binary, Expr, Paren, Range, Selector, match, render, transform  # noqa: E402
from gpu_execution_pack.rules import catalog  # noqa: E402
from gpu_execution_pack.rules.files import all_groups  # noqa: E402
from gpu_execution_pack.rules.groups import RecordingRule  # noqa: E402
from gpu_execution_pack.rules.recording import recording_groups  # noqa: E402
from gpu_execution_pack.scenario.model import STEP_SECONDS, Execution, Scenario  # noqa: E402
from gpu_execution_pack.scenario.render import raw_for  # noqa: E402

from bench.exporter import FleetExporter, scrape_config  # noqa: E402
from bench.fleet import GENERATION, FleetExposition, fleet_scenario  # noqa: E402
from tests.prometheus_harness import Prometheus, free_port  # noqa: E402

SIZES = ((1000, 100), (10000, 1000))  # (GPUs, executions)
HISTORY_S = 24 * 3600
WARMUP_S = 60  # rule cost is steady once every group has run a few times
MEASURE_S = 60
FETCHES = {"recorded": 7, "floor": 7, "raw": 3}  # fetches per path (the raw one is slow)


def log(message: str) -> None:
    print(f"bench: {time.strftime('%H:%M:%S')} {message}", flush=True)


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
    """A recorded series' expression with every recorded series it reads replaced by its own expression.

    A recorded series read over a window becomes a subquery at the scrape interval.
    """

    def swap(node: Expr) -> Expr | None:
        if isinstance(node, Range) and isinstance(node.expr, Selector) and node.expr.metric in trees:
            return Range(Paren(inline(node.expr.metric, trees)), node.window, f"{STEP_SECONDS}s")
        if isinstance(node, Selector) and node.metric in trees and node.metric != record:
            return Paren(inline(node.metric, trees))
        return None

    return transform(trees[record], swap)


def first_raw_metric(series: catalog.Series) -> str:
    """The fleet's raw metric behind a per-GPU series' first formula (FB_USED for the memory ratio)."""
    keys = series.formulas[0].signals or ("fb_used",)
    raw = raw_for(keys[0], GENERATION)
    assert raw is not None
    return raw.name


def fetch_queries(cfg: Config, execution: Execution) -> Fetch:
    """The recorded, raw and floor queries for ``execution``'s 12 served series."""
    matcher = f'{cfg.execution_label}="{execution.id}"'
    # The rules built for this one execution: every DCGM selector carries its id, as a user
    # without recording rules would write them. Node series have no execution label: the raw
    # host series join every host's node series, as the rules do.
    only = dataclasses.replace(cfg, selectors=dataclasses.replace(cfg.selectors, dcgm=matcher))
    trees = {r.record: r.tree for g in recording_groups(only) for r in g.rules if isinstance(r, RecordingRule)}
    for average, _ in catalog.NODE_COUNTER_AVERAGES.values():
        # Evaluated at query time every step sees a new sample: the plain average, without the
        # rule's "not recorded yet" test (which reads the recorded series itself).
        tree = trees[average.name]
        assert isinstance(tree, Binary) and tree.op == "unless"
        trees[average.name] = tree.lhs
    host = execution.gpus[0].host
    recorded, raw, floor = [], [], []
    for series in catalog.API_SERIES:
        recorded.append(render(series.select(match(catalog.EXECUTION_LABEL, execution.id))))
        raw.append(render(inline(series.name, trees)))
        if series.labels == catalog.GPU_LABELS:
            floor.append(f"{first_raw_metric(series)}{{{matcher}}}")  # the same 8 GPUs' samples
        else:
            floor.append(f'node_memory_MemTotal_bytes{{instance="{host}:9100"}}')  # the host's
    return Fetch(tuple(recorded), tuple(raw), tuple(floor))


def time_fetches(server: Prometheus, queries: tuple[str, ...], start: int, end: int, times: int) -> tuple[float, int]:
    """Median seconds of one whole fetch (the queries one after another), and the samples it returns."""
    seconds, samples = [], 0
    for _ in range(times):
        t = time.perf_counter()
        results = [server.query_range(q, start, end, STEP_SECONDS, timeout=600) for q in queries]
        seconds.append(time.perf_counter() - t)
        empty = [q for q, r in zip(queries, results, strict=True) if not r]
        if empty:
            raise RuntimeError(f"no data for {empty[0]}")
        samples = sum(len(s["values"]) for r in results for s in r)
    return statistics.median(seconds), samples


def floor_rules(path: Path) -> int:
    """A rule file that records, at the served series' interval, one bare selector per per-GPU rule.

    It is what any rule pack recording that many per-GPU series pays at the least: no unit
    conversion, label work or fallbacks. Returns its number of rules.
    """
    rules = []
    for i, series in enumerate(catalog.GPU_SERIES):
        expr = f'{first_raw_metric(series)}{{execution_id!=""}}'
        rules.append({"record": f"bench_floor:series_{i:02d}", "expr": expr})
    path.write_text(json.dumps({"groups": [{"name": "bench-floor", "rules": rules}]}))
    return len(rules)


def rule_cost(server: Prometheus) -> dict:
    """Rule evaluation per second of wall time, sampled every 15 s for MEASURE_S, and missed iterations."""
    before = server.own_metrics()
    per_group: dict[str, list[float]] = {}
    intervals: dict[str, float] = {}
    deadline = time.monotonic() + MEASURE_S
    while time.monotonic() < deadline:
        time.sleep(STEP_SECONDS)
        metrics = server.own_metrics("rule_group")
        for key, value in metrics.items():
            name, _, group = key.partition("/")
            group = group.split(";")[-1]
            if name == "prometheus_rule_group_last_duration_seconds":
                per_group.setdefault(group, []).append(value)
            elif name == "prometheus_rule_group_interval_seconds":
                intervals[group] = value
    after = server.own_metrics()
    window = f"[{MEASURE_S}s]"
    scrapes = server.query(f"sum(count_over_time(up{window}))", time.time())
    answered = server.query(f"sum(sum_over_time(up{window}))", time.time())
    medians = {g: statistics.median(v) for g, v in sorted(per_group.items())}
    missed = "prometheus_rule_group_iterations_missed_total"
    return {
        "groups": {g: (s, intervals[g]) for g, s in medians.items()},
        "share": sum(s / intervals[g] for g, s in medians.items()),
        "missed": after.get(missed, 0.0) - before.get(missed, 0.0),
        # A failed scrape leaves the rules without its series: a cheaper evaluation, not a real one.
        "failed_scrapes": float(scrapes[0]["value"][1]) - float(answered[0]["value"][1]),
        "head_series": after.get("prometheus_tsdb_head_series", 0.0),
        "rss_bytes": after.get("process_resident_memory_bytes", 0.0),
    }


def with_rules(gpus: int, executions: int, cfg: Config) -> dict:
    """History loaded, fleet live with the rules: rule cost, then the three fetch paths."""
    now = int(time.time()) // STEP_SECONDS * STEP_SECONDS
    start = now - HISTORY_S
    scenario = fleet_scenario(gpus, executions, minutes=HISTORY_S // 60 + 120)
    fleet = FleetExposition(scenario, start)
    execution = measured_execution(scenario)
    queries = fetch_queries(cfg, execution)
    with tempfile.TemporaryDirectory() as tmp:
        server = Prometheus(Path(tmp))
        try:
            log(f"{gpus} GPUs: backfilling 24 h of {execution.id} (8 GPUs on {execution.gpus[0].host})")
            server.load_openmetrics(fleet.openmetrics(start, now, execution.id), all_groups(cfg), start, now, "24h")
            server.stop()
            exporter_port = free_port()
            server.config_text = scrape_config(fleet, exporter_port, server.port, f"{REPO / 'rules'}/*.rules.yml")
            with FleetExporter(fleet, exporter_port):
                server.start()
                log(f"{gpus} GPUs live with the rules: {WARMUP_S} s warm-up, then {MEASURE_S} s of rule cost")
                time.sleep(WARMUP_S)
                out = rule_cost(server)
                end = int(time.time()) // STEP_SECONDS * STEP_SECONDS
                for path, times in FETCHES.items():
                    log(f"{gpus} GPUs: {times} fetches of 12 series over 24 h, {path}")
                    out[path] = time_fetches(server, getattr(queries, path), end - HISTORY_S, end, times)
                floor = Path(tmp) / "floor.rules.yml"
                out["floor_rules"] = floor_rules(floor)
                server.config_text = scrape_config(fleet, exporter_port, server.port, str(floor))
                server.reload()
                log(f"{gpus} GPUs: the floor, {out['floor_rules']} bare per-GPU rules, for {MEASURE_S} s")
                time.sleep(2 * STEP_SECONDS)
                out["floor_cost"] = rule_cost(server)
        finally:
            server.stop()
    held = [g for e in scenario.executions for g in e.gpus]
    out |= {"executions": len(scenario.executions), "held": len(held), "slots": len(scenario.all_gpus())}
    return out


def without_rules(gpus: int, executions: int) -> dict:
    """The same fleet live without the rules: the baseline for head series and memory."""
    scenario = fleet_scenario(gpus, executions, minutes=120)
    fleet = FleetExposition(scenario, int(time.time()))
    with tempfile.TemporaryDirectory() as tmp:
        server = Prometheus(Path(tmp))
        exporter_port = free_port()
        server.port = free_port()
        server.config_text = scrape_config(fleet, exporter_port, server.port, "")
        with FleetExporter(fleet, exporter_port):
            server.start()
            try:
                log(f"{gpus} GPUs live without the rules: {WARMUP_S + MEASURE_S} s")
                time.sleep(WARMUP_S + MEASURE_S)
                metrics = server.own_metrics()
            finally:
                server.stop()
    return {
        "head_series": metrics["prometheus_tsdb_head_series"],
        "rss_bytes": metrics["process_resident_memory_bytes"],
    }


def measure() -> list[tuple[int, dict, dict]]:
    cfg = Config()
    return [(gpus, with_rules(gpus, n, cfg), without_rules(gpus, n)) for gpus, n in SIZES]
