"""docs/benchmarks.md and its plot, docs/benchmarks-fetch.png, written from the figures of a run.

``make bench`` (bench/run.py) measures everything and writes them; ``make bench-api`` and ``make
bench-host-map`` replace their part of the figures and write them again; ``python -m bench.run
--render`` writes them from docs/benchmarks.json alone. Each part of the text states its method,
the figures, and the targets they are judged against.
"""

from __future__ import annotations

import json
import math
import statistics

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.promql import parse_duration_seconds

from bench import fleet_rules as bench_fleet
from bench.common import (
    GENERATE_RUNS,
    LONG_DAYS,
    OUT,
    PROBE_P99_TARGET_SECONDS,
    PROBE_PAUSE_SECONDS,
    SERVED_GROUPS,
    read_results,
    save_results,
)
from bench.passes import SETTLE_S, WARMUP_S

DOC = OUT / "benchmarks.md"
PLOT = OUT / "benchmarks-fetch.png"
PACK_PHASES = ("pack", "pack again")  # the built-in defaults, which the targets are judged on
PINNED = bench_fleet.PINNED
# The order the fleet part ran its rule sets in: all five until 2026-12-06, then the pack, the floor and none
# (bench_fleet.PHASES); the report shows those the figures hold.
PHASE_ORDER = ("pack", "floor", "pack again", PINNED, "none")
# The fleet's targets at its largest size: recorded fetch within 1.5x of the floor, raw at least 10x
# slower, rule evaluation under 10 % of the time, the served groups within 1.5x of the floor rules.
FETCH_FLOOR_RATIO_TARGET, RAW_RATIO_TARGET, RULE_SHARE_TARGET, SERVED_FLOOR_RATIO_TARGET = 1.5, 10.0, 0.10, 1.5
# The host map may cost the served groups at most 10 % over the rules before it.
HOST_MAP_RATIO_TARGET = 1.10
# The endpoint's targets: serial p50 within 3x of bare Prometheus; at 50 clients, a
# quarter of its throughput; a 30-day request adds at most its response size to the RSS.
SERIAL_P50_RATIO_TARGET = 3.0
THROUGHPUT_SHARE_TARGET = 0.25
RSS_TARGET_RATIO = 1.0


# Issue 39's targets on its two fleet shapes, by CPUs per host: the served groups of the built-in defaults
# within this many times the floor's time, and of the config doctor writes within DOCTOR_FLOOR_RATIO_TARGET.
DEFAULTS_FLOOR_RATIO_TARGETS = {128: 1.5, 32: 2.0}
DOCTOR_FLOOR_RATIO_TARGET = 1.2
# The rule sets of each shape's run, as bench/shapes.py names them, and as the report calls them.
SHAPE_SETS = {"floor": "floor", "defaults": "built-in defaults", "doctor": "doctor's config"}
JUDGED = {"defaults": "the built-in defaults", "doctor": "doctor's config"}


def add_figures(key: str, figures: dict) -> dict:
    """Put one measurement's ``figures`` under ``key`` in docs/benchmarks.json and rewrite the report
    from the whole; returns ``figures``."""
    results = read_results()
    results[key] = figures
    save_results(results)
    write(results)
    return figures


def write(results: dict) -> None:
    """docs/benchmarks.md and its plot from the figures of one run."""
    plot(results["fleet"])
    DOC.write_text(report(results), encoding="utf-8")


def report(results: dict) -> str:
    """The text of docs/benchmarks.md for the figures of one run."""
    api, fleet, generate = results["api"], results["fleet"], results["generate_seconds"]
    lines = [
        "<!-- Written by `make bench` (bench/run.py). Do not edit: rerun it. -->",
        "# Benchmarks",
        "",
        f"One run on this machine ({results['machine']}; {results['prometheus']}). The machine is shared and noisy:",
        "read the medians and the ratios between rows, not the last digit. The figures of `make bench-host-map`,",
        "`make bench-host-identity` and `make bench-archive` are from those targets' own runs, each named where",
        "it is shown.",
        "",
    ]
    lines += endpoint_section(api)
    lines += shapes_section(results.get("shapes"))
    lines += rule_costs_section(results.get("rule_costs"))
    lines += fleet_section(fleet, results.get("host_map_ab"), results.get("host_identity"))
    lines += archive_section(results.get("archive"))
    lines += [
        "",
        "## Generating",
        "",
        f"`make rules dashboards` with the venv in place: {generate:.1f} s (median of {GENERATE_RUNS}).",
    ]
    return "\n".join(lines) + "\n"


def endpoint_section(api: dict) -> list[str]:
    """The metrics endpoint's part: each case beside bare Prometheus, and the endpoint's targets."""
    lines = [
        "## Metrics endpoint beside bare Prometheus",
        "",
        "Method (`bench/api.py`): a real Prometheus on loopback holds the training scenario (two executions,",
        "6 GPUs, 2 hosts, 40 minutes at 15 s). `gpu-execution-pack serve` runs as its own process, with one",
        "worker and with two; an async client sends requests one or 50 at a time, alternating the two",
        "executions, each answered with all 12 series (5 queries to Prometheus: 3 for the span, reused",
        "for a finished execution after its first request, one for the GPU series, one for the host",
        "series). The floor, in the same run: one `query_range` for the same execution's 12 series at the",
        "same step, straight to Prometheus.",
        "",
        "| case | server | median | p95 | p99 | requests/s | errors |",
        "|---|---|---|---|---|---|---|",
    ]

    def line(r: list, server: str) -> str:
        name, _, median, p95, p99, rate, errors = r
        ms = " | ".join(f"{x * 1000:.0f} ms" for x in (median, p95, p99))
        return f"| {name} | {server} | {ms} | {rate:.0f} | {errors} |"

    for i, bare in enumerate(api["bare"]):
        lines.append(line(bare, "bare Prometheus"))
        for workers, rows in sorted(api["endpoint"].items()):
            lines.append(line(rows[i], f"endpoint, {workers} worker(s)"))
    best = max(api["endpoint"].values(), key=lambda rows: rows[1][5])
    serial = api["endpoint"]["1"][0][2] / api["bare"][0][2]
    share = best[1][5] / api["bare"][1][5]
    lines += [
        "",
        "| target | measured | met |",
        "|---|---|---|",
        f"| serial p50 within {SERIAL_P50_RATIO_TARGET:g}x of bare Prometheus | {serial:.1f}x | "
        f"{'yes' if serial <= SERIAL_P50_RATIO_TARGET else 'no'} |",
        f"| throughput at 50 clients at least {THROUGHPUT_SHARE_TARGET:.0%} of bare Prometheus' | {share:.0%} | "
        f"{'yes' if share >= THROUGHPUT_SHARE_TARGET else 'no'} |",
        *long_targets(api.get("long")),
        "",
        "Where a target is missed: the endpoint parses Prometheus' JSON, converts units and writes its own",
        "JSON in Python, on the same cores as Prometheus and the clients; bare Prometheus does none of it.",
        *long_method(api.get("long")),
    ]
    return lines


def long_targets(long: dict | None) -> list[str]:
    """The target rows of the 30-day request (``measure_long``), "not measured" in results without it."""
    rss_target = "| a 30-day, 8-GPU request adds at most its response size to RSS |"
    limit = f"{PROBE_P99_TARGET_SECONDS * 1000:.0f} ms"
    probe_target = f"| an unauthenticated request's p99 under {limit} while a 30-day request runs |"
    if long is None:
        return [f"{rss_target} not measured | - |", f"{probe_target} not measured | - |"]
    mb = 1e6
    rise = long["rss_peak_bytes"] - long["rss_baseline_bytes"]
    answer = long["response_bytes"]
    whole = long["status"] == 200 and long["complete"]
    rss = (
        f"+{rise / mb:.0f} MB (from {long['rss_baseline_bytes'] / mb:.0f} MB) for a {answer / mb:.0f} MB answer, "
        f"{long['seconds']:.0f} s, first byte at {long['first_byte_seconds']:.1f} s"
        + ("" if whole else f" (status {long['status']}, cut short: {not long['complete']}: not a whole answer)")
    )
    p99 = long["probe_p99_seconds"]
    probes = (
        f"p99 {p99 * 1000:.1f} ms (median {long['probe_median_seconds'] * 1000:.0f} ms, max "
        f"{long['probe_max_seconds'] * 1000:.0f} ms; {long['probes']} requests, {long['probes_over_target']} over "
        f"{PROBE_P99_TARGET_SECONDS * 1000:.0f} ms)"
    )
    return [
        f"{rss_target} {rss} | {'yes' if whole and rise <= RSS_TARGET_RATIO * answer else 'no'} |",
        f"{probe_target} {probes} | {'yes' if p99 < PROBE_P99_TARGET_SECONDS else 'no'} |",
    ]


def long_method(long: dict | None) -> list[str]:
    """How the 30-day figures were measured."""
    if long is None:
        return []
    return [
        "",
        f"The 30-day rows: a second Prometheus holds one execution of 8 GPUs on 2 hosts for {LONG_DAYS} days at",
        f"15 s ({long['samples']:,} samples of the 12 API series, backfilled in {long['backfill_seconds']:.0f} s:",
        "the recorded series written directly as OpenMetrics, one promtool block, not raw DCGM through rule",
        "backfill, which the endpoint does not read). One `serve` process (one worker) answers one request for",
        "the whole execution at 15 s, which it streams (curl reads it); RSS is the process's VmRSS before",
        "the request against its VmHWM (reset through clear_refs) and VmRSS sampled during it. Meanwhile one",
        "client sends the metrics route without a key (401) one request after another, "
        f"{PROBE_PAUSE_SECONDS * 1000:.0f} ms apart.",
        "Prometheus, the endpoint, curl and the clients share this machine's cores.",
    ]


def shapes_section(shapes: list[dict] | None) -> list[str]:
    """Issue 39's two fleet shapes (bench/shapes.py): the floor, the defaults and doctor's config side by side,
    doctor's config, and the targets; nothing for figures from before make bench measured them."""
    if not shapes:
        return []
    first = shapes[0]
    lines = [
        "## Fleet shapes: the built-in defaults and doctor's config against the floor",
        "",
        f"Method (`bench/shapes.py`): per shape, a fleet of {first['gpus']:,} GPUs ({first['hosts']:,} hosts, one",
        "dcgm-exporter and one node_exporter target each, built as in the fleet part below), every target",
        "carrying the target label `hostname` as a scrape config that names each target's host sets it, is",
        "scraped by one Prometheus that first runs the served groups of the built-in defaults. After the",
        f"warm-up ({WARMUP_S} s: every range the served rules read is full) the real `gpu-execution-pack doctor",
        "--write-config` runs against it, and the served groups of the config it wrote are generated. Then",
        "the defaults, doctor's config and the floor (the fleet part's floor rules) take turns, swapped by",
        f"SIGHUP, twice each: each pass settles {SETTLE_S} s, then its groups' median evaluation time over their",
        f"interval is summed over {bench_fleet.MEASURE_S} s (the served-group share of the time); the figure is",
        "the median of the two passes, the ratio against the floor of the same run. The GPU entries the",
        "defaults and doctor's config record are checked equal: a config that recorded fewer would look",
        "cheaper for that alone.",
        "",
    ]
    for shape in shapes:
        lines += shape_lines(shape)
    lines += ["| target | measured | |", "|---|---|---|"]
    lines += [f"| {name} | {value} | {'met' if ok else '**missed**'} |" for name, ok, value in shape_checks(shapes)]
    lines += costliest_rules(shapes)
    lines += per_gpu_bounds(shapes)
    return [*lines, "", *SHAPE_NOTES, ""]


def rule_costs_section(costs: dict | None) -> list[str]:
    """Each per-GPU rule's expression against the floor's bare selector (bench/rule_costs.py): the built-in
    defaults now and before the commit it names, and doctor's config, with each set's sum."""
    if not costs:
        return []
    floor, sets = costs["floor"], costs["median_seconds"]
    now, before_changed, doctor = sets["defaults"], sets.get("before", {}), sets.get("doctor", {})
    before = {record: before_changed.get(record, seconds) for record, seconds in now.items()}

    def cell(seconds: float | None) -> str:
        return "-" if seconds is None else f"{seconds:.3f} s ({seconds / floor:.1f}x)"

    lines = [
        "",
        "## Per-GPU rules one by one (`make bench-rules`)",
        "",
        f"Method (`bench/rule_costs.py`): a fleet of {costs['gpus']:,} GPUs ({costs['shape']}) scraped live by one",
        "Prometheus evaluating the built-in defaults' served groups. Each per-GPU rule's expression is asked as an",
        "instant query at the per-GPU group's newest evaluation, in a shuffled order, "
        f"{costs['rounds']} rounds; the figure is the median",
        "of Prometheus' own evaluation time (`stats=all`) and, in brackets, its ratio to the floor's median: one bare",
        f"selector of the raw utilisation (`{costs['floor_expr']}`, {floor:.3f} s), what each floor rule reads. A rule",
        "also writes its samples, the same for every expression of it: this is the part a rewrite changes.",
        f"*Before*: the built-in defaults' expression at commit {costs['before']} where it differs. *Doctor's",
        f"config*: `{json.dumps(costs['doctor_config'], sort_keys=True)}`, what doctor wrote for this shape.",
        "",
        f"| per-GPU rule | built-in defaults | before ({costs['before']}) | doctor's config |",
        "|---|---|---|---|",
    ]
    for record, seconds in sorted(now.items(), key=lambda kv: -kv[1]):
        changed = cell(before_changed[record]) if record in before_changed else "same"
        lines.append(f"| `{record}` | {cell(seconds)} | {changed} | {cell(doctor.get(record))} |")
    sums = [sum(now.values()), sum(before.values()), sum(doctor.values())]
    lines.append(f"| all {len(now)} | {cell(sums[0])} | {cell(sums[1])} | {cell(sums[2])} |")
    lines += [
        "",
        f"The defaults' per-GPU expressions take {sums[0]:.2f} s against {sums[1]:.2f} s at {costs['before']} "
        f"({sums[0] / sums[1] - 1:+.0%}); as many bare selectors would take {len(now) * floor:.2f} s.",
    ]
    return lines


def costliest_rules(shapes: list[dict], most: int = 4) -> list[str]:
    """Where each shape's served rules spend their time: the costliest rules of the defaults and of doctor's
    config, by Prometheus' own evaluation time of each rule (read at the end of each pass, the median)."""
    rows = []
    for shape in shapes:
        for name in ("defaults", "doctor"):
            seconds = shape.get("rule_seconds", {}).get(name)
            if not seconds:  # figures from before the shapes kept each rule's time
                continue
            top = sorted(seconds.items(), key=lambda kv: -kv[1])[:most]
            rows.append(
                f"| {shape['cpus_per_host']} CPUs | {SHAPE_SETS[name]} | {sum(seconds.values()):.2f} s | "
                + ", ".join(f"`{rule}` {value:.2f} s" for rule, value in top)
                + " |"
            )
    if not rows:
        return []
    return [
        "",
        "Where the time goes: each rule's evaluation time as Prometheus reports it (`/api/v1/rules`, read at the",
        "end of each pass, the median of the two), the costliest of each rule set, and all of its rules summed:",
        "",
        "| fleet | rules | summed | costliest rules |",
        "|---|---|---|---|",
        *rows,
    ]


# The per-GPU series: each rule of them writes one series per GPU entry. Those a run measured are those its served
# groups held then (a run loads the served groups alone), whichever group the catalog puts them in now.
PER_GPU_SERIES = frozenset(s.name for s in catalog.ALL_SERIES if s.labels == catalog.GPU_LABELS)


def per_gpu_bounds(shapes: list[dict]) -> list[str]:
    """What no rewrite of a rule set's expressions takes out: its per-GPU rules each write one series per GPU
    entry at every evaluation, as each of the floor's bare selectors does, and it records a host CPU rate as the
    floor does. Their count times the floor's median per-GPU rule time, with the floor's CPU rate (at the rule
    set's CPU interval), as a share of the interval, against the target: where that alone is over it, the target
    asks for fewer series per GPU, not cheaper PromQL."""
    rows = []
    for shape in shapes:
        seconds = shape.get("rule_seconds", {})
        floor_rules = seconds.get("floor", {})
        floor = [v for k, v in floor_rules.items() if k.startswith(bench_fleet.FLOOR_GPU_RULE_PREFIX)]
        if not floor:  # figures from before the shapes kept each rule's time
            continue
        each, cpu = statistics.median(floor), floor_rules.get(bench_fleet.FLOOR_CPU_RULE, 0.0)
        cpus, floor_share = shape["cpus_per_host"], shape["median"]["floor"]
        configs = {"defaults": Config(), "doctor": config_from_mapping(shape["doctor_config"] or {}, "doctor")}
        for name, target in judged_targets(cpus):
            rules = [rule for rule in seconds.get(name, {}) if rule in PER_GPU_SERIES]
            if target is None or not rules:
                continue
            cpu_interval = configs[name].node.cpu_rate_interval
            every = parse_duration_seconds(cpu_interval) / bench_fleet.STEP_SECONDS if cpu_interval else 1
            cpu_per_step = cpu / every  # the CPU rate's seconds per served evaluation
            least = (len(rules) * each + cpu_per_step) / bench_fleet.STEP_SECONDS
            # The per-GPU rules the target's time holds at that cost, with the CPU rate and nothing else (a
            # whole number of rules: a sum that lands on one exactly is not rounded down by float error).
            room = math.floor((target * floor_share * bench_fleet.STEP_SECONDS - cpu_per_step) / each + 1e-9)
            rows.append(
                f"| {cpus} CPUs | {SHAPE_SETS[name]} | {len(rules)} (the floor: {len(floor)}) | "
                f"{100 * least:.1f} % ({least / floor_share:.2f}x the floor) | {target}x | {room} | "
                f"{'yes' if least <= target * floor_share else '**no**'} |"
            )
    if not rows:
        return []
    return [
        "",
        "What no rewrite of the expressions takes out: each per-GPU rule writes one series per GPU entry at every",
        "evaluation, as each of the floor's bare selectors does (one per raw input the served series read), and",
        "each rule set records a host CPU rate, as the floor does. Were every per-GPU rule of a rule set as cheap as",
        "the floor's median one, and its CPU rate as the floor's (at the rule set's `cpu_rate_interval`), those",
        "alone would take, before the host map, the host series and the other host rules:",
        "",
        "| fleet | rules | per-GPU rules | at the floor's time per rule, with its CPU rate | target "
        "| per-GPU rules it holds | within reach |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ]


# What the shapes' figures led to: written by hand, kept with the code (see TARGET_NOTES).
SHAPE_NOTES = (
    "- The targets are missed on both shapes. Since issue 39 measured 1.99x and 2.62x, the per-GPU group",
    "  grew from 14 to 19 rules (a shared GPU's share, worked and attributed power series, the device-wide",
    "  utilisation and memory, the seconds each sample stands for), each over every GPU entry at every",
    "  evaluation. doctor's config takes out the host-map join, the other generations' names and the other",
    "  vendor's, and shortens `rate_window_fallback` to four of the slowest scrape the rules read; what it",
    "  leaves is the per-GPU rules themselves.",
    "- Since 2026-12-06 the host maps run once a minute (`node.host_map_interval`) and the host CPU rate in",
    "  a group of its own at the served interval (`host_rates`). In the run before, with every other rule",
    "  the same, the defaults' served groups took 76.4 % and 58.7 % of the time on the two shapes (3.96x",
    "  and 6.76x; the floor 19.3 % and 8.7 %), and the host maps' group with the CPU rate 40.2 % at 10,000",
    "  GPUs in the fleet part below. The floor's share moves from run to run on this shared machine as the",
    "  rules' do, so a ratio moves less than the shares.",
    f"- `{catalog.GPU_SAMPLE_SECONDS.name}` (issue 36) was the costliest per-GPU rule of doctor's config on",
    "  the 32-CPU shape in a run before this one, at 0.85 s: it read the utilisation seven times per",
    "  evaluation. It now reads it four times (the gap is the current sample's timestamp less the",
    "  previous one's, and a first sample the newest previous sample of any GPU).",
    "- Where the last table says **no**, a rewrite of the rules' expressions cannot be expected to reach the",
    "  target: they write 19 series per GPU entry at every evaluation against the floor's 11, and even at a",
    "  bare selector's cost each that is over the target. Meeting it takes a pack that records little more",
    "  per GPU than it reads: the shared-GPU series (share, work share, worked, attributed power, device-wide",
    "  utilisation and memory), the memory ratios and the sample seconds computed where they are read (the",
    "  report, the endpoint, the dashboards, the alerts) instead of recorded, a change of the series the pack",
    "  serves that this run does not make. Where the table leaves room, what is over it is the",
    "  normalisation's own work: the device-wide joins, the memory total's fallbacks, the sample seconds'",
    "  four reads, and on the defaults the host-map join in every rule.",
    "- This run's machine was slower than the run before's: the floor took 26.1 % and 11.5 % of the time",
    "  on the two shapes, against 10.7 % and 5.4 %. Against it the defaults took 2.79x and 5.02x then, doctor's",
    "  config 2.34x and 3.47x: a ratio moves by a third between runs, more than the rules changed between",
    "  them. Between them the memory capacity came to read the recorded device memory use and the attributed",
    "  power to compute each row once, which took their expressions from 0.77 s and 0.38 s to 0.45 s and",
    "  0.22 s, a tenth of the defaults' per-GPU expressions (the per-GPU rules' section below, measured apart",
    "  from this run, each expression against a bare selector at the same instants).",
    "- A rule's evaluation time holds the waits of the groups evaluated beside it on the two cores: in the",
    "  run before this one, on the 128-CPU shape, the host series' rules (about 2,000 series each) took",
    "  0.25-0.52 s in doctor's passes against 0.02-0.06 s in the defaults'. Read the costliest rules as",
    "  where the time went, not as what each costs alone.",
)


def shape_lines(shape: dict) -> list[str]:
    """One shape's rule sets side by side, and the config doctor wrote."""
    m, floor = shape["median"], shape["median"]["floor"]
    profiling = ", dcgm-exporter's profiling fields enabled" if shape["profiling"] else ""
    lines = [
        f"**{shape['cpus_per_host']} CPUs x {shape['cpu_modes']} modes per host{profiling}** "
        f"({shape['recorded_gpus']:,} GPU entries recorded by both configs):",
        "",
        "| rules | served groups (passes) | against the floor | Prometheus CPU | missed iterations | failed scrapes |",
        "|---|---|---|---|---|---|",
    ]
    for name, said in SHAPE_SETS.items():
        passes = shape["passes"][name]
        cpu = statistics.median(p["cpu_cores"] for p in passes)
        lines.append(
            f"| {said} | {100 * m[name]:.1f} % ({percents(shape['shares'][name])}) | {m[name] / floor:.2f}x | "
            f"{cpu:.2f} cores | {sum(p['missed'] for p in passes):.0f} | "
            f"{sum(p['failed_scrapes'] for p in passes):.0f} |"
        )
    # The Prometheus doctor read is the bench's own, on a port of the run: it says nothing about the fleet.
    advised = dict(shape["doctor_config"] or {})
    if api := {k: v for k, v in advised.pop("api", {}).items() if k != "prometheus_url"}:
        advised["api"] = api
    written = json.dumps(advised, sort_keys=True) if advised else "nothing"
    checks = shape["doctor_checks"]
    failed = [name for name, status in checks.items() if status == "fail"]
    return [
        *lines,
        "",
        f"doctor's config: `{written}` (doctor exited {shape['doctor_exit']}"
        + (f"; its failed checks: {', '.join(failed)}" if failed else "")
        + ").",
        "",
    ]


def judged_targets(cpus: int) -> tuple[tuple[str, float | None], ...]:
    """The rule sets judged on a shape of hosts of ``cpus`` CPUs, and each one's target (None: the issue set none)."""
    return (("defaults", DEFAULTS_FLOOR_RATIO_TARGETS.get(cpus)), ("doctor", DOCTOR_FLOOR_RATIO_TARGET))


def shape_checks(shapes: list[dict]) -> list[Check]:
    """The defaults and doctor's config against each shape's floor, judged on issue 39's targets."""
    checks: list[Check] = []
    for shape in shapes:
        m, cpus = shape["median"], shape["cpus_per_host"]
        where = f"on hosts of {cpus} CPUs x {shape['cpu_modes']} modes, {shape['gpus']:,} GPUs"
        for name, target in judged_targets(cpus):
            if target is None:  # a shape the issue set no target for
                continue
            ratio = m[name] / m["floor"]
            checks.append(
                (
                    f"served groups of {JUDGED[name]} within {target}x of the floor {where}",
                    ratio <= target,
                    f"{ratio:.2f}x ({100 * m[name]:.1f} % against {100 * m['floor']:.1f} %)",
                )
            )
    return checks


def served_share(phase: dict) -> float:
    """The share of the time the served groups (those at rule_interval) take in one phase."""
    return sum(s / i for g, (s, i) in phase["groups"].items() if g.endswith(SERVED_GROUPS))


def fleet_section(fleet: list[tuple[int, dict]], ab: dict | None = None, identity: dict | None = None) -> list[str]:
    """The fleet part of the report: method, series, rule cost per phase, per group, the fetch, the targets."""
    largest, r = fleet[-1]
    return [
        *fleet_method(fleet),
        *rule_cost_lines(fleet),
        *group_lines(largest, r),
        *operations_section(largest, r),
        *fetch_lines(fleet),
        *targets(fleet[-1], ab, identity),
    ]


def fleet_method(fleet: list[tuple[int, dict]]) -> list[str]:
    """How the fleet is built and measured, and the series it holds at each size."""
    first = fleet[0][1]
    history = first.get("history_s", OLD_FETCH_WINDOW_S)
    lines = [
        "",
        "## The fleet: what the recorded series buy, and what they cost",
        "",
        "Method (`bench/fleet_rules.py`): a synthetic fleet (`bench/fleet.py`) published as a default",
        "install publishes it. Hosts of 8 GPUs, every 16th partitioned into two MIG instances per GPU;",
        "executions of 1 to 64 GPUs on consecutive GPUs, some spanning hosts, some sharing one, each",
        "cycling through the scenario model's phases. dcgm-exporter 4.8 publishes every field of its",
        "release's `etc/default-counters.csv` (25) and the enforced power limit on every GPU entry,",
        "with the labels real output carries (`gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`,",
        "`Hostname`, `DCGM_FI_DRIVER_VERSION`, the execution and tenant); node_exporter publishes",
        f"8 CPU modes on each of {first['cpus_per_host']} logical CPUs per host, meminfo, 6 filesystems and 11",
        "network interfaces (netdev and netclass). Both are served in scrape targets of 32 hosts and",
        f"scraped every 15 s by a real Prometheus. Before the live scrape, {span(history)} of one 8-GPU",
        "execution are backfilled (what the rules read of its GPUs and host: raw series from",
        "OpenMetrics, recorded series by `promtool tsdb create-blocks-from rules`); the rest of the",
        "fleet has only its live minutes (24 h of 10,000 GPUs is about 0.75 billion samples). Raw",
        "series are the samples each scrape took (`scrape_samples_scraped`), recorded series the head's",
        "series less those, with the pack's rules running.",
        "",
        "| GPUs (slots, held) | hosts | executions | raw series per GPU entry | raw series per host "
        "| raw series | recorded series | recorded per execution | head series | RSS |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for gpus, r in fleet:
        n, p = r["series"], r["phases"]["pack"]
        lines.append(
            f"| {gpus:,} ({r['slots']:,}, {r['held']:,}) | {r['hosts']:,} | {r['executions']:,} | "
            f"{n['per_gpu']:.1f} | {n['per_host']:,.0f} | {n['dcgm_series'] + n['node_series']:,.0f} | "
            f"{n['recorded_series']:,.0f} | {n['recorded_series'] / r['executions']:,.0f} | "
            f"{p['head_series']:,.0f} | {p['rss_bytes'] / 2**30:.1f} GiB |"
        )
    return lines


def rule_cost_lines(fleet: list[tuple[int, dict]]) -> list[str]:
    """What each rule set costs Prometheus, at each size, in the order the sets ran."""
    first = fleet[0][1]
    floor = first["floor_rules"]
    if isinstance(floor, int):  # figures from before the floor took a CPU rate per host (2026-12-04)
        hosts = [
            "over its raw metric, and per host series one `count by (job, instance)` of the raw metric it",
            "reads, the least any rules reading these inputs every 15 s pay),",
        ]
    else:
        floor, hosts = (
            len(floor),
            [
                "over its raw metric, the host memory gauges bare and one CPU rate per host, as listed below;",
                "the least any rules reading these inputs every 15 s pay),",
            ],
        )
    lines = [
        "",
        "Rule cost. One Prometheus, scraping the fleet throughout, evaluates in turn the pack's rules",
        f"(built-in defaults), the floor ({floor} rules: one bare selector per per-GPU series",
        *hosts,
        *(
            [
                "the pack's rules again (so drift over the run shows), the pack's rules with `dcgm.generations`",
                f"pinned to the fleet's ({bench_fleet.GENERATION}: one exporter name per field, no fallback across",
                "generations), and no rules.",
            ]
            if PINNED in first["phases"]
            else [
                "and no rules (the defaults against the floor in interleaved passes after a 5-minute warm-up, and",
                "the config doctor writes, are in the fleet shapes' section above).",
            ]
        ),
        "Each set settles after its reload (a minute for the",
        "pack, whose derived groups run every minute), then `prometheus_rule_group_last_duration_seconds`",
        f"is read every 15 s for {bench_fleet.MEASURE_S} s: each group's median over its own interval, summed,",
        "is the share of the time the rules take (groups run concurrently, on these 2 cores shared with",
        "the exporter). *Prometheus CPU* is its own `process_cpu_seconds_total` per second over the same",
        "minute: scraping and ingestion alone is the *none* row. A failed scrape (over the 15 s",
        "timeout) leaves the rules an evaluation without data, so they are counted.",
        "",
        "| GPUs | rules | rule time per second | served groups | missed iterations | failed scrapes | Prometheus CPU |",
        "|---|---|---|---|---|---|---|",
    ]
    for gpus, r in fleet:
        for phase in [p for p in PHASE_ORDER if p in r["phases"]]:  # the order they ran in (the file sorts keys)
            c = r["phases"][phase]
            served = f"{100 * served_share(c):.1f} %" if phase in (*PACK_PHASES, PINNED) else "-"
            lines.append(
                f"| {gpus:,} | {phase} | {100 * c['share']:.1f} % | {served} | {c['missed']:.0f} | "
                f"{c['failed_scrapes']:.0f} | {c['cpu_cores']:.2f} cores |"
            )
    return lines


def group_lines(largest: int, r: dict) -> list[str]:
    """Each rule group's evaluation time in the pack runs (one, or two in older figures) at the largest size."""
    runs = [p for p in PACK_PHASES if p in r["phases"]]
    lines = [
        "",
        f"Per group at {largest:,} GPUs (median evaluation time, {'both pack runs' if len(runs) > 1 else 'the pack'}):",
        "",
        "| group | interval | " + " | ".join(f"{p}: seconds | share" for p in runs) + " |",
        "|---|---|" + "---|---|" * len(runs),
    ]
    for g, (_, i) in r["phases"]["pack"]["groups"].items():
        times = [r["phases"][p]["groups"].get(g, (float("nan"), i))[0] for p in runs]
        lines.append(f"| `{g}` | {i:.0f} s | " + " | ".join(f"{t:.3f} | {100 * t / i:.1f} %" for t in times) + " |")
    return lines


# The fetch's window in runs that did not record it: 24 hours, until make bench bounded the raw fetch.
OLD_FETCH_WINDOW_S = 86400


def span(seconds: float) -> str:
    """A window as the report says it: "24 hours", "1 hour", "30 minutes"."""
    if seconds % 3600:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.0f} hour{'s' if seconds != 3600 else ''}"


def fetch_rounds(fleet: list[tuple[int, dict]]) -> str:
    """How many fetches each path's median is of: as the figures record it, else as FETCHES asked."""
    ran = {path: sorted({r[path][2] for _, r in fleet if len(r[path]) > 2}) for path in bench_fleet.FETCHES}
    if not all(ran.values()):
        return f"{bench_fleet.FETCHES['recorded']} fetches ({bench_fleet.FETCHES['raw']} for raw)"
    said = {path: " and ".join(str(n) for n in counts) for path, counts in ran.items()}
    return (
        f"{said['recorded']} fetches ({said['floor']} for the floor, {said['raw']} for raw: no new fetch starts "
        f"once a path's have taken {bench_fleet.FETCH_BUDGET_S} s)"
    )


def fetch_lines(fleet: list[tuple[int, dict]]) -> list[str]:
    """The fetch of one execution's served series: recorded, raw and floor, at each size."""
    window = fleet[-1][1].get("fetch_window_s", OLD_FETCH_WINDOW_S)
    lines = [
        "",
        f"Fetch: all 12 served series of the backfilled 8-GPU execution over the last {span(window)} at a",
        f"15 s step ({window // 15 + 1:,} points a series), one range query per series, one after another, with the",
        "pack's rules running; the same window and step for the three paths. *Recorded*: the pack's series",
        "(`execution_gpu:...{execution_id=...}`).",
        "*Raw*: each rule's expression built for this execution alone (its id in every DCGM selector,",
        "its host's target in every node selector, the host CPU rated per CPU, recorded series it",
        "reads replaced by their own expressions), evaluated at query time. *Floor*: one bare selector",
        "per series reading the same number of samples (a raw DCGM metric of the same 8 GPUs, the",
        f"host's MemTotal). Median of {fetch_rounds(fleet)}.",
        "",
        "| GPUs | recorded | raw | floor | recorded / floor | raw / recorded | samples returned |",
        "|---|---|---|---|---|---|---|",
    ]
    for gpus, r in fleet:
        rec, raw, floor = r["recorded"][0], r["raw"][0], r["floor"][0]
        lines.append(
            f"| {gpus:,} | {rec * 1000:.0f} ms | {raw * 1000:,.0f} ms | {floor * 1000:.0f} ms | "
            f"{rec / floor:.2f} | {raw / rec:.1f} | {r['recorded'][1]:,} |"
        )
    return [*lines, "", f"![Fetch latency against fleet size]({PLOT.name})", ""]


def operations_section(gpus: int, r: dict) -> list[str]:
    """What each step of one per-GPU rule costs, against its raw read alone."""
    if "operations" not in r:
        return []
    ops = r["operations"]
    read = dict(ops)[bench_fleet.RAW_READ_STEP]
    lines = [
        "",
        f"One per-GPU rule taken apart at {gpus:,} GPUs (the temperature's; `bench_fleet.operation_steps`):",
        "each step alone over the same raw read, then the whole rule, as instant queries wrapped in",
        f"`count()`, {bench_fleet.OPERATION_ROUNDS} rounds interleaved while the pack's rules run; Prometheus'",
        "own `evalTotalTime`, median.",
        "",
        "| step | seconds | against the raw read |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {v:.3f} | {v / read:.2f}x |" for name, v in ops]
    return lines


# One line of the targets' table: what is targeted, whether it is met, what was measured.
Check = tuple[str, bool, str]


def targets(largest: tuple[int, dict], ab: dict | None = None, identity: dict | None = None) -> list[str]:
    """The issues' targets at the largest size, each met or missed, and what was done about a miss."""
    gpus, r = largest
    checks = [*fetch_checks(gpus, r), *rule_checks(gpus, r)]
    if ab is not None and "cpus_per_host" in ab:  # the host map against the rules before it, one run
        checks.append(host_map_check(ab))
    if identity is not None:  # hosts named at scrape against the join, one run
        checks += host_identity_checks(identity)
    lines = ["## Targets", "", "| target | measured | |", "|---|---|---|"]
    lines += [f"| {name} | {value} | {'met' if ok else '**missed**'} |" for name, ok, value in checks]
    if identity is not None and "rule_seconds" in identity:
        lines += ["", *slowest_rules(identity)]
    if identity is not None and "floor_rules" in identity:
        lines += ["", *floor_rule_lines(identity)]
    return [*lines, "", *target_notes(r)]


def slowest_rules(run: dict, most: int = 6) -> list[str]:
    """The served rules that took longest with hosts named at scrape, each against the join's."""
    scrape, join = run["rule_seconds"]["scrape"], run["rule_seconds"]["join"]
    total = sum(scrape.values())
    lines = [
        f"The {most} slowest served rules with hosts named at scrape (`make bench-host-identity`, each rule's",
        "last evaluation after each pass, median), of their groups' summed time per evaluation, with the join's:",
        "",
        "| rule | named at scrape | share | with the join |",
        "|---|---|---|---|",
    ]
    for rule, seconds in sorted(scrape.items(), key=lambda item: -item[1])[:most]:
        lines.append(f"| `{rule}` | {seconds:.3f} s | {100 * seconds / total:.0f} % | {join.get(rule, 0.0):.3f} s |")
    return [*lines, f"| all {len(scrape)} | {total:.2f} s | | {sum(join.values()):.2f} s |"]


def fetch_checks(gpus: int, r: dict) -> list[Check]:
    """The recorded fetch against the floor and against raw."""
    rec, raw, floor = r["recorded"][0], r["raw"][0], r["floor"][0]
    return [
        (
            f"recorded fetch within {FETCH_FLOOR_RATIO_TARGET}x of the floor at {gpus:,} GPUs",
            rec / floor <= FETCH_FLOOR_RATIO_TARGET,
            f"{rec / floor:.2f}x",
        ),
        (
            f"recorded at least {RAW_RATIO_TARGET:.0f}x faster than raw at {gpus:,} GPUs",
            raw / rec >= RAW_RATIO_TARGET,
            f"{raw / rec:.1f}x",
        ),
    ]


def rule_checks(gpus: int, r: dict) -> list[Check]:
    """The pack's rule cost: its share of the time, and its served groups against the floor rules."""
    floor_share = r["phases"]["floor"]["share"]
    packs = [r["phases"][p] for p in PACK_PHASES if p in r["phases"]]
    served = [served_share(p) for p in packs]
    last, floor_rules = packs[-1], r["phases"]["floor"]

    def above(phase: dict) -> float:  # Prometheus' CPU cores beyond what scraping alone takes
        return round(phase["cpu_cores"] - r["phases"]["none"]["cpu_cores"], 2)

    checks = [
        (
            f"rule evaluation under {100 * RULE_SHARE_TARGET:.0f} % of the time at {gpus:,} GPUs, no missed iterations",
            all(p["share"] < RULE_SHARE_TARGET and p["missed"] == 0 for p in packs),
            " and ".join(f"{100 * p['share']:.1f} %, {p['missed']:.0f} missed" for p in packs),
        ),
        (
            f"served groups within {SERVED_FLOOR_RATIO_TARGET}x of the floor rules",
            max(served) <= SERVED_FLOOR_RATIO_TARGET * floor_share,
            " and ".join(f"{100 * s:.1f} %" for s in served)
            + f" against {100 * floor_share:.1f} % ("
            + " and ".join(f"{s / floor_share:.2f}x" for s in served)
            + f"); Prometheus CPU above scraping alone, every group of the {'second ' if len(packs) > 1 else ''}run: "
            + f"{above(last):.2f} against {above(floor_rules):.2f} cores "
            # A tiny fleet's floor (BENCH_SMALL=1) takes no CPU to two decimals beyond scraping.
            + (f"({above(last) / above(floor_rules):.2f}x)" if above(floor_rules) else "(the floor: none)"),
        ),
    ]
    if PINNED in r["phases"]:  # figures from before 2026-12-06 (bench/shapes.py measures doctor's config now)
        pinned = served_share(r["phases"][PINNED])
        checks.append(
            (
                "the same, with `dcgm.generations` pinned to the fleet's (a config key, not the default)",
                pinned <= SERVED_FLOOR_RATIO_TARGET * floor_share,
                f"{100 * pinned:.1f} % ({pinned / floor_share:.2f}x)",
            )
        )
    return checks


def host_map_check(ab: dict) -> Check:
    """The served groups with the host map against those before it (``make bench-host-map``)."""
    m = ab["median"]
    return (
        f"served groups with the host map at most {100 * (HOST_MAP_RATIO_TARGET - 1):.0f} % above those "
        f"before it (commit {ab['before_commit']}), one run at {ab['gpus']:,} GPUs (`make bench-host-map`)",
        m["now"] <= HOST_MAP_RATIO_TARGET * m["before"],
        f"{100 * m['now']:.1f} % against {100 * m['before']:.1f} % ({m['now'] / m['before']:.2f}x; "
        f"floor {100 * m['floor']:.1f} %)",
    )


# The rule sets of ``make bench-host-identity`` beyond the plain scrape mode, by what they set.
TUNED_VARIANTS = {
    "scrape_1m": "`rate_window_fallback: 1m` (a config key for 15 s scrapes, not the default)",
    "scrape_cpu": "`node.cpu_rate_interval: 1m` (the host CPU rate recorded every minute, a config key, "
    "not the default)",
    "scrape_tuned": "`rate_window_fallback: 1m`, `node.cpu_rate_interval: 1m` and `dcgm.generations` pinned "
    "to the fleet's",
}


def percents(shares: list[float]) -> str:
    """Each pass's share of the time, as the report prints them."""
    return ", ".join(f"{100 * v:.1f} %" for v in shares)


def host_identity_checks(run: dict) -> list[Check]:
    """The served groups with hosts named at scrape against the floor of the same run, the join's beside
    them, the same with the fallback window a 15 s scrape allows, and per scrape shard
    (``make bench-host-identity``)."""
    m, shares, floor = run["median"], run["shares"], run["median"]["floor"]

    def measured(name: str) -> str:
        return f"{100 * m[name]:.1f} % ({m[name] / floor:.2f}x; first and second pass {percents(shares[name])})"

    within = f"within {SERVED_FLOOR_RATIO_TARGET}x of the floor"
    floor_passes = f" (passes {percents(shares['floor'])})" if len(shares["floor"]) > 1 else ""
    checks = [
        (
            f"served groups with `node.host_identity: scrape` {within}, one run at {run['gpus']:,} GPUs "
            "(`make bench-host-identity`; floor: one bare selector per raw input, one CPU rate per "
            "host)",
            m["scrape"] <= SERVED_FLOOR_RATIO_TARGET * floor,
            f"{measured('scrape')} against the floor's {100 * floor:.1f} %{floor_passes}; with the host-map join "
            f"(the default) {measured('join')}",
        )
    ]
    checks += [
        (f"the same with {keys} {within}", m[name] <= SERVED_FLOOR_RATIO_TARGET * floor, measured(name))
        for name, keys in TUNED_VARIANTS.items()
        if name in m
    ]
    if "shards" in run:
        checks.append(shard_check(run["shards"]))
    return checks


def shard_check(shards: list[dict]) -> Check:
    """Each scrape shard's served groups against its own floor, the shards side by side."""

    def one(index: int, shard: dict) -> str:
        m, passes = shard["median"], shard["shares"]["shard"]
        return (
            f"shard {index} ({shard['targets']} targets, {shard['recorded_gpus']:,} GPUs recorded): "
            f"{100 * m['shard']:.1f} % against its floor's {100 * m['floor']:.1f} % "
            f"({m['shard'] / m['floor']:.2f}x; passes {percents(passes)})"
        )

    return (
        f"the same per scrape shard with `sharding.shards: {len(shards)}` (the rules a shard evaluates; "
        "the shards' Prometheus servers side by side on this machine, each scraping its half of the "
        f"fleet's targets) within {SERVED_FLOOR_RATIO_TARGET}x of each shard's floor",
        all(s["median"]["shard"] <= SERVED_FLOOR_RATIO_TARGET * s["median"]["floor"] for s in shards),
        "; ".join(one(i, s) for i, s in enumerate(shards)),
    )


def floor_rule_lines(run: dict) -> list[str]:
    """The floor's rules, each with its evaluation time in the run (``make bench-host-identity``)."""
    seconds = run["rule_seconds"].get("floor", {})
    lines = [
        f"The floor's {len(run['floor_rules'])} rules (`bench/fleet_rules.py`, `floor_rules`), one group at the",
        "served groups' interval, with each rule's last evaluation after each pass (median):",
        "",
        "| rule | expression | time |",
        "|---|---|---|",
    ]
    lines += [f"| `{rule}` | `{expr}` | {seconds.get(rule, 0.0):.3f} s |" for rule, expr in run["floor_rules"].items()]
    return [*lines, f"| all {len(run['floor_rules'])} | | {sum(seconds.values()):.2f} s |"]


def target_notes(r: dict) -> list[str]:
    """TARGET_NOTES, with the identity alternative's bullet written from the run's figures (or left out)."""
    notes = list(TARGET_NOTES)
    if "operations" in r:
        steps = dict(r["operations"])
        read, rule, joined = (
            steps[k] for k in (bench_fleet.RAW_READ_STEP, bench_fleet.RULE_STEP, bench_fleet.IDENTITY_STEP)
        )
        at = notes.index(IDENTITY_NOTE)
        notes[at : at + 1] = identity_note(joined / read, rule / read)
    else:
        notes.remove(IDENTITY_NOTE)
    at = notes.index(TWO_PACK_RUNS_NOTE)
    notes[at : at + 1] = TWO_PACK_RUNS_NOTE.splitlines() if "pack again" in r.get("phases", {}) else []
    return notes


# A bullet for runs that measured the pack twice (the fleet part before 2026-12-06).
TWO_PACK_RUNS_NOTE = (
    "- The two pack runs differ most at 10,000 GPUs, in every group alike: the first starts two\n"
    "  minutes after Prometheus does (its own CPU use higher then), most likely while its head of two\n"
    "  million new series still settles; the second is the steadier figure, measured after the floor."
)

# TARGET_NOTES' place for the bullet identity_note writes from the run's figures.
IDENTITY_NOTE = "(the identity alternative, from the figures)"


def identity_note(joined: float, rule: float) -> list[str]:
    """Why one recorded identity per GPU was left, with the run's figures for the join it needs."""
    return [
        "- Weighed against these step costs and left: one recorded identity per GPU entry (its final",
        "  labels, the host named and the tenant copied once per evaluation) joined on the UUID to each",
        "  metric. The last row of the table above is that join alone: it reads a second 10,000 series",
        f"  and builds 10,000 results, {joined:.2f}x the raw read against {rule:.2f}x for the pack's whole",
        "  rule, before the identity rule itself and the dedupe the join needs where two targets scrape",
        f"  one GPU. It may save part of a rule's cost; the join alone is above the {SERVED_FLOOR_RATIO_TARGET}x the",
        "  target allows the whole. Also left: the host identity rules at the 1m derived interval",
        "  (cheaper, but a restarted exporter's GPUs would go unmapped for up to a minute).",
    ]


# What the figures led to, and why a missed target stays missed: written by hand, kept with the code.
TARGET_NOTES = (
    "What the rule cost led to.",
    "",
    "- The host CPU series rated every CPU's idle counter of every host in each evaluation, over a",
    "  1m and a 4m window, with a resets guard on each: on 128-CPU hosts (160,000 idle counters at",
    "  10,000 GPUs) that one rule took 10.7 s per 15 s evaluation. Now one pass over the idle counters",
    "  per evaluation records each target's average of its CPUs' last rates",
    f"  (`{catalog.NODE_CPU_IDLE_RATE.name}`, irate over the fallback window), and the per-execution",
    "  rule averages that over the rate window;",
    "  a counter that stepped back shows as a rate no CPU can have, and blanks its window. That pass",
    "  is the floor's own CPU rate but for its window (the fallback's): the `host_rates` group.",
    "- The host map (host identity resolved once per scrape target, `make bench-host-map`) cost the",
    "  served groups 1.3x the rules before it while the host CPU still read every counter twice; with",
    "  the one-pass CPU rate they cost less than before the map (0.91x). Since then the per-GPU group",
    "  splits a shared GPU between its holders (share, worked and attributed power series) and the",
    "  host map matches names exactly first and records colliding short names: the row above now",
    "  misses its target. In a run of the commit before the exact-first host map against it alone,",
    "  the served groups went from 30.9 % to 40.2 % of the time (floor 15.2 %); the rest came with",
    "  the changes before it, the per-GPU sharing rules among them.",
    "- Hosts named at scrape (`node.host_identity: scrape`, `make bench-host-identity`) take the",
    "  host-map join out of every per-GPU and per-host rule. Read rule by rule (Prometheus' own",
    "  per-rule evaluation time), the largest single rule is then the per-CPU idle rate",
    f"  (`{catalog.NODE_CPU_IDLE_RATE.name}`, a third to a half of the served groups' time): it",
    "  reads every CPU's idle counter, as the floor's one CPU rate per host does. Until 2026-12-04 the",
    "  floor counted those counters instead of rating them (as ad-hoc instant queries at 10,000 GPUs,",
    "  1.19 s against 1.51 s for the rate). Against the floor the issue defined, the served groups",
    "  with hosts named at scrape meet the target on one Prometheus in this run, one of its two passes",
    "  just above it; the run before (against the count) gave 2.19x, its rules 2 to 5 times slower",
    "  rule by rule on a busier machine: read one run's ratio as one sample of a wide spread.",
    "  `node.cpu_rate_interval: 1m` records the rate in a group of its own every minute (`rate()` over",
    "  the minute or the fallback window): a quarter of the evaluations, the host CPU a minute or two",
    "  later. Per scrape shard the ratio is higher: the two servers share these 2 cores, so each",
    "  one's groups wait for the other's, and their passes differ most.",
    "- Against the floor the served groups have cost more than the target allows in every run, by",
    "  summed group time and by Prometheus' own CPU alike, from about 1.6 to over 3 times as much (the",
    "  ratios move widely from run to run and phase to phase on this shared machine): the",
    "  three served groups may run at once, and on these 2 cores one's time then includes waiting for",
    "  the others, where the floor is one group. The per-GPU group is why. The table of one per-GPU",
    "  rule taken apart shows each step over 10,000 series (the other generation's name, the join to",
    "  the host map, the tenant copy, the `max by` that fixes the label set) costing a sizeable share",
    "  of the raw read itself whatever work it does, and the whole rule two to three times the read:",
    "  Prometheus 2.42 builds each step's 10,000 results anew. The",
    "  floor reads and records. Each step is there for a real install: the generation fallback for",
    "  fleets mid-upgrade (4.8 to 4.9 renamed the fields), the join for the host identity of issue",
    "  13, the tenant copy for exporters behind a ServiceMonitor, the `max by` for a label set that",
    "  stays the same across exporter releases and pod restarts. A fleet that knows its exporter",
    "  generation pins it (`dcgm.generations`, the pinned row); the rest stays in the default, and the",
    "  target stays missed with it.",
    IDENTITY_NOTE,
    TWO_PACK_RUNS_NOTE,
    "- The groups that only read recorded series (throttling inputs, rollups, cost, alerts) run at",
    "  `derived_rule_interval`, 1m by default, as their `for` durations and hour-long dashboards allow.",
    "- The served per-GPU series pay for being right on every install: each raw metric converted to",
    "  base units, fallbacks read (GR_ENGINE_ACTIVE beside GPU_UTIL, FB_USED and FB_RESERVED again for",
    "  the usable memory), every exporter generation's name tried (`dcgm.generations` pins the ones a",
    "  fleet runs), each GPU joined once to the host map and its label set fixed with one `max by`.",
    "- Below 10 % at 10,000 GPUs on these 2 cores, shared with the exporter and the scrapes, takes",
    "  `rule_interval: 30s` (half the evaluations of the served groups; the endpoint still answers at",
    "  a 15 s step, each value held for two steps) or a Prometheus per part of the fleet",
    "  (docs/scaling.md).",
)


def plot(fleet: list[tuple[int, dict]]) -> None:
    """docs/benchmarks-fetch.png: each fetch path's median latency against fleet size."""
    import matplotlib  # only `make bench` needs it (the bench extra)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [gpus for gpus, _ in fleet]
    window = fleet[-1][1].get("fetch_window_s", OLD_FETCH_WINDOW_S)
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    for path, style in (("raw", "o-"), ("recorded", "s-"), ("floor", "^--")):
        ax.plot(sizes, [r[path][0] * 1000 for _, r in fleet], style, label=path)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="fleet size (GPUs)",
        ylabel="median fetch latency (ms)",
        title=f"12 series of one 8-GPU execution, {window / 3600:g} h at 15 s",
    )
    ax.set_xticks(sizes, [f"{s:,}" for s in sizes])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(PLOT, metadata={"Software": None})
    plt.close(fig)


ARCHIVE_PER_DAY = 10_000  # the fleet: executions ended per day
ARCHIVE_MINUTES_TARGET = 5.0  # "a few minutes a day" for them


def archive_section(archive: dict | None) -> list[str]:
    """``make bench-archive``'s figures (bench/archive.py): the archiver's time per execution and the archive's
    size, judged at 10,000 executions a day."""
    if archive is None:
        return []
    batched = sorted(archive["batched_seconds"])[len(archive["batched_seconds"]) // 2]
    each = batched / max(archive["archived"], 1)
    single = archive["per_execution_seconds"] / max(archive["per_execution_records"], 1)
    minutes, single_minutes = each * ARCHIVE_PER_DAY / 60, single * ARCHIVE_PER_DAY / 60
    size = archive["sqlite_bytes"] / max(archive["archived"], 1)
    verdict = "met" if minutes <= ARCHIVE_MINUTES_TARGET else "not met"
    lines = [
        "",
        "## Archive",
        "",
        f"`make bench-archive` (bench/archive.py): a real Prometheus holding `bench.report`'s recorded series of "
        f"{archive['executions']:,} executions of 2 GPUs, 30 minutes each, over 7 days; load average "
        f"{archive['load_average']} at the end. The floor is bare queries reading every recorded sample of the "
        "window once (one per series name, at once); the batched archiver reads the documents "
        f"{archive['batch']} executions at a time (docs/archive.md); the per-execution path is the report's own "
        "`execution_summary` per execution, over the last day only. Each pass writes a new SQLite file.",
        "",
        "| | measured |",
        "|---|---|",
        f"| floor | {archive['floor_seconds']:.2f} s (median of {archive['runs']}) |",
        f"| batched archive | {archive['archived']:,} records in {batched:.1f} s (median of {archive['runs']}): "
        f"{each * 1000:.0f} ms per execution, {batched / archive['floor_seconds']:.0f}x the floor |",
        f"| per-execution path | {archive['per_execution_records']:,} records in {archive['per_execution_seconds']:.1f}"
        f" s: {single * 1000:.0f} ms per execution |",
        f"| {ARCHIVE_PER_DAY:,} executions a day | batched: {minutes:.1f} minutes of archiving a day; "
        f"per execution: {single_minutes:.0f} minutes |",
        f"| size | {size / 1000:.1f} kB per execution in the SQLite file: {size * ARCHIVE_PER_DAY / 1e6:.0f} MB a day, "
        f"{size * ARCHIVE_PER_DAY * 365 / 1e9:.0f} GB a year at {ARCHIVE_PER_DAY:,} a day |",
        "",
        f"Target: {ARCHIVE_PER_DAY:,} executions a day archived within {ARCHIVE_MINUTES_TARGET:.0f} minutes a day on "
        f"this machine: {verdict} ({minutes:.1f} minutes).",
    ]
    if "postgresql_seconds" in archive:
        lines.insert(-2, f"| batched into PostgreSQL | {archive['postgresql_seconds']:.1f} s, one pass |")
    return lines
