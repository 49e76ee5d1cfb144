"""``make bench-rules``: what each per-GPU rule's expression costs, against a bare selector, now and before.

A fleet of 10,000 GPUs on hosts of 32 CPUs with dcgm-exporter's profiling fields (issue 39's lighter shape,
``bench.fleet.FEW_CPUS``), scraped live by one Prometheus that evaluates the served groups of the built-in
defaults, so every recorded series a per-GPU rule reads is there. After the warm-up, every per-GPU rule's
expression is asked as an instant query at the per-GPU group's newest evaluation (where ``timestamp(...) ==
time()`` holds, as in the rule): the built-in defaults' now, the same rule's expression at ``BEFORE`` where it
differs, the config doctor writes for this fleet (``DOCTOR_LIKE``), and the floor, one bare selector of a raw
metric (what each of the floor's per-GPU rules reads). ``ROUNDS`` rounds, each in a shuffled order, so drift
and the scrapes fall on every expression alike; Prometheus' own evaluation time of each query
(``stats=all``). A rule costs its query and the writing of its samples; the query is what a rewrite of the
expression changes, and what this measures. Medians, with each set's sum against the floor's median.

Run alone as ``python -m bench.rule_costs`` (about 10 minutes): it adds its figures to docs/benchmarks.json
under ``rule_costs`` and rewrites the report. Not part of ``make bench``.
"""

from __future__ import annotations

import hashlib
import json
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import yaml
from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.promql import labelled, render
from gpu_execution_pack.rules.files import rule_files
from gpu_execution_pack.rules.recording import EXECUTION_GPU_GROUP
from gpu_execution_pack.scenario.oracle import raw_for

from bench.common import REPO, entry_parser, log, scaled
from bench.document import add_figures
from bench.exporter import FleetExporter, scrape_config
from bench.fleet import FEW_CPUS, GENERATION, FleetExposition, fleet_scenario
from bench.host_identity import AT_SCRAPE
from bench.shapes import served
from harness.prometheus import Prometheus, free_port

GPUS, EXECUTIONS = scaled((10000, 1000), (64, 8))
ROUNDS = scaled(30, 3)
WARMUP_S = scaled(100, 30)
# The last commit before the per-GPU rules' rewrite of 2026-12-06 (memory capacity from the recorded device
# memory use, attributed power per whole GPU or instance): "before" is the defaults' rules file as committed then.
BEFORE = "207b1bd"
# What doctor --write-config wrote for this fleet shape in `make bench-shapes` (docs/benchmarks.json).
DOCTOR_LIKE = AT_SCRAPE | {"dcgm": {"generations": [GENERATION]}, "vendors": ["nvidia"], "rate_window_fallback": "1m"}
# The per-GPU group's file, as `generate` writes it.
GPU_RULES_FILE = "execution-gpu.rules.yml"


def per_gpu_rules(text: str) -> dict[str, str]:
    """The per-GPU group's rules of a rules file's text: expression by recorded name."""
    groups = yaml.safe_load(text)["groups"]
    return {r["record"]: r["expr"] for g in groups if g["name"] == EXECUTION_GPU_GROUP for r in g["rules"]}


def current_rule_sets() -> dict[str, dict[str, str]]:
    """The per-GPU rules the pack generates now: the built-in defaults', and doctor's config's."""
    doctor = config_from_mapping(DOCTOR_LIKE, "bench.rule_costs")
    return {
        name: per_gpu_rules(rule_files(cfg, Path("rules"))[Path("rules", GPU_RULES_FILE)])
        for name, cfg in (("defaults", Config()), ("doctor", doctor))
    }


def rule_sets() -> dict[str, dict[str, str]]:
    """The per-GPU rules of each set measured: the current ones, and the defaults' as committed at BEFORE."""
    committed = subprocess.run(
        ["git", "show", f"{BEFORE}:rules/{GPU_RULES_FILE}"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    return current_rule_sets() | {"before": per_gpu_rules(committed)}


def digests(sets: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """A short digest of each expression measured: the report's test tells figures of other rules by them."""
    return {
        name: {record: hashlib.sha256(expr.encode()).hexdigest()[:12] for record, expr in rules.items()}
        for name, rules in sets.items()
    }


def floor_expr() -> str:
    """The floor's read: one bare selector of the fleet's raw utilisation, as each floor rule is."""
    raw = raw_for("gpu_util", GENERATION)
    assert raw is not None
    return render(raw.select(labelled(catalog.EXECUTION_LABEL)))


def newest_evaluation(server: Prometheus, wait_s: float = 120) -> float:
    """The time of the per-GPU group's newest evaluation: its utilisation's newest sample (the first waits for
    the host maps, which the per-GPU rules join, to have run)."""
    deadline = time.monotonic() + wait_s
    while not (rows := server.query(f"max(timestamp({catalog.GPU_UTILIZATION.name}))", time.time())):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {catalog.GPU_UTILIZATION.name} recorded after {wait_s:.0f} s")
        time.sleep(5)
    return float(rows[0]["value"][1])


def measure() -> dict:
    """Each rule set's per-GPU rules and the floor, ROUNDS times each, on one live fleet."""
    sets = rule_sets()
    asked = {("floor", ""): floor_expr()}
    for name, rules in sets.items():
        for record, expr in rules.items():
            # "before" where the defaults have the rule still and it changed (unchanged: measured as the defaults; a
            # rule the defaults no longer record in the group has nothing to be compared with).
            if name != "before" or sets["defaults"].get(record, expr) != expr:
                asked[(name, record)] = expr
    shares = served(Config())
    scenario = fleet_scenario(GPUS, EXECUTIONS, minutes=120, cpus=FEW_CPUS.cpus)
    fleet = FleetExposition(scenario, int(time.time()), config_from_mapping(AT_SCRAPE, "bench"), FEW_CPUS)
    seconds: dict[tuple[str, str], list[float]] = {key: [] for key in asked}
    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp) / "served.rules.yml"
        rules.write_text(json.dumps(shares))
        port = free_port()
        with FleetExporter(fleet, port):
            server = Prometheus(Path(tmp) / "prometheus")
            server.port = free_port()
            server.config_text = scrape_config(fleet, port, server.port, str(rules), host_label=True)
            server.start()
            try:
                log(f"{GPUS} GPUs of {FEW_CPUS.name} live: {WARMUP_S} s to warm up")
                time.sleep(WARMUP_S)
                log(f"{len(asked)} expressions, {ROUNDS} rounds")
                order = list(asked)
                for _ in range(ROUNDS):
                    at = newest_evaluation(server)
                    random.shuffle(order)
                    for key in order:
                        # Counted, so no series crosses the wire.
                        seconds[key].append(server.eval_seconds(f"count({asked[key]})", at))
            finally:
                server.stop()
    by_set: dict[str, dict[str, float]] = {}
    for (name, record), values in seconds.items():
        by_set.setdefault(name, {})[record] = statistics.median(values)
    return {
        "gpus": GPUS,
        "shape": FEW_CPUS.name,
        "rounds": ROUNDS,
        "before": BEFORE,
        "doctor_config": DOCTOR_LIKE,
        "floor": by_set.pop("floor")[""],
        "floor_expr": asked[("floor", "")],
        "median_seconds": by_set,
        "digests": digests({name: sets[name] for name in ("defaults", "doctor")}),
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.rule_costs``: measure, put the figures in docs/benchmarks.json, rewrite the report."""
    entry_parser("bench.rule_costs", __doc__).parse_args(argv)
    figures = add_figures("rule_costs", measure())
    now = sum(figures["median_seconds"]["defaults"].values())
    log(f"floor {figures['floor']:.4f} s; the defaults' per-GPU expressions {now:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
